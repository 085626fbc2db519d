package allocator

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/numaplace/numaplace/allocator/internal/cover"
	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/numa"
)

// rank is where a span stands in the preference order among the admissible
// spans of one decision: of two spans the one whose rank compares lower
// ([compareRanks]) is chosen. The package doc states the order for callers
// (a numbered list without the code's names); this list is the same order
// with the criterion and the field each compares. The fields are the
// criteria, declared in that order, and [rankOrder] is the list the code
// compares them by, each lower first, the first that differs deciding:
//
//  1. critRule: the span keeps the singleNUMANodeExclusive rule
//     (ruleBroken);
//  2. critSets: fewer NUMA sets crossed (sets);
//  3. critDistance: lower total SLIT distance over the span's pairs
//     (distance);
//  4. critPenalty: the resources' own preferences, kind by kind (penalty:
//     GPUs under one PCIe switch, CPUs as whole free cores);
//  5. critStranded: for requests without GPUs, fewer free GPUs on the span
//     (stranded);
//  6. critLeft: best fit (or spread), kind by kind (left);
//  7. critSpan: the lowest node indices (span).
//
// Each criterion's comment says exactly what it compares. Changing the
// order is changing rankOrder; then TestEngineOrderIsTheModels fails
// until the reference model's own statement of the order
// (allocatortest.Criteria, the tests' oracle) says the same, and
// TestCriteriaFollowTheRankDocComment until the numbered lines above do.
// The package doc's list is checked for its length only
// (TestPackageDocListsEveryCriterion): change its lines by hand.
// TestRankOrder ranks two fixed spans both ways, under this order and
// with two criteria swapped.
//
// Which spans are ranked: on pools of at most cover.SmallPool nodes, every
// admissible span of the demanded width up to Options.SearchBudget of them
// (inside one NUMA set first when the width fits in one and the order puts
// the sets crossed first after the rule, since a span inside one set then
// beats every span that crosses sets), so the choice is the top-ranked one
// whenever there are fewer candidates; on larger pools one cover found by
// the admission search, improved by the local search of [searcher.improve]
// on this same order.
type rank struct {
	ruleBroken bool
	sets       int
	distance   int
	penalty    [maxKinds]int64
	stranded   int64
	left       [maxKinds]int64
	span       numa.Mask
}

// criterion names one criterion of [rank]: compareOn compares two ranks
// on it, lower first.
type criterion uint8

// The criteria, each lower first.
const (
	// critRule: whether the span breaks the singleNUMANodeExclusive rule (a
	// one-node span on a shared node, a wider span on a single node).
	// Where the rule binds hard (SingleNUMANode and Restricted under
	// Required) such a span is not admissible at all; elsewhere
	// (Preferred, BestEffort, None) it is chosen only when no span of the
	// width keeps the rule.
	critRule criterion = iota
	// critSets: the NUMA sets the span crosses.
	critSets
	// critDistance: the sum of the SLIT distances over the pairs of the
	// span's nodes.
	critDistance
	// critPenalty: for each demanded kind, in the engine's kind order (GPUs,
	// the other device classes by name, CPUs, memory, then the kinds of
	// Options.Resources and Options.NewResources as given), how far the
	// span's split of the request (see [searcher.split]) is from the
	// resource's own preference, its [Penalizer] penalty (0 for a resource
	// without one), compared kind by kind: for devices the PCIe switch
	// groups used beyond one per node, so GPUs under one switch come
	// first; for CPUs the CPUs that cannot come as whole free cores.
	critPenalty
	// critStranded: for a request that asks for no GPUs, the free GPUs on
	// the span, so that CPU-only pods leave GPU-local CPUs to GPU pods (0
	// for every span with Options.SpendGPULocalCPUs).
	critStranded
	// critLeft: for each demanded kind in kind order, the free units the
	// span's nodes keep after the placement, compared kind by kind: best
	// fit (fewer first, keeping large free blocks whole) by default, the
	// opposite with Options.Packing Spread.
	critLeft
	// critSpan: lower node indices first (numa.Mask.IsNarrowerThan; the
	// spans compared have the same width), so that the order is total and
	// every decision deterministic.
	critSpan
	// numCriteria is the number of criteria.
	numCriteria
)

