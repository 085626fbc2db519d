package cover

import (
	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/numa"
)

// Search is the working memory of the covering strategies for one
// decision: the subset search's and the class search's (about 50 KB). The
// class search keeps its preparation for one problem and one pool between
// calls of the same decision (a decision never changes a problem once
// loaded); [Search.Begin] drops it and gives the search the decision's
// step bound. The zero value is ready for Begin.
type Search struct {
	sub   subsetSearch
	large classSearch
}

// Begin starts a decision on s: no preparation is kept, and the class
// search counts its steps in b (which must outlive the decision's calls).
func (s *Search) Begin(b *Bound) {
	s.large.p, s.large.b = nil, b
}

// End drops the references s holds to the decision's problems and bound.
func (s *Search) End() {
	s.large.p, s.large.b = nil, nil
}

// Exists returns some w nodes of pool that cover p's demands, and whether
// there are any. It is the one place where the strategy is chosen: one
// node for width 1 ([Problem.OneNode]), the exact subset search on pools
// of at most [SmallPool] nodes, the class search (within the decision's
// [Bound]) on larger pools.
//
// Before preparing the class search for a pool it does not hold, the
// per-kind bound of the search's first step is judged without sorting
// (mayCover): when it fails, no w nodes cover, and the answer is the class
// search's (false, that one step counted in the decision's bound) without
// its preparation. A pool of identical nodes, or a decision whose bound is
// spent, takes the class search's own path, as does every call while
// [general.On] is set.
func (s *Search) Exists(p *Problem, pool numa.Mask, w int) (numa.Mask, bool) {
	switch n := pool.Count(); {
	case w <= 0 || w > n:
		return 0, false
	case w == 1:
		return p.OneNode(pool)
	case n <= SmallPool:
		return s.sub.exists(p, pool, w)
	}
	b := s.large.b
	if !general.On && !s.large.prepared(p, pool) && b.Used < b.limit() {
		p.Clip()
		if !p.uniformOn(pool) && !p.mayCover(pool, w) {
			s.large.p = nil // as if prepared for pool: the next pool is prepared anew
			b.Used++
			return 0, false
		}
	}
	s.prepareLarge(p, pool)
	return s.large.exists(w)
}

// prepareLarge makes the class search hold problem p and pool.
func (s *Search) prepareLarge(p *Problem, pool numa.Mask) {
	if !s.large.prepared(p, pool) {
		s.large.prepare(p, pool)
	}
}

// MinWidth returns the fewest nodes of pool that cover p's demands and one
// such cover, or -1 when none does or the bound cut the search (then the
// decision's [Bound] counts it undecided; for a soft bound the answer is
// the narrowest cover known instead, and Approx is set). Widths are tried
// upward from a lower bound through [Search.Exists]; on large pools the
// class search skips the widths its Lagrangian bounds rule out. Nodes that
// cover alone answer at once; identical nodes of a small pool by
// arithmetic (but while [general.On] is set).
func (s *Search) MinWidth(p *Problem, pool numa.Mask) (int, numa.Mask) {
	if m, ok := p.OneNode(pool); ok {
		return 1, m // the common case, without sorting
	}
	if pool.Count() > SmallPool {
		s.prepareLarge(p, pool)
		return s.large.minWidth()
	}
	p.Clip()
	if !general.On && pool != 0 && p.uniformOn(pool) { // identical nodes: arithmetic
		w := p.uniformWidth(&p.Val[pool.Lowest()], pool.Count())
		if w < 0 {
			return -1, 0
		}
		return w, lowest(pool, w)
	}
	lb := p.lowerBound(pool)
	if lb < 0 {
		return -1, 0
	}
	if lb == 0 {
		return 0, 0
	}
	for w := max(lb, 2); w <= pool.Count(); w++ {
		if m, ok := s.Exists(p, pool, w); ok {
			return w, m
		}
	}
	return -1, 0
}

// Visitor receives the covers [Search.Each] finds; Visit returns false to
// stop the enumeration.
type Visitor interface {
	Visit(m numa.Mask) bool
}

// Each calls v.Visit with every subset of pool (at most [SmallPool] nodes)
// of exactly w nodes that covers p's demands, in lexicographic order of
// their node indices, until Visit returns false. Its worst case is the
// C(n, w) subsets of the width.
func (s *Search) Each(p *Problem, pool numa.Mask, w int, v Visitor) {
	s.sub.each(p, pool, w, v)
}

// IndexAtLeast reports whether [Search.AtLeast] can answer for problem p
// on pool: the class search is prepared for p on a pool holding pool (by
// an earlier [Search.Exists] or [Search.MinWidth] of the decision), with
// every order by kind sorted.
func (s *Search) IndexAtLeast(p *Problem, pool numa.Mask) bool {
	return s.large.indexAtLeast(p, pool)
}

// AtLeast returns the nodes of the prepared pool whose amount of every
// kind r, clipped at the demand, reaches want[r], after
// [Search.IndexAtLeast] answered true: O(k log n) for k kinds and n nodes
// (a kind's first such call adds O(n)).
func (s *Search) AtLeast(want *[MaxKinds]int64) numa.Mask {
	return s.large.atLeast(want)
}
