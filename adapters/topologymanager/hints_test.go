package topologymanager

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

func wantHints(list ...any) []TopologyHint {
	out := []TopologyHint{}
	for i := 0; i < len(list); i += 2 {
		out = append(out, Hint(MustIDMask(list[i].([]int)...), list[i+1].(bool)))
	}
	return out
}

func TestIDMask(t *testing.T) {
	m, err := IDMaskOf(0, 2, 33)
	require.NoError(t, err)
	require.Equal(t, "0,2,33", m.String())
	require.Equal(t, 3, m.Count())
	require.True(t, m.Contains(33))
	require.False(t, m.Contains(1))
	require.False(t, m.Contains(-1))
	require.False(t, m.Contains(64))
	require.Equal(t, []numa.NodeID{0, 2, 33}, m.IDs())
	_, err = IDMaskOf(64)
	require.ErrorIs(t, err, ErrHintConfig)
	_, err = IDMaskOf(-1)
	require.ErrorIs(t, err, ErrHintConfig)
	require.Panics(t, func() { MustIDMask(64) })

	// The kubelet's order: count, then the integer (see TestNarrowerOrders).
	require.True(t, MustIDMask(1, 2).IsNarrowerThanByValue(MustIDMask(0, 3)))
	require.False(t, MustIDMask(0, 3).IsNarrowerThanByValue(MustIDMask(1, 2)))
	require.True(t, MustIDMask(7).IsNarrowerThanByValue(MustIDMask(0, 1)))
	require.False(t, MustIDMask(1).IsNarrowerThanByValue(MustIDMask(1)))

	// Dense and ID masks on a machine with sparse IDs.
	b := topology.NewBuilder("sparse")
	for i, id := range []numa.NodeID{0, 1, 2, 33} {
		b.AddNode(topology.Node{ID: id, Socket: 0, CPUs: numa.NewCPUSet(i)})
	}
	mach, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, MustIDMask(2, 33), IDMaskFromDense(mach, numa.MaskOf(2, 3)))
	dense, err := MustIDMask(2, 33).Dense(mach)
	require.NoError(t, err)
	require.Equal(t, numa.MaskOf(2, 3), dense)
	_, err = MustIDMask(3).Dense(mach)
	require.Error(t, err)
}

// TestNarrowerOrders compares IDMask.IsNarrowerThanByValue (the kubelet's
// order) with numa.Mask.IsNarrowerThan (the allocator's) on every pair of
// sets of 6 nodes, reading an ID mask and a dense mask of the same bits: both
// are strict total orders by count first; at equal count they agree exactly
// when the lowest and the highest differing node lie in different masks.
func TestNarrowerOrders(t *testing.T) {
	require.True(t, MustIDMask(1, 2).IsNarrowerThanByValue(MustIDMask(0, 3)), "the kubelet: the smaller integer")
	require.True(t, numa.MaskOf(0, 3).IsNarrowerThan(numa.MaskOf(1, 2)), "numa: the lowest differing node")
	disagree := 0
	for x := IDMask(0); x < 64; x++ {
		for y := IDMask(0); y < 64; y++ {
			kub, dense := x.IsNarrowerThanByValue(y), numa.Mask(x).IsNarrowerThan(numa.Mask(y))
			if x == y {
				require.False(t, kub || dense, "strict: %v", x)
				continue
			}
			require.NotEqual(t, kub, y.IsNarrowerThanByValue(x), "total and antisymmetric: %v %v", x, y)
			if x.Count() != y.Count() {
				require.Equal(t, x.Count() < y.Count(), kub, "%v %v", x, y)
				require.Equal(t, kub, dense, "different counts: %v %v", x, y)
				continue
			}
			d := uint64(x ^ y)
			low, high := d&-d, uint64(1)<<(63-bits.LeadingZeros64(d))
			split := (uint64(x)&low != 0) != (uint64(x)&high != 0)
			require.Equal(t, split, kub == dense, "%v %v", x, y)
			if kub != dense {
				disagree++
			}
		}
	}
	// The ordered pairs of equal count on which the orders disagree, counted
	// apart (comparing the sorted ID lists and the integers of every pair of
	// subsets of 6 nodes): {0,3} and {1,2} is one of them.
	require.Equal(t, 128, disagree)
}

