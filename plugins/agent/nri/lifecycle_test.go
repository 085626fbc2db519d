package nri_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	nri "github.com/numaplace/numaplace/plugins/agent/nri"
	"github.com/numaplace/numaplace/policy"
	"github.com/stretchr/testify/require"
)

// gpuOnlyPod is a sandbox of a pod without a NUMA spec that numaplace's
// scheduler gave GPUs: a decision with policy None and an empty cpuset.
func gpuOnlyPod(id, name string, gpus ...int) *api.PodSandbox {
	sb := sharedPod(id, name)
	d := kube.Decision{Policy: policy.None, Exclusive: policy.Required, CPUSet: "", NUMANodes: []int{},
		GPUs: []kube.DecisionGPU{}, MemoryMiB: map[string]int64{}}
	for _, g := range gpus {
		d.GPUs = append(d.GPUs, kube.DecisionGPU{ID: g, UUID: []string{"GPU-a0", "GPU-a1", "GPU-b0", "GPU-b1"}[g]})
		node := g / 2
		if len(d.NUMANodes) == 0 || d.NUMANodes[len(d.NUMANodes)-1] != node {
			d.NUMANodes = append(d.NUMANodes, node)
			d.MemoryMiB[strconv.Itoa(node)] = 0
		}
	}
	sb.Annotations[kube.AnnotationAllocation] = d.String()
	return sb
}

// fakeProc is a stand-in for the host's /proc: the stat files of the
// sandboxes' processes.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) *fakeProc { return &fakeProc{t: t, root: t.TempDir()} }

// run makes process pid exist, started at the given time (clock ticks).
func (f *fakeProc) run(pid uint32, start int) {
	dir := filepath.Join(f.root, strconv.Itoa(int(pid)))
	require.NoError(f.t, os.MkdirAll(dir, 0o755))
	// Field 22 is the start time; the command name has a space and a ")".
	line := fmt.Sprintf("%d (pause x)) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 1024 1 18446744073709551615\n",
		pid, pid, pid, start)
	require.NoError(f.t, os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o444))
}

// exit makes process pid gone.
func (f *fakeProc) exit(pid uint32) {
	require.NoError(f.t, os.RemoveAll(filepath.Join(f.root, strconv.Itoa(int(pid)))))
}

// newPluginWith is newPlugin with options (Logger and Events are set).
func newPluginWith(t *testing.T, path string, opts nri.Options) *env {
	t.Helper()
	node, err := kubelet.Open(machine(t), path, kubelet.NodeOptions{})
	require.NoError(t, err)
	e := &env{events: &events{}, log: &syncBuffer{}}
	opts.Logger, opts.Events = slog.New(slog.NewTextHandler(e.log, nil)), e.events
	e.p, err = nri.New(node, opts)
	require.NoError(t, err)
	t.Cleanup(e.p.Close)
	return e
}

// withPid returns sb with the sandbox process pid.
func withPid(sb *api.PodSandbox, pid uint32) *api.PodSandbox {
	sb.Pid = pid
	return sb
}

