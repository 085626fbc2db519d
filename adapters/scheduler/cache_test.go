package scheduler_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

// requireSameNode compares two nodes' state: the shared pool, the free GPUs,
// the requests and every allocation (CPUs, GPUs, span, policy).
func requireSameNode(t *testing.T, want, got scheduler.NodeStatus) {
	t.Helper()
	require.Equal(t, want.Name, got.Name)
	require.True(t, want.SharedCPUs.Equal(got.SharedCPUs), "node %s shared CPUs %s, want %s", want.Name, got.SharedCPUs, want.SharedCPUs)
	require.Equal(t, want.FreeGPUs, got.FreeGPUs, want.Name)
	require.Equal(t, want.SharedRequestMilli, got.SharedRequestMilli, want.Name)
	require.Equal(t, want.MemoryRequestMiB, got.MemoryRequestMiB, want.Name)
	require.Equal(t, want.Pods, got.Pods, want.Name)
	require.Len(t, got.Allocations, len(want.Allocations))
	for i, a := range want.Allocations {
		b := got.Allocations[i]
		require.Equal(t, a.ID, b.ID)
		require.Equal(t, a.CPUs.String(), b.CPUs.String(), a.ID)
		require.Equal(t, a.GPUs, b.GPUs, a.ID)
		require.Equal(t, a.DenseSpan, b.DenseSpan, a.ID)
		require.Equal(t, a.Policy, b.Policy, a.ID)
		require.Equal(t, a.Exclusive, b.Exclusive, a.ID)
	}
}

// mixedPod returns the i-th pod of a seeded mix of shapes.
func mixedPod(rng *rand.Rand, name string) *kube.Pod {
	switch rng.IntN(6) {
	case 0:
		return numaPod(name, 24, 4, "SingleNUMANode")
	case 1:
		return numaPod(name, 8+rng.IntN(3)*8, 1+rng.IntN(2), "SingleNUMANode")
	case 2:
		return numaPod(name, 16, 4+rng.IntN(4), "Restricted")
	case 3:
		return numaPod(name, 4+rng.IntN(8), 1+rng.IntN(5), "BestEffort")
	case 4:
		return plainPod(name, fmt.Sprintf("%dm", 250+rng.IntN(8000)), 0)
	}
	return plainPod(name, fmt.Sprintf("%d", 1+rng.IntN(4)), 1+rng.IntN(2))
}

func clusterNodes(t testing.TB) []scheduler.Node {
	h100, a100 := preset(t, "dgx-h100"), preset(t, "dgx-a100")
	return []scheduler.Node{
		{Name: "h-0", Labels: optIn, Machine: h100},
		{Name: "h-1", Labels: optIn, Machine: h100},
		{Name: "h-2", Machine: h100},
		{Name: "a-0", Labels: optIn, Machine: a100},
		{Name: "a-1", Labels: optIn, Machine: a100},
	}
}

// TestRestart schedules a mix of pods, binds them with their annotations,
// then builds a new cache from the same nodes and the bound pods (in
// another order): every node's state is the same, and so is the next
// decision.
func TestRestart(t *testing.T) {
	nodes := clusterNodes(t)
	c := newCache(t, scheduler.Config{}, nodes...)
	rng := rand.New(rand.NewPCG(1, 2))
	var boundPods []*kube.Pod
	for i := range 80 {
		pod := mixedPod(rng, fmt.Sprintf("p-%02d", i))
		res, err := c.ScheduleOne(pod)
		if err != nil {
			require.ErrorIs(t, err, scheduler.ErrUnschedulable)
			continue
		}
		b := bound(pod, res.Node, res.Annotations)
		require.NoError(t, c.AddPod(b))
		st, ok := c.Pod(b.Key())
		require.True(t, ok)
		require.True(t, st.Bound)
		boundPods = append(boundPods, b)
	}
	require.Greater(t, len(boundPods), 30)

	restarted := newCache(t, scheduler.Config{}, nodes...)
	rng.Shuffle(len(boundPods), func(i, j int) { boundPods[i], boundPods[j] = boundPods[j], boundPods[i] })
	for _, b := range boundPods {
		require.NoError(t, restarted.AddPod(b), b.Key())
	}
	for _, n := range nodes {
		want, _ := c.Node(n.Name)
		got, _ := restarted.Node(n.Name)
		requireSameNode(t, want, got)
	}
	for i := range 10 {
		pod := mixedPod(rng, fmt.Sprintf("next-%d", i))
		r1, err1 := c.ScheduleOne(pod)
		r2, err2 := restarted.ScheduleOne(pod)
		require.Equal(t, errText(err1), errText(err2))
		require.Equal(t, r1, r2)
	}
}

