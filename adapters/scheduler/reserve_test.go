package scheduler_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
)

func TestReserveUnreserve(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "a", Labels: optIn, Machine: h100},
		scheduler.Node{Name: "b", Labels: optIn, Machine: h100})
	empty, _ := c.Node("a")

	pod := numaPod("tg", 24, 4, "SingleNUMANode")
	require.NoError(t, c.Reserve(pod, "a"))
	once, _ := c.Node("a")
	require.Equal(t, 224-24, once.SharedCPUs.Size())
	require.Equal(t, 4, once.FreeGPUs)
	require.Equal(t, []string{"default/tg"}, once.Pods)

	// Idempotent on the same node, refused on another.
	require.NoError(t, c.Reserve(pod, "a"))
	again, _ := c.Node("a")
	require.Equal(t, once, again)
	require.ErrorIs(t, c.Reserve(pod, "b"), scheduler.ErrPodPlaced)
	_, err := c.ScheduleOne(pod)
	require.ErrorIs(t, err, scheduler.ErrPodPlaced)

	st, ok := c.Pod("default/tg")
	require.True(t, ok)
	require.Equal(t, "a", st.Node)
	require.False(t, st.Bound)
	require.True(t, st.NUMA)
	require.Equal(t, []int{0, 1, 2, 3}, st.Allocation.GPUs)

	// Unreserve restores the node; a second one is harmless and says so.
	require.NoError(t, c.Unreserve(pod))
	after, _ := c.Node("a")
	require.Equal(t, empty, after)
	err = c.Unreserve(pod)
	require.ErrorIs(t, err, allocator.ErrUnknownID)
	require.Contains(t, err.Error(), "default/tg")
	_, ok = c.Pod("default/tg")
	require.False(t, ok)

	// A plain pod is accounted against the shared pool and given back.
	web := plainPod("web", "2500m", 0)
	require.NoError(t, c.Reserve(web, "b"))
	b, _ := c.Node("b")
	require.Equal(t, int64(2500), b.SharedRequestMilli)
	require.Empty(t, b.Allocations)
	require.NoError(t, c.Unreserve(web))
	b, _ = c.Node("b")
	require.Zero(t, b.SharedRequestMilli)

	// A bound pod is not unreserved; RemovePod removes it.
	require.NoError(t, c.Reserve(pod, "a"))
	require.NoError(t, c.AddPod(bound(pod, "a", nil)))
	require.ErrorIs(t, c.Unreserve(pod), scheduler.ErrBound)
	require.NoError(t, c.RemovePod(pod))
	require.ErrorIs(t, c.RemovePod(pod), allocator.ErrUnknownID)
	after, _ = c.Node("a")
	require.Equal(t, empty, after)
	require.ErrorIs(t, c.Unreserve(nil), kube.ErrInvalidPod)
	require.ErrorIs(t, c.RemovePod(nil), kube.ErrInvalidPod)
}

func TestPreBind(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	for _, koord := range []bool{false, true} {
		c := newCache(t, scheduler.Config{KoordinatorAnnotations: koord},
			scheduler.Node{Name: "a", Labels: optIn, Machine: h100})
		pod := numaPod("tg", 24, 4, "SingleNUMANode")
		_, err := c.PreBind(pod)
		require.ErrorIs(t, err, allocator.ErrUnknownID)
		require.NoError(t, c.Reserve(pod, "a"))
		ann, err := c.PreBind(pod)
		require.NoError(t, err)
		require.Equal(t, `{"policy":"SingleNUMANode","exclusive":"Required","cpuset":"0-11,112-123","numaNodes":[0],`+
			`"gpus":[{"id":0},{"id":1},{"id":2},{"id":3}],"memoryMiB":{"0":0}}`, ann[kube.AnnotationAllocation])
		if !koord {
			require.Len(t, ann, 1)
			continue
		}
		require.Len(t, ann, 3)
		var status struct {
			CPUSet string `json:"cpuset"`
		}
		require.NoError(t, json.Unmarshal([]byte(ann[kube.AnnotationKoordResourceStatus]), &status))
		require.Equal(t, "0-11,112-123", status.CPUSet)
		require.Contains(t, ann[kube.AnnotationKoordDeviceAllocated], `"minor":3`)

		// A plain pod without GPUs has nothing to write; with GPUs, its GPUs.
		web := plainPod("web", "1", 0)
		require.NoError(t, c.Reserve(web, "a"))
		ann, err = c.PreBind(web)
		require.NoError(t, err)
		require.Empty(t, ann)
		infer := plainPod("infer", "1", 2)
		require.NoError(t, c.Reserve(infer, "a"))
		ann, err = c.PreBind(infer)
		require.NoError(t, err)
		d, err := kube.ParseDecision(ann[kube.AnnotationAllocation])
		require.NoError(t, err)
		require.Len(t, d.GPUs, 2)
		require.Empty(t, d.CPUSet)
		require.Equal(t, "None", d.Policy.String())
	}
}
