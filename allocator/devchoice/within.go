package devchoice

import (
	"cmp"
	"math/bits"
	"slices"
)

// grow returns s at length n (contents unspecified), reusing its array if it can.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, 2*n)
	}
	return s[:n]
}

// leafGroups searches inside c.pick's groups (levels 2 and 3), its items
// the switches with free devices of some want there (on the word path with
// those as words, c.itMask). Word-path groups holding exactly the count have
// one choice (everyDevice), found without items when switches lie in groups.
func (c *Chooser) leafGroups() {
	x := c.x
	need0 := c.need[0]
	every := c.word && c.gcap[0] == need0
	c.gLinks = c.linksFor(c.topSum)
	if every && x.switchInGroup {
		c.everyDevice(int(c.pickNB))
		return
	}
	c.itSW, c.itFirst, c.itDeg, c.itMask = c.itSW[:0], c.itFirst[:0], c.itDeg[:0], c.itMask[:0]
	for k := range c.nw {
		c.icnt[k], c.imcnt[k] = c.icnt[k][:0], c.imcnt[k][:0]
	}
	merge := c.nw > 1 || !x.switchInGroup // else each bucket is a switch of its own
	for k := range c.nw {
		cl := &x.classes[c.cls[k]]
		cnt, mcnt := c.cnt[k], c.mcnt[k]
		for _, g := range c.pick {
			for i := cl.cbStart[g]; i < cl.cbStart[g+1]; i++ {
				b := cl.cb[i].b
				var m uint64 // the word path's free devices of the bucket
				n, mn := cnt[b], mcnt[b]
				if c.word {
					m = c.wFree & cl.bm[i]
					n, mn = int32(popcount(m)), int32(popcount(m&c.wMust))
				}
				if n == 0 {
					continue
				}
				sw := x.buckets[b].sw
				it := c.swItem[sw] // sw's item if it names sw (else stale)
				if !merge || int(it) >= len(c.itSW) || c.itSW[it] != sw {
					it = int32(len(c.itSW))
					c.swItem[sw] = it
					c.itSW = append(c.itSW, sw)
					c.itFirst = append(c.itFirst, -1)
					c.itDeg = append(c.itDeg, 0)
					c.itMask = append(c.itMask, 0)
					for j := range c.nw {
						c.icnt[j] = append(c.icnt[j], 0)
						c.imcnt[j] = append(c.imcnt[j], 0)
					}
				}
				// Linked already if it has free devices of an earlier want
				// (whose cnt is stale when it has none of that class).
				fresh := true
				for j := range k {
					fresh = fresh && (c.cnt[j][b] == 0 || len(c.bucketMasks(b, c.cls[j])) == 0)
				}
				if fresh {
					c.nextB[b], c.itFirst[it] = c.itFirst[it], b
					c.bItem[b] = it
				}
				c.itMask[it] |= m
				c.icnt[k][it] += n
				c.imcnt[k][it] += mn
				if k == 0 && c.cls[0] == 0 {
					c.itDeg[it] += x.bucketTop(x.gpuCB[b], need0)
				}
			}
		}
	}
	n := len(c.itSW)
	if every { // levels 2 and 3 would reach the one choice in one step
		c.everyDevice(n)
		return
	}
	c.inB = grow(c.inB, n)
	c.nodeLeft = 0
	for k := range c.nw {
		c.ix[k] = grow(c.ix[k], n)
		c.nodeLeft += c.gcap[k] - c.need[k]
	}
	c.searchSwitches()
}

