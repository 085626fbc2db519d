package numa

import (
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxNodes is the largest number of NUMA nodes a [Mask] can describe.
const MaxNodes = 64

// NodeID is a NUMA node's identifier as the operating system numbers it
// (the N of /sys/devices/system/node/nodeN). IDs may be sparse.
type NodeID int

// String returns the decimal form of the ID.
func (id NodeID) String() string { return strconv.Itoa(int(id)) }

// Mask is a set of NUMA nodes by dense index: bit i is the machine's i-th NUMA
// node in ascending ID order. The zero value is the empty set. All methods
// have value receivers, never allocate (except String and the iterators'
// closures) and never mutate the receiver.
type Mask uint64

// ErrInvalidMask is returned (wrapped) by [ParseMask] for malformed input.
var ErrInvalidMask = errors.New("invalid NUMA mask")

// MaskOf returns the mask holding the given dense indices.
// It panics if an index is outside [0, 64): that is a programmer error.
func MaskOf(indices ...int) Mask {
	var m Mask
	for _, i := range indices {
		if i < 0 || i >= MaxNodes {
			panic(fmt.Sprintf("numa.MaskOf: index %d out of range [0,64)", i))
		}
		m |= 1 << uint(i)
	}
	return m
}

// FirstN returns the mask of the dense indices 0..n-1 (n clamped to [0, 64]).
func FirstN(n int) Mask {
	switch {
	case n <= 0:
		return 0
	case n >= MaxNodes:
		return ^Mask(0)
	}
	return Mask(1)<<uint(n) - 1
}

// Union returns m ∪ o.
func (m Mask) Union(o Mask) Mask { return m | o }

// Intersection returns m ∩ o.
func (m Mask) Intersection(o Mask) Mask { return m & o }

// Difference returns m \ o.
func (m Mask) Difference(o Mask) Mask { return m &^ o }

// Count returns the number of nodes in m.
func (m Mask) Count() int { return bits.OnesCount64(uint64(m)) }

// IsEmpty reports whether m has no nodes.
func (m Mask) IsEmpty() bool { return m == 0 }

// Contains reports whether dense index i is in m. Out-of-range indices are
// never contained.
func (m Mask) Contains(i int) bool {
	return i >= 0 && i < MaxNodes && m&(1<<uint(i)) != 0
}

// With returns m with dense index i added. It panics if i is outside [0, 64).
func (m Mask) With(i int) Mask { return m | MaskOf(i) }

// Without returns m with dense index i removed. Out-of-range indices are ignored.
func (m Mask) Without(i int) Mask {
	if i < 0 || i >= MaxNodes {
		return m
	}
	return m &^ (1 << uint(i))
}

// IsSubsetOf reports whether every node of m is in o.
func (m Mask) IsSubsetOf(o Mask) bool { return m&^o == 0 }

// Equal reports whether m and o hold the same nodes (the same as m == o).
func (m Mask) Equal(o Mask) bool { return m == o }

// Lowest returns the lowest dense index in m, or -1 when m is empty.
func (m Mask) Lowest() int {
	if m == 0 {
		return -1
	}
	return bits.TrailingZeros64(uint64(m))
}

// Highest returns the highest dense index in m, or -1 when m is empty.
func (m Mask) Highest() int {
	if m == 0 {
		return -1
	}
	return 63 - bits.LeadingZeros64(uint64(m))
}

// IsNarrowerThan orders masks the way placement prefers them: fewer nodes
// first; at equal count, the mask whose lowest differing index belongs to it
// (that is, lower indices first, compared as sorted index lists: {0,3}
// before {1,2}). It is a strict order: m.IsNarrowerThan(m) is false. The
// kubelet's bitmask.IsNarrowerThan breaks the tie otherwise, by the smaller
// integer ({1,2} before {0,3}); adapters/topologymanager emulates it as
// IDMask.IsNarrowerThanByValue.
func (m Mask) IsNarrowerThan(o Mask) bool {
	cm, co := m.Count(), o.Count()
	if cm != co {
		return cm < co
	}
	d := m ^ o
	if d == 0 {
		return false
	}
	return m&(d&-d) != 0
}

// All yields the dense indices of m in ascending order.
func (m Mask) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for w := uint64(m); w != 0; w &= w - 1 {
			if !yield(bits.TrailingZeros64(w)) {
				return
			}
		}
	}
}

// Indices appends the dense indices of m in ascending order to dst and
// returns the extended slice.
func (m Mask) Indices(dst []int) []int {
	for w := uint64(m); w != 0; w &= w - 1 {
		dst = append(dst, bits.TrailingZeros64(w))
	}
	return dst
}