// rankOrder is the preference order of [rank]'s doc comment as the list
// compareRanks reads. The local search of [searcher.improve] and the
// set-by-set enumeration of [searcher.choose] take their shortcuts only
// while the list starts critRule, critSets, critDistance (setsFirst), so
// that reordering the list is the whole change in the code.
var rankOrder = []criterion{critRule, critSets, critDistance, critPenalty, critStranded, critLeft, critSpan}

// setsFirst reports whether rankOrder starts critRule, critSets, critDistance:
// then the spans of one decision (which agree on the rule) are ordered by
// the sets they cross and the distance before anything else, which the
// local search judges incrementally and the enumeration by NUMA set
// relies on.
var setsFirst = startsWith(rankOrder, critRule, critSets, critDistance)

// startsWith reports whether order starts with the criteria prefix.
func startsWith(order []criterion, prefix ...criterion) bool {
	return slices.Equal(order[:min(len(prefix), len(order))], prefix)
}

// rankBits is rankOrder as orderBits gives it (bit i for the i-th
// criterion of the list), derived from the list as setsFirst is.
var rankBits = orderBits(rankOrder)

// orderBits returns, by criterion, the bit of its position in order.
func orderBits(order []criterion) (pos [numCriteria]uint64) {
	for i, c := range order {
		pos[c] = 1 << uint(i)
	}
	return pos
}

// compareRanks compares two ranks of spans of one decision (k demanded
// kinds) by rankOrder: negative when a is preferred, positive when b is, 0
// only for the same span.
func compareRanks(a, b *rank, k int) int { return compareRanksAt(rankOrder, &rankBits, a, b, k) }

// compareRanksBy compares a and b by the criteria of order, stopping at
// the first that differs.
func compareRanksBy(order []criterion, a, b *rank, k int) int {
	pos := orderBits(order)
	return compareRanksAt(order, &pos, a, b, k)
}

// compareRanksAt is compareRanksBy with order's bits (orderBits): the
// criteria on which a and b differ are found all at once, as the bits of
// their positions in order (differing), so that the lowest bit names the
// first that differs, the only one then compared (compareOn).
func compareRanksAt(order []criterion, pos *[numCriteria]uint64, a, b *rank, k int) int {
	diff := differing(pos, a, b, k)
	if diff == 0 {
		return 0
	}
	return compareOn(order[bits.TrailingZeros64(diff)], a, b, k)
}

// differing returns the bits (pos, by criterion) of the criteria on which a
// and b differ (k demanded kinds).
func differing(pos *[numCriteria]uint64, a, b *rank, k int) uint64 {
	var diff uint64
	if a.ruleBroken != b.ruleBroken {
		diff |= pos[critRule]
	}
	if a.sets != b.sets {
		diff |= pos[critSets]
	}
	if a.distance != b.distance {
		diff |= pos[critDistance]
	}
	if a.stranded != b.stranded {
		diff |= pos[critStranded]
	}
	if a.span != b.span {
		diff |= pos[critSpan]
	}
	for j := range min(k, maxKinds) {
		if a.penalty[j] != b.penalty[j] {
			diff |= pos[critPenalty]
		}
		if a.left[j] != b.left[j] {
			diff |= pos[critLeft]
		}
	}
	return diff
}

// compareOn compares a and b on criterion c (k demanded kinds), as the
// criterion's comment says: negative when a is preferred, positive when b
// is, 0 on a tie.
func compareOn(c criterion, a, b *rank, k int) int {
	switch c {
	case critRule:
		return compareBools(a.ruleBroken, b.ruleBroken)
	case critSets:
		return cmp.Compare(a.sets, b.sets)
	case critDistance:
		return cmp.Compare(a.distance, b.distance)
	case critPenalty:
		return compareInts(a.penalty[:k], b.penalty[:k])
	case critStranded:
		return cmp.Compare(a.stranded, b.stranded)
	case critLeft:
		return compareInts(a.left[:k], b.left[:k])
	case critSpan:
		return compareSpans(a.span, b.span)
	}
	return 0
}

