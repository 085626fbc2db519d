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
