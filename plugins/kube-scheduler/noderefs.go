package numaplace

import (
	"math/bits"
	"sync/atomic"
	"unsafe"

	v1 "k8s.io/api/core/v1"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

// nodeRefs finds the cache's handle of a node (scheduler.NodeRef) from the
// framework's node object, so that Filter and Score, hundreds of calls a
// pod, look no node up by name: an open-addressing table keyed by the
// object's address (refProbes slots from the address's hash), read and
// written without a lock. An object the table does not hold (a node object
// new since, a handle whose node has left the cache) is looked up by name
// and takes a free slot of its probes, or else one of them in turn (so
// that objects replaced by newer ones give way). The informer's
// node objects are never changed in place, so an address stands for one
// node while the table holds it. The table has four slots a node PreFilter
// last saw (rounded up to a power of two); when the objects looked up by
// name since it was made outnumber its slots (objects replaced by newer
// ones fill it), it starts empty again, so that it holds at most its size
// of objects, most of them current.
type nodeRefs struct {
	tab atomic.Pointer[refTable]
}

// refProbes is how many slots, from the one its hash picks, an object may
// take.
const refProbes = 8

// refTable is nodeRefs' slots: len(slots) is 1<<(64-shift); misses counts
// the lookups by name since it was made.
type refTable struct {
	shift  uint
	slots  []atomic.Pointer[nodeRef]
	misses atomic.Int64
}

// nodeRef is one slot's node object and its handle.
type nodeRef struct {
	node *v1.Node
	ref  scheduler.NodeRef
}

// size makes room for nodes nodes: a table of fewer than four slots a node
// is replaced by an empty one of enough.
func (t *nodeRefs) size(nodes int) {
	want := max(4*nodes, refProbes)
	if tab := t.tab.Load(); tab != nil && len(tab.slots) >= want {
		return
	}
	t.tab.Store(newRefTable(want))
}

// newRefTable returns an empty table of at least n slots.
func newRefTable(n int) *refTable {
	b := bits.Len(uint(n - 1)) // 1<<b >= n
	return &refTable{shift: uint(64 - b), slots: make([]atomic.Pointer[nodeRef], 1<<b)}
}

// get returns the handle of node n in c; false when c has no node of that
// name.
func (t *nodeRefs) get(c *scheduler.Cache, n *v1.Node) (scheduler.NodeRef, bool) {
	tab := t.tab.Load()
	var h uint64
	if tab != nil {
		// Fibonacci hashing of the address: its high bits pick the slot.
		h = (uint64(uintptr(unsafe.Pointer(n))) * 0x9e3779b97f4a7c15) >> tab.shift
		mask := uint64(len(tab.slots) - 1)
		for i := range uint64(refProbes) {
			if e := tab.slots[(h+i)&mask].Load(); e != nil && e.node == n && e.ref.Current() {
				return e.ref, true
			}
		}
	}
	r, err := c.Ref(n.Name)
	if err != nil || tab == nil {
		return r, err == nil
	}
	misses := tab.misses.Add(1)
	if misses > int64(len(tab.slots)) {
		// Full of objects no longer looked up: start again.
		fresh := newRefTable(len(tab.slots))
		if t.tab.CompareAndSwap(tab, fresh) {
			tab = fresh
		}
	}
	mask := uint64(len(tab.slots) - 1)
	// A free probe, or else one of them in turn: an object no longer
	// looked up gives way to one that is.
	slot := &tab.slots[(h+uint64(misses)%refProbes)&mask]
	for i := range uint64(refProbes) {
		s := &tab.slots[(h+i)&mask]
		if e := s.Load(); e == nil || !e.ref.Current() || e.node == n {
			slot = s
			break
		}
	}
	slot.Store(&nodeRef{node: n, ref: r})
	return r, true
}