// compareBools orders false before true.
func compareBools(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// compareInts compares a and b (of one length) element by element, the
// first that differs deciding, as slices.Compare does.
func compareInts(a, b []int64) int {
	b = b[:len(a)]
	for i, x := range a {
		if y := b[i]; x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// compareSpans orders masks by numa.Mask.IsNarrowerThan.
func compareSpans(a, b numa.Mask) int {
	switch {
	case a == b:
		return 0
	case a.IsNarrowerThan(b):
		return -1
	}
	return 1
}

// maxDistValues is the most distinct distances distClasses indexes.
const maxDistValues = 8

// distClasses is a machine's symmetric distance table (State.distTab) by
// value: for each node i and each distinct distance v of the table, the
// nodes at distance v from i. The distances from a node to a set of nodes
// then sum in O(distinct distances) instead of O(nodes). A table of more
// than maxDistValues distinct distances is not indexed (nv is 0) and sums
// row by row. States of one machine share it.
type distClasses struct {
	tab  []int32                                 // the table, tab[i*n+j]
	n    int                                     // nodes
	nv   int                                     // distinct distances (0: not indexed)
	vals [maxDistValues]int64                    // the distinct distances, ascending
	over [maxDistValues]int64                    // vals[v] - vals[0]
	near [numa.MaxNodes][maxDistValues]numa.Mask // near[i][v]: the nodes at distance vals[v] from i
}

// newDistClasses indexes the symmetric table tab of n nodes by value.
func newDistClasses(tab []int32, n int) *distClasses {
	dc := &distClasses{tab: tab, n: n}
	vals := slices.Compact(slices.Sorted(slices.Values(tab)))
	if len(vals) > maxDistValues {
		return dc
	}
	dc.nv = len(vals)
	for v, d := range vals {
		dc.vals[v], dc.over[v] = int64(d), int64(d-vals[0])
	}
	for i := 0; i < n; i++ {
		for j, d := range tab[i*n : (i+1)*n] {
			v, _ := slices.BinarySearch(vals, d)
			dc.near[i][v] |= 1 << uint(j)
		}
	}
	return dc
}

// to returns the sum of the distances from node i to the nodes of m (i
// itself, when in m, adds the table's distance of i to itself): by value
// when m has more than two nodes per distinct distance, else along the row
// (then cheaper).
func (dc *distClasses) to(i int, m numa.Mask) int64 {
	var t int64
	if c := m.Count(); dc.nv > 0 && c > 2*dc.nv && !general.On { // every node of m is at one of the distances: vals[0] each, plus what is over it
		return dc.byValue(i&(numa.MaxNodes-1), m, dc.vals[0]*int64(c))
	}
	row := dc.tab[i*dc.n : (i+1)*dc.n]
	for w := uint64(m); w != 0; w &= w - 1 {
		t += int64(row[bits.TrailingZeros64(w)])
	}
	return t
}

// byValue returns base plus, for each distinct distance above the
// smallest, what it is over the smallest times the nodes of m at that
// distance from node i: to(i, m) when base is the smallest distance times
// m's nodes.
func (dc *distClasses) byValue(i int, m numa.Mask, base int64) int64 {
	near := &dc.near[i&(numa.MaxNodes-1)]
	for v := 1; v < dc.nv && v < maxDistValues; v++ {
		base += dc.over[v] * int64(bits.OnesCount64(uint64(near[v]&m)))
	}
	return base
}

// toAll sets to[x] to the sum of the distances from x to the nodes of m
// (to(x, m)) for every node x of pool, and leaves the other entries at 0
// or set likewise: by value, or row by row when m has few nodes (then
// cheaper).
func (dc *distClasses) toAll(pool, m numa.Mask, to *[numa.MaxNodes]int64) {
	if c := m.Count(); dc.nv > 0 && c > 3*dc.nv && !general.On {
		base := dc.vals[0] * int64(c)
		for w := uint64(pool); w != 0; w &= w - 1 {
			x := bits.TrailingZeros64(w) & (numa.MaxNodes - 1)
			to[x] = dc.byValue(x, m, base)
		}
		return
	}
	clear(to[:dc.n])
	for w := uint64(m); w != 0; w &= w - 1 {
		i := bits.TrailingZeros64(w)
		for x, d := range dc.tab[i*dc.n : (i+1)*dc.n] { // the table is symmetric
			to[x] += int64(d)
		}
	}
}

// rankOf fills rk with the rank of span m for the decision's request,
// leaving m's split in sr.amt. It costs O(k·|m| + |m|²) plus the
// resources' penalties.
func (sr *searcher) rankOf(m numa.Mask, rk *rank) {
	s := sr.s
	rk.ruleBroken = m&sr.forbidden != 0
	if m&(m-1) == 0 && m != 0 && !general.On { // one node: one set, no pairs, the node gives everything
		i := bits.TrailingZeros64(uint64(m)) & (numa.MaxNodes - 1)
		rk.sets, rk.distance = bits.OnesCount64(s.setBit[i]), 0
		for j := 0; j < sr.k; j++ {
			sr.amt[j][i] = sr.freeP.Need[j]
		}
		sr.rankSplit(m, rk)
		return
	}
	var sets uint64
	for w := uint64(m); w != 0; w &= w - 1 {
		sets |= s.setBit[bits.TrailingZeros64(w)]
	}
	rk.sets = bits.OnesCount64(sets)
	var dist int64 // each pair once, from its lower node
	for w := uint64(m); w&(w-1) != 0; w &= w - 1 {
		dist += s.distBy.to(bits.TrailingZeros64(w), numa.Mask(w&(w-1)))
	}
	rk.distance = int(dist)
	sr.rankTail(m, rk)
}

// rankTail fills the criteria of rk after the distance for span m (rk's
// first criteria are left as they are), leaving m's split in sr.amt:
// O(k·|m| log |m|) plus the resources' penalties.
func (sr *searcher) rankTail(m numa.Mask, rk *rank) {
	sr.split(m, sr.amt)
	sr.rankSplit(m, rk)
}

// rankSplit fills the criteria of rk after the distance for span m from
// m's split, already in sr.amt: O(k·|m|) plus the resources' penalties.
func (sr *searcher) rankSplit(m numa.Mask, rk *rank) {
	s, n := sr.s, sr.s.n
	rk.span = m
	sr.amtSpan = m
	spread := s.opts.Packing == Spread
	for j := 0; j < sr.k; j++ {
		var pen int64
		if p := s.pen[sr.kinds[j]]; p != nil {
			pen = p.Penalty(sr.r, m, sr.amt[j][:n])
		}
		rk.penalty[j] = pen
		free := sr.freeP.Amount[j]
		left := -sr.freeP.Need[j]
		for w := uint64(m); w != 0; w &= w - 1 {
			left += free[bits.TrailingZeros64(w)]
		}
		if spread {
			left = -left
		}
		rk.left[j] = left
	}
	rk.stranded = 0
	if sr.strands {
		for w := uint64(m); w != 0; w &= w - 1 {
			rk.stranded += sr.keepFree[bits.TrailingZeros64(w)]
		}
	}
}

// split decides how many units of each demanded kind every node of the
// span m gives, into dst[kind][node] (entries of nodes outside m are left
// as they are): a one-node span gives everything; otherwise the first kind
// with a demand on known nodes (the anchor: GPUs when the request has any)
// comes from the nodes with the most free units first (the lower index on a
// tie), and every other kind in proportion to the anchor's split (see
// proportional), within each node's free units.
func (sr *searcher) split(m numa.Mask, dst *[maxKinds][numa.MaxNodes]int64) {
	need := &sr.freeP.Need
	if m == 0 {
		return
	}
	if m&(m-1) == 0 && !general.On { // one node: it gives everything
		i := bits.TrailingZeros64(uint64(m))
		for j := 0; j < sr.k; j++ {
			dst[j][i] = need[j]
		}
		return
	}
	anchor := -1
	for j := 0; j < sr.k; j++ {
		if need[j] > 0 {
			anchor = j
			break
		}
	}
	// The nodes in ascending order, with their anchor amounts as keys (and
	// the keys' range) when they are sorted by counting or bucket below.
	order, key := &sr.scr.order, &sr.scr.key
	var raw []int64
	if anchor >= 0 {
		raw = sr.freeP.Amount[anchor]
	}
	const insertion = 12 // the most nodes sorted by insertion
	keyed := anchor >= 0 && m.Count() > insertion
	mx, mn := int64(math.MinInt64), int64(math.MaxInt64)
	n := 0
	for w := uint64(m); w != 0; w &= w - 1 {
		i := bits.TrailingZeros64(w) & (numa.MaxNodes - 1)
		order[n&(numa.MaxNodes-1)] = int8(i)
		n++
		for j := 0; j < sr.k; j++ {
			dst[j][i] = 0
		}
		if keyed {
			v := raw[i]
			key[i] = v
			mx, mn = max(mx, v), min(mn, v)
		}
	}
	if anchor < 0 {
		return
	}
	// Anchor: most free first, lowest index on a tie.
	if !keyed {
		for a := 1; a < n; a++ {
			for b := a; b > 0 && raw[order[b]] > raw[order[b-1]]; b-- {
				order[b], order[b-1] = order[b-1], order[b]
			}
		}
	} else {
		cover.SortAscendingDesc(order[:n], key, mx, mn)
	}
	rem := need[anchor]
	for _, i := range order[:n] {
		t := min(rem, raw[i])
		dst[anchor][i] = t
		rem -= t
	}
	weights := &dst[anchor]
	for j := 0; j < sr.k; j++ {
		if j != anchor && need[j] > 0 {
			proportional(need[j], weights, sr.freeP.Amount[j], order[:n], &dst[j], &sr.scr)
		}
	}
}

// proportional splits need over the nodes in order (heaviest anchor share
// first) in proportion to weights, within free, into out: each node gets
// the floor of its share, the rounding remainder goes to the largest
// fractional parts (the earlier node in order on a tie), then amounts above
// a node's free amount go to the nodes with room, in order.
func proportional(need int64, weights *[numa.MaxNodes]int64, free []int64, order []int8, out *[numa.MaxNodes]int64, scr *splitScratch) {
	var total int64
	for _, i := range order {
		total += weights[i&(numa.MaxNodes-1)]
	}
	rem := need
	if total > 0 {
		// Each node's floor and fractional part, the latter also packed
		// with its position as (frac, last position first) in keys, which
		// holds them whole when total is below 2^56.
		frac, keys := &scr.key, scr.fracKeys[:len(order)]
		for p, i := range order {
			x := i & (numa.MaxNodes - 1)
			q, f := mulDivMod(need, weights[x], total)
			out[x], frac[x] = q, f
			rem -= q
			keys[p] = f<<7 | int64(127-p)
		}
		switch {
		case rem == 0:
		case total < 1<<56 && !general.On:
			// The largest fractional parts, the earlier position on a tie:
			// the rem largest keys.
			cover.SelectLargest(keys, int(rem))
			for _, key := range keys[:rem] {
				out[order[127-key&127]]++
			}
		default: // the same, by a stable sort of the positions (any total)
			var byFrac [numa.MaxNodes]int8
			ps := byFrac[:len(order)]
			for p := range ps {
				ps[p] = int8(p)
			}
			slices.SortStableFunc(ps, func(a, b int8) int { return cmp.Compare(frac[order[b]], frac[order[a]]) })
			for _, p := range ps[:rem] {
				out[order[p]]++
			}
		}
		rem = 0
	}
	for _, i := range order {
		if out[i] > free[i] {
			rem += out[i] - free[i]
			out[i] = free[i]
		}
	}
	for _, i := range order {
		if rem == 0 {
			break
		}
		t := min(rem, free[i]-out[i])
		out[i] += t
		rem -= t
	}
}

// splitScratch is the working memory of split and proportional.
type splitScratch struct {
	order    [numa.MaxNodes]int8
	key      [numa.MaxNodes]int64
	fracKeys [numa.MaxNodes]int64
}

// mulDivMod returns a*b/c and a*b mod c for non-negative a, b and positive
// c, without overflow (b <= c).
func mulDivMod(a, b, c int64) (q, r int64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	uq, ur := bits.Div64(hi, lo, uint64(c))
	return int64(uq), int64(ur)
}
