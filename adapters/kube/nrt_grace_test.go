package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// unzoned reports whether m has nodes a report gives no zone: GPU memory
// nodes and placeholders.
func unzoned(m *topology.Machine) bool {
	return m.NodesOfKind(topology.NodeGPUMemory)|m.NodesOfKind(topology.NodePlaceholder) != 0
}

// TestNRTGraceZones checks the report of a GB200 tray: zones only for what
// pods can use (the two Grace nodes; no GPU memory node, no placeholder),
// costs between them only, and the whole machine in the topology attribute.
func TestNRTGraceZones(t *testing.T) {
	m := preset(t, "gb200-tray")
	s := allocator.MustNew(m, allocator.Options{})
	_, err := s.Allocate(&allocator.Request{ID: "a", CPUs: 8, GPUs: 2, MemoryMiB: 1024, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	r, err := kube.NRTFromState(m, s)
	require.NoError(t, err)
	require.Len(t, r.Zones, 2)
	for i, z := range r.Zones {
		require.Equal(t, []string{"node-0", "node-1"}[i], z.Name)
		require.Len(t, z.Costs, 2)
		mem, ok := z.Resource(kube.ResourceMemory)
		require.True(t, ok)
		require.Equal(t, kube.NRTQuantity("491520Mi"), mem.Capacity, "the Grace memory only")
		gpu, _ := z.Resource(kube.ResourceAliyunGPU)
		require.Equal(t, kube.NRTQuantity("2"), gpu.Capacity)
	}
	require.Equal(t, int64(40), r.Zones[0].Costs[1].Value)
	gpu, _ := r.Zones[0].Resource(kube.ResourceAliyunGPU)
	require.Equal(t, kube.NRTQuantity("0"), gpu.Available)

	// With the topology attribute the scheduler's view is the whole
	// machine, GPU memory nodes and placeholders included.
	got, err := kube.MachineFromNRT(roundTrip(t, r))
	require.NoError(t, err)
	require.Equal(t, 34, got.NumNodes())
	require.Equal(t, m.NodesOfKind(topology.NodeGPUMemory), got.NodesOfKind(topology.NodeGPUMemory))

	// Without it, a reader sees the nodes pods can use.
	dropAttributes(r, kube.NRTAttributeTopology)
	got, err = kube.MachineFromNRT(roundTrip(t, r))
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{0, 1}, got.NodeIDs())
	require.Equal(t, [][]int{{10, 40}, {40, 10}}, got.Distances().Rows())
	require.Equal(t, map[numa.NodeID][]int{0: {0, 1}, 1: {2, 3}}, gpusPerNode(got))

	// A report whose zones name a GPU memory node is refused.
	r, err = kube.NRTFromState(m, nil)
	require.NoError(t, err)
	z := r.Zones[1]
	z.Name = "node-2"
	r.Zones[1] = z
	_, err = kube.MachineFromNRT(roundTrip(t, r))
	require.ErrorIs(t, err, kube.ErrInvalidNRT)
	require.ErrorContains(t, err, "zone node-2: attribute numaplace.io/topology gives NUMA node 2 no zone (it is a GPU's memory)")
}
