package allocator

import (
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// decide applies the policy to r. With choose it also picks the best span
// among the admissible ones and leaves the amounts per kind and node in
// sc.best. It never changes the state. The caller holds a lock.
//
// Bound: the admission takes O(k·n) to read the amounts, the exact subset
// search on pools of at most 16 nodes (at most 2^16 branches per width),
// and on larger pools at most searchSteps steps of the search over classes
// in all (see classes.go); when that bound cuts a search the request is
// refused with [ErrSearchLimit], so that the answer is exact or refused.
// Choosing the span adds at most Options.SearchBudget candidates per pool
// (each O(k·n) plus the resources' penalties) and as many swaps of the
// local search; a choice the bound cuts falls back to the cover the
// admission found, never to a refusal, so that Fit and Allocate agree.
func (s *State) decide(r *Request, sc *scratch, choose bool) (plan, error) {
	sc.d.cs.used, sc.d.cs.undecided = 0, 0
	if err := r.validate(s.m.ThreadsPerCore()); err != nil {
		return plan{}, err
	}
	if len(r.Devices) > 0 {
		if err := s.checkClasses(r); err != nil {
			return plan{}, err
		}
	}
	c := &sc.c
	c.k = 0
	for j, res := range s.res {
		d := res.Demand(r)
		if d == 0 {
			continue
		}
		if c.k == maxKinds {
			return plan{}, invalidRequest(r, "", "asks for more than %d resource kinds", maxKinds)
		}
		sc.kinds[c.k], c.need[c.k] = j, d
		c.k++
	}

	// Totals: the machine's free resources must cover the request. Devices
	// of unknown NUMA node count only for None requests, and are taken
	// first by them (nobody else can use them).
	var short []Shortage
	for k := 0; k < c.k; k++ {
		raw := sc.raw[k][:s.n]
		s.readFreeFor(sc, sc.kinds[k], r, raw)
		need := c.need[k]
		var free, un int64
		if r.Policy == policy.None {
			un = s.unplacedFor(sc, sc.kinds[k], r)
		}
		sc.un[k] = min(un, need)
		known := need - sc.un[k] // what known nodes must give
		c.need[k] = known
		val := &c.val
		for i, v := range raw {
			free += v
			val[i][k] = min(v, known) // c.set, in the same pass
		}
		if free+un < need {
			short = append(short, Shortage{Resource: s.res[sc.kinds[k]].Kind(), Need: need, Have: free + un})
		}
	}
	c.gen++
	if short != nil {
		return plan{}, s.insufficient(r, sc, short)
	}
	if choose {
		for k := 0; k < c.k; k++ {
			clear(sc.best[k][:s.n])
		}
	}
	if c.covers(0) {
		return plan{}, nil // None served from devices of unknown NUMA node alone
	}

	all := s.m.AllNodes()
	var p plan
	pools := s.setMasks
	switch r.Policy {
	case policy.SingleNUMANode:
		p.width = 1
		pools = s.allPool[:]
	case policy.Restricted:
		p.widthCap, p.inSet = 1, true // when a node's free amounts cover r
		if !s.anyNodeCovers(sc) {
			p.widthCap, p.inSet = s.widthCapLocked(r, sc)
			s.loadFree(sc) // widthCapLocked loaded capacities
		}
		if !p.inSet {
			pools = s.allPool[:]
		}
		p.width = p.widthCap
	default: // BestEffort, None
		pools = s.allPool[:]
	}
	single, shared := s.singleMask, s.sharedMask
	if sc.without != nil {
		single, shared = s.typesWithout(sc.without)
	}
	if r.Policy == policy.BestEffort || r.Policy == policy.None {
		// Soft rule: the allowed nodes when they hold a cover of width_free,
		// else all of them. The cover minCover found often settles it.
		var found numa.Mask
		p.widthFree, found = c.minCover(all, &sc.d)
		p.width = p.widthFree
		allowed := policy.AllowedPool(p.width, all, single, shared)
		restrict := all
		if found.IsSubsetOf(allowed) || s.anyCover(sc, pools, allowed, p.width) {
			restrict = allowed
		}
		if found.IsSubsetOf(restrict) {
			sc.seed = found
		}
		if sc.cut() {
			return plan{}, s.searchLimit(r, p)
		}
		if !choose {
			return p, nil
		}
		p.span = s.choose(r, sc, pools, restrict, p.width)
		return p, nil
	}

	allowed := policy.AllowedPool(p.width, all, single, shared)
	hard := policy.Binds(r.Policy, r.Exclusive) &&
		(r.Policy == policy.SingleNUMANode || r.Policy == policy.Restricted)
	restrict := allowed
	if !s.anyCover(sc, pools, allowed, p.width) {
		if !s.anyCover(sc, pools, all, p.width) {
			if sc.cut() {
				return plan{}, s.searchLimit(r, p)
			}
			return plan{}, s.noFit(r, sc, p, pools)
		}
		if sc.cut() {
			return plan{}, s.searchLimit(r, p)
		}
		if hard {
			return plan{}, s.blocked(r, sc, p, pools, all&^allowed)
		}
		restrict = all
	}
	if sc.cut() {
		return plan{}, s.searchLimit(r, p)
	}
	if !choose {
		return p, nil
	}
	p.span = s.choose(r, sc, pools, restrict, p.width)
	return p, nil
}

// searchLimitText says what a refusal with ErrSearchLimit means.
var searchLimitText = fmt.Sprintf("the search for a set of NUMA nodes of the width its policy demands reached its bound "+
	"(%d steps) before it could tell whether one has the free resources; refused rather than placed on a width that might be wrong", searchSteps)

// searchLimit builds the refusal of a decision whose search the bound cut.
func (s *State) searchLimit(r *Request, p plan) error {
	return s.refuse(r, p, ErrSearchLimit, nil, nil, searchLimitText)
}

// cut reports whether the bound cut a search of the current decision.
func (sc *scratch) cut() bool { return sc.d.cs.undecided > 0 }

// checkClasses refuses a request for a device class the machine lacks:
// it can never fit.
func (s *State) checkClasses(r *Request) error {
	for _, class := range slices.Sorted(maps.Keys(r.Devices)) {
		if _, ok := s.classes[class]; !ok && r.Devices[class] > 0 {
			err := s.refuse(r, plan{}, ErrInsufficient,
				[]Shortage{{Resource: class, Need: int64(r.Devices[class])}},
				nil, fmt.Sprintf("the machine has no %s devices, so it can never hold %s (%s%s)",
					quote.Bare(class), deviceCount(quote.Bare(class), int64(r.Devices[class])), s.didYouMean(class), s.classList()))
			err.(*PlacementError).Never = true
			return err
		}
	}
	return nil
}

// deviceCount writes n devices of a class the machine may not have, such
// as "2 rdma devices".
func deviceCount(class string, n int64) string {
	if n == 1 {
		return "1 " + class + " device"
	}
	return groupDigits(n) + " " + class + " devices"
}

// insufficient builds the refusal when the machine's free resources do not
// cover the request: Never when its allocatable capacity does not either.
func (s *State) insufficient(r *Request, sc *scratch, short []Shortage) error {
	never := false
	parts := make([]string, len(short))
	for i, x := range short {
		res := s.res[sc.kinds[s.kindIndex(sc, x.Resource)]]
		total, known := s.capacityTotal(res, r)
		switch {
		case known && total < x.Need:
			never = true
			parts[i] = fmt.Sprintf("%s wanted, %s in all", res.Describe(r, x.Need), res.Describe(r, total))
		case known:
			parts[i] = fmt.Sprintf("%s wanted, %s free (%s in all)", res.Describe(r, x.Need), res.Describe(r, x.Have), res.Describe(r, total))
		default:
			parts[i] = fmt.Sprintf("%s wanted, %s free", res.Describe(r, x.Need), res.Describe(r, x.Have))
		}
	}
	reason := "not enough free on the whole machine now: "
	if never {
		reason = "the machine can never hold it (its allocatable capacity falls short; unhealthy devices and reserved CPUs do not count): "
	}
	reason += strings.Join(parts, "; ")
	if !never && r.Policy == policy.SingleNUMANode {
		// The machine may hold it in all, but no node alone ever can.
		var why string
		if why, never = s.neverOnOneNode(r, sc); never {
			reason += "; and " + why
		}
	}
	err := s.refuse(r, plan{}, ErrInsufficient, short, nil, reason)
	err.(*PlacementError).Never = never
	return err
}

// kindIndex returns the position among the demanded kinds of sc of the
// resource of the given kind.
func (s *State) kindIndex(sc *scratch, kind string) int {
	for k := 0; k < sc.c.k; k++ {
		if s.res[sc.kinds[k]].Kind() == kind {
			return k
		}
	}
	return 0
}

// capacityTotal returns res's allocatable units for r on the whole machine
// (devices of unknown NUMA node included for None requests), and whether it
// is known (a resource of the caller's own with free units of unknown node
// does not say its capacity there).
func (s *State) capacityTotal(res Resource, r *Request) (int64, bool) {
	var t int64
	for i := 0; i < s.n; i++ {
		t += res.Capacity(r, i)
	}
	if r.Policy != policy.None {
		return t, true
	}
	if d, ok := res.(*Devices); ok {
		return t + int64(d.unCap), true
	}
	return t, res.Unplaced(r) == 0
}

// loadFree loads the cover with the free amounts recorded in sc.raw.
func (s *State) loadFree(sc *scratch) {
	c := &sc.c
	c.gen++
	for k := 0; k < c.k; k++ {
		for i := 0; i < s.n; i++ {
			c.set(i, k, sc.raw[k][i])
		}
	}
}

// anyNodeCovers reports whether one node of the loaded cover covers it.
func (s *State) anyNodeCovers(sc *scratch) bool {
	for i := 0; i < s.n; i++ {
		if sc.c.coversNode(i) {
			return true
		}
	}
	return false
}

// widthCapLocked returns r's width_cap and whether it was found inside one
// NUMA set, using the cover (whose demands are r's on known nodes) and
// leaving capacities in it. A request that some node's capacity covers
// alone has width_cap 1 inside that node's set: that common case costs one
// pass over the nodes. width_cap is 0 when even the whole machine's
// capacity falls short.
func (s *State) widthCapLocked(r *Request, sc *scratch) (int, bool) {
	c := &sc.c
	c.gen++
	one := false
	for k := 0; k < c.k; k++ {
		capa := sc.amt[k][:s.n] // scratch: amounts are computed later
		s.readCapacity(sc.kinds[k], r, capa)
		for i, v := range capa {
			c.set(i, k, v)
		}
	}
	for i := 0; i < s.n && !one; i++ {
		one = c.coversNode(i)
	}
	if one {
		return 1, true
	}
	best := -1
	for _, set := range s.setMasks {
		if w := c.minWidth(set, &sc.d); w > 0 && (best < 0 || w < best) {
			best = w
		}
	}
	if best > 0 {
		return best, true
	}
	return max(c.minWidth(s.m.AllNodes(), &sc.d), 0), false
}

// anyCover reports whether some pool, restricted to allowed, has a cover of
// width w.
// The cover found is kept in sc.seed, for choose.
func (s *State) anyCover(sc *scratch, pools []numa.Mask, allowed numa.Mask, w int) bool {
	for _, p := range pools {
		if m, ok := sc.c.exists(p&allowed, w, &sc.d); ok {
			sc.seed = m
			return true
		}
	}
	return false
}

// choose returns the best cover of width w among the pools restricted to
// restrict, leaving its amounts in sc.best.
//
// Small pools (at most smallPool nodes) are enumerated, up to the search
// budget of candidates per pool. A pool holding the whole machine is first
// searched NUMA set by NUMA set when the width fits in one, since a span
// inside one set beats every span that crosses sets. A large pool that
// must be searched as a whole gets one cover from the exact search, then a
// local search that swaps one node at a time while that lowers the NUMA sets
// crossed, the distance or the free resources left (best fit), within the
// budget of swaps tried, when the span is at most half the pool: a
// heuristic, as docs/design.md allows for preferences.
func (s *State) choose(r *Request, sc *scratch, pools []numa.Mask, restrict numa.Mask, w int) numa.Mask {
	ch := &sc.ch
	ch.s, ch.r, ch.sc, ch.have = s, r, sc, false
	if len(pools) == 1 && len(s.setMasks) > 1 && w <= s.maxSet {
		s.enumerate(ch, s.setMasks, restrict, w)
		if ch.have {
			return ch.bestSpan
		}
	}
	s.enumerate(ch, pools, restrict, w)
	return ch.bestSpan
}

// enumerate feeds the chooser the covers of width w of each pool.
func (s *State) enumerate(ch *chooser, pools []numa.Mask, restrict numa.Mask, w int) {
	sc := ch.sc
	budget := max(64, s.opts.SearchBudget/len(pools))
	for _, p := range pools {
		p &= restrict
		if p.Count() <= smallPool {
			ch.left = budget
			sc.c.each(p, w, &sc.d, ch)
			continue
		}
		m, ok := sc.seed, sc.seed.IsSubsetOf(p) && sc.seed.Count() == w
		if !ok {
			m, ok = sc.c.exists(p, w, &sc.d)
		}
		if !ok {
			continue
		}
		if 2*w <= p.Count() { // else the cover holds most of the pool anyway
			m = s.improve(sc, p, m)
		}
		ch.left = 2 // always evaluate the cover
		ch.visit(m)
	}
}

// improve swaps single nodes of the cover m for nodes of pool outside it
// while a swap keeps a cover and lowers (NUMA sets crossed, total distance,
// free resources left), taking the first improvement. It tries at most
// SearchBudget/2 swaps, each costing O(k), and O(n) more per swap made.
func (s *State) improve(sc *scratch, pool, m numa.Mask) numa.Mask {
	c := &sc.c
	budget := s.opts.SearchBudget / 2
	var inSet [numa.MaxNodes]int32 // nodes of m per NUMA set
	for wd := uint64(m); wd != 0; wd &= wd - 1 {
		inSet[s.m.SetOf(bits.TrailingZeros64(wd))]++
	}
	var left [numa.MaxNodes]float64 // each node's free amounts relative to the demands
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		i := bits.TrailingZeros64(wd)
		for j := 0; j < c.k; j++ {
			left[i] += float64(sc.raw[j][i]) / float64(c.need[j])
		}
	}
	sums := c.sums(m)
	// toM[x] is the total distance from node x to the nodes of m, kept up
	// to date across swaps, so that a swap is judged in O(k).
	var toM [numa.MaxNodes]int64
	for wx := uint64(pool); wx != 0; wx &= wx - 1 {
		x := bits.TrailingZeros64(wx)
		for wo := uint64(m); wo != 0; wo &= wo - 1 {
			toM[x] += int64(s.dist.At(x, bits.TrailingZeros64(wo)))
		}
	}
	for improved := true; improved && budget > 0; {
		improved = false
		for wi := uint64(m); wi != 0; wi &= wi - 1 {
			i := bits.TrailingZeros64(wi)
			// Distances from i to the rest of m.
			di := toM[i] - int64(s.dist.At(i, i))
			si := s.m.SetOf(i)
			for wj := uint64(pool &^ m); wj != 0; wj &= wj - 1 {
				j := bits.TrailingZeros64(wj)
				if budget--; budget < 0 {
					return m
				}
				sj := s.m.SetOf(j)
				// Sets crossed after the swap, relative to now.
				dSets := int64(0)
				if si != sj {
					if inSet[si] == 1 {
						dSets--
					}
					if inSet[sj] == 0 {
						dSets++
					}
				}
				if dSets > 0 {
					continue
				}
				dDist := toM[j] - int64(s.dist.At(j, i)) - di
				dLeft := left[j] - left[i] // best fit: less left free is better
				if s.opts.Packing == Spread {
					dLeft = -dLeft
				}
				better := dSets < 0 || (dDist < 0) || (dDist == 0 && dLeft < 0)
				if !better {
					continue
				}
				ok := true
				for r := 0; r < c.k && ok; r++ {
					ok = sums[r]-c.val[i][r]+c.val[j][r] >= c.need[r]
				}
				if !ok {
					continue
				}
				for r := 0; r < c.k; r++ {
					sums[r] += c.val[j][r] - c.val[i][r]
				}
				m = m&^(1<<uint(i)) | 1<<uint(j)
				for wx := uint64(pool); wx != 0; wx &= wx - 1 {
					x := bits.TrailingZeros64(wx)
					toM[x] += int64(s.dist.At(x, j)) - int64(s.dist.At(x, i))
				}
				inSet[si]--
				inSet[sj]++
				improved = true
				break
			}
			if improved {
				break
			}
		}
	}
	return m
}

