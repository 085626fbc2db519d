package devchoice_test

import (
	"fmt"
	"testing"

	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// pairedMachine is two NUMA nodes of four PCIe switches each, every switch
// with four GPUs and two RDMA NICs, and NVLinks of 1 to 3 between GPUs
// (more within a switch), so that choices of GPUs differ by their links.
func pairedMachine(b *testing.B) *topology.Machine {
	bl := topology.NewBuilder("paired")
	for n := range 2 {
		bl.AddNode(topology.Node{ID: numa.NodeID(n), Socket: n, CPUs: numa.CPURange(n*8, n*8+7)})
	}
	bl.SetDistances([][]int{{10, 20}, {20, 10}})
	for g := range 32 {
		bl.AddGPU(topology.GPU{ID: g, NUMANode: numa.NodeID(g / 16), PCIeSwitch: fmt.Sprint("sw", g/4)})
	}
	for a := range 32 {
		for c := a + 1; c < 32 && c/16 == a/16; c++ {
			l := 1 + (a+c)%2
			if a/4 == c/4 {
				l = 3
			}
			bl.AddNVLink(a, c, l)
		}
	}
	for d := range 16 {
		bl.AddDevice(topology.Device{ID: fmt.Sprintf("mlx5_%02d", d), Class: "rdma", NUMANode: numa.NodeID(d / 8), PCIeSwitch: fmt.Sprint("sw", d/2)})
	}
	m, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkChoosePaired measures one joint choice of GPUs and RDMA NICs
// (the general path's switch and device levels, with its pair count): on
// an empty dgx-a100 (one NIC under each GPU's switch) and on pairedMachine,
// where 8 GPUs out of a node's 16 take the greedy choice.
func BenchmarkChoosePaired(b *testing.B) {
	a100, err := topology.Preset("dgx-a100")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		m          *topology.Machine
		gpus, nics int
	}{
		{"dgx-a100/gpus4-nics2", a100, 4, 2},
		{"paired/gpus8-nics4", pairedMachine(b), 8, 4},
		{"paired/gpus12-nics6", pairedMachine(b), 12, 6},
	} {
		b.Run(c.name, func(b *testing.B) {
			x, err := devchoice.NewIndex(c.m)
			if err != nil {
				b.Fatal(err)
			}
			nic, _ := x.Class("rdma")
			wants := []devchoice.Want{{Class: 0, Count: c.gpus}, {Class: nic, Count: c.nics}}
			for k := range wants {
				n := x.Len(wants[k].Class)
				wants[k].Free = devchoice.NewSet(n)
				for i := range n {
					wants[k].Free.Add(i)
				}
			}
			ch := x.NewChooser()
			req := &devchoice.Request{Nodes: c.m.AllNodes(), Wants: wants}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ch.Choose(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
