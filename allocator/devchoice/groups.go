package devchoice

import (
	"cmp"
	"slices"
)

// wItem is a group (NUMA node, or the unknown node) with free devices in
// level 1, the search of sets of groups: its free first-want devices (word
// path; else 0), their count c0 and lowest (-1: none), its buckets with free
// devices (word path), the fewest free first-want devices of a bucket
// holding the count (fit, -1: none) and its groupTop (0 unless c.links).
type wItem struct {
	free                     uint64
	g, c0, low, nb, fit, top int32
}

// startPick empties c.pick and what push keeps of it.
func (c *Chooser) startPick() {
	c.gcap, c.key = [MaxWants]int32{}, groupKey{}
	c.pickFree, c.pickNB, c.lastFree, c.topSum = 0, 0, 0, 0
	c.pick = c.pick[:0]
}

// force moves the items of c.witems that forced reports (holding
// must-include devices) into c.pick, in ascending group order (push).
func (c *Chooser) force(forced func(it *wItem) bool) {
	kept := c.witems[:0]
	for _, it := range c.witems {
		if !forced(&it) {
			kept = append(kept, it)
			continue
		}
		if c.links {
			it.top = c.x.groupTop(it.g, c.need[0])
		}
		c.push(&it, c.distTo(it.g))
		c.addOthers(it.g, 1)
	}
	c.witems = kept
}

// distTo returns the sum of the distances from group g to c.pick's.
func (c *Chooser) distTo(g int32) int32 {
	ng := c.x.nodes + 1
	d := int32(0)
	for _, h := range c.pick {
		d += c.x.gdist[int(g)*ng+int(h)]
	}
	return d
}

// levelOne searches the sets of groups, c.pick holding the forced ones: the
// fewest extra groups of c.witems holding the first want's count (greedy:
// exact for one want), then sizes upward until a set holds every want.
func (c *Chooser) levelOne() {
	x := c.x
	forced := len(c.pick)
	need0 := c.need[0]
	// The search order: free first-want devices descending, the distance
	// to the forced groups, the lowest free device, the group (c.witems
	// ascends); keys pack them with the index (on the word path they fit:
	// the general path's sort reads c0 and low from the items).
	items := c.witems
	keys := grow(c.wkeys, len(items))
	for i := range items {
		it := &items[i]
		if c.links { // topSum bounds the links only then (linksFor; else 0)
			it.top = x.groupTop(it.g, need0)
		}
		tie := int32(0) // the distance to the forced groups
		if forced > 0 {
			tie = c.distTo(it.g)
		}
		keys[i] = uint64(127-it.c0)<<56 | uint64(uint32(tie))<<20 | (keyIndex(int(it.low))&4095)<<8 | uint64(i)
	}
	if c.word {
		slices.Sort(keys)
	} else {
		slices.SortFunc(keys, func(p, q uint64) int {
			a, b := &items[p&255], &items[q&255]
			return cmp.Or(cmp.Compare(b.c0, a.c0), cmp.Compare(uint32(p>>20), uint32(q>>20)), cmpFirst(a.low, b.low), cmp.Compare(p&255, q&255))
		})
	}
	sorted := grow(c.wsorted, len(items))
	prefix := grow(c.prefix, len(items)+1)
	// A row of distances per depth (a set has at most len(items) groups).
	buf := grow(c.wdtoBuf, (len(items)+1)*len(items))
	dto, grp := buf[:len(items)], grow(c.wgrp, len(items))
	prefix[0] = 0
	for i, k := range keys {
		it := &items[k&255]
		sorted[i] = *it
		prefix[i+1] = prefix[i] + it.c0
		dto[i], grp[i] = int32(k>>20), it.g // the distance to the forced groups
	}
	c.wkeys, c.wsorted, c.prefix, c.wdtoBuf, c.wdto, c.wgrp = keys, sorted, prefix, buf, dto, grp
	// The other wants' free devices from each item on (their cut).
	for k := 1; k < c.nw; k++ {
		s := grow(c.suffix[k], len(sorted)+1)
		s[len(sorted)] = 0
		for i := len(sorted) - 1; i >= 0; i-- {
			s[i] = s[i+1] + c.gcnt[k][sorted[i].g]
		}
		c.suffix[k] = s
	}
	c.wforced = forced
	items = sorted
	extra := 0
	for extra < len(items) && c.gcap[0]+prefix[extra] < need0 {
		extra++
	}
	c.steps, c.leaves = 0, 0
	// C(k,2) times the most links of a pair (exact on NVSwitch machines).
	c.linksUB = 0
	if n := int(need0); c.cls[0] == 0 {
		c.linksUB = n * (n - 1) / 2 * int(x.maxLink)
	}
	for ; extra < len(items) && !c.have && c.steps < stepBudget; extra++ {
		c.key.nodes = int32(forced + extra)
		c.dfsGroups(0, extra)
	}
	if !c.have { // every group (the whole loop when no smaller set holds it)
		for i := range items {
			c.push(&items[i], c.distTo(items[i].g))
			if c.nw > 1 {
				c.addOthers(items[i].g, 1)
			}
		}
		c.key.nodes = int32(len(c.pick))
		c.leafGroups()
	}
}

