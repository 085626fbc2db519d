package cover

import (
	"cmp"
	"math/bits"
	"slices"
	"sort"

	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/numa"
)

// shortSearch is the step budget of the first search over classes, before
// the Lagrangian bounds are computed.
const shortSearch = 512

// SearchSteps bounds the steps of the search over classes in one decision.
const SearchSteps = 1 << 15

// shareScale is the fixed-point scale of a node's share of a demand.
const shareScale = 1 << 20

// share returns ceil(v * shareScale / need): rounding up keeps every bound
// that uses shares safe. v is at most need (amounts are clipped at the
// demand), so the 128-bit quotient fits.
func share(v, need int64) int64 {
	if need <= 0 || v <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(v), shareScale)
	lo, carry := bits.Add64(lo, uint64(need-1), 0)
	q, _ := bits.Div64(hi+carry, lo, uint64(need))
	return int64(q)
}

// recip is the reciprocal floor((2^64-1)/need) that shareBy divides by, or
// 0 when need is beyond what it handles (then shareBy divides).
func recip(need int64) uint64 {
	if need <= 0 || need >= 1<<43 {
		return 0
	}
	return ^uint64(0) / uint64(need)
}

// shareBy is share(v, need) with the division replaced by a multiplication
// by the reciprocal r = recip(need) and at most two corrections: exact, and
// an order of magnitude faster than a 128-bit division (the search takes
// one share per node and kind, and per short kind at every step).
func shareBy(v, need int64, r uint64) int64 {
	if r == 0 || v <= 0 {
		return share(v, need)
	}
	return shareFast(v, need, r)
}

// shareFast is shareBy for 0 <= v <= need and r = recip(need) != 0, small
// enough to be inlined into the loops that take a share per node.
func shareFast(v, need int64, r uint64) int64 {
	x := uint64(v) << 20 // v <= need < 2^43: no overflow
	q, _ := bits.Mul64(x, r)
	rem := x - q*uint64(need)
	for rem >= uint64(need) { // q underestimates x/need by at most 2
		q++
		rem -= uint64(need)
	}
	if rem != 0 {
		q++
	}
	return int64(q)
}

// softSteps bounds the steps of the search over classes in a decision of
// a None or BestEffort request, whose admission the free totals decide: a
// cut search there costs the span's width its exactness, never the request
// its admission (see Bound).
const softSteps = 1 << 10

// Bound is the bound of one decision on its searches over classes: at
// most SearchSteps steps in all (1,024 when Soft), the steps used so
// far (Used), and how many searches the bound cut before they could
// answer (Undecided). A decision starts with the zero value, sets Soft
// for a None or BestEffort request, and gives the bound to its [Search]
// ([Search.Begin]).
//
// A soft bound (a None or BestEffort decision, admitted by the free totals
// alone) never leaves a search undecided: where the bound cuts the search
// for the fewest covering nodes, the answer is the narrowest cover known
// by then (the class search's greedy covers of the wider widths, or
// greedyCover's), and Approx records that the width (width_free) and so
// the span's preference are then best-effort rather than exact.
type Bound struct {
	// Used counts the steps taken; Undecided the searches the bound cut
	// (never for a soft bound).
	Used, Undecided int
	// Soft marks a None or BestEffort decision; Approx, set by the
	// search, a soft one whose width is the narrowest cover known.
	Soft, Approx bool
}

// limit returns the decision's bound in steps.
func (b *Bound) limit() int {
	if b.Soft {
		return softSteps
	}
	return SearchSteps
}

// cutOne counts a search the bound cut: undecided, or approx when soft.
func (b *Bound) cutOne() {
	if b.Soft {
		b.Approx = true
		return
	}
	b.Undecided++
}

