package devchoice

// countOneWord is countWord for chooseOneWord (no must-include device): it
// sets c.wFree and c.wMust and returns the free devices on the allowed groups.
func (c *Chooser) countOneWord() int32 {
	c.wFree, c.wMust = c.free[0][0], 0
	return int32(popcount(c.wFree & c.allowedWord(&c.x.classes[c.cls[0]])))
}

// chooseOneWord is Choose's one pass for one device (see Choose): every
// choice has one node, one switch, no NVLinks and nothing to pair, so the
// best is the lowest packedKey of each bucket's lowest free device.
func (c *Chooser) chooseOneWord() {
	cl := &c.x.classes[c.cls[0]]
	free := c.wFree
	unknown := int32(c.x.nodes)
	// The key's constant part (one node, one switch) and its fields' places.
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
			best = min(best, key|uint64(popcount(f)-1)<<shS|keyIndex(firstDev(f)))
			continue
		}
		for _, bm := range cl.bm[lo:hi] {
			if m := free & bm; m != 0 {
				best = min(best, key|uint64(popcount(m)-1)<<shS|keyIndex(firstDev(m)))
			}
		}
	}
	if best == ^uint64(0) {
		return // nothing free (refused before)
	}
	c.have, c.bestWord = true, 1<<(keyIndex(int(best&63))&63)
	c.bestRank = Rank{Nodes: 1, Unknown: int(best >> shU & 1), Switches: 1, SwitchLeft: int(best >> shS & 127), NodeLeft: int(best >> shN & 127)}
}