func TestTopologyHintString(t *testing.T) {
	require.Equal(t, "{0-1 preferred}", Hint(MustIDMask(0, 1), true).String())
	require.Equal(t, "{any not preferred}", AnyHint(false).String())
	require.Equal(t, "{none not preferred}", Hint(0, false).String())
	require.True(t, AnyHint(true).Equal(TopologyHint{Any: true, NUMANodeAffinity: 5, Preferred: true}))
	require.False(t, AnyHint(true).Equal(Hint(0, true)))
}

func TestForEachMaskOrder(t *testing.T) {
	var got []string
	forEachMask([]numa.NodeID{0, 2, 5}, func(_ []int, m IDMask) { got = append(got, m.String()) })
	// bitmask.IterateBitMasks: by size, then lexicographic by IDs.
	require.Equal(t, []string{"0", "2", "5", "0,2", "0,5", "2,5", "0,2,5"}, got)
	got = got[:0]
	forEachMask([]numa.NodeID{0, 1, 2, 3}, func(_ []int, m IDMask) {
		if m.Count() == 2 {
			got = append(got, m.String())
		}
	})
	require.Equal(t, []string{"0-1", "0,2", "0,3", "1-2", "1,3", "2-3"}, got)
}

func TestCPUHints(t *testing.T) {
	free := []NodeAmount{{Node: 0, Total: 4, Available: 4}, {Node: 1, Total: 4, Available: 4}}
	cases := []struct {
		name    string
		nodes   []NodeAmount
		request int
		want    []TopologyHint
	}{
		{"fits one node", free, 2, wantHints([]int{0}, true, []int{1}, true, []int{0, 1}, false)},
		{"needs both nodes", free, 5, wantHints([]int{0, 1}, true)},
		{"more than the machine", free, 9, wantHints()},
		{"one node busy", []NodeAmount{{0, 4, 1}, {1, 4, 4}}, 2, wantHints([]int{1}, true, []int{0, 1}, false)},
		{"nothing fits on one node any more", []NodeAmount{{0, 4, 3}, {1, 4, 3}}, 4, wantHints([]int{0, 1}, false)},
		// Reserved CPUs count toward the width (Total) but are not available.
		{"reserved", []NodeAmount{{0, 4, 2}, {1, 4, 4}}, 3, wantHints([]int{1}, true, []int{0, 1}, false)},
		// A node without CPUs is not a NUMA node of the CPU manager.
		{"CPU-less node", []NodeAmount{{1, 4, 4}, {0, 4, 4}, {5, 0, 0}}, 2,
			wantHints([]int{0}, true, []int{1}, true, []int{0, 1}, false)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CPUHints(c.nodes, c.request)
			require.NotNil(t, got)
			require.Equal(t, c.want, got)
		})
	}
}

func TestDeviceHints(t *testing.T) {
	require.Nil(t, DeviceHints([]NodeAmount{{0, 0, 0}, {1, 0, 0}}, 2, 1), "no device has a NUMA node: no preference")
	got := DeviceHints([]NodeAmount{{0, 2, 1}, {1, 2, 0}}, 0, 2)
	require.NotNil(t, got)
	require.Empty(t, got, "fewer available than requested: cannot satisfy")
	// Unhealthy devices count for the width: node 0 has 2 devices (one
	// unhealthy), so one node is the narrowest, and {0,1} is not preferred.
	require.Equal(t, wantHints([]int{1}, true, []int{0, 1}, false),
		DeviceHints([]NodeAmount{{0, 2, 1}, {1, 2, 2}}, 0, 2))
	// Devices without a NUMA node pass the availability check but are in no
	// set: an empty list.
	got = DeviceHints([]NodeAmount{{0, 1, 1}, {1, 0, 0}}, 1, 2)
	require.NotNil(t, got)
	require.Empty(t, got)
	// Only the nodes that hold devices take part (the kubelet since v1.37).
	require.Equal(t, wantHints([]int{2}, true),
		DeviceHints([]NodeAmount{{0, 0, 0}, {1, 0, 0}, {2, 1, 1}}, 0, 1))
}

