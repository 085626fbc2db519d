package cover

import (
	"math/bits"

	"github.com/numaplace/numaplace/numa"
)

// MaxKinds is the most resource kinds one request may ask for at once.
const MaxKinds = 16

// SmallPool is the largest pool the exact subset search takes; larger
// pools go to the class search.
const SmallPool = 16

// Problem is one covering question of a decision: for each demanded kind r
// and NUMA node i an amount (the node's free units, or its capacity) and
// the demand Need[r] the known nodes must give. A set M of nodes covers
// when Σ_{i∈M} min(Amount[r][i], Need[r]) >= Need[r] for every r. The
// caller loads each Problem once per decision ([Problem.Load] or
// [Problem.SetOnes] after filling Amount and Need) and never changes it
// afterwards, so the strategies may keep what they derive from it for the
// rest of the decision.
//
// The amounts are kept as read, kind by kind, with the set of nodes that
// cover alone (Ones), which answers every question of width 1; the
// node-major copy clipped at the demands (Val), which the wider searches
// read, is made on first use ([Problem.Clip]).
type Problem struct {
	// K is the number of demanded kinds (at most MaxKinds), N the
	// machine's nodes.
	K, N int
	// Need is the demand of each kind on known nodes.
	Need  [MaxKinds]int64
	recip [MaxKinds]uint64 // recip(Need[r]), made with Val
	// Amount holds, by kind, one amount per node: a view of the caller's
	// counters, or a row of Store.
	Amount [MaxKinds][]int64
	// Ones is the set of nodes whose amounts cover alone (set by Load or
	// SetOnes).
	Ones    numa.Mask
	clipped bool // Val holds the amounts clipped at the demands
	// Val is the memory of the amounts clipped at the demands, by node
	// (made by Clip); Store, memory the caller may fill Amount's rows
	// from. Both are the caller's, set before the Problem is loaded.
	Val   *[numa.MaxNodes][MaxKinds]int64
	Store *[MaxKinds][numa.MaxNodes]int64
}

// Load finishes loading the amounts of the Problem's K kinds on n nodes:
// it computes Ones and marks Val as not made yet. O(k·n).
func (p *Problem) Load(n int) {
	p.N, p.clipped = n, false
	ones := numa.FirstN(n)
	for r := 0; r < p.K; r++ {
		need := p.Need[r]
		for i, v := range p.Amount[r] {
			if v < need {
				ones &^= 1 << uint(i)
			}
		}
	}
	p.Ones = ones
}

// SetOnes is Load for a caller that found the nodes covering alone
// itself: it sets N to n and Ones to ones (which must be the nodes whose
// Amount reaches Need in every kind) and marks Val as not made yet.
func (p *Problem) SetOnes(n int, ones numa.Mask) {
	p.N, p.Ones, p.clipped = n, ones, false
}

// Clip makes Val, the amounts clipped at the demands, node by node, once
// per loading: O(k·n).
func (p *Problem) Clip() {
	if p.clipped {
		return
	}
	val := p.Val
	for r := range min(p.K, MaxKinds) {
		need := p.Need[r]
		p.recip[r] = recip(need)
		amount := p.Amount[r]
		for i, v := range amount[:min(len(amount), numa.MaxNodes)] {
			val[i][r] = min(v, need)
		}
	}
	p.clipped = true
}

// Nothing reports whether the known nodes need give nothing (a None
// request served from devices of unknown NUMA node alone).
func (p *Problem) Nothing() bool {
	for r := 0; r < p.K; r++ {
		if p.Need[r] > 0 {
			return false
		}
	}
	return true
}

// Sums returns Σ_{i∈m} Val[i][r] for each kind (Val must be made, see
// Clip).
func (p *Problem) Sums(m numa.Mask) (s [MaxKinds]int64) {
	val, k := p.Val, min(p.K, MaxKinds)
	for w := uint64(m); w != 0; w &= w - 1 {
		v := &val[bits.TrailingZeros64(w)&(numa.MaxNodes-1)]
		for r := 0; r < k; r++ {
			s[r] += v[r]
		}
	}
	return s
}

// Covers reports whether m covers every demand (Val must be made), kind by
// kind, stopping at the first kind m falls short of.
func (p *Problem) Covers(m numa.Mask) bool {
	val := p.Val
	for r := range min(p.K, MaxKinds) {
		var s int64
		for w := uint64(m); w != 0; w &= w - 1 {
			s += val[bits.TrailingZeros64(w)&(numa.MaxNodes-1)][r]
		}
		if s < p.Need[r] {
			return false
		}
	}
	return true
}

