package allocator_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// The table tests below follow docs/design.md's "Semantics" case by case, on the
// dgx-h100 and dgx-a100 presets and on small machines built for the case.
// Helpers are prefixed tb so that they do not collide with other test files
// of the package.

func tbPreset(t testing.TB, name string) *topology.Machine {
	t.Helper()
	m, err := topology.Preset(name)
	require.NoError(t, err)
	return m
}

func tbState(t testing.TB, name string) *allocator.State {
	t.Helper()
	return allocator.MustNew(tbPreset(t, name), allocator.Options{})
}

// tbNodeSpec describes one node of a machine built by tbMachine.
type tbNodeSpec struct {
	socket int
	cores  int   // physical cores
	gpus   int   // GPUs, all under the node's own switch "sw<id>"
	mem    int64 // MiB
}

// tbMachine builds a machine with nodes 0..len(nodes)-1 and tpc threads per
// core. CPUs are numbered core after core (core c of the machine holds CPUs
// c*tpc .. c*tpc+tpc-1), GPUs node after node. edit may add to the builder
// before Build.
func tbMachine(t testing.TB, tpc int, nodes []tbNodeSpec, edit func(b *topology.Builder)) *topology.Machine {
	t.Helper()
	b := topology.NewBuilder("test")
	cpu, gpu := 0, 0
	for i, n := range nodes {
		var cpus numa.CPUSet
		for range n.cores {
			core := numa.CPURange(cpu, cpu+tpc-1)
			cpus.UnionWith(core)
			if tpc > 1 {
				b.AddCore(core)
			}
			cpu += tpc
		}
		b.AddNode(topology.Node{ID: numa.NodeID(i), Socket: n.socket, CPUs: cpus, MemoryMiB: n.mem})
		for range n.gpus {
			b.AddGPU(topology.GPU{ID: gpu, NUMANode: numa.NodeID(i), PCIeSwitch: fmt.Sprintf("sw%d", i)})
			gpu++
		}
	}
	if edit != nil {
		edit(b)
	}
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// tbText is the observable state: every live allocation in full, the node
// types, the free CPUs and the unhealthy devices.
func tbText(s *allocator.State) string {
	var sb strings.Builder
	snap := s.Snapshot()
	for _, a := range snap.Allocations {
		fmt.Fprintf(&sb, "%s %v/%v full=%v span=%s mem=%v\n", a.String(), a.Policy, a.Exclusive, a.FullPCPUs,
			a.DenseSpan, a.Memory)
	}
	for _, c := range slices.Sorted(maps.Keys(snap.Unhealthy)) {
		fmt.Fprintf(&sb, "unhealthy %s %v\n", c, snap.Unhealthy[c])
	}
	single, shared := s.NodeTypes()
	fmt.Fprintf(&sb, "single %s shared %s free %s\n", single, shared, s.FreeCPUs())
	return sb.String()
}

// tbTry runs Fit then Allocate and checks that they agree exactly, and
// that a refusal changes nothing.
func tbTry(t testing.TB, s *allocator.State, r allocator.Request) (allocator.Allocation, error) {
	t.Helper()
	before := tbText(s)
	fitErr := s.Fit(&r)
	a, err := s.Allocate(&r)
	if err == nil {
		require.NoError(t, fitErr, "Fit refused %s, Allocate admitted it", &r)
		return a.Clone(), nil
	}
	require.Error(t, fitErr, "Fit admitted %s, Allocate refused it: %v", &r, err)
	require.Equal(t, err.Error(), fitErr.Error(), "Fit and Allocate give different reasons")
	require.Equal(t, before, tbText(s), "a refused request changed the state")
	return allocator.Allocation{}, err
}

func tbMust(t testing.TB, s *allocator.State, r allocator.Request) allocator.Allocation {
	t.Helper()
	a, err := tbTry(t, s, r)
	require.NoError(t, err, "allocate %s", &r)
	return a
}

// tbRefused requires a refusal of the given category and returns the
// *PlacementError.
func tbRefused(t testing.TB, s *allocator.State, r allocator.Request, sentinel error) *allocator.PlacementError {
	t.Helper()
	_, err := tbTry(t, s, r)
	require.ErrorIs(t, err, sentinel, "request %s", &r)
	var pe *allocator.PlacementError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, r.ID, pe.ID)
	require.Equal(t, r.Policy, pe.Policy)
	require.NotEmpty(t, pe.Reason)
	return pe
}

func tbIDs(ids ...int) []numa.NodeID {
	out := make([]numa.NodeID, len(ids))
	for i, id := range ids {
		out[i] = numa.NodeID(id)
	}
	return out
}

// tbCPUsByNode counts a's CPUs per node ID.
func tbCPUsByNode(m *topology.Machine, cpus numa.CPUSet) map[numa.NodeID]int {
	out := map[numa.NodeID]int{}
	for c := range cpus.All() {
		i, ok := m.CPUNode(c)
		if !ok {
			panic(fmt.Sprintf("CPU %d has no node", c))
		}
		out[m.NodeID(i)]++
	}
	return out
}

// tbGPUsByNode counts GPUs per node ID.
func tbGPUsByNode(m *topology.Machine, gpus []int) map[numa.NodeID]int {
	out := map[numa.NodeID]int{}
	for _, g := range gpus {
		x, ok := m.GPU(g)
		if !ok {
			panic(fmt.Sprintf("GPU %d does not exist", g))
		}
		out[x.NUMANode]++
	}
	return out
}

// tbInOneSet reports whether the node IDs lie inside one NUMA set.
func tbInOneSet(m *topology.Machine, ids []numa.NodeID) bool {
	mask, err := m.MaskOf(ids...)
	if err != nil {
		return false
	}
	return m.SetsCrossed(mask) == 1
}

func TestTableWorkedExample(t *testing.T) {
	// docs/design.md: a 2-CPU SingleNUMANode pod on node 0 makes node 0 single;
	// an 8-GPU Restricted pod (width_cap 2) is then refused with all 8 GPUs
	// free; with Preferred it is admitted.
	s := tbState(t, "dgx-h100")
	m := s.Machine()
	a := tbMust(t, s, allocator.Request{ID: "small", CPUs: 2, Policy: policy.SingleNUMANode})
	require.Equal(t, tbIDs(0), a.NUMANodes())
	require.Equal(t, map[numa.NodeID]int{0: 2}, tbCPUsByNode(m, a.CPUs))
	single, shared := s.NodeTypes()
	require.Equal(t, numa.MaskOf(0), single)
	require.Equal(t, numa.Mask(0), shared)

	big := allocator.Request{ID: "big", GPUs: 8, Policy: policy.Restricted}
	pe := tbRefused(t, s, big, allocator.ErrExclusivity)
	require.Equal(t, tbIDs(0), pe.Blocked)
	require.Equal(t, 2, pe.WidthCap)
	require.Equal(t, 2, pe.Width)
	require.False(t, pe.InSet, "each dgx-h100 socket has 4 GPUs: width_cap is found across sets")
	require.Contains(t, pe.Reason, "singleNUMANodeExclusive")
	require.Contains(t, pe.Reason, "0")
	require.NotErrorIs(t, pe, allocator.ErrInsufficient)
	require.NotErrorIs(t, pe, allocator.ErrNoNUMAFit)
	_, err := s.Score(&big)
	require.ErrorIs(t, err, allocator.ErrExclusivity, "Score gives Fit's error")

	big.Exclusive = policy.Preferred
	b := tbMust(t, s, big)
	require.Equal(t, tbIDs(0, 1), b.NUMANodes())
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, b.GPUs)
	single, shared = s.NodeTypes()
	require.Equal(t, numa.Mask(0), single, "node 0 is now shared")
	require.Equal(t, numa.MaskOf(0, 1), shared)
}

