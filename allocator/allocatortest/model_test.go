package allocatortest_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

func preset(t *testing.T, name string) *topology.Machine {
	t.Helper()
	m, err := topology.Preset(name)
	require.NoError(t, err)
	return m
}

func model(t *testing.T, m *topology.Machine, live ...allocator.Allocation) *allocatortest.Model {
	t.Helper()
	md, err := allocatortest.NewModel(m, live)
	require.NoError(t, err)
	return md
}

// TestDGXH100WorkedExample is the worked example of docs/design.md: a 2-CPU
// SingleNUMANode pod on node 0 makes node 0 single, so an 8-GPU Restricted
// pod (width_cap 2) is refused under Required and admitted under Preferred.
func TestDGXH100WorkedExample(t *testing.T) {
	m := preset(t, "dgx-h100")
	small := allocator.Allocation{ID: "small", Policy: policy.SingleNUMANode, CPUs: numa.NewCPUSet(0, 1),
		DenseSpan: numa.MaskOf(0)}
	md := model(t, m, small)
	single, shared := md.NodeTypes()
	assert.Equal(t, numa.MaskOf(0), single)
	assert.Equal(t, numa.Mask(0), shared)
	assert.Equal(t, policy.Single, md.Type(0))
	assert.Equal(t, policy.Idle, md.Type(1))

	big := &allocator.Request{ID: "big", GPUs: 8, Policy: policy.Restricted}
	v := md.Decide(big)
	assert.True(t, v.Valid)
	assert.False(t, v.Admissible, v.Reason)
	assert.Equal(t, []error{allocator.ErrExclusivity}, v.Refusals)
	assert.Equal(t, 2, v.WidthCap)
	assert.False(t, v.InSet, "8 GPUs fit in no one socket")

	big.Exclusive = policy.Preferred
	v = md.Decide(big)
	assert.True(t, v.Admissible, v.Reason)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0, 1)}, v.DenseSpans)
}

func TestDGXH100EightGPURestrictedOnEmpty(t *testing.T) {
	m := preset(t, "dgx-h100")
	md := model(t, m)
	r := &allocator.Request{ID: "train", CPUs: 16, GPUs: 8, Policy: policy.Restricted}
	v := md.Decide(r)
	require.True(t, v.Admissible, v.Reason)
	assert.Equal(t, 2, v.WidthCap)
	assert.Equal(t, 2, v.Width)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0, 1)}, v.DenseSpans)

	// The model's own placement passes its checker.
	a, err := md.Place(r)
	require.NoError(t, err)
	require.NoError(t, md.Check(r, a, nil))
	assert.Len(t, a.GPUs, 8)
	assert.Equal(t, 16, a.CPUs.Size())

	// The demo's 4-GPU, 24-CPU SingleNUMANode pods go on either node; the
	// third is refused for want of a node.
	md = model(t, m)
	for i, id := range []string{"tg1", "tg2"} {
		r := &allocator.Request{ID: id, CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode}
		v := md.Decide(r)
		require.True(t, v.Admissible, v.Reason)
		a, err := md.Place(r)
		require.NoError(t, err)
		assert.Equal(t, numa.MaskOf(i), a.DenseSpan)
		md, err = md.With(a)
		require.NoError(t, err)
	}
	v = md.Decide(&allocator.Request{ID: "tg3", CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode})
	assert.False(t, v.Admissible)
	assert.Equal(t, []error{allocator.ErrInsufficient}, v.Refusals, v.Reason)
}

// setsMachine has two NUMA sets: {0,1,2} with 1, 1 and 3 GPUs, {3,4} with 2
// and 2. Five GPUs fit inside the first set only on all three of its nodes,
// though node 2 and a node of the second set would do with two.
func setsMachine(t *testing.T) *topology.Machine {
	t.Helper()
	b := topology.NewBuilder("sets")
	gpus := []int{1, 1, 3, 2, 2}
	id := 0
	for n, k := range gpus {
		b.AddNode(topology.Node{ID: numa.NodeID(n * 10), Socket: min(n/3, 1), CPUs: numa.CPURange(4*n, 4*n+3),
			MemoryMiB: 1024})
		for range k {
			b.AddGPU(topology.GPU{ID: id, NUMANode: numa.NodeID(n * 10)})
			id++
		}
	}
	m, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, []numa.Mask{numa.MaskOf(0, 1, 2), numa.MaskOf(3, 4)}, m.NUMASets())
	return m
}

