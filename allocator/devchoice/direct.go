package devchoice

import "math/bits"

// directWord decides a request of the word path for count devices (at
// least 2) out of free including must (checked: must within free, count at
// least its devices) without the search, with the choice in c.bestWord,
// and reports whether it did. Each decision is the search's choice (the
// TestChooseWord*IsChoose tests compare them); the request goes to the
// search when a condition fails. All but the forced one need every switch
// in one NUMA node and the node-level criteria and Switches first in the
// order (directOK):
//
//   - forced: the free devices on the allowed groups are exactly count
//     (holding every must-include device): the choice is all of them;
//   - one switch: without must-include devices, when a switch of a known
//     allowed node holds count free devices, every best choice lies under
//     one such switch (one node, no unknown node, no distance, one switch:
//     the least there is): the best of the switches' wordChoice by links,
//     then the free devices left in the switch, then in the node, then the
//     lowest indices. Taken when no budget binds the search (at most
//     nodeSetBudget groups, and switchSetBudget switches in each, hold
//     count) and no switch needs the greedy choice;
//   - whole groups: otherwise, without must-include devices, when every
//     known allowed node holding count free devices holds exactly count
//     (and one does): the best is all the free devices of one such node,
//     of the fewest switches, then the most links, then the lowest indices
//     (under the same budget of groups);
//   - several whole groups: otherwise, without must-include devices, when
//     k >= 2 groups are needed (the k largest free counts reach count, k-1
//     do not) and the k largest reach exactly count, every set of k groups
//     holding count holds exactly count (the groups above the k-th largest
//     free count and r of the m groups of that count): the best is all the
//     free devices of one such set, without the unknown node, then of the
//     least distance, the fewest switches, the most links, the lowest
//     indices. Taken when the C(m, r) sets are at most nodeSetBudget and
//     their prefixes (the search's only steps, on groups in descending
//     free count) fewer than stepBudget;
//   - one forced group: with must-include devices all in one group whose
//     free devices hold count, when each of its switches holding free
//     devices is needed (leaving out one without must-include devices
//     leaves fewer than count), every choice lies in that group under all
//     those switches, leaving the same devices free: the best is
//     wordChoice's there (when it has none, the search decides).
//
// It takes O(g + b) for the class's g groups and b buckets, plus
// exactWord's at most exactCombos combinations per switch or forced group,
// and for several whole groups O(k²) plus O(r²) per set.
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
	if !x.switchInGroup || !directOK {
		return false
	}
	if must != 0 {
		return must&^allowed == 0 && c.forcedGroupWord(count, free, must)
	}
	c.wFree, c.wMust = free, 0
	if count <= cl.maxBucket && c.oneNodeWord(count, free, false) {
		return true
	}
	if count <= cl.maxGroup && c.oneNodeWord(count, free, true) {
		return true
	}
	return c.wholeGroupsWord(count, free)
}

// oneNodeWord is directWord's one-switch decision (whole false) or
// whole-group decision (whole true) for count devices out of free (on the
// allowed groups), reporting whether it decided. Its candidates have one
// known node: their ranks differ only in their links (equal without
// c.links) and, under one switch, the free devices left in the switch and
// the node, or as a whole group, its switches.
func (c *Chooser) oneNodeWord(count int32, free uint64, whole bool) bool {
	cl := &c.x.classes[c.cls[0]]
	unknown := int32(c.x.nodes)
	groups := 0 // allowed groups holding count
	d := wordBest{key: ^uint64(0)}
	shS, shN, shSw := keyShift[critSwitchLeft]&63, keyShift[critNodeLeft]&63, keyShift[critSwitches]&63
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
		if whole {
			if nf > count {
				return false // choices inside a group: the search's
			}
			links := 0
			if c.links {
				links = int(cl.wgLinks[i]) // the whole group's, or else f's
				if f != wg.gm {
					links = c.x.linksWord(f)
				}
			}
			d.offer(uint64(holding(f, cl.bm[wg.lo:wg.hi]))<<shSw, links, f) // its switches, links
			continue
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
			left := uint64(nb-count)<<shS | uint64(nf-count)<<shN // the key's only fields that differ
			switch {
			case !c.links:
				sel := m
				if nb > count {
					sel = preferBits(m, int(count))
				}
				d.offer(left, 0, sel)
			case nb == count && m == bm: // the whole bucket
				d.offer(left, int(cl.bLinks[bi]), m)
			case m>>63 == 0 && count == 2 && nb <= 11 && m == bm: // the whole bucket's best pair
				d.offer(left, int(cl.bPairLinks[bi]), cl.bPair[bi])
			default: // exactWord's, or links not in the index's tables
				sel, ok := c.wordChoice(m, count)
				if !ok {
					return false // leafWord's greedy choice
				}
				d.offer(left, c.x.linksWord(sel), sel)
			}
		}
	}
	if d.sel == 0 || groups > nodeSetBudget {
		return false
	}
	c.have, c.bestWord = true, d.sel // (ChooseWord returns the word only)
	return true
}

