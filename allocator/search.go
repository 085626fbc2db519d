package allocator

import (
	"math/bits"
	"slices"

	"github.com/numaplace/numaplace/numa"
)

// maxKinds is the most resource kinds one request may ask for at once.
const maxKinds = 16

// cover is the covering problem at the heart of the allocator: given, for
// each NUMA node i and each demanded resource kind r, an amount val[i][r]
// (capacity or free, clipped at the demand), find sets M of nodes with
// Σ_{i∈M} val[i][r] >= need[r] for every r.
//
// Complexity. minWidth tries widths from a lower bound (for each kind, the
// fewest nodes whose largest amounts reach the demand) upward, and exists
// searches the subsets of one width depth-first with two prunings: a branch
// stops as soon as, for some kind, the amounts already chosen plus the
// best the remaining nodes could add (their sum, or the width left times
// their maximum) fall short; and on pools of more than 12 nodes a node is
// dropped when at least `width` other nodes dominate it (have at least as
// much of every kind), since one of them can always replace it. With a
// single demanded kind the lower bound is exact and the first branch
// succeeds; with several kinds the search is exact and its worst case is
// the number of width-subsets of the pool, C(64, 32) in theory, but the
// prunings cut it to a few hundred nodes visited on every machine shape we
// could construct (see the allocator benchmarks for the worst we found).
type cover struct {
	gen  uint64 // changes whenever the amounts are reloaded
	k    int
	need [maxKinds]int64
	val  [numa.MaxNodes][maxKinds]int64
}

// set records node i's amount of kind r, clipped at the demand.
func (c *cover) set(i, r int, v int64) {
	c.val[i][r] = min(v, c.need[r])
}

// sums returns Σ_{i∈m} val[i][r] for each kind.
func (c *cover) sums(m numa.Mask) (s [maxKinds]int64) {
	for w := uint64(m); w != 0; w &= w - 1 {
		i := bits.TrailingZeros64(w)
		for r := 0; r < c.k; r++ {
			s[r] += c.val[i][r]
		}
	}
	return s
}

// coversNode reports whether node i alone covers every demand.
func (c *cover) coversNode(i int) bool {
	for r := 0; r < c.k; r++ {
		if c.val[i][r] < c.need[r] {
			return false
		}
	}
	return true
}

// covers reports whether m covers every demand.
func (c *cover) covers(m numa.Mask) bool {
	s := c.sums(m)
	for r := 0; r < c.k; r++ {
		if s[r] < c.need[r] {
			return false
		}
	}
	return true
}

// lowerBound returns the fewest nodes of pool that could cover the demands
// judged kind by kind, or -1 when even the whole pool falls short.
func (c *cover) lowerBound(pool numa.Mask) int {
	var vals [numa.MaxNodes]int64
	lb := 0
	for r := 0; r < c.k; r++ {
		n := 0
		var total int64
		for w := uint64(pool); w != 0; w &= w - 1 {
			v := c.val[bits.TrailingZeros64(w)][r]
			vals[n] = v
			total += v
			n++
		}
		if total < c.need[r] {
			return -1
		}
		if c.need[r] == 0 {
			continue
		}
		s := vals[:n]
		slices.Sort(s)
		var acc int64
		t := 0
		for j := n - 1; j >= 0 && acc < c.need[r]; j-- {
			acc += s[j]
			t++
		}
		lb = max(lb, t)
	}
	return lb
}

// minWidth returns the fewest nodes of pool that cover the demands, or -1.
func (c *cover) minWidth(pool numa.Mask, s *dfs) int {
	w, _ := c.minCover(pool, s)
	return w
}

// minCover returns the fewest nodes of pool that cover the demands and one
// such cover, or -1.
func (c *cover) minCover(pool numa.Mask, s *dfs) (int, numa.Mask) {
	if m, ok := c.exists(pool, 1, s); ok {
		return 1, m // the common case, without sorting
	}
	if pool.Count() > smallPool {
		return c.minWidthLarge(pool, &s.cs)
	}
	lb := c.lowerBound(pool)
	if lb < 0 {
		return -1, 0
	}
	if lb == 0 {
		return 0, 0
	}
	for w := max(lb, 2); w <= pool.Count(); w++ {
		if m, ok := c.exists(pool, w, s); ok {
			return w, m
		}
	}
	return -1, 0
}

// dfs is the state of one depth-first search over subsets of a fixed width.
type dfs struct {
	c      *cover
	n      int
	w      int
	ord    [numa.MaxNodes]int8
	sufSum [numa.MaxNodes + 1][maxKinds]int64
	sufMax [numa.MaxNodes + 1][maxKinds]int64
	found  numa.Mask
	// the search of large pools
	cs classSearch
	// enumeration
	ch     *chooser
	stop   bool
	visits int
}

