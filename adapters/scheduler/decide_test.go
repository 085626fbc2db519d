package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
)

// TestDecideIsWhatReserveGives: Decide names the allocation Reserve then
// takes, changes nothing, refuses as Filter does, and with a WhatIf decides
// on the node without the removed pods.
func TestDecideIsWhatReserveGives(t *testing.T) {
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "a", Labels: optIn, Machine: preset(t, "dgx-a100")})
	require.NoError(t, c.Reserve(numaPod("busy", 8, 2, "SingleNUMANode"), "a"))
	for _, pol := range []string{"SingleNUMANode", "Restricted", "BestEffort"} {
		p := numaPod("p-"+pol, 16, 2, pol)
		pp, err := c.Prepare(p)
		require.NoError(t, err)
		a, err := pp.Decide("a", nil)
		require.NoError(t, err)
		require.Len(t, a.GPUs, 2)
		again, err := pp.Decide("a", nil)
		require.NoError(t, err)
		require.Equal(t, a.GPUs, again.GPUs, "Decide changed the node")
		_, held := c.Pod(p.Key())
		require.False(t, held, "Decide placed the pod")
		require.NoError(t, c.Reserve(p, "a"))
		st, ok := c.Pod(p.Key())
		require.True(t, ok)
		require.Equal(t, a.GPUs, st.Allocation.GPUs, "%s: Reserve placed other GPUs than Decide named", pol)
		require.Equal(t, a.CPUs.String(), st.Allocation.CPUs.String())
		require.NoError(t, c.Unreserve(p))
	}
	big := numaPod("big", 8, 8, "SingleNUMANode")
	pp, err := c.Prepare(big)
	require.NoError(t, err)
	_, err = pp.Decide("a", nil)
	require.Error(t, err)
	require.Equal(t, errText(pp.Filter("a")), errText(err))
	_, err = pp.Decide("missing", nil)
	require.ErrorIs(t, err, scheduler.ErrUnknownNode)

	restricted := numaPod("r8", 8, 8, "Restricted")
	pp, err = c.Prepare(restricted)
	require.NoError(t, err)
	_, err = pp.Decide("a", nil)
	require.Error(t, err, "2 GPUs are held")
	a, err := pp.Decide("a", &scheduler.WhatIf{Removed: []string{"default/busy"}})
	require.NoError(t, err)
	require.Len(t, a.GPUs, 8)
}

// TestDecideWithholdingGPUs: with WithholdGPU the decision is made among the
// other GPUs only (a DRA pod on a node that publishes some of its GPUs, a
// device-plugin pod on the rest), PreparedPod.Reserve takes that decision,
// the withheld GPUs stay free for other pods, and a pod that fits only on
// withheld GPUs is refused.
func TestDecideWithholdingGPUs(t *testing.T) {
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "a", Labels: optIn, Machine: preset(t, "dgx-a100")})
	low := func(id int) bool { return id < 4 }
	p := numaPod("p", 8, 2, "SingleNUMANode")
	pp, err := c.Prepare(p)
	require.NoError(t, err)
	plain, err := pp.Decide("a", nil)
	require.NoError(t, err)
	require.Less(t, plain.GPUs[0], 4, "the test needs a node where the plain decision takes a low GPU")
	a, err := pp.Decide("a", &scheduler.WhatIf{WithholdGPU: low})
	require.NoError(t, err)
	require.Len(t, a.GPUs, 2)
	for _, g := range a.GPUs {
		require.GreaterOrEqual(t, g, 4, "decided a withheld GPU: %v", a.GPUs)
	}
	require.NoError(t, pp.Reserve("a", low))
	st, ok := c.Pod(p.Key())
	require.True(t, ok)
	require.Equal(t, a.GPUs, st.Allocation.GPUs, "Reserve placed other GPUs than Decide named")
	// The withheld GPUs are free for a pod without the withhold.
	q := numaPod("q", 8, 2, "SingleNUMANode")
	require.NoError(t, c.Reserve(q, "a"))
	st, _ = c.Pod(q.Key())
	require.Less(t, st.Allocation.GPUs[0], 4)
	// 8 GPUs under Restricted fit the machine but not its 4 unwithheld GPUs.
	r := numaPod("r", 8, 8, "Restricted")
	pr, err := c.Prepare(r)
	require.NoError(t, err)
	_, err = pr.Decide("a", &scheduler.WhatIf{WithholdGPU: func(id int) bool { return id >= 4 }})
	require.Error(t, err)
	require.Error(t, pr.Reserve("a", func(id int) bool { return id >= 4 }))
}

// TestPrepareWithDevicesNamesThem: a pod prepared with an rdma device (a
// DRA pod's NIC claim) gets one in the same decision, on the span of its
// GPUs, and the decision annotation names it; Reserve of the prepared pod
// holds it, so a second such pod gets another.
func TestPrepareWithDevicesNamesThem(t *testing.T) {
	m := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "h", Labels: optIn, Machine: m})
	nicNode := map[string]int{}
	for _, d := range m.Devices() {
		if d.Class == "rdma" {
			nicNode[d.ID] = int(d.NUMANode)
		}
	}
	require.NotEmpty(t, nicNode)
	var got []string
	for _, name := range []string{"a", "b"} {
		p := numaPod(name, 8, 2, "SingleNUMANode")
		pp, err := c.PrepareWithDevices(p, map[string]int{"rdma": 1})
		require.NoError(t, err)
		a, err := pp.Decide("h", nil)
		require.NoError(t, err)
		require.Len(t, a.Devices["rdma"], 1, "decision %v", a)
		require.NoError(t, pp.Reserve("h", nil))
		ann, err := c.PreBind(p)
		require.NoError(t, err)
		d, err := kube.ParseDecision(ann[kube.AnnotationAllocation])
		require.NoError(t, err)
		require.Equal(t, a.Devices["rdma"], d.Devices["rdma"], "the annotation names the NIC")
		require.Equal(t, []int{nicNode[d.Devices["rdma"][0]]}, d.NUMANodes)
		got = append(got, d.Devices["rdma"][0])
	}
	require.NotEqual(t, got[0], got[1], "one NIC handed out twice")
}
