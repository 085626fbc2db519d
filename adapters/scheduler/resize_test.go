package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
)

// TestInPlaceResizeOfABoundPod: a bound pod resized in place. Its new
// requests arrive first (the resize patch of its spec); the node agent then
// writes the new decision on it when it applied the resize, or leaves the
// old one when it refused. The cache accounts the decision in both cases:
// the CPUs the node holds for the pod, no misfit, the rest free for other
// pods; a restarted cache reads the same.
func TestInPlaceResizeOfABoundPod(t *testing.T) {
	m := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "a", Labels: optIn, Machine: m})
	pod := numaPod("app", 4, 1, "SingleNUMANode")
	res, err := c.ScheduleOne(pod)
	require.NoError(t, err)
	require.NoError(t, c.AddPod(bound(pod, "a", res.Annotations)))
	first, ok := c.Pod("default/app")
	require.True(t, ok)
	require.Equal(t, 4, first.Allocation.CPUs.Size())
	before, _ := c.Node("a")

	// The spec asks for 8 CPUs, the decision still says 4 (the node refused,
	// or has not written the new one yet): the decision is accounted.
	asked := bound(numaPod("app", 8, 1, "SingleNUMANode"), "a", res.Annotations)
	require.NoError(t, c.AddPod(asked))
	st, _ := c.Pod("default/app")
	require.True(t, st.Allocation.CPUs.Equal(first.Allocation.CPUs), "accounted %s, decided %s", st.Allocation.CPUs, first.Allocation.CPUs)
	require.Empty(t, st.Misfit)
	node, _ := c.Node("a")
	require.True(t, node.SharedCPUs.Equal(before.SharedCPUs))
	requireSound(t, c, "a")

	// The node applied it: the new decision (the allocator's Resize, as the
	// node does it) is accounted exactly.
	resize := func(from allocator.Allocation, cpus int) kube.Decision {
		st := allocator.MustNew(m, allocator.Options{})
		_, err := st.Claim(from)
		require.NoError(t, err)
		a, err := st.Resize(from.ID, cpus)
		require.NoError(t, err)
		return kube.NewDecision(m, &a)
	}
	grown := resize(*first.Allocation, 8)
	require.NoError(t, c.AddPod(bound(numaPod("app", 8, 1, "SingleNUMANode"), "a",
		map[string]string{kube.AnnotationAllocation: grown.String()})))
	st, _ = c.Pod("default/app")
	require.Equal(t, grown.CPUSet, st.Allocation.CPUs.String())
	require.Equal(t, first.Allocation.GPUs, st.Allocation.GPUs)
	require.Empty(t, st.Misfit)
	node, _ = c.Node("a")
	require.Equal(t, before.SharedCPUs.Size()-4, node.SharedCPUs.Size())
	require.True(t, node.SharedCPUs.Intersection(st.Allocation.CPUs).IsEmpty())
	requireSound(t, c, "a")

	// Another pod does not get the grown CPUs.
	other := numaPod("other", 100, 0, "BestEffort")
	res2, err := c.ScheduleOne(other)
	require.NoError(t, err)
	require.NoError(t, c.AddPod(bound(other, "a", res2.Annotations)))
	o, _ := c.Pod("default/other")
	require.True(t, o.Allocation.CPUs.Intersection(st.Allocation.CPUs).IsEmpty(), "other %s, app %s", o.Allocation.CPUs, st.Allocation.CPUs)
	require.NoError(t, c.RemovePod(other))

	// A restarted cache reads the same.
	fresh := newCache(t, scheduler.Config{}, scheduler.Node{Name: "a", Labels: optIn, Machine: m})
	require.NoError(t, fresh.AddPod(bound(numaPod("app", 8, 1, "SingleNUMANode"), "a",
		map[string]string{kube.AnnotationAllocation: grown.String()})))
	requireSameAccounting(t, c, fresh, "a")

	// And back down to 2.
	shrunk := resize(*st.Allocation, 2)
	require.NoError(t, c.AddPod(bound(numaPod("app", 2, 1, "SingleNUMANode"), "a",
		map[string]string{kube.AnnotationAllocation: shrunk.String()})))
	st, _ = c.Pod("default/app")
	require.Equal(t, shrunk.CPUSet, st.Allocation.CPUs.String())
	require.Empty(t, st.Misfit)
	node, _ = c.Node("a")
	require.Equal(t, before.SharedCPUs.Size()+2, node.SharedCPUs.Size())
	requireSound(t, c, "a")
}