// chooser compares candidate spans by docs/design.md's preferences.
type chooser struct {
	s        *State
	r        *Request
	sc       *scratch
	have     bool
	left     int
	bestSpan numa.Mask
	bestKey  [3 + 2*maxKinds]int64
}

// visit evaluates one candidate; it returns false to stop the enumeration.
func (ch *chooser) visit(m numa.Mask) bool {
	s, sc := ch.s, ch.sc
	k := sc.c.k
	s.split(sc, m)
	var key [3 + 2*maxKinds]int64
	key[0] = int64(s.m.SetsCrossed(m))
	ds, _ := s.dist.Sum(m)
	key[1] = int64(ds)
	for j := 0; j < k; j++ {
		if pen := s.pen[sc.kinds[j]]; pen != nil {
			key[2+j] = pen.Penalty(ch.r, sc.amt[j][:s.n])
		}
		left := -sc.c.need[j]
		for wd := uint64(m); wd != 0; wd &= wd - 1 {
			left += sc.raw[j][bits.TrailingZeros64(wd)]
		}
		if s.opts.Packing == Spread {
			left = -left
		}
		key[3+k+j] = left
	}
	if ch.r.GPUs == 0 && !s.opts.SpendGPULocalCPUs {
		// Keep GPU-local CPUs for GPU pods: the free GPUs on the span.
		for wd := uint64(m); wd != 0; wd &= wd - 1 {
			key[2+k] += int64(s.gpu.nodeFree[bits.TrailingZeros64(wd)])
		}
	}
	if !ch.have || less(key[:3+2*k], ch.bestKey[:3+2*k], m, ch.bestSpan) {
		ch.have, ch.bestSpan, ch.bestKey = true, m, key
		for j := 0; j < k; j++ {
			copy(sc.best[j][:s.n], sc.amt[j][:s.n])
		}
	}
	ch.left--
	return ch.left > 0
}

