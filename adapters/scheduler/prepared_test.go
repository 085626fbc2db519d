package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

// TestPreparedAgreesWithFilterAndScore: the parse-once handle answers what
// Filter and Score answer.
func TestPreparedAgreesWithFilterAndScore(t *testing.T) {
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "h", Labels: optIn, Machine: preset(t, "dgx-h100")},
		scheduler.Node{Name: "a", Labels: optIn, Machine: preset(t, "dgx-a100")},
		scheduler.Node{Name: "plain", Machine: preset(t, "dgx-h100")})
	require.NoError(t, c.Reserve(numaPod("busy", 8, 4, "SingleNUMANode"), "h"))
	for _, p := range []string{"SingleNUMANode", "Restricted", "BestEffort", ""} {
		pod := numaPod("p-"+p, 24, 4, p)
		pp, err := c.Prepare(pod)
		require.NoError(t, err)
		for _, node := range []string{"h", "a", "plain", "missing"} {
			require.Equal(t, errText(c.Filter(pod, node)), errText(pp.Filter(node)), "%s on %s", p, node)
			s1, e1 := c.Score(pod, node)
			s2, e2 := pp.Score(node)
			require.Equal(t, s1, s2)
			require.Equal(t, errText(e1), errText(e2))
		}
	}
	_, err := c.Prepare(nil)
	require.Error(t, err)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestPreparedRefusalsNameTheirNode: nodes refusing a prepared pod for the
// same reason (the cycle's refusals are shared) each get an error naming
// them, with the reasons, category and detail a fresh Filter gives, also
// after a refusal of another kind in between.
func TestPreparedRefusalsNameTheirNode(t *testing.T) {
	m := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "full-1", Labels: optIn, Machine: m},
		scheduler.Node{Name: "full-2", Labels: optIn, Machine: m},
		scheduler.Node{Name: "plain", Machine: m},
		scheduler.Node{Name: "full-3", Labels: optIn, Machine: m},
		scheduler.Node{Name: "free", Labels: optIn, Machine: m})
	for _, n := range []string{"full-1", "full-2", "full-3"} {
		require.NoError(t, c.Reserve(numaPod("gpus-"+n, 8, 8, "None"), n))
	}
	pod := numaPod("p", 4, 1, "SingleNUMANode")
	pp, err := c.Prepare(pod)
	require.NoError(t, err)
	var first *scheduler.FilterError
	for _, n := range []string{"full-1", "full-2", "plain", "full-3", "free", "full-1"} {
		got := pp.Filter(n)
		want := c.Filter(pod, n)
		require.Equal(t, errText(want), errText(got), n)
		if want == nil {
			continue
		}
		var fe, we *scheduler.FilterError
		require.ErrorAs(t, got, &fe)
		require.ErrorAs(t, want, &we)
		require.Equal(t, n, fe.Node)
		require.Equal(t, we.Reasons, fe.Reasons, n)
		require.Equal(t, we.Never, fe.Never, n)
		require.ErrorIs(t, fe, we.Err, n)
		if n == "plain" {
			require.ErrorIs(t, fe, scheduler.ErrNotOptedIn)
			continue
		}
		require.Contains(t, fe.Reasons, "fewer than 1 free GPUs now", n)
		if first == nil {
			first = fe
		}
		require.Equal(t, "full-1", first.Node, "an earlier error is not changed by a later one")
	}
}