func TestTableSingleNUMANode(t *testing.T) {
	t.Run("exactly one node", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		m := s.Machine()
		for i, want := range []int{0, 1} {
			a := tbMust(t, s, allocator.Request{ID: fmt.Sprint("tg", i), CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode})
			require.Equal(t, tbIDs(want), a.NUMANodes())
			require.Equal(t, map[numa.NodeID]int{numa.NodeID(want): 24}, tbCPUsByNode(m, a.CPUs))
			require.Equal(t, map[numa.NodeID]int{numa.NodeID(want): 4}, tbGPUsByNode(m, a.GPUs))
		}
		// The demo's third pod: the GPUs are gone.
		pe := tbRefused(t, s, allocator.Request{ID: "tg2", CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode},
			allocator.ErrInsufficient)
		require.Equal(t, []allocator.Shortage{{Resource: "gpu", Need: 4, Have: 0}}, pe.Short)
	})

	tests := []struct {
		name   string
		preset string
		r      allocator.Request
		want   error
	}{
		// The resources exist, but only across nodes.
		{"5 GPUs across nodes", "dgx-h100", allocator.Request{GPUs: 5}, allocator.ErrNoNUMAFit},
		{"113 CPUs across nodes", "dgx-h100", allocator.Request{CPUs: 113}, allocator.ErrNoNUMAFit},
		{"memory across nodes", "dgx-h100", allocator.Request{CPUs: 1, MemoryMiB: 1<<20 + 1}, allocator.ErrNoNUMAFit},
		{"3 GPUs on dgx-a100", "dgx-a100", allocator.Request{GPUs: 3}, allocator.ErrNoNUMAFit},
		{"GPUs and CPUs apart", "dgx-a100", allocator.Request{GPUs: 2, CPUs: 33}, allocator.ErrNoNUMAFit},
		// The machine lacks them.
		{"9 GPUs", "dgx-h100", allocator.Request{GPUs: 9}, allocator.ErrInsufficient},
		{"225 CPUs", "dgx-h100", allocator.Request{CPUs: 225}, allocator.ErrInsufficient},
		{"too much memory", "dgx-h100", allocator.Request{MemoryMiB: 2<<20 + 1}, allocator.ErrInsufficient},
		{"a device class the machine lacks", "dgx-h100",
			allocator.Request{GPUs: 1, Devices: map[string]int{"fpga": 1}}, allocator.ErrInsufficient},
		{"rdma on a machine without NICs", "small-1s",
			allocator.Request{CPUs: 1, Devices: map[string]int{"rdma": 1}}, allocator.ErrInsufficient},
		{"GPUs on a machine without GPUs", "epyc-2s-nps4", allocator.Request{GPUs: 1}, allocator.ErrInsufficient},
	}
	for _, tt := range tests {
		for _, p := range []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort, policy.None} {
			want := tt.want
			if want == allocator.ErrNoNUMAFit && p != policy.SingleNUMANode {
				continue // the other policies may span nodes
			}
			t.Run(tt.name+"/"+p.String(), func(t *testing.T) {
				s := tbState(t, tt.preset)
				r := tt.r
				r.ID, r.Policy = "r", p
				pe := tbRefused(t, s, r, want)
				if want == allocator.ErrInsufficient {
					require.NotEmpty(t, pe.Short)
				}
				if want == allocator.ErrNoNUMAFit {
					require.Equal(t, 1, pe.Width)
				}
			})
		}
	}

	t.Run("may not use a shared node", func(t *testing.T) {
		m := tbMachine(t, 1, []tbNodeSpec{{socket: 0, cores: 4, gpus: 2}, {socket: 0, cores: 4, gpus: 2}}, nil)
		s := allocator.MustNew(m, allocator.Options{})
		a := tbMust(t, s, allocator.Request{ID: "wide", GPUs: 3, Policy: policy.Restricted})
		require.Equal(t, tbIDs(0, 1), a.NUMANodes())
		// One GPU and plenty of CPUs are free on each node, but both are shared.
		pe := tbRefused(t, s, allocator.Request{ID: "one", CPUs: 1, GPUs: 1, Policy: policy.SingleNUMANode},
			allocator.ErrExclusivity)
		require.Equal(t, tbIDs(0, 1), pe.Blocked)
		require.Equal(t, 1, pe.Width)
		// Preferred lifts the rule; None is not bound by it.
		tbMust(t, s, allocator.Request{ID: "pref", CPUs: 1, Policy: policy.SingleNUMANode, Exclusive: policy.Preferred})
		n := tbMust(t, s, allocator.Request{ID: "none", CPUs: 1, Policy: policy.None})
		require.Len(t, n.NUMANodes(), 1)
	})

	t.Run("avoids a shared node when an idle one exists", func(t *testing.T) {
		m := tbMachine(t, 1, []tbNodeSpec{{0, 4, 2, 0}, {0, 4, 2, 0}, {0, 4, 2, 0}}, nil)
		s := allocator.MustNew(m, allocator.Options{})
		tbMust(t, s, allocator.Request{ID: "wide", GPUs: 3, Policy: policy.Restricted}) // nodes 0,1
		a := tbMust(t, s, allocator.Request{ID: "one", GPUs: 1, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(2), a.NUMANodes(), "best fit would pick a shared node, the rule forbids it")
	})
}

// tbSetsMachine has four nodes in two NUMA sets {0,1} and {2,3}, one GPU
// and two CPUs each; the cross-set pair {1,2} is by far the nearest.
func tbSetsMachine(t testing.TB) *topology.Machine {
	return tbMachine(t, 1, []tbNodeSpec{{0, 2, 1, 1024}, {0, 2, 1, 1024}, {1, 2, 1, 1024}, {1, 2, 1, 1024}},
		func(b *topology.Builder) {
			b.SetDistances([][]int{
				{10, 40, 30, 30},
				{40, 10, 11, 30},
				{30, 11, 10, 40},
				{30, 30, 40, 10},
			})
		})
}

