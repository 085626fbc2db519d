package numa

import (
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"strconv"
	"strings"

	"github.com/bits-and-blooms/bitset"
)

// MaxCPUID is the highest logical CPU number [ParseCPUSet] accepts. Linux
// allows up to 8192 CPUs (CONFIG_NR_CPUS); the bound keeps a malformed list
// such as "0-4000000000" from allocating gigabytes.
const MaxCPUID = 1<<16 - 1

// ErrInvalidCPUSet is returned (wrapped) by [ParseCPUSet] and
// [ParseCPUMask] for malformed input.
var ErrInvalidCPUSet = errors.New("invalid CPU set")

// CPUSet is a set of logical CPU numbers backed by a
// github.com/bits-and-blooms/bitset held by value. The zero value is the
// empty set, ready to use.
//
// Methods come in three tiers, as in bitset: allocating forms (Union,
// Intersection, Difference, Clone) return a new set and leave the receiver
// alone; in-place forms (Add, Remove, UnionWith, IntersectWith, RemoveAll,
// Clear) mutate the receiver and allocate only when it has to grow; count-only
// forms (Size, IntersectionCount, DifferenceCount, IsSubsetOf, Equal) never
// allocate.
//
// A CPUSet copied by assignment shares its storage with the original: use
// [CPUSet.Clone] before mutating a copy in place. Sets are not safe for
// concurrent mutation.
type CPUSet struct {
	b bitset.BitSet
}

// NewCPUSet returns the set of the given CPUs. It panics on a negative CPU
// number: that is a programmer error.
func NewCPUSet(cpus ...int) CPUSet {
	var s CPUSet
	for _, c := range cpus {
		s.Add(c)
	}
	return s
}

// CPUSetFromWords returns the set whose CPU 64*i+b is bit b of words[i].
// The set takes words as its storage (it does not copy them): the caller
// must not use words afterwards. It allocates nothing; it is the word-level
// constructor for hot paths that build a set bit by bit in a buffer of
// their own.
func CPUSetFromWords(words []uint64) CPUSet {
	var s CPUSet
	if len(words) > 0 {
		s.b.SetBitsetFrom(words)
	}
	return s
}

// CPURange returns the set {lo, ..., hi} (empty when hi < lo). It panics on
// a negative bound.
func CPURange(lo, hi int) CPUSet {
	var s CPUSet
	s.AddRange(lo, hi)
	return s
}

func (s *CPUSet) words() []uint64 { return s.b.Words() }

// Words returns the set's storage: CPU 64*i+b is in s when bit b of word i
// is set (words past the highest CPU may be zero, and an empty set may have
// none). It is a read-only view for hot paths that walk a set word by word:
// the caller must not modify it, and it is valid until s is next modified.
func (s CPUSet) Words() []uint64 { return s.b.Words() }

// Add puts cpu into s, in place. It panics on a negative CPU number.
func (s *CPUSet) Add(cpu int) {
	if cpu < 0 {
		panic(fmt.Sprintf("numa.CPUSet.Add: negative CPU %d", cpu))
	}
	s.b.Set(uint(cpu))
}

// AddRange puts lo..hi into s, in place (nothing when hi < lo). It panics on
// a negative bound.
func (s *CPUSet) AddRange(lo, hi int) {
	if lo < 0 || hi < 0 {
		panic(fmt.Sprintf("numa.CPUSet.AddRange: negative bound %d-%d", lo, hi))
	}
	if hi < lo {
		return
	}
	s.b.SetRange(uint(lo), uint(hi)+1)
}

// Remove takes cpu out of s, in place. Absent or negative CPUs are ignored.
func (s *CPUSet) Remove(cpu int) {
	if cpu < 0 {
		return
	}
	s.b.Clear(uint(cpu))
}

// Clear empties s in place, keeping its storage.
func (s *CPUSet) Clear() {
	w := s.words()
	clear(w)
}

// Contains reports whether cpu is in s.
func (s CPUSet) Contains(cpu int) bool {
	return cpu >= 0 && s.b.Test(uint(cpu))
}

// Size returns the number of CPUs in s. It never allocates.
func (s CPUSet) Size() int { return int(s.b.Count()) }

// IsEmpty reports whether s has no CPUs.
func (s CPUSet) IsEmpty() bool {
	for _, w := range s.words() {
		if w != 0 {
			return false
		}
	}
	return true
}

