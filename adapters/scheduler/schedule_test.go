package scheduler_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
)

func TestScheduleOneBestAndTies(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "c", Labels: optIn, Machine: h100},
		scheduler.Node{Name: "a", Labels: optIn, Machine: h100},
		scheduler.Node{Name: "b", Labels: optIn, Machine: h100},
		scheduler.Node{Name: "plain", Machine: h100})
	require.Equal(t, []string{"a", "b", "c", "plain"}, c.Nodes())

	// Equal scores: the lowest name.
	pod := numaPod("tg-0", 24, 4, "SingleNUMANode")
	res, err := c.ScheduleOne(pod)
	require.NoError(t, err)
	require.Equal(t, "a", res.Node)
	require.Equal(t, 3, res.Feasible)
	require.Equal(t, 4, res.Evaluated)
	ann, err := c.PreBind(pod)
	require.NoError(t, err)
	require.Equal(t, ann, res.Annotations)

	// MostAllocated packs: the next replica goes to the fuller node.
	res, err = c.ScheduleOne(numaPod("tg-1", 24, 4, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, "a", res.Node)
	d, err := kube.ParseDecision(res.Annotations[kube.AnnotationAllocation])
	require.NoError(t, err)
	require.Equal(t, []int{1}, d.NUMANodes)

	// A third does not fit on a; b and c tie.
	res, err = c.ScheduleOne(numaPod("tg-2", 24, 4, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, "b", res.Node)

	// LeastAllocated spreads.
	c2 := newCache(t, scheduler.Config{Allocator: allocator.Options{Scoring: allocator.LeastAllocated}},
		scheduler.Node{Name: "a", Labels: optIn, Machine: h100},
		scheduler.Node{Name: "b", Labels: optIn, Machine: h100})
	for i, want := range []string{"a", "b", "a", "b"} {
		res, err := c2.ScheduleOne(numaPod(fmt.Sprintf("tg-%d", i), 24, 2, "SingleNUMANode"))
		require.NoError(t, err)
		require.Equal(t, want, res.Node, "pod %d", i)
	}
}

func TestScheduleOneFitError(t *testing.T) {
	h100, a100 := preset(t, "dgx-h100"), preset(t, "dgx-a100")
	var nodes []scheduler.Node
	for i := range 3 {
		nodes = append(nodes, scheduler.Node{Name: fmt.Sprintf("plain-%d", i), Machine: h100})
	}
	for i := range 2 {
		nodes = append(nodes, scheduler.Node{Name: fmt.Sprintf("a100-%d", i), Labels: optIn, Machine: a100})
	}
	nodes = append(nodes, scheduler.Node{Name: "busy", Labels: optIn, Machine: h100})
	c := newCache(t, scheduler.Config{}, nodes...)
	require.NoError(t, c.Reserve(numaPod("hog", 220, 0, "None"), "busy"))

	pod := numaPod("tg", 24, 4, "SingleNUMANode")
	_, err := c.ScheduleOne(pod)
	require.ErrorIs(t, err, scheduler.ErrUnschedulable)
	var fe *scheduler.FitError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "0/6 nodes are available: 3 node(s) without the label ack.node.gpu.schedule=topology, "+
		"2 no NUMA node can hold 4 GPUs on this machine, 1 fewer than 24 free CPUs now.", err.Error())
	require.Equal(t, "default/tg", fe.Pod)
	require.Equal(t, 6, fe.NumNodes)
	require.ErrorIs(t, fe.Node("busy"), allocator.ErrInsufficient)
	require.Contains(t, fe.Node("a100-1").Detail, "even with nothing allocated")
	_, ok := c.Pod("default/tg")
	require.False(t, ok, "nothing reserved")

	// Equal counts are ordered by text.
	c2 := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "x", Machine: h100},
		scheduler.Node{Name: "y", Labels: optIn, Machine: a100})
	_, err = c2.ScheduleOne(pod)
	require.EqualError(t, err, "0/2 nodes are available: 1 no NUMA node can hold 4 GPUs on this machine, "+
		"1 node(s) without the label ack.node.gpu.schedule=topology.")

	// Several short resources count under each.
	_, err = c2.ScheduleOne(plainPod("huge", "1000", 9))
	require.EqualError(t, err, "0/2 nodes are available: 2 the machine has fewer than 1000 allocatable CPUs, 2 the machine has fewer than 9 GPUs.")

	empty := newCache(t, scheduler.Config{})
	_, err = empty.ScheduleOne(pod)
	require.ErrorIs(t, err, scheduler.ErrUnschedulable)
	require.EqualError(t, err, "0/0 nodes are available: the cache has no node.")
}

func TestScheduleOnePercentage(t *testing.T) {
	m := preset(t, "small-1s")
	var names []string
	for _, par := range []int{1, 3} {
		c := newCache(t, scheduler.Config{PercentageOfNodesToScore: 10, Parallelism: par})
		for i := range 300 {
			require.NoError(t, c.AddNode(scheduler.Node{Name: fmt.Sprintf("n-%03d", i), Labels: optIn, Machine: m}))
		}
		var got []string
		for i := range 4 {
			pod := numaPod(fmt.Sprintf("p%d", i), 1, 0, "SingleNUMANode")
			res, err := c.ScheduleOne(pod)
			require.NoError(t, err)
			require.Equal(t, 100, res.Feasible, "at least 100 nodes, kube-scheduler's minimum")
			require.GreaterOrEqual(t, res.Evaluated, 100)
			got = append(got, res.Node)
			require.NoError(t, c.Unreserve(pod))
		}
		if names == nil {
			names = got
		}
		require.Equal(t, names, got, "the same answers whatever the parallelism")
	}
	// Each search starts where the previous one stopped.
	require.Equal(t, []string{"n-000", "n-100", "n-200", "n-000"}, names)
}

func TestScheduleOnePlainPods(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "a", Machine: h100},
		scheduler.Node{Name: "b", Labels: optIn, Machine: h100})
	// A NUMA pod goes to the opted-in node.
	res, err := c.ScheduleOne(numaPod("tg", 24, 4, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, "b", res.Node)
	// A plain pod follows MostAllocated on the totals: the fuller node b.
	res, err = c.ScheduleOne(plainPod("web", "4", 0))
	require.NoError(t, err)
	require.Equal(t, "b", res.Node)
	require.Empty(t, res.Annotations)
	// A plain GPU pod gets GPUs written in its decision.
	res, err = c.ScheduleOne(plainPod("infer", "4", 4))
	require.NoError(t, err)
	require.Equal(t, "b", res.Node)
	d, err := kube.ParseDecision(res.Annotations[kube.AnnotationAllocation])
	require.NoError(t, err)
	require.Equal(t, 4, len(d.GPUs))
}