// TestDeviceHintsKubeletTable writes out the device manager's
// getCommonTestCases (topology_hints_test.go of v1.37.2, NUMA nodes 0 and 1,
// where only device-bearing NUMA nodes take part in the sets) that do not
// regenerate hints for devices already held by the same container.
func TestDeviceHintsKubeletTable(t *testing.T) {
	cases := []struct {
		name      string
		nodes     []NodeAmount
		unplaced  int
		request   int
		want      []TopologyHint
		wantNil   bool
		wantEmpty bool
	}{
		{name: "Single Request, no alignment", nodes: []NodeAmount{{0, 0, 0}, {1, 0, 0}}, unplaced: 2, request: 1, wantNil: true},
		{name: "Single Request, only one with alignment", nodes: []NodeAmount{{0, 0, 0}, {1, 1, 1}}, unplaced: 1, request: 1,
			want: wantHints([]int{1}, true)}, // v1.37: only device-bearing nodes take part
		{name: "Single Request, one device per socket", nodes: []NodeAmount{{0, 1, 1}, {1, 1, 1}}, request: 1,
			want: wantHints([]int{0}, true, []int{1}, true, []int{0, 1}, false)},
		{name: "Request for 2, one device per socket", nodes: []NodeAmount{{0, 1, 1}, {1, 1, 1}}, request: 2,
			want: wantHints([]int{0, 1}, true)},
		{name: "Request for 2, 2 devices per socket", nodes: []NodeAmount{{0, 2, 2}, {1, 2, 2}}, request: 2,
			want: wantHints([]int{0}, true, []int{1}, true, []int{0, 1}, false)},
		// Dev1 (node 0) and Dev2 (node 1) held by another container.
		{name: "Request for 2, optimal on 1 NUMA node, forced cross-NUMA", nodes: []NodeAmount{{0, 2, 1}, {1, 2, 1}}, request: 2,
			want: wantHints([]int{0, 1}, false)},
		{name: "2 device types, mixed configuration (testdevice2)", nodes: []NodeAmount{{0, 1, 1}, {1, 0, 0}}, request: 1,
			want: wantHints([]int{0}, true)},
		{name: "Single device type, more requested than available", nodes: []NodeAmount{{0, 2, 2}, {1, 2, 2}}, request: 6, wantEmpty: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := DeviceHints(c.nodes, c.unplaced, c.request)
			switch {
			case c.wantNil:
				require.Nil(t, got)
			case c.wantEmpty:
				require.NotNil(t, got)
				require.Empty(t, got)
			default:
				require.Equal(t, c.want, got)
			}
		})
	}
}

// TestCPUHintsDualSocket follows the shape of the CPU manager's hint tests:
// two NUMA nodes of 6 CPUs, some of them taken.
func TestCPUHintsDualSocket(t *testing.T) {
	amounts := func(a0, a1 int) []NodeAmount { return []NodeAmount{{0, 6, a0}, {1, 6, a1}} }
	cases := []struct {
		name    string
		nodes   []NodeAmount
		request int
		want    []TopologyHint
	}{
		{"Request 2 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", amounts(4, 6), 2,
			wantHints([]int{0}, true, []int{1}, true, []int{0, 1}, false)},
		{"Request 5 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", amounts(4, 6), 5,
			wantHints([]int{1}, true, []int{0, 1}, false)},
		{"Request 7 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", amounts(4, 6), 7,
			wantHints([]int{0, 1}, true)},
		{"Request 11 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", amounts(4, 6), 11, wantHints()},
		{"Request 2 CPUs, 1 available on NUMA 0, 1 available on NUMA 1", amounts(1, 1), 2,
			wantHints([]int{0, 1}, false)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, CPUHints(c.nodes, c.request))
		})
	}
}

