package allocator_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// fragmented fills numa64 so that every node keeps a different mix of free
// GPUs and CPUs: the covering search then has to trade one kind against the
// other across many nodes, the hardest shape we found for it.
func fragmented(tb testing.TB, seed uint64) *allocator.State {
	tb.Helper()
	m, err := topology.Preset("numa64")
	if err != nil {
		tb.Fatal(err)
	}
	s := allocator.MustNew(m, allocator.Options{})
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < m.NumNodes(); i++ {
		// Take 0-2 GPUs and 0-15 CPUs on node i with SingleNUMANode pods
		// pinned by exhausting the others is awkward; claim directly.
		cpus := m.NodeCPUs(i).List()
		gpus := []int{}
		for _, g := range m.GPUs() {
			if idx, _ := m.NodeIndex(g.NUMANode); idx == i {
				gpus = append(gpus, g.ID)
			}
		}
		takeG := rng.IntN(len(gpus) + 1)
		takeC := rng.IntN(len(cpus))
		if i%2 == 0 { // GPU-rich, CPU-poor
			takeG = rng.IntN(2)
			takeC = len(cpus) - 1 - rng.IntN(3)
		}
		a := allocator.Allocation{ID: fmt.Sprintf("frag-%d", i), Policy: policy.SingleNUMANode}
		for _, c := range cpus[:takeC] {
			a.CPUs.Add(c)
		}
		a.GPUs = gpus[:takeG]
		if takeC == 0 && takeG == 0 {
			continue
		}
		if _, err := s.Claim(a); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// worstRequests are wide requests mixing GPUs, CPUs and memory on the
// fragmented numa64.
var worstRequests = []allocator.Request{
	{ID: "w8", GPUs: 8, CPUs: 64, MemoryMiB: 8 << 10},
	{ID: "w20", GPUs: 20, CPUs: 200, MemoryMiB: 64 << 10},
	{ID: "w40", GPUs: 40, CPUs: 300},
	{ID: "w60", GPUs: 60, CPUs: 100},
}

func BenchmarkWorstNUMA64(b *testing.B) {
	for _, r := range worstRequests {
		for _, p := range []policy.Policy{policy.Restricted, policy.BestEffort, policy.None} {
			b.Run(fmt.Sprintf("%s/%s/Fit", r.ID, p), func(b *testing.B) {
				s := fragmented(b, 1)
				r := r
				r.Policy = p
				b.ReportAllocs()
				for b.Loop() {
					_ = s.Fit(&r)
				}
			})
			b.Run(fmt.Sprintf("%s/%s/AllocateRelease", r.ID, p), func(b *testing.B) {
				s := fragmented(b, 1)
				r := r
				r.Policy = p
				if s.Fit(&r) != nil {
					b.Skip("does not fit")
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.Allocate(&r); err != nil {
						b.Fatal(err)
					}
					_ = s.Release(r.ID)
				}
			})
		}
	}
}