func TestTableRestricted(t *testing.T) {
	t.Run("dgx-h100 8 GPUs 16 CPUs", func(t *testing.T) {
		// The kubelet's restricted refuses this; here CPUs follow the GPUs.
		s := tbState(t, "dgx-h100")
		m := s.Machine()
		a := tbMust(t, s, allocator.Request{ID: "big", CPUs: 16, GPUs: 8, Policy: policy.Restricted})
		require.Equal(t, tbIDs(0, 1), a.NUMANodes())
		require.Equal(t, map[numa.NodeID]int{0: 8, 1: 8}, tbCPUsByNode(m, a.CPUs), "CPUs in proportion to GPUs")
		require.Equal(t, "0-3,56-59,112-115,168-171", a.CPUs.String(), "whole cores, lowest first")
	})

	t.Run("dgx-h100 width 1 when one node suffices", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		a := tbMust(t, s, allocator.Request{ID: "r", CPUs: 16, GPUs: 4, Policy: policy.Restricted})
		require.Equal(t, tbIDs(0), a.NUMANodes())
	})

	t.Run("dgx-a100 4 GPUs inside one socket", func(t *testing.T) {
		s := tbState(t, "dgx-a100")
		m := s.Machine()
		a := tbMust(t, s, allocator.Request{ID: "r", CPUs: 8, GPUs: 4, Policy: policy.Restricted})
		require.Equal(t, tbIDs(1, 3), a.NUMANodes(), "GPUs 0-3 sit on nodes 3 and 1, both socket 0")
		require.Equal(t, []int{0, 1, 2, 3}, a.GPUs)
		require.True(t, tbInOneSet(m, a.NUMANodes()))
		require.Equal(t, map[numa.NodeID]int{1: 4, 3: 4}, tbCPUsByNode(m, a.CPUs))
		b := tbMust(t, s, allocator.Request{ID: "r2", CPUs: 8, GPUs: 4, Policy: policy.Restricted})
		require.Equal(t, tbIDs(5, 7), b.NUMANodes())
		require.Equal(t, []int{4, 5, 6, 7}, b.GPUs)
	})

	t.Run("dgx-a100 refused rather than crossing sets", func(t *testing.T) {
		s := tbState(t, "dgx-a100")
		// GPU 0 (node 3) and GPU 4 (node 7) are held: 3 GPUs free per socket,
		// 4 free on the cross-socket pair {1,5}.
		for _, g := range []int{0, 4} {
			_, err := s.Claim(allocator.Allocation{ID: fmt.Sprint("g", g), GPUs: []int{g}, Policy: policy.SingleNUMANode})
			require.NoError(t, err)
		}
		pe := tbRefused(t, s, allocator.Request{ID: "r", GPUs: 4, Policy: policy.Restricted}, allocator.ErrNoNUMAFit)
		require.Equal(t, 2, pe.WidthCap)
		require.Equal(t, 2, pe.Width)
		require.True(t, pe.InSet)
		// BestEffort takes width_free 2 across the sockets.
		a := tbMust(t, s, allocator.Request{ID: "be", GPUs: 4, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(1, 5), a.NUMANodes())
	})

	t.Run("inside one set although a cheaper cross-set span exists", func(t *testing.T) {
		m := tbSetsMachine(t)
		s := allocator.MustNew(m, allocator.Options{})
		a := tbMust(t, s, allocator.Request{ID: "a", GPUs: 2, Policy: policy.Restricted})
		require.Equal(t, tbIDs(0, 1), a.NUMANodes(), "{1,2} is nearer but crosses sets")
		b := tbMust(t, s, allocator.Request{ID: "b", GPUs: 2, CPUs: 2, Policy: policy.Restricted})
		require.Equal(t, tbIDs(2, 3), b.NUMANodes())

		// Hold the GPUs of nodes 0 and 3: only {1,2} has 2 free GPUs.
		s = allocator.MustNew(m, allocator.Options{})
		for _, g := range []int{0, 3} {
			_, err := s.Claim(allocator.Allocation{ID: fmt.Sprint("g", g), GPUs: []int{g}, Policy: policy.SingleNUMANode})
			require.NoError(t, err)
		}
		pe := tbRefused(t, s, allocator.Request{ID: "r", GPUs: 2, Policy: policy.Restricted}, allocator.ErrNoNUMAFit)
		require.Equal(t, 2, pe.WidthCap)
		require.True(t, pe.InSet)
		// Memory and CPUs count too: 4 CPUs fit in one set.
		pe = tbRefused(t, s, allocator.Request{ID: "r", GPUs: 2, CPUs: 4, Policy: policy.Restricted}, allocator.ErrNoNUMAFit)
		require.True(t, pe.InSet)
		be := tbMust(t, s, allocator.Request{ID: "be", GPUs: 2, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(1, 2), be.NUMANodes())
	})

	t.Run("may cross sets when width_cap was found across sets", func(t *testing.T) {
		m := tbSetsMachine(t)
		s := allocator.MustNew(m, allocator.Options{})
		a := tbMust(t, s, allocator.Request{ID: "a", GPUs: 3, Policy: policy.Restricted})
		require.Len(t, a.NUMANodes(), 3)
		mask, err := m.MaskOf(a.NUMANodes()...)
		require.NoError(t, err)
		require.Equal(t, 2, m.SetsCrossed(mask))
		require.Len(t, a.GPUs, 3)

		// dgx-a100: 6 GPUs, 4 per socket, so width_cap is 3 anywhere.
		s = tbState(t, "dgx-a100")
		b := tbMust(t, s, allocator.Request{ID: "b", GPUs: 6, CPUs: 6, Policy: policy.Restricted})
		require.Len(t, b.NUMANodes(), 3)
		require.False(t, tbInOneSet(s.Machine(), b.NUMANodes()))
		// 6 more GPUs are not there; the refusal reports width_cap 3 found
		// across sets.
		s = tbState(t, "dgx-a100")
		_, err = s.Claim(allocator.Allocation{ID: "g", GPUs: []int{0, 4}, Policy: policy.None})
		require.NoError(t, err)
		pe := tbRefused(t, s, allocator.Request{ID: "c", GPUs: 6, Policy: policy.Restricted}, allocator.ErrNoNUMAFit)
		require.Equal(t, 3, pe.WidthCap)
		require.False(t, pe.InSet)
	})

	t.Run("width_cap counts capacity not free", func(t *testing.T) {
		// GPUs 0,1 (node 0) and 4 (node 1) are held: 5 GPUs free, 2 and 3
		// per node. A 4-GPU request has width_cap 1 (a node has 4 GPUs), so
		// Restricted is refused rather than spanning 2 nodes.
		s := tbState(t, "dgx-h100")
		_, err := s.Claim(allocator.Allocation{ID: "held", GPUs: []int{0, 1, 4}, Policy: policy.None})
		require.NoError(t, err)
		pe := tbRefused(t, s, allocator.Request{ID: "r", GPUs: 4, Policy: policy.Restricted}, allocator.ErrNoNUMAFit)
		require.Equal(t, 1, pe.WidthCap)
		require.Equal(t, 1, pe.Width)
		require.Equal(t, []allocator.Shortage{{Resource: "gpu", Need: 4, Have: 3}}, pe.Short)
		b := tbMust(t, s, allocator.Request{ID: "be", GPUs: 4, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(0, 1), b.NUMANodes())
	})

	t.Run("exclusivity is hard", func(t *testing.T) {
		m := tbMachine(t, 1, []tbNodeSpec{{0, 4, 2, 0}, {0, 4, 2, 0}}, nil)
		s := allocator.MustNew(m, allocator.Options{})
		tbMust(t, s, allocator.Request{ID: "one", CPUs: 1, Policy: policy.SingleNUMANode})
		pe := tbRefused(t, s, allocator.Request{ID: "r", GPUs: 3, Policy: policy.Restricted}, allocator.ErrExclusivity)
		require.Equal(t, tbIDs(0), pe.Blocked)
		tbMust(t, s, allocator.Request{ID: "r", GPUs: 3, Policy: policy.Restricted, Exclusive: policy.Preferred})
	})

	t.Run("a multi-node span may reuse shared nodes", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		// Each exceeds one node's capacity (113 CPUs, 5 GPUs): width_cap 2.
		for _, r := range []allocator.Request{{ID: "a", CPUs: 113, GPUs: 1}, {ID: "b", CPUs: 2, GPUs: 5}} {
			r.Policy = policy.Restricted
			a := tbMust(t, s, r)
			require.Equal(t, tbIDs(0, 1), a.NUMANodes())
		}
		// Now both nodes are shared: a one-node Restricted request is
		// refused; Blocked names node 1, the only one with 2 free CPUs.
		pe := tbRefused(t, s, allocator.Request{ID: "c", CPUs: 2, Policy: policy.Restricted}, allocator.ErrExclusivity)
		require.Equal(t, 1, pe.Width)
		require.Equal(t, tbIDs(1), pe.Blocked)
	})

	t.Run("None allocations count for the node types", func(t *testing.T) {
		m := tbMachine(t, 1, []tbNodeSpec{{0, 4, 2, 0}, {0, 4, 2, 0}}, nil)
		s := allocator.MustNew(m, allocator.Options{})
		n := tbMust(t, s, allocator.Request{ID: "n", CPUs: 1, Policy: policy.None})
		require.Equal(t, tbIDs(0), n.NUMANodes())
		pe := tbRefused(t, s, allocator.Request{ID: "r", GPUs: 3, Policy: policy.Restricted}, allocator.ErrExclusivity)
		require.Equal(t, tbIDs(0), pe.Blocked)
	})
}

func TestTableBestEffort(t *testing.T) {
	t.Run("falls back across nodes (the demo)", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		m := s.Machine()
		a := tbMust(t, s, allocator.Request{ID: "two", GPUs: 2, CPUs: 8, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(0), a.NUMANodes())
		// width_free 2; the only 2-node set uses single node 0, so the rule is
		// broken rather than the span widened or the pod refused.
		b := tbMust(t, s, allocator.Request{ID: "six", GPUs: 6, CPUs: 16, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(0, 1), b.NUMANodes())
		require.Equal(t, map[numa.NodeID]int{0: 2, 1: 4}, tbGPUsByNode(m, b.GPUs))
		require.Equal(t, map[numa.NodeID]int{0: 5, 1: 11}, tbCPUsByNode(m, b.CPUs), "CPUs in proportion to GPUs")
	})

	t.Run("exactly width_free nodes", func(t *testing.T) {
		tests := []struct {
			r    allocator.Request
			want []numa.NodeID
		}{
			{allocator.Request{GPUs: 4}, tbIDs(0)},
			{allocator.Request{GPUs: 5}, tbIDs(0, 1)},
			{allocator.Request{CPUs: 112}, tbIDs(0)},
			{allocator.Request{CPUs: 113}, tbIDs(0, 1)},
			{allocator.Request{CPUs: 1, MemoryMiB: 1<<20 + 1}, tbIDs(0, 1)},
		}
		for _, tt := range tests {
			t.Run(tt.r.String(), func(t *testing.T) {
				s := tbState(t, "dgx-h100")
				r := tt.r
				r.ID, r.Policy = "be", policy.BestEffort
				a := tbMust(t, s, r)
				require.Equal(t, tt.want, a.NUMANodes())
			})
		}
		// dgx-a100: 8 GPUs need the 4 GPU nodes; 3 GPUs need 2 of them.
		s := tbState(t, "dgx-a100")
		a := tbMust(t, s, allocator.Request{ID: "be", GPUs: 3, Policy: policy.BestEffort})
		require.Len(t, a.NUMANodes(), 2)
		b := tbMust(t, s, allocator.Request{ID: "be2", GPUs: 5, Policy: policy.BestEffort})
		require.Len(t, b.NUMANodes(), 3)
	})

	t.Run("never refused for topology reasons", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		tbMust(t, s, allocator.Request{ID: "n0", CPUs: 1, Policy: policy.SingleNUMANode})
		tbMust(t, s, allocator.Request{ID: "n1", CPUs: 1, Policy: policy.SingleNUMANode, Exclusive: policy.Preferred})
		// Both nodes single: any 2-node span breaks the rule, any 1-node
		// span is fine; 8 GPUs need 2 nodes.
		a := tbMust(t, s, allocator.Request{ID: "be", GPUs: 8, CPUs: 200, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(0, 1), a.NUMANodes())
		// Only amounts refuse it.
		pe := tbRefused(t, s, allocator.Request{ID: "x", CPUs: 100, Policy: policy.BestEffort}, allocator.ErrInsufficient)
		require.Equal(t, []allocator.Shortage{{Resource: "cpu", Need: 100, Have: 22}}, pe.Short)
	})

	t.Run("obeys the rule when some width_free set allows it", func(t *testing.T) {
		// dgx-a100: 1 GPU on node 1 (single). 3 GPUs need 2 nodes; {1,3}
		// is the best fit but uses single node 1; {5,7} is allowed.
		for _, ex := range []policy.Exclusivity{policy.Required, policy.Preferred} {
			t.Run(ex.String(), func(t *testing.T) {
				s := tbState(t, "dgx-a100")
				one := tbMust(t, s, allocator.Request{ID: "one", GPUs: 1, Policy: policy.SingleNUMANode})
				require.Equal(t, tbIDs(1), one.NUMANodes())
				a := tbMust(t, s, allocator.Request{ID: "be", GPUs: 3, Policy: policy.BestEffort, Exclusive: ex})
				// Preferred removes the rule but still prefers not to mix.
				require.Equal(t, tbIDs(5, 7), a.NUMANodes())
			})
		}
	})

	t.Run("a one-node span avoids shared nodes when it can", func(t *testing.T) {
		m := tbMachine(t, 1, []tbNodeSpec{{0, 4, 2, 0}, {0, 4, 2, 0}, {0, 4, 2, 0}}, nil)
		s := allocator.MustNew(m, allocator.Options{})
		w := tbMust(t, s, allocator.Request{ID: "wide", GPUs: 3, Policy: policy.Restricted})
		require.Equal(t, tbIDs(0, 1), w.NUMANodes())
		// Node 1 (shared) has 1 free GPU, node 2 (idle) 2: best fit would
		// take node 1, the rule says node 2.
		a := tbMust(t, s, allocator.Request{ID: "be", GPUs: 1, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(2), a.NUMANodes())
		b := tbMust(t, s, allocator.Request{ID: "be2", GPUs: 1, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(2), b.NUMANodes())
		// Only shared node 1 has a GPU left: the rule is broken, not refused.
		c := tbMust(t, s, allocator.Request{ID: "be3", GPUs: 1, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(1), c.NUMANodes())
	})
}

func TestTableNone(t *testing.T) {
	t.Run("anywhere, not bound by exclusivity", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		tbMust(t, s, allocator.Request{ID: "small", CPUs: 2, Policy: policy.SingleNUMANode})
		a := tbMust(t, s, allocator.Request{ID: "none", GPUs: 8, Policy: policy.None})
		require.Equal(t, tbIDs(0, 1), a.NUMANodes())
		// A one-node None span on a shared node is fine too.
		b := tbMust(t, s, allocator.Request{ID: "none2", CPUs: 4, Policy: policy.None})
		require.Len(t, b.NUMANodes(), 1)
		// Packed sensibly: the narrowest span when one node holds it.
		s = tbState(t, "dgx-h100")
		c := tbMust(t, s, allocator.Request{ID: "c", CPUs: 100, GPUs: 4, Policy: policy.None})
		require.Equal(t, tbIDs(0), c.NUMANodes())
	})

	t.Run("GPUs of unknown NUMA node", func(t *testing.T) {
		m := tbMachine(t, 1, []tbNodeSpec{{0, 4, 1, 1024}, {0, 4, 1, 1024}}, func(b *topology.Builder) {
			b.AddGPU(topology.GPU{ID: 2, NUMANode: topology.UnknownNode})
		})
		for _, p := range []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort} {
			t.Run(p.String(), func(t *testing.T) {
				s := allocator.MustNew(m, allocator.Options{})
				pe := tbRefused(t, s, allocator.Request{ID: "r", GPUs: 3, Policy: p}, allocator.ErrInsufficient)
				require.Equal(t, []allocator.Shortage{{Resource: "gpu", Need: 3, Have: 2}}, pe.Short)
				var got []int
				for i := range 2 {
					a := tbMust(t, s, allocator.Request{ID: fmt.Sprint("g", i), GPUs: 1, Policy: p,
						Exclusive: policy.Preferred})
					got = append(got, a.GPUs...)
					require.Len(t, a.NUMANodes(), 1)
				}
				require.Equal(t, []int{0, 1}, got)
				tbRefused(t, s, allocator.Request{ID: "last", GPUs: 1, Policy: p}, allocator.ErrInsufficient)
			})
		}
		t.Run("None", func(t *testing.T) {
			s := allocator.MustNew(m, allocator.Options{})
			// None takes the unplaced GPU first (nobody else can use it); it
			// counts in no span.
			a := tbMust(t, s, allocator.Request{ID: "n", GPUs: 1, Policy: policy.None})
			require.Equal(t, []int{2}, a.GPUs)
			require.Empty(t, a.NUMANodes())
			b := tbMust(t, s, allocator.Request{ID: "n2", GPUs: 1, CPUs: 1, Policy: policy.None})
			require.Equal(t, []int{0}, b.GPUs)
			require.Equal(t, tbIDs(0), b.NUMANodes())
			require.NoError(t, s.Release("n"))
			c := tbMust(t, s, allocator.Request{ID: "n3", GPUs: 2, Policy: policy.None})
			require.Equal(t, []int{1, 2}, c.GPUs)
			require.Equal(t, tbIDs(1), c.NUMANodes(), "the unknown GPU adds no node")
			single, shared := s.NodeTypes()
			require.Equal(t, numa.MaskOf(0, 1), single)
			require.Equal(t, numa.Mask(0), shared)
		})
		t.Run("Score", func(t *testing.T) {
			s := allocator.MustNew(m, allocator.Options{})
			sc, err := s.Score(&allocator.Request{GPUs: 3, Policy: policy.None})
			require.NoError(t, err)
			require.GreaterOrEqual(t, sc, 0)
			require.LessOrEqual(t, sc, 100)
		})
	})
}

func TestTableMemory(t *testing.T) {
	t.Run("counted per node", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		const gib = 1 << 10
		for i, want := range []int{0, 1} {
			a := tbMust(t, s, allocator.Request{ID: fmt.Sprint("m", i), CPUs: 1, MemoryMiB: 600 * gib,
				Policy: policy.SingleNUMANode})
			require.Equal(t, tbIDs(want), a.NUMANodes())
			require.Equal(t, []allocator.NodeMemory{{Node: numa.NodeID(want), MiB: 600 * gib}}, a.Memory)
			require.Equal(t, int64(600*gib), a.MemoryMiB())
		}
		// 848 GiB free in all, 424 per node.
		pe := tbRefused(t, s, allocator.Request{ID: "m2", CPUs: 1, MemoryMiB: 600 * gib, Policy: policy.SingleNUMANode},
			allocator.ErrNoNUMAFit)
		require.Equal(t, []allocator.Shortage{{Resource: "memory", Need: 600 * gib, Have: 424 * gib}}, pe.Short)
		be := tbMust(t, s, allocator.Request{ID: "m3", CPUs: 2, MemoryMiB: 600 * gib, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(0, 1), be.NUMANodes())
		require.Equal(t, int64(600*gib), be.MemoryMiB())
		tbRefused(t, s, allocator.Request{ID: "m4", MemoryMiB: 249 * gib, Policy: policy.None}, allocator.ErrInsufficient)
		require.NoError(t, s.Release("m3"))
		require.Equal(t, int64(424*gib), s.NodeFree(0)["memory"])
	})

	t.Run("memory joins the width", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		a := tbMust(t, s, allocator.Request{ID: "r", CPUs: 2, GPUs: 1, MemoryMiB: 1<<20 + 1, Policy: policy.Restricted})
		require.Equal(t, tbIDs(0, 1), a.NUMANodes())
	})

	t.Run("CPU-less nodes hold memory only", func(t *testing.T) {
		s := tbState(t, "xeon-max-snc4")
		m := s.Machine()
		const gib = 1 << 10
		hbm := tbMust(t, s, allocator.Request{ID: "hbm", MemoryMiB: 16 * gib, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(8), hbm.NUMANodes(), "best fit: the 16 GiB HBM node")
		require.True(t, hbm.CPUs.IsEmpty())
		cpu := tbMust(t, s, allocator.Request{ID: "cpu", CPUs: 4, MemoryMiB: 16 * gib, Policy: policy.SingleNUMANode})
		id := cpu.NUMANodes()[0]
		require.Less(t, int(id), 8, "a request with CPUs lands on a DDR node")
		require.Equal(t, map[numa.NodeID]int{id: 4}, tbCPUsByNode(m, cpu.CPUs))
		// 40 GiB: no node has it; Restricted spans 2 nodes of one set.
		tbRefused(t, s, allocator.Request{ID: "big", CPUs: 4, MemoryMiB: 40 * gib, Policy: policy.SingleNUMANode},
			allocator.ErrNoNUMAFit)
		r := tbMust(t, s, allocator.Request{ID: "big", CPUs: 4, MemoryMiB: 40 * gib, Policy: policy.Restricted})
		require.Len(t, r.NUMANodes(), 2)
		require.True(t, tbInOneSet(m, r.NUMANodes()))
		require.Equal(t, int64(40*gib), r.MemoryMiB())
		for _, x := range r.Memory {
			require.LessOrEqual(t, x.MiB, tbNodeMem(m, x.Node))
		}
		// Memory only, 48 GiB: no node has it, two do (DDR+DDR or DDR+HBM).
		all := tbMust(t, s, allocator.Request{ID: "mem", MemoryMiB: 48 * gib, Policy: policy.BestEffort})
		require.Len(t, all.NUMANodes(), 2)
	})
}

func TestTableFullPCPUs(t *testing.T) {
	t.Run("count not a multiple of threads per core", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		for _, n := range []int{1, 3, 7} {
			_, err := tbTry(t, s, allocator.Request{ID: "f", CPUs: n, FullPCPUs: true, Policy: policy.SingleNUMANode})
			require.ErrorIs(t, err, allocator.ErrInvalidRequest)
			var re *allocator.RequestError
			require.ErrorAs(t, err, &re)
			require.Equal(t, "cpus", re.Field)
			require.Contains(t, re.Error(), "threads per core")
		}
		// On a machine without SMT any count will do.
		m := tbMachine(t, 1, []tbNodeSpec{{0, 3, 0, 0}}, nil)
		s = allocator.MustNew(m, allocator.Options{})
		tbMust(t, s, allocator.Request{ID: "f", CPUs: 3, FullPCPUs: true})
	})

	t.Run("whole cores only", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		m := s.Machine()
		tbMust(t, s, allocator.Request{ID: "odd", CPUs: 1, Policy: policy.SingleNUMANode}) // splits core 0
		a := tbMust(t, s, allocator.Request{ID: "f", CPUs: 6, FullPCPUs: true, Policy: policy.SingleNUMANode})
		require.Equal(t, "1-3,113-115", a.CPUs.String())
		for c := range a.CPUs.All() {
			k, ok := m.CPUCore(c)
			require.True(t, ok)
			require.True(t, m.CoreCPUs(k).IsSubsetOf(a.CPUs), "CPU %d without its sibling", c)
		}
		require.True(t, a.FullPCPUs)
	})

	t.Run("capacity in whole free cores", func(t *testing.T) {
		// Two nodes of 4 SMT2 cores; one thread of every core of node 0 is
		// held: node 0 has 4 free CPUs but no whole free core.
		m := tbMachine(t, 2, []tbNodeSpec{{0, 4, 0, 0}, {0, 4, 0, 0}}, nil)
		s := allocator.MustNew(m, allocator.Options{})
		_, err := s.Claim(allocator.Allocation{ID: "threads", CPUs: numa.MustParseCPUSet("0,2,4,6"), Policy: policy.None})
		require.NoError(t, err)
		require.Equal(t, "1,3,5,7-15", s.FreeCPUs().String())
		a := tbMust(t, s, allocator.Request{ID: "f", CPUs: 2, FullPCPUs: true, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(1), a.NUMANodes())
		// Node 1 has 3 whole cores left: 8 CPUs do not fit on one node,
		// nor on the machine counted in whole cores.
		pe := tbRefused(t, s, allocator.Request{ID: "g", CPUs: 8, FullPCPUs: true, Policy: policy.BestEffort},
			allocator.ErrInsufficient)
		require.Equal(t, []allocator.Shortage{{Resource: "cpu", Need: 4, Have: 3}}, pe.Short)
		pe = tbRefused(t, s, allocator.Request{ID: "g", CPUs: 8, FullPCPUs: true, Policy: policy.None},
			allocator.ErrInsufficient)
		// Without fullPCPUs the same 8 CPUs are there (4 + 6 free).
		b := tbMust(t, s, allocator.Request{ID: "h", CPUs: 8, Policy: policy.BestEffort})
		require.Len(t, b.NUMANodes(), 2)

		// A one-node machine: 4 free CPUs, no whole core.
		m1 := tbMachine(t, 2, []tbNodeSpec{{0, 4, 0, 0}}, nil)
		s1 := allocator.MustNew(m1, allocator.Options{})
		_, err = s1.Claim(allocator.Allocation{ID: "threads", CPUs: numa.MustParseCPUSet("0,2,4,6")})
		require.NoError(t, err)
		for _, p := range policy.Policies {
			tbRefused(t, s1, allocator.Request{ID: "f", CPUs: 2, FullPCPUs: true, Policy: p}, allocator.ErrInsufficient)
		}
		tbMust(t, s1, allocator.Request{ID: "plain", CPUs: 4, Policy: policy.SingleNUMANode})
	})

	t.Run("a core with a reserved thread is not whole", func(t *testing.T) {
		m := tbMachine(t, 2, []tbNodeSpec{{0, 2, 0, 0}}, func(b *topology.Builder) {
			b.SetReservedCPUs(numa.NewCPUSet(0))
		})
		s := allocator.MustNew(m, allocator.Options{})
		a := tbMust(t, s, allocator.Request{ID: "f", CPUs: 2, FullPCPUs: true})
		require.Equal(t, "2-3", a.CPUs.String())
		tbRefused(t, s, allocator.Request{ID: "g", CPUs: 2, FullPCPUs: true}, allocator.ErrInsufficient)
		b := tbMust(t, s, allocator.Request{ID: "h", CPUs: 1})
		require.Equal(t, "1", b.CPUs.String())
	})
}

func TestTableReservedCPUs(t *testing.T) {
	// Two nodes of 2 SMT2 cores (CPUs 0-3 and 4-7); the GPU is on node 0,
	// whose first core is reserved.
	m := tbMachine(t, 2, []tbNodeSpec{{0, 2, 1, 0}, {0, 2, 0, 0}}, func(b *topology.Builder) {
		b.SetReservedCPUs(numa.MustParseCPUSet("0-1"))
	})
	s := allocator.MustNew(m, allocator.Options{})
	require.Equal(t, "2-7", s.FreeCPUs().String())
	require.Equal(t, int64(2), s.NodeFree(0)["cpu"])
	// Node 0 has 2 allocatable CPUs: 3 CPUs with its GPU do not fit there.
	tbRefused(t, s, allocator.Request{ID: "a", CPUs: 3, GPUs: 1, Policy: policy.SingleNUMANode}, allocator.ErrNoNUMAFit)
	tbRefused(t, s, allocator.Request{ID: "a", CPUs: 7, Policy: policy.None}, allocator.ErrInsufficient)
	// Restricted: width_cap counts allocatable capacity only, so 3 CPUs + 1
	// GPU has width_cap 2 (were the reserved CPUs capacity, it would be 1
	// and the request refused).
	r := tbMust(t, s, allocator.Request{ID: "r", CPUs: 3, GPUs: 1, Policy: policy.Restricted})
	require.Equal(t, tbIDs(0, 1), r.NUMANodes())
	require.Equal(t, "2-4", r.CPUs.String())
	a := tbMust(t, s, allocator.Request{ID: "all", CPUs: 3, Policy: policy.None})
	require.False(t, a.CPUs.Contains(0) || a.CPUs.Contains(1), "reserved CPUs handed out: %s", a.CPUs)
	require.True(t, s.FreeCPUs().IsEmpty())
	// Restore and Claim refuse reserved CPUs.
	_, err := s.Claim(allocator.Allocation{ID: "res", CPUs: numa.NewCPUSet(0)})
	var re *allocator.RestoreError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "res", re.ID)
	require.ErrorIs(t, err, allocator.ErrConflict)
}

func TestTableIDs(t *testing.T) {
	s := tbState(t, "dgx-h100")
	r := allocator.Request{ID: "a", CPUs: 4, GPUs: 1, Policy: policy.SingleNUMANode}
	before := tbText(s)
	freeBefore := s.FreeCPUs()
	a := tbMust(t, s, r)

	t.Run("duplicate live ID", func(t *testing.T) {
		mid := tbText(s)
		for _, d := range []allocator.Request{r, {ID: "a", CPUs: 1, Policy: policy.None}} {
			require.ErrorIs(t, s.Fit(&d), allocator.ErrDuplicateID)
			_, err := s.Allocate(&d)
			require.ErrorIs(t, err, allocator.ErrDuplicateID)
			_, err = s.Score(&d)
			require.ErrorIs(t, err, allocator.ErrDuplicateID)
			require.Equal(t, mid, tbText(s))
		}
		got, ok := s.Get("a")
		require.True(t, ok)
		require.Equal(t, a.String(), got.String())
	})

	t.Run("release of an unknown ID", func(t *testing.T) {
		mid := tbText(s)
		for _, id := range []string{"b", "", "A"} {
			require.ErrorIs(t, s.Release(id), allocator.ErrUnknownID)
			require.Equal(t, mid, tbText(s))
		}
	})

	t.Run("release restores exactly", func(t *testing.T) {
		require.NoError(t, s.Release("a"))
		require.Equal(t, before, tbText(s))
		require.True(t, freeBefore.Equal(s.FreeCPUs()))
		require.Empty(t, s.Live())
		_, ok := s.Get("a")
		require.False(t, ok)
		require.ErrorIs(t, s.Release("a"), allocator.ErrUnknownID, "a retried release is harmless")
		require.Equal(t, before, tbText(s))
		// The ID can be used again, and gets the same answer.
		b := tbMust(t, s, r)
		require.Equal(t, a.String(), b.String())
	})

	t.Run("release restores after a mix", func(t *testing.T) {
		s := tbState(t, "dgx-a100")
		tbMust(t, s, allocator.Request{ID: "x", CPUs: 3, GPUs: 1, Policy: policy.SingleNUMANode})
		tbMust(t, s, allocator.Request{ID: "y", CPUs: 10, GPUs: 4, MemoryMiB: 1000, Policy: policy.Restricted,
			Devices: map[string]int{"rdma": 2}})
		mid := tbText(s)
		midFree := s.NodeFree(3)
		tbMust(t, s, allocator.Request{ID: "z", CPUs: 20, GPUs: 3, MemoryMiB: 200000, Policy: policy.BestEffort,
			Devices: map[string]int{"rdma": 1}})
		tbMust(t, s, allocator.Request{ID: "w", CPUs: 7, FullPCPUs: false, Policy: policy.None})
		require.NoError(t, s.Release("z"))
		require.NoError(t, s.Release("w"))
		require.Equal(t, mid, tbText(s))
		require.Equal(t, midFree, s.NodeFree(3))
	})

	t.Run("invalid requests", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		tests := []struct {
			r     allocator.Request
			field string
		}{
			{allocator.Request{ID: "", CPUs: 1}, "id"},
			{allocator.Request{ID: "x"}, ""},
			{allocator.Request{ID: "x", CPUs: -1}, "cpus"},
			{allocator.Request{ID: "x", GPUs: -1}, "gpus"},
			{allocator.Request{ID: "x", CPUs: 1, MemoryMiB: -1}, "memoryMiB"},
			{allocator.Request{ID: "x", CPUs: 1, Devices: map[string]int{"rdma": -1}}, "devices[rdma]"},
			{allocator.Request{ID: "x", Devices: map[string]int{"rdma": 0}}, ""},
			{allocator.Request{ID: "x", CPUs: 1, Policy: policy.Policy(9)}, "policy"},
			{allocator.Request{ID: "x", CPUs: 1, Exclusive: policy.Exclusivity(9)}, "exclusive"},
		}
		for _, tt := range tests {
			t.Run(tt.field, func(t *testing.T) {
				before := tbText(s)
				_, err := s.Allocate(&tt.r)
				require.ErrorIs(t, err, allocator.ErrInvalidRequest)
				var re *allocator.RequestError
				require.ErrorAs(t, err, &re)
				require.Equal(t, tt.field, re.Field)
				if tt.r.ID != "" {
					require.ErrorIs(t, s.Fit(&tt.r), allocator.ErrInvalidRequest)
				}
				require.Equal(t, before, tbText(s))
			})
		}
	})
}

