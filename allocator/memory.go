package allocator

import (
	"fmt"
	"slices"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// Memory is the memory [Resource]: MiB per NUMA node, CPU-less (HBM, CXL)
// nodes included. Its units are MiB. Allocations record it by NUMA node ID
// ([NodeMemory]); a claim naming a node the machine does not have is
// refused with a *[NodeError].
type Memory struct {
	m        *topology.Machine
	capacity []int64
	free     []int64
}

var (
	_ Resource   = (*Memory)(nil)
	_ BulkReader = (*Memory)(nil)
)

// newMemory returns the memory resource of m with every MiB free.
func newMemory(m *topology.Machine) *Memory {
	mem := &Memory{m: m, capacity: make([]int64, m.NumNodes())}
	for i := range mem.capacity {
		mem.capacity[i] = m.PodMemoryMiB(i)
	}
	mem.free = slices.Clone(mem.capacity)
	return mem
}

// Kind returns "memory".
func (m *Memory) Kind() string { return "memory" }

// Demand returns r.MemoryMiB.
func (m *Memory) Demand(r *Request) int64 { return r.MemoryMiB }

// Capacity returns the node's memory.
func (m *Memory) Capacity(_ *Request, node int) int64 { return m.capacity[node] }

// Free returns the node's free memory.
func (m *Memory) Free(_ *Request, node int) int64 { return m.free[node] }

// FreeView returns Free of every node (a view of the counters).
func (m *Memory) FreeView(*Request) []int64 { return m.free }

// CapacityView returns Capacity of every node (a view of the counters).
func (m *Memory) CapacityView(*Request) []int64 { return m.capacity }

// Unplaced returns 0.
func (m *Memory) Unplaced(*Request) int64 { return 0 }

// Describe writes "96,608 MiB of memory".
func (m *Memory) Describe(_ *Request, units int64) string {
	return groupDigits(units) + " MiB of memory"
}

// Take takes the amounts.
func (m *Memory) Take(_ *Request, amounts []int64, _ int64, a *Allocation) {
	n := 0
	for _, k := range amounts {
		if k > 0 {
			n++
		}
	}
	if n == 0 {
		return
	}
	a.Memory = make([]NodeMemory, 0, n)
	for node, k := range amounts {
		if k > 0 {
			m.free[node] -= k
			a.Memory = append(a.Memory, NodeMemory{Node: m.m.NodeID(node), MiB: k})
		}
	}
}

// Give returns a's memory.
func (m *Memory) Give(a *Allocation) {
	for _, x := range a.Memory {
		if i, ok := m.m.NodeIndex(x.Node); ok {
			m.free[i] += x.MiB
		}
	}
}

// Claim takes exactly a's memory. A NUMA node ID the machine does not have
// is refused with a *[NodeError]; more than a node has free, a negative
// amount or a node listed twice, with an error wrapping [ErrConflict].
func (m *Memory) Claim(a *Allocation) error {
	var need [numa.MaxNodes]int64
	var seen numa.Mask
	for _, x := range a.Memory {
		i, ok := m.m.NodeIndex(x.Node)
		if !ok {
			return &NodeError{Node: x.Node, What: m.Describe(nil, x.MiB), IDs: m.m.NodeIDs()}
		}
		if seen.Contains(i) {
			return fmt.Errorf("%w: memory on NUMA node %d is listed twice", ErrConflict, x.Node)
		}
		seen = seen.With(i)
		if x.MiB < 0 {
			return fmt.Errorf("%w: negative memory (%d MiB) on NUMA node %d", ErrConflict, x.MiB, x.Node)
		}
		if x.MiB > m.free[i]-need[i] {
			return fmt.Errorf("%w: %s on NUMA node %d, only %s free there", ErrConflict,
				m.Describe(nil, need[i]+x.MiB), x.Node, m.Describe(nil, m.free[i]))
		}
		need[i] += x.MiB
	}
	for i, k := range need[:len(m.free)] {
		m.free[i] -= k
	}
	return nil
}

// Nodes returns the nodes of a's memory (dense); IDs the machine does not
// have are left out.
func (m *Memory) Nodes(a *Allocation) numa.Mask {
	var mask numa.Mask
	for _, x := range a.Memory {
		if i, ok := m.m.NodeIndex(x.Node); ok && x.MiB > 0 {
			mask = mask.With(i)
		}
	}
	return mask
}

// Clone returns an independent copy.
func (m *Memory) Clone() Resource {
	return &Memory{m: m.m, capacity: m.capacity, free: slices.Clone(m.free)}
}
