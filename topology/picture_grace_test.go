package topology_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// TestPictureGrace checks how the picture shows the kinds of CPU-less node:
// a GPU's memory says whose, bare placeholders share one line, and a
// placeholder holding a device is shown as a node.
func TestPictureGrace(t *testing.T) {
	var sb strings.Builder
	require.NoError(t, mustPreset(t, "gb200-tray").Picture(&sb, nil))
	out := sb.String()
	require.True(t, strings.HasPrefix(out, "gb200-tray: 2 sockets, 34 NUMA nodes (2 with CPUs, 4 of GPU memory, 28 placeholders),\n"))
	require.Contains(t, out, "\n  node 18: 186 GiB, no CPUs: GPU 2's memory (not pod memory)\n")
	require.Contains(t, out, "\nNUMA placeholders (no CPUs, no memory): 3-9,11-17,19-25,27-33\n")

	m, err := topology.NewBuilder("p").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 1024}).
		AddNode(topology.Node{ID: 1, Socket: -1}).
		AddNode(topology.Node{ID: 2, Socket: -1}).
		AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: 2}).
		Build()
	require.NoError(t, err)
	sb.Reset()
	require.NoError(t, m.Picture(&sb, nil))
	require.Contains(t, sb.String(), "\n  node 2: 0 MiB, no CPUs, no memory (placeholder)\n")
	require.Contains(t, sb.String(), "\nNUMA placeholders (no CPUs, no memory): 1\n")
}
