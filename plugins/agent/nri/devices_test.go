package nri_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	nri "github.com/numaplace/numaplace/plugins/agent/nri"
	"github.com/numaplace/numaplace/policy"
)

// devRoot makes a device directory holding stand-in character devices
// (/dev/null's numbers) under the given names, or skips the test where
// device nodes cannot be made.
func devRoot(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := unix.Mknod(filepath.Join(dir, n), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Skipf("cannot make device nodes here (mknod needs CAP_MKNOD): %v", err)
		}
	}
	return dir
}

// deviceChanges returns the device paths an adjustment adds (with their
// numbers) and removes.
func deviceChanges(a *api.ContainerAdjustment) (added map[string][2]int64, removed []string) {
	added = map[string][2]int64{}
	for _, d := range a.GetLinux().GetDevices() {
		if key, marked := d.IsMarkedForRemoval(); marked {
			removed = append(removed, key)
			continue
		}
		added[d.Path] = [2]int64{d.Major, d.Minor}
	}
	sort.Strings(removed)
	return added, removed
}

func TestCreateContainerGivesTheDecisionsGPUDeviceNodes(t *testing.T) {
	root := devRoot(t, "nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm")
	m := machine(t)
	gpus, err := devices.New(m, root, nil)
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	changes := 0
	p, err := nri.New(node, nri.Options{Logger: slog.New(slog.DiscardHandler), GPUs: gpus, OnChange: func() { changes++ }})
	require.NoError(t, err)
	t.Cleanup(p.Close)

	sb := numaPod("sb-a", "a", decision("8-11", []int{1}, 2, 3))
	adj, _, err := p.CreateContainer(ctx, sb, ctr("c1", sb, "", ""))
	require.NoError(t, err)
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-b0,GPU-b1"}, envOf(adj))
	added, removed := deviceChanges(adj)
	require.Equal(t, map[string][2]int64{"/dev/nvidia2": {1, 3}, "/dev/nvidia3": {1, 3},
		"/dev/nvidiactl": {1, 3}, "/dev/nvidia-uvm": {1, 3}}, added)
	require.Equal(t, []string{"/dev/nvidia0", "/dev/nvidia1"}, removed, "the other GPUs' nodes are taken away")
	require.Positive(t, changes, "the admission is reported")

	// A pod of the shared pool without GPUs gets no device node.
	web := sharedPod("sb-web", "web")
	adj, _, err = p.CreateContainer(ctx, web, ctr("w1", web, "", ""))
	require.NoError(t, err)
	require.Empty(t, adj.GetLinux().GetDevices())

	// An exclusive pod without GPUs loses every GPU node, gets no control
	// node.
	x := numaPod("sb-x", "x", decision("0-1", []int{0}))
	adj, _, err = p.CreateContainer(ctx, x, ctr("x1", x, "", ""))
	require.NoError(t, err)
	added, removed = deviceChanges(adj)
	require.Empty(t, added)
	require.Len(t, removed, 4)

	// A GPU whose node is missing: the container is refused, naming it.
	require.NoError(t, os.Remove(filepath.Join(root, "nvidia0")))
	y := numaPod("sb-y", "y", decision("2-3", []int{0}, 0))
	_, _, err = p.CreateContainer(ctx, y, ctr("y1", y, "", ""))
	require.ErrorIs(t, err, devices.ErrMissing)
	require.ErrorContains(t, err, "GPU 0")
	require.ErrorContains(t, err, filepath.Join(root, "nvidia0"))
}

func TestMemoryNodesLimitCpusetMems(t *testing.T) {
	// The host has memory on node 0 only (node 1 is memoryless).
	node, err := kubelet.Open(machine(t), "", kubelet.NodeOptions{})
	require.NoError(t, err)
	p, err := nri.New(node, nri.Options{Logger: slog.New(slog.DiscardHandler), MemoryNodes: []numa.NodeID{0}})
	require.NoError(t, err)
	t.Cleanup(p.Close)

	web := sharedPod("sb-web", "web")
	adj, _, err := p.CreateContainer(ctx, web, ctr("w1", web, "", ""))
	require.NoError(t, err)
	cpus, mems := cpuset(adj)
	require.Equal(t, "0-15", cpus)
	require.Equal(t, "0", mems, "the shared pool's memory nodes are those with memory")

	// A pod on the memoryless node: its CPUs are set, its mems left to the
	// runtime.
	x := numaPod("sb-x", "x", decision("8-9", []int{1}))
	adj, _, err = p.CreateContainer(ctx, x, ctr("x1", x, "", ""))
	require.NoError(t, err)
	cpus, mems = cpuset(adj)
	require.Equal(t, "8-9", cpus)
	require.Empty(t, mems)

	// Reconciling does not try to set it either.
	up, err := p.Synchronize(ctx, []*api.PodSandbox{web, x}, []*api.Container{ctr("w1", web, "0-7,10-15", "0"), ctr("x1", x, "8-9", "0")})
	require.NoError(t, err)
	require.Empty(t, up)
}