func TestWidthCapInsideOneSet(t *testing.T) {
	md := model(t, setsMachine(t))
	r := &allocator.Request{ID: "x", GPUs: 5, Policy: policy.Restricted}
	v := md.Decide(r)
	require.True(t, v.Admissible, v.Reason)
	assert.Equal(t, 3, v.WidthCap)
	assert.True(t, v.InSet)
	assert.Equal(t, 2, v.WidthFree)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0, 1, 2)}, v.DenseSpans)

	// A two-node answer across the sets is too wide a crossing: the checker
	// names it.
	bad := allocator.Allocation{ID: "x", Policy: policy.Restricted, GPUs: []int{2, 3, 4, 5, 6},
		DenseSpan: numa.MaskOf(2, 3)}
	err := md.Check(r, bad, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "span {20,30} is not legal")
	assert.Contains(t, err.Error(), "demands exactly 3")

	// BestEffort takes width_free nodes.
	r.Policy = policy.BestEffort
	v = md.Decide(r)
	require.True(t, v.Admissible)
	assert.Equal(t, 2, v.Width)
	assert.Equal(t, []numa.Mask{numa.MaskOf(2, 3), numa.MaskOf(2, 4)}, v.DenseSpans)
	bad.Policy = policy.BestEffort
	assert.NoError(t, md.Check(r, bad, nil))

	// Once node 1's GPU is taken, no three nodes of the first set have five
	// GPUs free: Restricted is refused although the machine has them.
	held := allocator.Allocation{ID: "h", Policy: policy.None, GPUs: []int{1}, DenseSpan: numa.MaskOf(1)}
	md = model(t, setsMachine(t), held)
	r.Policy = policy.Restricted
	v = md.Decide(r)
	assert.False(t, v.Admissible)
	assert.Equal(t, []error{allocator.ErrNoNUMAFit}, v.Refusals, v.Reason)
}

func TestFullPCPUsCountsWholeCores(t *testing.T) {
	// One node, four cores of two threads; CPU 1 (core {0,1}) is reserved
	// and core {6} has a single thread.
	b := topology.NewBuilder("smt")
	b.AddNode(topology.Node{ID: 0, CPUs: numa.CPURange(0, 6), MemoryMiB: 0})
	for _, c := range []numa.CPUSet{numa.NewCPUSet(0, 1), numa.NewCPUSet(2, 3), numa.NewCPUSet(4, 5), numa.NewCPUSet(6)} {
		b.AddCore(c)
	}
	b.SetReservedCPUs(numa.NewCPUSet(1))
	m, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, 2, m.ThreadsPerCore())

	held := allocator.Allocation{ID: "h", CPUs: numa.NewCPUSet(2), DenseSpan: numa.MaskOf(0)}
	md := model(t, m, held)
	assert.Equal(t, int64(2), md.Capacity(0, true)["cpu"], "cores {2,3} {4,5}")
	assert.Equal(t, int64(1), md.Free(0, true)["cpu"], "core {4,5}")
	assert.Equal(t, int64(6), md.Capacity(0, false)["cpu"])
	assert.Equal(t, int64(5), md.Free(0, false)["cpu"])
	assert.Equal(t, "0,3-6", md.FreeCPUs().String())

	r := &allocator.Request{ID: "f", CPUs: 4, FullPCPUs: true, Policy: policy.SingleNUMANode}
	v := md.Decide(r)
	assert.False(t, v.Admissible)
	assert.Equal(t, []error{allocator.ErrInsufficient}, v.Refusals, v.Reason)

	r.CPUs = 2
	a, err := md.Place(r)
	require.NoError(t, err)
	assert.Equal(t, "4-5", a.CPUs.String())
	split := allocator.Allocation{ID: "f", Policy: policy.SingleNUMANode, FullPCPUs: true,
		CPUs: numa.NewCPUSet(3, 4), DenseSpan: numa.MaskOf(0)}
	err = md.Check(r, split, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not handed out whole")

	r.CPUs = 3
	v = md.Decide(r)
	assert.False(t, v.Valid)
	assert.Equal(t, []error{allocator.ErrInvalidRequest}, v.Refusals)
}