func TestMemoryHints(t *testing.T) {
	nodes := []MemoryNode{
		{Node: 0, AllocatableMiB: 100, FreeMiB: 100},
		{Node: 1, AllocatableMiB: 100, FreeMiB: 100},
		{Node: 2, AllocatableMiB: 100, FreeMiB: 100},
	}
	require.Equal(t, wantHints([]int{0}, true, []int{1}, true, []int{2}, true,
		[]int{0, 1}, false, []int{0, 2}, false, []int{1, 2}, false, []int{0, 1, 2}, false),
		MemoryHints(nodes, 50))
	require.Nil(t, MemoryHints(nodes, 301), "nothing fits: nil, the kubelet's empty map")

	// Node 0 used alone: it joins no multi-node set. Nodes 1 and 2 grouped:
	// neither is offered alone, and together only as exactly {1,2}.
	used := []MemoryNode{
		{Node: 0, AllocatableMiB: 100, FreeMiB: 60, Assignments: 1},
		{Node: 1, AllocatableMiB: 100, FreeMiB: 20, Group: MustIDMask(1, 2), Assignments: 1},
		{Node: 2, AllocatableMiB: 100, FreeMiB: 20, Group: MustIDMask(1, 2), Assignments: 1},
	}
	require.Equal(t, wantHints([]int{0}, true, []int{1, 2}, false), MemoryHints(used, 30))
	require.Equal(t, wantHints([]int{0}, true), MemoryHints(used, 50))
	// The rules read the group for single-node sets and the assignments for
	// multi-node sets, as the kubelet's calculateHints does: a group without
	// assignments keeps its nodes out of single-node sets only.
	require.Equal(t, wantHints([]int{0}, true, []int{0, 1}, false, []int{0, 2}, false, []int{1, 2}, false, []int{0, 1, 2}, false),
		MemoryHints([]MemoryNode{
			{Node: 0, AllocatableMiB: 100, FreeMiB: 100},
			{Node: 1, AllocatableMiB: 100, FreeMiB: 100, Group: MustIDMask(1, 2)},
			{Node: 2, AllocatableMiB: 100, FreeMiB: 100, Group: MustIDMask(1, 2)},
		}, 50))
}

func hintPreset(t testing.TB, name string) *topology.Machine {
	t.Helper()
	m, err := topology.Preset(name)
	require.NoError(t, err)
	return m
}

