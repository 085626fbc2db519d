package devices_test

import (
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/topology"
)

// nicMachine has three NICs: mlx5_0 and mlx5_1 (two ports of one PCI
// device's functions, told apart by ibdev), and rxe0 without a bus ID.
func nicMachine(t *testing.T) *topology.Machine {
	t.Helper()
	m, err := topology.ParseJSON([]byte(`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-1"}],
		"devices":[{"id":"mlx5_0","class":"rdma","numaNode":0,"busID":"0000:04:00.0"},
		{"id":"mlx5_1","class":"rdma","numaNode":0,"busID":"0000:04:00.0"},
		{"id":"mlx5_2","class":"rdma","numaNode":0,"busID":"0000:05:00.0"},
		{"id":"rxe0","class":"rdma","numaNode":0},
		{"id":"nvme0","class":"nvme","numaNode":0,"busID":"0000:06:00.0"}]}`))
	require.NoError(t, err)
	return m
}

func mknod(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(231, 192))); err != nil {
		t.Skipf("cannot make device nodes here: %v", err)
	}
	require.NoError(t, os.Chmod(path, 0o666))
}

func TestNICs(t *testing.T) {
	m := nicMachine(t)
	sys := fstest.MapFS{
		"sys/bus/pci/devices/0000:04:00.0/infiniband_verbs/uverbs0/ibdev": {Data: []byte("mlx5_0\n")},
		"sys/bus/pci/devices/0000:04:00.0/infiniband_verbs/uverbs1/ibdev": {Data: []byte("mlx5_1\n")},
		"sys/bus/pci/devices/0000:05:00.0/infiniband_verbs/uverbs2/dev":   {Data: []byte("231:194\n")},
	}
	dir := t.TempDir()
	mknod(t, filepath.Join(dir, "infiniband/uverbs0"))
	mknod(t, filepath.Join(dir, "infiniband/uverbs1"))
	n, err := devices.NewNICs(m, dir, sys)
	require.NoError(t, err)
	require.Equal(t, []string{"mlx5_0", "mlx5_1", "mlx5_2", "rxe0"}, n.IDs(), "NICs only, not the NVMe device")
	p, ok := n.Paths("mlx5_1")
	require.True(t, ok)
	require.Equal(t, []string{"/dev/infiniband/uverbs1"}, p)
	p, _ = n.Paths("mlx5_2")
	require.Equal(t, []string{"/dev/infiniband/uverbs2"}, p, "no ibdev file: the PCI device's only NIC")
	require.True(t, n.Present("mlx5_0"))
	require.False(t, n.Present("mlx5_2"), "uverbs2 is missing: unhealthy")
	require.True(t, n.Present("rxe0"), "no node of its own")
	require.False(t, n.Present("mlx5_9"))

	nodes, err := n.For([]string{"mlx5_1", "mlx5_0"})
	require.NoError(t, err)
	require.Equal(t, []devices.Node{
		{Path: "/dev/infiniband/uverbs1", Major: 231, Minor: 192, Mode: 0o666},
		{Path: "/dev/infiniband/uverbs0", Major: 231, Minor: 192, Mode: 0o666},
	}, nodes, "no rdma_cm on this host")
	mknod(t, filepath.Join(dir, "infiniband/rdma_cm"))
	nodes, err = n.For([]string{"mlx5_0"})
	require.NoError(t, err)
	require.Equal(t, []string{"/dev/infiniband/uverbs0", devices.RDMACM}, []string{nodes[0].Path, nodes[1].Path})
	_, err = n.For([]string{"mlx5_2"})
	require.ErrorIs(t, err, devices.ErrNICMissing)
	require.ErrorContains(t, err, "RDMA device mlx5_2: RDMA device node missing: "+filepath.Join(dir, "infiniband/uverbs2"))
	_, err = n.For([]string{"mlx5_9"})
	require.ErrorContains(t, err, "mlx5_9 is not an RDMA device of this machine")
	nodes, err = n.For(nil)
	require.NoError(t, err)
	require.Empty(t, nodes)

	// A malformed entry is an error naming it.
	sys["sys/bus/pci/devices/0000:05:00.0/infiniband_verbs/verbs9/dev"] = &fstest.MapFile{Data: []byte("1:2")}
	_, err = devices.NewNICs(m, dir, sys)
	require.ErrorContains(t, err, "sys/bus/pci/devices/0000:05:00.0/infiniband_verbs/verbs9: not a verbs device name")

	// Without sysfs, no NIC has nodes of its own.
	n, err = devices.NewNICs(m, dir, nil)
	require.NoError(t, err)
	p, _ = n.Paths("mlx5_0")
	require.Empty(t, p)
}
