package devchoice

// The word path's direct decisions: requests whose best choice the search
// would reach without comparing sets of groups or switches. Each makes the
// search's choice (TestChooseWordDirectIsChoose and TestChooseWordIsChoose
// compare them with the general path) and bails out to the search
// whenever one of its conditions fails.

// directWord decides, without the search, a request of the word path for
// count devices (at least 2) out of free including must (checked: must
// within free, count at least its devices) and reports whether it did,
// with the choice in c.bestWord:
//
//   - forced: the free devices on the allowed groups are exactly count
//     (and hold every must-include device): every choice is all of them;
//   - one switch: with no must-include device, on a machine whose every
//     switch lies in one NUMA node, when a switch of a known allowed node
//     holds count free devices, every best choice lies under one such
//     switch (one node, no distance, no unknown node and one switch are
//     each the least a choice can have), so the best is the best of the
//     switches' own choices: the devices leafSwitchesWord chooses inside the
//     switch (all of them, the lowest without NVLinks to tell them apart,
//     or exactWord's when its combinations are few), ranked by their
//     links, then the free devices left in the switch, then in the node,
//     then the lowest indices. The search reaches the same leaves when no
//     budget binds, so this is taken only when at most nodeSetBudget
//     groups and switchSetBudget switches per group can hold count, and
//     when no switch would need the greedy choice;
//   - whole groups: otherwise, with no must-include device and every
//     switch in one node, when every known allowed node holding count
//     free devices holds exactly count (and one does), every best choice
//     is all the free devices of one such node: the best is the one of
//     the fewest switches, then the most links, then the lowest indices
//     (the search's leaves of one group each, taken under the same
//     budget of groups).
//
// It takes O(g + b) for the class's g groups and b buckets (plus exactWord's
// at most exactCombos combinations per switch).
func (c *Chooser) directWord(count int32, free, must uint64) bool {
	x := c.x
	cl := &x.classes[c.cls[0]]
	allowed := c.allowedWord(cl)
	free &= allowed
	if n := int32(popcount(free)); n <= count {
		if n == count && must&^allowed == 0 {
			c.have, c.bestWord = true, free
			return true
		}
		return false // too few: the search's checks say why
	}
	if must != 0 || !x.switchInGroup || count > cl.maxGroup {
		return false
	}
	c.wFree, c.wMust = free, 0
	if count <= cl.maxBucket && c.oneSwitchWord(count, free) {
		return true
	}
	return c.wholeGroupWord(count, free)
}

// oneSwitchWord is directWord's one-switch decision for count devices out
// of free (on the allowed groups), reporting whether it decided.
func (c *Chooser) oneSwitchWord(count int32, free uint64) bool {
	x := c.x
	cl := &x.classes[c.cls[0]]
	unknown := int32(x.nodes)
	// Every candidate has one node, no unknown node, no distance and one
	// switch; the rest of its rank is its links (the same for every choice
	// of count devices without c.links), then left, the free devices it
	// leaves in its switch and then in its node packed in one integer (each
	// below 64).
	groups := 0 // allowed groups holding count
	var d directBest
	// The buckets whose choice needs a call (exactWord's, or links not in
	// the index's tables) wait in pend, so that the loop keeps its values
	// in registers.
	var pend [64]uint8
	np := 0
	for i := range cl.wg {
		wg := &cl.wg[i]
		f := free & wg.gm
		nf := int32(popcount(f))
		if nf < count {
			continue
		}
		groups++
		if wg.g == unknown {
			continue // a choice there loses to one on a known node
		}
		if wg.hi-wg.lo > switchSetBudget {
			return false // more switches than the search compares per group
		}
		for bi := wg.lo; bi < wg.hi; bi++ {
			bm := cl.bm[bi]
			m := f & bm
			nb := int32(popcount(m))
			if nb < count {
				continue
			}
			left := uint32(nb-count)<<8 | uint32(nf-count)
			switch {
			case !c.links:
				sel := m
				if nb > count {
					sel = lowestBits(m, int(count))
				}
				d.offer(sel, 0, left)
			case nb == count && m == bm: // the whole bucket
				d.offer(m, int(cl.bLinks[bi]), left)
			case m>>63 == 0 && count == 2 && nb <= 11 && m == bm: // the whole bucket's best pair
				d.offer(cl.bPair[bi], int(cl.bPairLinks[bi]), left)
			default:
				pend[np&63] = uint8(bi)
				np++
			}
		}
	}
	for k := range np {
		bi := int32(pend[k&63])
		m := free & cl.bm[bi]
		nb := int32(popcount(m))
		nf := int32(popcount(free & cl.gm[x.buckets[cl.cb[bi].b].group]))
		left := uint32(nb-count)<<8 | uint32(nf-count)
		switch {
		case nb == count:
			d.offer(m, c.linksWord(m), left)
		case m>>63 == 0 && count == 2 && nb <= 11: // combos(nb, 2) <= exactCombos
			sel, links := x.bestPairWord(m) // exactWord's pair
			d.offer(sel, links, left)
		case m>>63 == 0 && combos(int(nb), int(count)) <= exactCombos:
			sel := c.exactWord(m, int(count))
			d.offer(sel, c.linksWord(sel), left)
		default:
			return false // leafSwitchesWord's greedy choice
		}
	}
	if d.sel == 0 || groups > nodeSetBudget {
		return false
	}
	c.have, c.bestWord = true, d.sel // (ChooseWord returns the word only)
	return true
}

