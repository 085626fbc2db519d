package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/numaplace/numaplace/adapters/kube"
)

// ErrNoPreemption: no set of lower-priority pods on any node (within the
// search budget) makes the pod fit.
var ErrNoPreemption = errors.New("no preemption makes the pod fit")

// DefaultPreemptionBudget bounds the victim sets tried per node.
const DefaultPreemptionBudget = 20000

// Preemption is the answer of a PostFilter-style preemption dry-run: the
// node and the set of lower-priority pods whose removal makes the pod fit
// there, chosen in kube-scheduler's order (see [Cache.PreemptOn]).
type Preemption struct {
	// Node is the node to preempt on.
	Node string
	// Victims are the keys (namespace/name) of the pods to remove, by
	// ascending priority then key.
	Victims []string
	// HighestPriority is the highest priority among the victims.
	HighestPriority int32
}

// Preempt finds, on the nodes where the pod does not fit now, the smallest
// set of pods of lower priority than the pod's whose removal makes it fit
// under its policy, its exclusivity rule and the shared-pool rules — exactly
// as Filter would judge the node after the removal (the allocator's
// FitWithout sees the node types without the victims: removing a
// multi-node allocation can turn a shared NUMA node single and so refuse a
// multi-node pod that fitted before). Per node the victims are chosen as
// [Cache.PreemptOn] says; among nodes it prefers, as kube-scheduler's
// DefaultPreemption does (pickOneNodeForPreemption, without its
// PodDisruptionBudget and start-time criteria), the lowest highest victim
// priority, then the lowest sum of victim priorities, then the fewest
// victims, then the node name. Nodes running the kubelet's own Topology
// Manager (Node.KubeletPolicy) are not considered. Nothing changes: the
// caller evicts the victims and schedules the pod again.
//
// It returns an error wrapping [ErrNoPreemption] when no node allows it,
// the pod's *kube.PodError when it is invalid, and an error wrapping
// [ErrPodPlaced] when the pod is already placed.
func (c *Cache) Preempt(p *kube.Pod) (Preemption, error) {
	pr, err := c.parse(p)
	if err != nil {
		return Preemption{}, err
	}
	c.podsMu.Lock()
	_, placed := c.pods[pr.key]
	c.podsMu.Unlock()
	if placed {
		return Preemption{}, fmt.Errorf("%w: %s", ErrPodPlaced, pr.key)
	}
	var best *Preemption
	var bestSum int64
	for _, ni := range c.sortedNodes() {
		pe, s, ok := c.preemptOn(ni, pr, p.Priority, DefaultPreemptionBudget)
		if !ok {
			continue
		}
		if best == nil || betterPreemption(pe, s, *best, bestSum) {
			best, bestSum = &pe, s
		}
	}
	if best == nil {
		return Preemption{}, fmt.Errorf("%w: %s (priority %d)", ErrNoPreemption, pr.key, p.Priority)
	}
	return *best, nil
}

func betterPreemption(a Preemption, asum int64, b Preemption, bsum int64) bool {
	return cmp.Or(
		cmp.Compare(a.HighestPriority, b.HighestPriority),
		cmp.Compare(asum, bsum),
		cmp.Compare(len(a.Victims), len(b.Victims)),
		strings.Compare(a.Node, b.Node),
	) < 0
}

// PreemptOn is Preempt on one named node, or an error wrapping
// [ErrNoPreemption]. Among the sets of pods of lower priority than the
// pod's whose removal makes it fit, it chooses by kube-scheduler's
// criteria (DefaultPreemption spares the most important victims first):
// the lowest highest priority; then the fewest victims of that priority;
// then the fewest victims (numaplace's exact search, where
// DefaultPreemption's greedy reprieve may evict more); then the lowest sum
// of priorities; then the first in key order. A priority level is searched
// when removing every candidate up to it makes the pod fit (as
// DefaultPreemption first removes every lower-priority pod; fitting is not
// monotone in removals, so a set below the first such level that makes
// the pod fit is not searched); its sets are
// tried by the number of victims of that priority, then of lower ones, up
// to [DefaultPreemptionBudget] sets in all, after which every candidate up
// to the level is the answer.
func (c *Cache) PreemptOn(p *kube.Pod, node string) (Preemption, error) {
	pr, err := c.parse(p)
	if err != nil {
		return Preemption{}, err
	}
	ni, err := c.node(node)
	if err != nil {
		return Preemption{}, err
	}
	pe, _, ok := c.preemptOn(ni, pr, p.Priority, DefaultPreemptionBudget)
	if !ok {
		return Preemption{}, fmt.Errorf("%w: %s on node %s", ErrNoPreemption, pr.key, node)
	}
	return pe, nil
}

