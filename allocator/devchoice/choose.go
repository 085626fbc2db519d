package devchoice

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/numa"
)

// MaxWants is the most device classes one [Request] may ask for.
const MaxWants = 8

// Search budgets (see [Chooser.Choose]): sets of NUMA nodes and of switches
// per set of nodes compared, steps per level, GPU combinations enumerated.
const (
	nodeSetBudget   = 16
	switchSetBudget = 32
	stepBudget      = 1024
	exactCombos     = 64
)

// ErrRequest is the category of requests the chooser cannot read: an
// unknown class, a Set of the wrong length, a must-include device that is
// not free or not on an allowed node, a count below the must-include
// devices, GPUs asked for after another class, too many classes.
var ErrRequest = errors.New("invalid device request")

// ErrTooFew is the category of requests that ask for more devices of a
// class than are free on the allowed NUMA nodes.
var ErrTooFew = errors.New("not enough free devices")

// Want asks for Count devices of one class out of Free, including every
// device of Must. Free and Must are Sets of the class (Must may be nil).
type Want struct {
	Class int // the class index ([Index.Class])
	Count int // how many devices to choose (0: the want is ignored)
	Free  Set // the devices that may be chosen
	Must  Set // devices that must be chosen (a subset of Free), or nil
}

// Request is one choice to make: devices of one or more classes, on the
// NUMA nodes of Nodes. The first want with a positive count is the class
// the others pair with (GPUs, when GPUs are asked for: a request that asks
// for GPUs after another class is refused).
type Request struct {
	Nodes   numa.Mask // the NUMA nodes (dense indices) whose devices may be chosen
	Unknown bool      // allows devices of unknown NUMA node: one more node, the farthest ([Rank])
	Wants   []Want    // the classes and counts, at most MaxWants
}

// Result is a choice: each want's chosen devices and what the choice
// achieves. Its Sets belong to the [Chooser], valid until its next call.
type Result struct {
	Rank        Rank      // the choice's rank (see [Rank])
	NUMA        numa.Mask // the known NUMA nodes (dense indices) of the chosen devices
	UnknownNUMA int       // the chosen devices of unknown NUMA node
	sets        []Set
}

// Devices returns the chosen devices of the request's k-th want (empty for
// a want of count 0), a Set of the Chooser's until its next call.
func (r *Result) Devices(k int) Set { return r.sets[k] }

