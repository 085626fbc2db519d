package allocator_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// The worst resizes we could construct on numa64 (8 sockets of 8 NUMA
// nodes, 16 CPUs and 2 GPUs per node): an allocation "big" spanning many
// nodes, most of them holding few of its CPUs, resized to sizes whose
// width (width_cap or width_free) is far below its span, so that a search
// over the subsets of its nodes would have C(40, 10) and more to try.

// resizeState describes the machine around "big".
type resizeState struct {
	policy policy.Policy
	// span is the number of NUMA nodes big spans: the highest-numbered
	// ones. The last 8 (socket 7) hold 16 of its CPUs each ("heavy"), the
	// others (all of them when it spans at most 8 nodes) light CPUs each;
	// node 63 also holds its GPU and 1 GiB of its memory.
	span, light int
	// freeOwn and freeOther are the CPUs left free on big's nodes that have
	// room and on the other nodes: single-node allocations ("fill-<node>",
	// SingleNUMANode, Preferred) hold the rest. -1 leaves those nodes
	// without fills.
	freeOwn, freeOther int
}

// build returns the state.
func (rs resizeState) build(tb testing.TB) *allocator.State {
	tb.Helper()
	m, err := topology.Preset("numa64")
	if err != nil {
		tb.Fatal(err)
	}
	s := allocator.MustNew(m, allocator.Options{})
	// cpus returns CPUs of node n's cores from..to-1 (core k = CPUs 8n+k
	// and 512+8n+k).
	cpus := func(n, from, to int) numa.CPUSet {
		var c numa.CPUSet
		for k := from; k < to; k++ {
			c.Add(8*n + k)
			c.Add(512 + 8*n + k)
		}
		return c
	}
	big := allocator.Allocation{ID: "big", Policy: rs.policy, GPUs: []int{126},
		Memory: []allocator.NodeMemory{{Node: 63, MiB: 1024}}}
	held := make([]int, 64) // cores of big per node
	for n := 64 - rs.span; n < 64; n++ {
		held[n] = rs.light / 2
		if n >= 56 && rs.span > 8 {
			held[n] = 8
		}
		big.CPUs.UnionWith(cpus(n, 0, held[n]))
	}
	if _, err := s.Claim(big); err != nil {
		tb.Fatal(err)
	}
	for n := 0; n < 64; n++ {
		free := rs.freeOther
		if n >= 64-rs.span {
			free = rs.freeOwn
		}
		to := 8 - free/2
		if free < 0 || to <= held[n] {
			continue
		}
		fill := allocator.Allocation{ID: fmt.Sprintf("fill-%d", n), Policy: policy.SingleNUMANode,
			Exclusive: policy.Preferred, CPUs: cpus(n, held[n], to)}
		if _, err := s.Claim(fill); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// resizeCase is one resize of big.
type resizeCase struct {
	name  string
	state resizeState
	cpus  int
	ok    bool // granted
}

var (
	// Little free on big's nodes, every other node free.
	restricted40 = resizeState{policy: policy.Restricted, span: 40, light: 2, freeOwn: 4, freeOther: -1}
	restricted28 = resizeState{policy: policy.Restricted, span: 28, light: 2, freeOwn: 4, freeOther: -1}
	bestEffort40 = resizeState{policy: policy.BestEffort, span: 40, light: 2, freeOwn: 4, freeOther: -1}
	// Little free anywhere.
	bestEffortTight40 = resizeState{policy: policy.BestEffort, span: 40, light: 2, freeOwn: 4, freeOther: 4}
	none40            = resizeState{policy: policy.None, span: 40, light: 2, freeOwn: 4, freeOther: 4}
	// Nothing else on the machine: big can grow over its 40 nodes.
	restrictedEmpty40 = resizeState{policy: policy.Restricted, span: 40, light: 2, freeOwn: -1, freeOther: -1}
	restrictedEmpty28 = resizeState{policy: policy.Restricted, span: 28, light: 2, freeOwn: -1, freeOther: -1}
	// Every node outside big's 28 holds a one-node allocation of 2 CPUs:
	// growing onto them is forbidden by singleNUMANodeExclusive.
	restrictedSingle28 = resizeState{policy: policy.Restricted, span: 28, light: 2, freeOwn: -1, freeOther: 14}
	// SingleNUMANode: big on node 63 alone (8 CPUs), 4 CPUs free there.
	single1 = resizeState{policy: policy.SingleNUMANode, span: 1, light: 8, freeOwn: 4, freeOther: 4}
)

// resizeCases are the worst cases, refused and granted, under each policy
// (big holds 192 CPUs on 40 nodes, 168 on 28; on numa64 width_cap of n
// CPUs is ceil(n/16) nodes, inside one socket up to 128 CPUs).
var resizeCases = []resizeCase{
	// width_cap 10 across sockets (free elsewhere): its best 10 nodes keep
	// 132 CPUs.
	{"Restricted/span40/shrink-refused", restricted40, 150, false},
	// width_cap 7 inside socket 7, its heavy nodes.
	{"Restricted/span40/shrink-granted", restricted40, 100, true},
	{"Restricted/span28/shrink-refused", restricted28, 150, false},
	{"Restricted/span28/shrink-granted", restricted28, 100, true},
	// width_cap 40 = its span: 448 more CPUs on its nodes, 128 free there.
	{"Restricted/span40/grow-refused", restricted40, 640, false},
	{"Restricted/span40/grow-granted", restrictedEmpty40, 640, true},
	// width_cap 32: 4 more nodes, all held alone by other allocations.
	{"Restricted/span28/grow-refused-exclusivity", restrictedSingle28, 500, false},
	{"Restricted/span28/grow-granted", restrictedEmpty28, 500, true},
	// width_free 10 (free elsewhere): its best 10 nodes keep 132 CPUs.
	{"BestEffort/span40/shrink-refused", bestEffort40, 150, false},
	// width_free 8: socket 7.
	{"BestEffort/span40/shrink-granted", bestEffort40, 120, true},
	// width_free 19, below its span of 40.
	{"BestEffort/span40/grow-refused", bestEffort40, 300, false},
	// width_free 40: the 128 free CPUs of its nodes.
	{"BestEffort/span40/grow-granted", bestEffortTight40, 320, true},
	{"None/span40/shrink-granted", none40, 100, true},
	{"None/span40/grow-granted", none40, 400, true},
	// 308 more CPUs, 224 free on the machine.
	{"None/span40/grow-refused", none40, 500, false},
	{"SingleNUMANode/span1/grow-granted", single1, 12, true},
	{"SingleNUMANode/span1/grow-refused", single1, 13, false},
	{"SingleNUMANode/span1/shrink-granted", single1, 2, true},
}

// checkResize checks the answer of one case: granted with the new size,
// or refused with a placement error that names big's nodes.
func checkResize(tb testing.TB, c resizeCase, a allocator.Allocation, err error) {
	tb.Helper()
	if c.ok {
		if err != nil {
			tb.Fatalf("%s: refused: %v", c.name, err)
		}
		if a.CPUs.Size() != c.cpus {
			tb.Fatalf("%s: %d CPUs after the resize, want %d", c.name, a.CPUs.Size(), c.cpus)
		}
		return
	}
	var pe *allocator.PlacementError
	if !errors.As(err, &pe) {
		tb.Fatalf("%s: want a refusal (*PlacementError), got %v", c.name, err)
	}
}

// TestResizeWorstCases: every worst case gets its answer (the benchmark
// below times them).
func TestResizeWorstCases(t *testing.T) {
	for _, c := range resizeCases {
		t.Run(c.name, func(t *testing.T) {
			s := c.state.build(t)
			a, err := s.Resize("big", c.cpus)
			checkResize(t, c, a, err)
		})
	}
}

// BenchmarkResizeWorstNUMA64 times the resizes of each worst case: a
// refused one again and again (it changes nothing), a granted one
// alternating with the resize back to big's first size (granted too), so
// that every iteration is one resize of the kind the case names.
func BenchmarkResizeWorstNUMA64(b *testing.B) {
	for _, c := range resizeCases {
		b.Run(c.name, func(b *testing.B) {
			s := c.state.build(b)
			first, _ := s.Get("big")
			sizes := []int{c.cpus, first.CPUs.Size()}
			a, err := s.Resize("big", c.cpus)
			checkResize(b, c, a, err)
			if c.ok {
				if _, err := s.Resize("big", sizes[1]); err != nil {
					b.Fatalf("%s: the resize back to %d CPUs: %v", c.name, sizes[1], err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			if !c.ok {
				sizes[1] = c.cpus // a refused resize repeats
			}
			for i := 0; i < b.N; i++ {
				_, err := s.Resize("big", sizes[i%2])
				if c.ok == (err != nil) {
					b.Fatalf("%s: iteration %d (to %d CPUs): %v", c.name, i, sizes[i%2], err)
				}
			}
		})
	}
}