// Equal reports whether s and o hold the same CPUs, whatever their storage
// sizes. It never allocates.
func (s CPUSet) Equal(o CPUSet) bool {
	a, b := s.words(), o.words()
	if len(a) < len(b) {
		a, b = b, a
	}
	for i, w := range a {
		var v uint64
		if i < len(b) {
			v = b[i]
		}
		if w != v {
			return false
		}
	}
	return true
}

// IsSubsetOf reports whether every CPU of s is in o. It never allocates.
func (s CPUSet) IsSubsetOf(o CPUSet) bool {
	a, b := s.words(), o.words()
	for i, w := range a {
		var v uint64
		if i < len(b) {
			v = b[i]
		}
		if w&^v != 0 {
			return false
		}
	}
	return true
}

// IntersectionCount returns |s ∩ o| without allocating.
func (s CPUSet) IntersectionCount(o CPUSet) int {
	a, b := s.words(), o.words()
	n := min(len(a), len(b))
	c := 0
	for i := 0; i < n; i++ {
		c += bits.OnesCount64(a[i] & b[i])
	}
	return c
}

// DifferenceCount returns |s \ o| without allocating.
func (s CPUSet) DifferenceCount(o CPUSet) int {
	a, b := s.words(), o.words()
	c := 0
	for i, w := range a {
		if i < len(b) {
			w &^= b[i]
		}
		c += bits.OnesCount64(w)
	}
	return c
}

// Intersects reports whether s and o share a CPU, without allocating.
func (s CPUSet) Intersects(o CPUSet) bool {
	a, b := s.words(), o.words()
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i]&b[i] != 0 {
			return true
		}
	}
	return false
}

// Clone returns an independent copy of s. It allocates.
func (s CPUSet) Clone() CPUSet {
	w := s.words()
	n := len(w)
	for n > 0 && w[n-1] == 0 {
		n--
	}
	if n == 0 {
		return CPUSet{}
	}
	var c CPUSet
	c.b.SetBitsetFrom(append([]uint64(nil), w[:n]...))
	return c
}

// Union returns a new set s ∪ o. It allocates.
func (s CPUSet) Union(o CPUSet) CPUSet {
	c := s.Clone()
	c.UnionWith(o)
	return c
}

// Intersection returns a new set s ∩ o. It allocates.
func (s CPUSet) Intersection(o CPUSet) CPUSet {
	c := s.Clone()
	c.IntersectWith(o)
	return c
}

// Difference returns a new set s \ o. It allocates.
func (s CPUSet) Difference(o CPUSet) CPUSet {
	c := s.Clone()
	c.RemoveAll(o)
	return c
}

// UnionWith adds every CPU of o to s, in place. It allocates only when s
// must grow to hold a CPU of o.
func (s *CPUSet) UnionWith(o CPUSet) {
	b := o.words()
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	if n == 0 {
		return
	}
	// Grow by bit length, not by word count: bitset's Test and Clear ignore
	// bits at or above its length, so a set whose length ends inside its
	// last word (NewCPUSet(3) has length 4) must be extended to whole words
	// before bits are OR-ed in, or Contains and Remove would miss them. When
	// the words already exist this only moves the length and never allocates.
	if s.b.Len() < uint(n*64) {
		s.b.Set(uint(n*64 - 1))
		s.b.Clear(uint(n*64 - 1))
	}
	a := s.words()
	for i := 0; i < n; i++ {
		a[i] |= b[i]
	}
}

// IntersectWith keeps in s only the CPUs also in o, in place. It never
// allocates.
func (s *CPUSet) IntersectWith(o CPUSet) {
	a, b := s.words(), o.words()
	for i := range a {
		if i < len(b) {
			a[i] &= b[i]
		} else {
			a[i] = 0
		}
	}
}

// RemoveAll takes every CPU of o out of s, in place. It never allocates.
func (s *CPUSet) RemoveAll(o CPUSet) {
	a, b := s.words(), o.words()
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		a[i] &^= b[i]
	}
}

// CopyFrom makes s hold exactly the CPUs of o, reusing s's storage when it is
// large enough (then it does not allocate).
func (s *CPUSet) CopyFrom(o CPUSet) {
	s.Clear()
	s.UnionWith(o)
}

// Min returns the lowest CPU of s, or -1 when s is empty.
func (s CPUSet) Min() int {
	for i, w := range s.words() {
		if w != 0 {
			return i*64 + bits.TrailingZeros64(w)
		}
	}
	return -1
}

