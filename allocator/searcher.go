package allocator

import (
	"math"
	"math/bits"

	"github.com/numaplace/numaplace/allocator/internal/cover"
	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/allocator/internal/scratch"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// searcher is one decision (a Fit, an Allocate, a Score, a FitWithout, the
// widths of a Resize): it owns its inputs (the state, the request, the live
// allocations to see as released), what it derives from them (the demanded
// kinds, the free amounts and the capacities as covering problems, the node
// types, the step bound of its searches, the working memory of the
// strategies) and its results (the plan, a cover the admission found, the
// chosen span and its split). [searcher.begin] sets every scalar a
// decision reads before it reads it, and the arrays are written for the
// nodes and kinds of the decision before they are read (take whole, for
// the decision's kinds, by [searcher.choose] or decide), so nothing one
// decision leaves behind is read by the next.
//
// Its memory is in two parts. The searcher itself (about 5 KB) holds what
// every decision reads; each State keeps one in a slot of its own
// (State.spare, a [scratch.Slot]), taken for a decision and put back after
// it (a decision that finds the slot taken, by a concurrent reader, takes
// one from the pool searchers shared by every State), so that a cluster of
// thousands of machine states keeps about 5 KB per state. The working
// memory of the strategies, the split of the spans and the problems' own
// arrays ([searchMem], about 100 KB) come from the pool searchMems, taken
// by [searcher.needMem] only when a decision needs more than the nodes that
// cover the request alone: a search of width 2 or more, the capacities,
// the choice of a span, the free amounts as if victims were released or of
// resources without [BulkReader]. It goes back to the pool when the
// decision is done.
//
// The covering questions (some w nodes of a pool that cover a problem's
// demands; the fewest that do) are answered by package
// allocator/internal/cover ([cover.Search.Exists], [cover.Search.MinWidth],
// where the strategy is chosen):
//   - one node ([cover.Problem.OneNode]): width 1, O(k·n), exact;
//   - the subset search: pools of at most [cover.SmallPool] nodes, exact,
//     C(n, w) subsets in the worst case;
//   - the class search: larger pools, exact within the decision's bound
//     ([cover.Bound]); beyond it undecided (a Restricted request refused
//     with ErrSearchLimit), or for None and BestEffort the narrowest cover
//     known.
//
// Choosing among admissible spans ([searcher.choose]) ranks candidates by
// [rank].
//
// Fit and Score take no searcher when [State.fitsOneNode] answers: the
// decision's own first steps for a request without Devices that some node
// the rule allows covers alone, read from the free counters.
type searcher struct {
	// Inputs.
	s       *State
	r       *Request
	without []*Allocation // nil, or live allocations seen as released

	// The demanded kinds (in the engine's kind order) and their amounts.
	k        int
	direct   bool            // the demands are of built-in kinds only, read directly (loadDemands)
	kinds    [maxKinds]int   // resource index of each demanded kind
	demand   [maxKinds]int64 // the request's units of each kind
	unplaced [maxKinds]int64 // units taken from those of unknown NUMA node (None)
	unFree   [maxKinds]int64 // free units of unknown NUMA node (None)
	freeSum  [maxKinds]int64 // free units per kind on known nodes (when sumsOK)
	sumsOK   bool
	freeP    cover.Problem   // the free units per kind and node
	capP     cover.Problem   // the capacities (when capOK)
	capMax   [maxKinds]int64 // the largest capacity of one node, per kind
	capSum   [maxKinds]int64 // the capacity per kind on known nodes
	capOK    bool            // capP, capMax and capSum are loaded

	single, shared numa.Mask // the node types (without the victims)
	bound          cover.Bound

	// Working memory of the strategies (in mem, nil without it).
	mem *searchMem
	cov *cover.Search

	// Results.
	plan  plan
	found numa.Mask // a cover of plan.width the admission found (0: none)

	// Choosing (see choose.go).
	forbidden numa.Mask // nodes a span of the width may not use under the rule
	strands   bool      // the rank counts stranded units (see rank.stranded)
	keepFree  [numa.MaxNodes]int64
	have      bool // ranks[top] is the best span so far
	left      int
	ranks     [2]rank // the best span so far (ranks[top]) and the one visit ranks
	top       int
	cand      rank
	cur       rank
	curOK     bool      // cur is the rank of the cover improve returned
	amtSpan   numa.Mask // the span whose split amt holds (0: none)
	scr       splitScratch
	amt       *[maxKinds][numa.MaxNodes]int64 // the split of the span being ranked (in mem)
	take      *[maxKinds][numa.MaxNodes]int64 // the split of the chosen span, 0 elsewhere (in mem)
}

// maxKinds is the most resource kinds one request may ask for at once.
const maxKinds = cover.MaxKinds

// searchMem is the large working memory of a decision (see [searcher]):
// the arrays of its free and capacity problems, the strategies' memory and
// the splits of the spans it ranks. A decision writes what it reads of it.
type searchMem struct {
	freeVal, capVal     [numa.MaxNodes][maxKinds]int64
	freeStore, capStore [maxKinds][numa.MaxNodes]int64
	cov                 cover.Search
	amt, take           [maxKinds][numa.MaxNodes]int64
}

// searchMems holds the working memories between decisions, for every
// State.
var searchMems scratch.Pool[searchMem]

// needMem gives the decision its working memory, from the pool, unless it
// has it already.
func (sr *searcher) needMem() {
	if sr.mem != nil {
		return
	}
	m := searchMems.Get()
	sr.mem = m
	sr.freeP.Val, sr.freeP.Store = &m.freeVal, &m.freeStore
	sr.capP.Val, sr.capP.Store = &m.capVal, &m.capStore
	sr.cov, sr.amt, sr.take = &m.cov, &m.amt, &m.take
	m.cov.Begin(&sr.bound)
}

// plan is the answer of a decision's admission: the widths, and the span
// when one was chosen.
type plan struct {
	span      numa.Mask
	width     int
	widthCap  int
	widthFree int
	inSet     bool
}

// searchers holds the searchers that no state's slot holds.
var searchers scratch.Pool[searcher]

// searcher returns a searcher for one decision of r on s, seeing the live
// allocations without (nil: none) as released: the state's own when its
// slot holds it, else one from the pool. The caller holds a lock and calls
// done when the decision's results have been used.
func (s *State) searcher(r *Request, without []*Allocation) *searcher {
	sr := s.spare.Get(&searchers)
	sr.begin(s, r, without)
	return sr
}

// begin sets every scalar field a decision reads before the decision
// writes it: its inputs, the results and the choosing state. The arrays
// (the demands, the free and capacity problems, the ranks, take) are
// written by the steps that fill them (loadDemands, loadFree, capacity,
// choose) for the decision's kinds and nodes before they are read.
func (sr *searcher) begin(s *State, r *Request, without []*Allocation) {
	sr.s, sr.r, sr.without = s, r, without
	sr.k, sr.direct, sr.sumsOK, sr.capOK = 0, false, false, false
	sr.single, sr.shared = 0, 0
	sr.bound = cover.Bound{}
	sr.plan, sr.found = plan{}, 0
	sr.forbidden, sr.strands, sr.have, sr.left, sr.top = 0, false, false, 0, 0
	sr.curOK, sr.amtSpan = false, 0
}

// done gives the working memory back to the pool and the searcher to its
// state's slot (or, when the slot holds another, to the pool), dropping
// its references to the state, the request and the victims. The views of
// resources' counters in the problems stay until the next decision
// overwrites them (they keep alive only those counters, a few words per
// node and kind); no decision reads those of another.
func (sr *searcher) done() {
	if m := sr.mem; m != nil {
		sr.mem, sr.cov, sr.amt, sr.take = nil, nil, nil, nil
		sr.freeP.Val, sr.freeP.Store, sr.capP.Val, sr.capP.Store = nil, nil, nil, nil
		m.cov.End()
		searchMems.Put(m)
	}
	s := sr.s
	sr.s, sr.r, sr.without = nil, nil, nil
	s.spare.Put(&searchers, sr)
}

// cut reports whether the bound cut a search of the decision.
func (sr *searcher) cut() bool { return sr.bound.Undecided > 0 }

// loadDemands finds the demanded kinds (at most maxKinds). A request of
// built-in amounts only (no Devices, no Amounts) on a state without kinds
// of the caller's own can demand only GPUs, CPUs and memory: their
// demands are read directly, in the engine's kind order (GPUs first, then
// the device classes, which such a request does not demand, then CPUs and
// memory); any other request asks every resource.
func (sr *searcher) loadDemands() error {
	r, s, k := sr.r, sr.s, 0
	if !general.On && len(r.Devices) == 0 && len(r.Amounts) == 0 && len(s.res) == s.builtin {
		idx, demand := s.fieldKinds(r)
		for f, d := range demand {
			if d > 0 {
				sr.kinds[k], sr.demand[k] = idx[f], d
				k++
			}
		}
		sr.k, sr.freeP.K, sr.capP.K = k, k, k
		sr.direct = true
		return nil
	}
	sr.direct = false
	return sr.loadDemandsOfAll()
}

// loadDemandsOfAll finds the demanded kinds by asking every resource.
func (sr *searcher) loadDemandsOfAll() error {
	r, k := sr.r, 0
	for j, res := range sr.s.res {
		d := res.Demand(r)
		if d == 0 {
			continue
		}
		if k == maxKinds {
			return invalidRequest(r, "", "asks for more than %d resource kinds", maxKinds)
		}
		sr.kinds[k], sr.demand[k] = j, d
		k++
	}
	sr.k, sr.freeP.K, sr.capP.K = k, k, k
	return nil
}

// loadFree reads the free units of the demanded kinds (as if the victims
// were released) into the free problem, and returns the kinds whose free
// units fall short of the demand on the whole machine. Devices of unknown
// NUMA node count only for None requests, and are taken first by them
// (nobody else can use them): the known nodes must give the rest. The
// common case, some node covering alone, costs O(n) for the first kind and
// O(nodes left) for the others: no kind can then be short.
func (sr *searcher) loadFree() []Shortage {
	s, r, p := sr.s, sr.r, &sr.freeP
	none := r.Policy == policy.None
	var ones uint64
	for j := 0; j < sr.k; j++ {
		res := sr.kinds[j]
		var raw []int64
		var un int64
		switch {
		case sr.without != nil:
			sr.needMem()
			raw = p.Store[j][:s.n]
			ret := s.res[res].(Returner)
			ret.FreeWithout(r, sr.without, raw)
			if none {
				un = ret.UnplacedWithout(r, sr.without)
			}
		case sr.direct:
			raw, un = s.builtinFree(res, r, none)
		case s.bulk[res] != nil && !general.On:
			raw = s.bulk[res].FreeView(r)
			if none {
				un = s.res[res].Unplaced(r)
			}
		default:
			sr.needMem() // for the problem's own store
			raw = s.freeOf(res, r, p.Store[j][:s.n])
			if none {
				un = s.res[res].Unplaced(r)
			}
		}
		p.Amount[j] = raw
		need := sr.demand[j]
		sr.unFree[j] = un
		sr.unplaced[j] = min(un, need)
		known := need - sr.unplaced[j]
		p.Need[j], sr.capP.Need[j] = known, known
		if j == 0 {
			ones = atLeast(raw[:s.n], known)
			continue
		}
		for w := ones; w != 0; w &= w - 1 { // the nodes left
			if i := bits.TrailingZeros64(w); raw[i] < known {
				ones &^= 1 << (uint(i) & 63)
			}
		}
	}
	if sr.k == 0 {
		ones = uint64(numa.FirstN(s.n))
	}
	p.SetOnes(s.n, numa.Mask(ones))
	sr.sumsOK = false
	if ones != 0 {
		return nil
	}
	var short []Shortage
	sr.sums()
	for j := 0; j < sr.k; j++ {
		if have := sr.freeSum[j] + sr.unFree[j]; have < sr.demand[j] {
			short = append(short, Shortage{Resource: s.res[sr.kinds[j]].Kind(), Need: sr.demand[j], Have: have})
		}
	}
	return short
}

// atLeast returns the indices i with v[i] >= min, as bits (v has at
// most 64 entries).
func atLeast(v []int64, min int64) uint64 {
	var m uint64
	for i, x := range v {
		if x >= min {
			m |= 1 << (uint(i) & 63)
		}
	}
	return m
}

// sums computes freeSum, the free units of each kind on known nodes.
func (sr *searcher) sums() {
	if sr.sumsOK {
		return
	}
	for j := 0; j < sr.k; j++ {
		var t int64
		for _, v := range sr.freeP.Amount[j] {
			t += v
		}
		sr.freeSum[j] = t
	}
	sr.sumsOK = true
}

// capacity returns the capacity problem, loading it on first use.
func (sr *searcher) capacity() *cover.Problem {
	p := &sr.capP
	if sr.capOK {
		return p
	}
	sr.needMem()
	s := sr.s
	for j := 0; j < sr.k; j++ {
		capa := s.capacityOf(sr.kinds[j], sr.r, p.Store[j][:s.n])
		p.Amount[j] = capa
		var sum, most int64
		for _, v := range capa {
			sum += v
			most = max(most, v)
		}
		sr.capSum[j], sr.capMax[j] = sum, most
	}
	p.Load(s.n)
	sr.capOK = true
	return p
}

// exists returns some w nodes of pool that cover p's demands
// ([cover.Search.Exists], where the strategy is chosen); width 1 is
// answered from the nodes that cover alone without the working memory.
func (sr *searcher) exists(p *cover.Problem, pool numa.Mask, w int) (numa.Mask, bool) {
	if w == 1 {
		return p.OneNode(pool)
	}
	sr.needMem()
	return sr.cov.Exists(p, pool, w)
}

// minWidth returns the fewest nodes of pool that cover p's demands and one
// such cover, or -1 when none does or the bound cut the search (see cut):
// [cover.Search.MinWidth], with the nodes that cover alone answered
// without the working memory.
func (sr *searcher) minWidth(p *cover.Problem, pool numa.Mask) (int, numa.Mask) {
	if m, ok := p.OneNode(pool); ok {
		return 1, m // the common case, without sorting
	}
	sr.needMem()
	return sr.cov.MinWidth(p, pool)
}

// anyCover reports whether some pool, restricted to allowed, has a cover
// of width w of the free problem, and keeps the cover found in sr.found.
func (sr *searcher) anyCover(pools []numa.Mask, allowed numa.Mask, w int) bool {
	if w == 1 && !general.On { // the common case: the nodes that cover alone are known
		for _, p := range pools {
			if m := p & allowed & sr.freeP.Ones; m != 0 {
				sr.found = m & -m
				return true
			}
		}
		return false
	}
	for _, p := range pools {
		if m, ok := sr.exists(&sr.freeP, p&allowed, w); ok {
			sr.found = m
			return true
		}
	}
	return false
}

// widthCap returns r's width_cap and whether it was found inside one NUMA
// set: the fewest nodes of one NUMA set whose capacity covers it, else the
// fewest anywhere (0 when even the whole machine's capacity falls short).
// A request whose free units some node covers alone has width_cap 1 inside
// that node's set, found without reading the capacities.
func (sr *searcher) widthCap() (int, bool) {
	s := sr.s
	all := s.m.AllNodes()
	if _, ok := sr.freeP.OneNode(all); ok && !general.On {
		return 1, true
	}
	cp := sr.capacity()
	if _, ok := cp.OneNode(all); ok {
		return 1, true
	}
	best := -1
	for _, set := range s.setMasks {
		if w, _ := sr.minWidth(cp, set); w > 0 && (best < 0 || w < best) {
			best = w
		}
	}
	if best > 0 {
		return best, true
	}
	w, _ := sr.minWidth(cp, all)
	return max(w, 0), false
}

// nodeTypes sets the single and shared nodes as the decision sees them.
func (sr *searcher) nodeTypes() {
	if sr.without == nil {
		sr.single, sr.shared = sr.s.singleMask, sr.s.sharedMask
		return
	}
	sr.single, sr.shared = sr.s.typesWithout(sr.without)
}

// decide applies the policy to the request. With choose it also picks the
// best span among the admissible ones and leaves the split per kind and
// node in sr.take. It never changes the state; the caller holds a lock.
//
// Bound: the admission reads the amounts in O(k·n), searches pools of at
// most cover.SmallPool nodes exactly (at most 2^16 subsets per width), and on
// larger pools takes at most cover.SearchSteps steps of the class search in all
// (1,024 for None and BestEffort, see [cover.Bound]). When that bound
// cuts a search of a Restricted request, it is refused with
// [ErrSearchLimit], so that its answer is exact or refused; None and
// BestEffort are admitted by the free totals (exact), and a cut search
// leaves only their width_free, and so the span's preference,
// best-effort: the narrowest cover the search knows. Choosing the
// span adds at most Options.SearchBudget candidates per pool and as many
// swaps of the local search, each ranked in O(k·w + w²) plus the
// resources' penalties; the choice never refuses, so Fit and Allocate
// agree.
func (sr *searcher) decide(choose bool) error {
	s, r := sr.s, sr.r
	if err := r.validate(s.m.ThreadsPerCore()); err != nil {
		return err
	}
	if len(r.Devices) > 0 {
		if err := s.checkClasses(r); err != nil {
			return err
		}
	}
	if len(r.Amounts) > 0 {
		if err := s.checkAmounts(r); err != nil {
			return err
		}
	}
	if err := sr.loadDemands(); err != nil {
		return err
	}
	if short := sr.loadFree(); short != nil {
		return sr.insufficient(short)
	}
	if sr.freeP.Nothing() {
		if choose {
			sr.needMem()
			sr.clearTake() // nothing on known nodes
		}
		return nil // None served from devices of unknown NUMA node alone
	}

	all := s.m.AllNodes()
	p := &sr.plan
	pools := s.allPool[:]
	sr.bound.Soft = r.Policy == policy.BestEffort || r.Policy == policy.None
	switch r.Policy {
	case policy.SingleNUMANode:
		p.width = 1
	case policy.Restricted:
		p.widthCap, p.inSet = sr.widthCap()
		if p.inSet {
			pools = s.setMasks
		}
		p.width = p.widthCap
	}
	sr.nodeTypes()
	if r.Policy == policy.BestEffort || r.Policy == policy.None {
		// The rule is soft: the allowed nodes when they hold a cover of
		// width_free, else all of them (the rank's first criterion). The
		// cover minWidth found often settles it.
		var found numa.Mask
		p.widthFree, found = sr.minWidth(&sr.freeP, all)
		p.width = p.widthFree
		allowed := policy.AllowedPool(p.width, all, sr.single, sr.shared)
		restrict := all
		if found.IsSubsetOf(allowed) {
			sr.found, restrict = found, allowed
		} else if sr.anyCover(pools, allowed, p.width) {
			restrict = allowed
		} else {
			sr.found = found
		}
		if sr.cut() {
			return sr.searchLimit()
		}
		if choose {
			sr.needMem()
			p.span = sr.choose(pools, restrict)
		}
		return nil
	}

	allowed := policy.AllowedPool(p.width, all, sr.single, sr.shared)
	hard := policy.Binds(r.Policy, r.Exclusive)
	restrict := allowed
	if !sr.anyCover(pools, allowed, p.width) {
		if allowed == all || !sr.anyCover(pools, all, p.width) {
			if sr.cut() {
				return sr.searchLimit()
			}
			return sr.noFit(pools)
		}
		if sr.cut() {
			return sr.searchLimit()
		}
		if hard {
			return sr.blocked(pools, all&^allowed)
		}
		restrict = all
	}
	if sr.cut() {
		return sr.searchLimit()
	}
	if choose {
		sr.needMem()
		p.span = sr.choose(pools, restrict)
	}
	return nil
}

// fitsOneNode reports whether [searcher.decide] admits r on the first
// cover it looks for, of one node, for a valid request without Devices
// (its Amounts, on a state with kinds of the caller's own, read by
// [State.fitsOneNodeWithCustom]): for SingleNUMANode and Restricted, some node that the
// singleNUMANodeExclusive rule allows a one-node span covers r alone; for
// BestEffort and None, some node covers it alone (width_free 1; the rule
// is soft); or nothing is left to place on known nodes (None served from
// devices of unknown NUMA node alone). That is the common answer of Fit,
// read here from the resources' free counters in O(n) without a searcher;
// false means only that decide must answer (it may still admit, or
// refuse). The steps are decide's own for that case: the demands on known
// nodes (loadDemands, loadFree: a None request takes GPUs of unknown node
// first), then by policy anyCover over the whole machine for
// SingleNUMANode, over the NUMA sets for Restricted (whose width_cap is
// then 1 inside a set), restricted to the nodes the rule allows, and
// minWidth's one-node answer for BestEffort and None.
// TestFitsOneNodeAgreesWithDecide keeps the two equal.
func (s *State) fitsOneNode(r *Request) bool {
	if len(r.Devices) != 0 || r.validate(s.m.ThreadsPerCore()) != nil {
		return false
	}
	if len(s.res) != s.builtin {
		return s.fitsOneNodeWithCustom(r)
	}
	if len(r.Amounts) != 0 {
		return false // kinds the state does not have: decide says so
	}
	gpus, cpus, mem := s.fieldDemand(r)
	if r.Policy == policy.None {
		gpus -= min(int64(s.gpu.unFree), gpus)
	}
	if gpus == 0 && cpus == 0 && mem == 0 {
		return true // nothing on known nodes
	}
	// BestEffort and None: width_free 1 whatever the rule (it is soft).
	// Otherwise a one-node cover that keeps the rule (policy.AllowedPool of
	// width 1); for Restricted inside some NUMA set, which is the same, the
	// sets partitioning the nodes.
	pool := s.m.AllNodes()
	if r.Policy != policy.BestEffort && r.Policy != policy.None {
		pool &^= s.sharedMask
	}
	return s.coversAlone(r, pool, gpus, cpus, mem)
}

// quickRefusal names, for a request that [State.fitsOneNode] does not
// admit, the refusals known from the same counters: for a valid request of
// built-in amounts only on a state without kinds of the caller's own, the
// sentinel of decide's refusal when it is one of these two, else nil
// (decide must answer):
//   - [ErrInsufficient], for every policy, when the free units of some
//     demanded kind on the whole machine fall short of the demand on known
//     nodes (loadFree's shortage; a None request's GPUs of unknown NUMA
//     node are taken first);
//   - for SingleNUMANode (width 1), [ErrNoNUMAFit] when no node at all
//     covers the request alone, and [ErrExclusivity] when only nodes
//     shared by multi-node allocations do and the rule is Required (a
//     Preferred request is then admitted on one of them).
//
// It reads O(k·n) counters and allocates nothing; the refusal's
// explanation is decide's, built when asked for ([refusal]).
// TestQuickRefusalAgreesWithDecide keeps it equal to decide.
func (s *State) quickRefusal(r *Request) error {
	if len(r.Devices) != 0 || len(r.Amounts) != 0 || len(s.res) != s.builtin ||
		r.validate(s.m.ThreadsPerCore()) != nil {
		return nil
	}
	gpus, cpus, mem := s.fieldDemand(r)
	if r.Policy == policy.None {
		gpus -= min(int64(s.gpu.unFree), gpus)
	}
	if s.shortInAll(r, gpus, cpus, mem) {
		return ErrInsufficient
	}
	if r.Policy == policy.SingleNUMANode {
		all := s.m.AllNodes()
		if s.sharedMask&all == 0 || !s.coversAlone(r, s.sharedMask&all, gpus, cpus, mem) {
			return ErrNoNUMAFit
		}
		if policy.Binds(r.Policy, r.Exclusive) {
			return ErrExclusivity
		}
	}
	return nil
}

// fitsOneNodeWithCustom is fitsOneNode on a state with kinds of
// the caller's own, for a valid request without Devices (whose Amounts
// name kinds of the state): decide's first steps as in fitsOneNode, every
// demanded kind read through the resource (its view, or Free node by
// node), the units of unknown NUMA node of a None request taken first.
// It never names a refusal (decide does, with the kinds' own words).
func (s *State) fitsOneNodeWithCustom(r *Request) bool {
	if len(r.Amounts) != 0 && s.checkAmounts(r) != nil {
		return false
	}
	var free [maxKinds][]int64
	var need [maxKinds]int64
	var res [maxKinds]int
	k := 0
	none := r.Policy == policy.None
	for j, x := range s.res {
		d := x.Demand(r)
		if d == 0 {
			continue
		}
		if none {
			d -= min(x.Unplaced(r), d)
			if d == 0 {
				continue
			}
		}
		if k == maxKinds {
			return false // too many kinds: decide refuses it
		}
		res[k], need[k] = j, d
		if b := s.bulk[j]; b != nil {
			free[k] = b.FreeView(r)
		}
		k++
	}
	if k == 0 {
		return true // nothing on known nodes
	}
	pool := s.m.AllNodes()
	if r.Policy != policy.BestEffort && r.Policy != policy.None {
		pool &^= s.sharedMask
	}
nodes:
	for w := uint64(pool); w != 0; w &= w - 1 {
		i := bits.TrailingZeros64(w)
		for j := 0; j < k; j++ {
			if f := free[j]; f != nil && f[i] < need[j] || f == nil && s.res[res[j]].Free(r, i) < need[j] {
				continue nodes
			}
		}
		return true
	}
	return false
}

// shortInAll reports whether the free GPUs, CPUs (whole cores for a
// FullPCPUs request) or memory of all nodes together fall short of gpus,
// cpus or mem units.
func (s *State) shortInAll(r *Request, gpus, cpus, mem int64) bool {
	gf, cf, mf := s.fieldFree(r)
	return sum64(gf) < gpus || sum64(cf) < cpus || sum64(mf) < mem
}

// sum64 returns the sum of v.
func sum64(v []int64) int64 {
	var t int64
	for _, x := range v {
		t += x
	}
	return t
}

// coversAlone reports whether some node of pool has free GPUs, CPUs
// (whole cores for a FullPCPUs request) and memory that reach gpus, cpus
// and mem units (an amount of 0 is no condition), looking at the nodes in
// ascending order up to the first that does.
func (s *State) coversAlone(r *Request, pool numa.Mask, gpus, cpus, mem int64) bool {
	gf, cf, mf := s.fieldFree(r)
	gpus, cpus, mem = orLeast(gpus), orLeast(cpus), orLeast(mem)
	for w := uint64(pool); w != 0; w &= w - 1 {
		if i := bits.TrailingZeros64(w); gf[i] >= gpus && cf[i] >= cpus && mf[i] >= mem {
			return true
		}
	}
	return false
}

// orLeast returns d, or the least int64 for d = 0: every amount is at
// least that.
func orLeast(d int64) int64 {
	if d == 0 {
		return math.MinInt64
	}
	return d
}

// clearTake zeroes the rows of take of the decision's kinds on every node:
// O(k·n).
func (sr *searcher) clearTake() {
	for j := 0; j < sr.k; j++ {
		clear(sr.take[j][:sr.s.n])
	}
}

// demandedIndex returns the position among the demanded kinds of the
// resource of the given kind (0 when none).
func (sr *searcher) demandedIndex(kind string) int {
	for j := 0; j < sr.k; j++ {
		if sr.s.res[sr.kinds[j]].Kind() == kind {
			return j
		}
	}
	return 0
}

// topSum returns the sum of the w largest values of v over pool, in
// O(n) on average for n nodes (see [cover.SumLargest]).
func topSum(v []int64, pool numa.Mask, w int) int64 {
	var vals [numa.MaxNodes]int64
	n := 0
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		vals[n] = v[bits.TrailingZeros64(wd)]
		n++
	}
	return cover.SumLargest(vals[:n], w)
}
