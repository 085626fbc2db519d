package numaplace

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCycleMemoIsPerStateAndPod: Filter and Score find the pod PreFilter
// read through the plugin's memo of the last cycle only for that cycle's
// CycleState and pod; another cycle's state (an earlier pod's, a clone a
// preemption dry-run uses) is read from the state itself, so each call
// judges its own pod.
func TestCycleMemoIsPerStateAndPod(t *testing.T) {
	e := newTestEvents(t)
	pl := e.pl
	ctx := context.Background()
	n := testNode(t, "gpu-1", "dgx-h100", true)
	e.nodeChanged(n)
	small := numaPod("small", "SingleNUMANode", 4, 1)
	huge := numaPod("huge", "SingleNUMANode", 4, 8) // 8 GPUs on one NUMA node: never
	sSmall := preFilter(t, pl, small)
	require.True(t, pl.Filter(ctx, sSmall, small, nodeInfo(n)).IsSuccess())
	sHuge := preFilter(t, pl, huge) // the memo is huge's cycle now
	require.False(t, pl.Filter(ctx, sHuge, huge, nodeInfo(n)).IsSuccess())
	require.True(t, pl.Filter(ctx, sSmall, small, nodeInfo(n)).IsSuccess(), "small's own state, not the last cycle's")
	clone := sSmall.Clone()
	require.True(t, pl.Filter(ctx, clone, small, nodeInfo(n)).IsSuccess(), "a clone of small's state")
	score, st := pl.Score(ctx, sSmall, small, nodeInfo(n))
	require.True(t, st.IsSuccess())
	require.Positive(t, score)
	// The same pod object under another cycle's state reads that state
	// (a new cycle for the pod writes its own).
	require.False(t, pl.Filter(ctx, sHuge, small, nodeInfo(n)).IsSuccess(), "huge's state says huge")
}
