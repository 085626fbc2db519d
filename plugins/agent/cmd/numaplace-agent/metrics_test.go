package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/topology"
)

// TestServeMetrics: --metrics-address serves the device plugin's
// counters in Prometheus' text format on /metrics until the context ends.
func TestServeMetrics(t *testing.T) {
	m, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	devs, err := devices.New(m, t.TempDir(), nil)
	require.NoError(t, err)
	dp, err := deviceplugin.New(node, devs, deviceplugin.Options{SocketDir: t.TempDir(), HealthInterval: -1})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := "127.0.0.1:" + strconv.Itoa(freeTCPPort(t))
	require.NoError(t, serveMetrics(ctx, addr, dp, slog.New(slog.DiscardHandler)))
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "text/plain; version=0.0.4; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, string(body), "# TYPE numaplace_agent_gpu_allocations_total counter\n")
	require.Contains(t, string(body), `numaplace_agent_gpu_allocations_total{result="refused"} 0`+"\n")
	require.Error(t, serveMetrics(ctx, addr, dp, slog.New(slog.DiscardHandler)), "the address is taken")
	cancel()
	require.Eventually(t, func() bool {
		_, err := http.Get("http://" + addr + "/metrics")
		return err != nil
	}, 10*time.Second, 20*time.Millisecond, "still served after the context ended")
}