// wholeGroupWord is directWord's whole-group decision for count devices
// out of free (on the allowed groups), reporting whether it decided.
func (c *Chooser) wholeGroupWord(count int32, free uint64) bool {
	x := c.x
	cl := &x.classes[c.cls[0]]
	unknown := int32(x.nodes)
	groups := 0 // allowed groups holding count
	var d directBest
	var pend [64]uint8 // groups of known node whose links need a call (see oneSwitchWord)
	np := 0
	for i := range cl.wg {
		wg := &cl.wg[i]
		f := free & wg.gm
		nf := int32(popcount(f))
		if nf < count {
			continue
		}
		groups++
		if wg.g == unknown {
			continue // a choice there loses to one on a known node
		}
		if nf > count || np == len(pend) {
			return false // choices inside a group: the search's
		}
		nb := holding(f, cl.bm[wg.lo:wg.hi]) // the switches of the choice
		switch {
		case !c.links:
			d.offerGroup(f, 0, nb)
		case f == wg.gm:
			d.offerGroup(f, int(cl.wgLinks[i]), nb)
		default:
			pend[np] = uint8(i)
			np++
		}
	}
	for _, i := range pend[:np] {
		wg := &cl.wg[i]
		f := free & wg.gm
		nb := holding(f, cl.bm[wg.lo:wg.hi])
		d.offerGroup(f, c.linksWord(f), nb)
	}
	if d.sel == 0 || groups > nodeSetBudget {
		return false
	}
	c.have, c.bestWord = true, d.sel // (ChooseWord returns the word only)
	return true
}

// directBest is directWord's best choice so far: its devices (0 before
// the first), links and left (oneSwitchWord's packed free devices left,
// wholeGroupWord's switches).
type directBest struct {
	sel   uint64
	links int
	left  uint32
}

// offer keeps the choice sel when it beats the best: more links, then
// less left, then the lowest indices.
func (d *directBest) offer(sel uint64, links int, left uint32) {
	if d.sel != 0 {
		diff := sel ^ d.sel // lowerIDs on words: the lower set holds diff's lowest device
		if links < d.links || links == d.links && (left > d.left || left == d.left && sel&(diff&-diff) == 0) {
			return
		}
	}
	d.sel, d.links, d.left = sel, links, left
}

// offerGroup keeps the choice sel of a whole group when it beats the best:
// fewer switches, then more links, then the lowest indices.
func (d *directBest) offerGroup(sel uint64, links int, switches uint32) {
	if d.sel != 0 {
		diff := sel ^ d.sel
		if switches > d.left || switches == d.left && (links < d.links || links == d.links && sel&(diff&-diff) == 0) {
			return
		}
	}
	d.sel, d.links, d.left = sel, links, switches
}

// holding returns how many of the words bms hold devices of f.
func holding(f uint64, bms []uint64) uint32 {
	n := uint32(0)
	for _, bm := range bms {
		if f&bm != 0 {
			n++
		}
	}
	return n
}

// allowedWord returns the devices of class cl (of at most 64 devices) on
// the allowed groups.
func (c *Chooser) allowedWord(cl *classInfo) uint64 {
	if c.nodes == c.x.nodeMask && c.unknown { // (c.nodes is within the machine's nodes)
		return ^uint64(0) >> uint(64-len(cl.ids)) // every device of the class (1 to 64)
	}
	return c.allowedGroupsWord(cl)
}

// allowedGroupsWord is allowedWord group by group.
func (c *Chooser) allowedGroupsWord(cl *classInfo) uint64 {
	allowed := uint64(0)
	for _, g := range cl.groups {
		if c.allowedGroup(int(g)) {
			allowed |= cl.gm[g]
		}
	}
	return allowed
}
