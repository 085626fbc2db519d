package allocator_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// heldOn is what one None claim holds on one node of numa64.
type heldOn struct {
	node int
	cpus string
	gpus []int
	mib  int64
}

// searchLimitShape is numa64 fragmented so that every node keeps a
// different mix of free CPUs, GPUs and memory: the shape on which the
// black-box checker saw None and BestEffort requests refused with
// ErrSearchLimit (and a Fit take 38 ms), copied here as data.
var searchLimitShape = []heldOn{
	{0, "0-3", []int{}, 11783},
	{1, "8", []int{}, 0},
	{2, "16-23,528-530", []int{4, 5}, 6240},
	{3, "24-26", []int{}, 0},
	{4, "32-39", []int{}, 16822},
	{5, "40-47,552-553", []int{10}, 0},
	{6, "48-50", []int{12}, 47410},
	{7, "56-57", []int{14}, 34149},
	{8, "64-71,576-582", []int{16}, 0},
	{9, "72-79,584-590", []int{}, 0},
	{10, "80-87,592-594", []int{20}, 0},
	{11, "88-95,600-603", []int{}, 55177},
	{12, "96-97", []int{24, 25}, 0},
	{13, "104-110", []int{26}, 0},
	{14, "112-119,624", []int{}, 39574},
	{15, "120-121", []int{}, 0},
	{16, "128-130", []int{32}, 0},
	{18, "144-146", []int{}, 0},
	{19, "152-159,664-666", []int{}, 21147},
	{20, "160-167,672-676", []int{40, 41}, 15112},
	{21, "168-172", []int{42}, 0},
	{22, "176-183,688-692", []int{}, 19380},
	{24, "192-199,704", []int{48}, 39104},
	{25, "200-206", []int{}, 32697},
	{26, "208-215,720-725", []int{52}, 386},
	{27, "216-222", []int{54, 55}, 0},
	{28, "224-227", []int{56}, 41243},
	{29, "232-239,744-748", []int{58}, 0},
	{30, "240-247,752-756", []int{60}, 8669},
	{31, "248-255,760-764", []int{62, 63}, 0},
	{32, "256-263,768-774", []int{64}, 0},
	{33, "", []int{66}, 0},
	{34, "272-277", []int{}, 0},
	{35, "280-282", []int{70}, 50998},
	{36, "288-295,800-806", []int{72}, 36731},
	{37, "296-298", []int{74}, 42153},
	{38, "304-311,816", []int{76}, 24581},
	{39, "312-318", []int{78, 79}, 0},
	{40, "320-324", []int{80}, 0},
	{41, "328-330", []int{82, 83}, 53110},
	{42, "336-343,848", []int{84}, 44449},
	{43, "344-351,856-857", []int{}, 0},
	{45, "360-367,872-875", []int{90, 91}, 0},
	{46, "", []int{92}, 0},
	{47, "376-379", []int{94}, 0},
	{48, "384-391,896-898", []int{96}, 60528},
	{49, "392-399,904-906", []int{98}, 0},
	{50, "400-407,912-916", []int{}, 0},
	{51, "408-415,920-926", []int{}, 0},
	{52, "416-422", []int{104}, 0},
	{53, "424-429", []int{106}, 0},
	{54, "", []int{108, 109}, 0},
	{55, "440-444", []int{110, 111}, 56276},
	{56, "448-455", []int{112}, 0},
	{57, "456-462", []int{}, 60370},
	{58, "464-471,976", []int{116}, 48948},
	{59, "472-479,984-990", []int{}, 0},
	{60, "480-486", []int{120, 121}, 0},
	{61, "488-493", []int{122, 123}, 28306},
	{62, "496-503,1008-1009", []int{124}, 43676},
	{63, "504-507", []int{126}, 0},
}

