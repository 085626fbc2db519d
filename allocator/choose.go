package allocator

import (
	"math/bits"

	"github.com/numaplace/numaplace/allocator/internal/cover"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// choose returns the top-ranked span ([rank]) of the plan's width among the
// pools restricted to restrict, and leaves its split in sr.take (0 on the
// other nodes).
//
// Pools of at most cover.SmallPool nodes are enumerated ([cover.Search.Each]),
// up to max(64, Options.SearchBudget / pools) candidates each. A pool
// holding the whole machine is first searched NUMA set by NUMA set when the
// width fits in one and [rankOrder] starts with the rule and the sets
// crossed (setsFirst): the spans of one decision agree on the rule (they
// are all inside restrict: all keep the rule, or none of them can), and a
// span inside one set then beats every span that crosses sets. A larger
// pool gets one cover (the admission's, else the
// class search's) and, when the span is at most half the pool, the local
// search of improve.
func (sr *searcher) choose(pools []numa.Mask, restrict numa.Mask) numa.Mask {
	s, w := sr.s, sr.plan.width
	sr.forbidden = s.m.AllNodes() &^ policy.AllowedPool(w, s.m.AllNodes(), sr.single, sr.shared)
	sr.strands = s.keep >= 0 && !sr.demands(s.keep)
	if sr.strands {
		copy(sr.keepFree[:s.n], s.freeOf(s.keep, sr.r, sr.keepFree[:s.n]))
	}
	sr.have, sr.top, sr.amtSpan = false, 0, 0
	if setsFirst && len(pools) == 1 && len(s.setMasks) > 1 && w <= s.maxSet {
		sr.enumerate(s.setMasks, restrict)
	}
	if !sr.have {
		sr.enumerate(pools, restrict)
	}
	span := sr.ranks[sr.top].span
	sr.clearTake()
	if sr.amtSpan == span { // the last span ranked: its split is in amt
		for j := 0; j < sr.k; j++ {
			for w := uint64(span); w != 0; w &= w - 1 {
				i := bits.TrailingZeros64(w)
				sr.take[j][i] = sr.amt[j][i]
			}
		}
		return span
	}
	sr.split(span, sr.take)
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
		if p.Count() <= cover.SmallPool {
			sr.left = budget
			sr.cov.Each(&sr.freeP, p, w, sr)
			continue
		}
		m, ok := sr.found, sr.found != 0 && sr.found.IsSubsetOf(p) && sr.found.Count() == w
		if !ok {
			m, ok = sr.exists(&sr.freeP, p, w)
		}
		if !ok {
			continue
		}
		sr.curOK = false
		if 2*w <= p.Count() { // else the cover holds most of the pool anyway
			m = sr.improve(p, m)
		}
		sr.left = 2 // always rank the cover
		if sr.curOK {
			sr.keep(&sr.cur)
			continue
		}
		sr.Visit(m)
	}
}

// Visit ranks the candidate m and keeps it when it is the best so far; it
// returns false when the pool's budget of candidates is spent.
func (sr *searcher) Visit(m numa.Mask) bool {
	next := &sr.ranks[1-sr.top] // the slot that does not hold the best
	sr.rankOf(m, next)
	if sr.beats(next) {
		sr.top, sr.have = 1-sr.top, true
	}
	sr.left--
	return sr.left > 0
}

// keep makes a copy of rk the best so far when it is.
func (sr *searcher) keep(rk *rank) {
	if sr.beats(rk) {
		sr.ranks[sr.top], sr.have = *rk, true
	}
}

// beats reports whether rk ranks before the best span so far (or there is
// none yet).
func (sr *searcher) beats(rk *rank) bool {
	return !sr.have || compareRanks(rk, &sr.ranks[sr.top], sr.k) < 0
}

