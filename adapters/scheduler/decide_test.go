package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

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
