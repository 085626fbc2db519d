package allocator

import (
	"fmt"

	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// Score rates this machine for r on a 0-100 scale for a scheduler, or
// returns the error Fit would. Alignment comes first: an aligned placement
// scores 50-100, another one 0-49. Within each band the packing
// strategy decides: MostAllocated (default) scores higher the fuller the
// machine's demanded resources would be after the placement, LeastAllocated
// the emptier. Aligned means a span no wider than the request's width_cap
// (always true for SingleNUMANode and Restricted, whose admission demands
// it; for BestEffort, one NUMA node whenever the request fits in one, and
// the narrowest the hardware allows otherwise, so that a 3-GPU pod on a
// 2-GPU-per-node machine still prefers a machine where 2 nodes suffice;
// a width_free or width_cap the search bound left undecided or approximate
// counts as not aligned).
//
// Bound: O(n) reads of the free counters when one node covers r (Fit's
// shortcut, the common answer: the score is then aligned); otherwise Fit's
// decision and, for BestEffort and None, the computation of width_cap
// (within the same search bound); under the read lock.
func (s *State) Score(r *Request) (int, error) {
	if err := s.check(r); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if r.ID != "" {
		if s.ids.has(r.ID) {
			return 0, fmt.Errorf("%w: %s", ErrDuplicateID, quote.Short(r.ID))
		}
	}
	if !general.On && s.fitsOneNode(r) {
		return s.oneNodeScore(r), nil
	}
	return s.searchScore(r)
}

// searchScore is Score by the decision proper, under the read lock.
func (s *State) searchScore(r *Request) (int, error) {
	sr := s.searcher(r, nil)
	defer sr.done()
	// The admission decision alone: the score needs the span's width, not
	// the span, and the width is known without choosing one.
	if err := sr.decide(false); err != nil {
		return 0, err
	}
	// Aligned: the span is no wider than width_cap, the narrowest the
	// hardware permits (for BestEffort that is one NUMA node whenever the
	// request fits in one). BestEffort and None spans are exactly
	// width_free nodes wide.
	// When the search bound cuts the computation of width_cap or of
	// width_free (then known only approximately), the placement counts as
	// not aligned.
	aligned := true // SingleNUMANode and Restricted: admission demands it
	if r.Policy == policy.BestEffort || r.Policy == policy.None {
		widthCap, _ := sr.widthCap()
		aligned = sr.plan.widthFree <= max(widthCap, 1) && !sr.cut() && !sr.bound.Approx
	}
	capSum := sr.capSum // the capacity problem's sums, when widthCap loaded it
	if !sr.capOK {
		for j := 0; j < sr.k; j++ {
			capSum[j] = s.capacitySum(sr.kinds[j], r)
		}
	}
	sr.sums()
	return s.scoreOf(aligned, sr.k, &capSum, &sr.freeSum, &sr.demand), nil
}

// oneNodeScore is Score for a request that [State.fitsOneNode] admits,
// read from the free counters without a searcher: the span is one node,
// so the placement is aligned (width_free 1, or nothing to place on known
// nodes), and the utilisation is that of the demanded kinds, in the
// decision's order (GPUs, CPUs, memory, then the kinds of the caller's
// own), from the same sums the decision would make. TestOneNodeScoreAgreesWithScore keeps the two
// equal.
func (s *State) oneNodeScore(r *Request) int {
	var capSum, freeSum, demand [maxKinds]int64
	k := 0
	none := r.Policy == policy.None
	idx, d := s.fieldKinds(r)
	for f, j := range idx {
		if d[f] > 0 {
			free, _ := s.builtinFree(j, r, none)
			capSum[k], freeSum[k], demand[k] = s.capacitySum(j, r), sum64(free), d[f]
			k++
		}
	}
	var buf [numa.MaxNodes]int64
	for j := s.builtin; j < len(s.res); j++ { // the kinds of the caller's own
		if dj := s.res[j].Demand(r); dj > 0 {
			capSum[k], freeSum[k], demand[k] = s.capacitySum(j, r), sum64(s.freeOf(j, r, buf[:s.n])), dj
			k++
		}
	}
	return s.scoreOf(true, k, &capSum, &freeSum, &demand)
}

// scoreOf turns the alignment and, for each of the k demanded kinds, its
// capacity, free units and demand on the known nodes into Score's 0-100
// figure: the utilisation after the placement, averaged over the kinds
// with capacity, in the band of the alignment.
func (s *State) scoreOf(aligned bool, k int, capSum, freeSum, demand *[maxKinds]int64) int {
	var util float64
	kinds := 0
	for j := 0; j < k; j++ {
		if capacity := capSum[j]; capacity > 0 {
			// Devices of unknown NUMA node are left out: the demand may
			// exceed what the known nodes give, hence the clamp below.
			util += min(float64(capacity-freeSum[j]+demand[j])/float64(capacity), 1)
			kinds++
		}
	}
	p01 := 0.0
	if kinds > 0 {
		p01 = min(util/float64(kinds), 1)
	}
	if s.opts.Scoring == LeastAllocated {
		p01 = 1 - p01
	}
	if aligned {
		return 50 + int(p01*50)
	}
	return int(p01 * 49)
}

// capacitySum returns the capacity of resource j on the known nodes for
// r. It reads the resource's capacity view (or its Capacity, node by node)
// without loading the capacity problem, which a score does not search: no
// working memory is taken for it.
func (s *State) capacitySum(j int, r *Request) int64 {
	var t int64
	if b := s.bulk[j]; b != nil && !general.On {
		for _, v := range b.CapacityView(r) {
			t += v
		}
		return t
	}
	for i := 0; i < s.n; i++ {
		t += s.res[j].Capacity(r, i)
	}
	return t
}
