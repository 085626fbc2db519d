package topology

import (
	"fmt"
	"testing"

	"github.com/numaplace/numaplace/numa"
)

// largeBuilder returns a builder for a machine of 4 NUMA nodes (two
// sockets, 64 CPUs in SMT pairs each) with gpus GPUs (spread over the
// nodes, eight per PCIe switch, each NVLinked to the next, so as many
// NVLinks as GPUs) and devs RDMA devices.
func largeBuilder(gpus, devs int) *Builder {
	b := NewBuilder("large")
	for n := range 4 {
		cpus := numa.CPUSet{}
		cpus.AddRange(n*64, n*64+63)
		b.AddNode(Node{ID: numa.NodeID(n), Socket: n / 2, CPUs: cpus, MemoryMiB: 1 << 20})
		for c := n * 64; c < n*64+32; c++ {
			b.AddCore(numa.NewCPUSet(c, c+32))
		}
	}
	for g := range gpus {
		b.AddGPU(GPU{ID: g, NUMANode: numa.NodeID(g % 4), PCIeSwitch: fmt.Sprintf("sw%d", g/8),
			UUID: fmt.Sprintf("GPU-%08d", g)})
		if gpus > 1 {
			b.AddNVLink(g, (g+1)%gpus, 1+g%4)
		}
	}
	for d := range devs {
		b.AddDevice(Device{ID: fmt.Sprintf("mlx5_%d", d), Class: "rdma", NUMANode: numa.NodeID(d % 4)})
	}
	return b
}

// cpuBuilder returns a builder for a machine of 64 NUMA nodes holding
// cpus CPUs in SMT pairs.
func cpuBuilder(cpus int) *Builder {
	b := NewBuilder("cpus")
	per := cpus / 64
	for n := range 64 {
		set := numa.CPUSet{}
		set.AddRange(n*per, n*per+per-1)
		b.AddNode(Node{ID: numa.NodeID(n), Socket: n / 32, CPUs: set, MemoryMiB: 1 << 16})
		for c := n * per; c < n*per+per; c += 2 {
			b.AddCore(numa.NewCPUSet(c, c+1))
		}
	}
	return b
}

// BenchmarkBuild measures Builder.Build on large machines: devices100000
// is 100,000 GPUs with 100,000 NVLinks, rdma100000 100,000 RDMA devices,
// cpus16384 the most CPUs a machine may have (MaxCPUs) over 64
// NUMA nodes. Building is O(n log n) in CPUs, devices and NVLinks.
func BenchmarkBuild(b *testing.B) {
	for _, c := range []struct {
		name string
		b    *Builder
	}{
		{"devices100000", largeBuilder(100_000, 0)},
		{"rdma100000", largeBuilder(0, 100_000)},
		{"cpus16384", cpuBuilder(MaxCPUs)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.b.Build(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