// improve is the local search of large pools: it swaps one node of the
// cover m for one of the pool outside it while the swap keeps a cover and
// lowers the span's rank ([rank], by [compareRanks]; every span of the
// pool agrees on the rule, see choose). While [rankOrder] starts with the
// rule, the NUMA sets crossed and the distance (setsFirst), it takes the
// first swap that lowers the sets or, at the same sets, the distance (both
// kept up to date incrementally, so such a swap is judged in O(k)); when
// none does, it ranks in full (O(k·w log w) plus the resources' penalties)
// the swaps that tie on both, at most max(1, Options.SearchBudget/256) of
// them, and takes the first that ranks lower; then it starts over. Under
// any other order every swap that keeps a cover is ranked in full, so the
// search optimises whatever the order says. The swaps whose new node
// lacks what the cover without the old one needs are skipped: by mask when
// the class search holds the pool's orders by kind
// ([cover.Search.IndexAtLeast], O(k log n) per node of the cover), else
// node by node. It tries at most Options.SearchBudget/2 swaps in all (the
// skipped ones count); a swap made costs O(n) more. When
// the returned cover's full rank is known it is left in sr.cur (sr.curOK).
func (sr *searcher) improve(pool, m numa.Mask) numa.Mask {
	s, p := sr.s, &sr.freeP
	p.Clip()
	budget := s.opts.SearchBudget / 2
	ties := max(1, budget/128)
	full := !setsFirst // rank every swap in full
	if full {
		ties = budget
	}
	var inSet [numa.MaxNodes]int32 // nodes of m per NUMA set
	for wd := uint64(m); wd != 0; wd &= wd - 1 {
		inSet[s.setOf[bits.TrailingZeros64(wd)]]++
	}
	sums := p.Sums(m)
	// toM[x] is the total distance from node x of the pool to the nodes of
	// m, kept up to date across swaps.
	var toM [numa.MaxNodes]int64
	s.distBy.toAll(pool, m, &toM)
	// setMask[q] holds the pool's nodes of NUMA set q (the sets partition
	// the nodes, and setOf indexes them).
	var setMask [numa.MaxNodes]numa.Mask
	sets := setMask[:len(s.setMasks)]
	for q, set := range s.setMasks {
		sets[q] = set & pool
	}
	// Whether the class search can say which nodes have enough of every
	// kind (else each swap is checked).
	indexed := sr.cov.IndexAtLeast(p, pool)
	cur := &sr.cur // the full rank of m, when known
	known := false
	tieRound := full // the current sweep ranks the swaps that tie
	for budget > 0 {
		swapped := false
		var occ numa.Mask // the pool's nodes in the sets m uses
		for _, set := range sets {
			if set&m != 0 {
				occ |= set
			}
		}
		for wi := uint64(m); wi != 0 && !swapped; wi &= wi - 1 {
			i := bits.TrailingZeros64(wi) & 63
			rowI := s.distRow(i)
			di := toM[i] - int64(rowI[i]) // distances from i to the rest of m
			si := s.setOf[i]
			// The sets crossed after swapping i for j, relative to now:
			// one fewer for j in neg (i leaves its set, j joins a set of
			// m), one more for j in pos (j opens a set, i's stays), the
			// same elsewhere.
			var neg, pos numa.Mask
			if same := setMask[si]; inSet[si] == 1 {
				neg = occ &^ same
			} else {
				pos = ^occ &^ same
			}
			var want [maxKinds]int64 // what j must give for m without i to cover
			vi := &p.Val[i]
			k := min(p.K, maxKinds)
			for r := range k {
				want[r] = p.Need[r] - sums[r] + vi[r]
			}
			// Every node outside m is a swap tried, in ascending order, and
			// counts against the budget; those that cannot lower the rank
			// by the sets (and, in a sweep of ties, those that change the
			// sets) are skipped by mask.
			outside := uint64(pool &^ m)
			if outside != 0 && budget <= 0 {
				sr.curOK = known
				return m
			}
			cands, cut := outside, false // cut: the budget ends inside this i's swaps
			if bits.OnesCount64(outside) > budget {
				cands, cut = lowestBits(outside, budget), true
			}
			if !full {
				cands &^= uint64(pos)
				if tieRound {
					cands &^= uint64(neg)
				}
			}
			if indexed { // only the nodes that give what m without i lacks
				cands &= uint64(sr.cov.AtLeast(&want))
			}
			for wj := cands; wj != 0; wj &= wj - 1 {
				j := bits.TrailingZeros64(wj) & 63
				tie := full
				if !full && neg&(1<<uint(j)) == 0 { // the same sets: the distance decides
					dDist := toM[j] - int64(rowI[j]) - di
					if dDist > 0 {
						continue
					}
					if tie = dDist == 0; tie != tieRound {
						continue
					}
				}
				vj := &p.Val[j]
				if !indexed {
					r := 0
					for r < k && vj[r] >= want[r] {
						r++
					}
					if r < k {
						continue
					}
				}
				next := m&^(1<<uint(i)) | 1<<uint(j)
				if tie {
					if !known {
						sr.rankOf(m, cur)
						known = true
					}
					if full {
						sr.rankOf(next, &sr.cand)
					} else {
						sr.cand = *cur // the same rule, sets and distance
						sr.rankTail(next, &sr.cand)
					}
					if ties--; compareRanks(&sr.cand, cur, sr.k) >= 0 {
						if ties == 0 {
							sr.curOK = known
							return m
						}
						continue
					}
					*cur = sr.cand
				} else {
					known = false
				}
				budget -= bits.OnesCount64(outside & (2<<uint(j) - 1)) // the swaps tried up to j
				for r := 0; r < p.K; r++ {
					sums[r] += vj[r] - vi[r]
				}
				m = next
				for x, d := range s.distRow(j) {
					toM[x] += int64(d) - int64(rowI[x])
				}
				inSet[si]--
				inSet[s.setOf[j]]++
				swapped = true
				break
			}
			if !swapped {
				if cut {
					sr.curOK = known
					return m
				}
				budget -= bits.OnesCount64(outside)
			}
		}
		switch {
		case swapped:
			tieRound = full
		case tieRound || ties == 0:
			sr.curOK = known
			return m // a local optimum
		default:
			tieRound = true
		}
	}
	sr.curOK = known
	return m
}
