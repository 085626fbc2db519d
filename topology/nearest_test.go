package topology_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// TestNearestCPUNode: a node with CPUs is its own nearest; a CPU-less node
// maps to the node with CPUs at the least distance; an unknown node and a
// nil machine have none.
func TestNearestCPUNode(t *testing.T) {
	xm, err := topology.Preset("xeon-max-snc4")
	require.NoError(t, err)
	n, ok := xm.NearestCPUNode(2)
	require.True(t, ok)
	require.Equal(t, numa.NodeID(2), n, "a node with CPUs")
	n, ok = xm.NearestCPUNode(9)
	require.True(t, ok)
	require.Equal(t, numa.NodeID(1), n, "HBM node 9 sits in DDR node 1's quadrant")
	_, ok = xm.NearestCPUNode(topology.UnknownNode)
	require.False(t, ok)
	var none *topology.Machine
	_, ok = none.NearestCPUNode(0)
	require.False(t, ok)

	gb, err := topology.Preset("gb200-tray")
	require.NoError(t, err)
	mem, ok := gb.GPUMemoryNode(2)
	require.True(t, ok)
	n, ok = gb.NearestCPUNode(mem)
	require.True(t, ok)
	require.Equal(t, numa.NodeID(1), n, "GPU 2's memory is on the second Grace socket")
}
