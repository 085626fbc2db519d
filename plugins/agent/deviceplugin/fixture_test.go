package deviceplugin_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/topology"
)

// testNodeDevices opens a node state of testMachine and its devices over a
// device root that has stand-in character device nodes of the given names
// (every GPU's and nvidiactl when none are given); it skips the test where
// mknod is not allowed. It returns the node, the devices and the root.
func testNodeDevices(t *testing.T, nodes ...string) (*kubelet.Node, *devices.GPUs, string) {
	t.Helper()
	m, err := topology.ParseJSON([]byte(testMachine))
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	if len(nodes) == 0 {
		nodes = []string{"nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl"}
	}
	devRoot := t.TempDir()
	for _, n := range nodes {
		if err := unix.Mknod(filepath.Join(devRoot, n), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Skipf("cannot make stand-in device nodes here (mknod needs CAP_MKNOD): %v", err)
		}
	}
	devs, err := devices.New(m, devRoot, nil)
	require.NoError(t, err)
	return node, devs, devRoot
}
