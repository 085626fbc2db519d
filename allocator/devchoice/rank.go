package devchoice

import (
	"cmp"
	"math/bits"
	"slices"
)

// Rank is how good a choice of devices is: one field per criterion of the
// chooser, compared in this order by [Rank.Compare] and by every
// decision of the chooser:
//
//  1. Nodes: the fewest NUMA nodes holding the chosen devices (devices of
//     unknown NUMA node count as one more node);
//  2. Unknown: without devices of unknown NUMA node (0) before with (1);
//  3. Distance: the lowest sum of NUMA distances (SLIT) over the pairs of
//     those nodes, so two nodes of one socket before two of different
//     sockets (the unknown node is at 1000 from every node);
//  4. Unpaired: the fewest devices of the other classes that are not
//     paired with a device of the first class under the same PCIe switch
//     (GPUDirect RDMA: a NIC under its GPU's switch). Under each switch,
//     min(first-class devices, devices of the class) pairs are counted, so
//     two GPUs under two switches pair best with one NIC under each;
//  5. Switches: the fewest PCIe switches holding the chosen devices of
//     every class (the devices of one NUMA node whose switch is not
//     described count as under one switch of their own, and pair there);
//  6. NVLinks: the most NVLink links among the chosen GPUs (over pairs);
//  7. SwitchLeft: best fit: the fewest free devices (of the requested
//     classes) left in the chosen switches, then
//  8. NodeLeft: in the chosen NUMA nodes, so that whole free switches and
//     nodes stay whole for larger requests;
//
// and on a tie the lowest device indices: the first class's chosen indices
// in ascending order compared lexicographically, then the next class's.
type Rank struct {
	Nodes      int
	Unknown    int
	Distance   int
	Unpaired   int
	Switches   int
	NVLinks    int
	SwitchLeft int
	NodeLeft   int
}

// criterion names a field of Rank.
type criterion uint8

const (
	critNodes criterion = iota
	critUnknown
	critDistance
	critUnpaired
	critSwitches
	critNVLinks
	critSwitchLeft
	critNodeLeft
	numCriteria
)

// order is the order of preference (compareRanks, setOrder). Only tests
// change it, keeping Nodes first: the searches go by the fewest nodes first.
var order = [numCriteria]criterion{critNodes, critUnknown, critDistance, critUnpaired, critSwitches, critNVLinks, critSwitchLeft, critNodeLeft}

// What setOrder derives from order.
var (
	keyShift      [numCriteria]uint8 // where criterion k lies in a packed key
	rankPos       [numCriteria]uint8 // criterion k's place in order
	keyAboveLinks uint64             // a key's fields before NVLinks
	directOK      bool               // node-level criteria and Switches first, as the direct decisions need
)

// keyBits are the criteria's widths in a packed key, enough for one class
// of at most 64 devices (65 groups, 64 switches, C(65,2) pairs of groups
// at most unknownDistance apart), above the device index (keyIndexBits).
// Unpaired (0 for one class) and NVLinks (unbounded) are not packed.
var keyBits = [numCriteria]uint8{critNodes: 7, critUnknown: 1, critDistance: 22, critSwitches: 7, critSwitchLeft: 7, critNodeLeft: 7}

const keyIndexBits = 6

func init() { setOrder(order) }

// setOrder makes o the order of preference and derives the rest from it.
func setOrder(o [numCriteria]criterion) {
	order = o
	shift := uint8(keyIndexBits)
	for i := int(numCriteria) - 1; i >= 0; i-- {
		k := order[i]
		rankPos[k] = uint8(i)
		keyShift[k] = shift
		shift += keyBits[k]
	}
	keyAboveLinks = ^uint64(0) << (keyShift[critNVLinks] & 63)
	directOK = max(rankPos[critNodes], rankPos[critUnknown], rankPos[critDistance], rankPos[critSwitches]) <
		min(rankPos[critNVLinks], rankPos[critSwitchLeft], rankPos[critNodeLeft])
}

// value returns criterion k of r, smaller better (NVLinks negated).
func (r *Rank) value(k criterion) int {
	switch k {
	case critNodes:
		return r.Nodes
	case critUnknown:
		return r.Unknown
	case critDistance:
		return r.Distance
	case critUnpaired:
		return r.Unpaired
	case critSwitches:
		return r.Switches
	case critNVLinks:
		return -r.NVLinks // more is better
	case critSwitchLeft:
		return r.SwitchLeft
	}
	return r.NodeLeft
}

// Compare returns a negative number when r is the better rank, a positive
// one when o is, and 0 when they are equal (the chooser then takes the
// lowest device indices).
func (r Rank) Compare(o Rank) int { return compareRanks(&r, &o) }