// searchSwitches is level 2: the sets of switches holding the first
// want's devices inside the current groups.
func (c *Chooser) searchSwitches() {
	need0 := c.need[0]
	cnt0 := c.icnt[0]
	o := c.order2[:0]
	forced, capF := 0, int32(0)
	for i := range c.itSW {
		f := c.imcnt[0][i] > 0
		c.inB[i] = f
		if f {
			forced++
			capF += cnt0[i]
		} else if cnt0[i] > 0 {
			o = append(o, int32(i))
		}
	}
	// o, the unforced switches with first-want devices, by those descending,
	// then ID, and their sums; smin: the fewest holding the count (greedy).
	sw := c.itSW
	for i := 1; i < len(o); i++ {
		for j := i; j > 0 && (cnt0[o[j]] > cnt0[o[j-1]] || cnt0[o[j]] == cnt0[o[j-1]] && sw[o[j]] < sw[o[j-1]]); j-- {
			o[j], o[j-1] = o[j-1], o[j]
		}
	}
	c.order2, c.prefix2 = o, append(c.prefix2[:0], 0)
	smin := forced
	for i, it := range o {
		c.prefix2 = append(c.prefix2, c.prefix2[i]+cnt0[it])
		if capF+c.prefix2[i] < need0 {
			smin++
		}
	}
	c.smin = smin
	// Cut the groups when an optimistic rank cannot beat the best.
	lb := c.groupRank()
	lb.Unpaired = c.unpairedBound(false)
	lb.Switches = smin
	lb.NVLinks = c.gLinks
	if c.nw == 1 && smin == 1 { // the forced switch, else the smallest that fits
		best := capF
		for j := 0; forced == 0 && j < len(o) && cnt0[o[j]] >= need0; j++ {
			best = cnt0[o[j]]
		}
		lb.SwitchLeft = int(best - need0)
	}
	if c.have && !c.beats(&lb) {
		return
	}
	c.leaves++
	// Several wants: a larger set may pair more or use fewer switches in
	// all; go on while it could (a set has at most need0 switches).
	for s := smin; ; s++ {
		c.bsteps, c.bleaves = 0, 0
		c.dfsSwitches(0, s-forced, capF, s)
		if c.nw == 1 || int32(s+1) > need0 || s+1 > forced+len(o) ||
			s+1 > c.bestRank.Switches && c.bestRank.Unpaired <= lb.Unpaired {
			break
		}
	}
}

// groupRank returns the node-level part of a rank for the current groups.
func (c *Chooser) groupRank() Rank {
	return Rank{Nodes: int(c.key.nodes), Unknown: int(c.key.unk), Distance: int(c.key.dist), NodeLeft: int(c.nodeLeft)}
}

// unpairedBound is a lower bound of a choice's unpaired devices inside
// the current groups (onlyB: with the first want inside c.inB's switches).
func (c *Chooser) unpairedBound(onlyB bool) int {
	u := 0
	for k := 1; k < c.nw; k++ {
		pairs := int32(0)
		for i := range c.itSW {
			if !onlyB || c.inB[i] {
				pairs += min(c.icnt[0][i], c.icnt[k][i])
			}
		}
		u += int(c.need[k] - min(c.need[k], c.need[0], pairs))
	}
	return u
}

// dfsSwitches extends c.inB by left more items of c.order2[from:] to sets
// of s switches, each a leaf (the loop cuts those below the count).
func (c *Chooser) dfsSwitches(from, left int, capacity int32, s int) {
	if c.have && (c.bleaves >= switchSetBudget || c.bsteps >= stepBudget) {
		return
	}
	c.bsteps++
	if left == 0 {
		c.leafSwitches(s)
		return
	}
	for i := from; i+left <= len(c.order2); i++ {
		if capacity+c.prefix2[i+left]-c.prefix2[i] < c.need[0] {
			return
		}
		it := c.order2[i]
		c.inB[it] = true
		c.dfsSwitches(i+1, left-1, capacity+c.icnt[0][it], s)
		c.inB[it] = false
	}
}

