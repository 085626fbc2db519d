package allocator

import (
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/topology"
)

// TestLoadDemandsShortcut checks that the direct reading of built-in
// demands finds the same kinds, in the same order, with the same amounts,
// as asking every resource, on machines with and without device classes.
func TestLoadDemandsShortcut(t *testing.T) {
	for _, preset := range []string{"dgx-a100", "dgx-h100", "small-1s", "numa64"} {
		m, err := topology.Preset(preset)
		require.NoError(t, err)
		s := MustNew(m, Options{})
		require.Same(t, s.res[0], Resource(s.gpu), "%s: the GPUs are the first kind", preset)
		require.Same(t, s.res[s.builtin-2], Resource(s.cpu), "%s: the CPUs are the second built-in kind from the end", preset)
		require.Same(t, s.res[s.builtin-1], Resource(s.mem), "%s: memory is the last built-in kind", preset)
		rapid.Check(t, func(rt *rapid.T) {
			r := &Request{
				ID:        "r",
				CPUs:      rapid.IntRange(0, 64).Draw(rt, "cpus"),
				GPUs:      rapid.IntRange(0, 8).Draw(rt, "gpus"),
				MemoryMiB: rapid.Int64Range(0, 1<<20).Draw(rt, "mem"),
				FullPCPUs: rapid.Bool().Draw(rt, "fullPCPUs"),
			}
			fast := &searcher{s: s, r: r}
			require.NoError(rt, fast.loadDemands())
			all := &searcher{s: s, r: r}
			require.NoError(rt, all.loadDemandsOfAll())
			require.Equal(rt, all.k, fast.k)
			require.Equal(rt, all.kinds[:all.k], fast.kinds[:fast.k])
			require.Equal(rt, all.demand[:all.k], fast.demand[:fast.k])
		})
	}
}
