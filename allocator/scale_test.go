package allocator_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// manyGPUs builds a machine of two NUMA nodes with n GPUs (even IDs on
// node 0, odd on node 1, no PCIe switch) and the NVLinks given.
func manyGPUs(t *testing.T, n int, links [][3]int) *topology.Machine {
	t.Helper()
	b := topology.NewBuilder(fmt.Sprintf("gpus%d", n))
	b.AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 63), MemoryMiB: 1 << 20})
	b.AddNode(topology.Node{ID: 1, Socket: 0, CPUs: numa.CPURange(64, 127), MemoryMiB: 1 << 20})
	for g := range n {
		b.AddGPU(topology.GPU{ID: g, NUMANode: numa.NodeID(g % 2)})
	}
	for _, l := range links {
		b.AddNVLink(l[0], l[1], l[2])
	}
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// allocated returns the bytes New allocates for m.
func allocated(m *topology.Machine) (uint64, *allocator.State) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := allocator.MustNew(m, allocator.Options{})
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, s
}

// TestGPUStateIsLinear: the state of a machine with 30,000 GPUs and one
// NVLink takes memory linear in the GPUs (a table over pairs of GPUs would
// take 3.6 GB), three times the GPUs take at most about three times the
// memory, and the NVLink preference and the amounts still hold: a
// request for more GPUs than 64 of one node gets all it asks for, and a
// pair takes the linked GPUs.
func TestGPUStateIsLinear(t *testing.T) {
	const n = 30000
	big, s := allocated(manyGPUs(t, n, [][3]int{{0, 2, 4}}))
	small, _ := allocated(manyGPUs(t, n/3, [][3]int{{0, 2, 4}}))
	t.Logf("New: %d bytes for %d GPUs, %d for %d", big, n, small, n/3)
	require.Less(t, big, uint64(n*1024), "at most 1 KiB per GPU")
	require.Less(t, big, 4*small, "linear in the GPUs")

	pair, err := s.Allocate(&allocator.Request{ID: "pair", GPUs: 2, CPUs: 1})
	require.NoError(t, err)
	require.Equal(t, []int{0, 2}, pair.GPUs, "the NVLinked pair")
	wide, err := s.Allocate(&allocator.Request{ID: "wide", GPUs: 100, CPUs: 1})
	require.NoError(t, err)
	require.Len(t, wide.GPUs, 100, "every GPU asked for, from one node's 15,000")
	require.Equal(t, []numa.NodeID{0}, wide.NUMANodes())
}

// TestNVLinkPreferenceLargeGroups: more than 64 free GPUs under one switch
// group with NVLinks: the best-linked ones are chosen and the amount is
// exact.
func TestNVLinkPreferenceLargeGroups(t *testing.T) {
	// GPUs 100, 102, 104, 106 (node 0) are linked all to all.
	var links [][3]int
	for a := 100; a <= 106; a += 2 {
		for b := a + 2; b <= 106; b += 2 {
			links = append(links, [3]int{a, b, 12})
		}
	}
	s := allocator.MustNew(manyGPUs(t, 300, links), allocator.Options{})
	a, err := s.Allocate(&allocator.Request{ID: "four", GPUs: 4, CPUs: 1})
	require.NoError(t, err)
	require.Equal(t, []int{100, 102, 104, 106}, a.GPUs)
	one, err := s.Allocate(&allocator.Request{ID: "one", GPUs: 1, CPUs: 1})
	require.NoError(t, err)
	require.Equal(t, []int{0}, one.GPUs, "a lone GPU takes an unlinked one")
	many, err := s.Allocate(&allocator.Request{ID: "many", GPUs: 140, CPUs: 1})
	require.NoError(t, err)
	require.Len(t, many.GPUs, 140)
}

// switchedGPUs builds manyGPUs's machine with each GPU g under the PCIe
// switch switchOf(g).
func switchedGPUs(tb testing.TB, n int, switchOf func(g int) string) *topology.Machine {
	tb.Helper()
	b := topology.NewBuilder(fmt.Sprintf("switched%d", n))
	b.AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 63), MemoryMiB: 1 << 20})
	b.AddNode(topology.Node{ID: 1, Socket: 0, CPUs: numa.CPURange(64, 127), MemoryMiB: 1 << 20})
	for g := range n {
		b.AddGPU(topology.GPU{ID: g, NUMANode: numa.NodeID(g % 2), PCIeSwitch: switchOf(g)})
	}
	m, err := b.Build()
	require.NoError(tb, err)
	return m
}

// TestSwitchGroupsInterleaved: GPUs of one node whose switches alternate
// (0, 2, 4, 6 of node 0 under sw0, sw1, sw0, sw1) form one group per switch,
// so a pair takes two GPUs under one switch, and a lone GPU on a switch of
// its own is what a single-GPU request takes while whole pairs stay free.
func TestSwitchGroupsInterleaved(t *testing.T) {
	m := switchedGPUs(t, 10, func(g int) string {
		if g == 8 {
			return "lone"
		}
		return fmt.Sprintf("sw%d", (g/2)%2)
	})
	s := allocator.MustNew(m, allocator.Options{})
	pair, err := s.Allocate(&allocator.Request{ID: "pair", GPUs: 2, CPUs: 1})
	require.NoError(t, err)
	require.Len(t, pair.GPUs, 2)
	sw := func(g int) string { return m.GPUs()[g].PCIeSwitch }
	require.Equal(t, sw(pair.GPUs[0]), sw(pair.GPUs[1]), "a pair under one switch: %v", pair.GPUs)
}

// BenchmarkNewSwitchPerGPU: New on 100,000 GPUs, each under a PCIe switch of
// its own (the switch groups are built in one pass, not by comparing every
// GPU of a node with every group).
func BenchmarkNewSwitchPerGPU(b *testing.B) {
	m := switchedGPUs(b, 100000, func(g int) string { return fmt.Sprintf("sw%d", g) })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := allocator.New(m, allocator.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
