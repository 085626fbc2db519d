package devchoice_test

import (
	"fmt"

	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// One GPU and one RDMA NIC on a node with two PCIe switches, each with a
// GPU and a NIC, and the NIC of sw0 taken: the chooser pairs GPU 1 with
// mlx5_1 under sw1 rather than take the lowest GPU.
func ExampleChooser_Choose() {
	b := topology.NewBuilder("pairs").AddNode(topology.Node{ID: 0, CPUs: numa.CPURange(0, 7)})
	for i, sw := range []string{"sw0", "sw1"} {
		b.AddGPU(topology.GPU{ID: i, NUMANode: 0, PCIeSwitch: sw})
		b.AddDevice(topology.Device{ID: fmt.Sprintf("mlx5_%d", i), Class: "rdma", NUMANode: 0, PCIeSwitch: sw})
	}
	m, err := b.Build()
	if err != nil {
		panic(err)
	}
	x, err := devchoice.NewIndex(m)
	if err != nil {
		panic(err)
	}
	rdma, _ := x.Class("rdma")
	gpus, nics := devchoice.NewSet(x.Len(0)), devchoice.NewSet(x.Len(rdma))
	gpus.Add(0)
	gpus.Add(1)
	nics.Add(1) // mlx5_0 is taken
	res, err := x.NewChooser().Choose(&devchoice.Request{Nodes: m.AllNodes(), Wants: []devchoice.Want{
		{Class: 0, Count: 1, Free: gpus},
		{Class: rdma, Count: 1, Free: nics},
	}})
	if err != nil {
		panic(err)
	}
	for i := range res.Devices(0).All() {
		fmt.Println("GPU", x.ID(0, i))
	}
	for i := range res.Devices(1).All() {
		fmt.Println("NIC", x.ID(rdma, i))
	}
	fmt.Printf("%d unpaired, %d switch\n", res.Rank.Unpaired, res.Rank.Switches)
	// Output:
	// GPU 1
	// NIC mlx5_1
	// 0 unpaired, 1 switch
}
