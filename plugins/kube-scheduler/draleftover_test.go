package numaplace

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLeftOver: only a claim allocated to numaplace's devices, with the
// delete-protection finalizer, reserved for the unbound pod alone and not
// being deleted is taken for one an earlier attempt left.
func TestLeftOver(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a", UID: "uid-a"}}
	claim := func() *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c", Finalizers: []string{resourceapi.Finalizer}},
			Status: resourceapi.ResourceClaimStatus{
				Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
					{Request: "gpus", Driver: DRADriver, Pool: "h", Device: "gpu-0"}}}},
				ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "a", UID: "uid-a"}},
			}}
	}
	require.True(t, leftOver(pod, claim()))

	bound := pod.DeepCopy()
	bound.Spec.NodeName = "h"
	require.False(t, leftOver(bound, claim()), "the pod is bound: the claim is its allocation")
	c := claim()
	c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "b", UID: "uid-b"})
	require.False(t, leftOver(pod, c), "shared with another pod")
	c = claim()
	c.Status.ReservedFor[0].UID = "uid-other"
	require.False(t, leftOver(pod, c), "reserved for another pod of the same name")
	c = claim()
	c.Finalizers = nil
	require.False(t, leftOver(pod, c), "no delete-protection finalizer: not written by a scheduler")
	c = claim()
	c.Status.Allocation.Devices.Results[0].Driver = "gpu.example.com"
	require.False(t, leftOver(pod, c), "another driver's devices")
	c = claim()
	c.Status.Allocation = nil
	require.False(t, leftOver(pod, c))
	c = claim()
	c.DeletionTimestamp = &metav1.Time{}
	require.False(t, leftOver(pod, c))
}