// leafSwitches chooses the devices in c.inB's s switches, kept if they beat the best.
func (c *Chooser) leafSwitches(s int) {
	// Optimistic: one want uses each switch of the set (a set of the fewest), several smin.
	lb := c.groupRank()
	lb.Switches = c.smin
	lb.NVLinks = c.switchLinks()
	lb.Unpaired = c.unpairedBound(true)
	cand := uint64(0) // the word path: the free devices of the set
	if c.nw == 1 {
		lb.Switches = s
		left := -c.need[0]
		for i := range c.itSW {
			if c.inB[i] {
				left += c.icnt[0][i]
				cand |= c.itMask[i]
			}
		}
		lb.SwitchLeft = int(left)
	}
	if c.have && compareRanks(&lb, &c.bestRank) > 0 {
		return
	}
	c.bleaves++
	for k := range c.nw {
		clear(c.ix[k])
	}
	if c.word {
		c.leafWord(cand)
		return
	}
	c.selectFirst()
	for k := 1; k < c.nw; k++ {
		c.selectOther(k)
	}
	r := c.rankOf()
	if c.have {
		d := compareRanks(&r, &c.bestRank)
		for k := 0; d == 0 && k < c.nw; k++ { // lowerWord on sorted lists
			d = comparePref(c.sel[k], c.best[k])
		}
		if d >= 0 {
			return
		}
	}
	c.have, c.bestRank = true, r
	for k := range c.nw {
		c.best[k] = append(c.best[k][:0], c.sel[k]...)
	}
}

// used reports whether the selection has devices under item i.
func (c *Chooser) used(i int32) bool {
	return slices.ContainsFunc(c.ix[:c.nw], func(ix []int32) bool { return ix[i] > 0 })
}

// rankOf returns the rank of the selection (c.sel, counted in c.ix); the
// first want pairs with itself wholly, adding no unpaired device.
func (c *Chooser) rankOf() Rank {
	r := c.groupRank()
	for k := range c.nw {
		r.SwitchLeft -= int(c.need[k])
		r.Unpaired += int(c.need[k])
	}
	for i := range c.itSW {
		if !c.used(int32(i)) {
			continue
		}
		r.Switches++
		for k := range c.nw {
			r.SwitchLeft += int(c.icnt[k][i])
			r.Unpaired -= int(min(c.ix[0][i], c.ix[k][i]))
		}
	}
	if c.cls[0] == 0 {
		r.NVLinks = c.linksAmong(c.sel[0])
	}
	return r
}

// linksAmong returns the NVLink links among the GPUs of sel.
func (c *Chooser) linksAmong(sel []int32) int {
	x := c.x
	if x.uniform {
		return len(sel) * (len(sel) - 1) / 2 * int(x.maxLink)
	}
	links := 0
	for i, u := range sel {
		for _, v := range sel[:i] {
			links += int(x.link(u, v))
		}
	}
	return links
}

// itemOf returns the item of want k's device d (of the current groups).
func (c *Chooser) itemOf(k int, d int32) int32 {
	return c.bItem[c.x.classes[c.cls[k]].bucket[d]]
}

// take records device d of want k in the selection.
func (c *Chooser) take(k int, d int32) {
	c.ix[k][c.itemOf(k, d)]++
	c.sel[k] = append(c.sel[k], d)
}

// gather appends the free devices of want k in the items selected by in
// (every item when in is nil) to dst, in sortPref order, and returns it.
func (c *Chooser) gather(k int, in []bool, dst []int32) []int32 {
	dst = dst[:0]
	free, cl := c.free[k], c.cls[k]
	for i := range c.itSW {
		if in != nil && !in[i] {
			continue
		}
		for b := c.itFirst[i]; b >= 0; b = c.nextB[b] {
			for _, e := range c.bucketMasks(b, cl) {
				for w := free[e.w] & e.bits; w != 0; w &= w - 1 {
					dst = append(dst, e.w<<6|int32(bits.TrailingZeros64(w)))
				}
			}
		}
	}
	sortPref(dst)
	return dst
}

