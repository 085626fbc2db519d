package allocator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

// TestUnhealthy: State.Unhealthy lists the devices marked unhealthy as the
// snapshot does, and nothing once they are healthy again.
func TestUnhealthy(t *testing.T) {
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	s := allocator.MustNew(m, allocator.Options{})
	require.Nil(t, s.Unhealthy())
	for _, id := range []string{"5", "3"} {
		_, err := s.SetDeviceHealth(allocator.GPUClass, id, false)
		require.NoError(t, err)
	}
	require.Equal(t, map[string][]string{allocator.GPUClass: {"3", "5"}}, s.Unhealthy())
	require.Equal(t, s.Snapshot().Unhealthy, s.Unhealthy())
	for _, id := range []string{"3", "5"} {
		_, err := s.SetDeviceHealth(allocator.GPUClass, id, true)
		require.NoError(t, err)
	}
	require.Nil(t, s.Unhealthy())
	require.Nil(t, (*allocator.State)(nil).Unhealthy())
}