// less compares two keys, then the masks (lower node indices first).
func less(a, b []int64, ma, mb numa.Mask) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return ma.IsNarrowerThan(mb)
}

// split decides how many units of each demanded kind every node of m gives,
// into sc.amt: the first demanded kind (the anchor: GPUs when the request
// has any) from the nodes with the most free first; every other kind in
// proportion to the anchor's split, within each node's free amount.
func (s *State) split(sc *scratch, m numa.Mask) {
	c := &sc.c
	if m&(m-1) == 0 { // one node: it gives everything
		i := m.Lowest()
		for j := 0; j < c.k; j++ {
			clear(sc.amt[j][:s.n])
			if i >= 0 {
				sc.amt[j][i] = c.need[j]
			}
		}
		return
	}
	var order [numa.MaxNodes]int8
	n := 0
	for i := range m.All() {
		order[n] = int8(i)
		n++
	}
	anchor := -1
	for j := 0; j < c.k; j++ {
		clear(sc.amt[j][:s.n])
		if c.need[j] > 0 && anchor < 0 {
			anchor = j
		}
	}
	if anchor < 0 {
		return
	}
	// Anchor: most free first, lowest index on a tie (insertion sort: n is small).
	raw := &sc.raw[anchor]
	for a := 1; a < n; a++ {
		for b := a; b > 0 && raw[order[b]] > raw[order[b-1]]; b-- {
			order[b], order[b-1] = order[b-1], order[b]
		}
	}
	rem := c.need[anchor]
	for _, i := range order[:n] {
		t := min(rem, raw[i])
		sc.amt[anchor][i] = t
		rem -= t
	}
	weights := &sc.amt[anchor]
	for j := 0; j < c.k; j++ {
		if j != anchor && c.need[j] > 0 {
			proportional(c.need[j], weights, &sc.raw[j], order[:n], &sc.amt[j])
		}
	}
}

