package nri_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"
)

// runtime models how containerd applies container updates (the plugin's
// unsolicited UpdateContainers, and the updates of a handler's reply)
// around a container's creation and start, and reports success for every
// one of them, as containerd v2.4 does:
//
//   - while the container's CreateContainer is in flight (not yet in its
//     container store), an update is dropped (nri_api_linux.go
//     UpdateContainer returns nil for an unknown container);
//   - once created and until its task runs, an update changes its spec
//     only; the task's cgroup gets the spec as it is when the task is
//     created, so an update after that is lost for the cgroup;
//   - once running, an update reaches the cgroup (and the spec).
type runtime struct {
	mu     sync.Mutex
	state  map[string]string // "creating", "created", "starting", "running"
	spec   map[string]string // cpuset.cpus in the spec
	cgroup map[string]string // cpuset.cpus in effect
}

func newRuntime() *runtime {
	return &runtime{state: map[string]string{}, spec: map[string]string{}, cgroup: map[string]string{}}
}

// UpdateContainers applies the updates as containerd does and reports
// none failed.
func (r *runtime) UpdateContainers(up []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	r.apply(up)
	return nil, nil
}

func (r *runtime) apply(up []*api.ContainerUpdate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range up {
		id, cpus := u.GetContainerId(), u.GetLinux().GetResources().GetCpu().GetCpus()
		switch r.state[id] {
		case "created", "starting":
			r.spec[id] = cpus
		case "running":
			r.spec[id], r.cgroup[id] = cpus, cpus
		} // "creating" or unknown: dropped, reported applied
	}
}

// set moves container id to state; "created" takes the adjustment's cpuset
// as its spec, "starting" creates the task from the spec.
func (r *runtime) set(id, state string, adj *api.ContainerAdjustment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state[id] = state
	switch state {
	case "created":
		r.spec[id] = adj.GetLinux().GetResources().GetCpu().GetCpus()
	case "starting":
		r.cgroup[id] = r.spec[id]
	}
}

func (r *runtime) cpus(id string) (spec, cgroup string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.spec[id], r.cgroup[id]
}

// postStart reports container id of sb started to the plugin, if it
// handles PostStartContainer, with the cpuset of its spec as containerd
// reports it.
func postStart(t *testing.T, p any, r *runtime, sb *api.PodSandbox, id string) {
	t.Helper()
	r.set(id, "running", nil)
	h, ok := p.(interface {
		PostStartContainer(context.Context, *api.PodSandbox, *api.Container) error
	})
	if !ok {
		return
	}
	spec, _ := r.cpus(id)
	require.NoError(t, h.PostStartContainer(ctx, sb, ctr(id, sb, spec, "")))
}

// TestUpdateOfAContainerBeingCreatedIsNotTakenAsApplied: a shared-pool
// container whose creation is in flight when an exclusive pod arrives
// misses the update that takes the exclusive CPUs from it (containerd
// drops it and reports success); it must still end on the shared pool.
func TestUpdateOfAContainerBeingCreatedIsNotTakenAsApplied(t *testing.T) {
	e := newPlugin(t, "")
	r := newRuntime()
	e.p.SetUpdater(r)

	web := sharedPod("sb-web", "web")
	require.NoError(t, e.p.RunPodSandbox(ctx, web))
	adj, up, err := e.p.CreateContainer(ctx, web, ctr("w1", web, "", ""))
	require.NoError(t, err)
	r.apply(up)
	require.Equal(t, "0-15", adj.GetLinux().GetResources().GetCpu().GetCpus())
	r.set("w1", "creating", nil) // containerd has not added it to its store yet

	// The exclusive pod arrives meanwhile: the pool loses 0-3.
	x := numaPod("sb-x", "x", decision("0-3", []int{0}))
	require.NoError(t, e.p.RunPodSandbox(ctx, x))
	xadj, up, err := e.p.CreateContainer(ctx, x, ctr("x1", x, "", ""))
	require.NoError(t, err)
	r.apply(up)
	r.set("x1", "created", xadj)
	r.set("x1", "starting", nil)
	postStart(t, e.p, r, x, "x1")
	require.Equal(t, "4-15", e.p.Node().SharedPool().String())

	// w1's creation completes (with the cpuset it was created with) and it
	// starts.
	r.set("w1", "created", adj)
	r.set("w1", "starting", nil)
	postStart(t, e.p, r, web, "w1")
	require.Eventually(t, func() bool { _, cg := r.cpus("w1"); return cg == "4-15" }, 5*time.Second, 5*time.Millisecond,
		"w1 must end on the shared pool 4-15, not on x's exclusive CPUs")
	_, cg := r.cpus("x1")
	require.Equal(t, "0-3", cg)
}

// TestUpdateOfAContainerBeingStartedIsNotTakenAsApplied: an update that
// arrives after the container's task was created from its spec, and before
// the task runs, changes the spec only; the container must still end on
// the shared pool.
func TestUpdateOfAContainerBeingStartedIsNotTakenAsApplied(t *testing.T) {
	e := newPlugin(t, "")
	r := newRuntime()
	e.p.SetUpdater(r)

	web := sharedPod("sb-web", "web")
	require.NoError(t, e.p.RunPodSandbox(ctx, web))
	adj, _, err := e.p.CreateContainer(ctx, web, ctr("w1", web, "", ""))
	require.NoError(t, err)
	r.set("w1", "created", adj)
	r.set("w1", "starting", nil) // the task is created with 0-15

	x := numaPod("sb-x", "x", decision("8-15", []int{1}))
	require.NoError(t, e.p.RunPodSandbox(ctx, x))
	xadj, up, err := e.p.CreateContainer(ctx, x, ctr("x1", x, "", ""))
	require.NoError(t, err)
	r.apply(up)
	r.set("x1", "created", xadj)
	r.set("x1", "starting", nil)
	postStart(t, e.p, r, x, "x1")

	postStart(t, e.p, r, web, "w1")
	require.Eventually(t, func() bool { _, cg := r.cpus("w1"); return cg == "0-7" }, 5*time.Second, 5*time.Millisecond,
		"w1 must end on the shared pool 0-7, not on x's exclusive CPUs")
}

// TestStartedContainerCorrectedInTheNextReply: without an updater, a
// container that started with a cpuset that is no longer its own gets it
// in the next reply.
func TestStartedContainerCorrectedInTheNextReply(t *testing.T) {
	e := newPlugin(t, "")
	r := newRuntime()
	web := sharedPod("sb-web", "web")
	require.NoError(t, e.p.RunPodSandbox(ctx, web))
	adj, _, err := e.p.CreateContainer(ctx, web, ctr("w1", web, "", ""))
	require.NoError(t, err)
	r.set("w1", "creating", nil)

	x := numaPod("sb-x", "x", decision("0-3", []int{0}))
	require.NoError(t, e.p.RunPodSandbox(ctx, x))
	_, up, err := e.p.CreateContainer(ctx, x, ctr("x1", x, "", ""))
	require.NoError(t, err)
	r.apply(up) // w1's update, if any, is dropped
	r.set("w1", "created", adj)
	r.set("w1", "starting", nil)
	postStart(t, e.p, r, web, "w1")

	_, up, err = e.p.CreateContainer(ctx, x, ctr("x2", x, "", ""))
	require.NoError(t, err)
	r.apply(up)
	_, cg := r.cpus("w1")
	require.Equal(t, "4-15", cg)
	// Applied once: not sent again.
	_, up, err = e.p.CreateContainer(ctx, x, ctr("x3", x, "", ""))
	require.NoError(t, err)
	require.Empty(t, up)
}