// Chooser chooses devices on one machine. It holds the working memory of
// one call at a time, reused by the next (which sets what it reads first),
// so it is not safe for concurrent use: give each goroutine its own, or
// keep them in a sync.Pool. Its memory is linear in the machine's devices,
// plus a row of NUMA distances per depth of level 1 (at most 65×65).
type Chooser struct {
	x *Index

	// The request, wants of positive count only.
	nw      int
	cls     [MaxWants]int
	need    [MaxWants]int32
	free    [MaxWants]Set
	must    [MaxWants]Set
	links   bool      // the first want is GPUs and NVLinks can tell choices apart
	nodes   numa.Mask // the allowed NUMA nodes
	unknown bool      // devices of unknown NUMA node allowed

	// Per want, free and must-include devices per bucket, free ones per group.
	cnt   [MaxWants][]int32
	mcnt  [MaxWants][]int32
	gcnt  [MaxWants][]int32
	gmust []bool  // the (allowed) group holds must-include devices
	glow  []int32 // first free device (firstDev) of the first want, -1: none

	// Level 1 (groups.go): the set of groups being built and the items.
	pick            []int32           // the groups of the set being built
	key             groupKey          // their node-level rank
	gcap            [MaxWants]int32   // their free devices per want
	topSum          int32             // their sum of groupTop (when c.links)
	pickFree        uint64            // their free devices (the word path)
	pickNB          int32             // their buckets holding free devices (the word path)
	fit1            int32             // the fit of the first (see wItem)
	wforced         int               // the forced groups at the start of pick
	witems, wsorted []wItem           // the items in ascending group order, and in search order
	wkeys           []uint64          // their sort keys (levelOne)
	prefix          []int32           // the running sums of wsorted's first-want devices
	suffix          [MaxWants][]int32 // the other wants' free devices from each item of wsorted on
	wdto, wgrp      []int32           // per item of wsorted: its distance to c.pick, its group
	wdtoBuf         []int32           // the rows of wdto, one per depth of the search
	steps           int
	leaves          int
	linksUB         int // the most links a choice can have
	// For pickLinks in lastGroup's loop (lastFree 0 elsewhere).
	lastFree  uint64    // the last group's free devices
	baseLinks int       // the earlier groups' links, -1 until known
	baseIdx   [64]uint8 // and their devices
	baseN     int

	// Level 2: the groups' switches as items (item i is switch itSW[i]).
	swItem   []int32 // switch ID -> its item, when that item is the switch's (leafGroups checks)
	nextB    []int32 // bucket -> next bucket of its item, -1 at the end
	bItem    []int32 // bucket -> its item (for the buckets of the current groups)
	itSW     []int32
	itFirst  []int32 // item -> its first bucket (the next ones by nextB)
	icnt     [MaxWants][]int32
	imcnt    [MaxWants][]int32
	ix       [MaxWants][]int32 // each want's devices chosen
	itMask   []uint64          // per item, its free devices (the word path)
	itDeg    []int32           // per item, the sum of its GPUs' k largest link degrees
	inB      []bool            // in the set of switches being built
	order2   []int32
	prefix2  []int32
	bsteps   int
	bleaves  int
	smin     int
	nodeLeft int32
	gLinks   int // the most links a choice inside the current groups can have

	// Level 3: devices.
	cand      []int32 // first-want candidates, in sortPref order
	candItem  []int32
	inS       []bool // first-want device -> chosen (greedyFirst's, cleared first)
	gain      []int32
	deg       []int32
	sel       [MaxWants][]int32
	tmp       []int32
	taken     []bool
	combo     []int32
	mneed     [MaxWants]int32 // must-include devices of each want (see potential)
	bestPairs int32
	bestLinks int

	// The word path (one want of at most 64 devices): its free and must-include devices.
	word  bool
	wFree uint64
	wMust uint64
	ex    exactState // exactWord's
	tied  tiedGroups // wholeGroupsWord's

	// The best choice so far (bestWord on the word path), and the results.
	have               bool
	bestRank           Rank
	best               [MaxWants][]int32
	bestWord           uint64
	res                Result
	sets               []Set     // per class, the result sets
	wordFree, wordMust [1]uint64 // ChooseWord's request sets
}

// groupKey is the node-level part of a rank.
type groupKey struct{ nodes, unk, dist int32 }

// NewChooser returns a Chooser for the index's machine.
func (x *Index) NewChooser() *Chooser {
	c := &Chooser{x: x}
	nb, ng := len(x.buckets), x.nodes+1
	for k := range MaxWants {
		c.cnt[k] = make([]int32, nb)
		c.mcnt[k] = make([]int32, nb)
		c.gcnt[k] = make([]int32, ng)
	}
	c.gmust = make([]bool, ng)
	c.glow = make([]int32, ng)
	c.swItem = make([]int32, x.nswitch)
	c.nextB = make([]int32, nb)
	c.bItem = make([]int32, nb)
	n0 := len(x.classes[0].ids)
	c.gain = make([]int32, n0)
	c.deg = make([]int32, n0)
	c.sets = make([]Set, len(x.classes))
	for k := range x.classes {
		c.sets[k] = NewSet(len(x.classes[k].ids))
	}
	c.res.sets = make([]Set, 0, MaxWants)
	return c
}

