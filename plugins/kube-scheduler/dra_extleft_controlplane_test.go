package numaplace_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// TestControlPlaneDRAExtendedLeftOverRecovered: the seed's pod spec
// (aliyun.com/gpu through deploy/dra.yaml's extendedResourceName) whose
// extended resource claim an earlier attempt made, allocated (GPUs 0 and
// 4, on two NUMA nodes) and recorded in the pod's status, but did not bind
// (the scheduler stopped before the Binding): a scheduler started then
// deletes that claim, makes a new one for its decision, binds the pod and
// records the new claim in the pod's status.
func TestControlPlaneDRAExtendedLeftOverRecovered(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	c.draNode("h", "dgx-h100")
	c.create(pod("seed", "SingleNUMANode", 8, 2))
	p := c.get("seed")
	ctx := context.Background()
	claims := c.client.ResourceV1().ResourceClaims("default")
	old, err := claims.Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "seed-extended-resources-old", Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}},
			Annotations:     map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
			Finalizers:      []string{resourceapi.Finalizer}},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "container-0-request-0", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: numaplace.ClassAliyunGPU,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	old.Status.Allocation = &resourceapi.AllocationResult{}
	for _, dev := range []string{"gpu-0", "gpu-4"} {
		old.Status.Allocation.Devices.Results = append(old.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "container-0-request-0", Driver: numaplace.DRADriver, Pool: "h", Device: dev})
	}
	old.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
	old, err = claims.UpdateStatus(ctx, old, metav1.UpdateOptions{})
	require.NoError(t, err)
	p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: old.Name,
		RequestMappings: []v1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: "aliyun.com/gpu", RequestName: "container-0-request-0"}}}
	_, err = c.client.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)

	c.kubelet()
	c.start(nil)
	p = c.waitBound("seed")
	d := decision(t, p)
	require.Len(t, d.GPUs, 2)
	require.Len(t, gpuNUMANodes(t, "dgx-h100", gpuIDs(d)), 1, "the decision spans NUMA nodes: %v", gpuIDs(d))
	p = c.waitFor("seed", "a new extended resource claim in its status", func(p *v1.Pod) bool {
		return p.Status.ExtendedResourceClaimStatus != nil && p.Status.ExtendedResourceClaimStatus.ResourceClaimName != old.Name
	})
	require.Equal(t, gpuDevices(gpuIDs(d)), c.allocated(p.Status.ExtendedResourceClaimStatus.ResourceClaimName, p))
	require.Eventually(t, func() bool {
		_, err := claims.Get(ctx, old.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond, "the left-over claim %s is not deleted", old.Name)
	c.requireNoDoubleHandout()
}