// compareRanks is Rank.Compare by pointers, the one comparison of ranks: the
// first criterion of order that differs decides. Each one that differs sets
// the bit of its place in order (rankPos); the lowest bit is the first.
func compareRanks(r, o *Rank) int {
	var m uint32
	if r.Nodes != o.Nodes {
		m |= 1 << (rankPos[critNodes] & 31)
	}
	if r.Unknown != o.Unknown {
		m |= 1 << (rankPos[critUnknown] & 31)
	}
	if r.Distance != o.Distance {
		m |= 1 << (rankPos[critDistance] & 31)
	}
	if r.Unpaired != o.Unpaired {
		m |= 1 << (rankPos[critUnpaired] & 31)
	}
	if r.Switches != o.Switches {
		m |= 1 << (rankPos[critSwitches] & 31)
	}
	if r.NVLinks != o.NVLinks {
		m |= 1 << (rankPos[critNVLinks] & 31)
	}
	if r.SwitchLeft != o.SwitchLeft {
		m |= 1 << (rankPos[critSwitchLeft] & 31)
	}
	if r.NodeLeft != o.NodeLeft {
		m |= 1 << (rankPos[critNodeLeft] & 31)
	}
	if m == 0 {
		return 0
	}
	k := order[bits.TrailingZeros32(m)&7]
	if r.value(k) < o.value(k) {
		return -1
	}
	return 1
}

// packedKey returns r packed above device index d (below 64): of two ranks of
// equal Unpaired and NVLinks, fields within keyBits, the smaller key is the
// one compareRanks prefers, then the device first in the tie-break's order
// (keyIndex; TestPackedKeyIsCompare).
func packedKey(r *Rank, d int) uint64 {
	return uint64(r.Nodes)<<keyShift[critNodes] | uint64(r.Unknown)<<keyShift[critUnknown] |
		uint64(r.Distance)<<keyShift[critDistance] | uint64(r.Switches)<<keyShift[critSwitches] |
		uint64(r.SwitchLeft)<<keyShift[critSwitchLeft] | uint64(r.NodeLeft)<<keyShift[critNodeLeft] | keyIndex(d)
}

// keyTerms returns what decides as compareRanks does, smaller better, between
// ranks of equal Unpaired given as packed keys and links (never negative): the
// keys, or the links swapped when they differ and the keys agree above NVLinks.
func keyTerms(key uint64, links int, key2 uint64, links2 int) (uint64, uint64) {
	if (key^key2)&keyAboveLinks == 0 && links != links2 {
		return uint64(links2), uint64(links)
	}
	return key, key2
}

// The tie-break between choices of equal rank, defined here only: lowFirst
// (tie_low.go) prefers the lowest device indices, as Rank's doc says; the
// build tag numaplace_hightie (tie_high.go) makes it the highest. Every
// code that meets devices in an order and keeps the first best goes
// through these helpers (the compiler drops the branch not taken), so the
// paths agree either way; "lowest" in comments means first in this order.

// firstDev returns the device of w (not 0) that the tie-break prefers.
func firstDev(w uint64) int {
	if lowFirst {
		return bits.TrailingZeros64(w)
	}
	return 63 - bits.LeadingZeros64(w)
}

// dropFirst returns w (not 0) without its device firstDev.
func dropFirst(w uint64) uint64 {
	if lowFirst {
		return w & (w - 1)
	}
	return w &^ (1 << uint(firstDev(w)))
}

// before reports whether device a comes before device b (both at least 0).
func before(a, b int32) bool {
	if lowFirst {
		return a < b
	}
	return a > b
}

// cmpFirst compares devices a and b as before does, -1 (none) last.
func cmpFirst(a, b int32) int {
	if lowFirst {
		return cmp.Compare(uint32(a), uint32(b))
	}
	return cmp.Compare(b, a)
}

// keyIndex returns device d (below 64) as a packed key's index bits, the
// smaller first; it is its own inverse.
func keyIndex(d int) uint64 {
	if lowFirst {
		return uint64(d)
	}
	return uint64(63 - d)
}

// preferBits returns the k devices of w that the tie-break prefers.
func preferBits(w uint64, k int) uint64 {
	rest := w
	for ; k > 0 && rest != 0; k-- {
		rest = dropFirst(rest)
	}
	return w &^ rest
}

// indices writes the indices of the bits of w into idx in the tie-break's
// order and returns how many there are.
func indices(w uint64, idx *[64]uint8) int {
	k := 0
	for ; w != 0; w = dropFirst(w) {
		idx[k&63] = uint8(firstDev(w))
		k++
	}
	return k
}

// sortPref sorts a list of devices in the tie-break's order.
func sortPref(s []int32) {
	slices.Sort(s)
	if !lowFirst {
		slices.Reverse(s)
	}
}

// comparePref compares two lists of devices of one size sorted by sortPref,
// negative when a comes first: lowerWord on lists.
func comparePref(a, b []int32) int {
	if lowFirst {
		return slices.Compare(a, b)
	}
	return slices.Compare(b, a)
}

// lowerWord is the tie-break between two choices of equal rank, as words
// of one class: whether a holds the first device (firstDev) of a^b (a's
// list in the tie-break's order comes first lexicographically, for sets of
// one size); false when equal.
func lowerWord(a, b uint64) bool {
	if lowFirst {
		x := a ^ b
		return a&(x&-x) != 0
	}
	return a > b // a holds the highest device of a^b
}

// mayTie reports whether a choice whose first first-want device (firstDev)
// is first may still win a tie of ranks against the best choice (lowerWord
// prefers the best when its first device comes before first).
func (c *Chooser) mayTie(first int32) bool {
	if c.word {
		return !before(int32(firstDev(c.bestWord)), first)
	}
	return !before(c.best[0][0], first)
}
