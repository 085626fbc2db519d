package devchoice

import "math/bits"

// chooseOne is Choose for one want of one device on machines whose every
// switch lies in one NUMA node (real machines): every choice has one node,
// one switch, no NVLinks and nothing to pair, so the best is the device of
// the lowest Rank among the buckets' lowest free devices (without unknown
// node first, then the fewest free left under its switch, then in its
// node, then the lowest index), or the must-include device when there is
// one. It is exact, and takes O(b + w) for b buckets of the class on the
// allowed nodes and w words of its free set, where the search would take
// its level-by-level steps.
func (c *Chooser) chooseOne() {
	x := c.x
	k := c.cls[0]
	cl := &x.classes[k]
	free, must := c.free[0], c.must[0]
	if d, ok := firstOf(must); ok {
		g := cl.group[d]
		b := cl.bucket[d]
		var sw int32
		for i := cl.cbStart[g]; i < cl.cbStart[g+1]; i++ {
			if cl.cb[i].b == b {
				sw = c.bucketFree(cl, i, free)
				break
			}
		}
		c.keepOne(g, int32(d), sw, c.groupFree(cl, g, free))
		return
	}
	for _, g := range cl.groups {
		if !c.allowedGroup(int(g)) {
			continue
		}
		lo, hi := cl.cbStart[g], cl.cbStart[g+1]
		nf := c.groupFree(cl, g, free)
		if nf == 0 {
			continue
		}
		for i := lo; i < hi; i++ {
			if n := c.bucketFree(cl, i, free); n > 0 {
				c.keepOne(g, c.bucketLow(cl, i, free), n, nf)
			}
		}
	}
}

// keepOne keeps device d of group g, with sw free devices under its switch
// and nf in its group, when it beats the best so far.
func (c *Chooser) keepOne(g, d, sw, nf int32) {
	r := Rank{Nodes: 1, Switches: 1, SwitchLeft: int(sw - 1), NodeLeft: int(nf - 1)}
	if g == int32(c.x.nodes) {
		r.Unknown = 1
	}
	if c.word {
		c.keepWord(&r, 1<<uint(d))
		return
	}
	if c.have { // lowerWord on single devices: the lower index
		if cmp := compareRanks(&r, &c.bestRank); cmp > 0 || cmp == 0 && d > c.best[0][0] {
			return
		}
	}
	c.have, c.bestRank = true, r
	c.best[0] = append(c.best[0][:0], d)
}

// bucketFree returns the free devices of class bucket i of cl.
func (c *Chooser) bucketFree(cl *classInfo, i int32, free Set) int32 {
	if c.word {
		return int32(popcount(free[0] & cl.bm[i]))
	}
	n := 0
	for _, e := range c.x.masks[cl.cb[i].lo:cl.cb[i].hi] {
		n += popcount(free[e.w] & e.bits)
	}
	return int32(n)
}

// bucketLow returns the lowest free device of class bucket i of cl (which
// has one).
func (c *Chooser) bucketLow(cl *classInfo, i int32, free Set) int32 {
	if c.word {
		return int32(bits.TrailingZeros64(free[0] & cl.bm[i]))
	}
	for _, e := range c.x.masks[cl.cb[i].lo:cl.cb[i].hi] {
		if w := free[e.w] & e.bits; w != 0 {
			return e.w<<6 | int32(bits.TrailingZeros64(w))
		}
	}
	return -1
}

// groupFree returns the free devices of cl in group g.
func (c *Chooser) groupFree(cl *classInfo, g int32, free Set) int32 {
	if c.word {
		return int32(popcount(free[0] & cl.gm[g]))
	}
	n := int32(0)
	for i := cl.cbStart[g]; i < cl.cbStart[g+1]; i++ {
		n += c.bucketFree(cl, i, free)
	}
	return n
}

// firstOf returns the lowest device of s, if any (s may be nil).
func firstOf(s Set) (int, bool) {
	for wi, w := range s {
		if w != 0 {
			return wi<<6 | bits.TrailingZeros64(w), true
		}
	}
	return 0, false
}

// countOneWord is countWord for chooseOne: the must-include and free
// devices on the allowed groups (and c.wFree and c.wMust), nothing else.
func (c *Chooser) countOneWord() (mustSeen, total int32) {
	cl := &c.x.classes[c.cls[0]]
	var allowed uint64
	for _, g := range cl.groups {
		if c.allowedGroup(int(g)) {
			allowed |= cl.gm[g]
		}
	}
	var must uint64
	if c.must[0] != nil {
		must = c.must[0][0]
	}
	c.wFree, c.wMust = c.free[0][0], must
	return int32(popcount(must & allowed)), int32(popcount(c.free[0][0] & allowed))
}

// chooseOneWord is chooseOne on the word path without a must-include
// device: each bucket's lowest free device is a candidate of rank
// {Nodes: 1, Unknown, Switches: 1, SwitchLeft, NodeLeft}, compared by its
// packedKey (the order's), the lowest kept.
func (c *Chooser) chooseOneWord() {
	x := c.x
	cl := &x.classes[c.cls[0]]
	free := c.wFree
	unknown := int32(x.nodes)
	// The key's constant part (one node, one switch) and its fields'
	// places, read once.
	base := uint64(1)<<(keyShift[critNodes]&63) | 1<<(keyShift[critSwitches]&63)
	shU, shS, shN := keyShift[critUnknown]&63, keyShift[critSwitchLeft]&63, keyShift[critNodeLeft]&63
	best := ^uint64(0)
	for _, g := range cl.groups {
		f := free & cl.gm[g]
		if f == 0 || !c.allowedGroup(int(g)) {
			continue
		}
		key := base | uint64(popcount(f)-1)<<shN
		if g == unknown {
			key |= 1 << shU
		}
		lo, hi := cl.cbStart[g], cl.cbStart[g+1]
		if hi == lo+1 { // one bucket: the group's lowest device
			best = min(best, key|uint64(popcount(f)-1)<<shS|uint64(bits.TrailingZeros64(f)))
			continue
		}
		for _, bm := range cl.bm[lo:hi] {
			if m := free & bm; m != 0 {
				best = min(best, key|uint64(popcount(m)-1)<<shS|uint64(bits.TrailingZeros64(m)))
			}
		}
	}
	if best == ^uint64(0) {
		return // nothing free (refused before)
	}
	c.have, c.bestWord = true, 1<<(best&63)
	c.bestRank = Rank{Nodes: 1, Unknown: int(best >> shU & 1), Switches: 1, SwitchLeft: int(best >> shS & 127), NodeLeft: int(best >> shN & 127)}
}