// classSearch is the strategy for pools of more than SmallPool nodes. It is
// prepared for one Problem and one pool (prepare; a decision never changes
// a Problem once loaded, so the preparation holds for the rest of the
// decision) and answers, for each width w, whether some w nodes of the pool
// cover, in these steps, each exact:
//
//  1. Identical nodes: when every node of the pool has the same amounts,
//     the answer is arithmetic (the first w nodes cover or none do).
//  2. Greedy: the w nodes with the largest combined share of the demands,
//     then the w largest of each kind alone. Most feasible widths end here.
//  3. A short search over classes (at most shortSearch steps): the nodes
//     are grouped by their amounts of every kind but one (the sorted kind,
//     the one with the most distinct amounts, usually CPUs); inside a class
//     only the nodes with the largest amounts of that kind need ever be
//     chosen (an exchange argument), so the search chooses how many nodes
//     each class gives instead of which ones, and cuts a branch by per-kind
//     top-k bounds and by the uniform Lagrangian bound over the classes
//     still open. It usually finds a cover, or proves there is none.
//  4. When the short search was cut: Lagrangian bounds for a few weightings
//     λ of the kinds (if the w largest weighted shares sum to less than the
//     weighted demand, no w nodes cover), which prove most infeasible
//     widths, including trade-offs (GPU-rich nodes short of CPUs and the
//     other way round) that per-kind bounds miss; then the whole search
//     over classes within what the decision has left of its bound.
//
// Complexity: preparing takes the scores in O(k·n) for k kinds and n
// nodes; the pool is sorted at most k+1 times (by score and by each kind,
// each when first read: by counting or by bucket, O(n) when the amounts
// spread evenly, O(n²) at worst; the first greedy cover by score selects
// its nodes instead, O(n) per round of largestMask, a round per six bits
// of the scores' spread)
// and classifying adds k-1 counting passes;
// each step of the search over classes is O(k·n). The worst case of the search is exponential in the
// number of classes (every node distinct in every kind, with demands no
// weighting separates), hence the bound: at most SearchSteps steps in one
// decision (a Fit, an Allocate, a Score, the widths of a Resize; softSteps
// for None and BestEffort). A search the bound cuts is undecided (counted
// in the decision's Bound), and the decision refuses a Restricted
// request with allocator.ErrSearchLimit rather than guess a width; for None and
// BestEffort, whose admission the free totals decide, minWidth answers the
// narrowest cover known instead ([classSearch.narrowestKnown]). The
// shapes of allocator's BenchmarkWorstNUMA64 stay far below the bound;
// fragmented machines where every node holds a different mix of every
// kind (allocator's TestSoftPoliciesRandomFragments, TestSearchBound)
// reach it.
type classSearch struct {
	p    *Problem  // the prepared Problem (nil: none prepared)
	pool numa.Mask // the prepared pool
	b    *Bound
	n    int
	w    int

	uniform  bool                           // every node of the pool has the same amounts
	nodes    [numa.MaxNodes]int8            // the pool's nodes, ascending
	shares   [numa.MaxNodes][MaxKinds]int64 // by node: share of each demand (when sharesOK, see makeShares)
	sharesOK bool
	score    [numa.MaxNodes]int64 // by node: the sum of its shares
	scoreMax int64                // the largest and smallest score
	scoreMin int64
	byScore  [numa.MaxNodes]int8           // pool nodes by score descending
	byKind   [MaxKinds][numa.MaxNodes]int8 // pool nodes by amount of kind r, descending
	distinct [MaxKinds]int                 // distinct amounts of kind r in the pool
	sorted   uint32                        // bit 0: byScore is made; bit r+1: byKind[r] and distinct[r]
	// firstMask[r][t] holds the first t nodes of byKind[r], for the kinds
	// of bit r of firstOK (made by atLeast).
	firstMask [MaxKinds][numa.MaxNodes + 1]numa.Mask
	firstOK   uint32

	classified bool
	sk         int                           // the kind sorted inside classes
	nc         int                           // classes
	classOf    [numa.MaxNodes]int8           // by node: class index in search order
	members    [numa.MaxNodes]int8           // nodes grouped by class, each class by sorted kind descending
	start      [numa.MaxNodes + 1]int16      // class c holds members[start[c]:start[c+1]]
	cum        [numa.MaxNodes + 1]int64      // cum[j] = sorted-kind sum of members[:j]
	cumMask    [numa.MaxNodes + 1]numa.Mask  // cumMask[j] = the nodes of members[:j]
	kindOrd    [MaxKinds][numa.MaxNodes]int8 // classes by their amount of kind r, descending (in any order among those of one amount)
	inOrder    uint32                        // bit r: kindOrd[r] is the classes in index order

	lagrange  bool // prepareLagrange ran
	nw        int
	wts       [maxWeightings][MaxKinds]int64
	lagWant   [maxWeightings]int64
	lagPrefix [maxWeightings][numa.MaxNodes + 1]int64

	greedied bool // greedy ran since the preparation

	keys [numa.MaxNodes]uint64 // sort buffers
	vals [numa.MaxNodes]int64
	// kv[r][x] is the clipped amount of kind r of node x of the pool, and
	// kmx[r], kmn[r] the largest and the least (made by prepare).
	kv       [MaxKinds][numa.MaxNodes]int64
	kmx, kmn [MaxKinds]int64
	// top holds, once a search has taken topAfter steps, the sums bound
	// reads: for q < k the sum of the t largest amounts of kind q over the
	// nodes of classes cl and later, for q = k the same of the scores, at
	// top[(q*nc+cl)*(n+1)+t] (t up to n, saturated beyond their count).
	top     []int64
	topOK   bool
	steps   int // dfs steps taken since the Problem was prepared
	found   numa.Mask
	budget  int  // steps dfs may still take
	cut     bool // dfs ran out of budget
	lastCut bool // the bound cut the last exists
}

// prepared reports whether cs holds the preparation of Problem p and pool.
func (cs *classSearch) prepared(p *Problem, pool numa.Mask) bool {
	return cs.p == p && cs.pool == pool
}