// push adds item it's group (at distance dto from c.pick's) to c.pick, its
// pickState but key.nodes, and c.fit1 (the first's); addOthers adds the rest.
func (c *Chooser) push(it *wItem, dto int32) {
	if len(c.pick) == 0 {
		c.fit1 = it.fit
	}
	c.key.dist += dto
	if it.g == int32(c.x.nodes) {
		c.key.unk = 1
	}
	c.gcap[0] += it.c0
	c.topSum += it.top
	c.pickFree |= it.free
	c.pickNB += it.nb
	c.pick = append(c.pick, it.g)
}

// addOthers adds sign times group g's free devices of other wants to c.gcap.
func (c *Chooser) addOthers(g int32, sign int32) {
	for k := 1; k < c.nw; k++ {
		c.gcap[k] += sign * c.gcnt[k][g]
	}
}

// pickState is what push changes but c.pick (save, pop).
type pickState struct {
	key            groupKey
	gcap0, top, nb int32
	free           uint64
}

// save returns the current pickState.
func (c *Chooser) save() pickState {
	return pickState{c.key, c.gcap[0], c.topSum, c.pickNB, c.pickFree}
}

// pop undoes the last push (and addOthers), restoring s.
func (c *Chooser) pop(s *pickState) {
	if c.nw > 1 {
		c.addOthers(c.pick[len(c.pick)-1], -1)
	}
	c.pick = c.pick[:len(c.pick)-1]
	c.key, c.gcap[0], c.topSum, c.pickNB, c.pickFree = s.key, s.gcap0, s.top, s.nb, s.free
}

// pickLow returns c.pick's lowest free first-want device, -1 when none
// (every group of the word path's picks holds one).
func (c *Chooser) pickLow() int32 {
	if c.word {
		return int32(firstDev(c.pickFree))
	}
	low := int32(-1)
	for _, g := range c.pick {
		if l := c.glow[g]; l >= 0 && (low < 0 || before(l, low)) {
			low = l
		}
	}
	return low
}

// spent reports whether level 1's budgets are spent.
func (c *Chooser) spent() bool {
	return c.steps >= stepBudget || c.have && c.leaves >= nodeSetBudget
}

// capOK reports whether c.pick's groups hold every want's count.
func (c *Chooser) capOK() bool {
	for k := range c.nw {
		if c.gcap[k] < c.need[k] {
			return false
		}
	}
	return true
}

// capCut reports whether the items from i on cannot complete other wants.
func (c *Chooser) capCut(i int) bool {
	for k := 1; k < c.nw; k++ {
		if c.gcap[k]+c.suffix[k][i] < c.need[k] {
			return true
		}
	}
	return false
}

// dfsGroups extends c.pick by left more groups of c.wsorted[from:], c.wdto
// holding their distances to c.pick (a row of c.wdtoBuf per depth).
func (c *Chooser) dfsGroups(from, left int) {
	if c.spent() {
		return
	}
	c.steps++
	if c.have && (int(c.key.unk) > c.bestRank.Unknown || int(c.key.unk) == c.bestRank.Unknown && int(c.key.dist) > c.bestRank.Distance) {
		return
	}
	if left == 0 {
		if c.capOK() && (!c.have || c.boundBeats()) {
			c.leafGroups()
		}
		return
	}
	if left == 1 {
		c.baseLinks = -1
		c.lastGroup(from, c.wsorted, c.need[0], int32(c.x.nodes))
		c.lastFree = 0
		return
	}
	ng := c.x.nodes + 1
	items, prefix, need := c.wsorted, c.prefix, c.need[0]
	gdist := c.x.gdist
	for i := from; i+left <= len(items); i++ {
		// Sorted by the first want's count: the next left items add the most.
		if c.gcap[0]+prefix[i+left]-prefix[i] < need || c.nw > 1 && c.capCut(i) {
			return
		}
		it := &items[i]
		st := c.save()
		cur := c.wdto
		c.push(it, cur[i])
		if c.nw > 1 {
			c.addOthers(it.g, 1)
		}
		// The next depth's distances, for the items after i.
		row := gdist[int(it.g)*ng : int(it.g+1)*ng]
		n := len(items)
		d := len(c.pick) - c.wforced
		next := c.wdtoBuf[d*n : (d+1)*n]
		src, dst, grp := cur[i+1:], next[i+1:], c.wgrp[i+1:]
		dst, grp = dst[:len(src)], grp[:len(src)]
		for j, g := range grp {
			dst[j] = src[j] + row[g]
		}
		c.wdto = next
		c.dfsGroups(i+1, left-1)
		c.wdto = cur
		c.pop(&st)
		if c.spent() {
			return
		}
	}
}