func TestUnknownNodeGPUsOnlyForNone(t *testing.T) {
	b := topology.NewBuilder("vm")
	b.AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 1024})
	b.AddNode(topology.Node{ID: 1, Socket: 1, CPUs: numa.CPURange(4, 7), MemoryMiB: 1024})
	b.AddGPU(topology.GPU{ID: 0, NUMANode: 0})
	b.AddGPU(topology.GPU{ID: 1, NUMANode: topology.UnknownNode})
	m, err := b.Build()
	require.NoError(t, err)
	md := model(t, m)
	assert.Equal(t, map[string]int64{allocator.GPUClass: 1}, md.Unplaced())

	r := &allocator.Request{ID: "g", GPUs: 2, Policy: policy.None}
	v := md.Decide(r)
	require.True(t, v.Admissible, v.Reason)
	a, err := md.Place(r)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, a.GPUs)
	assert.Equal(t, numa.MaskOf(0), a.DenseSpan, "a GPU of unknown node counts in no span")

	for _, p := range []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort} {
		r := &allocator.Request{ID: "g", GPUs: 2, Policy: p}
		v := md.Decide(r)
		assert.False(t, v.Admissible, p)
		assert.Contains(t, v.Refusals, allocator.ErrInsufficient)
		r.GPUs = 1
		got := allocator.Allocation{ID: "g", Policy: p, GPUs: []int{1}}
		err := md.Check(r, got, nil)
		require.Error(t, err, p)
		assert.Contains(t, err.Error(), "unknown NUMA node; only None requests may receive it")
	}
}

func TestBestEffortSoftRule(t *testing.T) {
	// Two nodes of 4 CPUs; a one-node pod on each makes both single.
	b := topology.NewBuilder("two")
	b.AddNode(topology.Node{ID: 0, CPUs: numa.CPURange(0, 3)})
	b.AddNode(topology.Node{ID: 1, CPUs: numa.CPURange(4, 7)})
	m, err := b.Build()
	require.NoError(t, err)
	live := []allocator.Allocation{
		{ID: "a", CPUs: numa.NewCPUSet(0), DenseSpan: numa.MaskOf(0), Policy: policy.SingleNUMANode},
		{ID: "b", CPUs: numa.NewCPUSet(4), DenseSpan: numa.MaskOf(1), Policy: policy.SingleNUMANode},
	}
	md := model(t, m, live...)

	// 6 CPUs need both nodes; {0,1} is forbidden, but BestEffort breaks the
	// rule rather than refuse.
	r := &allocator.Request{ID: "x", CPUs: 6, Policy: policy.BestEffort}
	v := md.Decide(r)
	require.True(t, v.Admissible, v.Reason)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0, 1)}, v.DenseSpans)
	r.Policy = policy.Restricted
	v = md.Decide(r)
	assert.Equal(t, []error{allocator.ErrExclusivity}, v.Refusals, v.Reason)

	// Now node 1 is shared: a 2-CPU BestEffort pod must take node 0.
	live[1] = allocator.Allocation{ID: "b", CPUs: numa.NewCPUSet(1, 4), DenseSpan: numa.MaskOf(0, 1)}
	md = model(t, m, live...)
	r = &allocator.Request{ID: "y", CPUs: 2, Policy: policy.BestEffort}
	v = md.Decide(r)
	require.True(t, v.Admissible)
	single, shared := md.NodeTypes()
	assert.Equal(t, numa.Mask(0), single)
	assert.Equal(t, numa.MaskOf(0, 1), shared)
	// Both nodes are shared, so neither one-node span is allowed: either.
	assert.Equal(t, []numa.Mask{numa.MaskOf(0), numa.MaskOf(1)}, v.DenseSpans)
}