// prepare loads pool into cs for Problem p: its nodes, whether they are
// identical, each kind's amounts (kv) and each node's score (its shares
// are made on demand, makeShares). The orders by score and by each kind's amount are sorted
// when first read (sortScore, sortKind): a first width that the greedy
// cover by score settles needs no other. A kind of one amount on every
// node of the pool has its order made here (the nodes as they are).
func (cs *classSearch) prepare(p *Problem, pool numa.Mask) {
	p.Clip()
	cs.p, cs.pool = p, pool
	cs.classified, cs.lagrange, cs.topOK, cs.sorted, cs.steps = false, false, false, 0, 0
	cs.firstOK, cs.sharesOK = 0, false
	cs.greedied = false
	n := 0
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		cs.nodes[n] = int8(bits.TrailingZeros64(wd))
		n++
	}
	cs.n = n
	cs.uniform = !general.On && p.uniformOn(pool)
	if cs.uniform {
		return
	}
	// The scores, summed kind by kind, after each kind's amounts are read
	// (kindValues). A kind every node of the pool has alike (flat) takes
	// one share, and its order by amount is the pool's nodes as they are
	// (the sort is stable), with one distinct amount; a kind whose
	// amounts lie fewer than shareTable apart takes one share per amount;
	// any other one per node: by multiplication (shareFast, without a call
	// in the loop), or by division when the demand is beyond what it
	// takes (recip 0). The shares themselves are kept only when the
	// Lagrangian bounds need them (makeShares).
	nodes := cs.nodes[:n]
	score := &cs.score
	for _, i := range nodes {
		score[i&(numa.MaxNodes-1)] = 0
	}
	for r := range min(p.K, MaxKinds) {
		need, rc := p.Need[r], p.recip[r]
		lo, hi := cs.kindValues(r)
		kv := &cs.kv[r]
		switch spread := uint64(hi) - uint64(lo); {
		case spread == 0:
			sh := shareBy(lo, need, rc)
			for _, i := range nodes {
				score[i&(numa.MaxNodes-1)] += sh
			}
			copy(cs.byKind[r][:n], nodes)
			cs.distinct[r] = 1
			cs.sorted |= 2 << uint(r)
		case spread < shareTable:
			var tab [shareTable]int64
			for d := range spread + 1 {
				tab[d%shareTable] = shareBy(lo+int64(d), need, rc)
			}
			for _, i := range nodes {
				x := i & (numa.MaxNodes - 1)
				score[x] += tab[uint64(kv[x]-lo)%shareTable]
			}
		case rc == 0:
			for _, i := range nodes {
				x := i & (numa.MaxNodes - 1)
				score[x] += share(kv[x], need)
			}
		default:
			for _, i := range nodes {
				x := i & (numa.MaxNodes - 1)
				score[x] += shareFast(max(kv[x], 0), need, rc) // share of a negative amount: 0
			}
		}
	}
	mx, mn := int64(0), int64(1<<62)
	for _, i := range nodes {
		sc := score[i&(numa.MaxNodes-1)]
		mx, mn = max(mx, sc), min(mn, sc)
	}
	cs.scoreMax, cs.scoreMin = mx, mn
}

// makeShares fills shares, each node's share of each demand (the parts
// of its score), once per preparation.
func (cs *classSearch) makeShares() {
	if cs.sharesOK {
		return
	}
	p := cs.p
	for _, i := range cs.nodes[:cs.n] {
		x := i & (numa.MaxNodes - 1)
		for r := range min(p.K, MaxKinds) {
			cs.shares[x][r] = shareBy(p.Val[x][r], p.Need[r], p.recip[r])
		}
	}
	cs.sharesOK = true
}

// shareTable bounds the spread of the amounts of a kind whose shares
// prepare takes once per amount.
const shareTable = 64

// sortScore sorts the pool's nodes by score, descending, the lower index
// first on a tie (once per preparation).
func (cs *classSearch) sortScore() {
	if cs.sorted&1 == 0 {
		copy(cs.byScore[:], cs.nodes[:cs.n])
		orderAscendingDesc(cs.byScore[:cs.n], &cs.score, cs.scoreMax, cs.scoreMin)
		cs.sorted |= 1
	}
}

// sortKind sorts the pool's nodes by their amount of kind r (clipped at
// the demand), descending, the lower index first on a tie, and counts its
// distinct amounts (once per preparation).
func (cs *classSearch) sortKind(r int) {
	if cs.sorted&(2<<uint(r)) == 0 {
		ord := cs.byKind[r][:cs.n]
		copy(ord, cs.nodes[:cs.n])
		cs.distinct[r] = SortAscendingDesc(ord, &cs.kv[r], cs.kmx[r], cs.kmn[r])
		cs.sorted |= 2 << uint(r)
	}
}

// kindValues loads kv[r], kmx[r] and kmn[r], the pool's amounts of kind r
// (clipped), and returns the least and the largest.
func (cs *classSearch) kindValues(r int) (lo, hi int64) {
	val, nodes, kv := cs.p.Val, cs.nodes[:cs.n], &cs.kv[r]
	lo, hi = val[nodes[0]&(numa.MaxNodes-1)][r], val[nodes[0]&(numa.MaxNodes-1)][r]
	for _, i := range nodes {
		x := i & (numa.MaxNodes - 1)
		v := val[x][r]
		kv[x] = v
		lo, hi = min(lo, v), max(hi, v)
	}
	cs.kmx[r], cs.kmn[r] = hi, lo
	return lo, hi
}

// sortOrders sorts every order (see sortScore, sortKind): O(k·n log n) at
// most (see SortDesc).
func (cs *classSearch) sortOrders() {
	cs.sortScore()
	for r := 0; r < cs.p.K; r++ {
		cs.sortKind(r)
	}
}

// greedy returns the first greedy cover of width w (step 2 of exists):
// the w nodes first by score, else the w first by the amount of one kind,
// kind by kind. Each order is sorted when first read, but for the first
// call of a preparation, which takes the w first by score by selection
// (largestMask) when that order is not sorted yet: a cover the score
// settles then needs no sort by score, and a search over several widths
// sorts once.
func (cs *classSearch) greedy(w int) (numa.Mask, bool) {
	p := cs.p
	var m numa.Mask
	if !cs.greedied && cs.sorted&1 == 0 {
		m = largestMask(cs.pool, &cs.score, w, cs.scoreMax, cs.scoreMin)
	} else {
		cs.sortScore()
		m = maskOf(cs.byScore[:w])
	}
	cs.greedied = true
	if p.Covers(m) {
		return m, true
	}
	for r := 0; r < p.K; r++ {
		cs.sortKind(r)
		if m := maskOf(cs.byKind[r][:w]); p.Covers(m) {
			return m, true
		}
	}
	return 0, false
}

