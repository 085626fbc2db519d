package numaplace

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/adapters/kube"
)

// extendedClaim is the claim numaplace makes for the pod's containers'
// aliyun.com/gpu on a node that serves it through DRA (the
// aliyun-gpu.numaplace.io class's extendedResourceName, and no device
// plugin advertising it there), as DynamicResources makes it (KEP-5004):
// owned by the pod, named <pod>-extended-resources-<random>, annotated
// resource.kubernetes.io/extended-resource-claim, one request per
// container (container-<index>-request-<index of the resource among the
// container's sorted requests>), with the pod's
// status.extendedResourceClaimStatus mapping containers to requests.
type extendedClaim struct {
	claim    *resourceapi.ResourceClaim // in memory: a temporary UID, the name "<extended-resources>"
	mappings []v1.ContainerExtendedResourceRequest
}

// readExtended returns the claim to make for the pod's aliyun.com/gpu on
// DRA nodes: nil when no DeviceClass maps aliyun.com/gpu or the pod asks
// for none; an error (errDRA) for what numaplace does not do: a class that
// is not numaplace's, init containers asking for it, other extended
// resources served by DRA, a status naming a claim the pod does not own.
func (pl *Plugin) readExtended(pod *v1.Pod) (*extendedClaim, error) {
	if pl.dra == nil {
		return nil, nil
	}
	resolver := pl.dra.DeviceClassResolver()
	if resolver == nil {
		return nil, nil
	}
	class := resolver.GetDeviceClass(kube.ResourceAliyunGPU)
	if class == nil {
		return nil, nil
	}
	asks := false
	for i := range pod.Spec.Containers {
		if q, ok := pod.Spec.Containers[i].Resources.Requests[kube.ResourceAliyunGPU]; ok && !q.IsZero() {
			asks = true
		}
	}
	if !asks {
		return nil, nil
	}
	if o, gpu := numaplaceClass(class.Name); !o || !gpu {
		return nil, fmt.Errorf("%w: DeviceClass %s serves %s through DRA: numaplace decides only the classes of deploy/dra.yaml",
			errDRA, class.Name, kube.ResourceAliyunGPU)
	}
	for i := range pod.Spec.InitContainers {
		if q, ok := pod.Spec.InitContainers[i].Resources.Requests[kube.ResourceAliyunGPU]; ok && !q.IsZero() {
			return nil, fmt.Errorf("%w: init container %s asks for %s, which DRA serves on some nodes: not supported by numaplace",
				errDRA, pod.Spec.InitContainers[i].Name, kube.ResourceAliyunGPU)
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		// Left by an earlier attempt that did not bind the pod: deleted
		// by releaseLeftovers when the pod owns it (or gone); a new claim
		// is made, and the status names it at Bind.
		if c, err := pl.dra.ResourceClaims().Get(pod.Namespace, st.ResourceClaimName); err == nil && c.DeletionTimestamp == nil && !ownedBy(c, pod) {
			return nil, fmt.Errorf("%w: the pod's status names the extended resource claim %s, which the pod does not own",
				errDRA, klog.KObj(c))
		}
	}
	e := &extendedClaim{claim: &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace,
			// DynamicResources' in-memory name: the claim tracker takes
			// a pending allocation of it without looking it up.
			Name:         "<extended-resources>",
			UID:          types.UID(uuid.NewUUID()),
			GenerateName: pod.Name + "-extended-resources-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
				Controller: ptr.To(true)}},
			Annotations: map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"},
		},
	}}
	off := len(pod.Spec.InitContainers)
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		keys := make([]string, 0, len(c.Resources.Requests))
		for k, q := range c.Resources.Requests {
			keys = append(keys, string(k))
			if k != kube.ResourceAliyunGPU && k != v1.ResourceCPU && k != v1.ResourceMemory && !q.IsZero() &&
				resolver.GetDeviceClass(k) != nil {
				return nil, fmt.Errorf("%w: container %s asks for %s, which DRA serves: numaplace serves only %s so",
					errDRA, c.Name, k, kube.ResourceAliyunGPU)
			}
		}
		q, ok := c.Resources.Requests[kube.ResourceAliyunGPU]
		n, isInt := q.AsInt64()
		if !ok || !isInt || n <= 0 {
			continue
		}
		slices.Sort(keys)
		name := fmt.Sprintf("container-%d-request-%d", off+i, slices.Index(keys, string(kube.ResourceAliyunGPU)))
		e.claim.Spec.Devices.Requests = append(e.claim.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: name,
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: n}})
		e.mappings = append(e.mappings, v1.ContainerExtendedResourceRequest{ContainerName: c.Name,
			ResourceName: string(kube.ResourceAliyunGPU), RequestName: name})
	}
	slices.SortFunc(e.claim.Spec.Devices.Requests, func(a, b resourceapi.DeviceRequest) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return e, nil
}

