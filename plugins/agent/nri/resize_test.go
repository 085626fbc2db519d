package nri_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/numa"
	nri "github.com/numaplace/numaplace/plugins/agent/nri"
)

// limits returns CPU and memory resources as the kubelet writes a
// Guaranteed container's: cpus CPUs as a CFS quota over a 100 ms period
// (and the matching shares), mem bytes of memory limit (0: none).
func limits(cpus int64, mem int64) *api.LinuxResources {
	r := &api.LinuxResources{Cpu: &api.LinuxCPU{Quota: api.Int64(cpus * 100000), Period: api.UInt64(uint64(100000)),
		Shares: api.UInt64(uint64(cpus * 1024))}}
	if mem > 0 {
		r.Memory = &api.LinuxMemory{Limit: api.Int64(mem)}
	}
	return r
}

// sized is container c with the given resources (its cpuset kept).
func sized(c *api.Container, r *api.LinuxResources) *api.Container {
	r = r.Copy()
	r.Cpu.Cpus, r.Cpu.Mems = c.GetLinux().GetResources().GetCpu().GetCpus(), c.GetLinux().GetResources().GetCpu().GetMems()
	c.Linux.Resources = r
	return c
}

// resizeEnv is a plugin with a checkpoint whose OnResize records what it
// is given.
type resizeEnv struct {
	*env
	path    string
	mu      sync.Mutex
	resized []nri.Resized
}

func newResizePlugin(t *testing.T) *resizeEnv {
	t.Helper()
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	node, err := kubelet.Open(machine(t), path, kubelet.NodeOptions{})
	require.NoError(t, err)
	e := &resizeEnv{env: &env{events: &events{}, log: &syncBuffer{}}, path: path}
	e.p, err = nri.New(node, nri.Options{Logger: slog.New(slog.NewTextHandler(e.log, nil)), Events: e.events,
		OnResize: func(r nri.Resized) { e.mu.Lock(); e.resized = append(e.resized, r); e.mu.Unlock() }})
	require.NoError(t, err)
	t.Cleanup(e.p.Close)
	return e
}

func (e *resizeEnv) lastResized() []nri.Resized {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]nri.Resized(nil), e.resized...)
}

// start runs the sandbox, creates its container through the plugin and
// reports it started.
func start(t *testing.T, p *nri.Plugin, sb *api.PodSandbox, c *api.Container) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, p.RunPodSandbox(ctx, sb))
	adj, _, err := p.CreateContainer(ctx, sb, c)
	require.NoError(t, err)
	started(t, p, sb, c.GetId(), adj)
}