// Submasks yields every non-empty subset of m, in increasing numeric order of
// the mask value. A mask of n nodes has 2^n - 1 of them: callers on large
// masks should stop early or use [Mask.Subsets].
func (m Mask) Submasks() iter.Seq[Mask] {
	return func(yield func(Mask) bool) {
		if m == 0 {
			return
		}
		// Enumerate s = (s - m) & m, which walks submasks upward.
		s := Mask(0)
		for {
			s = (s - m) & m
			if s == 0 {
				return
			}
			if !yield(s) {
				return
			}
		}
	}
}

// Subsets yields every k-element subset of m, in lexicographic order of their
// sorted index lists' reverse (Gosper's order over the positions of m: the
// first subset is the k lowest indices, the last the k highest). Nothing is
// yielded when k < 0 or k > m.Count(); k == 0 yields the empty mask once.
func (m Mask) Subsets(k int) iter.Seq[Mask] {
	return func(yield func(Mask) bool) {
		n := m.Count()
		if k < 0 || k > n {
			return
		}
		if k == 0 {
			yield(0)
			return
		}
		// c walks the k-combinations of n positions (Gosper's hack); each is
		// deposited into the positions of m, in O(k) per subset.
		var pos [MaxNodes]uint8
		for i, w := 0, uint64(m); w != 0; i, w = i+1, w&(w-1) {
			pos[i] = uint8(bits.TrailingZeros64(w))
		}
		c := uint64(1)<<uint(k) - 1
		for {
			var sub Mask
			for w := c; w != 0; w &= w - 1 {
				sub |= 1 << pos[bits.TrailingZeros64(w)]
			}
			if !yield(sub) {
				return
			}
			if k == n {
				return
			}
			u := c & -c
			v := c + u
			if v == 0 || bits.Len64(v) > n {
				return
			}
			c = v | (((v ^ c) / u) >> 2)
		}
	}
}

// String returns m in list form, such as "0-2,5"; the empty mask is "".
func (m Mask) String() string {
	var sb strings.Builder
	w := uint64(m)
	for w != 0 {
		lo := bits.TrailingZeros64(w)
		hi := lo
		for hi+1 < MaxNodes && w&(1<<uint(hi+1)) != 0 {
			hi++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.Itoa(lo))
		if hi > lo {
			sb.WriteByte('-')
			sb.WriteString(strconv.Itoa(hi))
		}
		if hi == MaxNodes-1 {
			break
		}
		w &^= (uint64(1)<<uint(hi+1) - 1)
	}
	return sb.String()
}

// ParseMask parses the list form written by [Mask.String] ("0-2,5"; spaces
// around items are allowed; "" is the empty mask). Indices must lie in
// [0, 64). Errors wrap [ErrInvalidMask] and quote the bad item.
func ParseMask(s string) (Mask, error) {
	var m Mask
	err := parseList(s, MaxNodes-1, func(lo, hi int) {
		m |= FirstN(hi+1) &^ FirstN(lo)
	})
	if err != nil {
		return 0, fmt.Errorf("%w %s: %w", ErrInvalidMask, quoteShort(s), err)
	}
	return m, nil
}

// parseList parses a Linux list ("0-3,8,10-11") calling add for each range.
// Values above max are refused; max < 0 means no bound.
func parseList(s string, max int, add func(lo, hi int)) error {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return errors.New("empty item")
		}
		loS, hiS, isRange := strings.Cut(item, "-")
		lo, err := parseIndex(loS, max)
		if err != nil {
			return fmt.Errorf("item %s: %w", quoteShort(item), err)
		}
		hi := lo
		if isRange {
			if hi, err = parseIndex(hiS, max); err != nil {
				return fmt.Errorf("item %s: %w", quoteShort(item), err)
			}
			if hi < lo {
				return fmt.Errorf("item %s: range end below its start", quoteShort(item))
			}
		}
		add(lo, hi)
	}
	return nil
}

func parseIndex(s string, max int) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("%s is not a non-negative integer", quoteShort(s))
	}
	v, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return 0, fmt.Errorf("%s is not a non-negative integer", quoteShort(s))
	}
	if max >= 0 && int(v) > max {
		return 0, fmt.Errorf("%d is above the limit %d", v, max)
	}
	return int(v), nil
}

func trailing(w uint64) int { return bits.TrailingZeros64(w) }

// quoteShort quotes an outside value for an error message: escaped as
// strconv.Quote does, and cut to its first 64 bytes (at a character
// boundary) followed by its length when longer, so that a huge or binary
// value gives a short readable error. (internal/quote does the same for the
// rest of the module; numa, the leaf package, imports nothing of it.)
func quoteShort(s string) string {
	const maxBytes = 64
	if len(s) <= maxBytes {
		return strconv.Quote(s)
	}
	cut := maxBytes
	for cut > maxBytes-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
