package deviceplugin_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
)

// TestClaimedGPUs: the GPUs a ResourceClaim holds (the DRA role) are not
// preferred, and a pod given one is refused, the claim named.
func TestClaimedGPUs(t *testing.T) {
	node, devs, _ := testNodeDevices(t)
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
