package allocator

import (
	"math/bits"

	"github.com/numaplace/numaplace/numa"
)

// maxKinds is the most resource kinds one request may ask for at once.
const maxKinds = 16

// smallPool is the largest pool the exact subset search takes; larger
// pools go to the class search (classes.go).
const smallPool = 16

// problem is one covering question of a decision: for each demanded kind r
// and NUMA node i an amount (the node's free units, or its capacity) and
// the demand need[r] the known nodes must give. A set M of nodes covers
// when Σ_{i∈M} min(amount[r][i], need[r]) >= need[r] for every r. A
// decision loads each problem once (see [searcher]) and never changes it
// afterwards, so the strategies may keep what they derive from it for the
// rest of the decision.
//
// The amounts are kept as read, kind by kind, with the set of nodes that
// cover alone (ones), which answers every question of width 1; the
// node-major copy clipped at the demands (val), which the wider searches
// read, is made on first use (clip).
type problem struct {
	k       int
	n       int // the machine's nodes
	need    [maxKinds]int64
	recip   [maxKinds]uint64  // recip(need[r]), made with val
	amount  [maxKinds][]int64 // by kind: one entry per node (a resource's view, or store)
	ones    numa.Mask         // the nodes whose amounts cover alone
	clipped bool              // val holds the amounts clipped at the demands
	val     *[numa.MaxNodes][maxKinds]int64
	store   *[maxKinds][numa.MaxNodes]int64 // amounts the problem holds itself (val and store are in the searcher's searchMem)
}

// load finishes loading the amounts of the problem's k kinds on n nodes:
// it computes ones and marks val as not made yet.
func (p *problem) load(n int) {
	p.n, p.clipped = n, false
	ones := numa.FirstN(n)
	for r := 0; r < p.k; r++ {
		need := p.need[r]
		for i, v := range p.amount[r] {
			if v < need {
				ones &^= 1 << uint(i)
			}
		}
	}
	p.ones = ones
}

// clip makes val, the amounts clipped at the demands, node by node.
func (p *problem) clip() {
	if p.clipped {
		return
	}
	for r := 0; r < p.k; r++ {
		need := p.need[r]
		p.recip[r] = recip(need)
		for i, v := range p.amount[r] {
			p.val[i][r] = min(v, need)
		}
	}
	p.clipped = true
}

// nothing reports whether the known nodes need give nothing (a None
// request served from devices of unknown NUMA node alone).
func (p *problem) nothing() bool {
	for r := 0; r < p.k; r++ {
		if p.need[r] > 0 {
			return false
		}
	}
	return true
}

// sums returns Σ_{i∈m} val[i][r] for each kind (val must be made).
func (p *problem) sums(m numa.Mask) (s [maxKinds]int64) {
	for w := uint64(m); w != 0; w &= w - 1 {
		v := &p.val[bits.TrailingZeros64(w)]
		for r := 0; r < p.k; r++ {
			s[r] += v[r]
		}
	}
	return s
}

// covers reports whether m covers every demand (val must be made).
func (p *problem) covers(m numa.Mask) bool {
	s := p.sums(m)
	for r := 0; r < p.k; r++ {
		if s[r] < p.need[r] {
			return false
		}
	}
	return true
}

// oneNode is the strategy for width 1: the lowest node of pool that covers
// alone, in O(1) (the nodes that do were found when the problem was
// loaded); exact.
func (p *problem) oneNode(pool numa.Mask) (numa.Mask, bool) {
	m := pool & p.ones
	return m & -m, m != 0
}

// lowerBound returns the fewest nodes of pool that could cover the demands
// judged kind by kind (for each kind, the fewest of its largest amounts
// that reach the demand), or -1 when even the whole pool falls short. It
// takes O(k·n log n).
func (p *problem) lowerBound(pool numa.Mask) int {
	p.clip()
	var vals [numa.MaxNodes]int64
	lb := 0
	for r := 0; r < p.k; r++ {
		n := 0
		var total int64
		for w := uint64(pool); w != 0; w &= w - 1 {
			v := p.val[bits.TrailingZeros64(w)][r]
			vals[n] = v
			total += v
			n++
		}
		if total < p.need[r] {
			return -1
		}
		if p.need[r] == 0 {
			continue
		}
		s := vals[:n]
		insertionSortDesc(s)
		var acc int64
		t := 0
		for _, v := range s {
			if acc >= p.need[r] {
				break
			}
			acc += v
			t++
		}
		lb = max(lb, t)
	}
	return lb
}

// insertionSortDesc sorts s descending: for the short lists of small pools.
func insertionSortDesc(s []int64) {
	for a := 1; a < len(s); a++ {
		for b := a; b > 0 && s[b] > s[b-1]; b-- {
			s[b], s[b-1] = s[b-1], s[b]
		}
	}
}

// visitor receives the covers an enumeration finds; visit returns false to
// stop it.
type visitor interface {
	visit(m numa.Mask) bool
}