func TestDecisionWithoutCPUsRunsOnTheSharedPool(t *testing.T) {
	e := newPlugin(t, filepath.Join(t.TempDir(), "cp.json"))
	u := newUpdater()
	e.p.SetUpdater(u)
	x := numaPod("sb-x", "x", decision("0-3", []int{0}, 0))
	require.NoError(t, e.p.RunPodSandbox(ctx, x))
	_, _, err := e.p.CreateContainer(ctx, x, ctr("x1", x, "", ""))
	require.NoError(t, err)

	// A GPU pod without a NUMA spec, placed by the scheduler: GPU 2, no
	// CPUs. Its container gets the shared pool, not every CPU (the empty
	// cpuset), every node with memory, and its decision's GPU.
	g := gpuOnlyPod("sb-g", "g", 2)
	require.NoError(t, e.p.RunPodSandbox(ctx, g))
	adj, _, err := e.p.CreateContainer(ctx, g, ctr("g1", g, "", ""))
	require.NoError(t, err)
	started(t, e.p, g, "g1", adj)
	cpus, mems := cpuset(adj)
	require.Equal(t, "4-15", cpus, "the shared pool: x's CPUs 0-3 are exclusive")
	require.Equal(t, "0-1", mems)
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-b0"}, envOf(adj))
	adm, ok := e.p.Node().Get("default/g")
	require.True(t, ok)
	require.Equal(t, kubelet.FromDecision, adm.Source)
	require.Equal(t, []kube.DecisionGPU{{ID: 2, UUID: "GPU-b0"}}, adm.GPUs)

	// It follows the shared pool as exclusive pods come and go.
	y := numaPod("sb-y", "y", decision("8-11", []int{1}, 3))
	require.NoError(t, e.p.RunPodSandbox(ctx, y))
	require.Equal(t, map[string]string{"g1": "4-7,12-15"}, updated(u.next(t)))
	require.NoError(t, e.p.StopPodSandbox(ctx, y))
	require.Equal(t, map[string]string{"g1": "4-15"}, updated(u.next(t)))

	// After a restart, a container that runs on every CPU (as one created
	// before this rule did) is put on the shared pool.
	e.p.Close()
	second := newPlugin(t, filepath.Join(filepath.Dir(e.p.Node().CheckpointPath()), "cp.json"))
	up, err := second.p.Synchronize(ctx, []*api.PodSandbox{x, g},
		[]*api.Container{ctr("x1", x, "0-3", "0", "NVIDIA_VISIBLE_DEVICES=GPU-a0"), ctr("g1", g, "0-15", "1", "NVIDIA_VISIBLE_DEVICES=GPU-b0")})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"g1": "4-15/0-1"}, updated(up))
	require.Equal(t, map[string]string{"default/g": "decision", "default/x": "decision"}, admitted(second.p))
	require.NotContains(t, second.log.String(), "GPUs differ")
}

func TestSynchronizeSkipsStoppedSandboxes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp.json")
	first := newPlugin(t, path)
	proc := newFakeProc(t)
	a := withPid(numaPod("sb-a", "a", decision("0-3", []int{0}, 0)), 100)
	b := numaPod("sb-b", "b", decision("8-11", []int{1}, 2))
	web := withPid(sharedPod("sb-web", "web"), 102)
	for _, sb := range []*api.PodSandbox{a, b, web} {
		require.NoError(t, first.p.RunPodSandbox(ctx, sb))
	}
	first.p.Close()

	// While the plugin was away, b's sandbox was stopped and not yet
	// removed: the runtime lists it without a process and without
	// containers that run. So is c's, which the plugin never saw, and d's
	// process is gone.
	proc.run(100, 7)
	proc.run(102, 9)
	c := numaPod("sb-c", "c", decision("4-7", []int{0}, 1))
	d := withPid(numaPod("sb-d", "d", decision("12-15", []int{1}, 3)), 103)
	second := newPluginWith(t, path, nri.Options{ProcRoot: proc.root, CheckInterval: -1})
	up, err := second.p.Synchronize(ctx, []*api.PodSandbox{a, b, c, d, web},
		[]*api.Container{ctr("a1", a, "0-3", "0"), ctr("w1", web, "0-15", "0-1"),
			{Id: "b1", PodSandboxId: "sb-b", State: api.ContainerState_CONTAINER_STOPPED}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"default/a": "decision", "default/web": "shared"}, admitted(second.p))
	require.Equal(t, map[string]string{"w1": "4-15"}, updated(up))
	require.Equal(t, "4-15", second.p.Node().SharedPool().String(), "b's CPUs are free")
	log := second.log.String()
	require.Contains(t, log, "skipping a pod sandbox that no longer runs")
	require.Contains(t, log, "removed pod: in the checkpoint but no longer running")

	// The stopped sandboxes' removals, when the runtime sends them, change
	// nothing.
	require.NoError(t, second.p.RemovePodSandbox(ctx, b))
	require.NoError(t, second.p.RemovePodSandbox(ctx, c))
	require.Equal(t, map[string]string{"default/a": "decision", "default/web": "shared"}, admitted(second.p))
}

