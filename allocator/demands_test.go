package allocator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
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

// unknownGPUMachine has two NUMA nodes of two 2-thread cores and one GPU
// each, and a third GPU of unknown NUMA node.
func unknownGPUMachine(t *testing.T) *topology.Machine {
	b := topology.NewBuilder("unknown-gpu")
	for i := range 2 {
		b.AddCore(numa.CPURange(4*i, 4*i+1)).AddCore(numa.CPURange(4*i+2, 4*i+3))
		b.AddNode(topology.Node{ID: numa.NodeID(i), CPUs: numa.CPURange(4*i, 4*i+3), MemoryMiB: 1 << 18})
		b.AddGPU(topology.GPU{ID: i, NUMANode: numa.NodeID(i)})
	}
	b.AddGPU(topology.GPU{ID: 2, NUMANode: topology.UnknownNode})
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// TestLoadFreeShortcut checks that the direct reading of the built-in
// kinds' free units (State.builtinFree) gives loadFree the same amounts,
// nodes covering alone, unplaced units and shortages as asking the
// resources through the Resource interface, on states that random
// allocations (of every policy, whole cores included) have filled in part, a GPU of
// unknown NUMA node included.
func TestLoadFreeShortcut(t *testing.T) {
	for _, m := range withUnknownGPU(t, "dgx-a100", "dgx-h100", "small-1s", "numa64") {
		rapid.Check(t, func(rt *rapid.T) {
			s := MustNew(m, Options{})
			draw := func(label string) *Request {
				return &Request{
					ID:        label,
					CPUs:      rapid.IntRange(0, 48).Draw(rt, label+"-cpus"),
					GPUs:      rapid.IntRange(0, 4).Draw(rt, label+"-gpus"),
					MemoryMiB: rapid.Int64Range(0, 1<<19).Draw(rt, label+"-mem"),
					FullPCPUs: rapid.Bool().Draw(rt, label+"-fullPCPUs"),
					Policy:    policy.Policy(rapid.IntRange(0, 3).Draw(rt, label+"-policy")),
				}
			}
			for i := range rapid.IntRange(0, 12).Draw(rt, "fills") {
				r := draw(fmt.Sprint("fill-", i))
				if r.FullPCPUs {
					r.CPUs -= r.CPUs % m.ThreadsPerCore()
				}
				_, _ = s.Allocate(r) // refusals leave the state as it was
			}
			r := draw("r")
			fast := &searcher{s: s, r: r}
			require.NoError(rt, fast.loadDemands())
			require.True(rt, fast.direct, "a request of built-in amounts is read directly")
			slow := &searcher{s: s, r: r}
			require.NoError(rt, slow.loadDemands())
			slow.direct = false
			fastShort, slowShort := fast.loadFree(), slow.loadFree()
			require.Equal(rt, slowShort, fastShort)
			require.Equal(rt, slow.freeP.Ones, fast.freeP.Ones)
			for j := 0; j < slow.k; j++ {
				require.Equal(rt, slow.freeP.Amount[j], fast.freeP.Amount[j], "kind %d", j)
				require.Equal(rt, slow.freeP.Need[j], fast.freeP.Need[j], "kind %d", j)
				require.Equal(rt, slow.unFree[j], fast.unFree[j], "kind %d", j)
				require.Equal(rt, slow.unplaced[j], fast.unplaced[j], "kind %d", j)
			}
		})
	}
}