// TestPredictDGX pins what the kubelet does with the product's motivating
// pod on empty DGX machines.
func TestPredictDGX(t *testing.T) {
	a100 := hintPreset(t, "dgx-a100")
	pod := &allocator.Request{CPUs: 24, GPUs: 4}
	predict := func(p Policy, opts PredictOptions, st *allocator.State, r *allocator.Request) (TopologyHint, bool) {
		t.Helper()
		h, ok, err := Predict(p, opts, a100, st, r)
		require.NoError(t, err)
		return h, ok
	}

	// 4 GPUs need two of the GPU nodes 1,3,5,7 but 24 CPUs fit on one node:
	// no preferred merge. best-effort keeps B = 2 nodes and takes the
	// numerically smallest two-node intersection; since v1.37 the device
	// manager's sets hold only GPU nodes, so that is {1,3}, which holds all
	// four GPUs (earlier kubelets answered {0,1}, with only two of them).
	h, ok := predict(PolicyBestEffort, PredictOptions{}, nil, pod)
	require.True(t, ok)
	require.Equal(t, Hint(MustIDMask(1, 3), false), h)
	h, ok = predict(PolicyBestEffort, PredictOptions{PolicyOptions: PolicyOptions{PreferClosestNUMANodes: true}}, nil, pod)
	require.True(t, ok)
	require.Equal(t, Hint(MustIDMask(1, 3), false), h)
	_, ok = predict(PolicyRestricted, PredictOptions{}, nil, pod)
	require.False(t, ok)
	h, ok = predict(PolicySingleNUMANode, PredictOptions{}, nil, pod)
	require.False(t, ok)
	require.Equal(t, AnyHint(false), h)
	h, ok = predict(PolicyNone, PredictOptions{}, nil, pod)
	require.True(t, ok)
	require.Equal(t, AnyHint(false), h)

	// 2 GPUs fit on one GPU node: node 1, the lowest.
	two := &allocator.Request{CPUs: 24, GPUs: 2}
	h, ok = predict(PolicySingleNUMANode, PredictOptions{}, nil, two)
	require.True(t, ok)
	require.Equal(t, Hint(MustIDMask(1), true), h)

	// Once node 1's GPUs are held, node 3.
	st := allocator.MustNew(a100, allocator.Options{})
	_, err := st.Allocate(&allocator.Request{ID: "a", CPUs: 2, GPUs: 2, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	h, ok = predict(PolicySingleNUMANode, PredictOptions{}, st, two)
	require.True(t, ok)
	require.Equal(t, Hint(MustIDMask(3), true), h)

	// Not enough GPUs left at all: best-effort merges, the device manager
	// refuses.
	for _, id := range []string{"b", "c", "d"} {
		_, err := st.Allocate(&allocator.Request{ID: id, GPUs: 2, Policy: policy.SingleNUMANode})
		require.NoError(t, err)
	}
	_, ok = predict(PolicyBestEffort, PredictOptions{}, st, two)
	require.False(t, ok)

	// full-pcpus-only: 25 CPUs are not whole cores.
	_, ok = predict(PolicyBestEffort, PredictOptions{FullPCPUsOnly: true}, nil, &allocator.Request{CPUs: 25})
	require.False(t, ok)
	_, ok = predict(PolicyBestEffort, PredictOptions{FullPCPUsOnly: true}, nil, &allocator.Request{CPUs: 24})
	require.True(t, ok)

	// The static memory manager: 64 GiB fits on one node, so its width (1)
	// matches the CPUs' and the 2-GPU pod stays aligned on node 1.
	withMem := &allocator.Request{CPUs: 24, GPUs: 2, MemoryMiB: 64 << 10}
	h, ok = predict(PolicyRestricted, PredictOptions{StaticMemoryManager: true}, nil, withMem)
	require.True(t, ok)
	require.Equal(t, Hint(MustIDMask(1), true), h)
	// More memory than the machine: no memory hint at all ("no preference"
	// to the Topology Manager), then the memory manager refuses.
	h, ok = predict(PolicyBestEffort, PredictOptions{StaticMemoryManager: true}, nil, &allocator.Request{CPUs: 2, MemoryMiB: 2 << 20})
	require.False(t, ok)
	require.Equal(t, Hint(MustIDMask(0), true), h)
}

// TestPredictDGXH100Restricted is docs/design.md's demo: the kubelet's restricted
// policy refuses an 8-GPU, 16-CPU pod on an empty DGX H100.
func TestPredictDGXH100Restricted(t *testing.T) {
	h, ok, err := Predict(PolicyRestricted, PredictOptions{}, hintPreset(t, "dgx-h100"), nil, &allocator.Request{CPUs: 16, GPUs: 8})
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, Hint(MustIDMask(0, 1), false), h)
}

func TestPredictErrors(t *testing.T) {
	big := hintPreset(t, "numa64")
	_, _, err := Predict(PolicyBestEffort, PredictOptions{}, big, nil, &allocator.Request{CPUs: 1})
	require.ErrorIs(t, err, ErrHintConfig)
	_, _, err = Predict(PolicyBestEffort, PredictOptions{PolicyOptions: PolicyOptions{MaxAllowableNUMANodes: 64}}, big, nil, &allocator.Request{CPUs: 1})
	require.ErrorIs(t, err, ErrHintConfig)
	a100 := hintPreset(t, "dgx-a100")
	_, _, err = Predict("strict", PredictOptions{}, a100, nil, &allocator.Request{CPUs: 1})
	require.ErrorIs(t, err, ErrHintConfig)
	_, _, err = Predict(PolicyBestEffort, PredictOptions{}, a100, nil, &allocator.Request{CPUs: -1})
	require.ErrorIs(t, err, allocator.ErrInvalidRequest)
	_, _, err = Predict(PolicyBestEffort, PredictOptions{}, a100, allocator.MustNew(hintPreset(t, "dgx-h100"), allocator.Options{}), &allocator.Request{CPUs: 1})
	require.ErrorIs(t, err, ErrHintConfig)
	_, _, err = Predict(PolicyBestEffort, PredictOptions{}, nil, nil, &allocator.Request{CPUs: 1})
	require.ErrorIs(t, err, ErrHintConfig)
}

func TestProviderHintsShape(t *testing.T) {
	a100 := hintPreset(t, "dgx-a100")
	ps, err := ProviderHints(a100, nil, &allocator.Request{CPUs: 4}, PredictOptions{})
	require.NoError(t, err)
	require.Len(t, ps, 3)
	require.Empty(t, ps[0], "no device requested: an empty map")
	require.Len(t, ps[1]["cpu"], 255)
	require.Nil(t, ps[2], "memory manager None: nil")

	ps, err = ProviderHints(a100, nil, &allocator.Request{CPUs: 4, GPUs: 1, Devices: map[string]int{"rdma": 1},
		MemoryMiB: 1024}, PredictOptions{StaticMemoryManager: true, GPUResource: "aliyun.com/gpu"})
	require.NoError(t, err)
	require.Len(t, ps[0]["aliyun.com/gpu"], 15) // every set of the GPU nodes 1,3,5,7
	require.Len(t, ps[0]["rdma"], 15)
	require.Len(t, ps[2]["memory"], 255)
	for _, h := range ps[0]["aliyun.com/gpu"] {
		require.Equal(t, h.NUMANodeAffinity.Count() == 1, h.Preferred)
	}
}

// hintTestMachine is a 4-node, 2-socket machine with 2 GPUs on nodes 0 and 2
// each, one GPU of unknown node and one rdma device per socket.
func hintTestMachine(t testing.TB) *topology.Machine {
	b := topology.NewBuilder("small")
	for i := 0; i < 4; i++ {
		b.AddNode(topology.Node{ID: numa.NodeID(i), Socket: i / 2, CPUs: numa.CPURange(8*i, 8*i+7), MemoryMiB: 1024})
		for c := 0; c < 4; c++ {
			b.AddCore(numa.NewCPUSet(8*i+2*c, 8*i+2*c+1))
		}
	}
	b.SetDistances([][]int{{10, 12, 20, 20}, {12, 10, 20, 20}, {20, 20, 10, 12}, {20, 20, 12, 10}})
	b.SetReservedCPUs(numa.NewCPUSet(0, 1))
	for g := 0; g < 4; g++ {
		b.AddGPU(topology.GPU{ID: g, NUMANode: numa.NodeID(2 * (g / 2)), BusID: fmt.Sprintf("0000:%02x:00.0", g+1)})
	}
	b.AddGPU(topology.GPU{ID: 4, NUMANode: topology.UnknownNode, BusID: "0000:10:00.0"})
	b.AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: 1})
	b.AddDevice(topology.Device{ID: "mlx5_1", Class: "rdma", NUMANode: 3})
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// TestPredictMatchesCrossProduct drives a small machine through random
// allocations and checks Predict against the kubelet's walk of the cross
// product of the same providers' hints.
func TestPredictMatchesCrossProduct(t *testing.T) {
	m := hintTestMachine(t)
	dist := func(a, b int) int { d, _ := m.Distances().Distance(numa.NodeID(a), numa.NodeID(b)); return d }
	rapid.Check(t, func(t *rapid.T) {
		st := allocator.MustNew(m, allocator.Options{})
		for i := rapid.IntRange(0, 4).Draw(t, "live"); i > 0; i-- {
			_, _ = st.Allocate(&allocator.Request{
				ID:        fmt.Sprint("a", i),
				CPUs:      rapid.IntRange(0, 12).Draw(t, "cpus"),
				GPUs:      rapid.IntRange(0, 2).Draw(t, "gpus"),
				MemoryMiB: int64(rapid.IntRange(0, 1500).Draw(t, "mem")),
				Policy:    rapid.SampledFrom([]policy.Policy{policy.None, policy.BestEffort, policy.SingleNUMANode}).Draw(t, "p"),
				Exclusive: policy.Preferred,
			})
		}
		if rapid.Bool().Draw(t, "unhealthy") {
			_, err := st.SetDeviceHealth(allocator.GPUClass, fmt.Sprint(rapid.IntRange(0, 4).Draw(t, "gpu")), false)
			require.NoError(t, err)
		}
		r := &allocator.Request{
			CPUs:      rapid.IntRange(0, 30).Draw(t, "rcpus"),
			GPUs:      rapid.IntRange(0, 5).Draw(t, "rgpus"),
			MemoryMiB: int64(rapid.IntRange(0, 3000).Draw(t, "rmem")),
			Devices:   map[string]int{"rdma": rapid.IntRange(0, 2).Draw(t, "rrdma")},
		}
		opts := PredictOptions{StaticMemoryManager: rapid.Bool().Draw(t, "static"),
			PolicyOptions: PolicyOptions{PreferClosestNUMANodes: rapid.Bool().Draw(t, "closest")}}
		pol := rapid.SampledFrom([]Policy{PolicyBestEffort, PolicyRestricted, PolicySingleNUMANode}).Draw(t, "policy")
		ps, err := ProviderHints(m, st, r, opts)
		require.NoError(t, err)
		want, wantAdmit := refMerge(pol, m.NodeIDs(), dist, opts.PreferClosestNUMANodes, ps, nil)
		got, admit, err := Predict(pol, opts, m, st, r)
		require.NoError(t, err)
		require.Truef(t, want.Equal(got), "got %v want %v (providers %v)", got, want, ps)
		if !wantAdmit {
			require.False(t, admit)
		}
	})
}
