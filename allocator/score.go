package allocator

import (
	"fmt"

	"github.com/numaplace/numaplace/internal/quote"
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
// Bound: Fit's decision and, for BestEffort and None, the computation of
// width_cap (within the same search bound), under the read lock.
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
		aligned = sr.plan.widthFree <= max(widthCap, 1) && !sr.cut() && !sr.bound.approx
	}

	// Utilisation after the placement, averaged over the demanded kinds.
	var util float64
	kinds := 0
	capSum := sr.capacitySums()
	sr.sums()
	for j := 0; j < sr.k; j++ {
		if capacity := capSum[j]; capacity > 0 {
			// Devices of unknown NUMA node are left out: the demand may
			// exceed what the known nodes give, hence the clamp below.
			util += min(float64(capacity-sr.freeSum[j]+sr.demand[j])/float64(capacity), 1)
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
		return 50 + int(p01*50), nil
	}
	return int(p01 * 49), nil
}

// capacitySums returns the capacity of each demanded kind on the known
// nodes. It reads the resources' capacity views (or their Capacity, node by
// node) without loading the capacity problem, which a score does not
// search: no working memory is taken for it.
func (sr *searcher) capacitySums() [maxKinds]int64 {
	if sr.capOK {
		return sr.capSum
	}
	var sums [maxKinds]int64
	s := sr.s
	for j := 0; j < sr.k; j++ {
		res := sr.kinds[j]
		var t int64
		if b := s.bulk[res]; b != nil {
			for _, v := range b.CapacityView(sr.r) {
				t += v
			}
		} else {
			for i := 0; i < s.n; i++ {
				t += s.res[res].Capacity(sr.r, i)
			}
		}
		sums[j] = t
	}
	return sums
}