// forcedGroupWord is directWord's one-forced-group decision for count
// devices out of free (on the allowed groups) including must (on them
// too), reporting whether it decided.
func (c *Chooser) forcedGroupWord(count int32, free, must uint64) bool {
	cl := &c.x.classes[c.cls[0]]
	g := cl.group[bits.TrailingZeros64(must)]
	cand := free & cl.gm[g]
	nc := int32(popcount(cand))
	if must&^cl.gm[g] != 0 || nc < count {
		return false // must-include devices on two groups, or too few
	}
	// Each switch without must-include devices is needed if the smallest is.
	small := nc // (none: nc, nothing left)
	for _, bm := range cl.bm[cl.cbStart[g]:cl.cbStart[g+1]] {
		if m := cand & bm; m != 0 && m&must == 0 {
			small = min(small, int32(popcount(m)))
		}
	}
	if nc-small >= count {
		return false
	}
	c.wFree, c.wMust = free, must
	sel, ok := c.wordChoice(cand, count)
	if !ok {
		return false // leafWord's greedy choice: the search's
	}
	c.have, c.bestWord = true, sel // (ChooseWord returns the word only)
	return true
}

// wholeGroupsWord is directWord's several-whole-groups decision for count
// devices out of free (on the allowed groups), reporting whether it decided.
func (c *Chooser) wholeGroupsWord(count int32, free uint64) bool {
	x := c.x
	cl := &x.classes[c.cls[0]]
	wgs := cl.wg
	if len(wgs) > 65 { // (at most the nodes and the unknown node)
		return false
	}
	// How many groups have each free count (one device a group: the free devices).
	var hist [65]uint8
	if cl.maxGroup == 1 {
		hist[1] = uint8(popcount(free))
	} else {
		for i := range wgs {
			hist[bits.OnesCount64(free&wgs[i].gm)]++
		}
	}
	// The k-th largest free count v: the groups above it hold count-rem,
	// and r of the m groups of v more complete count exactly.
	rem, k, v, m, r := count, int32(0), cl.maxGroup, int32(0), int32(0)
	for ; v > 0; v-- {
		h := int32(hist[v])
		if h*v >= rem {
			m, r = h, (rem+v-1)/v
			break
		}
		rem -= h * v
		k += h
	}
	if v == 0 || r*v != rem {
		return false // too few (the search says so), or a set holding more than count
	}
	k += r
	if k < 2 || m > 16 {
		return false
	}
	sets := int(m) // C(m, r): m for r = 1 or m-1 (at most 16)
	switch {
	case r == m:
		sets = 1
	case r != 1 && r != m-1: // C(m, r) > 16 for m > 6
		if m > 6 {
			return false
		}
		sets = combos(int(m), int(r))
	}
	if sets > nodeSetBudget || 1+sets*int(k) >= stepBudget {
		return false
	}
	// A set's rank but for its links is its packedKey (k nodes, unknown
	// node, distance, switches), the sum of its groups' own fields and of
	// their distances (keyBits has room). The groups above v, in every set,
	// make the base; those of v (tied) are listed in c.tied.
	ng := int32(x.nodes + 1)
	gdist := x.gdist
	unknown := int32(x.nodes)
	shSw, distShift := keyShift[critSwitches], keyShift[critDistance]
	t := &c.tied
	var rows [32]int32 // the base's groups' rows (each holds 2 or more devices)
	base, baseKey := uint64(0), uint64(0)
	nf, nt := 0, 0
	for i := range wgs {
		wg := &wgs[i]
		f := free & wg.gm
		n := int32(bits.OnesCount64(f))
		if n < v {
			continue
		}
		key := uint64(1) << shSw
		if wg.hi-wg.lo > 1 {
			key = uint64(holding(f, cl.bm[wg.lo:wg.hi])) << shSw
		}
		if wg.g == unknown {
			key |= 1 << keyShift[critUnknown]
		}
		if n > v {
			for _, rb := range rows[:nf&31] {
				key += uint64(gdist[rb+wg.g]) << distShift
			}
			base |= f
			baseKey += key
			rows[nf&31] = wg.g * ng
			nf++
			continue
		}
		t.f[nt&15], t.key[nt&15], t.g[nt&15], t.row[nt&15] = f, key, wg.g, wg.g*ng
		nt++
	}
	for i := range t.key[:nt&15] {
		for _, rb := range rows[:nf&31] {
			t.key[i] += uint64(gdist[rb+t.g[i]]) << distShift
		}
	}
	// The C(m, r) sets of r tied groups, each ranked in full: pairs in two
	// loops, other sizes as masks of the tied positions (Gosper's hack).
	best := wordBest{key: ^uint64(0)}
	baseKey += uint64(k) << keyShift[critNodes]
	if r == 2 {
		for i := 0; i < nt-1; i++ {
			fi, ki, ri := base|t.f[i&15], baseKey+t.key[i&15], t.row[i&15]
			for j := i + 1; j < nt; j++ {
				key := ki + t.key[j&15] + uint64(gdist[ri+t.g[j&15]])<<distShift
				if key <= best.key { // (the links counted only then)
					best.offer(key, c.wordLinks(fi|t.f[j&15]), fi|t.f[j&15])
				}
			}
		}
	} else {
		for s := uint32(1)<<uint(r) - 1; s < 1<<uint(m); {
			sel, key := base, baseKey
			for w := s; w != 0; w &= w - 1 {
				i := bits.TrailingZeros32(w) & 15
				sel |= t.f[i]
				key += t.key[i]
				for u := w & (w - 1); u != 0; u &= u - 1 {
					key += uint64(gdist[t.row[i]+t.g[bits.TrailingZeros32(u)&15]]) << distShift
				}
			}
			if key <= best.key {
				best.offer(key, c.wordLinks(sel), sel)
			}
			low := s & -s
			n := s + low
			s = n | ((s^n)>>2)/low
		}
	}
	c.have, c.bestWord = true, best.sel // (ChooseWord returns the word only)
	return true
}

// tiedGroups are wholeGroupsWord's tied groups: their devices, own packed
// key (with the distance to the base), group and row of distances.
type tiedGroups struct {
	f, key [16]uint64
	g, row [16]int32
}

// wordBest is a direct decision's best choice so far: its devices (0
// before the first), packed key (the fields that differ) and links.
type wordBest struct {
	sel, key uint64
	links    int
}

// offer keeps the choice sel of packed key key and links links when it
// beats the best (keyTerms, then lowerWord).
func (d *wordBest) offer(key uint64, links int, sel uint64) {
	if a, b := keyTerms(key, links, d.key, d.links); a < b || a == b && lowerWord(sel, d.sel) {
		d.sel, d.key, d.links = sel, key, links
	}
}

// wordLinks returns the links among the devices of sel when NVLinks tell
// choices apart (c.links), 0 otherwise.
func (c *Chooser) wordLinks(sel uint64) int {
	if !c.links {
		return 0
	}
	return c.x.linksWord(sel)
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
	allowed := uint64(0)
	for _, g := range cl.groups {
		if c.allowedGroup(int(g)) {
			allowed |= cl.gm[g]
		}
	}
	return allowed
}