// Choose chooses the devices of req. Once its working memory has grown to
// the requests it is given (the first calls), it allocates nothing unless
// it returns an error.
//
// The choice is the best under [Rank] that the search finds. The search is
// deterministic (the same index and request give the same choice) and goes
// level by level, never over subsets of devices:
//
//   - NUMA nodes: the fewest that can hold every want with the nodes of the
//     must-include devices, by a greedy bound (exact for one class) and
//     sizes upward; the sets of that size by branch and bound over the
//     nodes sorted by free devices of the first class, cutting a branch
//     that cannot reach the counts or whose distance exceeds the best's.
//   - PCIe switches in each such set: the fewest holding the first class's
//     count (greedy, exact), then the sets of that many by branch and bound
//     on their capacity, and when the request pairs classes larger sets
//     while they could still beat the best choice's switch count.
//   - Devices in each set of switches: the must-include ones, then for the
//     first class the combination of the most pairs and NVLink links,
//     enumerated when there are at most 64 combinations (the lowest indices
//     deciding ties), else greedily (the device adding the most pairs, then
//     links, then with the most links to the other candidates, then the
//     lowest index) followed by single swaps while one adds links. The
//     other classes' devices go under the first class's switches, one per
//     first-class device there (lowest indices first), then under switches
//     already chosen, then under the fewest new switches (best fit).
//
// One device of a class of at most 64 without must-include devices, when
// every switch lies in one NUMA node, skips the levels (one node, one switch,
// no links): one pass over the class's allowed buckets finds the best exactly.
//
// Each candidate gets its full rank; one whose optimistic rank cannot beat
// the best so far is cut before its devices are chosen. At most 16 sets of
// NUMA nodes, 32 sets of switches per set of nodes and 1024 search steps
// per level are compared, so a call costs O(b + a log a + 512·(s·c + C))
// for b buckets (a switch on a node) on the allowed nodes, a of them
// holding free devices, size s, c candidates in a set of switches and C =
// min(64 combinations, c·s·passes). Below these budgets, which real
// servers stay under, criteria 1-3 are exact, 5 for one class, 4 for two
// classes whose second is asked for no more than the first, 6 when every
// pair of GPUs has the same link count (NVSwitch systems) or the
// combinations are few (a heuristic otherwise); criteria 7-8 and the
// indices then decide among the candidates compared.
//
// Errors wrap [ErrRequest] or [ErrTooFew] and name the class and the
// devices at fault.
func (c *Chooser) Choose(req *Request) (*Result, error) {
	if err := c.load(req); err != nil {
		return nil, err
	}
	c.have = false
	if c.nw == 0 {
		return c.result(req), nil
	}
	var mustSeen, total [MaxWants]int32
	n := len(c.x.classes[c.cls[0]].ids)
	c.word = c.nw == 1 && !general.On && n > 0 && n <= 64
	one := c.word && c.need[0] == 1 && c.x.switchInGroup && (c.must[0] == nil || c.must[0][0] == 0)
	switch {
	case one:
		total[0] = c.countOneWord()
	case c.word:
		mustSeen[0], total[0] = c.countWord()
	default:
		c.countAll(&mustSeen, &total)
	}
	if err := c.checkCounts(&mustSeen, &total); err != nil {
		return nil, err
	}
	if one {
		c.chooseOneWord()
	} else {
		c.levelOne()
	}
	return c.result(req), nil
}

// ChooseWord is [Chooser.Choose] for count devices of one class of at
// most 64 devices out of free, including every device of must, on the NUMA
// nodes of nodes (and of unknown node when unknown), with every Set a
// single word: the device plugin's entry, without a Request or a Result.
// It returns Choose's devices as a word and Choose's errors (a class of
// more than 64 devices is an invalid request), and like Choose allocates
// nothing once its working memory has grown unless it returns an error.
// Requests of a plain choice (forced, under one switch, whole groups, the
// must-include devices' group) are decided as the search would, without it.
func (c *Chooser) ChooseWord(class, count int, free, must uint64, nodes numa.Mask, unknown bool) (uint64, error) {
	if class < 0 || class >= len(c.x.classes) {
		return 0, fmt.Errorf("%w: unknown class %d (the machine's classes are %q)", ErrRequest, class, c.x.Classes())
	}
	n := len(c.x.classes[class].ids)
	if n > 64 {
		return 0, fmt.Errorf("%w: %s: %d devices do not fit in a word (use Choose)", ErrRequest, c.x.classes[class].name, n)
	}
	c.startWord(class, count, free, must, nodes, unknown)
	if n == 0 || count <= 0 || must&^free != 0 || popcount(must) > count || general.On {
		// Refused, empty or the general path: Choose says which.
		w := Words(n)
		req := Request{Nodes: nodes, Unknown: unknown, Wants: []Want{{Class: class, Count: count, Free: c.wordFree[:w], Must: c.wordMust[:w]}}}
		res, err := c.Choose(&req)
		if err != nil || n == 0 {
			return 0, err
		}
		return res.Devices(0)[0], nil
	}
	one := count == 1 && c.x.switchInGroup
	// directWord's own first tests, cheaper here.
	if !one && (popcount(free) == count || c.x.switchInGroup) && c.directWord(int32(count), free, must) {
		return c.bestWord, nil
	}
	var mustSeen, total [MaxWants]int32
	if one && must == 0 { // chooseOneWord; with a must-include device, the search
		if total[0] = c.countOneWord(); total[0] == 0 {
			return 0, c.checkCounts(&mustSeen, &total) // says which
		}
		c.chooseOneWord()
		return c.bestWord, nil
	}
	mustSeen[0], total[0] = c.countWord()
	if int(mustSeen[0]) != popcount(must) || total[0] < int32(count) {
		return 0, c.checkCounts(&mustSeen, &total) // says which
	}
	c.levelOne()
	return c.bestWord, nil
}