// selectFirst chooses the first want's devices in c.inB's switches into
// c.sel[0]: the must-include ones, then of the others (c.cand, sortPref,
// items in c.candItem) the lowest if they are the count or nothing tells
// them apart, else enumFirst's when they are few, else greedyFirst's.
func (c *Chooser) selectFirst() {
	all := c.gather(0, c.inB, c.cand)
	c.sel[0], c.cand, c.candItem = c.sel[0][:0], all[:0], c.candItem[:0]
	for _, d := range all {
		if c.must[0].Has(int(d)) {
			c.take(0, d)
		} else {
			c.cand = append(c.cand, d)
			c.candItem = append(c.candItem, c.itemOf(0, d))
		}
	}
	rest := int(c.need[0]) - len(c.sel[0])
	switch {
	case len(c.cand) == rest || !c.links && c.nw == 1:
		for _, d := range c.cand[:rest] {
			c.take(0, d)
		}
	case combos(len(c.cand), rest) <= exactCombos:
		c.bestPairs, c.bestLinks = -1, -1
		c.enumFirst(0)
		for _, d := range c.combo[len(c.sel[0]):] {
			c.take(0, d)
		}
	default:
		c.greedyFirst()
	}
	sortPref(c.sel[0])
}

// combos returns C(n, k), or exactCombos+1 when it is larger.
func combos(n, k int) int {
	if k < 0 || k > n {
		return 0
	}
	k = min(k, n-k)
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
		if r > exactCombos {
			return exactCombos + 1
		}
	}
	return r
}

// pairPot is a first-want selection's potential pairs per other want k:
// must[k] with its must-include devices (per switch, the fewer), extra[k]
// more under switches with its other free ones; selectOther takes those,
// then one under each such switch: must[k] + min(extra[k], need[k]-mneed[k]).
type pairPot struct {
	must, extra [MaxWants]int32
}

// pairsOf returns the devices of the other wants that pot pairs.
func (c *Chooser) pairsOf(pot *pairPot) int32 {
	n := int32(0)
	for k := 1; k < c.nw; k++ {
		n += pot.must[k] + min(pot.extra[k], c.need[k]-c.mneed[k])
	}
	return n
}

// potential returns the potential pairs of the current first-want
// selection and sets c.mneed to the other wants' must-include devices.
func (c *Chooser) potential() (pot pairPot) {
	c.mneed = [MaxWants]int32{}
	for i := range c.itSW {
		for k := 1; k < c.nw; k++ {
			ip, m := c.ix[0][i], c.imcnt[k][i]
			c.mneed[k] += m
			pm := min(ip, m)
			pot.must[k] += pm
			pot.extra[k] += min(ip-pm, c.icnt[k][i]-m)
		}
	}
	return pot
}

// enumFirst completes c.sel[0] from c.cand[from:] in every way, keeping
// in c.combo the first with the most pairs, then links.
func (c *Chooser) enumFirst(from int) {
	need := int(c.need[0])
	if len(c.sel[0]) == need {
		links := 0 // equal for every combination without c.links
		if c.links {
			links = c.linksAmong(c.sel[0])
		}
		pot := c.potential()
		if pairs := c.pairsOf(&pot); pairs > c.bestPairs || pairs == c.bestPairs && links > c.bestLinks {
			c.bestPairs, c.bestLinks = pairs, links
			c.combo = append(c.combo[:0], c.sel[0]...)
		}
		return
	}
	for i := from; len(c.cand)-i >= need-len(c.sel[0]); i++ {
		d, it := c.cand[i], c.candItem[i]
		c.take(0, d)
		c.enumFirst(i + 1)
		c.sel[0] = c.sel[0][:len(c.sel[0])-1]
		c.ix[0][it]--
	}
}

