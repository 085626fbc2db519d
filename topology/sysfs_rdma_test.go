package topology

import (
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// rdmaMachine is twoNodes with a GPU and a ConnectX NIC under one PCIe
// switch on node 0, and a second NIC, whose numa_node is -1, on node 1
// (found by its local CPUs).
func rdmaMachine(t *testing.T) fstest.MapFS {
	t.Helper()
	f := twoNodes()
	f.pci = []fakePCI{
		{path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
		{path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0", vendor: "0x15b3", class: "0x020700", node: "0"},
		{path: "pci0000:80/0000:80:01.0/0000:81:00.0", vendor: "0x15b3", class: "0x020000", node: "-1", local: "4-7,12-15"},
	}
	m := f.fs(t)
	setTree(t, m,
		"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0/infiniband/mlx5_0/node_type = 1: CA",
		"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0/infiniband_verbs/uverbs0/dev = 231:192",
		"sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/infiniband/mlx5_1/node_type = 1: CA",
	)
	return m
}

func TestDiscoverFSRDMA(t *testing.T) {
	m, err := DiscoverFS(rdmaMachine(t))
	require.NoError(t, err)
	require.Equal(t, []Device{
		{ID: "mlx5_0", Class: "rdma", NUMANode: 0, BusID: "0000:04:00.0", PCIeSwitch: "0000:01:00.0"},
		{ID: "mlx5_1", Class: "rdma", NUMANode: 1, BusID: "0000:81:00.0", PCIeSwitch: "0000:80:01.0"},
	}, m.Devices())
	require.Equal(t, 1, m.NumGPUs())
	g, _ := m.GPU(0)
	require.Equal(t, "0000:01:00.0", g.PCIeSwitch, "the GPU and mlx5_0 share the switch")
}

func TestDiscoverFSRDMAWithoutPCIBus(t *testing.T) {
	// Without sys/bus/pci/devices the devices are found by scanning
	// sys/devices/pci*, as for GPUs.
	m := rdmaMachine(t)
	removeTree(m, "sys/bus")
	got, err := DiscoverFS(m)
	require.NoError(t, err)
	require.Len(t, got.Devices(), 2)
	require.Equal(t, "mlx5_0", got.Devices()[0].ID)
}

func TestDiscoverFSRDMAErrors(t *testing.T) {
	const nic = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0"
	tests := []struct {
		name string
		edit func(t *testing.T, m fstest.MapFS)
		want []string
	}{
		{"an infiniband entry that is a file", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, nic+"/infiniband/mlx5_9 = x")
		}, []string{nic + "/infiniband/mlx5_9", "not a directory"}},
		{"infiniband is a file", func(t *testing.T, m fstest.MapFS) {
			removeTree(m, nic+"/infiniband")
			setTree(t, m, nic+"/infiniband = mlx5_0")
		}, []string{nic + "/infiniband", "not a directory"}},
		{"a device name with a blank", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, nic+"/infiniband/mlx5 0/node_type = 1: CA")
		}, []string{nic + "/infiniband/mlx5 0", "not an InfiniBand device name"}},
		{"the same name under two PCI devices", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, "sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0/infiniband/mlx5_0/node_type = 1: CA")
		}, []string{"rdma/mlx5_0", "also listed"}},
		{"garbage numa_node", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, nic+"/numa_node = zero")
		}, []string{nic + "/numa_node", `"zero"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := rdmaMachine(t)
			tc.edit(t, m)
			_, err := DiscoverFS(m)
			require.ErrorIs(t, err, ErrDiscovery)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestValidIBDevName(t *testing.T) {
	for s, want := range map[string]bool{
		"mlx5_0": true, "rxe0": true, "irdma-ens1": true, "": false, "a b": false, "a\tb": false,
		"é": false, fmt.Sprintf("%063d", 0): true, fmt.Sprintf("%064d", 0): false,
	} {
		require.Equal(t, want, validIBDevName(s), "%q", s)
	}
}
