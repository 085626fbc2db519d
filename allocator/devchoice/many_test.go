package devchoice_test

import (
	"testing"

	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// Many must-include GPUs on a machine of more than 64 GPUs, with NVLinks
// that tell the choices apart: the exact enumeration of the rest (few
// combinations) goes only down branches that complete a combination, so
// the must-include devices among the candidates do not multiply its work.
func TestManyMustIncludeExact(t *testing.T) {
	b := topology.NewBuilder("many").AddNode(topology.Node{ID: 0, CPUs: numa.NewCPUSet(0)})
	const n = 80
	for g := range n {
		b.AddGPU(topology.GPU{ID: g, NUMANode: 0, PCIeSwitch: "s"})
	}
	for g := range n {
		for h := g + 1; h < n; h++ {
			b.AddNVLink(g, h, 1+(g*h)%3)
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	x, _ := devchoice.NewIndex(m)
	free, must := devchoice.NewSet(n), devchoice.NewSet(n)
	for g := range 50 {
		free.Add(g)
		if g%3 == 1 {
			must.Add(g) // 17 must-include GPUs among the 50 free
		}
	}
	c := x.NewChooser()
	res, err := c.Choose(&devchoice.Request{Nodes: m.AllNodes(), Wants: []devchoice.Want{{Class: 0, Count: 49, Free: free, Must: must}}})
	if err != nil {
		t.Fatal(err)
	}
	got := res.Devices(0)
	if got.Len() != 49 {
		t.Fatalf("%d GPUs chosen, want 49", got.Len())
	}
	for g := range must.All() {
		if !got.Has(g) {
			t.Fatalf("must-include GPU %d not chosen", g)
		}
	}
}