func TestTableDeviceHealth(t *testing.T) {
	t.Run("unhealthy GPU", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		affected, err := s.SetDeviceHealth("gpu", "3", false)
		require.NoError(t, err)
		require.Empty(t, affected)
		// Node 0 has 3 healthy GPUs: a 4-GPU single-node pod goes to node 1.
		a := tbMust(t, s, allocator.Request{ID: "a", GPUs: 4, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(1), a.NUMANodes())
		require.Equal(t, int64(3), s.NodeFree(0)["gpu"])
		// Not capacity: a 4-GPU Restricted pod now has width_cap 2 but only
		// 3 GPUs are left.
		pe := tbRefused(t, s, allocator.Request{ID: "b", GPUs: 4, Policy: policy.Restricted}, allocator.ErrInsufficient)
		require.Equal(t, []allocator.Shortage{{Resource: "gpu", Need: 4, Have: 3}}, pe.Short)
		b := tbMust(t, s, allocator.Request{ID: "b", GPUs: 3, Policy: policy.Restricted})
		require.Equal(t, []int{0, 1, 2}, b.GPUs)
		require.Equal(t, map[string][]string{"gpu": {"3"}}, s.Snapshot().Unhealthy)

		// Healthy again: capacity again.
		_, err = s.SetDeviceHealth("gpu", "3", true)
		require.NoError(t, err)
		c := tbMust(t, s, allocator.Request{ID: "c", GPUs: 1, Policy: policy.None})
		require.Equal(t, []int{3}, c.GPUs)
		require.Empty(t, s.Snapshot().Unhealthy)
	})

	t.Run("width_cap follows health", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		_, err := s.SetDeviceHealth("gpu", "0", false)
		require.NoError(t, err)
		_, err = s.SetDeviceHealth("gpu", "5", false)
		require.NoError(t, err)
		// Neither node has 4 healthy GPUs: width_cap 2.
		tbRefused(t, s, allocator.Request{ID: "s", GPUs: 4, Policy: policy.SingleNUMANode}, allocator.ErrNoNUMAFit)
		a := tbMust(t, s, allocator.Request{ID: "r", GPUs: 4, Policy: policy.Restricted})
		require.Equal(t, tbIDs(0, 1), a.NUMANodes())
		require.NotContains(t, a.GPUs, 0)
		require.NotContains(t, a.GPUs, 5)
	})

	t.Run("holders are affected", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		tbMust(t, s, allocator.Request{ID: "b", GPUs: 2, Policy: policy.SingleNUMANode})
		tbMust(t, s, allocator.Request{ID: "a", GPUs: 2, Policy: policy.SingleNUMANode})
		ga, _ := s.Get("a")
		affected, err := s.SetDeviceHealth("gpu", fmt.Sprint(ga.GPUs[0]), false)
		require.NoError(t, err)
		require.Equal(t, []string{"a"}, affected)
		// The holder keeps it; once released it is never handed out.
		got, _ := s.Get("a")
		require.Equal(t, ga.GPUs, got.GPUs)
		require.NoError(t, s.Release("a"))
		c := tbMust(t, s, allocator.Request{ID: "c", GPUs: 5, Policy: policy.None})
		require.NotContains(t, c.GPUs, ga.GPUs[0])
		tbRefused(t, s, allocator.Request{ID: "d", GPUs: 1, Policy: policy.None}, allocator.ErrInsufficient)
	})

	t.Run("rdma", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		affected, err := s.SetDeviceHealth("rdma", "mlx5_0", false)
		require.NoError(t, err)
		require.Empty(t, affected)
		a := tbMust(t, s, allocator.Request{ID: "a", GPUs: 1, Devices: map[string]int{"rdma": 4},
			Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(1), a.NUMANodes())
		require.Equal(t, map[string][]string{"rdma": {"mlx5_0"}}, s.Snapshot().Unhealthy)
	})

	t.Run("unknown device", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		before := tbText(s)
		for _, d := range [][2]string{{"gpu", "8"}, {"gpu", "-1"}, {"gpu", "x"}, {"gpu", ""},
			{"rdma", "mlx5_1"}, {"rdma", "0"}, {"tpu", "0"}, {"", "0"}} {
			_, err := s.SetDeviceHealth(d[0], d[1], false)
			require.ErrorIs(t, err, allocator.ErrUnknownDevice, "%v", d)
			require.Equal(t, before, tbText(s))
		}
	})
}