// greedyFirst adds the first want's candidates one at a time (the most
// pairs added, then links, then links to the candidates and chosen, then
// the lowest), then swaps one while that adds links and keeps the pairs.
func (c *Chooser) greedyFirst() {
	need := int(c.need[0])
	c.inS = grow(c.inS, len(c.x.classes[c.cls[0]].ids))
	clear(c.inS)
	for _, d := range c.sel[0] {
		c.inS[d] = true
	}
	if c.links { // gain: links to the chosen; deg: to those and the candidates
		clear(c.gain)
		clear(c.deg)
		for _, v := range c.cand {
			c.addLinks(c.deg, v, 1)
		}
		for _, v := range c.sel[0] {
			c.addLinks(c.deg, v, 1)
			c.addLinks(c.gain, v, 1)
		}
	}
	for len(c.sel[0]) < need {
		best, bp := -1, int32(0)
		for i, v := range c.cand {
			if c.inS[v] {
				continue
			}
			c.ix[0][c.candItem[i]]++ // the pairs with v taken
			p := c.potential()
			c.ix[0][c.candItem[i]]--
			pairs := c.pairsOf(&p)
			d := cmp.Compare(pairs, bp)
			if d == 0 && c.links && best >= 0 {
				d = cmp.Or(cmp.Compare(c.gain[v], c.gain[c.cand[best]]), cmp.Compare(c.deg[v], c.deg[c.cand[best]]))
			}
			if best < 0 || d > 0 {
				best, bp = i, pairs
			}
		}
		v := c.cand[best]
		c.take(0, v)
		c.inS[v] = true
		if c.links {
			c.addLinks(c.gain, v, 1)
		}
	}
	if c.links {
		// Swaps: in a paired request only under one switch (the pairs stay).
		for range 2 * need {
			bx, by, bd := -1, -1, int32(0)
			for xi, u := range c.sel[0] {
				if c.must[0].Has(int(u)) {
					continue
				}
				iu := c.itemOf(0, u)
				for yi, v := range c.cand {
					// (links are never negative: gain[v]-gain[u] bounds the gain)
					if c.inS[v] || c.nw > 1 && c.candItem[yi] != iu || c.gain[v]-c.gain[u] <= bd {
						continue
					}
					if d := c.gain[v] - c.x.link(u, v) - c.gain[u]; d > bd {
						bx, by, bd = xi, yi, d
					}
				}
			}
			if bx < 0 {
				break
			}
			u, v := c.sel[0][bx], c.cand[by]
			c.inS[u] = false
			c.addLinks(c.gain, u, -1)
			c.ix[0][c.itemOf(0, u)]--
			c.ix[0][c.candItem[by]]++
			c.inS[v] = true
			c.addLinks(c.gain, v, 1)
			c.sel[0][bx] = v
		}
	}
}

// addLinks adds sign times GPU v's links to its neighbours' entries of dst.
func (c *Chooser) addLinks(dst []int32, v int32, sign int32) {
	x := c.x
	for k := x.linkStart[v]; k < x.linkStart[v+1]; k++ {
		dst[x.linkTo[k]] += sign * x.linkN[k]
	}
}

// selectOther chooses want k's devices in the current groups into c.sel[k],
// lowest first: the must-include ones, one under each first-want device's
// switch, under switches already chosen, then under the fewest new ones.
func (c *Chooser) selectOther(k int) {
	need := int(c.need[k])
	c.tmp = c.gather(k, nil, c.tmp)
	c.taken = grow(c.taken, len(c.tmp))
	clear(c.taken)
	c.sel[k] = c.sel[k][:0]
	// pass takes the untaken devices ok accepts, in order, up to the count.
	pass := func(ok func(d, it int32) bool) {
		for i := 0; i < len(c.tmp) && len(c.sel[k]) < need; i++ {
			if d := c.tmp[i]; !c.taken[i] && ok(d, c.itemOf(k, d)) {
				c.taken[i] = true
				c.take(k, d)
			}
		}
	}
	pass(func(d, _ int32) bool { return c.must[k].Has(int(d)) })
	pass(func(_, it int32) bool { return c.ix[k][it] < c.ix[0][it] })
	pass(func(_, it int32) bool { return c.used(it) })
	for len(c.sel[k]) < need {
		// A new switch: the smallest holding the rest, else the largest
		// (the lowest score); on a tie the first met (c.tmp: sortPref).
		r := int32(need - len(c.sel[k]))
		best, bs := int32(-1), int32(0)
		for _, d := range c.tmp {
			it := c.itemOf(k, d)
			if c.used(it) { // (as are the taken devices' items)
				continue
			}
			score := c.icnt[k][it]
			if score < r {
				score = 1<<30 - score
			}
			if best < 0 || score < bs {
				best, bs = it, score
			}
		}
		pass(func(_, it int32) bool { return it == best })
	}
	sortPref(c.sel[k])
}
