package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDRAControlPlaneWithoutDriver checks the DRA cluster's control plane
// and kubelet with no driver on the node: a ResourceSlice the test
// publishes itself for a driver that never registers, a
// ResourceClaimTemplate for 2 "gpu" and 1 "nic" devices with
// matchAttribute resource.kubernetes.io/numaNode, and a pod for the
// default scheduler. The resourceclaim controller creates the pod's claim,
// kube-scheduler's built-in allocator allocates it the aligned devices
// (NUMA node 1's, past node 0's GPU listed first) and binds the pod, and
// the kubelet's DRA manager tries to prepare it (the driver is not
// registered, which it says on the pod). Deleting the pod deletes its
// claim (the garbage collector).
func TestDRAControlPlaneWithoutDriver(t *testing.T) {
	c := startDRACluster(t, draClusterOptions{})
	client := c.client
	ctx := context.Background()
	const driver = "stub.numaplace.test"
	_, err := client.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: `device.driver == "` + driver + `"`}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	dev := func(name, kind string, numa int64) resourcev1.Device {
		return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"kind":                            {StringValue: &kind},
			"resource.kubernetes.io/numaNode": {IntValue: &numa},
		}}
	}
	node := kubeletNode
	_, err = client.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "stub-" + kubeletNode},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: &node,
			Pool: resourcev1.ResourcePool{Name: kubeletNode, Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{dev("gpu-a", "gpu", 0), dev("gpu-b", "gpu", 1), dev("gpu-c", "gpu", 1),
				dev("nic-a", "nic", 0), dev("nic-b", "nic", 1)}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	kind := func(k string) string { return `device.attributes["` + driver + `"].kind == "` + k + `"` }
	createTemplate(t, client, "aligned", resourcev1.DeviceClaim{
		Requests:    []resourcev1.DeviceRequest{exactly("gpu", driver, 2, kind("gpu")), exactly("nic", driver, 1, kind("nic"))},
		Constraints: []resourcev1.DeviceConstraint{matchAttribute("resource.kubernetes.io/numaNode", "gpu", "nic")},
	})
	_, err = client.CoreV1().Pods("default").Create(ctx, draPod("stub", fromTemplate("devices", "aligned")), metav1.CreateOptions{})
	require.NoError(t, err)
	claim := podClaim(t, client, "stub", "devices")
	c.stage("the pod's claim created from its template and allocated")
	require.Equal(t, map[string][]string{"gpu": {"gpu-b", "gpu-c"}, "nic": {"nic-b"}}, allocated(claim, driver),
		"claim %s's allocation", claim.Name)
	require.Len(t, claim.OwnerReferences, 1)
	require.Equal(t, "stub", claim.OwnerReferences[0].Name, "the generated claim's owner")
	var pod *corev1.Pod
	require.Eventually(t, func() bool {
		pod, err = client.CoreV1().Pods("default").Get(ctx, "stub", metav1.GetOptions{})
		return err == nil && pod.Spec.NodeName == kubeletNode
	}, 60*time.Second, 100*time.Millisecond, "the default scheduler did not bind the pod: %s", describe(client, "stub"))
	msg := waitEvent(t, client, "stub", "FailedPrepareDynamicResources", "DRA driver "+driver+" is not registered")
	t.Logf("claim %s: %v; pod stub on %s; the kubelet: %s", claim.Name, allocated(claim, driver), pod.Spec.NodeName, msg)
	require.Equal(t, corev1.PodPending, pod.Status.Phase)
	c.stage("the kubelet tried to prepare it")

	deletePod(t, client, "stub", 0)
	waitGone(t, "claim "+claim.Name, func() error {
		_, err := client.ResourceV1().ResourceClaims("default").Get(ctx, claim.Name, metav1.GetOptions{})
		return err
	})
	c.stage("pod deleted, its claim deleted")
}