func TestAddPod(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "a", Labels: optIn, Machine: h100},
		scheduler.Node{Name: "b", Labels: optIn, Machine: h100})
	dec := func(s string) map[string]string { return map[string]string{kube.AnnotationAllocation: s} }
	pod := numaPod("tg", 4, 2, "SingleNUMANode")

	require.ErrorIs(t, c.AddPod(pod), scheduler.ErrNotBound)
	require.ErrorIs(t, c.AddPod(nil), kube.ErrInvalidPod)
	require.ErrorIs(t, c.AddPod(bound(pod, "nope", nil)), scheduler.ErrUnknownNode)

	// Bound pods are facts: what cannot be read exactly is accounted as
	// well as it can be, and the pod is a misfit of its node.
	odd := numaPod("odd", 4, 2, "SingleNUMANode")
	require.NoError(t, c.AddPod(bound(odd, "a", dec(`{"cpuset":"x"}`))))
	st, _ := c.Pod("default/odd")
	require.Equal(t, scheduler.MisfitInvalid, st.Misfit, "a malformed decision")
	require.Contains(t, st.MisfitReason, "accounted as a pod without one")
	require.Len(t, st.Allocation.GPUs, 2, "placed as a pod without a decision")
	require.NoError(t, c.AddPod(bound(odd, "a", dec(`{"cpuset":"2","gpus":[{"id":3},{"id":9}]}`))))
	st, _ = c.Pod("default/odd")
	require.Equal(t, scheduler.MisfitLost, st.Misfit, "a GPU the machine lacks")
	require.Equal(t, []int{3}, st.Allocation.GPUs)
	require.Equal(t, "2", st.Allocation.CPUs.String())
	require.Contains(t, st.MisfitReason, "GPU 9 not on the machine")
	bad := bound(odd, "a", nil)
	bad.Annotations[kube.AnnotationCPUSetScheduler] = "true"
	require.NoError(t, c.AddPod(bad))
	st, _ = c.Pod("default/odd")
	require.Equal(t, scheduler.MisfitInvalid, st.Misfit, "an invalid pod")
	require.Contains(t, st.MisfitReason, "as a pod without a NUMA spec")
	require.False(t, st.NUMA)
	an, _ := c.Node("a")
	require.Equal(t, []scheduler.Misfit{{Pod: "default/odd", Kind: scheduler.MisfitInvalid, Reason: st.MisfitReason}}, an.Misfits)
	require.NoError(t, c.RemovePod(odd))
	an, _ = c.Node("a")
	require.Empty(t, an.Misfits)
	require.Equal(t, 8, an.FreeGPUs)

	// A reserved pod becomes bound by its own decision.
	require.NoError(t, c.Reserve(pod, "a"))
	ann, err := c.PreBind(pod)
	require.NoError(t, err)
	require.NoError(t, c.AddPod(bound(pod, "a", ann)))
	st, _ = c.Pod("default/tg")
	require.True(t, st.Bound)
	require.Equal(t, []int{0, 1}, st.Allocation.GPUs)

	// Another decision replaces the reservation.
	other := `{"policy":"SingleNUMANode","cpuset":"56-59","numaNodes":[1],"gpus":[{"id":4},{"id":5}]}`
	require.NoError(t, c.AddPod(bound(pod, "a", dec(other))))
	st, _ = c.Pod("default/tg")
	require.Equal(t, []int{4, 5}, st.Allocation.GPUs)
	require.Equal(t, "56-59", st.Allocation.CPUs.String())
	a, _ := c.Node("a")
	require.Equal(t, 6, a.FreeGPUs)

	// Bound on another node: it moves.
	require.NoError(t, c.AddPod(bound(pod, "b", dec(other))))
	a, _ = c.Node("a")
	require.Equal(t, 8, a.FreeGPUs)
	require.Empty(t, a.Pods)
	st, _ = c.Pod("default/tg")
	require.Equal(t, "b", st.Node)

	// A decision naming CPUs another pod's decision names: the first in
	// key order holds them, the other the rest.
	thief := numaPod("thief", 4, 0, "SingleNUMANode")
	require.NoError(t, c.AddPod(bound(thief, "b", dec(`{"policy":"SingleNUMANode","cpuset":"57-60","numaNodes":[1]}`))))
	st, ok := c.Pod("default/thief")
	require.True(t, ok)
	require.Equal(t, "60", st.Allocation.CPUs.String())
	require.Equal(t, scheduler.MisfitLost, st.Misfit)
	require.Contains(t, st.MisfitReason, "CPUs 57-59 held by default/tg")
	require.NoError(t, c.RemovePod(thief))

	// A NUMA pod bound without a decision is placed by the node's policy.
	require.NoError(t, c.AddPod(bound(numaPod("legacy", 8, 1, "SingleNUMANode"), "a", nil)))
	st, _ = c.Pod("default/legacy")
	require.Equal(t, 8, st.Allocation.CPUs.Size())
	// ... unless it cannot be: accounted without CPUs and GPUs, a misfit.
	require.NoError(t, c.AddPod(bound(numaPod("legacy2", 8, 5, "SingleNUMANode"), "a", nil)))
	st, _ = c.Pod("default/legacy2")
	require.Nil(t, st.Allocation)
	require.Equal(t, scheduler.MisfitUnplaced, st.Misfit)
	require.Contains(t, st.MisfitReason, "has no numaplace.io/allocation annotation")
	require.NoError(t, c.RemovePod(numaPod("legacy2", 8, 5, "SingleNUMANode")))

	// A bound plain pod is accounted whatever the pool says: it runs.
	require.NoError(t, c.AddPod(bound(plainPod("hog", "500", 0), "a", nil)))
	a, _ = c.Node("a")
	require.Equal(t, int64(500_000), a.SharedRequestMilli)
	_, err = c.ScheduleOne(plainPod("more", "1", 0))
	require.NoError(t, err, "node b still has room")
}

