package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

// WhatIf is a change of one node that a preemption dry-run (the scheduler
// framework's PreFilterExtensions) asks about: pods taken off it (the
// victims tried) and pods put on it (pods nominated to the node, not yet
// placed there).
type WhatIf struct {
	// Removed are the keys (namespace/name) of pods placed on the node that
	// are taken off; keys the node does not have are ignored.
	Removed []string
	// Added are pods placed on the node first, after the removals, as the
	// node side would place them without a decision (pods already placed
	// on the node are not added twice).
	Added []*PreparedPod
	// WithholdGPU, when set, names the GPUs of the node that the pod may
	// not be given there (a pod whose GPUs come from DRA claims may get
	// only the GPUs the node publishes as DRA devices, a device-plugin pod
	// only the others): on the copy they are marked unhealthy after the
	// removals and additions, so the decision is made among the rest. It
	// does not change what other pods hold.
	WithholdGPU func(id int) bool
	// WithholdDevice, when set, names the node's devices of other classes
	// (by class and ID, as the machine lists them: "rdma", "mlx5_0") that
	// the pod may not be given there, withheld as WithholdGPU withholds
	// GPUs (a pod whose NICs come from DRA claims may get only the NICs
	// the node publishes untainted).
	WithholdDevice func(class, id string) bool
}

// scratchLocked returns a private copy of the node with w applied: its
// state cloned, the removed pods released, the added ones placed. The
// caller holds the node's read lock.
func (c *Cache) scratchLocked(ni *nodeInfo, w WhatIf) *nodeInfo {
	s := &nodeInfo{name: ni.name, labels: ni.labels, kpol: ni.kpol, kopts: ni.kopts, m: ni.m, optedIn: ni.optedIn, alignMem: ni.alignMem,
		class: ni.class, state: ni.state.Clone(), totals: ni.totals, pods: maps.Clone(ni.pods), removed: ni.removed}
	for _, key := range w.Removed {
		pi, ok := s.pods[key]
		if !ok {
			continue
		}
		if pi.alloc {
			_ = s.state.Release(key)
		}
		s.account(pi, -1)
		delete(s.pods, key)
	}
	for _, pp := range w.Added {
		if pp == nil || pp.c != c {
			continue
		}
		if _, ok := ni.pods[pp.pr.key]; ok {
			continue
		}
		pi := &podInfo{key: pp.pr.key, node: s, req: pp.pr.PodRequest, pr: pp.pr, prio: pp.prio}
		_ = c.placeLocked(s, pp.pr, pi, true) // a nominated pod that does not fit holds its totals only
		s.account(pi, 1)
		s.pods[pi.key] = pi
	}
	if w.WithholdGPU != nil {
		withholdGPUs(s.state, s.m, w.WithholdGPU)
	}
	if w.WithholdDevice != nil {
		withholdDevices(s.state, s.m, w.WithholdDevice)
	}
	return s
}

// withholdGPUs marks unhealthy, in st, the machine's GPUs that f names.
func withholdGPUs(st *allocator.State, m *topology.Machine, f func(int) bool) {
	for _, g := range m.GPUs() {
		if f(g.ID) {
			_, _ = st.SetDeviceHealth(allocator.GPUClass, strconv.Itoa(g.ID), false)
		}
	}
}

// FilterWhatIf is [PreparedPod.Filter] on the node changed by w, exactly:
// the same rules (opt-in label, the allocator's admission under the pod's
// policy and exclusivity, the shared pool, memory) on the node's state with
// the removed pods' allocations released and the added pods placed. Nothing
// in the cache changes.
func (pp *PreparedPod) FilterWhatIf(node string, w WhatIf) error {
	ni, err := pp.c.node(node)
	if err != nil {
		return err
	}
	ni.mu.RLock()
	s := pp.c.scratchLocked(ni, w)
	ni.mu.RUnlock()
	if v := pp.c.evaluate(s, pp.pr, false, nil); v.why != fits {
		return pp.c.refusalError(ni.name, pp.pr, v)
	}
	return nil
}

// Victims is [Cache.PreemptOn] for the prepared pod among the given
// candidates only (keys of pods on the node, of lower priority than the
// pod's): the set of candidates whose removal makes the pod fit, judged
// exactly as Filter would (allocator.State.FitWithout), chosen in
// [Cache.PreemptOn]'s order (kube-scheduler's: the lowest highest priority,
// then the fewest victims of it, then the fewest victims). It
// returns an error wrapping [ErrNoPreemption] when none does within
// [DefaultPreemptionBudget] sets, or when the pod fits without any removal.
func (pp *PreparedPod) Victims(node string, candidates []string) (Preemption, error) {
	ni, err := pp.c.node(node)
	if err != nil {
		return Preemption{}, err
	}
	c := pp.c
	c.podsMu.Lock()
	ni.mu.RLock()
	defer ni.mu.RUnlock()
	var cands []*podInfo
	for _, key := range slices.Compact(slices.Sorted(slices.Values(candidates))) {
		if pi, ok := ni.pods[key]; ok && pi.prio < pp.prio {
			cands = append(cands, pi)
		}
	}
	c.podsMu.Unlock()
	pe, _, ok := c.preemptSearch(ni, pp.pr, cands, DefaultPreemptionBudget)
	if !ok {
		return Preemption{}, fmt.Errorf("%w: %s on node %s", ErrNoPreemption, pp.pr.key, node)
	}
	return pe, nil
}

// Key returns the pod's key, namespace/name.
func (pp *PreparedPod) Key() string { return pp.pr.key }
