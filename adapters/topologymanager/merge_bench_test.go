package topologymanager

import (
	"fmt"
	"testing"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
)

// BenchmarkMerge is numaplace's side of docs/design.md's merge comparison: the
// best-effort policy (the kubelet walks the whole cross product for it, as
// for restricted) on NUMA nodes 0..n-1 with the default distances, merging
// BenchmarkHints(1, n, providers, 24). numa64 has no kubelet counterpart
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
				mg, err := NewMerger(PolicyBestEffort, nodes, numa.Distances{}, PolicyOptions{})
				if err != nil {
					b.Fatal(err)
				}
				hints := BenchmarkHints(1, n, p, 24)
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
	m := hintPreset(b, "dgx-a100")
	r := &allocator.Request{CPUs: 24, GPUs: 4, MemoryMiB: 64 << 10}
	opts := PredictOptions{StaticMemoryManager: true}
	b.Run("numaplace/dgx-a100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := Predict(PolicyBestEffort, opts, m, nil, r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
