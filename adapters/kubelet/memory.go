package kubelet

import (
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// The one place of this package that knows how an allocator.NodeMemory
// names its NUMA node (by ID).

// memoryIndex returns the dense index on m of x's NUMA node, and whether m
// has it.
func memoryIndex(m *topology.Machine, x allocator.NodeMemory) (int, bool) {
	return m.NodeIndex(x.Node)
}

// memoryNodeID returns the ID of x's NUMA node on m (-1 when m has none).
func memoryNodeID(m *topology.Machine, x allocator.NodeMemory) numa.NodeID {
	if _, ok := memoryIndex(m, x); ok {
		return x.Node
	}
	return -1
}