// largestMask returns the w nodes of pool (keys between mn and mx) with
// the largest keys, the lower index first on a tie: the first w of pool's
// nodes as SortAscendingDesc orders them. It deals the nodes into 64
// buckets by the top bits of their key's distance below mx, takes the
// buckets wholly above the w-th node and deals the w-th node's bucket
// again, finer, until the nodes left tie (then the lowest indices): O(n)
// per round, each round dividing the keys' spread by 64.
func largestMask(pool numa.Mask, key *[numa.MaxNodes]int64, w int, mx, mn int64) numa.Mask {
	var m numa.Mask
	cand := pool
	for w > 0 && w < cand.Count() {
		spread := uint64(mx - mn)
		if spread == 0 { // the nodes left tie
			return m | lowest(cand, w)
		}
		shift := uint(max(bits.Len64(spread)-6, 0))
		var count [64]uint8
		for wd := uint64(cand); wd != 0; wd &= wd - 1 {
			count[uint64(mx-key[bits.TrailingZeros64(wd)&(numa.MaxNodes-1)])>>shift&63]++
		}
		b, above := uint64(0), 0 // the w-th node's bucket, the nodes above it
		for above+int(count[b&63]) < w {
			above += int(count[b&63])
			b++
		}
		var in numa.Mask
		for wd := uint64(cand); wd != 0; wd &= wd - 1 {
			i := bits.TrailingZeros64(wd) & (numa.MaxNodes - 1)
			switch d := uint64(mx-key[i]) >> shift; {
			case d < b:
				m |= 1 << uint(i)
			case d == b:
				in |= 1 << uint(i)
			}
		}
		w -= above
		cand = in
		mn = max(mn, mx-int64((b+1)<<shift-1))
		mx -= int64(b << shift)
	}
	if w > 0 {
		m |= cand
	}
	return m
}

// indexAtLeast reports whether atLeast can answer for Problem p on pool:
// cs is prepared for p on a pool holding pool, with every order by kind
// sorted.
func (cs *classSearch) indexAtLeast(p *Problem, pool numa.Mask) bool {
	all := uint32(2<<uint(min(p.K, MaxKinds)) - 2) // the bits of the orders by kind
	return cs.p == p && pool.IsSubsetOf(cs.pool) && !cs.uniform && cs.sorted&all == all
}

// atLeast returns the nodes of the prepared pool whose clipped amount of
// every kind r reaches want[r], after indexAtLeast answered true: for each
// kind whose threshold lies between its least and largest amounts, a
// binary search along its order, O(k log n), and the mask of the nodes
// before the first below the threshold (firstMask, made for the kind on
// its first such search in O(n)).
func (cs *classSearch) atLeast(want *[MaxKinds]int64) numa.Mask {
	p := cs.p
	m := cs.pool
	for r := range min(p.K, MaxKinds) {
		ord := &cs.byKind[r]
		w := want[r]
		switch {
		case p.Val[ord[(cs.n-1)&(numa.MaxNodes-1)]&(numa.MaxNodes-1)][r] >= w:
			continue // every node
		case p.Val[ord[0]&(numa.MaxNodes-1)][r] < w:
			return 0 // none
		}
		lo, hi := 0, cs.n // the first node below w is at lo once they meet
		for lo < hi {
			h := int(uint(lo+hi) >> 1)
			if p.Val[ord[h&(numa.MaxNodes-1)]&(numa.MaxNodes-1)][r] >= w {
				lo = h + 1
			} else {
				hi = h
			}
		}
		fm := &cs.firstMask[r]
		if cs.firstOK&(1<<uint(r)) == 0 {
			fm[0] = 0
			for t, i := range ord[:cs.n] {
				fm[t+1] = fm[t] | 1<<uint(i&(numa.MaxNodes-1))
			}
			cs.firstOK |= 1 << uint(r)
		}
		if m &= fm[lo]; m == 0 {
			return 0
		}
	}
	return m
}

// uniformWidth returns the fewest identical nodes that cover, or -1.
func (cs *classSearch) uniformWidth() int {
	return cs.p.uniformWidth(&cs.p.Val[cs.nodes[0]], cs.n)
}

// run runs one search over classes for width w with at most limit steps
// (and what the decision has left) and returns whether it found a cover
// and whether it was cut.
func (cs *classSearch) run(w, limit int) (found, cut bool) {
	b := max(min(limit, cs.b.limit()-cs.b.Used), 0)
	cs.found, cs.budget, cs.cut = 0, b, false
	ok := cs.dfs(0, w, [MaxKinds]int64{}, 0)
	cs.b.Used += b - cs.budget
	return ok, cs.cut
}