func TestDecisionWithMemory(t *testing.T) {
	// The scheduler reserved 4 GiB on node 1: NRI passes no requests, so
	// the decision's memory is taken as the pod's, and cpuset.mems follows
	// the reserved memory.
	e := newPlugin(t, "")
	d := kube.Decision{Policy: policy.SingleNUMANode, Exclusive: policy.Required, CPUSet: "8-9", NUMANodes: []int{1},
		GPUs: []kube.DecisionGPU{}, MemoryMiB: map[string]int64{"1": 4096}}
	sb := numaPod("sb-m", "m", d.String())
	adj, _, err := e.p.CreateContainer(ctx, sb, ctr("m1", sb, "", ""))
	require.NoError(t, err)
	cpus, mems := cpuset(adj)
	require.Equal(t, "8-9", cpus)
	require.Equal(t, "1", mems)
	adm, ok := e.p.Node().Get("default/m")
	require.True(t, ok)
	require.Equal(t, int64(4096), adm.Allocation.MemoryMiB())
}

// TestSharedPoolPodGetsTheKubeletsGPUNodes: a pod without a decision gets
// the device nodes of the GPUs the kubelet allocated it, which the device
// plugin names in NVIDIA_VISIBLE_DEVICES without adding their nodes (NRI
// could not take such nodes away from a pod whose decision names other
// GPUs); a value naming anything else is left to the runtime.
func TestSharedPoolPodGetsTheKubeletsGPUNodes(t *testing.T) {
	root := devRoot(t, "nvidia0", "nvidia1", "nvidia2", "nvidiactl")
	m := machine(t)
	gpus, err := devices.New(m, root, nil)
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	p, err := nri.New(node, nri.Options{Logger: slog.New(slog.DiscardHandler), GPUs: gpus})
	require.NoError(t, err)
	t.Cleanup(p.Close)

	sb := sharedPod("sb-s", "s")
	for _, tc := range []struct {
		env   []string
		added []string
	}{
		{[]string{"NVIDIA_VISIBLE_DEVICES=GPU-b0,GPU-a0"}, []string{"/dev/nvidia0", "/dev/nvidia2", "/dev/nvidiactl"}},
		{[]string{"NVIDIA_VISIBLE_DEVICES=1"}, []string{"/dev/nvidia1", "/dev/nvidiactl"}},                                     // by index
		{[]string{"NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_VISIBLE_DEVICES=GPU-a1"}, []string{"/dev/nvidia1", "/dev/nvidiactl"}}, // the last wins
		{[]string{"NVIDIA_VISIBLE_DEVICES=all"}, nil},
		{[]string{"NVIDIA_VISIBLE_DEVICES=void"}, nil},
		{[]string{"NVIDIA_VISIBLE_DEVICES=GPU-a0,GPU-zz"}, nil}, // not all ours
		{[]string{"NVIDIA_VISIBLE_DEVICES="}, nil},
		{[]string{"PATH=/bin"}, nil},
	} {
		adj, _, err := p.CreateContainer(ctx, sb, ctr("s1", sb, "", "", tc.env...))
		require.NoError(t, err, "%v", tc.env)
		added, removed := deviceChanges(adj)
		var paths []string
		for path, nums := range added {
			require.Equal(t, [2]int64{1, 3}, nums, path)
			paths = append(paths, path)
		}
		sort.Strings(paths)
		require.Equal(t, tc.added, paths, "%v", tc.env)
		require.Empty(t, removed, "%v", tc.env)
		require.Empty(t, envOf(adj), "a shared pod's environment is left alone: %v", tc.env)
	}

	// A GPU whose node is missing fails the container, naming it.
	_, _, err = p.CreateContainer(ctx, sb, ctr("s2", sb, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b1"))
	require.ErrorIs(t, err, devices.ErrMissing)
	require.ErrorContains(t, err, filepath.Join(root, "nvidia3"))

	// Without the GPUs' nodes known (--gpu-device-nodes=false), nothing is added.
	q, err := nri.New(node, nri.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(q.Close)
	adj, _, err := q.CreateContainer(ctx, sb, ctr("s3", sb, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-a0"))
	require.NoError(t, err)
	require.Empty(t, adj.GetLinux().GetDevices())
}