// OneNode is the strategy for width 1: the lowest node of pool that covers
// alone, in O(1) (the nodes that do were found when the Problem was
// loaded); exact.
func (p *Problem) OneNode(pool numa.Mask) (numa.Mask, bool) {
	m := pool & p.Ones
	return m & -m, m != 0
}

// lowerBound returns the fewest nodes of pool that could cover the demands
// judged kind by kind (for each kind, the fewest of its largest amounts
// that reach the demand), or -1 when even the whole pool falls short. It
// takes O(k·n log n).
func (p *Problem) lowerBound(pool numa.Mask) int {
	p.Clip()
	var vals [numa.MaxNodes]int64
	lb := 0
	for r := 0; r < p.K; r++ {
		n := 0
		var total int64
		for w := uint64(pool); w != 0; w &= w - 1 {
			v := p.Val[bits.TrailingZeros64(w)][r]
			vals[n] = v
			total += v
			n++
		}
		if total < p.Need[r] {
			return -1
		}
		if p.Need[r] == 0 {
			continue
		}
		s := vals[:n]
		insertionSortDesc(s)
		var acc int64
		t := 0
		for _, v := range s {
			if acc >= p.Need[r] {
				break
			}
			acc += v
			t++
		}
		lb = max(lb, t)
	}
	return lb
}

// insertionSortDesc sorts s descending: for short lists.
func insertionSortDesc(s []int64) {
	for a := 1; a < len(s); a++ {
		for b := a; b > 0 && s[b] > s[b-1]; b-- {
			s[b], s[b-1] = s[b-1], s[b]
		}
	}
}

// selectShort is the length below which the selections sort.
const selectShort = 12

// partition3 reorders v into the values above pivot, those equal to it and
// those below, and returns where the second and third parts start.
func partition3(v []int64, pivot int64) (lt, gt int) {
	i, gt := 0, len(v) // v[:lt] > pivot, v[lt:i] == pivot, v[gt:] < pivot
	for i < gt {
		switch x := v[i]; {
		case x > pivot:
			v[i], v[lt] = v[lt], x
			lt++
			i++
		case x < pivot:
			gt--
			v[i], v[gt] = v[gt], x
		default:
			i++
		}
	}
	return lt, gt
}

// median3 returns the median of the first, middle and last of v (not empty).
func median3(v []int64) int64 {
	a, b, c := v[0], v[len(v)/2], v[len(v)-1]
	return max(min(a, b), min(max(a, b), c))
}

// SelectLargest reorders v so that its w largest values come first (in no
// particular order): O(len(v)) steps on average, O(len(v)²) at worst.
func SelectLargest(v []int64, w int) {
	lo, hi := 0, len(v) // v[:lo] >= v[lo:hi] >= v[hi:], lo <= w <= hi
	for w > lo && w < hi {
		if hi-lo <= selectShort {
			insertionSortDesc(v[lo:hi])
			return
		}
		lt, gt := partition3(v[lo:hi], median3(v[lo:hi]))
		switch {
		case w < lo+lt:
			hi = lo + lt
		case w > lo+gt:
			lo += gt
		default:
			return
		}
	}
}

// SumLargest returns the sum of the w largest values of v, which it
// reorders (see SelectLargest).
func SumLargest(v []int64, w int) int64 {
	w = min(max(w, 0), len(v))
	SelectLargest(v, w)
	var t int64
	for _, x := range v[:w] {
		t += x
	}
	return t
}

// fewestLargest returns the fewest of the largest values of v (none
// negative) whose sum reaches need, or -1 when all of them fall short; it
// may reorder v. Values less than countingRange apart are counted
// (fewestCounted, O(len(v) + countingRange)); others are selected like
// SelectLargest does, O(len(v)) steps on average.
func fewestLargest(v []int64, need int64) int {
	if need <= 0 {
		return 0
	}
	if len(v) > 0 {
		mx, mn := v[0], v[0]
		for _, x := range v {
			mx, mn = max(mx, x), min(mn, x)
		}
		if mx-mn < countingRange && mn >= 0 && mx < 1<<55 && len(v) < 1<<8 {
			return fewestCounted(v, need, mx, mn)
		}
	}
	lo, hi := 0, len(v) // v[:lo] taken (need is what they leave), v[:lo] >= v[lo:hi] >= v[hi:]
	for hi-lo > selectShort {
		pivot := median3(v[lo:hi])
		lt, gt := partition3(v[lo:hi], pivot)
		lt, gt = lo+lt, lo+gt
		var above int64 // the values above pivot, up to need
		for _, x := range v[lo:lt] {
			if above += x; above >= need {
				break
			}
		}
		if above >= need {
			hi = lt
			continue
		}
		need -= above
		if pivot > 0 {
			c := need / pivot
			if need%pivot != 0 {
				c++
			}
			if c <= int64(gt-lt) {
				return lt + int(c)
			}
			need -= pivot * int64(gt-lt)
		}
		lo = gt
	}
	insertionSortDesc(v[lo:hi])
	for j, x := range v[lo:hi] {
		if need -= x; need <= 0 {
			return lo + j + 1
		}
	}
	return -1
}