func (s *dfs) prepare() {
	k := s.c.k
	s.sufSum[s.n] = [maxKinds]int64{}
	s.sufMax[s.n] = [maxKinds]int64{}
	for p := s.n - 1; p >= 0; p-- {
		v := &s.c.val[s.ord[p]]
		for r := 0; r < k; r++ {
			s.sufSum[p][r] = s.sufSum[p+1][r] + v[r]
			s.sufMax[p][r] = max(s.sufMax[p+1][r], v[r])
		}
	}
}

// promising reports whether the branch at position p with chosen nodes and
// partial sums can still reach every demand.
func (s *dfs) promising(p, chosen int, sums *[maxKinds]int64) bool {
	rem := int64(s.w - chosen)
	if s.n-p < int(rem) {
		return false
	}
	for r := 0; r < s.c.k; r++ {
		add := min(s.sufSum[p][r], rem*s.sufMax[p][r])
		if sums[r]+add < s.c.need[r] {
			return false
		}
	}
	return true
}

func (s *dfs) first(p, chosen int, mask numa.Mask, sums [maxKinds]int64) bool {
	s.visits++
	if chosen == s.w {
		for r := 0; r < s.c.k; r++ {
			if sums[r] < s.c.need[r] {
				return false
			}
		}
		s.found = mask
		return true
	}
	if !s.promising(p, chosen, &sums) {
		return false
	}
	i := int(s.ord[p])
	with := sums
	for r := 0; r < s.c.k; r++ {
		with[r] += s.c.val[i][r]
	}
	if s.first(p+1, chosen+1, mask|1<<uint(i), with) {
		return true
	}
	return s.first(p+1, chosen, mask, sums)
}

// exists returns some subset of pool of exactly w nodes that covers the
// demands. It is exact.
func (c *cover) exists(pool numa.Mask, w int, s *dfs) (numa.Mask, bool) {
	if w <= 0 || w > pool.Count() {
		return 0, false
	}
	if w == 1 {
		for wd := uint64(pool); wd != 0; wd &= wd - 1 {
			if i := bits.TrailingZeros64(wd); c.coversNode(i) {
				return numa.Mask(1) << uint(i), true
			}
		}
		return 0, false
	}
	if pool.Count() > smallPool {
		if s.cs.c != c || s.cs.pool != pool || s.cs.gen != c.gen {
			c.prepareLarge(pool, &s.cs)
		}
		return c.existsLarge(w, &s.cs)
	}
	s.c, s.w, s.n, s.ch, s.stop = c, w, 0, nil, false
	// Order: the nodes that cover most of the demands first, so the first
	// branch usually succeeds.
	var score [numa.MaxNodes]uint64
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		i := bits.TrailingZeros64(wd)
		var sc uint64
		for r := 0; r < c.k; r++ {
			if c.need[r] > 0 {
				sc += uint64(c.val[i][r]) * (1 << 20) / uint64(c.need[r])
			}
		}
		score[i] = sc
		s.ord[s.n] = int8(i)
		s.n++
	}
	ord := s.ord[:s.n]
	slices.SortFunc(ord, func(a, b int8) int {
		if score[a] != score[b] {
			if score[a] > score[b] {
				return -1
			}
			return 1
		}
		return int(a) - int(b)
	})
	s.prepare()
	if s.first(0, 0, 0, [maxKinds]int64{}) {
		return s.found, true
	}
	return 0, false
}

func (s *dfs) all(p, chosen int, mask numa.Mask, sums [maxKinds]int64) {
	if s.stop {
		return
	}
	s.visits++
	if chosen == s.w {
		for r := 0; r < s.c.k; r++ {
			if sums[r] < s.c.need[r] {
				return
			}
		}
		if !s.ch.visit(mask) {
			s.stop = true
		}
		return
	}
	if !s.promising(p, chosen, &sums) {
		return
	}
	i := int(s.ord[p])
	with := sums
	for r := 0; r < s.c.k; r++ {
		with[r] += s.c.val[i][r]
	}
	s.all(p+1, chosen+1, mask|1<<uint(i), with)
	s.all(p+1, chosen, mask, sums)
}

// each calls ch.visit with every subset of pool of exactly w nodes that
// covers the demands, in lexicographic order of their node indices, until
// visit returns false.
func (c *cover) each(pool numa.Mask, w int, s *dfs, ch *chooser) {
	if w <= 0 || w > pool.Count() {
		return
	}
	if w == 1 {
		for wd := uint64(pool); wd != 0; wd &= wd - 1 {
			if i := bits.TrailingZeros64(wd); c.coversNode(i) && !ch.visit(numa.Mask(1)<<uint(i)) {
				return
			}
		}
		return
	}
	s.c, s.w, s.n, s.ch, s.stop = c, w, 0, ch, false
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		s.ord[s.n] = int8(bits.TrailingZeros64(wd))
		s.n++
	}
	s.prepare()
	s.all(0, 0, 0, [maxKinds]int64{})
}
