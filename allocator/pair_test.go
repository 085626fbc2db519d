package allocator_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// pairMachine is one NUMA node with two PCIe switches, each holding one
// GPU and one RDMA NIC: GPU 0 and mlx5_0 under sw0, GPU 1 and mlx5_1 under
// sw1.
func pairMachine(t *testing.T) *topology.Machine {
	t.Helper()
	b := topology.NewBuilder("pairs").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 7), MemoryMiB: 1 << 16})
	for i := range 2 {
		sw := "sw" + strconv.Itoa(i)
		b.AddGPU(topology.GPU{ID: i, NUMANode: 0, PCIeSwitch: sw})
		b.AddDevice(topology.Device{ID: "mlx5_" + strconv.Itoa(i), Class: "rdma", NUMANode: 0, PCIeSwitch: sw})
	}
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// TestGPUAndNICShareASwitch: with mlx5_0 taken, a 1 GPU + 1 NIC request
// gets GPU 1 and mlx5_1 under sw1 (GPUDirect RDMA), not GPU 0 (the lowest
// ID, which GPUs chosen alone would take) with the NIC of another switch;
// and with both NICs free, each of two such requests gets a same-switch
// pair.
func TestGPUAndNICShareASwitch(t *testing.T) {
	s := allocator.MustNew(pairMachine(t), allocator.Options{})
	nic, err := s.Allocate(&allocator.Request{ID: "nic", CPUs: 1, Devices: map[string]int{"rdma": 1}})
	require.NoError(t, err)
	require.Equal(t, []string{"mlx5_0"}, nic.Devices["rdma"])
	pair, err := s.Allocate(&allocator.Request{ID: "pair", CPUs: 1, GPUs: 1, Devices: map[string]int{"rdma": 1}})
	require.NoError(t, err)
	require.Equal(t, []int{1}, pair.GPUs, "the GPU under the switch of the free NIC")
	require.Equal(t, []string{"mlx5_1"}, pair.Devices["rdma"])

	s = allocator.MustNew(pairMachine(t), allocator.Options{})
	for i := range 2 {
		a, err := s.Allocate(&allocator.Request{ID: "p" + strconv.Itoa(i), CPUs: 1, GPUs: 1, Devices: map[string]int{"rdma": 1}})
		require.NoError(t, err)
		require.Equal(t, []int{i}, a.GPUs)
		require.Equal(t, []string{"mlx5_" + strconv.Itoa(i)}, a.Devices["rdma"])
	}
}

// pairRandomMachine draws a machine of 1-3 NUMA nodes with GPUs and RDMA
// NICs under a few switches per node (some devices without a switch).
func pairRandomMachine(t *rapid.T) *topology.Machine {
	nodes := rapid.IntRange(1, 3).Draw(t, "nodes")
	b := topology.NewBuilder("random-pairs")
	for n := range nodes {
		b.AddNode(topology.Node{ID: numa.NodeID(n), Socket: n / 2, CPUs: numa.CPURange(8*n, 8*n+7), MemoryMiB: 1 << 16})
	}
	sw := func(label string) string {
		s := rapid.IntRange(-1, 3).Draw(t, label)
		if s < 0 {
			return ""
		}
		return "sw" + strconv.Itoa(s)
	}
	for g := range rapid.IntRange(1, 8).Draw(t, "gpus") {
		n := rapid.IntRange(0, nodes-1).Draw(t, "gpuNode")
		s := sw("gpuSwitch")
		if s != "" {
			s = fmt.Sprintf("n%d-%s", n, s)
		}
		b.AddGPU(topology.GPU{ID: g, NUMANode: numa.NodeID(n), PCIeSwitch: s})
	}
	for d := range rapid.IntRange(1, 8).Draw(t, "nics") {
		n := rapid.IntRange(0, nodes-1).Draw(t, "nicNode")
		s := sw("nicSwitch")
		if s != "" {
			s = fmt.Sprintf("n%d-%s", n, s)
		}
		b.AddDevice(topology.Device{ID: fmt.Sprintf("mlx5_%d", d), Class: "rdma", NUMANode: numa.NodeID(n), PCIeSwitch: s})
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestGPUAndNICPairWheneverPossible: on random machines with random
// allocations in place, a SingleNUMANode request for 1 GPU and 1 NIC gets
// a GPU and a NIC under one PCIe switch (one named switch, or both without
// a described switch on that node, which count as one) whenever its NUMA
// node has a named switch with both a free GPU and a free NIC.
func TestGPUAndNICPairWheneverPossible(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := pairRandomMachine(t)
		s := allocator.MustNew(m, allocator.Options{})
		for i := range rapid.IntRange(0, 4).Draw(t, "before") {
			r := &allocator.Request{ID: "x" + strconv.Itoa(i), CPUs: 1, Policy: policy.None,
				GPUs: rapid.IntRange(0, 2).Draw(t, "xGPUs"), Devices: map[string]int{"rdma": rapid.IntRange(0, 2).Draw(t, "xNICs")}}
			_, _ = s.Allocate(r) // a refusal leaves the state as it was
		}
		held := map[string]bool{}
		for _, a := range s.Live() {
			for _, g := range a.GPUs {
				held["gpu"+strconv.Itoa(g)] = true
			}
			for _, d := range a.Devices["rdma"] {
				held[d] = true
			}
		}
		a, err := s.Allocate(&allocator.Request{ID: "pair", CPUs: 1, GPUs: 1, Devices: map[string]int{"rdma": 1},
			Policy: policy.SingleNUMANode, Exclusive: policy.Preferred})
		if err != nil {
			return
		}
		node := a.NUMANodes()[0]
		freeGPU, freeNIC := map[string]bool{}, map[string]bool{}
		for _, g := range m.GPUs() {
			if g.NUMANode == node && g.PCIeSwitch != "" && !held["gpu"+strconv.Itoa(g.ID)] {
				freeGPU[g.PCIeSwitch] = true
			}
		}
		for _, d := range m.Devices() {
			if d.NUMANode == node && d.PCIeSwitch != "" && !held[d.ID] {
				freeNIC[d.PCIeSwitch] = true
			}
		}
		possible := false
		for sw := range freeGPU {
			possible = possible || freeNIC[sw]
		}
		if !possible {
			return
		}
		g, _ := m.GPU(a.GPUs[0])
		i := slices.IndexFunc(m.Devices(), func(d topology.Device) bool { return d.ID == a.Devices["rdma"][0] })
		require.Equal(t, g.PCIeSwitch, m.Devices()[i].PCIeSwitch, "GPU %d and %s on NUMA node %d: a same-switch pair was free", g.ID, m.Devices()[i].ID, node)
	})
}
