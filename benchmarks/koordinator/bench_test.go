package koordinator

import (
	"fmt"
	"testing"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// filterCase is one Filter of a pod on one node in one state.
type filterCase struct {
	name   string
	preset string
	fill   int // NUMA nodes taken whole by SingleNUMANode pods
	cpus   int
	gpus   int
	memMiB int64
	pol    policy.Policy
	bind   bool // Koordinator binds the CPUs (else it places amounts only)
}

// filterCases are the side-by-side cases: on dgx-h100 (2 NUMA nodes) and
// dgx-a100 (8) empty and half full (half of the NUMA nodes taken whole), a
// pod of 24 CPUs and 64 GiB under each policy (one node holds it) and a
// wide pod of one and a half nodes' CPUs (two nodes hold it) under
// Restricted and BestEffort where two nodes are free, and pods of 24 CPUs
// and 1, 2, 4 or 8 GPUs under SingleNUMANode and Restricted where the
// state holds them (on dgx-a100 one NUMA node has 2 GPUs, so
// SingleNUMANode takes at most 2), but for the Restricted pods of the
// designed difference (restrictedDiffers), which Koordinator refuses. Koordinator binds
// whole CPUs to the pod (QoS LSR, FullPCPUs: ACK's cpuset pods) except in
// the cpus24-unbound cases (QoS LS), where it places amounts only;
// numaplace's decision is the same in both (Fit decides the amounts on
// NUMA nodes; Allocate picks the CPUs).
func filterCases(tb testing.TB) []filterCase {
	var out []filterCase
	for _, preset := range []string{"dgx-h100", "dgx-a100"} {
		m := machine(tb, preset)
		perNode := m.Node(0).CPUs.Size()
		for _, fill := range []int{0, m.NumNodes() / 2} {
			state := "empty"
			if fill > 0 {
				state = "half"
			}
			for _, p := range []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort} {
				out = append(out, filterCase{fmt.Sprintf("%s-%s/cpus24/%s", preset, state, p), preset, fill, 24, 0, 64 << 10, p, true},
					filterCase{fmt.Sprintf("%s-%s/cpus24-unbound/%s", preset, state, p), preset, fill, 24, 0, 64 << 10, p, false})
			}
			for _, p := range []policy.Policy{policy.Restricted, policy.BestEffort} {
				if m.NumNodes()-fill < 2 {
					break // the wide pod needs two free nodes
				}
				out = append(out, filterCase{fmt.Sprintf("%s-%s/wide/%s", preset, state, p), preset, fill, perNode * 3 / 2, 0, 64 << 10, p, true})
			}
			for _, gpus := range []int{1, 2, 4, 8} {
				for _, p := range []policy.Policy{policy.SingleNUMANode, policy.Restricted} {
					c := filterCase{fmt.Sprintf("%s-%s/gpus%d/%s", preset, state, gpus, p), preset, fill, 24, gpus, 64 << 10, p, true}
					if c.fits(tb) && (p != policy.Restricted || !restrictedDiffers(m, c.request())) {
						out = append(out, c)
					}
				}
			}
		}
	}
	return out
}

// request is the case's pod as numaplace reads it.
func (c filterCase) request() allocator.Request {
	return allocator.Request{ID: "bench", CPUs: c.cpus, GPUs: c.gpus, MemoryMiB: c.memMiB, Policy: c.pol, Exclusive: policy.Required}
}

// fits reports whether numaplace holds the case's pod in the case's state.
func (c filterCase) fits(tb testing.TB) bool {
	r := c.request()
	return newState(tb, machine(tb, c.preset), c.fill).Fit(&r) == nil
}

func machine(tb testing.TB, preset string) *topology.Machine {
	tb.Helper()
	m, err := topology.Preset(preset)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkFilter is the filter of one pod on one node:
// BenchmarkFilter/numaplace/CASE is allocator.State.Fit (the decision the
// scheduler adapter's Filter makes for a prepared pod: the policy, the
// exclusivity rule, the CPUs and memory on the NUMA nodes);
// BenchmarkFilter/koordinator/CASE is Koordinator v1.6.0's NodeNUMAResource
// and DeviceShare plugins, PreFilter and Filter in a new cycle state each
// time, as koord-scheduler runs them for a pod and a node (NodeNUMAResource's
// Filter generates the NUMA hints of the CPUs and memory, takes DeviceShare's
// hints of the GPUs, and merges them in its topology manager). Both sides hold the machine in the same state and must give
// the same verdict (TestPeerKoordinatorAgrees); each iteration checks it.
func BenchmarkFilter(b *testing.B) {
	for _, c := range filterCases(b) {
		p := newPair(b, machine(b, c.preset), c.fill)
		r := c.request()
		pod := koordPodBind("bench", c.cpus, c.gpus, c.memMiB, c.pol, c.bind)
		b.Run("numaplace/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := p.state.Fit(&r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("koordinator/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, s := p.koord.filter(pod); !s.IsSuccess() {
					b.Fatal(s.AsError())
				}
			}
		})
	}
}
