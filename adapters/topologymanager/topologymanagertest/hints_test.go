package topologymanagertest_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/topologymanager/topologymanagertest"
)

func TestBenchmarkHintsDeterministic(t *testing.T) {
	a := topologymanagertest.BenchmarkHints(42, 8, 4, 24)
	b := topologymanagertest.BenchmarkHints(42, 8, 4, 24)
	require.Equal(t, a, b)
	require.Len(t, a, 4)
	for i, p := range a {
		hs := p[fmt.Sprintf("resource%d", i)]
		require.Len(t, hs, 24)
		for _, h := range hs {
			require.False(t, h.Any)
			require.NotZero(t, h.NUMANodeAffinity)
			require.Less(t, uint64(h.NUMANodeAffinity), uint64(1)<<8)
		}
	}
	// Pin the first hint so that a change of generator is noticed: the
	// benchmarks module relies on the same inputs.
	require.Equal(t, "{0,2,4,7 not preferred}", a[0]["resource0"][0].String())
}