// lastGroup is dfsGroups(from, 1) after its step and cut, with the child
// calls inline: each item of items from from on completes a set.
func (c *Chooser) lastGroup(from int, items []wItem, need int32, unknown int32) {
	st := c.save()
	base, gcap := st.key, st.gcap0
	for i := from; i < len(items); i++ {
		it := &items[i]
		if gcap+it.c0 < need || c.nw > 1 && c.capCut(i) || c.spent() {
			return
		}
		c.steps++
		unk := base.unk
		if it.g == unknown {
			unk = 1
		}
		dist := base.dist + c.wdto[i]
		if c.have && (int(unk) > c.bestRank.Unknown || int(unk) == c.bestRank.Unknown && int(dist) > c.bestRank.Distance) {
			continue
		}
		// Word path, groups holding exactly the count, switches in groups:
		// everyDevice's bound, never below boundBeats' (the same lowest
		// device on a tie), is the one tested, and its choice needs no push.
		if c.word && gcap+it.c0 == need && c.x.switchInGroup {
			lb := c.everyBound(unk, dist, st.nb+it.nb, c.linksFor(st.top+it.top))
			sel := st.free | it.free
			if c.have {
				if d := compareRanks(&lb, &c.bestRank); d > 0 || d == 0 && !c.mayTie(int32(firstDev(sel))) {
					continue
				}
			}
			c.lastFree, c.gLinks, c.nodeLeft = it.free, lb.NVLinks, 0
			c.everyLeaf(&lb, sel)
			continue
		}
		c.push(it, dist-base.dist)
		if c.nw > 1 {
			c.addOthers(it.g, 1)
		}
		if (c.nw == 1 || c.capOK()) && (!c.have || c.boundBeats()) {
			c.lastFree = it.free
			c.leafGroups()
		}
		c.pop(&st)
	}
}

// boundBeats reports whether c.pick's groups may hold a choice beating the
// best, by an optimistic rank: exact node criteria, the most links, one
// switch per group if switches lie in groups (else one), and for one want
// in one group the least left in a bucket holding the count.
func (c *Chooser) boundBeats() bool {
	lb := Rank{Nodes: int(c.key.nodes), Unknown: int(c.key.unk), Distance: int(c.key.dist), Switches: 1, NVLinks: c.linksFor(c.topSum)}
	for k := range c.nw {
		lb.NodeLeft += int(c.gcap[k] - c.need[k])
	}
	if c.x.switchInGroup { // its own switches, each used (a set of the fewest)
		lb.Switches = len(c.pick)
	}
	if c.nw == 1 && len(c.pick) == 1 {
		// One switch holds the count only if a bucket does; else two.
		if f := c.fit1; f >= 0 {
			lb.SwitchLeft = int(f - c.need[0])
		} else {
			lb.Switches = 2
		}
	}
	return c.beats(&lb)
}

// beats reports whether a choice of optimistic rank lb in c.pick's groups
// may beat the best: by its rank, or on a tie by their lowest free device.
func (c *Chooser) beats(lb *Rank) bool {
	d := compareRanks(lb, &c.bestRank)
	return d < 0 || d == 0 && c.mayTie(c.pickLow())
}

// linksFor returns the most links a first-want choice inside groups whose
// groupTop sum to top can have: c.linksUB, and half of top.
func (c *Chooser) linksFor(top int32) int {
	if !c.links {
		return c.linksUB
	}
	return min(c.linksUB, int(top/2))
}