// fewestCounted is fewestLargest for need > 0 and fewer than 256 values
// between mn >= 0 and mx < 2^55, less than countingRange apart: it counts the values of each
// amount and takes the amounts from the largest down.
func fewestCounted(v []int64, need int64, mx, mn int64) int {
	var count [countingRange]uint8
	for _, x := range v {
		count[uint64(x-mn)%countingRange]++
	}
	taken := 0
	for x := mx; x > 0 && x >= mn; x-- {
		c := int64(count[uint64(x-mn)%countingRange])
		if c == 0 {
			continue
		}
		if x*c >= need {
			return taken + int((need+x-1)/x)
		}
		taken += int(c)
		need -= x * c
	}
	return -1
}

// fewestFirst returns the fewest of ord's first nodes (ord by amount of
// kind r descending) whose amounts of kind r reach the demand, or -1.
func fewestFirst(p *Problem, r int, ord []int8) int {
	var acc int64
	for t, i := range ord {
		if acc >= p.Need[r] {
			return t
		}
		acc += p.Val[i][r]
	}
	if acc < p.Need[r] {
		return -1
	}
	return len(ord)
}

// mayCover reports whether, kind by kind, the w largest amounts of pool
// reach the demand: false proves that no w nodes of pool cover (it is
// the per-kind bound of the searches' first step). O(k·n) on average for
// n nodes of the pool (see SumLargest).
func (p *Problem) mayCover(pool numa.Mask, w int) bool {
	p.Clip()
	var vals [numa.MaxNodes]int64
	val := p.Val
	for r := range min(p.K, MaxKinds) {
		if p.Need[r] == 0 {
			continue
		}
		n := 0
		for wd := uint64(pool); wd != 0; wd &= wd - 1 {
			vals[n&(numa.MaxNodes-1)] = val[bits.TrailingZeros64(wd)&(numa.MaxNodes-1)][r]
			n++
		}
		if SumLargest(vals[:n], w) < p.Need[r] {
			return false
		}
	}
	return true
}

// uniformOn reports whether every node of pool has the same amounts
// clipped at the demands (val must be made).
func (p *Problem) uniformOn(pool numa.Mask) bool {
	first := &p.Val[pool.Lowest()]
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		v := &p.Val[bits.TrailingZeros64(wd)]
		for r := 0; r < p.K; r++ {
			if v[r] != first[r] {
				return false
			}
		}
	}
	return true
}

// lowest returns the w lowest nodes of pool (all of them when it has fewer).
func lowest(pool numa.Mask, w int) numa.Mask {
	m := uint64(pool)
	for range max(pool.Count()-w, 0) {
		m &^= 1 << uint(63-bits.LeadingZeros64(m))
	}
	return numa.Mask(m)
}

// uniformWidth returns the fewest of n identical nodes, each with the
// amounts v clipped at the demands, that cover, or -1.
func (p *Problem) uniformWidth(v *[MaxKinds]int64, n int) int {
	w := 1
	for r := 0; r < p.K; r++ {
		if p.Need[r] == 0 {
			continue
		}
		if v[r] == 0 {
			return -1
		}
		t := p.Need[r] / v[r]
		if p.Need[r]%v[r] != 0 {
			t++
		}
		if t > int64(n) {
			return -1
		}
		w = max(w, int(t))
	}
	return w
}

// subsetSearch is the exact strategy for pools of at most SmallPool nodes:
// a depth-first search over the subsets of exactly w nodes, in a fixed
// order of the nodes, that cuts a branch as soon as, for some kind, the
// amounts chosen plus the most the remaining nodes could add (their sum, or
// the slots left times their largest amount) fall short of the demand.
// Its worst case is the C(n, w) subsets of the width (C(16, 8) = 12,870);
// it is exact: exists finds a cover whenever one exists, each visits every
// cover.
type subsetSearch struct {
	p      *Problem
	n, w   int
	ord    [SmallPool]int8
	sufSum [SmallPool + 1][MaxKinds]int64
	sufMax [SmallPool + 1][MaxKinds]int64
	found  numa.Mask
	visit  Visitor // each's callback
	stop   bool
}

