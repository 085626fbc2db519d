package deviceplugin_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/topology"
)

// TestOnlySomeGPUs: with Options.GPUs the plugin advertises those GPUs
// only (the DRA role serves the others).
func TestOnlySomeGPUs(t *testing.T) {
	m, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	devs, err := devices.New(m, "/dev", nil)
	require.NoError(t, err)
	p, err := deviceplugin.New(node, devs, deviceplugin.Options{Logger: slog.New(slog.DiscardHandler), GPUs: []int{6, 2, 7}})
	require.NoError(t, err)
	var ids []string
	for _, d := range p.Devices() {
		ids = append(ids, d.ID)
	}
	require.Equal(t, []string{"2", "6", "7"}, ids)
	_, err = p.SetHealth(2, false)
	require.NoError(t, err)
	require.Equal(t, "Unhealthy", p.Devices()[0].GetHealth())
	_, err = p.SetHealth(0, false)
	require.ErrorContains(t, err, "GPU 0 is not one this plugin serves")

	_, err = deviceplugin.New(node, devs, deviceplugin.Options{GPUs: []int{8}})
	require.ErrorContains(t, err, "GPU 8 is not a GPU of this machine")
}