func TestNodes(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "a", Labels: optIn, Machine: h100})
	require.ErrorIs(t, c.AddNode(scheduler.Node{Name: "a", Machine: h100}), scheduler.ErrNodeExists)
	require.ErrorIs(t, c.AddNode(scheduler.Node{Name: "", Machine: h100}), scheduler.ErrInvalidNode)
	require.ErrorIs(t, c.AddNode(scheduler.Node{Name: "x"}), scheduler.ErrInvalidNode)
	require.ErrorIs(t, c.UpdateNode(scheduler.Node{Name: "x", Machine: h100}), scheduler.ErrUnknownNode)
	require.ErrorIs(t, c.UpdateNode(scheduler.Node{Name: "a"}), scheduler.ErrInvalidNode)
	require.ErrorIs(t, c.RemoveNode("x"), scheduler.ErrUnknownNode)
	_, ok := c.Node("x")
	require.False(t, ok)

	tg := numaPod("tg", 24, 4, "SingleNUMANode")
	web := plainPod("web", "100", 0)
	require.NoError(t, c.Reserve(tg, "a"))
	require.NoError(t, c.Reserve(web, "a"))
	before, _ := c.Node("a")

	// Labels only: the opt-out stops new NUMA pods and keeps the old ones.
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "a", Labels: map[string]string{"x": "y"}, Machine: h100}))
	requireRefusal(t, c.Filter(numaPod("next", 4, 0, "SingleNUMANode"), "a"), scheduler.ErrNotOptedIn,
		"node(s) without the label ack.node.gpu.schedule=topology")
	st, _ := c.Node("a")
	require.False(t, st.OptedIn)
	requireSameNode(t, before, st)

	// The same machine read back from the node's report: nothing changes.
	r, err := kube.NRTFromState(h100, nil)
	require.NoError(t, err)
	same, err := kube.MachineFromNRT(r)
	require.NoError(t, err)
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "a", Labels: optIn, Machine: same}))
	st, _ = c.Node("a")
	require.Same(t, same, st.Machine)
	requireSameNode(t, before, st)

	// A smaller machine takes effect at once: the reservation that cannot
	// be held on it is dropped (its binding fails and it is tried again),
	// the plain pod stays accounted beyond the shared pool.
	small := preset(t, "small-1s")
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "a", Labels: optIn, Machine: small}))
	st, _ = c.Node("a")
	require.Same(t, small, st.Machine)
	require.Equal(t, small.NumCPUs(), st.AllocatableCPUs)
	require.Equal(t, []string{"default/web"}, st.Pods)
	_, err = c.PreBind(tg)
	require.ErrorIs(t, err, allocator.ErrUnknownID)
	require.NoError(t, c.Unreserve(web))

	// RemoveNode forgets the node's pods; a re-added node is empty.
	require.NoError(t, c.Reserve(numaPod("x", 1, 0, "SingleNUMANode"), "a"))
	require.NoError(t, c.RemoveNode("a"))
	_, ok = c.Pod("default/x")
	require.False(t, ok)
	require.Empty(t, c.Nodes())
	require.NoError(t, c.AddNode(scheduler.Node{Name: "a", Labels: optIn, Machine: h100}))
	st, _ = c.Node("a")
	require.Empty(t, st.Pods)
}

