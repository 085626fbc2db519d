package allocator

import (
	"fmt"
	"slices"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// Memory is the memory [Resource]: MiB per NUMA node, CPU-less (HBM, CXL)
// nodes included. Its units are MiB.
type Memory struct {
	capacity []int64
	free     []int64
}

var (
	_ Resource   = (*Memory)(nil)
	_ BulkReader = (*Memory)(nil)
)

// NewMemory returns the memory resource of m with every MiB free.
func NewMemory(m *topology.Machine) *Memory {
	mem := &Memory{capacity: make([]int64, m.NumNodes())}
	for i := range mem.capacity {
		mem.capacity[i] = m.Node(i).MemoryMiB
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

// FreeInto writes Free of every node into dst.
func (m *Memory) FreeInto(_ *Request, dst []int64) { copy(dst, m.free) }

// CapacityInto writes Capacity of every node into dst.
func (m *Memory) CapacityInto(_ *Request, dst []int64) { copy(dst, m.capacity) }

// Unplaced returns 0.
func (m *Memory) Unplaced(*Request) int64 { return 0 }

// Describe writes "4096 MiB of memory".
func (m *Memory) Describe(_ *Request, units int64) string {
	return fmt.Sprintf("%d MiB of memory", units)
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
			a.Memory = append(a.Memory, NodeMemory{Node: node, MiB: k})
		}
	}
}

// Give returns a's memory.
func (m *Memory) Give(a *Allocation) {
	for _, x := range a.Memory {
		m.free[x.Node] += x.MiB
	}
}

// Claim takes exactly a's memory.
func (m *Memory) Claim(a *Allocation) error {
	need := make(map[int]int64, len(a.Memory))
	for _, x := range a.Memory {
		if x.Node < 0 || x.Node >= len(m.free) {
			return fmt.Errorf("%w: memory on NUMA node index %d, which does not exist", ErrConflict, x.Node)
		}
		if x.MiB < 0 {
			return fmt.Errorf("%w: negative memory %d MiB on NUMA node index %d", ErrConflict, x.MiB, x.Node)
		}
		need[x.Node] += x.MiB
	}
	for node, k := range need {
		if k > m.free[node] {
			return fmt.Errorf("%w: %d MiB of memory on NUMA node index %d, only %d MiB free", ErrConflict, k, node, m.free[node])
		}
	}
	for node, k := range need {
		m.free[node] -= k
	}
	return nil
}

// Nodes returns the nodes of a's memory.
func (m *Memory) Nodes(a *Allocation) numa.Mask {
	var mask numa.Mask
	for _, x := range a.Memory {
		if x.MiB > 0 && x.Node >= 0 && x.Node < numa.MaxNodes {
			mask = mask.With(x.Node)
		}
	}
	return mask
}

// Clone returns an independent copy.
func (m *Memory) Clone() Resource {
	return &Memory{capacity: m.capacity, free: slices.Clone(m.free)}
}
