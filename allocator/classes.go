package allocator

import (
	"math/bits"
	"slices"

	"github.com/numaplace/numaplace/numa"
)

// The search for pools of more than smallPool nodes. Three steps, each
// exact:
//
//  1. Greedy: the w nodes with the largest combined share of the demands,
//     then the w largest of each kind alone. Most feasible widths end here.
//  2. Lagrangian bounds: for a few weightings λ of the kinds, if the w
//     largest weighted shares sum to less than the weighted demand, no set
//     of w nodes covers (every cover would exceed it). This proves most
//     infeasible widths, including the trade-off cases (GPU-rich nodes
//     short of CPUs and the other way round) that per-kind bounds miss.
//  3. A depth-first search over classes: the nodes are grouped by their
//     amounts of every kind but one (the kind with the most distinct
//     values, usually CPUs), and inside a class only the nodes with the
//     largest amounts of that kind need ever be chosen (an exchange
//     argument), so the search chooses how many nodes each class gives
//     instead of which ones. Branches are cut by per-kind top-k bounds and
//     the uniform Lagrangian bound over the classes still open.
//
// The worst case of step 3 is exponential in the number of classes (every
// node distinct in every kind, with demands that no weighting separates),
// so it is bounded: one decision (a Fit, an Allocate, a Score, the widths of
// a Resize) takes at most searchSteps steps of the search over classes in
// all, each O(k·n) for k kinds and n nodes. A search cut by the bound is
// undecided, and the decision refuses the request with [ErrSearchLimit]
// rather than guess a width. The hardest shapes we built (see
// BenchmarkWorstNUMA64) stay far below the bound.

// smallPool is the largest pool searched by the plain subset search.
const smallPool = 16

// shortSearch is the step budget of the first search over classes, before
// the Lagrangian bounds are computed.
const shortSearch = 512

// searchSteps bounds the steps of the search over classes in one decision.
const searchSteps = 1 << 15

// shareScale is the fixed-point scale of a node's share of a demand.
const shareScale = 1 << 20

// share returns ceil(v * shareScale / need): rounding up keeps every bound
// that uses shares safe.
// v is at most need (amounts are clipped at the demand), so the 128-bit
// quotient fits.
func share(v, need int64) int64 {
	if need <= 0 || v <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(v), shareScale)
	lo, carry := bits.Add64(lo, uint64(need-1), 0)
	q, _ := bits.Div64(hi+carry, lo, uint64(need))
	return int64(q)
}

// sortDesc orders nodes by key descending, the lower index first on a tie,
// without a comparison closure: the key's distance below the largest key
// and the index are packed into one integer. Keys are amounts (at most the
// demand) or shares (at most shareScale per kind), far below 2^56.
func sortDesc(nodes []int8, key *[numa.MaxNodes]int64, buf *[numa.MaxNodes]uint64) {
	var mx int64
	for _, i := range nodes {
		mx = max(mx, key[i])
	}
	b := buf[:len(nodes)]
	for j, i := range nodes {
		b[j] = uint64(mx-key[i])<<7 | uint64(i)
	}
	slices.Sort(b)
	for j, x := range b {
		nodes[j] = int8(x & 127)
	}
}

// classSearch is the working memory of the large-pool search.
type classSearch struct {
	c  *cover
	w  int
	n  int
	sk int // the kind sorted inside classes
	nc int

	pool       numa.Mask
	gen        uint64
	lagrange   bool // prepareLagrange ran
	keys       [numa.MaxNodes]uint64
	shares     [numa.MaxNodes][maxKinds]int64
	nw         int
	wts        [maxWeightings][maxKinds]int64
	lagWant    [maxWeightings]int64
	lagPrefix  [maxWeightings][numa.MaxNodes + 1]int64
	classified bool
	byKind     [maxKinds][numa.MaxNodes]int8 // pool nodes by amount of kind r, descending
	nodes      [numa.MaxNodes]int8           // pool nodes
	classOf    [numa.MaxNodes]int8           // by node: class index in search order
	members    [numa.MaxNodes]int8           // nodes grouped by class, each class by sorted kind descending
	start      [numa.MaxNodes + 1]int16      // class c holds members[start[c]:start[c+1]]
	cum        [numa.MaxNodes + 1]int64      // cum[j] = sorted-kind sum of members[:j]
	bySorted   [numa.MaxNodes]int8           // pool nodes by sorted-kind amount descending
	byScore    [numa.MaxNodes]int8           // pool nodes by uniform share descending
	score      [numa.MaxNodes]int64          // uniform share of each node
	kindOrd    [maxKinds][numa.MaxNodes]int8 // classes by their amount of kind r, descending
	vals       [numa.MaxNodes]int64
	found      numa.Mask
	budget     int  // steps dfs may still take
	cut        bool // dfs ran out of budget
	// used counts the steps of the decision so far (at most searchSteps);
	// undecided counts the searches of the decision the bound cut. The
	// decision resets both (see [State.decide]).
	used, undecided int
}