func TestTableSnapshotRestore(t *testing.T) {
	fill := func(t *testing.T, s *allocator.State) {
		tbMust(t, s, allocator.Request{ID: "a", CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode})
		tbMust(t, s, allocator.Request{ID: "b", CPUs: 6, GPUs: 3, MemoryMiB: 4096, Policy: policy.BestEffort,
			Devices: map[string]int{"rdma": 1}})
		tbMust(t, s, allocator.Request{ID: "c", CPUs: 4, FullPCPUs: true, Policy: policy.None})
		_, err := s.SetDeviceHealth("gpu", "7", false)
		require.NoError(t, err)
	}

	t.Run("round trip", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		fill(t, s)
		snap := s.Snapshot()
		require.Equal(t, []string{"a", "b", "c"}, []string{snap.Allocations[0].ID, snap.Allocations[1].ID, snap.Allocations[2].ID})
		r := tbState(t, "dgx-h100")
		require.NoError(t, r.Restore(snap))
		require.Equal(t, tbText(s), tbText(r))
		for _, id := range []string{"a", "b", "c"} {
			x, _ := s.Get(id)
			y, ok := r.Get(id)
			require.True(t, ok)
			require.Equal(t, x.DenseSpan, y.DenseSpan)
			require.Equal(t, x.NUMANodes(), y.NUMANodes())
		}
		// Both answer the next requests alike.
		for i, req := range []allocator.Request{
			{CPUs: 8, GPUs: 1, Policy: policy.SingleNUMANode},
			{CPUs: 100, Policy: policy.BestEffort},
			{GPUs: 1, Policy: policy.Restricted},
		} {
			req.ID = fmt.Sprint("n", i)
			a1, e1 := s.Allocate(&req)
			a2, e2 := r.Allocate(&req)
			require.Equal(t, fmt.Sprint(e1), fmt.Sprint(e2))
			require.Equal(t, a1.String(), a2.String())
		}
		// The snapshot is a copy: changing it does not touch the state.
		snap.Allocations[0].GPUs[0] = 99
		snap.Allocations[0].CPUs.Add(200)
		x, _ := s.Get("a")
		require.NotEqual(t, 99, x.GPUs[0])
		require.False(t, x.CPUs.Contains(200))
	})

	t.Run("refusals change nothing", func(t *testing.T) {
		m := tbMachine(t, 1, []tbNodeSpec{{0, 4, 2, 1024}, {0, 4, 2, 1024}}, func(b *topology.Builder) {
			b.SetReservedCPUs(numa.NewCPUSet(7))
		})
		// "live" below holds CPU 4 (best fit: node 1 has fewer allocatable
		// CPUs); "ok" is a good claim on node 1.
		ok := allocator.Allocation{ID: "ok", CPUs: numa.NewCPUSet(5), GPUs: []int{2}, Policy: policy.SingleNUMANode}
		tests := []struct {
			name string
			snap allocator.Snapshot
			bad  string
			want error
		}{
			{"overlapping CPUs", allocator.Snapshot{Allocations: []allocator.Allocation{ok,
				{ID: "x", CPUs: numa.NewCPUSet(6, 5)}}}, "x", allocator.ErrConflict},
			{"CPU of a live allocation", allocator.Snapshot{Allocations: []allocator.Allocation{ok,
				{ID: "x", CPUs: numa.NewCPUSet(4)}}}, "x", allocator.ErrConflict},
			{"overlapping GPUs", allocator.Snapshot{Allocations: []allocator.Allocation{ok,
				{ID: "x", GPUs: []int{3, 2}}}}, "x", allocator.ErrConflict},
			{"GPU twice in one", allocator.Snapshot{Allocations: []allocator.Allocation{
				{ID: "x", GPUs: []int{1, 1}}}}, "x", allocator.ErrConflict},
			{"unknown GPU", allocator.Snapshot{Allocations: []allocator.Allocation{ok,
				{ID: "x", GPUs: []int{4}}}}, "x", allocator.ErrConflict},
			{"unknown CPU", allocator.Snapshot{Allocations: []allocator.Allocation{
				{ID: "x", CPUs: numa.NewCPUSet(8)}}}, "x", allocator.ErrConflict},
			{"reserved CPU", allocator.Snapshot{Allocations: []allocator.Allocation{ok,
				{ID: "x", CPUs: numa.NewCPUSet(7)}}}, "x", allocator.ErrConflict},
			{"unknown device class", allocator.Snapshot{Allocations: []allocator.Allocation{
				{ID: "x", Devices: map[string][]string{"rdma": {"mlx5_0"}}}}}, "x", allocator.ErrConflict},
			{"too much memory", allocator.Snapshot{Allocations: []allocator.Allocation{
				{ID: "x", Memory: []allocator.NodeMemory{{Node: 1, MiB: 1025}}}}}, "x", allocator.ErrConflict},
			{"memory on no node", allocator.Snapshot{Allocations: []allocator.Allocation{
				{ID: "x", Memory: []allocator.NodeMemory{{Node: 2, MiB: 1}}}}}, "x", allocator.ErrConflict},
			{"duplicate ID", allocator.Snapshot{Allocations: []allocator.Allocation{ok,
				{ID: "ok", CPUs: numa.NewCPUSet(6)}}}, "ok", allocator.ErrDuplicateID},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := allocator.MustNew(m, allocator.Options{})
				live := tbMust(t, s, allocator.Request{ID: "live", CPUs: 1, Policy: policy.SingleNUMANode})
				require.Equal(t, "4", live.CPUs.String())
				before := tbText(s)
				err := s.Restore(tt.snap)
				require.ErrorIs(t, err, tt.want)
				var re *allocator.RestoreError
				require.ErrorAs(t, err, &re)
				require.Equal(t, tt.bad, re.ID)
				require.Contains(t, err.Error(), fmt.Sprintf("%q", tt.bad))
				require.Equal(t, before, tbText(s))
			})
		}
		t.Run("malformed unhealthy GPU ID", func(t *testing.T) {
			s := allocator.MustNew(m, allocator.Options{})
			before := tbText(s)
			err := s.Restore(allocator.Snapshot{Allocations: []allocator.Allocation{ok},
				Unhealthy: map[string][]string{"gpu": {"nine"}}})
			require.ErrorIs(t, err, allocator.ErrUnknownDevice)
			require.Equal(t, before, tbText(s))
		})
		t.Run("health of a GPU the machine lacks is dropped", func(t *testing.T) {
			s := allocator.MustNew(m, allocator.Options{})
			require.NoError(t, s.Restore(allocator.Snapshot{Allocations: []allocator.Allocation{ok},
				Unhealthy: map[string][]string{"gpu": {"9"}}}))
			require.Empty(t, s.Snapshot().Unhealthy)
			require.Len(t, s.Live(), 1)
		})
	})

	t.Run("claim", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		a, err := s.Claim(allocator.Allocation{ID: "k", CPUs: numa.MustParseCPUSet("60-61"), GPUs: []int{5, 4},
			Memory: []allocator.NodeMemory{{Node: 1, MiB: 100}}, Policy: policy.SingleNUMANode})
		require.NoError(t, err)
		require.Equal(t, tbIDs(1), a.NUMANodes(), "span recomputed")
		require.Equal(t, []int{4, 5}, a.GPUs)
		single, _ := s.NodeTypes()
		require.Equal(t, numa.MaskOf(1), single)
		// Claimed resources are never handed out again.
		b := tbMust(t, s, allocator.Request{ID: "n", CPUs: 112, GPUs: 6, Policy: policy.None})
		require.False(t, b.CPUs.Contains(60) || b.CPUs.Contains(61))
		require.NotContains(t, b.GPUs, 4)
		require.NotContains(t, b.GPUs, 5)
		before := tbText(s)
		_, err = s.Claim(allocator.Allocation{ID: "k2", GPUs: []int{4}})
		require.ErrorIs(t, err, allocator.ErrConflict)
		var re *allocator.RestoreError
		require.ErrorAs(t, err, &re)
		require.Equal(t, "k2", re.ID)
		_, err = s.Claim(allocator.Allocation{ID: "k", CPUs: numa.NewCPUSet(100)})
		require.ErrorIs(t, err, allocator.ErrDuplicateID)
		_, err = s.Claim(allocator.Allocation{ID: "", CPUs: numa.NewCPUSet(100)})
		require.Error(t, err)
		require.Equal(t, before, tbText(s))
		// A claim spanning both nodes makes them shared.
		w := numa.NewCPUSet(50, 100)
		require.True(t, w.IsSubsetOf(s.FreeCPUs()))
		c, err := s.Claim(allocator.Allocation{ID: "w", CPUs: w})
		require.NoError(t, err)
		require.Equal(t, tbIDs(0, 1), c.NUMANodes())
		_, shared := s.NodeTypes()
		require.Equal(t, numa.MaskOf(0, 1), shared)
	})
}

