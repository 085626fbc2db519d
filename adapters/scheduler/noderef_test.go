package scheduler_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

// TestNodeRefAgreesWithName: Filter and Score through a node's handle
// answer what they answer by name, while the node is in the cache, after
// it changes, and after it is removed (the name looked up again: unknown,
// then the node added again under it, a machine of another kind).
func TestNodeRefAgreesWithName(t *testing.T) {
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "h", Labels: optIn, Machine: preset(t, "dgx-h100")},
		scheduler.Node{Name: "a", Labels: optIn, Machine: preset(t, "dgx-a100")},
		scheduler.Node{Name: "plain", Machine: preset(t, "dgx-h100")})
	require.NoError(t, c.Reserve(numaPod("busy", 8, 4, "SingleNUMANode"), "h"))
	refs := map[string]scheduler.NodeRef{}
	for _, n := range []string{"h", "a", "plain"} {
		r, err := c.Ref(n)
		require.NoError(t, err)
		require.Equal(t, n, r.Node())
		require.True(t, r.Current())
		refs[n] = r
	}
	_, err := c.Ref("missing")
	require.True(t, errors.Is(err, scheduler.ErrUnknownNode), "%v", err)

	check := func(stage string) {
		t.Helper()
		for _, p := range []string{"SingleNUMANode", "Restricted", "BestEffort", ""} {
			for _, gpus := range []int{1, 4, 8} {
				pp, err := c.Prepare(numaPod("p-"+p, 24, gpus, p))
				require.NoError(t, err)
				for name, r := range refs {
					require.Equal(t, errText(pp.Filter(name)), errText(pp.FilterRef(r)), "%s: %s %d GPUs on %s", stage, p, gpus, name)
					s1, e1 := pp.Score(name)
					s2, e2 := pp.ScoreRef(r)
					require.Equal(t, s1, s2, "%s: %s %d GPUs on %s", stage, p, gpus, name)
					require.Equal(t, errText(e1), errText(e2), "%s: %s %d GPUs on %s", stage, p, gpus, name)
				}
			}
		}
	}
	check("in the cache")

	// Changed in place (more pods, other labels): the handle stays current.
	require.NoError(t, c.Reserve(numaPod("more", 16, 2, "SingleNUMANode"), "a"))
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "plain", Labels: optIn, Machine: preset(t, "dgx-h100")}))
	require.True(t, refs["a"].Current())
	require.True(t, refs["plain"].Current())
	check("changed")

	// Removed: not current; through it the name is unknown.
	require.NoError(t, c.RemoveNode("h"))
	require.False(t, refs["h"].Current())
	pp, err := c.Prepare(numaPod("q", 4, 1, "SingleNUMANode"))
	require.NoError(t, err)
	require.True(t, errors.Is(pp.FilterRef(refs["h"]), scheduler.ErrUnknownNode))
	check("removed")

	// Added again as another machine: the old handle answers for it.
	require.NoError(t, c.AddNode(scheduler.Node{Name: "h", Labels: optIn, Machine: preset(t, "dgx-a100")}))
	require.False(t, refs["h"].Current())
	check("added again")
	fresh, err := c.Ref("h")
	require.NoError(t, err)
	require.True(t, fresh.Current())

	// The zero handle refers to no node.
	var zero scheduler.NodeRef
	require.False(t, zero.Current())
	require.Equal(t, "", zero.Node())
	require.True(t, errors.Is(pp.FilterRef(zero), scheduler.ErrUnknownNode))
	_, err = pp.ScoreRef(zero)
	require.True(t, errors.Is(err, scheduler.ErrUnknownNode))
}
