package kubelet

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// On a GB200 tray a GPU pod's cpuset.mems holds its Grace node and its
// GPUs' memory nodes, while its span and reserved memory stay on the Grace
// node; a pod without GPUs gets its span only.
func TestAdmitGraceMems(t *testing.T) {
	m, err := topology.Preset("gb200-tray")
	require.NoError(t, err)
	n, err := Open(m, filepath.Join(t.TempDir(), "cp.json"), NodeOptions{})
	require.NoError(t, err)

	adm, err := n.Admit(withMem(numaPod("gpu", 8, 2, "SingleNUMANode"), "1Gi"))
	require.NoError(t, err)
	require.Len(t, adm.NUMANodes, 1)
	grace := adm.NUMANodes[0]
	want := []numa.NodeID{grace}
	for _, g := range adm.GPUs {
		id, ok := m.GPUMemoryNode(g.ID)
		require.True(t, ok)
		want = append(want, id)
	}
	require.Equal(t, want, adm.MemoryNodes)
	require.Len(t, adm.Allocation.Memory, 1)
	require.Equal(t, grace, adm.Allocation.Memory[0].Node, "the reserved memory is the Grace node's")
	require.Len(t, adm.NUMANodes, 1, "the GPU memory nodes do not widen the span")

	adm, err = n.Admit(numaPod("cpu", 4, 0, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, adm.NUMANodes, adm.MemoryNodes)
}
