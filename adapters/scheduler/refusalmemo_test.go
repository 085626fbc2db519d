package scheduler_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

// TestPreparedRefusalMemo: a prepared pod refused again for the same
// allocator refusal (here the machine class's never-fit verdict: five GPUs
// on one NUMA node of four) gets a copy of the FilterError written the
// first time, whatever type the allocator's error has (its refusals are
// read with errors.As).
func TestPreparedRefusalMemo(t *testing.T) {
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "h1", Labels: optIn, Machine: preset(t, "dgx-h100")},
		scheduler.Node{Name: "h2", Labels: optIn, Machine: preset(t, "dgx-h100")})
	pp, err := c.Prepare(numaPod("five", 4, 5, "SingleNUMANode"))
	require.NoError(t, err)
	var first, second *scheduler.FilterError
	require.True(t, errors.As(pp.Filter("h1"), &first))
	require.True(t, errors.As(pp.Filter("h2"), &second))
	require.True(t, first.Never)
	require.Equal(t, "h2", second.Node)
	require.NotEmpty(t, first.Reasons)
	require.Equal(t, first.Reasons, second.Reasons)
	require.Same(t, &first.Reasons[0], &second.Reasons[0], "the second refusal is the first one's copy")
}
