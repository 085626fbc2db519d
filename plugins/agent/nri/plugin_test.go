package nri_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	nri "github.com/numaplace/numaplace/plugins/agent/nri"
	"github.com/stretchr/testify/require"
)

var ctx = context.Background()

func TestCreateContainerSetsCpusetMemsAndGPUs(t *testing.T) {
	e := newPlugin(t, "")
	sb := numaPod("sb-a", "a", decision("0-3", []int{0}, 0, 1))
	require.NoError(t, e.p.RunPodSandbox(ctx, sb))

	adj, up, err := e.p.CreateContainer(ctx, sb, ctr("c1", sb, "", ""))
	require.NoError(t, err)
	require.Empty(t, up)
	cpus, mems := cpuset(adj)
	require.Equal(t, "0-3", cpus)
	require.Equal(t, "0", mems)
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-a0,GPU-a1"}, envOf(adj))

	// The pod's second container gets the same: the admission is idempotent.
	adj2, _, err := e.p.CreateContainer(ctx, sb, ctr("c2", sb, "", ""))
	require.NoError(t, err)
	require.Equal(t, adj.String(), adj2.String())
	require.Equal(t, map[string]string{"default/a": "decision"}, admitted(e.p))
	require.Empty(t, e.events.list())
}

func TestCreateContainerAdmitsWithoutRunPodSandbox(t *testing.T) {
	// A plugin started between the sandbox and its container admits at
	// CreateContainer.
	e := newPlugin(t, "")
	sb := numaPod("sb-a", "a", decision("8-11", []int{1}, 2))
	adj, _, err := e.p.CreateContainer(ctx, sb, ctr("c1", sb, "", ""))
	require.NoError(t, err)
	cpus, mems := cpuset(adj)
	require.Equal(t, "8-11", cpus)
	require.Equal(t, "1", mems)
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-b0"}, envOf(adj))
}

func TestExclusivePodWithoutGPUsSeesNone(t *testing.T) {
	e := newPlugin(t, "")
	sb := numaPod("sb-a", "a", decision("4-7", []int{0}))
	adj, _, err := e.p.CreateContainer(ctx, sb, ctr("c1", sb, "", ""))
	require.NoError(t, err)
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=void"}, envOf(adj))
}