// run runs one search over classes for width w with at most limit steps
// (and what the decision has left) and returns whether it found a cover
// and whether it was cut.
func (cs *classSearch) run(w, limit int) (found, cut bool) {
	b := min(limit, searchSteps-cs.used)
	cs.found, cs.budget, cs.cut = 0, b, false
	ok := cs.dfs(0, w, [maxKinds]int64{}, 0)
	cs.used += b - cs.budget
	return ok, cs.cut
}

// prepareLarge loads pool into cs and sorts the orders every width reuses.
func (c *cover) prepareLarge(pool numa.Mask, cs *classSearch) {
	cs.c, cs.n, cs.pool, cs.gen = c, 0, pool, c.gen
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		i := bits.TrailingZeros64(wd)
		cs.nodes[cs.n] = int8(i)
		var s int64
		for r := 0; r < c.k; r++ {
			cs.shares[i][r] = share(c.val[i][r], c.need[r])
			s += cs.shares[i][r]
		}
		cs.score[i] = s
		cs.n++
	}
	nodes := cs.nodes[:cs.n]
	copy(cs.byScore[:], nodes)
	sortDesc(cs.byScore[:cs.n], &cs.score, &cs.keys)
	for r := 0; r < c.k; r++ {
		ord := cs.byKind[r][:cs.n]
		copy(ord, nodes)
		for _, i := range nodes {
			cs.vals[i] = cs.shares[i][r] // shares order like the amounts
		}
		sortDesc(ord, &cs.vals, &cs.keys)
	}
	cs.classified, cs.lagrange = false, false
}

// existsLarge is exists for large pools; prepareLarge must have loaded the
// pool.
func (c *cover) existsLarge(w int, cs *classSearch) (numa.Mask, bool) {
	cs.w = w
	// 1. Greedy.
	if m := maskOf(cs.byScore[:w]); c.covers(m) {
		return m, true
	}
	for r := 0; r < c.k; r++ {
		if m := maskOf(cs.byKind[r][:w]); c.covers(m) {
			return m, true
		}
	}
	// 2. A short search over classes first: it usually finds a cover, or
	// proves there is none, before the Lagrangian bounds pay off.
	if !cs.classified {
		cs.classify()
		cs.classified = true
	}
	if !cs.lagrange {
		ok, cut := cs.run(w, shortSearch)
		if ok {
			return cs.found, true
		}
		if !cut {
			return 0, false // the whole search ran: no cover of width w
		}
		if cs.used >= searchSteps {
			cs.undecided++
			return 0, false
		}
		cs.prepareLagrange()
		cs.lagrange = true
	}
	// 3. Lagrangian bounds, then the whole search over classes, within what
	// the decision has left of its bound.
	if !cs.lagrangeFeasible(w) {
		return 0, false
	}
	ok, cut := cs.run(w, searchSteps)
	if ok {
		return cs.found, true
	}
	if cut {
		cs.undecided++
	}
	return 0, false
}

// minWidthLarge is minWidth for large pools: the widths below the largest
// Lagrangian lower bound are skipped without a search.
func (c *cover) minWidthLarge(pool numa.Mask, cs *classSearch) (int, numa.Mask) {
	c.prepareLarge(pool, cs)
	// The per-kind lower bound from the sorted orders; the Lagrangian one
	// once a width fails the greedy step.
	lb := 1
	for r := 0; r < c.k; r++ {
		var acc int64
		t := 0
		for _, i := range cs.byKind[r][:cs.n] {
			if acc >= c.need[r] {
				break
			}
			acc += c.val[i][r]
			t++
		}
		if acc < c.need[r] {
			return -1, 0
		}
		lb = max(lb, t)
	}
	for w := lb; w <= cs.n; w++ {
		if m, ok := c.existsLarge(w, cs); ok {
			return w, m
		}
		if cs.undecided > 0 {
			return -1, 0 // unknown: the decision refuses with ErrSearchLimit
		}
		if cs.lagrange {
			lag := cs.lagrangeLowerBound()
			if lag < 0 {
				return -1, 0
			}
			w = max(w, lag-1)
		}
	}
	return -1, 0
}

func cmpDesc(x, y int64, a, b int8) int {
	switch {
	case x > y:
		return -1
	case x < y:
		return 1
	}
	return int(a) - int(b)
}

func maskOf(nodes []int8) numa.Mask {
	var m numa.Mask
	for _, i := range nodes {
		m |= 1 << uint(i)
	}
	return m
}

