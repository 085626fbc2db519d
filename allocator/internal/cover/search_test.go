package cover

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
)

// smallExists is the plain subset search, forced whatever the pool size
// (at most 22 nodes here): the reference the large-pool search is checked
// against.
func (p *Problem) smallExists(pool numa.Mask, w int) bool {
	var rec func(rest numa.Mask, left int, sums [MaxKinds]int64) bool
	rec = func(rest numa.Mask, left int, sums [MaxKinds]int64) bool {
		if left == 0 {
			for r := 0; r < p.K; r++ {
				if sums[r] < p.Need[r] {
					return false
				}
			}
			return true
		}
		if rest.Count() < left {
			return false
		}
		i := rest.Lowest()
		with := sums
		for r := 0; r < p.K; r++ {
			with[r] += p.Val[i][r]
		}
		return rec(rest.Without(i), left-1, with) || rec(rest.Without(i), left, sums)
	}
	return rec(pool, w, [MaxKinds]int64{})
}

// TestLargeSearchAgreesWithSubsetSearch checks the class search, the greedy
// step and the Lagrangian bounds of large pools against the plain subset
// search on random covering problems of 17-22 nodes: the same widths are
// feasible, and every cover found is a cover of exactly that width.
func TestLargeSearchAgreesWithSubsetSearch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := blankProblem()
		c.K = rapid.IntRange(1, 4).Draw(t, "kinds")
		n := rapid.IntRange(SmallPool+1, 22).Draw(t, "nodes")
		maxVal := rapid.SampledFrom([]int64{1, 2, 3, 8, 40, 1000}).Draw(t, "maxVal")
		// Trade-off shapes: some nodes rich in one kind and poor in others.
		for r := 0; r < c.K; r++ {
			c.Amount[r] = c.Store[r][:n]
		}
		for i := 0; i < n; i++ {
			rich := rapid.IntRange(0, c.K-1).Draw(t, "rich")
			for r := 0; r < c.K; r++ {
				v := rapid.Int64Range(0, maxVal).Draw(t, "v")
				if r != rich && rapid.Bool().Draw(t, "poor") {
					v /= 4
				}
				c.Amount[r][i] = v
			}
		}
		var total [MaxKinds]int64
		for i := 0; i < n; i++ {
			for r := 0; r < c.K; r++ {
				total[r] += c.Amount[r][i]
			}
		}
		for r := 0; r < c.K; r++ {
			c.Need[r] = rapid.Int64Range(1, total[r]+2).Draw(t, "need")
		}
		c.Load(n)
		c.Clip()
		pool := numa.FirstN(n)
		var s Search
		want := -1
		for w := 1; w <= n; w++ {
			ok := c.smallExists(pool, w)
			var b Bound
			s.Begin(&b) // one decision per width
			m, got := s.Exists(&c, pool, w)
			if b.Undecided > 0 {
				t.Fatalf("width %d: the search bound (%d steps) cut the search of %d nodes", w, SearchSteps, n)
			}
			if got != ok {
				t.Fatalf("width %d: large search says %v, subset search %v", w, got, ok)
			}
			if got && (m.Count() != w || !m.IsSubsetOf(pool) || !c.Covers(m)) {
				t.Fatalf("width %d: %s is not a cover of that width", w, m)
			}
			if ok && want < 0 {
				want = w
			}
		}
		var b Bound
		s.Begin(&b)
		if got, _ := s.MinWidth(&c, pool); got != want {
			t.Fatalf("minWidth %d, want %d", got, want)
		}
	})
}

// TestShareBy: the reciprocal share is share exactly, at the edges of the
// amounts (0, 1, the demand) and of the demands (1, powers of two, just
// below the bound of recip, beyond it), and on random pairs.
func TestShareBy(t *testing.T) {
	needs := []int64{1, 2, 3, 7, 1 << 20, 1<<20 + 1, 1<<32 - 1, 1 << 32, 1<<43 - 1, 1 << 43, 1 << 62}
	for _, need := range needs {
		r := recip(need)
		for _, v := range []int64{0, 1, 2, need / 3, need / 2, need - 1, need} {
			if v < 0 || v > need {
				continue
			}
			if got, want := shareBy(v, need, r), share(v, need); got != want {
				t.Fatalf("shareBy(%d, %d) = %d, share = %d", v, need, got, want)
			}
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		need := rapid.Int64Range(1, 1<<44).Draw(t, "need")
		v := rapid.Int64Range(0, need).Draw(t, "v")
		if got, want := shareBy(v, need, recip(need)), share(v, need); got != want {
			t.Fatalf("shareBy(%d, %d) = %d, share = %d", v, need, got, want)
		}
	})
}

