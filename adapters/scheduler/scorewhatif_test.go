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
