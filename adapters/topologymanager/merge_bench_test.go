package topologymanager_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/adapters/topologymanager/topologymanagertest"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// BenchmarkMerge is numaplace's side of docs/design.md's merge comparison: the
// best-effort policy (the kubelet walks the whole cross product for it, as
// for restricted) on NUMA nodes 0..n-1 with the default distances, merging
// topologymanagertest.BenchmarkHints(1, n, providers, 24). numa64 has no kubelet counterpart
// (the kubelet refuses more than 8 NUMA nodes by default, and its walk would
// be the same 24^4 permutations).
func BenchmarkMerge(b *testing.B) {
	for _, n := range []int{2, 4, 8, 64} {
		for _, p := range []int{2, 4} {
			b.Run(fmt.Sprintf("numaplace/numa%d/providers%d", n, p), func(b *testing.B) {
				nodes := make([]numa.NodeID, n)
				for i := range nodes {
					nodes[i] = numa.NodeID(i)
				}
				mg, err := topologymanager.NewMerger(topologymanager.PolicyBestEffort, nodes, numa.Distances{}, topologymanager.PolicyOptions{})
				if err != nil {
					b.Fatal(err)
				}
				hints := topologymanagertest.BenchmarkHints(1, n, p, 24)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					mg.Merge(hints)
				}
			})
		}
	}
}

// BenchmarkAdmit is numaplace's side of docs/design.md's admission comparison:
// a 4-GPU, 24-CPU pod with 64 GiB of memory on an empty dgx-a100 whose
// kubelet runs the best-effort policy, the static CPU manager and the
// static memory manager. Predict generates the device, CPU and memory
// managers' hints (11, 255 and 255 of them since v1.37 narrowed the device hints to
// the GPU nodes) and merges them; the kubelet walks their 715,275 permutations.
func BenchmarkAdmit(b *testing.B) {
	m, err := topology.Preset("dgx-a100")
	if err != nil {
		b.Fatal(err)
	}
	r := &allocator.Request{CPUs: 24, GPUs: 4, MemoryMiB: 64 << 10}
	opts := topologymanager.PredictOptions{StaticMemoryManager: true}
	b.Run("numaplace/dgx-a100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := topologymanager.Predict(topologymanager.PolicyBestEffort, opts, m, nil, r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestMergeBenchmarkInputs checks Merge against the cross product on the
// benchmark inputs small enough to walk.
func TestMergeBenchmarkInputs(t *testing.T) {
	for _, n := range []int{2, 4, 8} {
		nodes := make([]numa.NodeID, n)
		rows := make([][]int, n)
		for i := range nodes {
			nodes[i] = numa.NodeID(i)
			rows[i] = make([]int, n)
			for j := range rows[i] {
				rows[i][j] = 10 + 10*min(1, abs(i-j)) + (i/4+j/4)%2*11
			}
		}
		dist, err := numa.NewDistances(nodes, rows)
		require.NoError(t, err)
		for _, p := range []int{2, 3} {
			for seed := int64(1); seed <= 5; seed++ {
				hints := topologymanagertest.BenchmarkHints(seed, n, p, 24)
				for _, policy := range []topologymanager.Policy{topologymanager.PolicyBestEffort, topologymanager.PolicyRestricted, topologymanager.PolicySingleNUMANode} {
					for _, closest := range []bool{false, true} {
						want, wantAdmit := topologymanager.RefMerge(policy, nodes, func(a, b int) int { return rows[a][b] }, closest, hints, nil)
						got, admit, err := topologymanager.Merge(policy, nodes, dist, hints, topologymanager.PolicyOptions{PreferClosestNUMANodes: closest})
						require.NoError(t, err)
						require.Truef(t, want.Equal(got), "n=%d p=%d seed=%d %s closest=%v: got %v want %v", n, p, seed, policy, closest, got, want)
						require.Equal(t, wantAdmit, admit)
					}
				}
			}
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
