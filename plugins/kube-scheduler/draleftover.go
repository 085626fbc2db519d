package numaplace

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// left allocated (leftOver), and deletes its extended resource claim left
// by one (releaseExtendedLeftover), as DynamicResources' PostFilter deallocates a
// claim reserved for the pod alone: status.allocation, reservedFor and
// devices cleared by one status update each, the result put into the
// scheduler's claim tracker at once, so that this cycle decides the pod
// afresh (the finalizer stays, and is reused when the claim is allocated
// again). The GPUs the cache still counts for such a claim (see
// [ClaimHolderPrefix]) are freed when the claim informer delivers the
// update; meanwhile the decision avoids them. It returns how many claims
// it deallocated.
func (pl *Plugin) releaseLeftovers(ctx context.Context, pod *v1.Pod) (int, error) {
	if pl.dra == nil || pod.Spec.NodeName != "" {
		return 0, nil
	}
	n := 0
	if released, err := pl.releaseExtendedLeftover(ctx, pod); err != nil {
		return 0, err
	} else if released {
		n++
	}
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

// ownedBy reports whether the pod is the claim's controller, as the
// extended resource claim a scheduler makes for a pod is.
func ownedBy(claim *resourceapi.ResourceClaim, pod *v1.Pod) bool {
	ref := metav1.GetControllerOf(claim)
	return ref != nil && ref.UID == pod.UID
}

// releaseExtendedLeftover deletes the extended resource claim that the
// unbound pod's status.extendedResourceClaimStatus names when the pod
// owns it: an earlier attempt made it (createExtended: the claim, its
// allocation, then the pod's status) and did not bind the pod. As
// DynamicResources deletes such a claim, so that a new one is made for
// this attempt's decision, its finalizer is removed and it is deleted (the
// status names the new claim once it is made). A claim already gone, or
// being deleted, needs nothing; one the pod does not own is left alone
// (readExtended refuses the pod, naming it). It reports whether it deleted
// one.
func (pl *Plugin) releaseExtendedLeftover(ctx context.Context, pod *v1.Pod) (bool, error) {
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil || pod.Spec.NodeName != "" {
		return false, nil
	}
	claim, err := pl.dra.ResourceClaims().Get(pod.Namespace, st.ResourceClaimName)
	if err != nil || claim.DeletionTimestamp != nil || !ownedBy(claim, pod) {
		return false, nil
	}
	client := pl.handle.ClientSet().ResourceV1().ResourceClaims(pod.Namespace)
	c, err := client.Get(ctx, claim.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading the extended resource claim %s left by an earlier attempt to schedule pod %s: %w",
			klog.KObj(claim), klog.KObj(pod), err)
	case c.UID != claim.UID || c.DeletionTimestamp != nil:
		return false, nil
	}
	if i := slices.Index(c.Finalizers, resourceapi.Finalizer); i >= 0 {
		c.Finalizers = slices.Delete(c.Finalizers, i, i+1)
		if c, err = client.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			return false, fmt.Errorf("releasing the extended resource claim %s left by an earlier attempt to schedule pod %s: %w",
				klog.KObj(claim), klog.KObj(pod), err)
		}
	}
	err = client.Delete(ctx, c.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &c.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("deleting the extended resource claim %s left by an earlier attempt to schedule pod %s: %w",
			klog.KObj(claim), klog.KObj(pod), err)
	}
	pl.logger.Info("Deleted an extended resource claim left by an attempt that did not bind the pod", "pod", klog.KObj(pod),
		"claim", klog.KObj(claim), "devices", devicesOf(claim.Status.Allocation))
	return true, nil
}
