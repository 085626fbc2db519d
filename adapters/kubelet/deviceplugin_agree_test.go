package kubelet

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// TestAllocatorAgreesWithPreferredAllocation: the allocator and
// GetPreferredAllocation choose GPUs with one chooser (allocator/devchoice).
// On random machines (NUMA nodes, distances, switches, GPUs of unknown
// node, NVLinks) with random allocations and unhealthy GPUs in place, a
// request for GPUs (and a CPU or none) under a random policy gets, on each
// NUMA node of its span (and among the GPUs of unknown node), exactly the
// GPUs GetPreferredAllocation answers for the same free GPUs of that node
// and the same count. The span and the count per node are the engine's
// (see docs/design.md, "Which devices"); the devices are the chooser's.
func TestAllocatorAgreesWithPreferredAllocation(t *testing.T) {
	compared := 0
	defer func() { t.Logf("%d nodes' choices compared", compared) }()
	rapid.Check(t, func(rt *rapid.T) {
		m := randomMachine(rt, rapid.Bool().Draw(rt, "withLinks"))
		s := allocator.MustNew(m, allocator.Options{})
		p := NewPreferredAllocator(m)
		for _, g := range m.GPUs() {
			if rapid.IntRange(0, 7).Draw(rt, "unhealthy") == 0 {
				_, err := s.SetDeviceHealth(allocator.GPUClass, strconv.Itoa(g.ID), false)
				require.NoError(rt, err)
			}
		}
		policies := []policy.Policy{policy.None, policy.BestEffort, policy.Restricted, policy.SingleNUMANode}
		for i := range rapid.IntRange(0, 3).Draw(rt, "before") {
			_, _ = s.Allocate(&allocator.Request{ID: "x" + strconv.Itoa(i), GPUs: rapid.IntRange(1, 3).Draw(rt, "xGPUs"),
				Policy: policies[rapid.IntRange(0, 3).Draw(rt, "xPolicy")], Exclusive: policy.Preferred})
		}
		// The free GPUs now, by NUMA node ID (unknown: -1).
		held := map[int]bool{}
		for _, a := range s.Live() {
			for _, g := range a.GPUs {
				held[g] = true
			}
		}
		snap := s.Snapshot()
		free := map[numa.NodeID][]string{}
		for _, g := range m.GPUs() {
			if !held[g.ID] && !slices.Contains(snap.Unhealthy[allocator.GPUClass], strconv.Itoa(g.ID)) {
				free[g.NUMANode] = append(free[g.NUMANode], strconv.Itoa(g.ID))
			}
		}
		total := 0
		for _, ids := range free {
			total += len(ids)
		}
		if total == 0 {
			return
		}
		r := &allocator.Request{ID: "r", GPUs: rapid.IntRange(1, total).Draw(rt, "gpus"),
			CPUs: rapid.IntRange(0, 1).Draw(rt, "cpus"), Policy: policies[rapid.IntRange(0, 3).Draw(rt, "policy")],
			Exclusive: policy.Preferred}
		a, err := s.Allocate(r)
		if err != nil {
			return
		}
		chosen := map[numa.NodeID][]string{}
		for _, id := range a.GPUs {
			g, _ := m.GPU(id)
			chosen[g.NUMANode] = append(chosen[g.NUMANode], strconv.Itoa(id))
		}
		for node, ids := range chosen {
			want, err := p.GetPreferredAllocation(free[node], nil, len(ids))
			require.NoError(rt, err)
			require.Equal(rt, want, ids, "NUMA node %d: free %v, %d GPUs (allocation %v)", node, free[node], len(ids), a.GPUs)
			compared++
		}
	})
}

// TestAllocatorAgreesWithPreferredAllocationOnPresets: the same on the
// presets with GPUs, every GPU free and after one allocation, for every
// count of GPUs a SingleNUMANode request can get.
func TestAllocatorAgreesWithPreferredAllocationOnPresets(t *testing.T) {
	for _, name := range []string{"dgx-h100", "dgx-a100", "xeon-2s-snc2-8gpu"} {
		m := preset(t, name)
		p := NewPreferredAllocator(m)
		for _, taken := range []int{0, 1, 3} {
			for k := 1; k <= m.NumGPUs(); k++ {
				s := allocator.MustNew(m, allocator.Options{})
				if taken > 0 {
					_, err := s.Allocate(&allocator.Request{ID: "x", GPUs: taken, Policy: policy.BestEffort})
					require.NoError(t, err)
				}
				x, _ := s.Get("x")
				a, err := s.Allocate(&allocator.Request{ID: "r", GPUs: k, CPUs: 1, Policy: policy.SingleNUMANode, Exclusive: policy.Preferred})
				if err != nil {
					continue
				}
				node := a.NUMANodes()[0]
				var free, ids []string
				for _, g := range m.GPUs() {
					if g.NUMANode == node && !slices.Contains(x.GPUs, g.ID) {
						free = append(free, strconv.Itoa(g.ID))
					}
				}
				for _, g := range a.GPUs {
					ids = append(ids, strconv.Itoa(g))
				}
				want, err := p.GetPreferredAllocation(free, nil, k)
				require.NoError(t, err)
				require.Equal(t, want, ids, "%s, %d taken, %d GPUs on NUMA node %d", name, taken, k, node)
			}
		}
	}
}