func TestCheckFindsWhatIsWrong(t *testing.T) {
	b := topology.NewBuilder("check")
	b.AddNode(topology.Node{ID: 3, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 1000})
	b.AddNode(topology.Node{ID: 7, Socket: 0, CPUs: numa.CPURange(4, 7), MemoryMiB: 1000})
	b.AddGPU(topology.GPU{ID: 0, NUMANode: 3})
	b.SetReservedCPUs(numa.NewCPUSet(3))
	m, err := b.Build()
	require.NoError(t, err)
	held := allocator.Allocation{ID: "h", CPUs: numa.NewCPUSet(0), Memory: []allocator.NodeMemory{{Node: 3, MiB: 600}},
		DenseSpan: numa.MaskOf(0), Policy: policy.None}
	md := model(t, m, held)
	r := &allocator.Request{ID: "x", CPUs: 2, MemoryMiB: 500, Policy: policy.SingleNUMANode}
	good := allocator.Allocation{ID: "x", Policy: policy.SingleNUMANode, CPUs: numa.NewCPUSet(4, 5),
		Memory: []allocator.NodeMemory{{Node: 7, MiB: 500}}, DenseSpan: numa.MaskOf(1)}
	require.NoError(t, md.Check(r, good, nil))

	tests := []struct {
		name string
		a    allocator.Allocation
		err  error
		want []string
	}{
		{"completeness", allocator.Allocation{}, errors.New("no"), []string{"refused though admissible (completeness)"}},
		{"wrong span field", func() allocator.Allocation { a := good.Clone(); a.DenseSpan = numa.MaskOf(0, 1); return a }(), nil,
			[]string{"Span {3,7} is not the nodes hosting", "{7}"}},
		{"held and reserved", allocator.Allocation{ID: "x", Policy: policy.SingleNUMANode, CPUs: numa.NewCPUSet(0, 3),
			Memory: []allocator.NodeMemory{{Node: 3, MiB: 500}}, DenseSpan: numa.MaskOf(0)}, nil,
			[]string{`CPU 0 was not free: "h" holds it`, "CPU 3 is reserved", "500 MiB on node 3, which had only 400 MiB free"}},
		{"amounts", allocator.Allocation{ID: "x", Policy: policy.SingleNUMANode, CPUs: numa.NewCPUSet(4, 5, 6),
			GPUs: []int{0}, DenseSpan: numa.MaskOf(0, 1)}, nil,
			[]string{"3 CPUs (4-6), want exactly 2", "1 GPUs [0], want exactly 0", "0 MiB of memory, want exactly 500",
				"span {3,7} is not legal", "SingleNUMANode demands exactly 1"}},
		{"fields", func() allocator.Allocation { a := good.Clone(); a.ID = "y"; a.Policy = policy.None; return a }(), nil,
			[]string{`ID "y", want "x"`, "policy None/Required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := md.Check(r, tt.a, tt.err)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	// Soundness and categories.
	big := &allocator.Request{ID: "big", CPUs: 7, Policy: policy.SingleNUMANode}
	err = md.Check(big, good, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "admitted though not admissible (soundness)")
	err = md.Check(big, allocator.Allocation{}, allocator.ErrNoNUMAFit)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "wrong category")
	err = md.Check(big, allocator.Allocation{}, allocator.ErrInsufficient)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a *allocator.PlacementError")
	wide := &allocator.Request{ID: "w", CPUs: 5, Policy: policy.SingleNUMANode}
	assert.Equal(t, []error{allocator.ErrNoNUMAFit}, md.Decide(wide).Refusals)

	// IDs.
	dup := &allocator.Request{ID: "h", CPUs: 1}
	assert.NoError(t, md.Check(dup, allocator.Allocation{}, allocator.ErrDuplicateID))
	assert.Error(t, md.Check(dup, good, nil))
	assert.NoError(t, md.CheckFit(dup, allocator.ErrDuplicateID))
	empty := &allocator.Request{CPUs: 1}
	assert.NoError(t, md.Check(empty, allocator.Allocation{}, allocator.ErrInvalidRequest))
	assert.NoError(t, md.CheckFit(empty, nil), "Fit accepts an empty ID")
}

func TestNewModelRefusesImpossibleStates(t *testing.T) {
	m := preset(t, "small-1s")
	a := allocator.Allocation{ID: "a", CPUs: numa.NewCPUSet(0), DenseSpan: numa.MaskOf(0)}
	b := allocator.Allocation{ID: "b", CPUs: numa.NewCPUSet(0, 1), DenseSpan: numa.MaskOf(0)}
	_, err := allocatortest.NewModel(m, []allocator.Allocation{a, b})
	require.ErrorContains(t, err, `CPU 0 is held by "a" too`)
	_, err = allocatortest.NewModel(m, []allocator.Allocation{{ID: "c", GPUs: []int{0}}})
	require.ErrorContains(t, err, "Span {} is not the nodes hosting what it holds, {0}")
	_, err = allocatortest.NewModel(m, []allocator.Allocation{{ID: "d", GPUs: []int{5}}})
	require.ErrorContains(t, err, "GPU 5 does not exist")

	md := model(t, m, a)
	_, err = md.Without("zzz")
	require.ErrorIs(t, err, allocator.ErrUnknownID)
	md2, err := md.Without("a")
	require.NoError(t, err)
	assert.Equal(t, int64(16), md2.Free(0, false)["cpu"])
	assert.Equal(t, int64(15), md.Free(0, false)["cpu"], "a model is immutable")

	snap := allocator.Snapshot{Allocations: []allocator.Allocation{a}, Unhealthy: map[string][]string{"gpu": {"0"}}}
	md3, err := allocatortest.FromSnapshot(m, snap)
	require.NoError(t, err)
	assert.Equal(t, int64(0), md3.Capacity(0, false)[allocator.GPUClass])
	assert.Equal(t, []error{allocator.ErrInsufficient},
		md3.Decide(&allocator.Request{ID: "g", GPUs: 1, Policy: policy.None}).Refusals)
}

func TestOpString(t *testing.T) {
	op := allocatortest.Op{Kind: allocatortest.OpAllocate, ID: "a", Request: allocator.Request{ID: "a", CPUs: 4, GPUs: 1,
		Policy: policy.SingleNUMANode, Devices: map[string]int{"rdma": 1}}}
	assert.Equal(t, `{"op":"allocate","id":"a","cpus":4,"gpus":1,"memoryMiB":0,"devices":{"rdma":1},`+
		`"policy":"SingleNUMANode","exclusive":"Required","fullPCPUs":false}`, op.String())
	assert.Equal(t, `{"op":"release","id":"a"}`, allocatortest.Op{Kind: allocatortest.OpRelease, ID: "a"}.String())
}

// TestModelPlacesWhatItAdmits plays random streams against the model alone:
// its own placement of every admissible request passes its checker, and
// the generators give machines the model accepts.
func TestModelPlacesWhatItAdmits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := allocatortest.Machine().Draw(t, "machine")
		if m.NumNodes() > 6 {
			t.Fatalf("%d nodes", m.NumNodes())
		}
		md, err := allocatortest.NewModel(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range allocatortest.Stream(m).Draw(t, "ops") {
			if op.Kind == allocatortest.OpRelease {
				if next, err := md.Without(op.ID); err == nil {
					md = next
				}
				continue
			}
			r := op.Request
			v := md.Decide(&r)
			a, err := md.Place(&r)
			if (err == nil) != (v.Admissible && !md.IsLive(r.ID)) {
				t.Fatalf("Place %s: %v, but the verdict is %+v", &r, err, v)
			}
			if err != nil {
				// Place cannot build a *PlacementError: compare the category.
				if !slices.ContainsFunc(v.Refusals, func(s error) bool { return errors.Is(err, s) }) &&
					!errors.Is(err, allocator.ErrDuplicateID) {
					t.Fatalf("Place %s: %v is not among %v", &r, err, v.Refusals)
				}
				continue
			}
			if err := md.Check(&r, a, nil); err != nil {
				t.Fatal(err)
			}
			if md, err = md.With(a); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// The worked example of docs/design.md, asked of the model: a 2-CPU
// SingleNUMANode pod on node 0 of a dgx-h100, then an 8-GPU Restricted pod.
func ExampleModel_Decide() {
	m, _ := topology.Preset("dgx-h100")
	small := allocator.Allocation{ID: "small", Policy: policy.SingleNUMANode,
		CPUs: numa.NewCPUSet(0, 1), DenseSpan: numa.MaskOf(0)}
	md, err := allocatortest.NewModel(m, []allocator.Allocation{small})
	if err != nil {
		panic(err)
	}
	big := &allocator.Request{ID: "big", GPUs: 8, Policy: policy.Restricted}
	v := md.Decide(big)
	fmt.Println(v.Admissible, v.WidthCap, v.Refusals)
	fmt.Println(v.Reason)

	big.Exclusive = policy.Preferred
	v = md.Decide(big)
	fmt.Println(v.Admissible, v.DenseSpans) // dense masks: nodes 0 and 1
	// Output:
	// false 2 [singleNUMANodeExclusive rule forbids every placement]
	// Restricted: width_cap 2 (across NUMA sets), width_free 2; spans {0,1} have enough free but the exclusivity rule forbids each (single nodes {0}, shared nodes {})
	// true [0-1]
}

// Check says what is wrong with an engine's answer.
func ExampleModel_Check() {
	m, _ := topology.Preset("small-1s")
	md, _ := allocatortest.NewModel(m, nil)
	r := &allocator.Request{ID: "a", CPUs: 2, Policy: policy.SingleNUMANode}
	bad := allocator.Allocation{ID: "a", Policy: policy.SingleNUMANode, CPUs: numa.NewCPUSet(0, 1, 2),
		DenseSpan: numa.MaskOf(0)}
	fmt.Println(md.Check(r, bad, nil) != nil)
	good, _ := md.Place(r)
	fmt.Println(good.CPUs, md.Check(r, good, nil))
	// Output:
	// true
	// 0-1 <nil>
}