func TestSharedPoolPod(t *testing.T) {
	e := newPlugin(t, "")
	sb := sharedPod("sb-web", "web")
	require.NoError(t, e.p.RunPodSandbox(ctx, sb))
	adj, _, err := e.p.CreateContainer(ctx, sb, ctr("w1", sb, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b1"))
	require.NoError(t, err)
	cpus, mems := cpuset(adj)
	require.Equal(t, "0-15", cpus)
	require.Equal(t, "0-1", mems)
	require.Empty(t, envOf(adj), "a shared-pool container's environment (and device plugin GPUs) is left alone")
	require.Equal(t, map[string]string{"default/web": "shared"}, admitted(e.p))

	// An exclusive pod takes its CPUs out of the shared pool for the next
	// shared-pool container.
	x := numaPod("sb-x", "x", decision("0-3", []int{0}))
	require.NoError(t, e.p.RunPodSandbox(ctx, x))
	sb2 := sharedPod("sb-web2", "web2")
	adj, _, err = e.p.CreateContainer(ctx, sb2, ctr("w2", sb2, "", ""))
	require.NoError(t, err)
	cpus, _ = cpuset(adj)
	require.Equal(t, "4-15", cpus)
}

func TestConflictingDecisionIsRefused(t *testing.T) {
	e := newPlugin(t, "")
	a := numaPod("sb-a", "a", decision("0-3", []int{0}, 0))
	require.NoError(t, e.p.RunPodSandbox(ctx, a))

	b := numaPod("sb-b", "b", decision("2-5", []int{0}, 0, 1))
	err := e.p.RunPodSandbox(ctx, b)
	require.Error(t, err)
	require.ErrorIs(t, err, kubelet.ErrTopologyAffinity)
	var tae *kubelet.TopologyAffinityError
	require.ErrorAs(t, err, &tae)
	require.Equal(t, "default/a", tae.Conflicts[0].HeldBy)
	var re *nri.RefusedError
	require.ErrorAs(t, err, &re)
	require.Equal(t, nri.ReasonTopologyAffinityError, re.Reason)
	require.Contains(t, err.Error(), "CPUs 2-3 are held by pod default/a")
	require.Contains(t, err.Error(), "GPU 0 is held by pod default/a")

	ev := e.events.list()
	require.Len(t, ev, 1)
	require.Equal(t, nri.Event{Namespace: "default", Name: "b", UID: "uid-b", Type: nri.EventTypeWarning,
		Reason: nri.ReasonTopologyAffinityError, Message: err.Error()}, ev[0])
	require.Contains(t, e.log.String(), "pod refused")
	require.Contains(t, e.log.String(), "CPUs 2-3 are held by pod default/a")

	// Its containers are refused too, and nothing changed.
	adj, up, err := e.p.CreateContainer(ctx, b, ctr("b1", b, "", ""))
	require.ErrorIs(t, err, kubelet.ErrTopologyAffinity)
	require.Nil(t, adj)
	require.Nil(t, up)
	require.Len(t, e.events.list(), 2)
	require.Equal(t, map[string]string{"default/a": "decision"}, admitted(e.p))

	// The runtime stops and removes a sandbox it failed to run: harmless.
	require.NoError(t, e.p.StopPodSandbox(ctx, b))
	require.NoError(t, e.p.RemovePodSandbox(ctx, b))
	require.Equal(t, map[string]string{"default/a": "decision"}, admitted(e.p))
}

func TestInvalidPodsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		sb   *api.PodSandbox
		is   error
		msg  string
	}{
		{"spec without decision", numaPod("sb", "nodecision", ""), nri.ErrNoDecision, "has no numaplace.io/allocation decision"},
		{"malformed decision", numaPod("sb", "bad", `{"cpuset":"3-1"}`), kube.ErrInvalidDecision, "invalid numaplace.io/allocation"},
		{"decision on another machine", numaPod("sb", "gpu9",
			`{"policy":"SingleNUMANode","cpuset":"0-1","numaNodes":[0],"gpus":[{"id":9}]}`), kubelet.ErrTopologyAffinity, "GPU 9 does not exist on this node"},
		{"bad spec", func() *api.PodSandbox {
			sb := numaPod("sb", "spec", decision("0-1", []int{0}))
			sb.Annotations[kube.AnnotationCPUSetScheduler] = "true"
			return sb
		}(), kube.ErrInvalidPod, "legacy standalone CPU"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newPlugin(t, "")
			err := e.p.RunPodSandbox(ctx, tc.sb)
			require.ErrorIs(t, err, tc.is)
			require.Contains(t, err.Error(), tc.msg)
			ev := e.events.list()
			require.Len(t, ev, 1)
			require.Equal(t, nri.EventTypeWarning, ev[0].Type)
			if errors.Is(tc.is, kubelet.ErrTopologyAffinity) {
				require.Equal(t, nri.ReasonTopologyAffinityError, ev[0].Reason)
			} else {
				require.Equal(t, nri.ReasonInvalidPlacement, ev[0].Reason)
			}
			require.Empty(t, admitted(e.p))
		})
	}
}

func TestAdmittedDifferentlyIsRefused(t *testing.T) {
	e := newPlugin(t, "")
	require.NoError(t, e.p.RunPodSandbox(ctx, numaPod("sb-a", "a", decision("0-3", []int{0}))))
	// The same pod in a new sandbox with another decision.
	err := e.p.RunPodSandbox(ctx, numaPod("sb-a2", "a", decision("4-7", []int{0})))
	require.ErrorIs(t, err, kubelet.ErrAdmittedDifferently)
	require.Equal(t, nri.ReasonInvalidPlacement, e.events.list()[0].Reason)
}