func TestTablePreferences(t *testing.T) {
	t.Run("GPUs under one PCIe switch (dgx-a100)", func(t *testing.T) {
		m := tbPreset(t, "dgx-a100")
		for _, p := range []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort, policy.None} {
			s := allocator.MustNew(m, allocator.Options{})
			tbMust(t, s, allocator.Request{ID: "one", GPUs: 1, Policy: policy.None})
			a := tbMust(t, s, allocator.Request{ID: "pair", GPUs: 2, Policy: p})
			g0, _ := m.GPU(a.GPUs[0])
			g1, _ := m.GPU(a.GPUs[1])
			require.Equal(t, g0.PCIeSwitch, g1.PCIeSwitch, "%s got %v", p, a.GPUs)
		}
	})

	t.Run("GPUs under one PCIe switch inside a node", func(t *testing.T) {
		// One node, 4 GPUs: 0,1 under swA and 2,3 under swB.
		m := tbMachine(t, 1, []tbNodeSpec{{0, 8, 0, 0}}, func(b *topology.Builder) {
			for g := range 4 {
				b.AddGPU(topology.GPU{ID: g, NUMANode: 0, PCIeSwitch: []string{"swA", "swB"}[g/2]})
			}
		})
		s := allocator.MustNew(m, allocator.Options{})
		a := tbMust(t, s, allocator.Request{ID: "a", GPUs: 1})
		require.Equal(t, []int{0}, a.GPUs)
		b := tbMust(t, s, allocator.Request{ID: "b", GPUs: 2})
		require.Equal(t, []int{2, 3}, b.GPUs, "the whole switch, not GPUs 1 and 2")
		c := tbMust(t, s, allocator.Request{ID: "c", GPUs: 1})
		require.Equal(t, []int{1}, c.GPUs)
	})

	t.Run("a 1-GPU request keeps a whole switch free", func(t *testing.T) {
		m := tbMachine(t, 1, []tbNodeSpec{{0, 8, 0, 0}}, func(b *topology.Builder) {
			b.AddGPU(topology.GPU{ID: 0, NUMANode: 0, PCIeSwitch: "swA"})
			b.AddGPU(topology.GPU{ID: 1, NUMANode: 0, PCIeSwitch: "swA"})
			b.AddGPU(topology.GPU{ID: 2, NUMANode: 0, PCIeSwitch: "swB"})
		})
		s := allocator.MustNew(m, allocator.Options{})
		a := tbMust(t, s, allocator.Request{ID: "a", GPUs: 1})
		require.Equal(t, []int{2}, a.GPUs, "the smallest switch group that suffices")
	})

	t.Run("whole cores before split cores", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		a := tbMust(t, s, allocator.Request{ID: "a", CPUs: 4, Policy: policy.SingleNUMANode})
		require.Equal(t, "0-1,112-113", a.CPUs.String())
		b := tbMust(t, s, allocator.Request{ID: "b", CPUs: 3, Policy: policy.SingleNUMANode})
		// 3 CPUs: one whole core and one thread of a fresh core.
		require.Equal(t, "2-3,114", b.CPUs.String())
		c := tbMust(t, s, allocator.Request{ID: "c", CPUs: 1, Policy: policy.SingleNUMANode})
		require.Equal(t, "115", c.CPUs.String(), "the partly used core first")
	})

	t.Run("best fit", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		a := tbMust(t, s, allocator.Request{ID: "a", GPUs: 2, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(0), a.NUMANodes())
		b := tbMust(t, s, allocator.Request{ID: "b", GPUs: 2, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(0), b.NUMANodes(), "the node with exactly 2 free GPUs, not the one with 4")
		c := tbMust(t, s, allocator.Request{ID: "c", GPUs: 4, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(1), c.NUMANodes())
	})

	t.Run("spread", func(t *testing.T) {
		s := allocator.MustNew(tbPreset(t, "dgx-h100"), allocator.Options{Packing: allocator.Spread})
		a := tbMust(t, s, allocator.Request{ID: "a", GPUs: 2, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(0), a.NUMANodes())
		b := tbMust(t, s, allocator.Request{ID: "b", GPUs: 2, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(1), b.NUMANodes(), "spread: the node with the most left")
		c := tbMust(t, s, allocator.Request{ID: "c", CPUs: 10, Policy: policy.SingleNUMANode})
		require.Equal(t, tbIDs(0), c.NUMANodes(), "equal GPUs left: the lowest node")
	})

	t.Run("fewer sets crossed, then distance", func(t *testing.T) {
		// dgx-a100, BestEffort 3 GPUs: width 2, inside one socket ({1,3})
		// rather than across ({1,5}...).
		s := tbState(t, "dgx-a100")
		a := tbMust(t, s, allocator.Request{ID: "a", GPUs: 3, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(1, 3), a.NUMANodes())
		// None of 4 GPUs: the same.
		s = tbState(t, "dgx-a100")
		b := tbMust(t, s, allocator.Request{ID: "b", GPUs: 4, Policy: policy.None})
		require.Equal(t, tbIDs(1, 3), b.NUMANodes())
		// Sets crossed before distance: on tbSetsMachine {1,2} is the
		// nearest pair but crosses sets.
		s = allocator.MustNew(tbSetsMachine(t), allocator.Options{})
		c := tbMust(t, s, allocator.Request{ID: "c", GPUs: 2, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(0, 1), c.NUMANodes(), "one set before distance")
		// Distance before the lowest IDs: three nodes in one set, {1,2}
		// nearest.
		m := tbMachine(t, 1, []tbNodeSpec{{0, 2, 1, 0}, {0, 2, 1, 0}, {0, 2, 1, 0}}, func(b *topology.Builder) {
			b.SetDistances([][]int{{10, 30, 30}, {30, 10, 15}, {30, 15, 10}})
		})
		s = allocator.MustNew(m, allocator.Options{})
		d := tbMust(t, s, allocator.Request{ID: "d", GPUs: 2, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(1, 2), d.NUMANodes())
	})

	t.Run("determinism", func(t *testing.T) {
		play := func() []string {
			s := tbState(t, "dgx-a100")
			var out []string
			reqs := []allocator.Request{
				{ID: "a", CPUs: 8, GPUs: 1, Policy: policy.SingleNUMANode},
				{ID: "b", CPUs: 30, GPUs: 3, Policy: policy.BestEffort, Devices: map[string]int{"rdma": 2}},
				{ID: "c", CPUs: 16, GPUs: 2, Policy: policy.Restricted},
				{ID: "d", CPUs: 40, MemoryMiB: 100000, Policy: policy.None},
				{ID: "e", CPUs: 6, FullPCPUs: true, Policy: policy.SingleNUMANode},
				{ID: "f", GPUs: 4, Policy: policy.Restricted},
				{ID: "g", GPUs: 1, Policy: policy.None},
			}
			for i, r := range reqs {
				a, err := s.Allocate(&r)
				out = append(out, fmt.Sprint(a.String(), " ", err))
				if i == 3 {
					out = append(out, fmt.Sprint(s.Release("b")))
				}
				sc, err := s.Score(&allocator.Request{CPUs: 4, GPUs: 1, Policy: policy.SingleNUMANode})
				out = append(out, fmt.Sprint(sc, err))
			}
			return append(out, tbText(s))
		}
		first := play()
		for range 3 {
			require.Equal(t, first, play())
		}
		// A clone answers like the original.
		s := tbState(t, "dgx-a100")
		tbMust(t, s, allocator.Request{ID: "a", CPUs: 8, GPUs: 1, Policy: policy.SingleNUMANode})
		c := s.Clone()
		r := allocator.Request{ID: "z", CPUs: 20, GPUs: 3, Policy: policy.BestEffort}
		x, err := s.Allocate(&r)
		require.NoError(t, err)
		y, err := c.Allocate(&r)
		require.NoError(t, err)
		require.Equal(t, x.String(), y.String())
		require.Equal(t, tbText(s), tbText(c))
	})
}

func TestTableScore(t *testing.T) {
	reqs := []allocator.Request{
		{CPUs: 1, Policy: policy.SingleNUMANode},
		{CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode},
		{CPUs: 16, GPUs: 8, Policy: policy.Restricted},
		{CPUs: 200, Policy: policy.BestEffort},
		{GPUs: 8, MemoryMiB: 1 << 21, Policy: policy.None},
		{CPUs: 4, FullPCPUs: true, Policy: policy.Restricted},
	}
	t.Run("0-100", func(t *testing.T) {
		for _, opts := range []allocator.Options{{}, {Scoring: allocator.LeastAllocated}} {
			s := allocator.MustNew(tbPreset(t, "dgx-h100"), opts)
			for _, r := range reqs {
				sc, err := s.Score(&r)
				require.NoError(t, err, "%s", &r)
				require.GreaterOrEqual(t, sc, 0)
				require.LessOrEqual(t, sc, 100)
			}
			_, err := s.Score(&allocator.Request{GPUs: 9})
			require.ErrorIs(t, err, allocator.ErrInsufficient)
			_, err = s.Score(&allocator.Request{})
			require.ErrorIs(t, err, allocator.ErrInvalidRequest)
			require.Empty(t, s.Live(), "Score changes nothing")
		}
	})

	t.Run("aligned beats unaligned", func(t *testing.T) {
		for _, scoring := range []allocator.Scoring{allocator.MostAllocated, allocator.LeastAllocated} {
			// empty: 4 GPUs fit on one node. busy: fuller, 2 GPUs free per
			// node, so 4 GPUs need 2 nodes although width_cap is 1.
			empty := allocator.MustNew(tbPreset(t, "dgx-h100"), allocator.Options{Scoring: scoring})
			busy := allocator.MustNew(tbPreset(t, "dgx-h100"), allocator.Options{Scoring: scoring})
			_, err := busy.Claim(allocator.Allocation{ID: "h0", GPUs: []int{0, 1}, CPUs: numa.CPURange(0, 49)})
			require.NoError(t, err)
			_, err = busy.Claim(allocator.Allocation{ID: "h1", GPUs: []int{4, 5}})
			require.NoError(t, err)
			for _, p := range []policy.Policy{policy.BestEffort, policy.None} {
				r := allocator.Request{GPUs: 4, CPUs: 20, Policy: p}
				on, err := empty.Score(&r)
				require.NoError(t, err)
				require.GreaterOrEqual(t, on, 50, "%s %v: one node: aligned", p, scoring)
				off, err := busy.Score(&r)
				require.NoError(t, err)
				require.Less(t, off, 50, "%s %v: two nodes: unaligned", p, scoring)
				require.Greater(t, on, off)
			}
			// Restricted and SingleNUMANode are aligned whenever admitted.
			r := allocator.Request{GPUs: 2, Policy: policy.SingleNUMANode}
			sc, err := busy.Score(&r)
			require.NoError(t, err)
			require.GreaterOrEqual(t, sc, 50)
		}
	})

	t.Run("MostAllocated vs LeastAllocated", func(t *testing.T) {
		r := allocator.Request{CPUs: 8, GPUs: 2, Policy: policy.SingleNUMANode}
		score := func(scoring allocator.Scoring, busy bool) int {
			s := allocator.MustNew(tbPreset(t, "dgx-h100"), allocator.Options{Scoring: scoring})
			if busy {
				tbMust(t, s, allocator.Request{ID: "x", CPUs: 50, GPUs: 3, Policy: policy.SingleNUMANode})
			}
			sc, err := s.Score(&r)
			require.NoError(t, err)
			require.GreaterOrEqual(t, sc, 50, "aligned")
			return sc
		}
		require.Greater(t, score(allocator.MostAllocated, true), score(allocator.MostAllocated, false))
		require.Greater(t, score(allocator.LeastAllocated, false), score(allocator.LeastAllocated, true))
	})
}

func TestTableDevices(t *testing.T) {
	t.Run("rdma aligns with the GPUs on dgx-a100", func(t *testing.T) {
		s := tbState(t, "dgx-a100")
		m := s.Machine()
		nicNode := map[string]topology.Device{}
		for _, d := range m.Devices() {
			nicNode[d.ID] = d
		}
		for i, p := range []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort, policy.None} {
			a := tbMust(t, s, allocator.Request{ID: fmt.Sprint("p", i), GPUs: 2, CPUs: 4,
				Devices: map[string]int{"rdma": 2}, Policy: p})
			require.Len(t, a.NUMANodes(), 1, "%s", p)
			require.Len(t, a.Devices["rdma"], 2)
			node := a.NUMANodes()[0]
			g, _ := m.GPU(a.GPUs[0])
			for _, id := range a.Devices["rdma"] {
				require.Equal(t, node, nicNode[id].NUMANode, "%s: NIC %s off the GPUs' node", p, id)
				require.Equal(t, g.PCIeSwitch, nicNode[id].PCIeSwitch, "%s: NIC %s under another switch", p, id)
			}
			require.Equal(t, map[numa.NodeID]int{node: 4}, tbCPUsByNode(m, a.CPUs))
		}
		// Every GPU node is used: nothing left.
		tbRefused(t, s, allocator.Request{ID: "x", Devices: map[string]int{"rdma": 1}}, allocator.ErrInsufficient)
	})

	t.Run("rdma split with the GPUs", func(t *testing.T) {
		s := tbState(t, "dgx-a100")
		m := s.Machine()
		a := tbMust(t, s, allocator.Request{ID: "a", GPUs: 4, Devices: map[string]int{"rdma": 4}, Policy: policy.Restricted})
		require.Equal(t, tbIDs(1, 3), a.NUMANodes())
		byNode := map[numa.NodeID]int{}
		for _, d := range m.Devices() {
			if slices.Contains(a.Devices["rdma"], d.ID) {
				byNode[d.NUMANode]++
			}
		}
		require.Equal(t, tbGPUsByNode(m, a.GPUs), byNode)
	})

	t.Run("rdma only", func(t *testing.T) {
		s := tbState(t, "dgx-h100")
		a := tbMust(t, s, allocator.Request{ID: "a", Devices: map[string]int{"rdma": 5}, Policy: policy.BestEffort})
		require.Equal(t, tbIDs(0, 1), a.NUMANodes())
		require.Len(t, a.Devices["rdma"], 5)
		require.Empty(t, a.GPUs)
		require.True(t, a.CPUs.IsEmpty())
	})
}

func TestTableRefusalReasons(t *testing.T) {
	s := tbState(t, "dgx-h100")
	tests := []struct {
		r    allocator.Request
		want error
		says []string
	}{
		{allocator.Request{ID: "a", GPUs: 9, Policy: policy.None}, allocator.ErrInsufficient, []string{"9 GPUs", "8"}},
		{allocator.Request{ID: "b", GPUs: 5, Policy: policy.SingleNUMANode}, allocator.ErrNoNUMAFit,
			[]string{"NUMA node", "5 GPUs"}},
		{allocator.Request{ID: "c", GPUs: 1, Devices: map[string]int{"fpga": 2}}, allocator.ErrInsufficient,
			[]string{"fpga"}},
	}
	for _, tt := range tests {
		t.Run(tt.r.ID, func(t *testing.T) {
			pe := tbRefused(t, s, tt.r, tt.want)
			for _, w := range tt.says {
				require.Contains(t, pe.Reason, w)
			}
			require.True(t, errors.Is(pe, tt.want))
			require.Contains(t, pe.Error(), fmt.Sprintf("%q", tt.r.ID))
		})
	}
}

// TestNVLinkPreference: within a PCIe switch group, GPUs with more NVLink
// links among themselves come first (preference 2 of docs/design.md).
func TestNVLinkPreference(t *testing.T) {
	m := tbMachine(t, 1, []tbNodeSpec{{0, 4, 0, 0}}, func(b *topology.Builder) {
		for g := range 4 {
			b.AddGPU(topology.GPU{ID: g, NUMANode: 0})
		}
		b.AddNVLink(0, 1, 1)
		b.AddNVLink(2, 3, 12)
		b.AddNVLink(1, 3, 4)
	})
	s := allocator.MustNew(m, allocator.Options{})
	one, err := s.Allocate(&allocator.Request{ID: "one", GPUs: 1})
	require.NoError(t, err)
	require.Equal(t, []int{0}, one.GPUs, "a lone GPU takes the least-linked one")
	require.NoError(t, s.Release("one"))
	a, err := s.Allocate(&allocator.Request{ID: "a", GPUs: 2})
	require.NoError(t, err)
	require.Equal(t, []int{2, 3}, a.GPUs, "the pair with 12 links")
	b, err := s.Allocate(&allocator.Request{ID: "b", GPUs: 2})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, b.GPUs)

	// Without NVLinks, the lowest IDs.
	plain := tbMachine(t, 1, []tbNodeSpec{{0, 4, 4, 0}}, nil)
	a, err = allocator.MustNew(plain, allocator.Options{}).Allocate(&allocator.Request{ID: "a", GPUs: 2})
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, a.GPUs)
}

// tbNodeMem returns the memory of the node with the given ID.
func tbNodeMem(m *topology.Machine, id numa.NodeID) int64 {
	i, ok := m.NodeIndex(id)
	if !ok {
		return -1
	}
	return m.Node(i).MemoryMiB
}

// TestScoreUtilisation pins the score's packing figure to the machine's own
// capacities: after a claim of 50 CPUs and 2 GPUs on dgx-h100, a SingleNUMANode
// pod of 24 CPUs and 4 GPUs would leave the demanded kinds 74/allocatable
// CPUs and 6/8 GPUs in use, so MostAllocated scores 50 + the mean of those
// shares times 50 and LeastAllocated 50 + its complement times 50; with
// 8 GiB of memory demanded too, memory's share joins the mean.
func TestScoreUtilisation(t *testing.T) {
	m := tbPreset(t, "dgx-h100")
	cpuCap := float64(m.NumCPUs() - m.ReservedCPUs().Size())
	var memCap float64
	for _, n := range m.Nodes() {
		memCap += float64(n.MemoryMiB)
	}
	require.Positive(t, memCap)
	for _, scoring := range []allocator.Scoring{allocator.MostAllocated, allocator.LeastAllocated} {
		s := allocator.MustNew(m, allocator.Options{Scoring: scoring})
		_, err := s.Claim(allocator.Allocation{ID: "h0", GPUs: []int{0, 1}, CPUs: numa.CPURange(0, 49)})
		require.NoError(t, err)
		for _, mem := range []int64{0, 8 << 10} {
			r := allocator.Request{CPUs: 24, GPUs: 4, MemoryMiB: mem, Policy: policy.SingleNUMANode}
			shares := []float64{74 / cpuCap, 6.0 / 8}
			if mem > 0 {
				shares = append(shares, float64(mem)/memCap)
			}
			var u float64
			for _, x := range shares {
				u += x
			}
			u /= float64(len(shares))
			if scoring == allocator.LeastAllocated {
				u = 1 - u
			}
			got, err := s.Score(&r)
			require.NoError(t, err)
			require.Equal(t, 50+int(u*50), got, "%v, %d MiB", scoring, mem)
		}
	}
}
