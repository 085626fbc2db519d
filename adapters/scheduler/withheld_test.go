package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

// TestScoreWhatIfRatesTheWithheldView: a SingleNUMANode 2-GPU pod on an
// empty dgx-h100 whose GPUs 0-5 are withheld takes the last two GPUs of
// NUMA node 1, so under MostAllocated ScoreWhatIf rates the node higher
// than Score, which counts the withheld GPUs as free; with nothing
// withheld ScoreWhatIf is Score; it changes nothing, and refuses as
// FilterWhatIf does.
func TestScoreWhatIfRatesTheWithheldView(t *testing.T) {
	m := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "h", Labels: optIn, Machine: m})
	withhold := func(id int) bool { return id < 6 }
	pp, err := c.Prepare(numaPod("p", 8, 2, "SingleNUMANode"))
	require.NoError(t, err)
	whole, err := pp.Score("h")
	require.NoError(t, err)
	same, err := pp.ScoreWhatIf("h", scheduler.WhatIf{})
	require.NoError(t, err)
	require.Equal(t, whole, same)
	withheld, err := pp.ScoreWhatIf("h", scheduler.WhatIf{WithholdGPU: withhold})
	require.NoError(t, err)
	require.Greater(t, withheld, whole, "the pod takes all the GPUs offered: the node is fuller for it than the whole machine")
	again, err := pp.Score("h")
	require.NoError(t, err)
	require.Equal(t, whole, again, "ScoreWhatIf changed the node")

	four, err := c.Prepare(numaPod("four", 8, 4, "SingleNUMANode"))
	require.NoError(t, err)
	_, err = four.ScoreWhatIf("h", scheduler.WhatIf{WithholdGPU: withhold})
	require.Error(t, err, "2 GPUs offered on one NUMA node")
	require.Equal(t, errText(four.FilterWhatIf("h", scheduler.WhatIf{WithholdGPU: withhold})), errText(err))
	_, err = four.ScoreWhatIf("missing", scheduler.WhatIf{})
	require.ErrorIs(t, err, scheduler.ErrUnknownNode)
}

// TestWithholdingNICs: with WithholdDevice naming the rdma NICs of NUMA
// node 0 (where the plain decision takes one), a SingleNUMANode pod
// prepared with one NIC (a DRA pod's NIC claim) is decided on NUMA node 1
// with a NIC there, ReserveWithholding
// takes that decision, and the withheld NICs stay free.
func TestWithholdingNICs(t *testing.T) {
	m := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "h", Labels: optIn, Machine: m})
	nicNode := map[string]int{}
	for _, d := range m.Devices() {
		if d.Class == "rdma" {
			nicNode[d.ID] = int(d.NUMANode)
		}
	}
	w := scheduler.WhatIf{WithholdDevice: func(class, id string) bool { return class == "rdma" && nicNode[id] == 0 }}
	p := numaPod("p", 8, 2, "SingleNUMANode")
	pp, err := c.PrepareWithDevices(p, map[string]int{"rdma": 1})
	require.NoError(t, err)
	plain, err := pp.Decide("h", nil)
	require.NoError(t, err)
	require.Equal(t, 0, nicNode[plain.Devices["rdma"][0]], "the test needs a node where the plain decision takes a NIC of NUMA node 0")
	a, err := pp.Decide("h", &w)
	require.NoError(t, err)
	require.Len(t, a.Devices["rdma"], 1)
	require.Equal(t, 1, nicNode[a.Devices["rdma"][0]], "decided a withheld NIC: %v", a.Devices)
	require.NoError(t, pp.FilterWhatIf("h", w))
	_, err = pp.ScoreWhatIf("h", w)
	require.NoError(t, err)
	require.Error(t, pp.ReserveWithholding("h", scheduler.WhatIf{Removed: []string{"default/x"}}))
	require.NoError(t, pp.ReserveWithholding("h", w))
	st, ok := c.Pod(p.Key())
	require.True(t, ok)
	require.Equal(t, a.Devices, st.Allocation.Devices, "ReserveWithholding placed other NICs than Decide named")
	require.Equal(t, a.GPUs, st.Allocation.GPUs)

	// The withheld NICs were not taken: a pod kept from NUMA node 1's
	// NICs gets one of NUMA node 0.
	q, err := c.PrepareWithDevices(numaPod("q", 8, 2, "SingleNUMANode"), map[string]int{"rdma": 1})
	require.NoError(t, err)
	b, err := q.Decide("h", &scheduler.WhatIf{WithholdDevice: func(class, id string) bool { return class == "rdma" && nicNode[id] == 1 }})
	require.NoError(t, err)
	require.Equal(t, 0, nicNode[b.Devices["rdma"][0]])

	// Every NIC withheld: a pod that needs one is refused.
	all := scheduler.WhatIf{WithholdDevice: func(class, _ string) bool { return class == "rdma" }}
	r, err := c.PrepareWithDevices(numaPod("r", 8, 1, "SingleNUMANode"), map[string]int{"rdma": 1})
	require.NoError(t, err)
	require.Error(t, r.FilterWhatIf("h", all))
	require.Error(t, r.ReserveWithholding("h", all))
	_, held := c.Pod("default/r")
	require.False(t, held)
}