func TestResizeAppliedBothWays(t *testing.T) {
	ctx := context.Background()
	e := newResizePlugin(t)
	web := sharedPod("sb-web", "web")
	start(t, e.p, web, sized(ctr("c-web", web, "", ""), limits(1, 0)))
	a := numaPod("sb-a", "a", decision("0-1", []int{0}))
	ca := sized(ctr("c-a", a, "", ""), limits(2, 64<<20))
	start(t, e.p, a, ca)
	require.Equal(t, "2-15", e.p.Node().SharedPool().String())

	// The pod level first (a grow): allowed, nothing changes yet.
	require.NoError(t, e.p.UpdatePodSandbox(ctx, a, nil, limits(4, 64<<20)))
	require.Equal(t, "2-15", e.p.Node().SharedPool().String())

	// The container's new limit: 2 to 4 CPUs, on node 0, keeping 0-1.
	up, err := e.p.UpdateContainer(ctx, a, ca, limits(4, 64<<20))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"c-web": "4-15", "c-a": "0-3/0"}, updated(up))
	require.Equal(t, "c-a", up[len(up)-1].GetContainerId(), "the resized container's update comes last")
	adm, ok := e.p.Node().Get("default/a")
	require.True(t, ok)
	require.Equal(t, "0-3", adm.CPUs.String())
	got := e.lastResized()
	require.Len(t, got, 1)
	require.Equal(t, []string{"default", "a", "uid-a"}, []string{got[0].Namespace, got[0].Name, got[0].UID})
	d, err := kube.ParseDecision(got[0].Decision)
	require.NoError(t, err)
	require.Equal(t, []any{"0-3", []int{0}, "SingleNUMANode"}, []any{d.CPUSet, d.NUMANodes, d.Policy.String()})
	ev := e.events.list()
	require.Equal(t, nri.ReasonResized, ev[len(ev)-1].Reason)
	require.Contains(t, ev[len(ev)-1].Message, "resized in place from 2 to 4 CPUs (container c-c-a from 2 to 4): cpuset 0-3")

	// The checkpoint holds it: a node opened from it has the new size.
	again, err := kubelet.Open(machine(t), e.path, kubelet.NodeOptions{})
	require.NoError(t, err)
	adm2, ok := again.Get("default/a")
	require.True(t, ok)
	require.Equal(t, "0-3", adm2.CPUs.String())

	// Back down to 1 CPU: the containers first, then the pod level.
	up, err = e.p.UpdateContainer(ctx, a, sized(ca, limits(4, 64<<20)), limits(1, 64<<20))
	require.NoError(t, err)
	adm, _ = e.p.Node().Get("default/a")
	require.Equal(t, 1, adm.CPUs.Size())
	require.True(t, adm.CPUs.IsSubsetOf(mustSet(t, "0-1")), "shrinking keeps CPUs it held from the start: %s", adm.CPUs)
	pool := e.p.Node().SharedPool().String()
	require.Equal(t, map[string]string{"c-web": pool, "c-a": adm.CPUs.String() + "/0"}, updated(up))
	require.NoError(t, e.p.UpdatePodSandbox(ctx, a, nil, limits(1, 64<<20)))
	require.Len(t, e.lastResized(), 2)

	// An update that changes no CPU count (the same limit again) changes
	// nothing.
	up, err = e.p.UpdateContainer(ctx, a, sized(ca, limits(1, 64<<20)), limits(1, 64<<20))
	require.NoError(t, err)
	require.Empty(t, up)
	require.Len(t, e.lastResized(), 2)
}

func mustSet(t *testing.T, s string) numa.CPUSet {
	t.Helper()
	set, err := numa.ParseCPUSet(s)
	require.NoError(t, err)
	return set
}

func TestResizeRefusedWithTheReason(t *testing.T) {
	ctx := context.Background()
	e := newResizePlugin(t)
	b := numaPod("sb-b", "b", decision("8-15", []int{1}))
	// The pod-level resources the kubelet creates the sandbox with.
	b.Linux = &api.LinuxPodSandbox{PodResources: limits(8, 64<<20)}
	cb := sized(ctr("c-b", b, "", ""), limits(8, 64<<20))
	start(t, e.p, b, cb)
	before := e.p.Node().Admissions()
	check := func(t *testing.T, err error, want string) {
		t.Helper()
		require.ErrorIs(t, err, kubelet.ErrResizeRefused)
		var re *nri.RefusedError
		require.ErrorAs(t, err, &re)
		require.Equal(t, nri.ReasonResizeRefused, re.Reason)
		require.Contains(t, err.Error(), want)
		require.Equal(t, before, e.p.Node().Admissions(), "a refusal changes nothing")
		ev := e.events.list()
		require.Equal(t, nri.EventTypeWarning, ev[len(ev)-1].Type)
		require.Equal(t, nri.ReasonResizeRefused, ev[len(ev)-1].Reason)
		require.Equal(t, err.Error(), ev[len(ev)-1].Message)
		require.Empty(t, e.lastResized())
	}
	// Node 1 has no ninth CPU: refused at the pod level, and at the
	// container if the kubelet went on.
	err := e.p.UpdatePodSandbox(ctx, b, nil, limits(9, 64<<20))
	check(t, err, "in-place resize refused: pod default/b from 8 to 9 CPUs: under its SingleNUMANode policy: ")
	check(t, err, "NUMA node 1")
	up, err := e.p.UpdateContainer(ctx, b, cb, limits(9, 64<<20))
	require.Nil(t, up)
	check(t, err, "pod default/b from 8 to 9 CPUs")

	// Memory, both levels.
	check(t, e.p.UpdatePodSandbox(ctx, b, nil, limits(8, 128<<20)),
		"pod default/b, pod level: its memory limit cannot change in place (from 67108864 to 134217728 bytes)")
	_, err = e.p.UpdateContainer(ctx, b, cb, limits(8, 128<<20))
	check(t, err, "pod default/b, container c-c-b: its memory limit cannot change in place")

	// A fraction of a CPU.
	half := limits(8, 64<<20)
	half.Cpu.Quota = api.Int64(750000)
	_, err = e.p.UpdateContainer(ctx, b, cb, half)
	check(t, err, "container c-c-b asks for a CPU limit of 7.5 CPUs (CFS quota 750000 over period 100000): numaplace gives whole CPUs")
	check(t, e.p.UpdatePodSandbox(ctx, b, nil, half), "pod default/b asks for a CPU limit of 7.5 CPUs")

	// A pod-level update that does not grow the CPUs passes.
	require.NoError(t, e.p.UpdatePodSandbox(ctx, b, nil, limits(8, 64<<20)))
	require.NoError(t, e.p.UpdatePodSandbox(ctx, b, nil, limits(4, 64<<20)))
}

