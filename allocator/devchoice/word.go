package devchoice

import "math/bits"

// The word path: one want of a class of at most 64 devices (every real
// server's GPUs), every set of devices a word, searched by the general
// path's code (groups.go, within.go) but for leafWord, everyDevice and the
// direct decisions (direct.go); the tests check both paths choose the same.

// countWord is countAll for the word path: the allowed groups with free
// devices as items (c.witems, ascending: countGroups), then force moves
// those of must-include devices into c.pick. It returns the must-include
// and the free devices on the allowed groups.
func (c *Chooser) countWord() (mustSeen, total int32) {
	cl := &c.x.classes[c.cls[0]]
	free := c.free[0][0]
	must := uint64(0)
	if c.must[0] != nil {
		must = c.must[0][0]
	}
	c.wFree, c.wMust = free, must
	c.startPick()
	allowed := c.allowedWord(cl)
	c.witems = countGroups(c.witems[:0], cl.wg, cl.bm, free&allowed, c.need[0])
	if must != 0 {
		c.force(func(it *wItem) bool { return it.free&must != 0 })
	}
	return int32(popcount(must & allowed)), int32(popcount(free & allowed))
}

// countGroups appends to items the groups of wgs with devices in free, with
// their counts and buckets (bm: the class's bucket words), and returns it.
func countGroups(items []wItem, wgs []wordGroup, bm []uint64, free uint64, need int32) []wItem {
	start := len(items)
	items = grow(items, start+len(wgs)) // room for every group, written by index
	k := start
	for i := range wgs {
		wg := &wgs[i]
		f := free & wg.gm
		if f == 0 {
			continue
		}
		n := int32(1) // one device (every GPU of its own NUMA node), or popcount's
		if f&(f-1) != 0 {
			n = int32(popcount(f))
		}
		fit, nb := int32(-1), int32(1)
		if wg.hi == wg.lo+1 { // one bucket
			if n >= need {
				fit = n
			}
		} else { // the buckets holding devices of f, the fewest of one holding need
			nb = 0
			for _, m := range bm[wg.lo:wg.hi] {
				if m&f == 0 {
					continue
				}
				nb++
				if bn := int32(popcount(f & m)); bn >= need && (fit < 0 || bn < fit) {
					fit = bn
				}
			}
		}
		it := &items[k]
		it.free, it.g, it.c0, it.low, it.nb, it.fit, it.top = f, wg.g, n, int32(firstDev(f)), nb, fit, 0
		k++
	}
	return items[:k]
}

// everyDevice is leafGroups' search on the word path when the groups hold
// exactly the count: every free device (c.pickFree, n switches) past its bound.
func (c *Chooser) everyDevice(n int) {
	lb := c.everyBound(c.key.unk, c.key.dist, int32(n), c.gLinks)
	if !c.have || c.beats(&lb) {
		c.everyLeaf(&lb, c.pickFree)
	}
}

// everyLeaf is everyDevice past its bound lb: the one choice sel, every
// free device of the picked groups, kept when it beats the best.
func (c *Chooser) everyLeaf(lb *Rank, sel uint64) {
	c.leaves++
	r := *lb
	if c.cls[0] == 0 { // (lb's links are 0 otherwise: linksFor)
		r.NVLinks = c.pickLinks(sel)
	}
	c.keepWord(&r, sel)
}

// pickLinks returns linksWord(sel), sel being every free device of the
// picked groups. In lastGroup's loop it sums the links among the groups
// before the last (once a loop: c.baseLinks, their devices in c.baseIdx),
// among the last group's free devices (c.lastFree) and between the two.
func (c *Chooser) pickLinks(sel uint64) int {
	last := c.lastFree
	if last == 0 || sel == last || c.x.rows == nil || c.x.uniform {
		return c.x.linksWord(sel) // not in the loop, or no earlier groups
	}
	if c.baseLinks < 0 {
		base := sel &^ last
		c.baseLinks = c.x.linksWord(base)
		c.baseN = indices(base, &c.baseIdx)
	}
	rows := c.x.rows
	idx := c.baseIdx[:c.baseN&63]
	links := int32(c.baseLinks)
	for w := last; w != 0; w &= w - 1 {
		row := &rows[bits.TrailingZeros64(w)]
		for _, v := range idx {
			links += row[v&63]
		}
	}
	if last&(last-1) != 0 { // more than one device: the links among them
		links += int32(c.x.linksWord(last))
	}
	return int(links)
}

// everyBound is everyDevice's bound: c.key's nodes, unknown node unk,
// distance dist, n switches, at most links links, nothing left.
func (c *Chooser) everyBound(unk, dist, n int32, links int) Rank {
	return Rank{Nodes: int(c.key.nodes), Unknown: int(unk), Distance: int(dist), Switches: int(n), NVLinks: links}
}

// keepWord keeps the choice sel of rank r when it beats the best
// (compareRanks, then lowerWord).
func (c *Chooser) keepWord(r *Rank, sel uint64) {
	if !c.have {
		c.have, c.bestRank, c.bestWord = true, *r, sel
	} else if d := compareRanks(r, &c.bestRank); d < 0 || d == 0 && lowerWord(sel, c.bestWord) {
		c.bestRank, c.bestWord = *r, sel
	}
}