// extendedOn reports whether the node serves the pod's aliyun.com/gpu
// through DRA: no device plugin advertises it there.
func extendedOn(d *draPod, node *v1.Node) bool {
	if d == nil || d.extended == nil {
		return false
	}
	q, ok := node.Status.Allocatable[kube.ResourceAliyunGPU]
	return !ok || q.IsZero()
}

// createExtended creates the pod's extended resource claim with its
// allocation, reserved for the pod, and records it in the pod's
// status.extendedResourceClaimStatus: three writes (create, status, pod
// status), as DynamicResources makes them.
func (pl *Plugin) createExtended(ctx context.Context, r *draReserved, pod *v1.Pod) error {
	client := pl.handle.ClientSet()
	c := r.ext.DeepCopy()
	alloc := c.Status.Allocation
	c.Status = resourceapi.ResourceClaimStatus{}
	c.UID, c.Name, c.ResourceVersion = "", "", ""
	if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
		c.Finalizers = append(c.Finalizers, resourceapi.Finalizer)
	}
	created, err := client.ResourceV1().ResourceClaims(pod.Namespace).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the extended resource claim of pod %s: %w", podKey(pod), err)
	}
	r.extCreated = created
	created = created.DeepCopy()
	created.Status.Allocation = alloc
	created.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	updated, err := client.ResourceV1().ResourceClaims(pod.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("writing the allocation of claim %s for pod %s: %w", klog.KObj(created), podKey(pod), err)
	}
	r.extCreated = updated
	if err := pl.dra.ResourceClaims().AssumeClaimAfterAPICall(updated); err != nil {
		pl.logger.V(5).Info("Extended resource claim not yet in the assume cache", "claim", klog.KObj(updated), "err", err)
	}
	st := pod.Status.DeepCopy()
	st.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{RequestMappings: r.extMappings, ResourceClaimName: updated.Name}
	if err := schedutil.PatchPodStatus(ctx, client, pod.Name, pod.Namespace, &pod.Status, st); err != nil {
		return fmt.Errorf("recording the extended resource claim %s in pod %s's status: %w", updated.Name, podKey(pod), err)
	}
	return nil
}

// deleteExtended takes back an extended resource claim created for a pod
// that was not bound: its finalizer removed, then deleted.
func (pl *Plugin) deleteExtended(ctx context.Context, r *draReserved) {
	if r.extCreated == nil {
		return
	}
	client := pl.handle.ClientSet().ResourceV1().ResourceClaims(r.extCreated.Namespace)
	c, err := client.Get(ctx, r.extCreated.Name, metav1.GetOptions{})
	if err == nil && c.UID == r.extCreated.UID {
		c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == resourceapi.Finalizer })
		if _, err = client.Update(ctx, c, metav1.UpdateOptions{}); err == nil {
			err = client.Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &c.UID}})
		}
	}
	if err != nil {
		pl.logger.Error(err, "Deleting the extended resource claim of a pod not bound", "claim", klog.KObj(r.extCreated))
	}
	r.extCreated = nil
}