func TestResizeOfSharedPodsPasses(t *testing.T) {
	ctx := context.Background()
	e := newResizePlugin(t)
	web := sharedPod("sb-web", "web")
	c := sized(ctr("c-web", web, "", ""), limits(1, 64<<20))
	start(t, e.p, web, c)
	up, err := e.p.UpdateContainer(ctx, web, c, limits(3, 128<<20))
	require.NoError(t, err)
	require.Empty(t, up)
	require.NoError(t, e.p.UpdatePodSandbox(ctx, web, nil, limits(3, 128<<20)))
	// Unknown pods too.
	other := sharedPod("sb-x", "x")
	up, err = e.p.UpdateContainer(ctx, other, ctr("c-x", other, "", ""), limits(3, 0))
	require.NoError(t, err)
	require.Empty(t, up)
	require.Empty(t, e.lastResized())
}

func TestResizeMultiContainerPod(t *testing.T) {
	ctx := context.Background()
	e := newResizePlugin(t)
	// Two containers of 1 CPU each share the pod's 2 CPUs.
	a := numaPod("sb-a", "a", decision("0-1", []int{0}))
	c1 := sized(ctr("c-1", a, "", ""), limits(1, 0))
	c2 := sized(ctr("c-2", a, "", ""), limits(1, 0))
	start(t, e.p, a, c1)
	_, _, err := e.p.CreateContainer(ctx, a, c2)
	require.NoError(t, err)
	up, err := e.p.UpdateContainer(ctx, a, c1, limits(2, 0))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"c-1": "0-2/0", "c-2": "0-2/0"}, updated(up), "the sibling gets the pod's new cpuset")

	// A pod whose containers' limits do not add up to its decision (4 CPUs
	// for two containers of 1) is refused: the new decision would not be
	// its request.
	b := numaPod("sb-b", "b", decision("8-11", []int{1}))
	d1 := sized(ctr("d-1", b, "", ""), limits(1, 0))
	d2 := sized(ctr("d-2", b, "", ""), limits(1, 0))
	start(t, e.p, b, d1)
	_, _, err = e.p.CreateContainer(ctx, b, d2)
	require.NoError(t, err)
	_, err = e.p.UpdateContainer(ctx, b, d1, limits(2, 0))
	require.ErrorIs(t, err, kubelet.ErrResizeRefused)
	require.Contains(t, err.Error(), "pod default/b holds 4 CPUs but its containers' CPU limits add up to 2")
	adm, _ := e.p.Node().Get("default/b")
	require.Equal(t, "8-11", adm.CPUs.String())
	require.True(t, errors.Is(err, kubelet.ErrResizeRefused))
}

