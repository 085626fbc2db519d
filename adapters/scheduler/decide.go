package scheduler

import (
	"fmt"

	"github.com/numaplace/numaplace/allocator"
)

// Decide returns the allocation the pod would get on the node now, as
// [Cache.Reserve] would place it (the same checks, the allocator's
// decision under the pod's policy), without changing anything: the node's
// state is cloned and the decision made on the clone. With w, the node is
// first changed as [PreparedPod.FilterWhatIf] changes it. A refusal is
// Filter's *[FilterError]; a pod that gets nothing from the allocator (no
// NUMA spec and no GPUs) has the zero allocation. A DRA scheduler plugin
// calls it to learn which GPUs a pod's claims are to name on each node.
func (pp *PreparedPod) Decide(node string, w *WhatIf) (allocator.Allocation, error) {
	ni, err := pp.c.node(node)
	if err != nil {
		return allocator.Allocation{}, err
	}
	ni.mu.RLock()
	var s *nodeInfo
	if w != nil {
		s = pp.c.scratchLocked(ni, *w)
	} else {
		s = pp.c.scratchLocked(ni, WhatIf{})
	}
	ni.mu.RUnlock()
	if v := pp.c.evaluate(s, pp.pr, false, nil); v.why != fits {
		return allocator.Allocation{}, pp.c.refusalError(ni.name, pp.pr, v)
	}
	pi := &podInfo{key: pp.pr.key, node: s, req: pp.pr.PodRequest, pr: pp.pr, prio: pp.prio}
	if err := pp.c.placeLocked(s, pp.pr, pi, false); err != nil {
		return allocator.Allocation{}, pp.c.refusalError(ni.name, pp.pr, verdict{why: allocRefused, err: err})
	}
	if !pi.alloc {
		return allocator.Allocation{}, nil
	}
	a, ok := s.state.Get(pp.pr.key)
	if !ok {
		return allocator.Allocation{}, fmt.Errorf("scheduler: pod %s placed on a copy of node %s has no allocation", pp.pr.key, node)
	}
	return a, nil
}
