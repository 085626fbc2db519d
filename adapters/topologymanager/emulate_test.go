package topologymanager

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

func TestKubeletAllocation(t *testing.T) {
	m := hintPreset(t, "dgx-a100")
	st := allocator.MustNew(m, allocator.Options{})
	r := &allocator.Request{CPUs: 24, GPUs: 4}
	hint, admit, err := Predict(PolicyBestEffort, PredictOptions{}, m, st, r)
	require.NoError(t, err)
	require.True(t, admit)
	a, err := KubeletAllocation(m, st, "p", r, hint)
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2, 3}, a.GPUs, "the GPUs of nodes 1 and 3, the hint's")
	require.Equal(t, 24, a.CPUs.Size())
	for cpu := range a.CPUs.All() {
		i, _ := m.CPUNode(cpu)
		require.Contains(t, []numa.NodeID{1, 3}, m.NodeID(i), "CPUs on the hint's nodes")
	}
	got, err := st.Claim(a)
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{1, 3}, got.NUMANodes())

	// A hint without affinity takes from every node; too much is an error.
	a, err = KubeletAllocation(m, st, "q", &allocator.Request{CPUs: 2}, AnyHint(false))
	require.NoError(t, err)
	require.Equal(t, 2, a.CPUs.Size())
	_, err = KubeletAllocation(m, st, "r", &allocator.Request{GPUs: 5}, AnyHint(false))
	require.ErrorIs(t, err, allocator.ErrInsufficient)
	_, err = KubeletAllocation(m, nil, "r", r, AnyHint(false))
	require.ErrorIs(t, err, ErrHintConfig)
}

// memoryTestMachine is 2 NUMA nodes (IDs 0 and 2) of 4 CPUs and 1024 MiB
// each, CPU 7 reserved.
func memoryTestMachine(t testing.TB) *topology.Machine {
	t.Helper()
	m, err := topology.NewBuilder("memory-test").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 1024}).
		AddNode(topology.Node{ID: 2, Socket: 0, CPUs: numa.CPURange(4, 7), MemoryMiB: 1024}).
		SetReservedCPUs(numa.NewCPUSet(7)).
		Build()
	require.NoError(t, err)
	return m
}

// The kubelet's static memory manager takes memory on the merged hint's
// nodes in ascending ID and groups every node of the hint, 0 MiB ones too:
// a node grouped with others is then not offered alone, so a later
// single-numa-node pod that needs it alone is refused, as the kubelet
// refuses it.
func TestKubeletAllocationMemory(t *testing.T) {
	m := memoryTestMachine(t) // nodes 0 and 2: 4 CPUs (CPU 7 reserved), 1024 MiB each
	st := allocator.MustNew(m, allocator.Options{})
	static := PredictOptions{StaticMemoryManager: true}
	r := &allocator.Request{CPUs: 6, MemoryMiB: 512}
	hint, admit, err := Predict(PolicyBestEffort, static, m, st, r)
	require.NoError(t, err)
	require.True(t, admit)
	require.Equal(t, Hint(MustIDMask(0, 2), false), hint, "memory would fit one node")
	a, err := KubeletAllocation(m, st, "wide", r, hint)
	require.NoError(t, err)
	require.Equal(t, []allocator.NodeMemory{{Node: 0, MiB: 512}, {Node: 2, MiB: 0}}, a.Memory,
		"all from node 0, node 2 recorded in the group")
	_, err = st.Claim(a)
	require.NoError(t, err)
	got, _ := st.Get("wide")
	require.Len(t, got.Memory, 2, "the state keeps the 0 MiB entry")

	mem := memoryNodes(m, new(st.Snapshot()))
	require.Equal(t, []MemoryNode{
		{Node: 0, AllocatableMiB: 1024, FreeMiB: 512, Group: MustIDMask(0, 2), Assignments: 1},
		{Node: 2, AllocatableMiB: 1024, FreeMiB: 1024, Group: MustIDMask(0, 2), Assignments: 1},
	}, mem)
	small := &allocator.Request{CPUs: 1, MemoryMiB: 256}
	_, admit, err = Predict(PolicySingleNUMANode, static, m, st, small)
	require.NoError(t, err)
	require.False(t, admit, "node 2 is grouped with node 0: no single-node memory hint")
	_, admit, err = Predict(PolicySingleNUMANode, PredictOptions{}, m, st, small)
	require.NoError(t, err)
	require.True(t, admit, "without the memory manager the CPUs alone decide")

	// A hint whose nodes lack free memory is extended to the best memory
	// hint holding them; none is an error.
	st2 := allocator.MustNew(m, allocator.Options{})
	a, err = KubeletAllocation(m, st2, "big", &allocator.Request{CPUs: 1, MemoryMiB: 1500}, Hint(MustIDMask(2), true))
	require.NoError(t, err)
	require.Equal(t, []allocator.NodeMemory{{Node: 0, MiB: 1024}, {Node: 2, MiB: 476}}, a.Memory)
	_, err = KubeletAllocation(m, st2, "huge", &allocator.Request{CPUs: 1, MemoryMiB: 4096}, AnyHint(false))
	require.ErrorIs(t, err, allocator.ErrInsufficient)
	a, err = KubeletAllocation(m, st2, "any", &allocator.Request{CPUs: 1, MemoryMiB: 100}, AnyHint(true))
	require.NoError(t, err)
	require.Equal(t, []allocator.NodeMemory{{Node: 0, MiB: 100}}, a.Memory, "the best memory hint: node 0 alone")

	// A multi-node hint over a node used alone is refused.
	_, err = st2.Claim(a)
	require.NoError(t, err)
	_, err = KubeletAllocation(m, st2, "x", &allocator.Request{MemoryMiB: 1500}, Hint(MustIDMask(0, 2), false))
	require.ErrorIs(t, err, allocator.ErrInsufficient)
	require.Contains(t, err.Error(), "another group")
	_, err = KubeletAllocation(m, st2, "x", &allocator.Request{MemoryMiB: 10}, Hint(MustIDMask(5), false))
	require.ErrorContains(t, err, "no NUMA node 5")
}
