package allocator_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// benchPresets are the machines of the benchmark names of docs/design.md.
var benchPresets = []string{"dgx-h100", "dgx-a100", "numa64", "gb200-tray"}

// benchRequest is a typical pod for each machine: 4 GPUs and 24 CPUs on the
// GPU servers; on numa64 a request of 2 GPUs and 16 CPUs; on gb200-tray (34
// NUMA nodes, 2 with CPUs) 2 GPUs, 24 CPUs and 64 GiB of memory, as
// benchmarks/'s BenchmarkGraceAdmit.
func benchRequest(preset string, p policy.Policy) allocator.Request {
	r := allocator.Request{ID: "bench", CPUs: 24, GPUs: 4, Policy: p}
	if preset == "dgx-a100" {
		r.GPUs = 2 // two GPUs per NUMA node on dgx-a100
	}
	if preset == "numa64" {
		r.CPUs, r.GPUs = 16, 2
	}
	if preset == "gb200-tray" {
		r.GPUs, r.MemoryMiB = 2, 64<<10
	}
	return r
}

// halfFull returns a state with about half of the machine allocated by
// SingleNUMANode pods of one GPU and a few CPUs.
func halfFull(b *testing.B, preset string) *allocator.State {
	b.Helper()
	m, err := topology.Preset(preset)
	if err != nil {
		b.Fatal(err)
	}
	s := allocator.MustNew(m, allocator.Options{})
	for i := 0; i < m.NumGPUs()/2; i++ {
		r := allocator.Request{ID: fmt.Sprintf("fill-%d", i), CPUs: m.NumCPUs() / m.NumGPUs() / 2, GPUs: 1,
			Policy: policy.SingleNUMANode}
		if _, err := s.Allocate(&r); err != nil {
			b.Fatalf("fill %d: %v", i, err)
		}
	}
	return s
}

func BenchmarkFit(b *testing.B) {
	for _, preset := range benchPresets {
		for _, p := range []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort, policy.None} {
			b.Run(preset+"/"+p.String(), func(b *testing.B) {
				s := halfFull(b, preset)
				r := benchRequest(preset, p)
				if err := s.Fit(&r); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					_ = s.Fit(&r)
				}
			})
		}
	}
}

func BenchmarkAllocateRelease(b *testing.B) {
	for _, preset := range benchPresets {
		for _, p := range []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort, policy.None} {
			b.Run(preset+"/"+p.String(), func(b *testing.B) {
				s := halfFull(b, preset)
				r := benchRequest(preset, p)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := s.Allocate(&r); err != nil {
						b.Fatal(err)
					}
					if err := s.Release(r.ID); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkScore(b *testing.B) {
	for _, preset := range benchPresets {
		for _, p := range []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort, policy.None} {
			b.Run(preset+"/"+p.String(), func(b *testing.B) {
				s := halfFull(b, preset)
				r := benchRequest(preset, p)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := s.Score(&r); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFitRefused measures a refused Fit beside an admitted one on
// half-full machines: "admitted" is benchRequest under SingleNUMANode;
// "nonuma" a SingleNUMANode request that the free CPUs of the machine
// hold in all but no NUMA node holds (ErrNoNUMAFit); "short" one that the
// whole machine does not hold now (ErrInsufficient); "short-alternating"
// two such requests in turn, so that no refusal is the state's last one
// again. A scheduler filtering many nodes mostly refuses, so a refusal
// should cost about what an admission does; its explanation is built only
// when asked for (Error, errors.As).
func BenchmarkFitRefused(b *testing.B) {
	for _, preset := range benchPresets {
		admitted := benchRequest(preset, policy.SingleNUMANode)
		for _, c := range []string{"admitted", "nonuma", "short", "short-alternating"} {
			b.Run(preset+"/"+c, func(b *testing.B) {
				s := halfFull(b, preset)
				var most, all int64
				for i := range s.Machine().NumNodes() {
					most, all = max(most, s.NodeFree(i)["cpu"]), all+s.NodeFree(i)["cpu"]
				}
				rs := []allocator.Request{admitted}
				switch c {
				case "nonuma":
					rs[0].CPUs = int(most) + 2
				case "short", "short-alternating":
					rs[0].CPUs = int(all) + 2
					if c == "short-alternating" {
						rs = append(rs, rs[0])
						rs[1].ID = "other"
					}
				}
				for i := range rs {
					if err := s.Fit(&rs[i]); (err == nil) != (c == "admitted") || rs[i].CPUs > int(all) && !errors.Is(err, allocator.ErrInsufficient) {
						b.Fatalf("Fit %s: %v", &rs[i], err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					_ = s.Fit(&rs[i%len(rs)])
				}
			})
		}
	}
}