// leafWord is leafSwitches' choice on the word path, past its bound:
// wordChoice's inside the switches of the set, whose free devices are
// cand, or else selectFirst's (greedy); kept when it beats the best.
func (c *Chooser) leafWord(cand uint64) {
	need := c.need[0]
	sel, ok := c.wordChoice(cand, need)
	if !ok {
		c.selectFirst()
		for _, d := range c.sel[0] {
			sel |= 1 << uint(d)
		}
	}
	r := c.groupRank()
	r.SwitchLeft = int(-need)
	for i, m := range c.itMask {
		if m&sel != 0 {
			r.Switches++
			r.SwitchLeft += int(c.icnt[0][i])
		}
	}
	if c.cls[0] == 0 {
		r.NVLinks = c.x.linksWord(sel)
	}
	c.keepWord(&r, sel)
}

// wordChoice returns the word path's choice of need devices among cand
// with the must-include ones c.wMust: all of cand when it holds need, the
// lowest without c.links, exactWord's when its combinations are few; ok
// is false otherwise (selectFirst's greedy choice decides).
func (c *Chooser) wordChoice(cand uint64, need int32) (sel uint64, ok bool) {
	switch rest, free := int(need)-popcount(c.wMust), cand&^c.wMust; {
	case popcount(cand) == int(need):
		return cand, true
	case !c.links:
		return c.wMust | preferBits(free, rest), true
	case free>>63 == 0 && combos(popcount(free), rest) <= exactCombos:
		return c.exactWord(free, rest), true
	}
	return 0, false
}

// linksWord returns the NVLink links among the GPUs of sel.
func (x *Index) linksWord(sel uint64) int {
	if x.maxLink == 0 {
		return 0
	}
	if x.uniform {
		n := popcount(sel)
		return n * (n - 1) / 2 * int(x.maxLink)
	}
	// The indices first, then the pairs by rows (fewer instructions).
	var idx [64]uint8
	k := indices(sel, &idx)
	rows := x.rows
	links := int32(0)
	for a := 1; a < k; a++ {
		row := &rows[idx[a&63]]
		for _, u := range idx[:a&63] {
			links += row[u&63]
		}
	}
	return int(links)
}

// exactWord is exactFirst for the word path: of the combinations of rest
// devices of free (with the must-include ones, c.wMust), the one with the
// most links, then the lowest indices. free has at most 63 devices, and
// the class is the GPUs with the dense table (c.links on a word).
func (c *Chooser) exactWord(free uint64, rest int) uint64 {
	e := &c.ex
	pos := &e.pos
	n := indices(free, pos)
	e.n = n
	must := c.wMust
	// The combinations in lexicographic order (of indices' order), links
	// summed as they grow: the first best wins the tie. A candidate's weight
	// is its links to the must-include devices.
	rows := c.x.rows
	w := &e.w
	clear(w[:n])
	for m := must; m != 0; m &= m - 1 {
		row := &rows[bits.TrailingZeros64(m)]
		for i := range n {
			w[i] += row[pos[i]&63]
		}
	}
	if k := n - rest; k < rest {
		return must | free&^c.exactDrop(k)
	}
	e.bestLinks, e.last = -1, false
	c.exactDFS(0, rest, 0, 0)
	return must | e.best
}

// exactDrop is exactWord's search when fewer devices are left out than
// chosen: it returns the k of c.ex's candidates to leave out. A choice's
// links are all the candidates' (with the must-include devices), less the
// degrees of the left-out set D (each one's links to the candidates and
// must-include devices), plus the links within D (subtracted twice): the
// best D has the most links within less degrees, exactDFS's search
// weighing minus the degrees. Of equal links the choice holding the lowest
// device of the difference wins: its D does not hold it, so the last best
// D in lexicographic order does.
func (c *Chooser) exactDrop(k int) uint64 {
	e := &c.ex
	rows := c.x.rows
	pos, n := &e.pos, e.n
	// Minus the degrees by pairs (the table is symmetric with a zero
	// diagonal), in place of the weights.
	deg := &e.w
	for i := range n {
		row := &rows[pos[i]&63]
		d := deg[i]
		for j := i + 1; j < n; j++ {
			l := row[pos[j]&63]
			d += l
			deg[j&63] += l
		}
		deg[i] = -d
	}
	if k == 1 {
		bi, bd := 0, deg[0]
		for i := 1; i < n; i++ {
			if d := deg[i]; d >= bd {
				bi, bd = i, d
			}
		}
		return 1 << pos[bi]
	}
	e.bestLinks, e.last = -1<<31, true
	c.exactDFS(0, k, 0, 0)
	return e.best
}

// exactState is the working memory of exactDFS.
type exactState struct {
	n         int
	pos       [64]uint8 // the candidates' device indices
	w         [64]int32 // each candidate's own weight (see exactWord, exactDrop)
	chosen    [64]uint8 // the devices of the combination being built
	best      uint64
	bestLinks int32
	last      bool // keep the last best combination (the first otherwise)
}

// exactDFS extends the combination c.ex.chosen[:depth] (devices sel,
// score acc: their links and weights) by left more candidates from from
// on, keeping the first best (the last with c.ex.last).
func (c *Chooser) exactDFS(from, left int, acc int32, sel uint64) {
	e := &c.ex
	depth := popcount(sel)
	if left == 0 {
		if acc > e.bestLinks || e.last && acc == e.bestLinks {
			e.best, e.bestLinks = sel, acc
		}
		return
	}
	rows := c.x.rows
	for i := from; i+left <= e.n; i++ {
		v := int(e.pos[i] & 63)
		l := acc + e.w[i]
		row := &rows[v]
		for _, u := range e.chosen[:depth] {
			l += row[u&63]
		}
		e.chosen[depth] = uint8(v)
		c.exactDFS(i+1, left-1, l, sel|1<<uint(v))
	}
}
