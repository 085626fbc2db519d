package allocator

import (
	"math/bits"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// choose returns the top-ranked span ([rank]) of the plan's width among the
// pools restricted to restrict, and leaves its split in sr.take.
//
// Pools of at most smallPool nodes are enumerated ([subsetSearch.each]),
// up to max(64, Options.SearchBudget / pools) candidates each. A pool
// holding the whole machine is first searched NUMA set by NUMA set when the
// width fits in one: the spans of one decision agree on the rank's first
// criterion (they are all inside restrict: all keep the rule, or none of
// them can), and a span inside one set beats every span that crosses sets
// on the second. A larger pool gets one cover (the admission's, else the
// class search's) and, when the span is at most half the pool, the local
// search of improve.
func (sr *searcher) choose(pools []numa.Mask, restrict numa.Mask) numa.Mask {
	s, w := sr.s, sr.plan.width
	sr.forbidden = s.m.AllNodes() &^ policy.AllowedPool(w, s.m.AllNodes(), sr.single, sr.shared)
	sr.strands = s.keep >= 0 && !sr.demands(s.keep)
	if sr.strands {
		copy(sr.keepFree[:s.n], s.freeOf(s.keep, sr.r, sr.keepFree[:s.n]))
	}
	sr.have = false
	if len(pools) == 1 && len(s.setMasks) > 1 && w <= s.maxSet {
		sr.enumerate(s.setMasks, restrict)
	}
	if !sr.have {
		sr.enumerate(pools, restrict)
	}
	span := sr.best.span
	sr.clearTake()
	sr.split(span, &sr.take)
	return span
}

// demands reports whether the request demands the resource at index res.
func (sr *searcher) demands(res int) bool {
	for j := 0; j < sr.k; j++ {
		if sr.kinds[j] == res {
			return true
		}
	}
	return false
}

// enumerate ranks the candidate spans of each pool restricted to restrict.
func (sr *searcher) enumerate(pools []numa.Mask, restrict numa.Mask) {
	w := sr.plan.width
	budget := max(64, sr.s.opts.SearchBudget/len(pools))
	for _, p := range pools {
		p &= restrict
		if p.Count() <= smallPool {
			sr.left = budget
			sr.sub.each(&sr.freeP, p, w, sr)
			continue
		}
		m, ok := sr.found, sr.found != 0 && sr.found.IsSubsetOf(p) && sr.found.Count() == w
		if !ok {
			m, ok = sr.exists(&sr.freeP, p, w)
		}
		if !ok {
			continue
		}
		if 2*w <= p.Count() { // else the cover holds most of the pool anyway
			m = sr.improve(p, m)
		}
		sr.left = 2 // always rank the cover
		sr.visit(m)
	}
}

// visit ranks the candidate m and keeps it when it is the best so far; it
// returns false when the pool's budget of candidates is spent.
func (sr *searcher) visit(m numa.Mask) bool {
	sr.rankOf(m, &sr.cand)
	if !sr.have || compareRanks(&sr.cand, &sr.best, sr.k) < 0 {
		sr.best, sr.have = sr.cand, true
	}
	sr.left--
	return sr.left > 0
}

// improve is the local search of large pools: it swaps one node of the
// cover m for one of the pool outside it while the swap keeps a cover and
// lowers the span's rank ([rank]; every span of the pool agrees on the
// first criterion, see choose), taking the first improvement, and tries at
// most Options.SearchBudget/2 swaps. The NUMA sets crossed and the distance
// of a swap are kept up to date incrementally, so a swap that changes
// either is judged in O(k); one that ties on both is ranked in full, in
// O(k·w + w²) plus the resources' penalties. A swap made costs O(n) more.
func (sr *searcher) improve(pool, m numa.Mask) numa.Mask {
	s, p := sr.s, &sr.freeP
	p.clip()
	budget := s.opts.SearchBudget / 2
	var inSet [numa.MaxNodes]int32 // nodes of m per NUMA set
	for wd := uint64(m); wd != 0; wd &= wd - 1 {
		inSet[s.m.SetOf(bits.TrailingZeros64(wd))]++
	}
	sums := p.sums(m)
	// toM[x] is the total distance from node x to the nodes of m, kept up
	// to date across swaps.
	var toM [numa.MaxNodes]int64
	for wx := uint64(pool); wx != 0; wx &= wx - 1 {
		x := bits.TrailingZeros64(wx)
		for wo := uint64(m); wo != 0; wo &= wo - 1 {
			toM[x] += int64(s.dist.At(x, bits.TrailingZeros64(wo)))
		}
	}
	cur := &sr.cur // the full rank of m, when known
	known := false
	for improved := true; improved && budget > 0; {
		improved = false
		for wi := uint64(m); wi != 0 && !improved; wi &= wi - 1 {
			i := bits.TrailingZeros64(wi)
			di := toM[i] - int64(s.dist.At(i, i)) // distances from i to the rest of m
			si := s.m.SetOf(i)
			for wj := uint64(pool &^ m); wj != 0; wj &= wj - 1 {
				j := bits.TrailingZeros64(wj)
				if budget--; budget < 0 {
					return m
				}
				sj := s.m.SetOf(j)
				dSets := 0 // sets crossed after the swap, relative to now
				if si != sj {
					if inSet[si] == 1 {
						dSets--
					}
					if inSet[sj] == 0 {
						dSets++
					}
				}
				if dSets > 0 {
					continue
				}
				dDist := toM[j] - int64(s.dist.At(j, i)) - di
				if dSets == 0 && dDist > 0 {
					continue
				}
				ok := true
				for r := 0; r < p.k && ok; r++ {
					ok = sums[r]-p.val[i][r]+p.val[j][r] >= p.need[r]
				}
				if !ok {
					continue
				}
				next := m&^(1<<uint(i)) | 1<<uint(j)
				if dSets == 0 && dDist == 0 {
					// A tie on the sets and the distance: rank both in full.
					if !known {
						sr.rankOf(m, cur)
						known = true
					}
					sr.rankOf(next, &sr.cand)
					if compareRanks(&sr.cand, cur, sr.k) >= 0 {
						continue
					}
					*cur = sr.cand
				} else {
					known = false
				}
				for r := 0; r < p.k; r++ {
					sums[r] += p.val[j][r] - p.val[i][r]
				}
				m = next
				for wx := uint64(pool); wx != 0; wx &= wx - 1 {
					x := bits.TrailingZeros64(wx)
					toM[x] += int64(s.dist.At(x, j)) - int64(s.dist.At(x, i))
				}
				inSet[si]--
				inSet[sj]++
				improved = true
				break
			}
		}
	}
	return m
}