// preemptOn searches one node: the victim set in PreemptOn's order among
// the pods of lower priority, and the set's priority sum. ok is false when the pod fits
// already, cannot fit even on the empty machine, or no set within the
// budget makes it fit.
func (c *Cache) preemptOn(ni *nodeInfo, pr *podReq, prio int32, budget int) (Preemption, int64, bool) {
	c.podsMu.Lock()
	ni.mu.RLock()
	defer ni.mu.RUnlock()
	var cands []*podInfo
	for _, pi := range ni.pods {
		if pi.prio < prio {
			cands = append(cands, pi)
		}
	}
	c.podsMu.Unlock()
	return c.preemptSearch(ni, pr, cands, budget)
}

// preemptSearch is preemptOn's search among the given candidates (the
// caller holds the node's read lock, or owns the node).
func (c *Cache) preemptSearch(ni *nodeInfo, pr *podReq, cands []*podInfo, budget int) (Preemption, int64, bool) {
	if ni.kpol != "" {
		return Preemption{}, 0, false // the kubelet's own policy: not modelled
	}
	if len(cands) == 0 {
		return Preemption{}, 0, false
	}
	areq, _ := pr.request(ni)
	if v := c.checksLocked(ni, pr, nil); v.why == fits {
		if !pr.needsAlloc || ni.state.Fit(areq) == nil {
			return Preemption{}, 0, false // no preemption needed
		}
	} else if v.why == notOptedIn || v.never || v.neverShort != 0 || v.why == nodeGone {
		return Preemption{}, 0, false // no removal can help
	}
	slices.SortFunc(cands, func(a, b *podInfo) int {
		return cmp.Or(cmp.Compare(a.prio, b.prio), strings.Compare(a.key, b.key))
	})
	var ids []string
	fitsWithout := func(pick []int) bool {
		// The cache's own rules on the totals without the victims, then
		// the allocator's on its state without them.
		t := ni.totals
		ids = ids[:0]
		for _, j := range pick {
			pi := cands[j]
			t.add(pi.usage(), -1)
			if pi.alloc {
				ids = append(ids, pi.key)
			}
		}
		if v := t.admit(pr.use, c.cfg.MinSharedCPUs); v.why != fits {
			return false
		}
		return !pr.needsAlloc || ni.state.FitWithout(areq, ids) == nil
	}
	answer := func(pick []int) (Preemption, int64, bool) {
		pe := Preemption{Node: ni.name}
		var sum int64
		for _, j := range pick {
			pe.Victims = append(pe.Victims, cands[j].key)
			sum += int64(cands[j].prio)
		}
		if len(pick) > 0 {
			pe.HighestPriority = cands[pick[len(pick)-1]].prio // sorted by priority
		}
		return pe, sum, true
	}
	tried := 0
	var all, pick []int
	// Levels: the candidates' priorities, lowest first. At level p the
	// victims are top ones (priority p, at least one) and lower ones.
	for hi := 0; hi < len(cands); {
		end := hi
		for end < len(cands) && cands[end].prio == cands[hi].prio {
			end++
		}
		all = all[:0]
		for j := range end {
			all = append(all, j)
		}
		tried++
		if !fitsWithout(all) {
			hi = end
			continue
		}
		var best []int
		var bestSum int64
		exhausted := false
		for a := 1; a <= end-hi && best == nil && !exhausted; a++ {
			for b := 0; b <= hi && best == nil && !exhausted; b++ {
				combinations(end-hi, a, func(top []int) bool {
					return combinations(hi, b, func(low []int) bool {
						if tried++; tried > budget {
							exhausted = true
							return false
						}
						pick = pick[:0]
						pick = append(pick, low...)
						for _, j := range top {
							pick = append(pick, hi+j)
						}
						if !fitsWithout(pick) {
							return true
						}
						var sum int64
						for _, j := range pick {
							sum += int64(cands[j].prio)
						}
						if best == nil || sum < bestSum {
							best, bestSum = slices.Clone(pick), sum
						}
						return true
					})
				})
			}
		}
		if best == nil {
			best = all // out of budget: every candidate up to this level makes the pod fit
		}
		return answer(best)
	}
	return Preemption{}, 0, false
}

// combinations calls fn with every k-subset of 0..n-1 (ascending indices)
// in lexicographic order while fn returns true; it reports whether fn
// never returned false. fn must not keep the slice.
func combinations(n, k int, fn func([]int) bool) bool {
	if k > n || k < 0 {
		return true
	}
	pick := make([]int, k)
	for i := range pick {
		pick[i] = i
	}
	for {
		if !fn(pick) {
			return false
		}
		i := k - 1
		for i >= 0 && pick[i] == n-k+i {
			i--
		}
		if i < 0 {
			return true
		}
		pick[i]++
		for j := i + 1; j < k; j++ {
			pick[j] = pick[j-1] + 1
		}
	}
}