// loadRandom loads into c k kinds on n nodes, the amounts of kind r drawn
// from 0 to maxVal(r) and its demand from 1 to maxVal(r)·n/2+1.
func (c *Problem) loadRandom(t *rapid.T, k, n int, maxVal func(r int) int64) {
	c.K = k
	for r := 0; r < k; r++ {
		mv := maxVal(r)
		c.Amount[r] = c.Store[r][:n]
		for i := 0; i < n; i++ {
			c.Amount[r][i] = rapid.Int64Range(0, mv).Draw(t, "v")
		}
		c.Need[r] = rapid.Int64Range(1, mv*int64(n)/2+1).Draw(t, "need")
	}
	c.Load(n)
}

// drawLarge draws a random Problem of 1-4 kinds on 17-40 nodes (see
// loadRandom), its amounts at most maxVal.
func drawLarge(t *rapid.T) (c *Problem, k, n int, maxVal int64) {
	c = new(Problem)
	*c = blankProblem()
	k = rapid.IntRange(1, 4).Draw(t, "kinds")
	n = rapid.IntRange(SmallPool+1, 40).Draw(t, "nodes")
	maxVal = rapid.SampledFrom([]int64{1, 3, 40, 1000}).Draw(t, "maxVal")
	c.loadRandom(t, k, n, func(int) int64 { return maxVal })
	return c, k, n, maxVal
}

// TestBoundTableAgrees: the table of top sums (buildTop) gives bound the
// same answers as the walk along the orders, on random problems of 17-40
// nodes and random branches (class, slots left, partial sums).
func TestBoundTableAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, _, n, _ := drawLarge(t)
		var cs classSearch
		cs.prepare(c, numa.FirstN(n))
		if cs.uniform {
			return
		}
		cs.classify()
		for q := 0; q < 50; q++ {
			cl := rapid.IntRange(0, cs.nc-1).Draw(t, "cl")
			rem := rapid.IntRange(1, n).Draw(t, "rem")
			var sums [MaxKinds]int64
			for r := 0; r < c.K; r++ {
				sums[r] = rapid.Int64Range(0, c.Need[r]).Draw(t, "sum")
			}
			cs.topOK = false
			walk := cs.bound(cl, rem, &sums)
			cs.buildTop()
			if table := cs.bound(cl, rem, &sums); table != walk {
				t.Fatalf("class %d, %d slots, sums %v: the table says %v, the walk %v", cl, rem, sums[:c.K], table, walk)
			}
		}
	})
}

// TestAtLeastAgrees: the class search's atLeast (the nodes with at least
// given amounts of every kind, read from the orders by kind) names exactly
// the nodes of the pool that the check node by node names, on random
// problems of 17-40 nodes (amounts negative too), random sub-pools and
// random thresholds (below, at and above the amounts).
func TestAtLeastAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, k, n, maxVal := drawLarge(t)
		if rapid.Bool().Draw(t, "negative") {
			c.Amount[0][rapid.IntRange(0, n-1).Draw(t, "at")] = -rapid.Int64Range(1, maxVal).Draw(t, "neg")
		}
		var cs classSearch
		cs.prepare(c, numa.FirstN(n))
		if cs.indexAtLeast(c, numa.FirstN(n)) {
			t.Fatal("indexed before the orders are sorted")
		}
		if cs.uniform {
			return
		}
		cs.sortOrders()
		sub := numa.Mask(rapid.Uint64Range(1, 1<<uint(n)-1).Draw(t, "pool"))
		if !cs.indexAtLeast(c, sub) {
			t.Fatal("not indexed with every order sorted")
		}
		for q := 0; q < 30; q++ {
			var want [MaxKinds]int64
			for r := 0; r < k; r++ {
				want[r] = rapid.Int64Range(-2, c.Need[r]+2).Draw(t, "want")
			}
			var ref numa.Mask
			for i := 0; i < n; i++ {
				ok := true
				for r := 0; r < k; r++ {
					ok = ok && c.Val[i][r] >= want[r]
				}
				if ok {
					ref = ref.With(i)
				}
			}
			if got := cs.atLeast(&want) & sub; got != ref&sub {
				t.Fatalf("want %v: atLeast %s, node by node %s", want[:k], got, ref&sub)
			}
		}
	})
}

// blankProblem returns a Problem with memory of its own for Val and Store.
func blankProblem() Problem {
	return Problem{Val: new([numa.MaxNodes][MaxKinds]int64), Store: new([MaxKinds][numa.MaxNodes]int64)}
}