func TestSharedContainersUpdatedInResponses(t *testing.T) {
	// Without an updater, the shared-pool containers are updated in the
	// responses to CreateContainer and StopContainer.
	e := newPlugin(t, "")
	web := sharedPod("sb-web", "web")
	createStarted(t, e.p, web, "w1")
	createStarted(t, e.p, web, "w2")

	x := numaPod("sb-x", "x", decision("0-3", []int{0}, 0))
	require.NoError(t, e.p.RunPodSandbox(ctx, x))
	_, up, err := e.p.CreateContainer(ctx, x, ctr("x1", x, "", ""))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"w1": "4-15", "w2": "4-15"}, updated(up))
	for _, u := range up {
		require.True(t, u.GetIgnoreFailure(), "a shared container may have exited meanwhile")
	}
	// Once updated, they are not updated again.
	_, up, err = e.p.CreateContainer(ctx, x, ctr("x2", x, "", ""))
	require.NoError(t, err)
	require.Empty(t, up)

	// The exclusive pod leaves: the next response gives the CPUs back.
	for _, id := range []string{"x1", "x2"} {
		_, err = e.p.StopContainer(ctx, x, ctr(id, x, "", ""))
		require.NoError(t, err)
	}
	require.NoError(t, e.p.StopPodSandbox(ctx, x))
	up, err = e.p.StopContainer(ctx, web, ctr("w2", web, "", ""))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"w1": "0-15"}, updated(up), "w2 is stopping and is not updated")
}

func TestSharedContainersUpdatedWhenExclusivePodArrives(t *testing.T) {
	// With an updater (the stub), a change of the shared pool is sent at
	// once, before the exclusive pod's first container is created.
	e := newPlugin(t, "")
	u := newUpdater()
	e.p.SetUpdater(u)
	web := sharedPod("sb-web", "web")
	createStarted(t, e.p, web, "w1")

	x := numaPod("sb-x", "x", decision("8-15", []int{1}, 2, 3))
	require.NoError(t, e.p.RunPodSandbox(ctx, x))
	require.Equal(t, map[string]string{"w1": "0-7"}, updated(u.next(t)))

	// The exclusive container's reply repeats the update only if the runtime
	// has not confirmed the unsolicited one yet.
	adj, up, err := e.p.CreateContainer(ctx, x, ctr("x1", x, "", ""))
	require.NoError(t, err)
	if len(up) > 0 {
		require.Equal(t, map[string]string{"w1": "0-7"}, updated(up))
	}
	cpus, _ := cpuset(adj)
	require.Equal(t, "8-15", cpus)

	// Removal gives the CPUs back to the shared containers.
	require.NoError(t, e.p.StopPodSandbox(ctx, x))
	require.Equal(t, map[string]string{"w1": "0-15"}, updated(u.next(t)))
	require.NoError(t, e.p.RemovePodSandbox(ctx, x))
	require.Contains(t, e.log.String(), "shared pool changed")
}

// failingUpdater fails every update.
type failingUpdater struct{ calls chan int }

func (f failingUpdater) UpdateContainers(up []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	f.calls <- len(up)
	return nil, errors.New("stub: no service/connection")
}

func TestFailedUnsolicitedUpdateIsRetriedInResponses(t *testing.T) {
	e := newPlugin(t, "")
	f := failingUpdater{calls: make(chan int, 4)}
	e.p.SetUpdater(f)
	web := sharedPod("sb-web", "web")
	createStarted(t, e.p, web, "w1")
	x := numaPod("sb-x", "x", decision("0-3", []int{0}))
	require.NoError(t, e.p.RunPodSandbox(ctx, x))
	require.Equal(t, 1, <-f.calls)
	// The failed update is sent again in the exclusive container's response.
	require.Eventually(t, func() bool { return strings.Contains(e.log.String(), "cannot update") }, 5*time.Second, 10*time.Millisecond)
	_, up, err := e.p.CreateContainer(ctx, x, ctr("x1", x, "", ""))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"w1": "4-15"}, updated(up))
}