// startWord sets c up for ChooseWord's request (of a known class).
func (c *Chooser) startWord(class, count int, free, must uint64, nodes numa.Mask, unknown bool) {
	c.wordFree[0], c.wordMust[0] = free, must
	c.nw, c.cls[0], c.need[0], c.free[0], c.must[0] = 1, class, int32(count), c.wordFree[:], c.wordMust[:]
	c.links = class == 0 && c.x.maxLink > 0 && !c.x.uniform
	c.nodes, c.unknown = nodes&c.x.nodeMask, unknown
	c.have, c.word = false, true
}

// load checks the request and reads it into c.
func (c *Chooser) load(req *Request) error {
	x := c.x
	if req == nil {
		return fmt.Errorf("%w: nil request", ErrRequest)
	}
	if len(req.Wants) > MaxWants {
		return fmt.Errorf("%w: %d classes asked for, at most %d", ErrRequest, len(req.Wants), MaxWants)
	}
	c.nw = 0
	for i := range req.Wants {
		w := &req.Wants[i]
		if w.Class < 0 || w.Class >= len(x.classes) {
			return fmt.Errorf("%w: want %d: unknown class %d (the machine's classes are %q)", ErrRequest, i, w.Class, x.Classes())
		}
		name, n := x.classes[w.Class].name, len(x.classes[w.Class].ids)
		if len(w.Free) != Words(n) || w.Must != nil && len(w.Must) != Words(n) {
			return fmt.Errorf("%w: %s: sets of %d words for %d devices (make them with NewSet(%d))", ErrRequest, name, max(len(w.Free), len(w.Must)), n, n)
		}
		if w.Count < 0 {
			return fmt.Errorf("%w: %s: negative count %d", ErrRequest, name, w.Count)
		}
		for j := range i {
			if req.Wants[j].Class == w.Class {
				return fmt.Errorf("%w: %s asked for twice", ErrRequest, name)
			}
		}
		if m := w.Must.Len(); w.Count < m {
			return fmt.Errorf("%w: %s: count %d is below the %d must-include devices", ErrRequest, name, w.Count, m)
		}
		for wi, v := range w.Must {
			if extra := v &^ w.Free[wi]; extra != 0 {
				return fmt.Errorf("%w: %s: must-include device %s is not free", ErrRequest, name, c.devName(w.Class, wi<<6|bits.TrailingZeros64(extra)))
			}
		}
		if w.Count == 0 {
			continue
		}
		if w.Class == 0 && c.nw > 0 {
			return fmt.Errorf("%w: GPUs must be the first class asked for (after %s)", ErrRequest, x.classes[c.cls[0]].name)
		}
		c.cls[c.nw], c.need[c.nw], c.free[c.nw], c.must[c.nw] = w.Class, int32(w.Count), w.Free, w.Must
		c.nw++
	}
	c.links = c.nw > 0 && c.cls[0] == 0 && x.maxLink > 0 && !x.uniform
	c.nodes, c.unknown = req.Nodes&numa.FirstN(x.nodes), req.Unknown
	return nil
}

// checkCounts refuses a request whose must-include devices are not all on
// the allowed groups (mustSeen were) or counts exceed the free there (total).
func (c *Chooser) checkCounts(mustSeen, total *[MaxWants]int32) error {
	for k := range c.nw {
		cl := &c.x.classes[c.cls[k]]
		if int(mustSeen[k]) != c.must[k].Len() {
			for d := range c.must[k].All() {
				if d < len(cl.ids) && !c.allowedGroup(int(cl.group[d])) {
					where := "an unknown NUMA node"
					if g := int(cl.group[d]); g < c.x.nodes {
						where = fmt.Sprintf("NUMA node %d", c.x.m.NodeID(g))
					}
					return fmt.Errorf("%w: %s: must-include device %s is on %s, outside the allowed NUMA nodes", ErrRequest, cl.name, c.devName(c.cls[k], d), where)
				}
			}
			return fmt.Errorf("%w: %s: a must-include device is not a device of the class", ErrRequest, cl.name)
		}
		if total[k] < c.need[k] {
			return fmt.Errorf("%w: %d %s devices asked for, %d free on the allowed NUMA nodes", ErrTooFew, c.need[k], cl.name, total[k])
		}
	}
	return nil
}