// proportional splits need over the nodes in order (heaviest anchor share
// first) in proportion to weights, within free, into out: each node gets
// the floor of its share, the rounding remainder goes to the largest
// fractional parts (the earlier node in order on a tie), then amounts above
// a node's free amount go to the nodes with room, in order.
func proportional(need int64, weights, free *[numa.MaxNodes]int64, order []int8, out *[numa.MaxNodes]int64) {
	var total int64
	for _, i := range order {
		total += weights[i]
	}
	rem := need
	if total > 0 {
		for _, i := range order {
			out[i] = need * weights[i] / total
			rem -= out[i]
		}
		var given numa.Mask
		for ; rem > 0; rem-- {
			best, bestFrac := -1, int64(-1)
			for _, i := range order {
				if f := need * weights[i] % total; !given.Contains(int(i)) && f > bestFrac {
					best, bestFrac = int(i), f
				}
			}
			given = given.With(best)
			out[best]++
		}
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

// noFit builds the refusal when no set of the demanded width has the free
// resources, whatever the exclusivity.
func (s *State) noFit(r *Request, sc *scratch, p plan, pools []numa.Mask) error {
	c := &sc.c
	// For each kind, the most any cover candidate of the width could offer
	// alone: the sum of the width largest free amounts inside one pool.
	var short []Shortage
	for k := 0; k < c.k; k++ {
		var best int64
		for _, pool := range pools {
			best = max(best, topSum(&sc.raw[k], pool, p.width))
		}
		if best < c.need[k] {
			short = append(short, Shortage{Resource: s.res[sc.kinds[k]].Kind(), Need: c.need[k], Have: best})
		}
	}
	if r.Policy == policy.SingleNUMANode {
		if reason, never := s.neverOnOneNode(r, sc); never {
			err := s.refuse(r, p, ErrNoNUMAFit, short, nil, reason)
			err.(*PlacementError).Never = true
			return err
		}
	}
	where := s.whereText(p)
	var reason string
	if len(short) > 0 {
		reason = fmt.Sprintf("%s has %s free now", where, s.describeNeed(r, sc, short))
		reason = "no " + strings.TrimPrefix(reason, "a ") + s.mostText(r, short)
	} else {
		reason = fmt.Sprintf("no %s has %s free together now", strings.TrimPrefix(where, "a "), s.describeAll(r, sc))
	}
	return s.refuse(r, p, ErrNoNUMAFit, short, nil, reason)
}

// neverOnOneNode reports whether no NUMA node's allocatable capacity holds
// r's demands on known nodes (a SingleNUMANode request can then never fit)
// and says so with the most one node has of each kind it lacks.
func (s *State) neverOnOneNode(r *Request, sc *scratch) (string, bool) {
	c := &sc.c
	var most [maxKinds]int64
	for k := 0; k < c.k; k++ {
		capa := sc.amt[k][:s.n] // scratch: nothing is chosen on this path
		s.readCapacity(sc.kinds[k], r, capa)
		most[k] = slices.Max(capa)
	}
	for i := 0; i < s.n; i++ {
		ok := true
		for k := 0; k < c.k && ok; k++ {
			ok = sc.amt[k][i] >= c.need[k]
		}
		if ok {
			return "", false
		}
	}
	var lack []string
	for k := 0; k < c.k; k++ {
		if most[k] < c.need[k] {
			res := s.res[sc.kinds[k]]
			lack = append(lack, fmt.Sprintf("at most %s", res.Describe(r, most[k])))
		}
	}
	reason := fmt.Sprintf("no NUMA node of this machine can ever hold %s", s.describeAll(r, sc))
	if len(lack) > 0 {
		return reason + " (one node has " + joinAnd(lack) + ")", true
	}
	return reason + " together", true
}

// blocked builds the refusal when only the exclusivity rule stands in the way.
func (s *State) blocked(r *Request, sc *scratch, p plan, pools []numa.Mask, forbidden numa.Mask) error {
	// The forbidden nodes of the pools where a cover exists without the rule.
	var used numa.Mask
	for _, pool := range pools {
		if _, ok := sc.c.exists(pool, p.width, &sc.d); ok {
			used |= pool & forbidden
		}
	}
	ids := s.m.IDsOf(used)
	what := "used by single-NUMA-node allocations, and a multi-node span may not use them"
	if p.width == 1 {
		what = "shared by multi-node allocations, and a one-node span may not use them"
	}
	reason := fmt.Sprintf("%s with %s free exists, but NUMA node(s) %s are %s (singleNUMANodeExclusive: Required)",
		s.whereText(p), s.describeAll(r, sc), joinIDs(ids), what)
	return s.refuse(r, p, ErrExclusivity, nil, ids, reason)
}

func (s *State) whereText(p plan) string {
	switch {
	case p.width == 1:
		return "a NUMA node"
	case p.inSet:
		return fmt.Sprintf("a set of %d NUMA nodes inside one NUMA set (width_cap %d)", p.width, p.widthCap)
	case p.widthCap > 0:
		return fmt.Sprintf("a set of %d NUMA nodes (width_cap %d)", p.width, p.widthCap)
	}
	return fmt.Sprintf("a set of %d NUMA nodes", p.width)
}

func (s *State) mostText(r *Request, short []Shortage) string {
	parts := make([]string, 0, len(short))
	for _, x := range short {
		for _, res := range s.res {
			if res.Kind() == x.Resource {
				parts = append(parts, res.Describe(r, x.Have))
				break
			}
		}
	}
	return fmt.Sprintf(" (at most %s free there)", joinAnd(parts))
}

func joinIDs(ids []numa.NodeID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id.String()
	}
	return strings.Join(parts, ",")
}

// describeNeed writes the short kinds' demands in words.
func (s *State) describeNeed(r *Request, sc *scratch, short []Shortage) string {
	parts := make([]string, 0, len(short))
	for _, x := range short {
		for k := 0; k < sc.c.k; k++ {
			if res := s.res[sc.kinds[k]]; res.Kind() == x.Resource {
				parts = append(parts, res.Describe(r, x.Need))
			}
		}
	}
	return joinAnd(parts)
}

// describeAll writes every demand of the request on known nodes in words.
func (s *State) describeAll(r *Request, sc *scratch) string {
	parts := make([]string, 0, sc.c.k)
	for k := 0; k < sc.c.k; k++ {
		if sc.c.need[k] > 0 {
			parts = append(parts, s.res[sc.kinds[k]].Describe(r, sc.c.need[k]))
		}
	}
	return joinAnd(parts)
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return "nothing"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// topSum returns the sum of the w largest values of v over pool, in
// O(n log n) for n nodes.
func topSum(v *[numa.MaxNodes]int64, pool numa.Mask, w int) int64 {
	var vals [numa.MaxNodes]int64
	n := 0
	for wd := uint64(pool); wd != 0; wd &= wd - 1 {
		vals[n] = v[bits.TrailingZeros64(wd)]
		n++
	}
	s := vals[:n]
	slices.Sort(s)
	var t int64
	for j := n - 1; j >= 0 && j >= n-w; j-- {
		t += s[j]
	}
	return t
}

func (s *State) refuse(r *Request, p plan, sentinel error, short []Shortage, blocked []numa.NodeID, reason string) error {
	return &PlacementError{ID: r.ID, Policy: r.Policy, Exclusive: r.Exclusive, Width: p.width,
		WidthCap: max(p.widthCap, 0), WidthFree: max(p.widthFree, 0), InSet: p.inSet,
		Short: short, Blocked: blocked, Reason: reason, err: sentinel}
}
