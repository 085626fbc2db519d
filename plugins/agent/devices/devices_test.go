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

func TestGPUs(t *testing.T) {
	m, err := topology.ParseJSON([]byte(`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-1"}],
		"gpus":[{"id":0,"numaNode":0,"busID":"0000:1b:00.0"},{"id":1,"numaNode":0,"busID":"0000:2b:00.0"},{"id":2,"numaNode":0}]}`))
	require.NoError(t, err)
	// The driver numbers GPU 0 as minor 5; GPU 1 has no driver file; GPU 2
	// no bus ID: they keep their index.
	proc := fstest.MapFS{"proc/driver/nvidia/gpus/0000:1b:00.0/information": {Data: []byte("GPU UUID: GPU-x\nDevice Minor: 5\n")}}
	dir := t.TempDir()
	for _, n := range []string{"nvidia5", "nvidiactl"} {
		if err := unix.Mknod(filepath.Join(dir, n), unix.S_IFCHR|0o660, int(unix.Mkdev(195, 7))); err != nil {
			t.Skipf("cannot make device nodes here: %v", err)
		}
		require.NoError(t, os.Chmod(filepath.Join(dir, n), 0o660)) // whatever the umask
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia1"), nil, 0o600)) // not a device

	g, err := devices.New(m, dir, proc)
	require.NoError(t, err)
	require.Equal(t, []string{"/dev/nvidia5", "/dev/nvidia1", "/dev/nvidia2"}, g.Paths())
	require.True(t, g.Present(0))
	require.False(t, g.Present(1), "a regular file is not a device node")
	require.False(t, g.Present(2))
	require.False(t, g.Present(9))

	nodes, err := g.For([]int{0})
	require.NoError(t, err)
	require.Equal(t, []devices.Node{
		{Path: "/dev/nvidia5", Major: 195, Minor: 7, Mode: 0o660},
		{Path: "/dev/nvidiactl", Major: 195, Minor: 7, Mode: 0o660},
	}, nodes)
	nodes, err = g.For(nil)
	require.NoError(t, err)
	require.Empty(t, nodes)
	_, err = g.For([]int{0, 1})
	require.ErrorIs(t, err, devices.ErrMissing)
	require.ErrorContains(t, err, "GPU 1: GPU device node missing: "+filepath.Join(dir, "nvidia1")+" is not a character device")
	_, err = g.For([]int{7})
	require.ErrorContains(t, err, "GPU 7 is not a GPU of this machine")

	// A driver file that cannot be read as the driver writes it.
	proc["proc/driver/nvidia/gpus/0000:2b:00.0/information"] = &fstest.MapFile{Data: []byte("Device Minor: x\n")}
	_, err = devices.New(m, dir, proc)
	require.ErrorContains(t, err, "GPU 1: ")
	require.ErrorIs(t, err, topology.ErrDiscovery)

	require.True(t, devices.IsGPUNode("/dev/nvidia12"))
	require.False(t, devices.IsGPUNode("/dev/nvidiactl"))
	require.False(t, devices.IsGPUNode("/dev/nvidia-uvm"))
}