// Max returns the highest CPU of s, or -1 when s is empty.
func (s CPUSet) Max() int {
	w := s.words()
	for i := len(w) - 1; i >= 0; i-- {
		if w[i] != 0 {
			return i*64 + 63 - bits.LeadingZeros64(w[i])
		}
	}
	return -1
}

// All yields the CPUs of s in ascending order.
func (s CPUSet) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i, w := range s.words() {
			for ; w != 0; w &= w - 1 {
				if !yield(i*64 + bits.TrailingZeros64(w)) {
					return
				}
			}
		}
	}
}

// List returns the CPUs of s in ascending order. It allocates.
func (s CPUSet) List() []int {
	return s.AppendTo(make([]int, 0, s.Size()))
}

// AppendTo appends the CPUs of s in ascending order to dst.
func (s CPUSet) AppendTo(dst []int) []int {
	for i, w := range s.words() {
		for ; w != 0; w &= w - 1 {
			dst = append(dst, i*64+bits.TrailingZeros64(w))
		}
	}
	return dst
}

// String returns s in the Linux cpulist format ("0-5,34"); the empty set is "".
func (s CPUSet) String() string {
	var sb strings.Builder
	lo, prev := -1, -1
	flush := func() {
		if lo < 0 {
			return
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(lo))
		if prev > lo {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(prev))
		}
	}
	for c := range s.All() {
		if c != prev+1 || lo < 0 {
			flush()
			lo = c
		}
		prev = c
	}
	flush()
	return sb.String()
}

// MarshalText implements encoding.TextMarshaler with the cpulist format.
func (s CPUSet) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with [ParseCPUSet].
func (s *CPUSet) UnmarshalText(b []byte) error {
	p, err := ParseCPUSet(string(b))
	if err != nil {
		return err
	}
	*s = p
	return nil
}

// ParseCPUSet parses the Linux cpulist format ("0-3,8-11", "" is empty;
// whitespace around items and a trailing newline, as sysfs files have, are
// allowed). CPU numbers above [MaxCPUID] are refused. Errors wrap
// [ErrInvalidCPUSet] and quote the bad item.
func ParseCPUSet(s string) (CPUSet, error) {
	var c CPUSet
	err := parseList(s, MaxCPUID, func(lo, hi int) { c.AddRange(lo, hi) })
	if err != nil {
		return CPUSet{}, fmt.Errorf("%w %s: %w", ErrInvalidCPUSet, quoteShort(s), err)
	}
	return c, nil
}

// MustParseCPUSet is [ParseCPUSet] for constants in code; it panics on error.
func MustParseCPUSet(s string) CPUSet {
	c, err := ParseCPUSet(s)
	if err != nil {
		panic(err)
	}
	return c
}

// ParseCPUMask parses the hexadecimal bitmap format of Linux sysfs (the
// cpumap and thread_siblings files): comma-separated 32-bit hex words, most
// significant first, such as "00000000,0000ff00". An optional "0x" prefix
// and surrounding whitespace are allowed. Errors wrap [ErrInvalidCPUSet].
func ParseCPUMask(s string) (CPUSet, error) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if s == "" {
		return CPUSet{}, fmt.Errorf("%w: empty hex CPU mask", ErrInvalidCPUSet)
	}
	groups := strings.Split(s, ",")
	if len(groups)*32 > MaxCPUID+1 {
		return CPUSet{}, fmt.Errorf("%w: hex CPU mask of %d words is above the limit of %d CPUs",
			ErrInvalidCPUSet, len(groups), MaxCPUID+1)
	}
	var c CPUSet
	for gi, g := range groups {
		g = strings.TrimSpace(g)
		if g == "" || len(g) > 8 {
			return CPUSet{}, fmt.Errorf("%w: hex CPU mask %s: word %s is not 1-8 hex digits", ErrInvalidCPUSet, quoteShort(s), quoteShort(g))
		}
		v, err := strconv.ParseUint(g, 16, 32)
		if err != nil {
			return CPUSet{}, fmt.Errorf("%w: hex CPU mask %s: word %s is not hexadecimal", ErrInvalidCPUSet, quoteShort(s), quoteShort(g))
		}
		base := (len(groups) - 1 - gi) * 32
		for w := v; w != 0; w &= w - 1 {
			c.Add(base + bits.TrailingZeros64(w))
		}
	}
	return c, nil
}
