package numaplace

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
)

// leftOver reports whether the claim is one an earlier attempt to schedule
// the unbound pod allocated and reserved and did not bind (numaplace-scheduler
// died, or lost the API server, between Bind's claim writes and the
// Binding): allocated with numaplace's devices, with the
// delete-protection finalizer the scheduler puts on the claims it
// allocates, and reserved for this pod alone. Only numaplace-scheduler
// allocates numaplace's claims for the pods it schedules, so no other
// writer leaves this state.
func leftOver(pod *v1.Pod, claim *resourceapi.ResourceClaim) bool {
	return pod.Spec.NodeName == "" && claim.Status.Allocation != nil && usesDriver(claim.Status.Allocation) &&
		slices.Contains(claim.Finalizers, resourceapi.Finalizer) &&
		len(claim.Status.ReservedFor) == 1 && claim.Status.ReservedFor[0].UID == pod.UID &&
		claim.DeletionTimestamp == nil
}

// releaseLeftovers deallocates the pod's claims that an earlier attempt
// left allocated (leftOver), as DynamicResources' PostFilter deallocates a
// claim reserved for the pod alone: status.allocation, reservedFor and
// devices cleared by one status update each, the result put into the
// scheduler's claim tracker at once, so that this cycle decides the pod
// afresh (the finalizer stays, and is reused when the claim is allocated
// again). The GPUs the cache still counts for such a claim (see
// [ClaimHolderPrefix]) are freed when the claim informer delivers the
// update; meanwhile the decision avoids them. It returns how many claims
// it deallocated.
func (pl *Plugin) releaseLeftovers(ctx context.Context, pod *v1.Pod) (int, error) {
	if pl.dra == nil || pod.Spec.NodeName != "" || len(pod.Spec.ResourceClaims) == 0 {
		return 0, nil
	}
	n := 0
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue // readDRA reports it
		}
		claim, err := pl.dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil || !leftOver(pod, claim) {
			continue
		}
		c := claim.DeepCopy()
		c.Status.Allocation, c.Status.ReservedFor, c.Status.Devices = nil, nil, nil
		got, err := pl.handle.ClientSet().ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
		if err != nil {
			return n, fmt.Errorf("deallocating ResourceClaim %s, left allocated for pod %s by an attempt that did not bind it: %w",
				klog.KObj(claim), klog.KObj(pod), err)
		}
		if err := pl.dra.ResourceClaims().AssumeClaimAfterAPICall(got); err != nil {
			pl.logger.V(5).Info("Claim not stored in the assume cache", "claim", klog.KObj(got), "err", err)
		}
		pl.logger.Info("Deallocated a ResourceClaim left allocated by an attempt that did not bind the pod", "pod", klog.KObj(pod),
			"claim", klog.KObj(claim), "devices", devicesOf(claim.Status.Allocation))
		n++
	}
	return n, nil
}
