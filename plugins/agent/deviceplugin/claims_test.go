package deviceplugin_test

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/topology"
)

// TestClaimedGPUs: the GPUs a ResourceClaim holds (the DRA role) are not
// preferred, and a pod given one is refused, the claim named.
func TestClaimedGPUs(t *testing.T) {
	m, err := topology.ParseJSON([]byte(testMachine))
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	devRoot := t.TempDir()
	for _, n := range []string{"nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl"} {
		if err := unix.Mknod(filepath.Join(devRoot, n), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Skipf("cannot make stand-in device nodes here (mknod needs CAP_MKNOD): %v", err)
		}
	}
	devs, err := devices.New(m, devRoot, nil)
	require.NoError(t, err)
	pods := &fakePods{pods: []deviceplugin.PodInfo{gpuPodInfo("plain", 0, nil, 1)}}
	kl := &fakeKubelet{}
	p, err := deviceplugin.New(node, devs, deviceplugin.Options{SocketDir: t.TempDir(), NoDeviceNodes: true, HealthInterval: -1,
		Logger: slog.New(slog.DiscardHandler), Pods: pods, KubeletPods: kl, Events: &recordedEvents{}})
	require.NoError(t, err)
	require.NoError(t, node.HoldClaim(kubelet.ClaimHold{UID: "c1", Namespace: "team", Name: "gpus", GPUs: []int{0, 1, 3}}))

	kl.admitting("plain")
	require.Equal(t, []string{"GPU-b0"}, prefer(t, p, 1, allGPUs...), "the one GPU no claim holds")
	err = allocate(p, "GPU-a1")
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	require.ErrorContains(t, err, "GPU 1 (GPU-a1) is held by ResourceClaim team/gpus")
}