func TestRemovalIsIdempotent(t *testing.T) {
	e := newPlugin(t, filepath.Join(t.TempDir(), "cp.json"))
	a := numaPod("sb-a", "a", decision("0-3", []int{0}, 0))
	require.NoError(t, e.p.RunPodSandbox(ctx, a))
	_, _, err := e.p.CreateContainer(ctx, a, ctr("a1", a, "", ""))
	require.NoError(t, err)

	require.NoError(t, e.p.StopPodSandbox(ctx, a))
	require.Empty(t, admitted(e.p))
	require.NoError(t, e.p.RemovePodSandbox(ctx, a))
	require.NoError(t, e.p.RemovePodSandbox(ctx, a))
	require.NoError(t, e.p.StopPodSandbox(ctx, sharedPod("sb-never", "never")))
	require.Empty(t, admitted(e.p))
	require.Equal(t, "0-15", e.p.Node().SharedPool().String())

	// The pod can come back (a new sandbox) and get the same CPUs.
	a2 := numaPod("sb-a2", "a", decision("0-3", []int{0}, 0))
	require.NoError(t, e.p.RunPodSandbox(ctx, a2))
	require.Equal(t, map[string]string{"default/a": "decision"}, admitted(e.p))
}

func TestOlderSandboxRemovalKeepsNewerAdmission(t *testing.T) {
	e := newPlugin(t, "")
	old := numaPod("sb-old", "a", decision("0-3", []int{0}))
	require.NoError(t, e.p.RunPodSandbox(ctx, old))
	// The pod's sandbox is recreated (same pod, same decision) before the
	// old one is removed.
	cur := numaPod("sb-new", "a", decision("0-3", []int{0}))
	require.NoError(t, e.p.RunPodSandbox(ctx, cur))
	require.NoError(t, e.p.StopPodSandbox(ctx, old))
	require.NoError(t, e.p.RemovePodSandbox(ctx, old))
	require.Equal(t, map[string]string{"default/a": "decision"}, admitted(e.p))
	require.NoError(t, e.p.RemovePodSandbox(ctx, cur))
	require.Empty(t, admitted(e.p))
}

func TestRestartReconcilesWithSynchronize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	first := newPlugin(t, path)
	a := numaPod("sb-a", "a", decision("0-3", []int{0}, 0))
	b := numaPod("sb-b", "b", decision("8-11", []int{1}, 2))
	web := sharedPod("sb-web", "web")
	for _, sb := range []*api.PodSandbox{a, b, web} {
		require.NoError(t, first.p.RunPodSandbox(ctx, sb))
	}
	first.p.Close()

	// While the plugin was away: b ended, c started with its decision, and
	// a's container was created without the plugin (so with every CPU).
	c := numaPod("sb-c", "c", decision("4-7", []int{0}, 1))
	second := newPlugin(t, path)
	require.Equal(t, map[string]string{"default/a": "decision", "default/b": "decision", "default/web": "shared"},
		admitted(second.p), "restored from the checkpoint")
	up, err := second.p.Synchronize(ctx,
		[]*api.PodSandbox{a, c, web},
		[]*api.Container{
			ctr("a1", a, "0-15", "0-1", "NVIDIA_VISIBLE_DEVICES=GPU-a0"),
			ctr("c1", c, "4-7", "0", "NVIDIA_VISIBLE_DEVICES=GPU-a1"),
			ctr("w1", web, "0-15", "0-1"),
		})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"default/a": "decision", "default/c": "decision", "default/web": "shared"},
		admitted(second.p))
	require.Equal(t, map[string]string{"a1": "0-3/0", "w1": "8-15"}, updated(up),
		"a's container gets its decision, the shared one loses a's and c's CPUs; c1 is already right")
	log := second.log.String()
	require.Contains(t, log, "removed pod: in the checkpoint but no longer running")
	require.Contains(t, log, "pod=default/b")
	require.Contains(t, log, "admitted pod: running, not in the checkpoint")
	require.Contains(t, log, "pod=default/c")

	// A third start from the same checkpoint finds nothing to change.
	second.p.Close()
	third := newPlugin(t, path)
	up, err = third.p.Synchronize(ctx, []*api.PodSandbox{a, c, web}, []*api.Container{
		ctr("a1", a, "0-3", "0"), ctr("c1", c, "4-7", "0"), ctr("w1", web, "8-15", "0-1")})
	require.NoError(t, err)
	require.Empty(t, up)
	require.NotContains(t, third.log.String(), "removed pod")
}

