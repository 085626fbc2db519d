package allocator_test

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// wideNodes draws machines of 1-2 NUMA nodes with 60-140 SMT2 cores each
// (more than 64 cores, so more than one word of per-node core bits, on
// most), their siblings numbered after every first thread (k, k+N) or
// next to each other (2k, 2k+1), sometimes a few reserved CPUs, and
// sometimes a GPU per node.
func wideNodes() *rapid.Generator[*topology.Machine] {
	return rapid.Custom(func(t *rapid.T) *topology.Machine {
		nodes := rapid.IntRange(1, 2).Draw(t, "nodes")
		cores := rapid.IntRange(60, 140).Draw(t, "coresPerNode")
		adjacent := rapid.Bool().Draw(t, "adjacentSiblings")
		total := nodes * cores
		b := topology.NewBuilder("wide")
		node := make([]numa.CPUSet, nodes)
		for k := 0; k < total; k++ {
			a, s := k, k+total
			if adjacent {
				a, s = 2*k, 2*k+1
			}
			node[k/cores].Add(a)
			node[k/cores].Add(s)
			b.AddCore(numa.NewCPUSet(a, s))
		}
		for i := range node {
			b.AddNode(topology.Node{ID: numa.NodeID(i), Socket: i, CPUs: node[i], MemoryMiB: 1 << 16})
			if rapid.Bool().Draw(t, "gpu") {
				b.AddGPU(topology.GPU{ID: i, NUMANode: numa.NodeID(i)})
			}
		}
		var reserved numa.CPUSet
		for range rapid.IntRange(0, 3).Draw(t, "reserved") {
			reserved.Add(rapid.IntRange(0, 2*total-1).Draw(t, "reservedCPU"))
		}
		b.SetReservedCPUs(reserved)
		m, err := b.Build()
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		return m
	})
}

// TestEngineAgainstModelOnWideNodes is the property of
// TestEngineAgainstModel on nodes of more than 64 cores, whose CPU
// bookkeeping spans several words per node.
func TestEngineAgainstModelOnWideNodes(t *testing.T) { rapid.Check(t, streamsOn(wideNodes())) }