// maxWeightings bounds the weightings the Lagrangian bounds try.
const maxWeightings = 24

// weightings fills wts with the weightings of the kinds the Lagrangian
// bounds try and returns how many: each kind alone (the per-kind bound),
// then for two kinds the ratios 1:3, 1:1 and 3:1, for more kinds every pair
// evenly (while they fit) and all kinds evenly.
func (c *cover) weightings(wts *[maxWeightings][maxKinds]int64) int {
	n := 0
	add := func() *[maxKinds]int64 { n++; wts[n-1] = [maxKinds]int64{}; return &wts[n-1] }
	for r := 0; r < c.k && n < maxWeightings; r++ {
		add()[r] = 1
	}
	switch {
	case c.k == 2:
		for _, p := range [...][2]int64{{1, 3}, {1, 1}, {3, 1}} {
			wt := add()
			wt[0], wt[1] = p[0], p[1]
		}
	case c.k > 2:
		for r := 0; r < c.k; r++ {
			for q := r + 1; q < c.k && n < maxWeightings-1; q++ {
				wt := add()
				wt[r], wt[q] = 1, 1
			}
		}
		wt := add()
		for r := 0; r < c.k; r++ {
			wt[r] = 1
		}
	}
	return n
}

// prepareLagrange computes, for each weighting, the prefix sums of the
// nodes' weighted shares in decreasing order, and the weighted demand.
func (cs *classSearch) prepareLagrange() {
	c := cs.c
	cs.nw = c.weightings(&cs.wts)
	for wi := 0; wi < cs.nw; wi++ {
		wt := &cs.wts[wi]
		var want int64
		for r := 0; r < c.k; r++ {
			want += wt[r] * shareScale
		}
		cs.lagWant[wi] = want
		v := cs.vals[:cs.n]
		for j, i := range cs.nodes[:cs.n] {
			var x int64
			for r := 0; r < c.k; r++ {
				x += wt[r] * cs.shares[i][r]
			}
			v[j] = x
		}
		slices.Sort(v)
		pre := &cs.lagPrefix[wi]
		pre[0] = 0
		for j := 0; j < cs.n; j++ {
			pre[j+1] = pre[j] + v[cs.n-1-j]
		}
	}
}

// lagrangeFeasible reports whether every weighting leaves room for a cover
// of w nodes: the w largest weighted shares must reach the weighted demand
// (a cover of w nodes would). false proves that no cover of w nodes exists.
func (cs *classSearch) lagrangeFeasible(w int) bool {
	for wi := 0; wi < cs.nw; wi++ {
		if cs.lagPrefix[wi][w] < cs.lagWant[wi] {
			return false
		}
	}
	return true
}

// lagrangeLowerBound returns the fewest nodes every weighting allows, or -1
// when some weighting rules out even all of them.
func (cs *classSearch) lagrangeLowerBound() int {
	lb := 0
	for wi := 0; wi < cs.nw; wi++ {
		pre := &cs.lagPrefix[wi]
		t := sortSearch(cs.n+1, func(w int) bool { return pre[w] >= cs.lagWant[wi] })
		if t > cs.n {
			return -1
		}
		lb = max(lb, t)
	}
	return lb
}

