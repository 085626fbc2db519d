package nri_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/stretchr/testify/require"
)

// pluginCount reports the number of plugins the runtime side has
// synchronised with.
type pluginCount struct{ c chan int }

var _ adaptation.Metrics = pluginCount{}

func (m pluginCount) RecordPluginInvocation(string, string, error)      {}
func (m pluginCount) RecordPluginLatency(string, string, time.Duration) {}
func (m pluginCount) RecordPluginAdjustments(string, string, *adaptation.ContainerAdjustment, int, int) {
}
func (m pluginCount) UpdatePluginCount(n int) {
	select {
	case m.c <- n:
	default: // nobody waits any more
	}
}

// TestEndToEndThroughNRI runs the plugin in the real NRI stub against the
// runtime side of NRI (containerd's adaptation library) over a unix
// socket: the protocol containerd speaks, without containerd.
func TestEndToEndThroughNRI(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "nri.sock")
	if len(sock) > 100 { // a unix socket path has at most 107 bytes
		short, err := os.MkdirTemp("/tmp", "nri-e2e-")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(short) })
		sock = filepath.Join(short, "nri.sock")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// What runs when the plugin connects: a shared-pool pod.
	web := sharedPod("sb-web", "web")
	var mu sync.Mutex
	var syncUpdates []*api.ContainerUpdate
	syncFn := func(ctx context.Context, cb adaptation.SyncCB) error {
		up, err := cb(ctx, []*api.PodSandbox{web}, []*api.Container{ctr("w1", web, "0-15", "0-1")})
		mu.Lock()
		syncUpdates = up
		mu.Unlock()
		return err
	}
	unsolicited := make(chan []*api.ContainerUpdate, 16)
	updateFn := func(_ context.Context, up []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
		unsolicited <- up
		return nil, nil
	}
	count := pluginCount{c: make(chan int, 4)}
	r, err := adaptation.New("containerd", "v2.1.0", syncFn, updateFn,
		adaptation.WithSocketPath(sock),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf.d")),
		adaptation.WithMetrics(count))
	require.NoError(t, err)
	if err := r.Start(); err != nil {
		t.Skipf("skipping the end-to-end NRI test: the runtime side cannot listen on the unix socket %s here: %v", sock, err)
	}
	defer r.Stop()

	e := newPlugin(t, filepath.Join(dir, "checkpoint.json"))
	s, err := stub.New(e.p, stub.WithPluginName("numaplace"), stub.WithPluginIdx("10"), stub.WithSocketPath(sock))
	require.NoError(t, err)
	e.p.SetUpdater(s)
	require.NoError(t, s.Start(ctx))
	defer s.Stop()
	for synced := false; !synced; {
		select {
		case n := <-count.c: // 0 when the runtime side starts, 1 once the plugin is in
			synced = n == 1
		case <-ctx.Done():
			t.Fatal("the plugin did not synchronise with the runtime")
		}
	}
	mu.Lock()
	require.Empty(t, syncUpdates, "the shared container already has the shared pool")
	mu.Unlock()
	require.Equal(t, map[string]string{"default/web": "shared"}, admitted(e.p))

	// An exclusive pod: the shared container is moved off its CPUs through
	// an unsolicited update, and its container gets the decision.
	x := numaPod("sb-x", "x", decision("0-3", []int{0}, 0, 1))
	require.NoError(t, r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: x}))
	select {
	case up := <-unsolicited:
		require.Equal(t, map[string]string{"w1": "4-15"}, updated(up))
	case <-ctx.Done():
		t.Fatal("no unsolicited update of the shared container")
	}
	rsp, err := r.CreateContainer(ctx, &api.CreateContainerRequest{Pod: x, Container: ctr("x1", x, "", "")})
	require.NoError(t, err)
	cpus, mems := cpuset(rsp.GetAdjust())
	require.Equal(t, "0-3", cpus)
	require.Equal(t, "0", mems)
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-a0,GPU-a1"}, envOf(rsp.GetAdjust()))

	// A conflicting decision is refused through the protocol, with the
	// conflict named.
	y := numaPod("sb-y", "y", decision("3-4", []int{0}, 1))
	err = r.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: y})
	require.ErrorContains(t, err, "CPU 3 is held by pod default/x")
	require.ErrorContains(t, err, "GPU 1 is held by pod default/x")
	require.Len(t, e.events.list(), 1)

	// The exclusive pod leaves: the shared container gets its CPUs back.
	require.NoError(t, r.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: x}))
	select {
	case up := <-unsolicited:
		require.Equal(t, map[string]string{"w1": "0-15"}, updated(up))
	case <-ctx.Done():
		t.Fatal("no unsolicited update after the exclusive pod left")
	}
	require.NoError(t, r.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: x}))
	require.Equal(t, map[string]string{"default/web": "shared"}, admitted(e.p))
}