func TestSynchronizeWithAnotherUID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	first := newPlugin(t, path)
	require.NoError(t, first.p.RunPodSandbox(ctx, numaPod("sb-a", "a", decision("0-3", []int{0}))))
	first.p.Close()

	// The pod was deleted and created again with another decision.
	again := numaPod("sb-a2", "a", decision("8-9", []int{1}))
	again.Uid = "uid-a-2"
	again.Pid = uint32(os.Getpid()) // a running sandbox whose container is not created yet
	second := newPlugin(t, path)
	_, err := second.p.Synchronize(ctx, []*api.PodSandbox{again}, nil)
	require.NoError(t, err)
	adm, ok := second.p.Node().Get("default/a")
	require.True(t, ok)
	require.Equal(t, "8-9", adm.CPUs.String())
	require.Equal(t, "uid-a-2", adm.UID)
	require.Contains(t, second.log.String(), "in the checkpoint with UID uid-a, running with UID uid-a-2")
}

func TestSynchronizeConfinesPodsItCannotAdmit(t *testing.T) {
	e := newPlugin(t, "")
	u := newUpdater()
	e.p.SetUpdater(u)
	a := numaPod("sb-a", "a", decision("0-3", []int{0}))
	b := numaPod("sb-b", "b", decision("3-4", []int{0}))
	nodec := numaPod("sb-n", "n", "")
	up, err := e.p.Synchronize(ctx, []*api.PodSandbox{a, b, nodec, nil, {Id: "nameless"}},
		[]*api.Container{ctr("a1", a, "0-15", "0-1"), ctr("b1", b, "0-15", "0-1"), ctr("n1", nodec, "0-15", "0-1"), nil})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"a1": "0-3/0", "b1": "4-15", "n1": "4-15"}, updated(up),
		"the containers of the pods that cannot be admitted hold no exclusive CPUs: the shared pool, not a's CPU 3")
	require.Equal(t, map[string]string{"default/a": "decision"}, admitted(e.p))
	ev := e.events.list()
	require.Len(t, ev, 2)
	for _, x := range ev {
		require.Equal(t, nri.ReasonUnmanaged, x.Reason)
	}
	require.Contains(t, ev[0].Message+ev[1].Message, "CPU 3 is held by pod default/a")
	require.Contains(t, ev[0].Message, "its containers are confined to the shared pool")

	// They follow the shared pool as it changes.
	x := numaPod("sb-x", "x", decision("8-11", []int{1}))
	require.NoError(t, e.p.RunPodSandbox(ctx, x))
	require.Equal(t, map[string]string{"b1": "4-7,12-15", "n1": "4-7,12-15"}, updated(u.next(t)))
}

func TestSynchronizeTwoSandboxesOfOnePod(t *testing.T) {
	e := newPlugin(t, "")
	old := numaPod("sb-old", "a", decision("0-3", []int{0}))
	cur := numaPod("sb-cur", "a", decision("0-3", []int{0}))
	_, err := e.p.Synchronize(ctx, []*api.PodSandbox{cur, old}, []*api.Container{ctr("a1", cur, "0-3", "0")})
	require.NoError(t, err)
	// The old sandbox's removal leaves the pod that runs in the current one.
	require.NoError(t, e.p.RemovePodSandbox(ctx, old))
	require.Equal(t, map[string]string{"default/a": "decision"}, admitted(e.p))
}

