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
// pod, look no node up by name: a direct-mapped table keyed by the
// object's address, read and written without a lock. An object the table
// does not hold (a node object new since, two objects sharing a slot, a
// handle whose node has left the cache) is looked up by name and takes its
// slot. The informer's node objects are never changed in place, so an
// address stands for one node while the table holds it; the table holds at
// most one object a slot, and has twice as many slots as the nodes
// PreFilter last saw (rounded up to a power of two).
type nodeRefs struct {
	tab atomic.Pointer[refTable]
}

// refTable is nodeRefs' slots: len(slots) is 1<<(64-shift).
type refTable struct {
	shift uint
	slots []atomic.Pointer[nodeRef]
}

// nodeRef is one slot's node object and its handle.
type nodeRef struct {
	node *v1.Node
	ref  scheduler.NodeRef
}

// size makes room for nodes nodes: a table of fewer than twice as many
// slots is replaced by an empty one of enough (it fills again as Filter
// meets the nodes).
func (t *nodeRefs) size(nodes int) {
	want := max(2*nodes, 2)
	if tab := t.tab.Load(); tab != nil && len(tab.slots) >= want {
		return
	}
	b := bits.Len(uint(want - 1)) // 1<<b >= want
	t.tab.Store(&refTable{shift: uint(64 - b), slots: make([]atomic.Pointer[nodeRef], 1<<b)})
}

// get returns the handle of node n in c; false when c has no node of that
// name.
func (t *nodeRefs) get(c *scheduler.Cache, n *v1.Node) (scheduler.NodeRef, bool) {
	tab := t.tab.Load()
	var slot *atomic.Pointer[nodeRef]
	if tab != nil {
		// Fibonacci hashing of the address: its high bits pick the slot.
		h := uint64(uintptr(unsafe.Pointer(n))) * 0x9e3779b97f4a7c15
		slot = &tab.slots[h>>tab.shift]
		if e := slot.Load(); e != nil && e.node == n && e.ref.Current() {
			return e.ref, true
		}
	}
	r, err := c.Ref(n.Name)
	if err != nil {
		return scheduler.NodeRef{}, false
	}
	if slot != nil {
		slot.Store(&nodeRef{node: n, ref: r})
	}
	return r, true
}
