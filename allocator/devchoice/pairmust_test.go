package devchoice_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// TestPairsWithMustIncludeNIC: two GPUs and one NIC that must be included
// (mlx5_2, under switch s2). GPUs 4 and 5 share the node's undescribed
// switch, where a free NIC (mlx5_5) lies too, and GPU 4 must be included;
// GPU 6 is under s2. Only [4 6] pairs the NIC (Unpaired 0): the NIC under
// the undescribed switch cannot be chosen, since the one NIC asked for is
// the must-include one. The pair potential once counted that NIC and
// chose [4 5] (found by TestChooseAgainstBruteForce at 20,000 checks).
func TestPairsWithMustIncludeNIC(t *testing.T) {
	b := topology.NewBuilder("pair-must").AddNode(topology.Node{ID: 0, CPUs: numa.CPURange(0, 7)})
	gpuSwitch := []string{"s0", "", "", "", "", "", "s2"}
	for id, sw := range gpuSwitch {
		b.AddGPU(topology.GPU{ID: id, NUMANode: 0, PCIeSwitch: sw})
	}
	for d := range 6 {
		sw := ""
		if d == 2 {
			sw = "s2"
		}
		b.AddDevice(topology.Device{ID: fmt.Sprintf("mlx5_%d", d), Class: "rdma", NUMANode: 0, PCIeSwitch: sw})
	}
	m, err := b.Build()
	require.NoError(t, err)
	x, err := devchoice.NewIndex(m)
	require.NoError(t, err)
	rdma, ok := x.Class("rdma")
	require.True(t, ok)
	gpus, gpuMust := devchoice.NewSet(x.Len(0)), devchoice.NewSet(x.Len(0))
	for _, g := range []int{4, 5, 6} {
		gpus.Add(g)
	}
	gpuMust.Add(4)
	nics, nicMust := devchoice.NewSet(x.Len(rdma)), devchoice.NewSet(x.Len(rdma))
	nics.Add(2)
	nics.Add(5)
	nicMust.Add(2)
	res, err := x.NewChooser().Choose(&devchoice.Request{Nodes: m.AllNodes(), Wants: []devchoice.Want{
		{Class: 0, Count: 2, Free: gpus, Must: gpuMust},
		{Class: rdma, Count: 1, Free: nics, Must: nicMust},
	}})
	require.NoError(t, err)
	require.Equal(t, []int{4, 6}, res.Devices(0).AppendTo(nil))
	require.Equal(t, []int{2}, res.Devices(1).AppendTo(nil))
	require.Zero(t, res.Rank.Unpaired)
}

// TestOtherClassFirst: a request of two classes other than GPUs, the
// first with a must-include device whose index is above the machine's
// GPU count, through the exact enumeration (count 9 of 10) and the greedy
// choice (count 5): both once indexed the GPUs' working memory with it and
// panicked. The choice is the brute force's.
func TestOtherClassFirst(t *testing.T) {
	b := topology.NewBuilder("other-first").AddNode(topology.Node{ID: 0, CPUs: numa.CPURange(0, 7)})
	for id := range 3 {
		b.AddGPU(topology.GPU{ID: id, NUMANode: 0})
	}
	b.AddNVLink(0, 1, 2)
	for d := range 10 {
		b.AddDevice(topology.Device{ID: fmt.Sprintf("mlx5_%d", d), Class: "rdma", NUMANode: 0, PCIeSwitch: fmt.Sprint("s", d%2)})
	}
	for d := range 2 {
		b.AddDevice(topology.Device{ID: fmt.Sprintf("nvme%d", d), Class: "nvme", NUMANode: 0, PCIeSwitch: fmt.Sprint("s", d)})
	}
	m, err := b.Build()
	require.NoError(t, err)
	x, err := devchoice.NewIndex(m)
	require.NoError(t, err)
	names, devs := refClasses(m)
	rdma, nvme := slices.Index(names, "rdma"), slices.Index(names, "nvme")
	for _, count := range []int{9, 5} {
		wants := []refWant{
			{class: rdma, count: count, free: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, must: []int{7}},
			{class: nvme, count: 1, free: []int{0, 1}},
		}
		res, err := x.NewChooser().Choose(&devchoice.Request{Nodes: m.AllNodes(), Wants: []devchoice.Want{
			{Class: rdma, Count: count, Free: toSet(10, wants[0].free), Must: toSet(10, wants[0].must)},
			{Class: nvme, Count: 1, Free: toSet(2, wants[1].free)},
		}})
		require.NoError(t, err)
		best, rank := refBest(m, devs, wants, func(int) bool { return true })
		require.Equal(t, rank, res.Rank, "count %d", count)
		require.Equal(t, best[0], res.Devices(0).AppendTo(nil), "count %d", count)
		require.Equal(t, best[1], res.Devices(1).AppendTo(nil), "count %d", count)
	}
}