func TestNilInputsAreErrors(t *testing.T) {
	e := newPlugin(t, "")
	sb := sharedPod("sb", "p")
	require.Error(t, e.p.RunPodSandbox(ctx, nil))
	require.Error(t, e.p.StopPodSandbox(ctx, nil))
	require.Error(t, e.p.RemovePodSandbox(ctx, nil))
	_, _, err := e.p.CreateContainer(ctx, nil, nil)
	require.Error(t, err)
	_, _, err = e.p.CreateContainer(ctx, sb, nil)
	require.Error(t, err)
	_, err = e.p.StopContainer(ctx, sb, nil)
	require.Error(t, err)
	require.Error(t, e.p.RemoveContainer(ctx, sb, nil))
	require.Error(t, e.p.RunPodSandbox(ctx, &api.PodSandbox{Id: "x"}), "a sandbox without a pod name")
	_, err = nri.New(nil, nri.Options{})
	require.Error(t, err)
	require.NoError(t, e.p.RemoveContainer(ctx, sb, ctr("unknown", sb, "", "")))
	mask, err := e.p.Configure(ctx, "", "containerd", "v2.1.0")
	require.NoError(t, err)
	require.Zero(t, mask)
	e.p.Shutdown(ctx)
	e.p.Close()
	e.p.Close()
}

func TestPodFromSandbox(t *testing.T) {
	p, err := nri.PodFromSandbox(numaPod("sb", "a", decision("0-3", []int{0}, 0, 1)))
	require.NoError(t, err)
	require.Equal(t, "default/a", p.Key())
	require.Equal(t, "uid-a", p.UID)
	require.Len(t, p.Containers, 1)
	require.Equal(t, map[string]string{"cpu": "4", "aliyun.com/gpu": "2"}, p.Containers[0].Requests)
	req, err := kube.ParsePod(p, kube.Config{})
	require.NoError(t, err)
	require.True(t, req.NUMA)
	require.Equal(t, 4, req.CPUs)
	require.Equal(t, 2, req.GPUs)

	// A decision without a NUMA spec, and a pod with neither.
	sb := sharedPod("sb", "b")
	sb.Annotations[kube.AnnotationAllocation] = decision("0-1", []int{0})
	p, err = nri.PodFromSandbox(sb)
	require.NoError(t, err)
	require.Empty(t, p.Containers)
	p, err = nri.PodFromSandbox(sharedPod("sb", "c"))
	require.NoError(t, err)
	require.Equal(t, "c", p.Labels["app"])

	_, err = nri.PodFromSandbox(nil)
	require.Error(t, err)
	_, err = nri.PodFromSandbox(&api.PodSandbox{Id: "x"})
	require.ErrorContains(t, err, `pod sandbox "x" has no pod name`)
	_, err = nri.PodFromSandbox(numaPod("sb", "d", ""))
	require.ErrorIs(t, err, nri.ErrNoDecision)
	_, err = nri.PodFromSandbox(numaPod("sb", "d", "{"))
	require.ErrorIs(t, err, kube.ErrInvalidDecision)
}

func TestLogEvents(t *testing.T) {
	buf := &syncBuffer{}
	l := nri.LogEvents{Logger: slog.New(slog.NewTextHandler(buf, nil))}
	l.Record(ctx, nri.Event{Namespace: "ns", Name: "p", UID: "u", Type: nri.EventTypeWarning,
		Reason: nri.ReasonTopologyAffinityError, Message: "CPUs 0-3 are held by pod ns/q"})
	out := buf.String()
	require.Contains(t, out, "level=WARN")
	require.Contains(t, out, "reason=TopologyAffinityError")
	require.Contains(t, out, `message="CPUs 0-3 are held by pod ns/q"`)
	l.Record(ctx, nri.Event{Type: nri.EventTypeNormal, Reason: "Fine"})
	require.Contains(t, buf.String(), "level=INFO")
	nri.LogEvents{}.Record(ctx, nri.Event{Type: nri.EventTypeNormal}) // slog.Default
}
