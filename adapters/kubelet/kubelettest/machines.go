package kubelettest

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// Machine16 returns "gpu16": 16 GPUs on 2 NUMA nodes of 2 sockets
// (distance 21), 4 PCIe switches of 4 GPUs (GPUs 4s..4s+3 under sw<s>,
// GPU g on node g/8, UUID GPU-<g>), and NVLinks within each switch: 12
// links between GPUs 2k and 2k+1, 2 between the other pairs.
func Machine16(tb testing.TB) *topology.Machine {
	tb.Helper()
	b := topology.NewBuilder("gpu16").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 31), MemoryMiB: 1 << 18}).
		AddNode(topology.Node{ID: 1, Socket: 1, CPUs: numa.CPURange(32, 63), MemoryMiB: 1 << 18}).
		SetDistances([][]int{{10, 21}, {21, 10}})
	for g := range 16 {
		b.AddGPU(topology.GPU{ID: g, NUMANode: numa.NodeID(g / 8), PCIeSwitch: "sw" + strconv.Itoa(g/4),
			UUID: "GPU-" + strconv.Itoa(g), BusID: fmt.Sprintf("0000:%02x:00.0", 0x10+g)})
	}
	for s := range 4 {
		for a := 4 * s; a < 4*s+4; a++ {
			for c := a + 1; c < 4*s+4; c++ {
				links := 2
				if a%2 == 0 && c == a+1 {
					links = 12
				}
				b.AddNVLink(a, c, links)
			}
		}
	}
	return build(tb, b)
}

// Machine16Worst returns "gpu16-worst": 16 NUMA nodes of one socket at
// equal distance with one GPU each (no switch) and 1+(a*b)%5 NVLinks
// between GPUs a and b, where the device chooser's search reaches its
// budgets.
func Machine16Worst(tb testing.TB) *topology.Machine {
	tb.Helper()
	b := topology.NewBuilder("gpu16-worst")
	for i := range 16 {
		b.AddNode(topology.Node{ID: numa.NodeID(i), Socket: 0, CPUs: numa.NewCPUSet(i)})
	}
	for g := range 16 {
		b.AddGPU(topology.GPU{ID: g, NUMANode: numa.NodeID(g)})
		for c := g + 1; c < 16; c++ {
			b.AddNVLink(g, c, 1+(g*c)%5)
		}
	}
	return build(tb, b)
}

func build(tb testing.TB, b *topology.Builder) *topology.Machine {
	tb.Helper()
	m, err := b.Build()
	if err != nil {
		tb.Fatalf("kubelettest: %v", err)
	}
	return m
}
