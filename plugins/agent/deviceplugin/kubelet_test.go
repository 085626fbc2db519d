package deviceplugin_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	dm "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// testMachine has two NUMA nodes with two GPUs each; GPUs 0-2 have UUIDs,
// GPU 3 none, so the kubelet knows it by its index.
const testMachine = `{"name":"dp","numaNodes":[{"id":0,"socket":0,"cpus":"0-7"},{"id":1,"socket":1,"cpus":"8-15"}],
  "gpus":[{"id":0,"numaNode":0,"uuid":"GPU-a0","pcieSwitch":"s0"},{"id":1,"numaNode":0,"uuid":"GPU-a1","pcieSwitch":"s0"},
          {"id":2,"numaNode":1,"uuid":"GPU-b0"},{"id":3,"numaNode":1}]}`

// kubeletSide is the kubelet's end of the device-plugin API: its own
// registration server and plugin clients (the device manager's
// plugin/v1beta1 package), with a handler that records what the device
// manager would: the plugins that connected and what ListAndWatch sent.
type kubeletSide struct {
	dir    string
	server dm.Server

	mu       sync.Mutex
	plugins  []dm.DevicePlugin
	lists    chan []*api.Device
	gone     chan string
	resource string
}

var _ dm.RegistrationHandler = (*kubeletSide)(nil)
var _ dm.ClientHandler = (*kubeletSide)(nil)

// CleanupPluginDirectory removes the sockets of the directory, as the
// kubelet's device manager does when it starts.
func (k *kubeletSide) CleanupPluginDirectory(_ klog.Logger, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func (k *kubeletSide) PluginConnected(_ context.Context, resource string, p dm.DevicePlugin) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.plugins = append(k.plugins, p)
	k.resource = resource
	return nil
}

func (k *kubeletSide) PluginDisconnected(_ klog.Logger, resource, socket string) {
	k.gone <- resource
}

func (k *kubeletSide) PluginListAndWatchReceiver(_ klog.Logger, resource string, resp *api.ListAndWatchResponse) {
	k.lists <- resp.GetDevices()
}

// start starts the registration server on dir/kubelet.sock.
func (k *kubeletSide) start(t *testing.T) {
	t.Helper()
	s, err := dm.NewServer(klog.Background(), filepath.Join(k.dir, deviceplugin.KubeletSocket), k, k)
	require.NoError(t, err)
	require.NoError(t, s.Start(klog.Background()))
	k.server = s
}

func (k *kubeletSide) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, k.server.Stop(klog.Background()))
}

// plugin returns the last plugin that connected.
func (k *kubeletSide) plugin(t *testing.T, n int) dm.DevicePlugin {
	t.Helper()
	require.Eventually(t, func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return len(k.plugins) >= n
	}, 20*time.Second, 10*time.Millisecond, "registration %d", n)
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.plugins[n-1]
}

// list waits for the next ListAndWatch answer.
func (k *kubeletSide) list(t *testing.T) []*api.Device {
	t.Helper()
	select {
	case l := <-k.lists:
		return l
	case <-time.After(20 * time.Second):
		t.Fatal("no ListAndWatch answer within 20s")
		return nil
	}
}