// A pod resized before the agent restarted: its sandbox still carries the
// decision it was created with, the checkpoint the new one, which is
// handed to OnResize again at synchronisation.
func TestResizeWrittenAgainAfterARestart(t *testing.T) {
	ctx := context.Background()
	e := newResizePlugin(t)
	a := numaPod("sb-a", "a", decision("0-1", []int{0}))
	ca := sized(ctr("c-a", a, "", ""), limits(2, 0))
	start(t, e.p, a, ca)
	_, err := e.p.UpdateContainer(ctx, a, ca, limits(3, 0))
	require.NoError(t, err)
	want := e.lastResized()
	require.Len(t, want, 1)
	e.p.Close()

	node, err := kubelet.Open(machine(t), e.path, kubelet.NodeOptions{})
	require.NoError(t, err)
	var got []nri.Resized
	p, err := nri.New(node, nri.Options{Logger: slog.New(slog.NewTextHandler(e.log, nil)), Events: e.events,
		OnResize: func(r nri.Resized) { got = append(got, r) }})
	require.NoError(t, err)
	defer p.Close()
	running := sized(ctr("c-a", a, "0-2", "0"), limits(3, 0))
	up, err := p.Synchronize(ctx, []*api.PodSandbox{a}, []*api.Container{running})
	require.NoError(t, err)
	require.Empty(t, up, "the container already has its resized cpuset")
	require.Equal(t, want, got)

	// A pod whose CPUs are its sandbox's decision's is not written.
	got = nil
	_, err = p.Synchronize(ctx, []*api.PodSandbox{numaPod("sb-a", "a", want[0].Decision)}, []*api.Container{running})
	require.NoError(t, err)
	require.Empty(t, got)
}

// Without OnResize (no API server), a CPU change is refused: the new
// decision could not be written.
func TestResizeRefusedWithoutTheAPIServer(t *testing.T) {
	ctx := context.Background()
	e := newPlugin(t, "")
	a := numaPod("sb-a", "a", decision("0-1", []int{0}))
	ca := sized(ctr("c-a", a, "", ""), limits(2, 0))
	start(t, e.p, a, ca)
	_, err := e.p.UpdateContainer(ctx, a, ca, limits(3, 0))
	require.ErrorIs(t, err, kubelet.ErrResizeRefused)
	require.Contains(t, err.Error(), "could not write the pod's new decision")
	adm, _ := e.p.Node().Get("default/a")
	require.Equal(t, "0-1", adm.CPUs.String())
}