// load sets the search up for Problem p over the nodes of ord[:n].
func (s *subsetSearch) load(p *Problem, w int) {
	s.p, s.w, s.stop, s.found = p, w, false, 0
	k := p.K
	s.sufSum[s.n] = [MaxKinds]int64{}
	s.sufMax[s.n] = [MaxKinds]int64{}
	for q := s.n - 1; q >= 0; q-- {
		v := &p.Val[s.ord[q]]
		for r := 0; r < k; r++ {
			s.sufSum[q][r] = s.sufSum[q+1][r] + v[r]
			s.sufMax[q][r] = max(s.sufMax[q+1][r], v[r])
		}
	}
}

// promising reports whether the branch at position q with chosen nodes and
// partial sums can still reach every demand.
func (s *subsetSearch) promising(q, chosen int, sums *[MaxKinds]int64) bool {
	rem := int64(s.w - chosen)
	if s.n-q < int(rem) {
		return false
	}
	for r := 0; r < s.p.K; r++ {
		add := min(s.sufSum[q][r], rem*s.sufMax[q][r])
		if sums[r]+add < s.p.Need[r] {
			return false
		}
	}
	return true
}

// exists returns some subset of pool (at most SmallPool nodes) of exactly
// w >= 2 nodes that covers the demands, trying first the nodes that cover
// most of the demands (so the first branch usually succeeds).
func (s *subsetSearch) exists(p *Problem, pool numa.Mask, w int) (numa.Mask, bool) {
	if !p.mayCover(pool, w) {
		return 0, false
	}
	var score [SmallPool]uint64
	s.n = 0
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		i := bits.TrailingZeros64(wd)
		var sc uint64
		for r := 0; r < p.K; r++ {
			if p.Need[r] > 0 {
				sc += uint64(shareBy(p.Val[i][r], p.Need[r], p.recip[r]))
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
	if s.first(0, 0, 0, [MaxKinds]int64{}) {
		return s.found, true
	}
	return 0, false
}

func (s *subsetSearch) first(q, chosen int, mask numa.Mask, sums [MaxKinds]int64) bool {
	if chosen == s.w {
		for r := 0; r < s.p.K; r++ {
			if sums[r] < s.p.Need[r] {
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
	for r := 0; r < s.p.K; r++ {
		with[r] += s.p.Val[i][r]
	}
	if s.first(q+1, chosen+1, mask|1<<uint(i), with) {
		return true
	}
	return s.first(q+1, chosen, mask, sums)
}

// each calls visit with every subset of pool (at most SmallPool nodes) of
// exactly w nodes that covers the demands, in lexicographic order of their
// node indices, until visit returns false.
func (s *subsetSearch) each(p *Problem, pool numa.Mask, w int, visit Visitor) {
	if w <= 0 || w > pool.Count() {
		return
	}
	if w == 1 {
		for wd := uint64(pool & p.Ones); wd != 0; wd &= wd - 1 {
			if !visit.Visit(numa.Mask(1) << uint(bits.TrailingZeros64(wd))) {
				return
			}
		}
		return
	}
	if !p.mayCover(pool, w) {
		return // no cover at all
	}
	s.n = 0
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		s.ord[s.n] = int8(bits.TrailingZeros64(wd))
		s.n++
	}
	s.load(p, w)
	s.visit = visit
	s.all(0, 0, 0, [MaxKinds]int64{})
	s.visit = nil
}

func (s *subsetSearch) all(q, chosen int, mask numa.Mask, sums [MaxKinds]int64) {
	if s.stop {
		return
	}
	if chosen == s.w {
		for r := 0; r < s.p.K; r++ {
			if sums[r] < s.p.Need[r] {
				return
			}
		}
		if !s.visit.Visit(mask) {
			s.stop = true
		}
		return
	}
	if !s.promising(q, chosen, &sums) {
		return
	}
	i := int(s.ord[q])
	with := sums
	for r := 0; r < s.p.K; r++ {
		with[r] += s.p.Val[i][r]
	}
	s.all(q+1, chosen+1, mask|1<<uint(i), with)
	s.all(q+1, chosen, mask, sums)
}
