package deviceplugin_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
)

// TestAllocateWithoutDeviceNodes: with NoDeviceNodes (the NRI role adds
// the nodes) Allocate gives the kubelet's GPUs in the environment only,
// and still refuses a GPU whose device node is missing or unknown.
func TestAllocateWithoutDeviceNodes(t *testing.T) {
	node, devs, devRoot := testNodeDevices(t, "nvidia0", "nvidia1", "nvidia2", "nvidiactl")
	p, err := deviceplugin.New(node, devs, deviceplugin.Options{SocketDir: t.TempDir(), NoDeviceNodes: true,
		HealthInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx := context.Background()

	alloc, err := p.Allocate(ctx, &api.AllocateRequest{ContainerRequests: []*api.ContainerAllocateRequest{
		{DevicesIds: []string{"GPU-b0"}}, {DevicesIds: []string{"GPU-a0", "GPU-a1"}}}})
	require.NoError(t, err)
	require.Len(t, alloc.GetContainerResponses(), 2)
	require.Equal(t, map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-b0"}, alloc.GetContainerResponses()[0].GetEnvs())
	require.Equal(t, map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-a0,GPU-a1"}, alloc.GetContainerResponses()[1].GetEnvs())
	for _, c := range alloc.GetContainerResponses() {
		require.Empty(t, c.GetDevices(), "device nodes in Allocate's answer with NoDeviceNodes")
		require.Empty(t, c.GetMounts())
	}

	// GPU 3 (known by its index) has no device node: refused all the same.
	_, err = p.Allocate(ctx, &api.AllocateRequest{ContainerRequests: []*api.ContainerAllocateRequest{{DevicesIds: []string{"3"}}}})
	require.ErrorContains(t, err, filepath.Join(devRoot, "nvidia3"))
	_, err = p.Allocate(ctx, &api.AllocateRequest{ContainerRequests: []*api.ContainerAllocateRequest{{DevicesIds: []string{"GPU-zz"}}}})
	require.ErrorContains(t, err, `device "GPU-zz" is not a GPU of this node`)
	_, statErr := os.Stat(filepath.Join(devRoot, "nvidia3"))
	require.True(t, os.IsNotExist(statErr))
}
