package kubelet

import (
	"errors"
	"fmt"

	"github.com/numaplace/numaplace/allocator"
)

// ErrResizeRefused is the category of in-place resizes the node refuses:
// the pod runs on the shared pool or is not admitted, the new size cannot
// be had under the pod's policy on the NUMA nodes it may use, or it would
// leave the shared pool without CPUs while shared-pool pods run. Nothing
// changes.
var ErrResizeRefused = errors.New("in-place resize refused")

// ResizeError says why an in-place resize was refused. It unwraps to
// [ErrResizeRefused] and, when there is one, to its cause (such as the
// allocator's *allocator.PlacementError, or allocator.ErrUnknownID).
type ResizeError struct {
	// Pod is the pod's key, namespace/name.
	Pod string
	// From and To are the CPU counts: what the pod holds and what was asked.
	From, To int
	// Reason is the explanation in words.
	Reason string
	// Cause is the underlying error, or nil.
	Cause error
}

// Error implements error: "in-place resize refused: pod NS/NAME from N to
// M CPUs: reason".
func (e *ResizeError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s: pod %s from %d to %d CPUs: %s", ErrResizeRefused, e.Pod, e.From, e.To, e.Reason)
}

// Unwrap returns [ErrResizeRefused] and the cause.
func (e *ResizeError) Unwrap() []error {
	if e == nil {
		return nil
	}
	if e.Cause != nil {
		return []error{ErrResizeRefused, e.Cause}
	}
	return []error{ErrResizeRefused}
}

// Resize grows or shrinks the exclusive CPUs of the admitted pod with the
// given key (namespace/name) to cpus, in place, under the pod's policy
// (allocator.State.Resize: growing keeps every CPU the pod holds and adds
// free ones, shrinking keeps the rest; its GPUs, devices and memory do not
// move; SingleNUMANode stays on its NUMA node, Restricted and BestEffort
// end on the width a fresh request of the new size would have). It returns
// the pod's admission as it now is, whose Allocation gives the new
// decision (kube.NewDecision). A resize to the size the pod holds changes
// nothing and returns its admission.
//
// It is refused with a *[ResizeError] (nothing changes) when the pod is not
// admitted, runs on the shared pool (its CPUs follow the pool), cpus is
// below 1, the allocator refuses (its reason, such as the pod's NUMA node
// having no free CPU left, is in the error), or growing would leave the
// shared pool without CPUs while shared-pool pods run (as [Node.Admit]
// refuses). The checkpoint is written before Resize returns; if it cannot
// be written the resize is undone and the error returned.
func (n *Node) Resize(key string, cpus int) (Admission, error) {
	if n == nil {
		return Admission{}, errNilNode
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	rec, from, err := n.resizableLocked(key, cpus)
	if err != nil {
		return Admission{}, err
	}
	if cpus == from {
		return n.admissionLocked(key, rec), nil
	}
	old, _ := n.s.Get(key)
	old = old.Clone()
	if err := resizeOn(n, n.s, key, from, cpus); err != nil {
		return Admission{}, err
	}
	if err := n.checkpointLocked(); err != nil {
		if uerr := undoResize(n.s, old); uerr != nil {
			return Admission{}, fmt.Errorf("resize pod %s: %w; and %w", key, err, uerr)
		}
		return Admission{}, fmt.Errorf("resize pod %s: undone: %w", key, n.recheckpointLocked(err))
	}
	return n.admissionLocked(key, rec), nil
}

// CheckResize reports whether [Node.Resize] of the pod to cpus would
// succeed now: nil, or the *[ResizeError] it would return. It changes
// nothing (it tries the resize on a copy of the state).
func (n *Node) CheckResize(key string, cpus int) error {
	if n == nil {
		return errNilNode
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	_, from, err := n.resizableLocked(key, cpus)
	if err != nil || cpus == from {
		return err
	}
	return resizeOn(n, n.s.Clone(), key, from, cpus)
}

// resizableLocked returns the record of a pod that can be resized and the
// CPUs it holds, or the refusal.
func (n *Node) resizableLocked(key string, cpus int) (podRecord, int, error) {
	rec, ok := n.pods[key]
	if !ok {
		return rec, 0, &ResizeError{Pod: key, To: cpus, Reason: "the pod is not admitted on this node",
			Cause: allocator.ErrUnknownID}
	}
	if rec.source == SharedPool {
		return rec, 0, &ResizeError{Pod: key, To: cpus,
			Reason: "it runs on the shared pool (it has no NUMA spec): its CPUs are the pool's, there are no exclusive CPUs to resize"}
	}
	a, _ := n.s.Get(key)
	from := a.CPUs.Size()
	if cpus < 1 {
		return rec, from, &ResizeError{Pod: key, From: from, To: cpus, Reason: "a pod with exclusive CPUs keeps at least one"}
	}
	return rec, from, nil
}

// resizeOn resizes the pod's allocation on st (the node's state or a copy)
// and applies the node's shared-pool rule, leaving st as it was on a
// refusal. The caller holds the node's lock.
func resizeOn(n *Node, st *allocator.State, key string, from, to int) error {
	old, _ := st.Get(key)
	old = old.Clone()
	if _, err := st.Resize(key, to); err != nil {
		reason := err.Error()
		var pe *allocator.PlacementError
		if errors.As(err, &pe) {
			reason = pe.Reason
		}
		return &ResizeError{Pod: key, From: from, To: to, Reason: fmt.Sprintf("under its %s policy: %s", old.Policy, reason), Cause: err}
	}
	if to > from && n.countShared() > 0 {
		pool := st.FreeCPUs()
		pool.UnionWith(n.m.ReservedCPUs())
		if pool.IsEmpty() {
			if err := undoResize(st, old); err != nil {
				return fmt.Errorf("resize pod %s: %w", key, err)
			}
			return &ResizeError{Pod: key, From: from, To: to,
				Reason: fmt.Sprintf("the shared pool would be left without CPUs while %d shared-pool pods run", n.countShared())}
		}
	}
	return nil
}

// undoResize gives the pod back exactly the allocation old it held before
// a resize, which alone changed it since: released, then old claimed.
func undoResize(st *allocator.State, old allocator.Allocation) error {
	_ = st.Release(old.ID)
	if _, err := st.Claim(old); err != nil {
		return fmt.Errorf("giving back the allocation it held before the resize failed: %w", err)
	}
	return nil
}
