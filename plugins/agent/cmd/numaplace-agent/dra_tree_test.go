package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/topology"
)

// TestDRAFakeTree checks the DRA tests' fake sysfs tree as discovery
// reads it: the four GPUs and two RDMA NICs on their NUMA nodes, each
// under the PCIe switch fakePCIePaths gives it (GPU 1 with mlx5_0, GPU 3
// with mlx5_1, GPUs 0 and 2 alone), so that the DRA scenarios' expected
// allocations follow from the tree.
func TestDRAFakeTree(t *testing.T) {
	m, err := topology.DiscoverFS(os.DirFS(fakeSysfsWithNICs(t, t.TempDir(), fakeGPUs, fakeNICs)))
	require.NoError(t, err)
	require.Len(t, m.GPUs(), len(fakeGPUs))
	for i, g := range m.GPUs() {
		want := fakeGPUs[i]
		require.Equal(t, []any{want.bus, want.node, want.uuid, fakePCIeSwitch(t, want.bus)},
			[]any{g.BusID, int(g.NUMANode), g.UUID, g.PCIeSwitch}, "GPU %d", i)
	}
	var nics []topology.Device
	for _, d := range m.Devices() {
		if d.Class == "rdma" {
			nics = append(nics, d)
		}
	}
	require.Len(t, nics, len(fakeNICs))
	for i, d := range nics {
		want := fakeNICs[i]
		require.Equal(t, []any{want.ibdev, want.bus, want.node, fakePCIeSwitch(t, want.bus)},
			[]any{d.ID, d.BusID, int(d.NUMANode), d.PCIeSwitch}, "NIC %d", i)
	}
	require.Equal(t, "0000:30:00.0", fakePCIeSwitch(t, fakeGPUs[1].bus))
	require.Equal(t, fakePCIeSwitch(t, fakeGPUs[1].bus), fakePCIeSwitch(t, fakeNICs[0].bus))
	require.Equal(t, fakePCIeSwitch(t, fakeGPUs[3].bus), fakePCIeSwitch(t, fakeNICs[1].bus))
}