func TestPodsFoundAtSynchronizeAreReleasedWhenTheirSandboxEnds(t *testing.T) {
	proc := newFakeProc(t)
	var changes atomic.Int32
	e := newPluginWith(t, filepath.Join(t.TempDir(), "cp.json"),
		nri.Options{ProcRoot: proc.root, CheckInterval: -1, OnChange: func() { changes.Add(1) }})
	u := newUpdater()
	e.p.SetUpdater(u)
	a := withPid(numaPod("sb-a", "a", decision("0-3", []int{0}, 0)), 100)
	b := withPid(numaPod("sb-b", "b", decision("4-5", []int{0}, 1)), 101)
	web := withPid(sharedPod("sb-web", "web"), 102)
	proc.run(100, 7)
	proc.run(101, 8)
	proc.run(102, 9)
	// The runtime restarted with these pods running: it lists them, and
	// will not send their StopPodSandbox (containerd/containerd#8426).
	_, err := e.p.Synchronize(ctx, []*api.PodSandbox{a, b, web},
		[]*api.Container{ctr("a1", a, "0-3", "0"), ctr("b1", b, "4-5", "0"), ctr("w1", web, "6-15", "0-1")})
	require.NoError(t, err)
	require.Len(t, admitted(e.p), 3)

	// a stops: its container's stop arrives, its sandbox's does not.
	_, err = e.p.StopContainer(ctx, a, ctr("a1", a, "0-3", "0"))
	require.NoError(t, err)
	require.NoError(t, e.p.RemoveContainer(ctx, a, ctr("a1", a, "0-3", "0")))
	proc.exit(100)
	// A new pod whose decision names a's CPUs and GPU is admitted: a is
	// released first.
	before := changes.Load()
	z := numaPod("sb-z", "z", decision("0-3", []int{0}, 0))
	require.NoError(t, e.p.RunPodSandbox(ctx, z))
	require.Equal(t, map[string]string{"default/b": "decision", "default/web": "shared", "default/z": "decision"}, admitted(e.p))
	require.Greater(t, changes.Load(), before, "the reporter is told")
	require.Contains(t, e.log.String(), "a pod sandbox found at synchronisation no longer runs")
	require.Contains(t, e.log.String(), "RunPodSandbox: removed pod")

	// b's sandbox process is replaced by another with the same PID: b is
	// released too, at the refusal of a pod that needs its CPUs (a
	// CreateContainer without RunPodSandbox).
	proc.run(101, 50)
	y := numaPod("sb-y", "y", decision("4-5", []int{0}, 1))
	_, _, err = e.p.CreateContainer(ctx, y, ctr("y1", y, "", ""))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"default/web": "shared", "default/y": "decision", "default/z": "decision"}, admitted(e.p))

	// web's sandbox still runs: a pod whose decision conflicts with a
	// running pod is still refused.
	require.Error(t, e.p.RunPodSandbox(ctx, numaPod("sb-q", "q", decision("0", []int{0}))))
	require.Contains(t, admitted(e.p), "default/web")
}

func TestPeriodicCheckReleasesEndedSandboxes(t *testing.T) {
	proc := newFakeProc(t)
	e := newPluginWith(t, filepath.Join(t.TempDir(), "cp.json"), nri.Options{ProcRoot: proc.root, CheckInterval: time.Millisecond})
	u := newUpdater()
	e.p.SetUpdater(u)
	a := withPid(numaPod("sb-a", "a", decision("0-3", []int{0}, 0)), 100)
	web := withPid(sharedPod("sb-web", "web"), 102)
	proc.run(100, 7)
	proc.run(102, 9)
	_, err := e.p.Synchronize(ctx, []*api.PodSandbox{a, web},
		[]*api.Container{ctr("a1", a, "0-3", "0"), ctr("w1", web, "4-15", "0-1")})
	require.NoError(t, err)
	proc.exit(100)
	// Without any event, a is released and the shared container gets its
	// CPUs.
	require.Equal(t, map[string]string{"w1": "0-15"}, updated(u.next(t)))
	require.Equal(t, map[string]string{"default/web": "shared"}, admitted(e.p))
	require.Contains(t, e.log.String(), "periodic check: removed pod")
}

