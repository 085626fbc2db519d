package allocator

import (
	"iter"
	"math/bits"
	"math/rand/v2"
)

// idTable maps the IDs of a state's live allocations to their records'
// indices: a hash table with linear probing, at most a quarter full (a
// probe for an ID that is not live looks at 1.4 slots on average), whose
// probe position serves both the duplicate check of Allocate and the
// insertion that follows it (and the lookup and removal of Release), so
// that each costs one hash of the ID. IDs are never empty: an empty slot
// has the empty ID. Its memory is linear in the most allocations live at
// once (like a Go map, it does not shrink): 24 bytes a slot, at most
// eight slots per such allocation, 8 at least once one was live.
type idTable struct {
	seed  [2]uint64 // the keys of hashID, random for each table
	slots []idSlot  // len a power of two (or 0)
	n     int       // the live IDs
}

// idSlot is one slot of an idTable: an ID (empty: the slot is free), the
// low bits of its hash and its record's index.
type idSlot struct {
	id   string
	hash uint32
	idx  int32
}

// newIDTable returns an empty table with a seed of its own.
func newIDTable() idTable { return idTable{seed: [2]uint64{rand.Uint64(), rand.Uint64()}} }

// hashID returns the seeded hash of id: the wyhash mix the Go runtime
// uses where it has no AES hash (runtime.memhashFallback, without its
// three lanes for IDs over 48 bytes), keyed by seed and computed here in
// place (the runtime's hash behind hash/maphash costs about three times
// as much for a short ID, most of it in the calls).
func hashID(seed [2]uint64, id string) uint64 {
	var a, b uint64
	h, n := seed[0], len(id)
	switch {
	case n == 0:
		return h
	case n < 4:
		a = uint64(id[0]) | uint64(id[n>>1])<<8 | uint64(id[n-1])<<16
	case n <= 8:
		a, b = le32(id), le32(id[n-4:]) // the first and the last four bytes
	case n <= 16:
		a, b = le64(id), le64(id[n-8:])
	default:
		for rest := id; len(rest) > 16; rest = rest[16:] {
			h = mixID(le64(rest)^seed[1], le64(rest[8:])^h)
		}
		a, b = le64(id[n-16:]), le64(id[n-8:]) // the last 16 bytes
	}
	return mixID(0x1d8e4e27c47d124f^uint64(n), mixID(a^seed[1], b^h))
}

// mixID is the mix of hashID: the two halves of the 128-bit product, xored.
func mixID(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// le32 returns the first four bytes of s (at least four), little-endian.
func le32(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

// le64 returns the first eight bytes of s (at least eight), little-endian.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// probe returns the position of id's slot: the slot that holds it (found)
// or the free slot where it would be inserted, and the hash of id. With
// no slots at all it returns position 0 and not found.
func (t *idTable) probe(id string) (pos, hash uint32, found bool) {
	hash = uint32(hashID(t.seed, id))
	if len(t.slots) == 0 {
		return 0, hash, false
	}
	mask := uint32(len(t.slots) - 1)
	for pos = hash & mask; ; pos = (pos + 1) & mask {
		sl := &t.slots[pos]
		if sl.id == "" {
			return pos, hash, false
		}
		if sl.hash == hash && sl.id == id {
			return pos, hash, true
		}
	}
}

// get returns the record index of id.
func (t *idTable) get(id string) (int32, bool) {
	pos, _, ok := t.probe(id)
	if !ok {
		return 0, false
	}
	return t.slots[pos].idx, true
}

// has reports whether id is live.
func (t *idTable) has(id string) bool {
	_, _, ok := t.probe(id)
	return ok
}

// insertAt inserts id (not in the table) with record index idx at the
// position and hash probe returned for it, with no change to the table
// in between.
func (t *idTable) insertAt(pos, hash uint32, id string, idx int32) {
	if 4*(t.n+1) > len(t.slots) {
		t.grow()
		pos, hash, _ = t.probe(id)
	}
	t.slots[pos] = idSlot{id: id, hash: hash, idx: idx}
	t.n++
}

// set makes id map to idx, inserting it when it is not in the table.
func (t *idTable) set(id string, idx int32) {
	pos, hash, ok := t.probe(id)
	if ok {
		t.slots[pos].idx = idx
		return
	}
	t.insertAt(pos, hash, id, idx)
}

// grow doubles the slots (8 at first) and reinserts the IDs.
func (t *idTable) grow() {
	old := t.slots
	t.slots = make([]idSlot, max(8, 2*len(old)))
	mask := uint32(len(t.slots) - 1)
	for _, sl := range old {
		if sl.id == "" {
			continue
		}
		pos := sl.hash & mask
		for t.slots[pos].id != "" {
			pos = (pos + 1) & mask
		}
		t.slots[pos] = sl
	}
}

// deleteAt removes the ID at position pos (found by probe), moving back the
// IDs after it that probing would no longer reach (no tombstones).
func (t *idTable) deleteAt(pos uint32) {
	mask := uint32(len(t.slots) - 1)
	i := pos
	for {
		t.slots[i] = idSlot{}
		j := i
		for {
			j = (j + 1) & mask
			sl := &t.slots[j]
			if sl.id == "" {
				t.n--
				return
			}
			// The ID at j stays when its home slot lies cyclically in (i, j].
			home := sl.hash & mask
			if i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
				continue
			}
			break
		}
		t.slots[i] = t.slots[j]
		i = j
	}
}

// delete removes id and reports whether it was in the table.
func (t *idTable) delete(id string) bool {
	pos, _, ok := t.probe(id)
	if ok {
		t.deleteAt(pos)
	}
	return ok
}

// len returns the number of IDs.
func (t *idTable) len() int { return t.n }

// all yields every ID with its record index, in no particular order.
func (t *idTable) all() iter.Seq2[string, int32] {
	return func(yield func(string, int32) bool) {
		for _, sl := range t.slots {
			if sl.id != "" && !yield(sl.id, sl.idx) {
				return
			}
		}
	}
}

// clone returns an independent copy (with the same seed).
func (t *idTable) clone() idTable {
	c := *t
	c.slots = append([]idSlot(nil), t.slots...)
	return c
}