// exists returns some w nodes of the prepared pool that cover the demands
// (see the steps above). A search the bound cuts answers false and counts
// as undecided.
func (cs *classSearch) exists(w int) (numa.Mask, bool) {
	cs.w, cs.lastCut = w, false
	if w <= 0 || w > cs.n {
		return 0, false
	}
	// 1. Identical nodes.
	if cs.uniform {
		if uw := cs.uniformWidth(); uw > 0 && uw <= w {
			return maskOf(cs.nodes[:w]), true
		}
		return 0, false
	}
	// 2. Greedy.
	if m, ok := cs.greedy(w); ok {
		return m, true
	}
	// 3. A short search over classes.
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
		if cs.b.Used >= cs.b.limit() {
			cs.b.cutOne()
			cs.lastCut = true
			return 0, false
		}
		cs.prepareLagrange()
		cs.lagrange = true
	}
	// 4. Lagrangian bounds, then the whole search over classes within what
	// the decision has left of its bound.
	if !cs.lagrangeFeasible(w) {
		return 0, false
	}
	ok, cut := cs.run(w, SearchSteps)
	if ok {
		return cs.found, true
	}
	if cut {
		cs.b.cutOne()
		cs.lastCut = true
	}
	return 0, false
}

// minWidth returns the fewest nodes of the prepared pool that cover the
// demands and one such cover, or -1: widths below the per-kind lower bound,
// and once computed the largest Lagrangian lower bound, are skipped without
// a search. When the bound cuts a search it answers -1 with the decision's
// Bound counting it undecided, or, for a soft bound, the narrowest
// cover known (narrowestKnown), marked approx.
func (cs *classSearch) minWidth() (int, numa.Mask) {
	p := cs.p
	if cs.uniform {
		w := cs.uniformWidth()
		if w < 0 {
			return -1, 0
		}
		return w, maskOf(cs.nodes[:w])
	}
	lb := 1
	for r := 0; r < p.K; r++ {
		var t int
		if cs.sorted&(2<<uint(r)) == 0 {
			// Amounts close together are sorted by counting now (the
			// search sorts them when its greedy cover by score falls
			// short); others are selected.
			if uint64(cs.kmx[r]-cs.kmn[r]) < countingRange {
				cs.sortKind(r)
			} else {
				v, kv := &cs.vals, &cs.kv[r] // fewestLargest reorders them
				for j, i := range cs.nodes[:cs.n] {
					v[j&(numa.MaxNodes-1)] = kv[i&(numa.MaxNodes-1)]
				}
				t = fewestLargest(v[:cs.n], p.Need[r])
			}
		}
		if cs.sorted&(2<<uint(r)) != 0 {
			t = fewestFirst(p, r, cs.byKind[r][:cs.n])
		}
		if t < 0 {
			return -1, 0
		}
		lb = max(lb, t)
	}
	for w := lb; w <= cs.n; w++ {
		if m, ok := cs.exists(w); ok {
			return w, m
		}
		if cs.lastCut {
			if cs.b.Soft {
				return cs.narrowestKnown(w + 1)
			}
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

// SortDesc orders nodes by key descending, the lower index first on a tie,
// and returns how many distinct keys they have. Nodes in ascending order
// (as the searches list them) are sorted stably by key alone: by counting
// when the keys' spread is below countingRange, else by bucket
// (bucketSortDesc). Otherwise, when the keys' spread is below 2^56, the
// key's distance below the largest key and the index are packed into one
// integer and sorted without a comparison closure; beyond, by a closure.
func SortDesc(nodes []int8, key *[numa.MaxNodes]int64, buf *[numa.MaxNodes]uint64) int {
	if len(nodes) == 0 {
		return 0
	}
	mx, mn := key[nodes[0]], key[nodes[0]]
	ascending := true
	for j := 1; j < len(nodes); j++ {
		i := nodes[j]
		mx, mn = max(mx, key[i]), min(mn, key[i])
		ascending = ascending && i > nodes[j-1]
	}
	if ascending {
		return SortAscendingDesc(nodes, key, mx, mn)
	}
	switch spread := uint64(mx - mn); {
	case spread >= 1<<56:
		slices.SortFunc(nodes, func(a, b int8) int { return cmpDesc(key[a], key[b], a, b) })
		d := 0
		for j, i := range nodes {
			if j == 0 || key[i] != key[nodes[j-1]] {
				d++
			}
		}
		return d
	}
	b := buf[:len(nodes)]
	for j, i := range nodes {
		b[j] = uint64(mx-key[i])<<7 | uint64(i)
	}
	slices.Sort(b)
	d := 0
	for j, x := range b {
		nodes[j] = int8(x & 127)
		if j == 0 || x>>7 != b[j-1]>>7 {
			d++
		}
	}
	return d
}

// SortAscendingDesc is SortDesc for nodes in ascending order whose keys
// are at most mx and at least mn: by counting when the spread is below
// countingRange, else as orderAscendingDesc does, then counting the
// distinct keys.
func SortAscendingDesc(nodes []int8, key *[numa.MaxNodes]int64, mx, mn int64) int {
	if uint64(mx-mn) < countingRange {
		return countingSortDesc(nodes, key, mx, mn)
	}
	orderAscendingDesc(nodes, key, mx, mn)
	d := 0
	for j, i := range nodes {
		if j == 0 || key[i&(numa.MaxNodes-1)] != key[nodes[j-1]&(numa.MaxNodes-1)] {
			d++
		}
	}
	return d
}

// orderAscendingDesc is SortAscendingDesc without the count of distinct
// keys: by counting when the spread is below countingRange, by bucket
// below 2^62, else by a stable comparison sort.
func orderAscendingDesc(nodes []int8, key *[numa.MaxNodes]int64, mx, mn int64) {
	switch spread := uint64(mx - mn); {
	case spread < countingRange:
		countingSortDesc(nodes, key, mx, mn)
	case spread < 1<<62:
		bucketSortDesc(nodes, key, mx, spread)
	default:
		slices.SortStableFunc(nodes, func(a, b int8) int { return cmp.Compare(key[b], key[a]) })
	}
}

// bucketSortDesc sorts nodes (ascending, keys at most mx and spread
// apart, spread below 2^62) by key descending, stably: it deals them into
// 64 buckets by the top bits of their distance below mx, in order, then
// finishes by insertion: O(n) when the keys spread evenly, O(n²) at worst
// (for n nodes at most 64, no slower than a comparison sort by much).
func bucketSortDesc(nodes []int8, key *[numa.MaxNodes]int64, mx int64, spread uint64) {
	const mask = numa.MaxNodes - 1 // node indices and buckets are below 64
	shift := uint(max(bits.Len64(spread)-6, 0))
	n := min(len(nodes), numa.MaxNodes)
	var count [65]uint8
	var bucket [numa.MaxNodes]uint8 // by position
	for j, i := range nodes[:n] {
		b := uint8(uint64(mx-key[i&mask]) >> shift & mask)
		bucket[j] = b
		count[b+1]++
	}
	for b := 1; b <= 64; b++ {
		count[b] += count[b-1]
	}
	var out [numa.MaxNodes]int8
	for j, i := range nodes[:n] {
		c := &count[bucket[j]&mask]
		out[*c&mask] = i
		*c++
	}
	for a := 1; a < n; a++ {
		x := out[a]
		kx := key[x&mask]
		b := a
		for ; b > 0 && key[out[b-1]&mask] < kx; b-- {
			out[b] = out[b-1]
		}
		out[b] = x
	}
	copy(nodes, out[:n])
}

// countingRange is the largest spread of keys countingSortDesc takes.
const countingRange = 256

// countingSortDesc sorts nodes (ascending, keys between mn and mx, fewer
// than countingRange apart) by key descending, stably, so the lower index
// comes first on a tie: O(n + countingRange).
func countingSortDesc(nodes []int8, key *[numa.MaxNodes]int64, mx, mn int64) int {
	n := min(len(nodes), numa.MaxNodes)
	var dist [numa.MaxNodes]uint8 // by position: the key's distance below mx
	var count [countingRange + 1]uint8
	for j, i := range nodes[:n] {
		d := uint8(mx - key[i&(numa.MaxNodes-1)])
		dist[j] = d
		count[int(d)+1]++
	}
	d := 0
	for v := 1; v <= int(mx-mn)+1; v++ {
		if count[v] != 0 {
			d++
		}
		count[v] += count[v-1]
	}
	var out [numa.MaxNodes]int8
	for j, i := range nodes[:n] {
		x := dist[j]
		out[count[x]&(numa.MaxNodes-1)] = i
		count[x]++
	}
	copy(nodes, out[:n])
	return d
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
func (p *Problem) weightings(wts *[maxWeightings][MaxKinds]int64) int {
	n := 0
	add := func() *[MaxKinds]int64 { n++; wts[n-1] = [MaxKinds]int64{}; return &wts[n-1] }
	for r := 0; r < p.K && n < maxWeightings; r++ {
		add()[r] = 1
	}
	switch {
	case p.K == 2:
		for _, q := range [...][2]int64{{1, 3}, {1, 1}, {3, 1}} {
			wt := add()
			wt[0], wt[1] = q[0], q[1]
		}
	case p.K > 2:
		for r := 0; r < p.K; r++ {
			for q := r + 1; q < p.K && n < maxWeightings-1; q++ {
				wt := add()
				wt[r], wt[q] = 1, 1
			}
		}
		wt := add()
		for r := 0; r < p.K; r++ {
			wt[r] = 1
		}
	}
	return n
}

// prepareLagrange computes, for each weighting, the prefix sums of the
// nodes' weighted shares in decreasing order, and the weighted demand. A
// weighting of one kind alone reads the order by that kind's amounts
// (shares order like the amounts); the others sort.
func (cs *classSearch) prepareLagrange() {
	p := cs.p
	cs.makeShares()
	cs.nw = p.weightings(&cs.wts)
	for wi := 0; wi < cs.nw; wi++ {
		wt := &cs.wts[wi]
		var want int64
		single := -1
		for r := 0; r < p.K; r++ {
			want += wt[r] * shareScale
			if wt[r] != 0 {
				if single == -1 {
					single = r
				} else {
					single = -2
				}
			}
		}
		cs.lagWant[wi] = want
		pre := &cs.lagPrefix[wi]
		pre[0] = 0
		if single >= 0 {
			for j, i := range cs.byKind[single][:cs.n] {
				pre[j+1] = pre[j] + wt[single]*cs.shares[i][single]
			}
			continue
		}
		v := cs.vals[:cs.n]
		for j, i := range cs.nodes[:cs.n] {
			var x int64
			for r := 0; r < p.K; r++ {
				x += wt[r] * cs.shares[i][r]
			}
			v[j] = x
		}
		slices.Sort(v)
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
		t := sort.Search(cs.n+1, func(w int) bool { return pre[w] >= cs.lagWant[wi] })
		if t > cs.n {
			return -1
		}
		lb = max(lb, t)
	}
	return lb
}

// classify groups the pool's nodes into classes: it chooses the sorted
// kind (the one with the most distinct amounts, counted along the orders by
// amount), groups the nodes by the other kinds' amounts, and derives the
// orders of the classes by each kind from the orders of the nodes.
func (cs *classSearch) classify() {
	p := cs.p
	cs.sortOrders()
	best, bestDistinct := 0, -1
	for r := 0; r < p.K; r++ {
		if d := cs.distinct[r]; d > bestDistinct {
			best, bestDistinct = r, d
		}
	}
	cs.sk = best
	sk := best
	// Group: order by the other kinds' amounts (lexicographic, descending),
	// then the sorted kind descending, then the node: from the order by the
	// sorted kind, a stable counting sort by each other kind's rank among
	// its distinct amounts, the last kind first (a radix sort).
	m := cs.members[:cs.n]
	copy(m, cs.byKind[sk][:cs.n])
	val := p.Val
	var rank [numa.MaxNodes]uint8 // by node: its amount's rank, 0 for the largest
	var out [numa.MaxNodes]int8
	// ranks packs each node's ranks of the other kinds, 6 bits each (a kind
	// has at most 64 distinct amounts), while they fit: two nodes are of one
	// class when their packed ranks are equal.
	var ranks [numa.MaxNodes]uint64
	packed := p.K-1 <= 64/6
	cs.inOrder = 0
	first := -1 // the kind sorted last, the first of the classes' order
	for r := p.K - 1; r >= 0; r-- {
		if r == sk || cs.distinct[r] == 1 {
			continue // a kind of one amount leaves the order and the classes as they are
		}
		first = r
		ord := cs.byKind[r][:cs.n]
		d := 0
		prev := val[ord[0]&(numa.MaxNodes-1)][r]
		for _, i := range ord {
			x := i & (numa.MaxNodes - 1)
			if v := val[x][r]; v != prev {
				d++
				prev = v
			}
			rank[x] = uint8(d)
			ranks[x] = ranks[x]<<6 | uint64(d)
		}
		var count [numa.MaxNodes + 1]uint8
		for _, i := range m {
			count[rank[i&(numa.MaxNodes-1)]&(numa.MaxNodes-1)+1]++
		}
		for b := 1; b <= d; b++ {
			count[b] += count[b-1]
		}
		for _, i := range m {
			c := &count[rank[i&(numa.MaxNodes-1)]&(numa.MaxNodes-1)]
			out[*c&(numa.MaxNodes-1)] = i
			*c++
		}
		copy(m, out[:cs.n])
	}
	cs.nc = 0
	cs.cum[0], cs.cumMask[0] = 0, 0
	var cum int64
	var cumMask numa.Mask
	for j, i := range m {
		x := i & (numa.MaxNodes - 1)
		if j == 0 || packed && ranks[x] != ranks[m[j-1]&(numa.MaxNodes-1)] || !packed && !sameOthers(p, sk, m[j-1], i) {
			cs.start[cs.nc&(numa.MaxNodes-1)] = int16(j)
			cs.nc++
		}
		cs.classOf[x] = int8(cs.nc - 1)
		cum += val[x][sk]
		cumMask |= 1 << uint(x)
		cs.cum[j+1], cs.cumMask[j+1] = cum, cumMask
	}
	cs.start[cs.nc] = int16(cs.n)
	// The classes by each other kind, descending: the order of their first
	// members along the nodes by that kind (every member of a class has the
	// same amount of it). The classes are in that order already for a kind
	// of one amount (any order) and for the first kind of their order
	// (then the classes of one amount of it may come in any order: bound
	// sums the same).
	for r := 0; r < p.K; r++ {
		if r == sk {
			continue
		}
		if cs.distinct[r] == 1 || r == first {
			for cl := range cs.nc {
				cs.kindOrd[r][cl&(numa.MaxNodes-1)] = int8(cl)
			}
			cs.inOrder |= 1 << uint(r)
			continue
		}
		var seen uint64 // nc <= 64 classes
		ord := cs.kindOrd[r][:0]
		for _, i := range cs.byKind[r][:cs.n] {
			if cl := cs.classOf[i&(numa.MaxNodes-1)]; seen&(1<<uint(cl)) == 0 {
				seen |= 1 << uint(cl)
				if ord = append(ord, cl); len(ord) == cs.nc {
					break
				}
			}
		}
	}
}

func sameOthers(p *Problem, sk int, a, b int8) bool {
	for r := 0; r < p.K; r++ {
		if r != sk && p.Val[a][r] != p.Val[b][r] {
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

// topAfter is the steps of the search over classes after which bound reads
// the table of top sums instead of walking the orders: building it takes
// O((k+1)·classes·n), which a short search does not repay.
const topAfter = 2048

// buildTop fills cs.top (see its comment) from the orders by kind and by
// score: O((k+1)·nc·n).
func (cs *classSearch) buildTop() {
	p := cs.p
	k, nc, n := p.K, cs.nc, cs.n
	size := (k + 1) * nc * (n + 1)
	if cap(cs.top) < size {
		cs.top = make([]int64, size)
	}
	cs.top = cs.top[:size]
	for q := 0; q <= k; q++ {
		ord := cs.byScore[:n]
		if q < k {
			ord = cs.byKind[q][:n]
		}
		for cl := 0; cl < nc; cl++ {
			row := cs.top[(q*nc+cl)*(n+1) : (q*nc+cl+1)*(n+1)]
			row[0] = 0
			t := 0
			for _, i := range ord {
				if int(cs.classOf[i]) < cl {
					continue
				}
				v := cs.score[i]
				if q < k {
					v = p.Val[i][q]
				}
				row[t+1] = row[t] + v
				t++
			}
			for ; t < n; t++ {
				row[t+1] = row[t]
			}
		}
	}
	cs.topOK = true
}

// bound reports whether classes cl.. with rem slots could still complete
// sums into a cover: for each short kind, the rem largest amounts of the
// nodes of those classes must make up the shortfall, and the rem largest
// scores the shares still missing (the uniform Lagrangian bound). After
// topAfter steps it reads the sums from the table of buildTop in O(k).
func (cs *classSearch) bound(cl, rem int, sums *[MaxKinds]int64) bool {
	p := cs.p
	if !cs.topOK && cs.steps > topAfter {
		cs.buildTop()
	}
	if cs.topOK {
		n1 := cs.n + 1
		var residual int64
		for r := 0; r < p.K; r++ {
			short := p.Need[r] - sums[r]
			if short <= 0 {
				continue
			}
			residual += shareBy(short, p.Need[r], p.recip[r]) - 1
			if cs.top[(r*cs.nc+cl)*n1+rem] < short {
				return false
			}
		}
		return residual <= 0 || cs.top[(p.K*cs.nc+cl)*n1+rem] >= residual
	}
	m := cs.members[:cs.n]
	var residual int64 // uniform share still missing
	for r := 0; r < p.K; r++ {
		short := p.Need[r] - sums[r]
		if short <= 0 {
			continue
		}
		residual += shareBy(short, p.Need[r], p.recip[r]) - 1 // -1: shares round up
		var best int64
		left := rem
		if r == cs.sk {
			for _, i := range cs.byKind[r][:cs.n] {
				if left == 0 {
					break
				}
				if x := i & (numa.MaxNodes - 1); int(cs.classOf[x]) >= cl {
					best += p.Val[x][r]
					left--
				}
			}
		} else {
			ord := cs.kindOrd[r][:cs.nc]
			if cs.inOrder&(1<<uint(r)) != 0 {
				ord = ord[cl:] // the classes from cl on, in that order
			}
			for _, k := range ord {
				if left == 0 {
					break
				}
				if int(k) < cl {
					continue
				}
				size := int(cs.start[k+1] - cs.start[k])
				t := min(size, left)
				best += int64(t) * p.Val[m[cs.start[k]]][r]
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
		if x := i & (numa.MaxNodes - 1); int(cs.classOf[x]) >= cl {
			got += cs.score[x]
			left--
		}
	}
	return got >= residual
}

// dfs chooses how many nodes class cl and the later ones give.
func (cs *classSearch) dfs(cl, rem int, sums [MaxKinds]int64, mask numa.Mask) bool {
	p := cs.p
	if cs.budget <= 0 {
		cs.cut = true
	}
	if cs.cut {
		return false
	}
	cs.budget--
	cs.steps++
	if rem == 0 {
		for r := 0; r < p.K; r++ {
			if sums[r] < p.Need[r] {
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
		first := &p.Val[m[s]&(numa.MaxNodes-1)]
		for r := 0; r < p.K; r++ {
			if r != cs.sk {
				next[r] += int64(t) * first[r]
			}
		}
		next[cs.sk] += cs.take(cl, t)
		mk := mask | cs.cumMask[s+t]&^cs.cumMask[s] // the first t members of cl
		if cs.dfs(cl+1, rem-t, next, mk) {
			return true
		}
	}
	return false
}

// narrowestKnown returns the narrowest cover of the prepared pool known
// without a search, of at least from nodes: the greedy covers of exists
// (step 2) for the widths from from up to the width of greedyCover's, else
// greedyCover's. The pool's totals must cover the demands. It takes
// O(k·n²) for n nodes of the pool and k kinds.
func (cs *classSearch) narrowestKnown(from int) (int, numa.Mask) {
	g := cs.greedyCover()
	gw := g.Count()
	for w := max(from, 1); w < gw; w++ {
		if m, ok := cs.greedy(w); ok {
			return w, m
		}
	}
	return gw, g
}

// greedyCover returns a cover of the prepared pool (whose totals cover the
// demands) built greedily: it adds the node that gives the largest sum of
// shares of what is still missing, kind by kind (the lower index on a
// tie), until every demand is met, then drops, in ascending index order,
// each node the others cover without. O(k·n·w) for a cover of w nodes.
func (cs *classSearch) greedyCover() numa.Mask {
	p := cs.p
	var m numa.Mask
	var missing [MaxKinds]int64
	copy(missing[:p.K], p.Need[:p.K])
	short := func() bool {
		for r := 0; r < p.K; r++ {
			if missing[r] > 0 {
				return true
			}
		}
		return false
	}
	for short() {
		best, bestGain := -1, int64(-1)
		for _, i := range cs.nodes[:cs.n] {
			if m.Contains(int(i)) {
				continue
			}
			var gain int64
			v := &p.Val[i]
			for r := 0; r < p.K; r++ {
				if missing[r] > 0 {
					gain += shareBy(min(v[r], missing[r]), p.Need[r], p.recip[r])
				}
			}
			if gain > bestGain {
				best, bestGain = int(i), gain
			}
		}
		if best < 0 || bestGain == 0 {
			break // cannot happen when the pool's totals cover
		}
		m = m.With(best)
		v := &p.Val[best]
		for r := 0; r < p.K; r++ {
			missing[r] -= v[r]
		}
	}
	for w := uint64(m); w != 0; w &= w - 1 {
		if i := bits.TrailingZeros64(w); p.Covers(m.Without(i)) {
			m = m.Without(i)
		}
	}
	return m
}