// TestUpdateNodeNewMachine moves pods to another machine value of the same
// shape, then refuses one where the pod's NUMA node and GPU do not exist.
func TestUpdateNodeNewMachine(t *testing.T) {
	build := func(ids ...int) *topology.Machine {
		b := topology.NewBuilder("two")
		for i, id := range ids {
			cpus := fmt.Sprintf("%d-%d", i*4, i*4+3)
			js := fmt.Sprintf(`{"numaNodes":[{"id":%d,"socket":-1,"cpus":%q}]}`, id, cpus)
			m, err := topology.ParseJSON([]byte(js))
			require.NoError(t, err)
			b.AddNode(m.Node(0))
			b.AddGPU(topology.GPU{ID: i, NUMANode: m.NodeID(0)})
		}
		m, err := b.Build()
		require.NoError(t, err)
		return m
	}
	m1, m2 := build(0, 1), build(0, 1)
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Labels: optIn, Machine: m1})
	require.NoError(t, c.Reserve(numaPod("p", 2, 1, "SingleNUMANode"), "n"))
	before, _ := c.Node("n")
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "n", Labels: optIn, Machine: m2}))
	after, _ := c.Node("n")
	requireSameNode(t, before, after)

	// A machine without the reserved pod's GPU drops the reservation.
	m3 := build(5)
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "n", Labels: optIn, Machine: m3}))
	_, ok := c.Pod("default/p")
	require.False(t, ok)
}

func TestFree(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "a", Labels: optIn, Machine: h100})
	_, ok := c.Free("x")
	require.False(t, ok)
	before, ok := c.Free("a")
	require.True(t, ok)
	require.Len(t, before, h100.NumNodes())
	require.NoError(t, c.Reserve(numaPod("tg", 24, 4, "SingleNUMANode"), "a"))
	st, _ := c.Pod("default/tg")
	after, _ := c.Free("a")
	for i, f := range after {
		require.Equal(t, h100.NodeID(i), f.ID)
		if st.Allocation.DenseSpan.Contains(i) {
			require.Equal(t, before[i].CPUs-24, f.CPUs)
			require.Equal(t, before[i].GPUs-4, f.GPUs)
		} else {
			require.Equal(t, before[i], f)
		}
	}
}