// sortSearch is sort.Search without the import.
func sortSearch(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if !f(h) {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}

// classify groups the pool's nodes into classes.
func (cs *classSearch) classify() {
	c := cs.c
	nodes := cs.nodes[:cs.n]
	// The sorted kind: the one with the most distinct amounts.
	best, bestDistinct := 0, -1
	for r := 0; r < c.k; r++ {
		v := cs.vals[:cs.n]
		for j, i := range nodes {
			v[j] = c.val[i][r]
		}
		slices.Sort(v)
		d := 0
		for j := range v {
			if j == 0 || v[j] != v[j-1] {
				d++
			}
		}
		if d > bestDistinct {
			best, bestDistinct = r, d
		}
	}
	cs.sk = best
	sk := best
	// Group: sort by the other kinds' amounts (lexicographic), then the
	// sorted kind descending, then the node. When every amount (at most
	// its demand) and the node fit in 64 bits together, the sort runs on
	// packed integers instead of a comparison closure.
	m := cs.members[:cs.n]
	copy(m, nodes)
	width := 7
	for r := 0; r < c.k; r++ {
		width += bits.Len64(uint64(c.need[r]))
	}
	if width <= 64 {
		keys := cs.keys[:cs.n]
		for j, i := range m {
			var key uint64
			for r := 0; r < c.k; r++ {
				if r != sk {
					key = key<<bits.Len64(uint64(c.need[r])) | uint64(c.need[r]-c.val[i][r])
				}
			}
			key = key<<bits.Len64(uint64(c.need[sk])) | uint64(c.need[sk]-c.val[i][sk])
			keys[j] = key<<7 | uint64(i)
		}
		slices.Sort(keys)
		for j, key := range keys {
			m[j] = int8(key & 127)
		}
	} else {
		slices.SortFunc(m, func(a, b int8) int {
			for r := 0; r < c.k; r++ {
				if r != sk && c.val[a][r] != c.val[b][r] {
					if c.val[a][r] > c.val[b][r] {
						return -1
					}
					return 1
				}
			}
			return cmpDesc(c.val[a][sk], c.val[b][sk], a, b)
		})
	}
	cs.nc = 0
	cs.cum[0] = 0
	for j, i := range m {
		if j == 0 || !sameOthers(c, sk, m[j-1], i) {
			cs.start[cs.nc] = int16(j)
			cs.nc++
		}
		cs.classOf[i] = int8(cs.nc - 1)
		cs.cum[j+1] = cs.cum[j] + c.val[i][sk]
	}
	cs.start[cs.nc] = int16(cs.n)
	copy(cs.bySorted[:], nodes)
	for _, i := range nodes {
		cs.vals[i] = c.val[i][sk]
	}
	sortDesc(cs.bySorted[:cs.n], &cs.vals, &cs.keys)
	for r := 0; r < c.k; r++ {
		ord := cs.kindOrd[r][:cs.nc]
		for cl := range ord {
			ord[cl] = int8(cl)
		}
		if r == sk {
			continue
		}
		for cl := range ord {
			cs.vals[cl] = c.val[m[cs.start[cl]]][r]
		}
		sortDesc(ord, &cs.vals, &cs.keys)
	}
}

func sameOthers(c *cover, sk int, a, b int8) bool {
	for r := 0; r < c.k; r++ {
		if r != sk && c.val[a][r] != c.val[b][r] {
			return false
		}
	}
	return true
}

// take returns the sorted-kind sum of the first t members of class cl.
func (cs *classSearch) take(cl, t int) int64 {
	s := int(cs.start[cl])
	return cs.cum[s+t] - cs.cum[s]
}

// bound reports whether classes cl.. with rem slots could still complete
// sums into a cover.
func (cs *classSearch) bound(cl, rem int, sums *[maxKinds]int64) bool {
	c := cs.c
	m := cs.members[:cs.n]
	var residual int64 // uniform share still missing
	for r := 0; r < c.k; r++ {
		short := c.need[r] - sums[r]
		if short <= 0 {
			continue
		}
		residual += share(short, c.need[r]) - 1 // -1: shares round up
		var best int64
		left := rem
		if r == cs.sk {
			for _, i := range cs.bySorted[:cs.n] {
				if left == 0 {
					break
				}
				if int(cs.classOf[i]) >= cl {
					best += c.val[i][r]
					left--
				}
			}
		} else {
			for _, k := range cs.kindOrd[r][:cs.nc] {
				if left == 0 {
					break
				}
				if int(k) < cl {
					continue
				}
				size := int(cs.start[k+1] - cs.start[k])
				t := min(size, left)
				best += int64(t) * c.val[m[cs.start[k]]][r]
				left -= t
			}
		}
		if best < short {
			return false
		}
	}
	if residual <= 0 {
		return true
	}
	var got int64
	left := rem
	for _, i := range cs.byScore[:cs.n] {
		if left == 0 {
			break
		}
		if int(cs.classOf[i]) >= cl {
			got += cs.score[i]
			left--
		}
	}
	return got >= residual
}

// dfs chooses how many nodes class cl and the later ones give.
func (cs *classSearch) dfs(cl, rem int, sums [maxKinds]int64, mask numa.Mask) bool {
	c := cs.c
	if cs.budget <= 0 {
		cs.cut = true
	}
	if cs.cut {
		return false
	}
	cs.budget--
	if rem == 0 {
		for r := 0; r < c.k; r++ {
			if sums[r] < c.need[r] {
				return false
			}
		}
		cs.found = mask
		return true
	}
	if cl == cs.nc || !cs.bound(cl, rem, &sums) {
		return false
	}
	m := cs.members[:cs.n]
	s := int(cs.start[cl])
	size := int(cs.start[cl+1]) - s
	lo := 0
	if cl == cs.nc-1 {
		lo = rem // the last class must fill every slot left
	}
	for t := min(size, rem); t >= lo; t-- {
		next := sums
		first := m[s]
		for r := 0; r < c.k; r++ {
			if r != cs.sk {
				next[r] += int64(t) * c.val[first][r]
			}
		}
		next[cs.sk] += cs.take(cl, t)
		mk := mask
		for _, i := range m[s : s+t] {
			mk |= 1 << uint(i)
		}
		if cs.dfs(cl+1, rem-t, next, mk) {
			return true
		}
	}
	return false
}