// The kubelet lowers a pod's shares after its containers' CPUs, with the
// old quota: no rise, even when the node could not give the old size back
// any more; a rise is judged against the last count seen, and left to
// UpdateContainer when none is known.
func TestResizePodLevelRiseIsAgainstTheLastCount(t *testing.T) {
	ctx := context.Background()
	e := newResizePlugin(t)
	a := numaPod("sb-a", "a", decision("0-1", []int{0}))
	a.Linux = &api.LinuxPodSandbox{PodResources: limits(2, 0)}
	ca := sized(ctr("c-a", a, "", ""), limits(2, 0))
	start(t, e.p, a, ca)
	// Its containers fall to 1 CPU; another pod takes the CPU given back
	// and every other CPU of node 0.
	_, err := e.p.UpdateContainer(ctx, a, ca, limits(2, 0))
	require.NoError(t, err)
	_, err = e.p.UpdateContainer(ctx, a, sized(ca, limits(2, 0)), limits(1, 0))
	require.NoError(t, err)
	adm, _ := e.p.Node().Get("default/a")
	other := numaPod("sb-o", "o", decision(e.p.Node().SharedPool().Intersection(mustSet(t, "0-7")).String(), []int{0}))
	start(t, e.p, other, sized(ctr("c-o", other, "", ""), limits(int64(8-adm.CPUs.Size()), 0)))
	require.Error(t, e.p.Node().CheckResize("default/a", 2), "node 0 is full")
	// The shares fall with the old quota, then the quota: both pass.
	down := limits(2, 0)
	down.Cpu.Shares = api.UInt64(uint64(1024))
	require.NoError(t, e.p.UpdatePodSandbox(ctx, a, nil, down))
	require.NoError(t, e.p.UpdatePodSandbox(ctx, a, nil, limits(1, 0)))
	// A rise from the last count (1) is judged, and refused.
	require.ErrorIs(t, e.p.UpdatePodSandbox(ctx, a, nil, limits(2, 0)), kubelet.ErrResizeRefused)

	// A sandbox whose creation resources are not what the pod holds (it
	// was resized before the agent started): no judgement at the pod
	// level; UpdateContainer still decides.
	b := numaPod("sb-b", "b", decision("8-9", []int{1}))
	b.Linux = &api.LinuxPodSandbox{PodResources: limits(1, 0)}
	start(t, e.p, b, sized(ctr("c-b", b, "", ""), limits(2, 0)))
	require.NoError(t, e.p.UpdatePodSandbox(ctx, b, nil, limits(9, 0)))
	require.ErrorIs(t, e.p.UpdatePodSandbox(ctx, b, nil, limits(10, 0)), kubelet.ErrResizeRefused,
		"the last count seen (9) is known now")
}

// A container restarted with other limits (the kubelet's resize of a
// container whose resizePolicy says RestartContainer): its CPUs are resized
// at its creation, its memory refused.
func TestResizeByRestartingTheContainer(t *testing.T) {
	ctx := context.Background()
	e := newResizePlugin(t)
	web := sharedPod("sb-web", "web")
	start(t, e.p, web, sized(ctr("c-web", web, "", ""), limits(1, 0)))
	a := numaPod("sb-a", "a", decision("0-1", []int{0}))
	first := sized(ctr("c-a", a, "", ""), limits(2, 64<<20))
	start(t, e.p, a, first)
	restart := func(id string, r *api.LinuxResources) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
		t.Helper()
		_, err := e.p.StopContainer(ctx, a, first)
		require.NoError(t, err)
		require.NoError(t, e.p.RemoveContainer(ctx, a, first))
		first = sized(ctr(id, a, "", ""), r)
		first.Name = "main"
		return e.p.CreateContainer(ctx, a, first)
	}
	first.Name = "main"
	// The first container was recorded under its own name: restart it once
	// under "main" with the same limits to record that name.
	_, _, err := restart("c-a1", limits(2, 64<<20))
	require.NoError(t, err)
	require.Empty(t, e.lastResized())

	adj, up, err := restart("c-a2", limits(3, 64<<20))
	require.NoError(t, err)
	cpus, mems := cpuset(adj)
	require.Equal(t, []string{"0-2", "0"}, []string{cpus, mems})
	require.Equal(t, map[string]string{"c-web": "3-15"}, updated(up))
	got := e.lastResized()
	require.Len(t, got, 1)
	d, err := kube.ParseDecision(got[0].Decision)
	require.NoError(t, err)
	require.Equal(t, "0-2", d.CPUSet)

	_, _, err = restart("c-a3", limits(3, 128<<20))
	require.ErrorIs(t, err, kubelet.ErrResizeRefused)
	require.Contains(t, err.Error(), "container main (restarted): its memory limit cannot change in place")
	_, _, err = restart("c-a4", limits(9, 64<<20))
	require.ErrorIs(t, err, kubelet.ErrResizeRefused)
	require.Contains(t, err.Error(), "pod default/a from 3 to 9 CPUs")
	adm, _ := e.p.Node().Get("default/a")
	require.Equal(t, "0-2", adm.CPUs.String())
}
