package devchoice

import (
	"iter"
	"math/bits"
	"slices"
)

// Set is a set of devices of one class: bit i stands for the class's device
// of dense index i (see [Index.ID]). A Set for a class of n devices has
// [Words](n) words; [NewSet] makes one. Its methods neither allocate nor
// grow it: adding an index beyond its length panics (a programmer error).
type Set []uint64

// Words returns the number of words of a Set of n devices.
func Words(n int) int { return (n + 63) / 64 }

// NewSet returns an empty Set for n devices. It allocates.
func NewSet(n int) Set { return make(Set, Words(n)) }

// Add adds device i.
func (s Set) Add(i int) { s[i>>6] |= 1 << uint(i&63) }

// Remove removes device i.
func (s Set) Remove(i int) { s[i>>6] &^= 1 << uint(i&63) }

// Has reports whether device i is in the set (never when outside its words).
func (s Set) Has(i int) bool {
	return i >= 0 && i>>6 < len(s) && s[i>>6]&(1<<uint(i&63)) != 0
}

// Len returns the number of devices in the set.
func (s Set) Len() int {
	n := 0
	for _, w := range s {
		n += popcount(w)
	}
	return n
}

// Clear empties the set in place.
func (s Set) Clear() { clear(s) }

// CopyFrom makes s the same set as o (words beyond o's length are
// cleared; o's words beyond s's length are ignored).
func (s Set) CopyFrom(o Set) {
	n := copy(s, o)
	clear(s[n:])
}

// Equal reports whether s and o hold the same devices (missing words empty).
func (s Set) Equal(o Set) bool {
	if len(s) < len(o) {
		s, o = o, s
	}
	return slices.Equal(s[:len(o)], o) && s[len(o):].Len() == 0
}

// All returns the devices of the set in ascending index order.
func (s Set) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for wi, w := range s {
			for ; w != 0; w &= w - 1 {
				if !yield(wi<<6 | bits.TrailingZeros64(w)) {
					return
				}
			}
		}
	}
}

// AppendTo appends the set's devices to dst in ascending order and returns it.
func (s Set) AppendTo(dst []int) []int { return slices.AppendSeq(dst, s.All()) }

// popcount is math/bits.OnesCount64 without POPCNT, which amd64 v1 checks
// for at run time, calling a fallback whose spilled registers cost more.
func popcount(w uint64) int {
	w -= (w >> 1) & 0x5555555555555555
	w = w&0x3333333333333333 + (w>>2)&0x3333333333333333
	w = (w + w>>4) & 0x0f0f0f0f0f0f0f0f
	return int(w * 0x0101010101010101 >> 56)
}