func TestRecreatedPodAfterRuntimeRestart(t *testing.T) {
	proc := newFakeProc(t)
	e := newPluginWith(t, "", nri.Options{ProcRoot: proc.root, CheckInterval: -1})
	a := withPid(numaPod("sb-a", "a", decision("0-3", []int{0}, 0)), 100)
	proc.run(100, 7)
	_, err := e.p.Synchronize(ctx, []*api.PodSandbox{a}, []*api.Container{ctr("a1", a, "0-3", "0")})
	require.NoError(t, err)

	// The sandbox is recreated for the same pod: the old one's end leaves
	// the pod alone.
	a2 := withPid(numaPod("sb-a2", "a", decision("0-3", []int{0}, 0)), 200)
	require.NoError(t, e.p.RunPodSandbox(ctx, a2))
	proc.exit(100)
	require.NoError(t, e.p.RunPodSandbox(ctx, sharedPod("sb-web", "web")))
	require.Equal(t, map[string]string{"default/a": "decision", "default/web": "shared"}, admitted(e.p))

	// A pod found at Synchronize is deleted and created again under the
	// same name (a StatefulSet's) with another UID and decision: admitted
	// once the old sandbox is gone.
	s := withPid(numaPod("sb-s", "s", decision("8-9", []int{1})), 300)
	proc.run(300, 11)
	_, err = e.p.Synchronize(ctx, []*api.PodSandbox{a2, s}, []*api.Container{ctr("a1", a2, "0-3", "0"), ctr("s1", s, "8-9", "1")})
	require.NoError(t, err)
	proc.exit(300)
	again := numaPod("sb-s2", "s", decision("10-11", []int{1}))
	again.Uid = "uid-s-2"
	require.NoError(t, e.p.RunPodSandbox(ctx, again))
	adm, ok := e.p.Node().Get("default/s")
	require.True(t, ok)
	require.Equal(t, []any{"uid-s-2", "10-11"}, []any{adm.UID, adm.CPUs.String()})
}

func TestSandboxProcessNotUnderProcRoot(t *testing.T) {
	proc := newFakeProc(t) // empty: not the runtime's /proc
	e := newPluginWith(t, "", nri.Options{ProcRoot: proc.root, CheckInterval: -1})
	a := withPid(numaPod("sb-a", "a", decision("0-3", []int{0}, 0)), 100)
	_, err := e.p.Synchronize(ctx, []*api.PodSandbox{a}, []*api.Container{ctr("a1", a, "0-3", "0")})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"default/a": "decision"}, admitted(e.p), "its container runs: so does the sandbox")
	require.Contains(t, e.log.String(), "is it the host's /proc?")
	// Its end is left to the runtime: a conflicting pod is refused.
	require.Error(t, e.p.RunPodSandbox(ctx, numaPod("sb-z", "z", decision("0-3", []int{0}))))
	require.NoError(t, e.p.StopPodSandbox(ctx, a))
	require.Empty(t, admitted(e.p))
}

func TestSynchronizeFlagsContainersWithoutTheirGPUs(t *testing.T) {
	root := devRoot(t, "nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl")
	gpus, err := devices.New(machine(t), root, nil)
	require.NoError(t, err)
	e := newPluginWith(t, "", nri.Options{GPUs: gpus, CheckInterval: -1})
	// a started while the agent was away: the kubelet's environment
	// (here its decision's GPU) but no device node; b got its GPU through
	// the plugin; x has no GPU and no NVIDIA_VISIBLE_DEVICES.
	a := numaPod("sb-a", "a", decision("0-3", []int{0}, 0))
	b := numaPod("sb-b", "b", decision("8-9", []int{1}, 2))
	x := numaPod("sb-x", "x", decision("4-5", []int{0}))
	withNode := ctr("b1", b, "8-9", "1", "NVIDIA_VISIBLE_DEVICES=GPU-b0")
	withNode.Linux.Devices = []*api.LinuxDevice{{Path: "/dev/nvidia2", Type: "c", Major: 1, Minor: 3}}
	_, err = e.p.Synchronize(ctx, []*api.PodSandbox{a, b, x},
		[]*api.Container{ctr("a1", a, "0-3", "0", "NVIDIA_VISIBLE_DEVICES=GPU-a0"), withNode, ctr("x1", x, "4-5", "0")})
	require.NoError(t, err)
	require.Len(t, admitted(e.p), 3)
	ev := e.events.list()
	require.Len(t, ev, 1, "%+v", ev)
	require.Equal(t, []string{"a", nri.ReasonGPUsNotApplied, nri.EventTypeWarning}, []string{ev[0].Name, ev[0].Reason, ev[0].Type})
	require.Contains(t, ev[0].Message, "the device nodes /dev/nvidia0 are missing; restart the pod")
}
