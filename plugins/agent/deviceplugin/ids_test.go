package deviceplugin_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
)

// The plugin reads a GPU index from the kubelet as the allocator reads it
// (allocator.CanonicalDeviceID): "+3", "03" and "0000000003" are GPU 3 in
// GetPreferredAllocation and Allocate, as "3" is; other spellings are
// refused, naming the ID.
func TestPluginCanonicalGPUIDs(t *testing.T) {
	node, devs, _ := testNodeDevices(t)
	p, err := deviceplugin.New(node, devs, deviceplugin.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx := context.Background()
	for _, id := range []string{"3", "03", "+3", "0000000003", "+0003"} {
		resp, err := p.GetPreferredAllocation(ctx, &api.PreferredAllocationRequest{ContainerRequests: []*api.ContainerPreferredAllocationRequest{
			{AvailableDeviceIDs: []string{"GPU-a0", "GPU-b0", id}, MustIncludeDeviceIDs: []string{id}, AllocationSize: 2}}})
		require.NoError(t, err, id)
		require.Equal(t, []string{"GPU-b0", id}, resp.GetContainerResponses()[0].GetDeviceIDs(), id)

		ar, err := p.Allocate(ctx, &api.AllocateRequest{ContainerRequests: []*api.ContainerAllocateRequest{{DevicesIds: []string{id, "+0"}}}})
		require.NoError(t, err, id)
		c := ar.GetContainerResponses()[0]
		require.Equal(t, "3,GPU-a0", c.GetEnvs()[kubelet.EnvVisibleDevices], id)
		require.Equal(t, "/dev/nvidia3", c.GetDevices()[0].GetContainerPath(), id)
		require.Equal(t, "/dev/nvidia0", c.GetDevices()[1].GetContainerPath(), id)
	}
	for _, id := range []string{"-3", "0x3", " 3", "3 ", "٣", "GPU-A0"} {
		_, err := p.Allocate(ctx, &api.AllocateRequest{ContainerRequests: []*api.ContainerAllocateRequest{{DevicesIds: []string{id}}}})
		require.ErrorContains(t, err, "is not a GPU of this node", id)
		_, err = p.GetPreferredAllocation(ctx, &api.PreferredAllocationRequest{ContainerRequests: []*api.ContainerPreferredAllocationRequest{
			{AvailableDeviceIDs: []string{"GPU-a0", id}, AllocationSize: 1}}})
		require.ErrorContains(t, err, "is not a GPU of this machine", id)
	}
}