// allowedGroup reports whether group g (nodes: the unknown node) is allowed.
func (c *Chooser) allowedGroup(g int) bool {
	if g == c.x.nodes {
		return c.unknown
	}
	return c.nodes.Contains(g)
}

// devName names device d of class in an error (an index beyond it as such).
func (c *Chooser) devName(class, d int) string {
	if d < len(c.x.classes[class].ids) {
		if class == 0 {
			return "GPU " + c.x.classes[class].ids[d]
		}
		return fmt.Sprintf("%q", c.x.classes[class].ids[d])
	}
	return fmt.Sprintf("index %d (beyond the class's %d devices)", d, len(c.x.classes[class].ids))
}

// countAll counts every want's free and must-include devices per bucket
// and group of the allowed groups, into c, mustSeen and total, and makes
// level 1's items (those with must-include devices forced into c.pick).
func (c *Chooser) countAll(mustSeen, total *[MaxWants]int32) {
	x := c.x
	c.witems = c.witems[:0]
	for g := range int32(x.nodes + 1) {
		if !c.allowedGroup(int(g)) {
			continue
		}
		c.gmust[g] = false
		it, some := wItem{g: g, low: -1, fit: -1}, false
		for k := range c.nw {
			cl := &x.classes[c.cls[k]]
			free, must, n := c.free[k], c.must[k], int32(0)
			for _, cb := range cl.cb[cl.cbStart[g]:cl.cbStart[g+1]] {
				bn, bm := int32(0), int32(0)
				for _, e := range x.masks[cb.lo:cb.hi] {
					w := free[e.w] & e.bits
					if w == 0 {
						continue
					}
					bn += int32(popcount(w))
					if d := e.w<<6 | int32(firstDev(w)); k == 0 && (it.low < 0 || before(d, it.low)) {
						it.low = d
					}
					if must != nil {
						bm += int32(popcount(must[e.w] & e.bits))
					}
				}
				c.cnt[k][cb.b], c.mcnt[k][cb.b] = bn, bm
				n += bn
				mustSeen[k] += bm
				c.gmust[g] = c.gmust[g] || bm > 0
				if k == 0 && bn >= c.need[0] && (it.fit < 0 || bn < it.fit) {
					it.fit = bn // the fewest free devices of a bucket holding the count
				}
			}
			c.gcnt[k][g] = n
			total[k] += n
			some = some || n > 0
		}
		it.c0, c.glow[g] = c.gcnt[0][g], it.low
		if some { // a group without free devices of any want is left out
			c.witems = append(c.witems, it)
		}
	}
	c.startPick()
	c.force(func(it *wItem) bool { return c.gmust[it.g] })
}

// bucketMasks returns the masks of class cl in bucket b.
func (c *Chooser) bucketMasks(b int32, cl int) []wordBits {
	i := int(b)*(len(c.x.classes)+1) + cl
	return c.x.masks[c.x.off[i]:c.x.off[i+1]]
}

// switchLinks returns the most links a first-want choice in c.inB can have.
func (c *Chooser) switchLinks() int {
	sum := int32(0)
	for i, in := range c.inB {
		if in {
			sum += c.itDeg[i]
		}
	}
	return min(c.gLinks, c.linksFor(sum))
}

// result writes the best choice into the result sets.
func (c *Chooser) result(req *Request) *Result {
	r := &c.res
	r.Rank, r.NUMA, r.UnknownNUMA = Rank{}, 0, 0
	r.sets = r.sets[:0]
	for i := range req.Wants {
		s := c.sets[req.Wants[i].Class]
		s.Clear()
		r.sets = append(r.sets, s)
	}
	if c.nw == 0 {
		return r
	}
	r.Rank = c.bestRank
	if c.word {
		c.sets[c.cls[0]][0] = c.bestWord
		group := c.x.classes[c.cls[0]].group
		for w := c.bestWord; w != 0; w &= w - 1 {
			if g := int(group[bits.TrailingZeros64(w)]); g < c.x.nodes {
				r.NUMA |= 1 << uint(g)
			} else {
				r.UnknownNUMA++
			}
		}
		return r
	}
	for k := range c.nw {
		s := c.sets[c.cls[k]]
		group := c.x.classes[c.cls[k]].group
		for _, d := range c.best[k] {
			s.Add(int(d))
			if g := int(group[d]); g < c.x.nodes {
				r.NUMA |= 1 << uint(g)
			} else {
				r.UnknownNUMA++
			}
		}
	}
	return r
}
