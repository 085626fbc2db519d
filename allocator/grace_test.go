package allocator_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// memoryByNode returns an allocation's memory as "id:MiB" strings.
func memoryByNode(a allocator.Allocation) []string {
	var out []string
	for _, x := range a.Memory {
		out = append(out, fmt.Sprintf("%d:%d", x.Node, x.MiB))
	}
	return out
}

// TestGraceGPUMemoryIsNotPodMemory checks the engine's rules on a GB200
// tray: GPU pods span their Grace node only, GPU memory nodes are never
// handed out as memoryMiB (a request that would need them is refused), and
// placeholders take no part.
func TestGraceGPUMemoryIsNotPodMemory(t *testing.T) {
	m, err := topology.Preset("gb200-tray")
	require.NoError(t, err)
	s := allocator.MustNew(m, allocator.Options{})
	grace := m.NodesOfKind(topology.NodeCPU)

	// Two GPUs, CPUs and memory on one node: node 0, never its GPUs'
	// memory nodes 2 and 10.
	a, err := s.Allocate(&allocator.Request{ID: "gpu2", CPUs: 32, GPUs: 2, MemoryMiB: 64 << 10, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{0}, a.NUMANodes())
	require.Equal(t, []string{"0:65536"}, memoryByNode(a))

	// More memory than node 1 holds under BestEffort: the rest comes from
	// Grace node 0, never from a GPU memory node.
	a, err = s.Allocate(&allocator.Request{ID: "big", CPUs: 8, MemoryMiB: 600 << 10, Policy: policy.BestEffort})
	require.NoError(t, err)
	require.True(t, a.DenseSpan.IsSubsetOf(grace), "span %v", a.NUMANodes())
	require.Len(t, a.Memory, 2)
	for _, x := range a.Memory {
		i, _ := m.NodeIndex(x.Node)
		require.Equal(t, topology.NodeCPU, m.NodeKind(i), "memory on node %d", x.Node)
	}

	// What is left of the Grace memory is 960 GiB less 664 GiB; the four
	// GPUs' 744 GiB are not pod memory, so 400 GiB more is refused.
	err = s.Fit(&allocator.Request{ID: "more", MemoryMiB: 400 << 10, Policy: policy.None})
	require.ErrorIs(t, err, allocator.ErrInsufficient)
	require.NoError(t, s.Fit(&allocator.Request{ID: "less", MemoryMiB: 290 << 10, Policy: policy.None}))

	// Four GPUs with Restricted: both Grace nodes, nothing else.
	require.NoError(t, s.Release("gpu2"))
	require.NoError(t, s.Release("big"))
	a, err = s.Allocate(&allocator.Request{ID: "gpu4", CPUs: 8, GPUs: 4, MemoryMiB: 1 << 10, Policy: policy.Restricted})
	require.NoError(t, err)
	require.Equal(t, grace, a.DenseSpan)
}

// TestPlainMemoryNodeIsPodMemory checks that a CPU-less node of plain
// memory (a CXL expander) is given to a pod whose policy allows more than
// one node, by distance, and that the same node marked as a GPU's memory
// is not (and a placeholder never is).
func TestPlainMemoryNodeIsPodMemory(t *testing.T) {
	build := func(gpuMemory bool) *topology.Machine {
		m, err := topology.NewBuilder("cxl").
			AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 7), MemoryMiB: 4096}).
			AddNode(topology.Node{ID: 1, Socket: 1, CPUs: numa.CPURange(8, 15), MemoryMiB: 4096}).
			AddNode(topology.Node{ID: 2, Socket: 0, MemoryMiB: 65536, GPUMemory: gpuMemory}).
			AddNode(topology.Node{ID: 3, Socket: -1}).
			AddGPU(topology.GPU{ID: 0, NUMANode: 0}).
			SetDistances([][]int{{10, 30, 14, 40}, {30, 10, 24, 40}, {14, 24, 10, 40}, {40, 40, 40, 10}}).
			Build()
		require.NoError(t, err)
		return m
	}
	s := allocator.MustNew(build(false), allocator.Options{})
	a, err := s.Allocate(&allocator.Request{ID: "p", CPUs: 4, MemoryMiB: 8192, Policy: policy.Restricted})
	require.NoError(t, err)
	require.Equal(t, []string{"0:4096", "2:4096"}, memoryByNode(a), "the CXL node nearest node 0 fills in")

	s = allocator.MustNew(build(true), allocator.Options{})
	a, err = s.Allocate(&allocator.Request{ID: "p", CPUs: 4, MemoryMiB: 8192, Policy: policy.Restricted})
	require.NoError(t, err)
	require.Equal(t, []string{"0:4096", "1:4096"}, memoryByNode(a), "a GPU's memory is not pod memory")
	require.ErrorIs(t, s.Fit(&allocator.Request{ID: "q", MemoryMiB: 1, Policy: policy.None}), allocator.ErrInsufficient)
}