// claimShape claims held on numa64, one None allocation per entry.
func claimShape(tb testing.TB, held []heldOn) *allocator.State {
	tb.Helper()
	m, err := topology.Preset("numa64")
	if err != nil {
		tb.Fatal(err)
	}
	s := allocator.MustNew(m, allocator.Options{})
	for _, h := range held {
		a := allocator.Allocation{ID: fmt.Sprintf("h%d", h.node), Policy: policy.None,
			CPUs: numa.MustParseCPUSet(h.cpus), GPUs: h.gpus}
		if h.mib > 0 {
			a.Memory = []allocator.NodeMemory{{Node: numa.NodeID(h.node), MiB: h.mib}}
		}
		if _, err := s.Claim(a); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// freeTotals returns the free CPUs, GPUs and MiB of s.
func freeTotals(s *allocator.State, n int) (cpus, gpus int, mib int64) {
	for i := 0; i < n; i++ {
		f := s.NodeFree(i)
		cpus += int(f["cpu"])
		gpus += int(f["gpu"])
		mib += f["memory"]
	}
	return cpus, gpus, mib
}

// checkSoft asserts that a None or BestEffort request that the free
// totals cover is admitted by Fit, placed by Allocate with exactly the
// amounts asked for, and released.
func checkSoft(t *testing.T, s *allocator.State, r allocator.Request) {
	t.Helper()
	if err := s.Fit(&r); err != nil {
		t.Fatalf("Fit(%s) = %v, want admitted (the free totals cover it)", r.String(), err)
	}
	if _, err := s.Score(&r); err != nil {
		t.Fatalf("Score(%s) = %v", r.String(), err)
	}
	a, err := s.Allocate(&r)
	if err != nil {
		t.Fatalf("Allocate(%s) = %v after Fit admitted it", r.String(), err)
	}
	if a.CPUs.Size() != r.CPUs || len(a.GPUs) != r.GPUs || a.MemoryMiB() != r.MemoryMiB {
		t.Fatalf("Allocate(%s) gave %s", r.String(), a)
	}
	if err := s.Release(r.ID); err != nil {
		t.Fatal(err)
	}
}

// TestSoftPoliciesNeverRefusedBySearchBound: None and BestEffort are
// admitted by the free totals, so the bound of the covering search must
// never refuse them (it only makes their span's width best-effort).
func TestSoftPoliciesNeverRefusedBySearchBound(t *testing.T) {
	s := claimShape(t, searchLimitShape)
	for _, p := range []policy.Policy{policy.None, policy.BestEffort} {
		checkSoft(t, s, allocator.Request{ID: "x", CPUs: 304, GPUs: 37, MemoryMiB: 360000, Policy: p})
	}
}

// TestSoftPoliciesRandomFragments runs wide None and BestEffort requests,
// each covered by the free totals, on numa64 states fragmented at random
// (fixed seeds) in all three kinds.
func TestSoftPoliciesRandomFragments(t *testing.T) {
	m, err := topology.Preset("numa64")
	if err != nil {
		t.Fatal(err)
	}
	rounds := 40
	if testing.Short() {
		rounds = 8
	}
	for seed := uint64(1); seed <= uint64(rounds); seed++ {
		rng := rand.New(rand.NewPCG(seed, 12))
		var held []heldOn
		for i := 0; i < m.NumNodes(); i++ {
			if rng.IntN(8) == 0 {
				continue
			}
			// node i: CPUs 8i..8i+7 and 512+8i..512+8i+7, GPUs 2i and 2i+1.
			c := rng.IntN(9)
			h := heldOn{node: i, mib: int64(rng.IntN(60000))}
			if c > 0 {
				h.cpus = fmt.Sprintf("%d-%d", 8*i, 8*i+c-1)
			}
			if t := rng.IntN(8); t > 0 {
				if h.cpus != "" {
					h.cpus += ","
				}
				h.cpus += fmt.Sprintf("%d-%d", 512+8*i, 512+8*i+t-1)
			}
			h.gpus = []int{2 * i, 2*i + 1}[:rng.IntN(3)]
			if h.cpus == "" && len(h.gpus) == 0 && h.mib == 0 {
				continue
			}
			held = append(held, h)
		}
		s := claimShape(t, held)
		cpus, gpus, mib := freeTotals(s, m.NumNodes())
		for q := 0; q < 4; q++ {
			f := 0.3 + 0.65*rng.Float64()
			r := allocator.Request{ID: "x", CPUs: int(f * float64(cpus)), GPUs: int(f * float64(gpus)),
				MemoryMiB: int64(f * float64(mib))}
			for _, p := range []policy.Policy{policy.None, policy.BestEffort} {
				r.Policy = p
				t.Run(fmt.Sprintf("seed%d/%d/%s", seed, q, p), func(t *testing.T) { checkSoft(t, s, r) })
			}
		}
	}
}

// TestSearchLimitStillNamesRestricted: a Restricted request on the same
// shape is admitted or refused exactly, never wrongly admitted; a refusal
// by the bound says so with ErrSearchLimit.
func TestSearchLimitRestrictedSaysSo(t *testing.T) {
	s := claimShape(t, searchLimitShape)
	r := allocator.Request{ID: "x", CPUs: 304, GPUs: 37, MemoryMiB: 360000, Policy: policy.Restricted}
	err := s.Fit(&r)
	var pe *allocator.PlacementError
	if err != nil && !errors.As(err, &pe) {
		t.Fatalf("Fit(%s) = %v, want a placement refusal", r.String(), err)
	}
	_, aerr := s.Allocate(&r)
	if (err == nil) != (aerr == nil) {
		t.Fatalf("Fit = %v but Allocate = %v", err, aerr)
	}
}

// BenchmarkSearchLimitShape times the decisions of the wide request of
// searchLimitShape (a Fit took 38 ms and a Score 47 ms when the bound
// refused them).
func BenchmarkSearchLimitShape(b *testing.B) {
	s := claimShape(b, searchLimitShape)
	for _, p := range []policy.Policy{policy.None, policy.BestEffort, policy.Restricted} {
		r := allocator.Request{CPUs: 304, GPUs: 37, MemoryMiB: 360000, Policy: p}
		b.Run(p.String()+"/Fit", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = s.Fit(&r)
			}
		})
		b.Run(p.String()+"/Score", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = s.Score(&r)
			}
		})
	}
}
