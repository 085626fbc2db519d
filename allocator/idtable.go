package allocator

import (
	"hash/maphash"
	"iter"
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
	seed  maphash.Seed
	slots []idSlot // len a power of two (or 0)
	n     int      // the live IDs
}

// idSlot is one slot of an idTable: an ID (empty: the slot is free), the
// low bits of its hash and its record's index.
type idSlot struct {
	id   string
	hash uint32
	idx  int32
}

// newIDTable returns an empty table with a seed of its own.
func newIDTable() idTable { return idTable{seed: maphash.MakeSeed()} }

// probe returns the position of id's slot: the slot that holds it (found)
// or the free slot where it would be inserted, and the hash of id. With
// no slots at all it returns position 0 and not found.
func (t *idTable) probe(id string) (pos, hash uint32, found bool) {
	hash = uint32(maphash.String(t.seed, id))
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