// subsetSearch is the exact strategy for pools of at most smallPool nodes:
// a depth-first search over the subsets of exactly w nodes, in a fixed
// order of the nodes, that cuts a branch as soon as, for some kind, the
// amounts chosen plus the most the remaining nodes could add (their sum, or
// the slots left times their largest amount) fall short of the demand.
// Its worst case is the C(n, w) subsets of the width (C(16, 8) = 12,870);
// it is exact: exists finds a cover whenever one exists, each visits every
// cover.
type subsetSearch struct {
	p      *problem
	n, w   int
	ord    [smallPool]int8
	sufSum [smallPool + 1][maxKinds]int64
	sufMax [smallPool + 1][maxKinds]int64
	found  numa.Mask
	visit  visitor // each's callback
	stop   bool
}

// load sets the search up for problem p over the nodes of ord[:n].
func (s *subsetSearch) load(p *problem, w int) {
	s.p, s.w, s.stop, s.found = p, w, false, 0
	k := p.k
	s.sufSum[s.n] = [maxKinds]int64{}
	s.sufMax[s.n] = [maxKinds]int64{}
	for q := s.n - 1; q >= 0; q-- {
		v := &p.val[s.ord[q]]
		for r := 0; r < k; r++ {
			s.sufSum[q][r] = s.sufSum[q+1][r] + v[r]
			s.sufMax[q][r] = max(s.sufMax[q+1][r], v[r])
		}
	}
}

// promising reports whether the branch at position q with chosen nodes and
// partial sums can still reach every demand.
func (s *subsetSearch) promising(q, chosen int, sums *[maxKinds]int64) bool {
	rem := int64(s.w - chosen)
	if s.n-q < int(rem) {
		return false
	}
	for r := 0; r < s.p.k; r++ {
		add := min(s.sufSum[q][r], rem*s.sufMax[q][r])
		if sums[r]+add < s.p.need[r] {
			return false
		}
	}
	return true
}

// exists returns some subset of pool (at most smallPool nodes) of exactly
// w >= 2 nodes that covers the demands, trying first the nodes that cover
// most of the demands (so the first branch usually succeeds).
func (s *subsetSearch) exists(p *problem, pool numa.Mask, w int) (numa.Mask, bool) {
	p.clip()
	var score [smallPool]uint64
	s.n = 0
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		i := bits.TrailingZeros64(wd)
		var sc uint64
		for r := 0; r < p.k; r++ {
			if p.need[r] > 0 {
				sc += uint64(shareBy(p.val[i][r], p.need[r], p.recip[r]))
			}
		}
		// Insertion by score, descending; the lower index first on a tie
		// (the nodes come in ascending order).
		j := s.n
		for ; j > 0 && score[j-1] < sc; j-- {
			score[j], s.ord[j] = score[j-1], s.ord[j-1]
		}
		score[j], s.ord[j] = sc, int8(i)
		s.n++
	}
	s.load(p, w)
	if s.first(0, 0, 0, [maxKinds]int64{}) {
		return s.found, true
	}
	return 0, false
}

func (s *subsetSearch) first(q, chosen int, mask numa.Mask, sums [maxKinds]int64) bool {
	if chosen == s.w {
		for r := 0; r < s.p.k; r++ {
			if sums[r] < s.p.need[r] {
				return false
			}
		}
		s.found = mask
		return true
	}
	if !s.promising(q, chosen, &sums) {
		return false
	}
	i := int(s.ord[q])
	with := sums
	for r := 0; r < s.p.k; r++ {
		with[r] += s.p.val[i][r]
	}
	if s.first(q+1, chosen+1, mask|1<<uint(i), with) {
		return true
	}
	return s.first(q+1, chosen, mask, sums)
}

// each calls visit with every subset of pool (at most smallPool nodes) of
// exactly w nodes that covers the demands, in lexicographic order of their
// node indices, until visit returns false.
func (s *subsetSearch) each(p *problem, pool numa.Mask, w int, visit visitor) {
	if w <= 0 || w > pool.Count() {
		return
	}
	if w == 1 {
		for wd := uint64(pool & p.ones); wd != 0; wd &= wd - 1 {
			if !visit.visit(numa.Mask(1) << uint(bits.TrailingZeros64(wd))) {
				return
			}
		}
		return
	}
	p.clip()
	s.n = 0
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		s.ord[s.n] = int8(bits.TrailingZeros64(wd))
		s.n++
	}
	s.load(p, w)
	s.visit = visit
	s.all(0, 0, 0, [maxKinds]int64{})
	s.visit = nil
}

func (s *subsetSearch) all(q, chosen int, mask numa.Mask, sums [maxKinds]int64) {
	if s.stop {
		return
	}
	if chosen == s.w {
		for r := 0; r < s.p.k; r++ {
			if sums[r] < s.p.need[r] {
				return
			}
		}
		if !s.visit.visit(mask) {
			s.stop = true
		}
		return
	}
	if !s.promising(q, chosen, &sums) {
		return
	}
	i := int(s.ord[q])
	with := sums
	for r := 0; r < s.p.k; r++ {
		with[r] += s.p.val[i][r]
	}
	s.all(q+1, chosen+1, mask|1<<uint(i), with)
	s.all(q+1, chosen, mask, sums)
}