// summary is a device as "ID health nodes".
func summary(devs []*api.Device) []string {
	var out []string
	for _, d := range devs {
		s := d.GetID() + " " + d.GetHealth()
		for _, n := range d.GetTopology().GetNodes() {
			s += " numa" + string(rune('0'+n.GetID()))
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// shortDir returns a directory whose socket paths fit the unix limit.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "np-dp-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestDevicePluginWithTheKubeletsDeviceManager(t *testing.T) {
	node, devs, devRoot := testNodeDevices(t)

	dir := shortDir(t)
	k := &kubeletSide{dir: dir, lists: make(chan []*api.Device, 64), gone: make(chan string, 16)}
	k.start(t)
	changed := make(chan struct{}, 16)
	p, err := deviceplugin.New(node, devs, deviceplugin.Options{SocketDir: dir, WatchInterval: 20 * time.Millisecond,
		HealthInterval: 20 * time.Millisecond, OnChange: func() { changed <- struct{}{} },
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
		k.stop(t)
	}()

	// Registration, and ListAndWatch with each GPU's NUMA node.
	plugin := k.plugin(t, 1)
	require.Equal(t, deviceplugin.DefaultResourceName, plugin.Resource())
	require.Equal(t, filepath.Join(dir, deviceplugin.DefaultEndpoint), plugin.SocketPath())
	require.Equal(t, []string{"3 Healthy numa1", "GPU-a0 Healthy numa0", "GPU-a1 Healthy numa0", "GPU-b0 Healthy numa1"},
		summary(k.list(t)))
	opts, err := plugin.API().GetDevicePluginOptions(ctx, &api.Empty{})
	require.NoError(t, err)
	require.True(t, opts.GetGetPreferredAllocationAvailable())

	// GetPreferredAllocation: two GPUs on one NUMA node and one switch.
	all := []string{"GPU-a0", "GPU-a1", "GPU-b0", "3"}
	pref, err := plugin.API().GetPreferredAllocation(ctx, &api.PreferredAllocationRequest{ContainerRequests: []*api.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: all, AllocationSize: 2},
		{AvailableDeviceIDs: all, MustIncludeDeviceIDs: []string{"GPU-b0"}, AllocationSize: 2},
	}})
	require.NoError(t, err)
	require.Equal(t, []string{"GPU-a0", "GPU-a1"}, pref.GetContainerResponses()[0].GetDeviceIDs())
	require.Equal(t, []string{"GPU-b0", "3"}, pref.GetContainerResponses()[1].GetDeviceIDs())

	// A pod admitted by its decision holds GPUs 0 and 1: the kubelet is
	// steered to the others while they are enough.
	d := kube.Decision{Policy: policy.SingleNUMANode, Exclusive: policy.Required, CPUSet: "0-1", NUMANodes: []int{0},
		GPUs: []kube.DecisionGPU{{ID: 0}, {ID: 1}}}
	_, err = node.Admit(&kube.Pod{Namespace: "default", Name: "a", Annotations: map[string]string{kube.AnnotationAllocation: d.String()}})
	require.NoError(t, err)
	pref, err = plugin.API().GetPreferredAllocation(ctx, &api.PreferredAllocationRequest{ContainerRequests: []*api.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: all, AllocationSize: 2}, {AvailableDeviceIDs: all, AllocationSize: 3}}})
	require.NoError(t, err)
	require.Equal(t, []string{"GPU-b0", "3"}, pref.GetContainerResponses()[0].GetDeviceIDs())
	require.Len(t, pref.GetContainerResponses()[1].GetDeviceIDs(), 3, "too few free GPUs: chosen among all")
	_, err = plugin.API().GetPreferredAllocation(ctx, &api.PreferredAllocationRequest{ContainerRequests: []*api.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: []string{"GPU-zz"}, AllocationSize: 1}}})
	require.ErrorContains(t, err, `available device "GPU-zz" is not a GPU of this machine`)

	// Allocate: the kubelet's GPUs in the environment, with their device
	// nodes and the control node that exists.
	alloc, err := plugin.API().Allocate(ctx, &api.AllocateRequest{ContainerRequests: []*api.ContainerAllocateRequest{
		{DevicesIds: []string{"GPU-b0", "3"}}}})
	require.NoError(t, err)
	c := alloc.GetContainerResponses()[0]
	require.Equal(t, map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-b0,3"}, c.GetEnvs())
	var paths []string
	for _, dev := range c.GetDevices() {
		require.Equal(t, dev.GetContainerPath(), dev.GetHostPath())
		require.Equal(t, "rw", dev.GetPermissions())
		paths = append(paths, dev.GetContainerPath())
	}
	require.Equal(t, []string{"/dev/nvidia2", "/dev/nvidia3", "/dev/nvidiactl"}, paths)
	_, err = plugin.API().Allocate(ctx, &api.AllocateRequest{ContainerRequests: []*api.ContainerAllocateRequest{{DevicesIds: []string{"7"}}}})
	require.ErrorContains(t, err, `device "7" is not a GPU of this node`)

	// A GPU's device node goes: the kubelet side sees it unhealthy, the
	// node refuses it to new pods, the change is reported; and back.
	require.NoError(t, os.Remove(filepath.Join(devRoot, "nvidia2")))
	require.Equal(t, []string{"3 Healthy numa1", "GPU-a0 Healthy numa0", "GPU-a1 Healthy numa0", "GPU-b0 Unhealthy numa1"},
		summary(k.list(t)))
	<-changed
	require.Equal(t, []string{"2"}, node.Unhealthy()["gpu"])
	require.NoError(t, unix.Mknod(filepath.Join(devRoot, "nvidia2"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	require.Equal(t, []string{"3 Healthy numa1", "GPU-a0 Healthy numa0", "GPU-a1 Healthy numa0", "GPU-b0 Healthy numa1"},
		summary(k.list(t)))
	require.Empty(t, node.Unhealthy()["gpu"])

	// The kubelet restarts: its server stops (the plugin's connection
	// goes), the directory is cleaned (the plugin's socket goes) and
	// kubelet.sock is made anew. The plugin registers again.
	k.stop(t)
	select {
	case <-k.gone:
	case <-time.After(20 * time.Second):
		t.Fatal("the kubelet side saw no disconnection")
	}
	k.start(t)
	plugin = k.plugin(t, 2)
	require.Equal(t, []string{"3 Healthy numa1", "GPU-a0 Healthy numa0", "GPU-a1 Healthy numa0", "GPU-b0 Healthy numa1"},
		summary(k.list(t)))
	alloc, err = plugin.API().Allocate(ctx, &api.AllocateRequest{ContainerRequests: []*api.ContainerAllocateRequest{{DevicesIds: []string{"GPU-a0"}}}})
	require.NoError(t, err)
	require.Equal(t, "GPU-a0", alloc.GetContainerResponses()[0].GetEnvs()["NVIDIA_VISIBLE_DEVICES"])
	require.GreaterOrEqual(t, p.Registrations(), 2)
}

func TestDevicePluginWaitsForTheKubelet(t *testing.T) {
	m, err := topology.ParseJSON([]byte(testMachine))
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	devs, err := devices.New(m, t.TempDir(), nil)
	require.NoError(t, err)
	dir := shortDir(t)
	p, err := deviceplugin.New(node, devs, deviceplugin.Options{SocketDir: dir, WatchInterval: 10 * time.Millisecond,
		HealthInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	time.Sleep(50 * time.Millisecond) // no kubelet yet: the plugin waits
	require.Zero(t, p.Registrations())

	// Without health checks, GPUs without device nodes stay healthy.
	k := &kubeletSide{dir: dir, lists: make(chan []*api.Device, 64), gone: make(chan string, 16)}
	k.start(t)
	defer k.stop(t)
	k.plugin(t, 1)
	require.Equal(t, []string{"3 Healthy numa1", "GPU-a0 Healthy numa0", "GPU-a1 Healthy numa0", "GPU-b0 Healthy numa1"},
		summary(k.list(t)))
	cancel()
	require.NoError(t, <-done)
	_, err = os.Stat(p.SocketPath())
	require.ErrorIs(t, err, os.ErrNotExist, "the plugin removes its socket when it stops")

	_, err = deviceplugin.New(node, devs, deviceplugin.Options{Endpoint: "a/b.sock"})
	require.ErrorContains(t, err, "must be a file name")
	_, err = p.SetHealth(9, false)
	require.ErrorContains(t, err, "GPU 9 is not a GPU of this machine")
}
