package allocator_test

import (
	"errors"
	"fmt"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// A text-generation pod of 4 GPUs and 24 CPUs on one NUMA node of a DGX
// H100, and its release.
func ExampleState_Allocate() {
	m, _ := topology.Preset("dgx-h100")
	s, err := allocator.New(m, allocator.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}

	a, err := s.Allocate(&allocator.Request{ID: "pod-1", CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("cpus:", a.CPUs)
	fmt.Println("gpus:", a.GPUs)
	fmt.Println("numaNodes:", a.NUMANodes())
	fmt.Println("free CPUs:", s.FreeCPUs().Size())

	fmt.Println("release:", s.Release("pod-1"))
	fmt.Println("free CPUs:", s.FreeCPUs().Size())
	// A repeated release is harmless and says so.
	fmt.Println("again:", errors.Is(s.Release("pod-1"), allocator.ErrUnknownID))
	// Output:
	// cpus: 0-11,112-123
	// gpus: [0 1 2 3]
	// numaNodes: [0]
	// free CPUs: 200
	// release: <nil>
	// free CPUs: 224
	// again: true
}

// Fit answers what Allocate would, without changing anything.
func ExampleState_Fit() {
	m, _ := topology.Preset("dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})

	fmt.Println(s.Fit(&allocator.Request{CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode}))
	// Five GPUs exist, but not on one NUMA node.
	err := s.Fit(&allocator.Request{CPUs: 24, GPUs: 5, Policy: policy.SingleNUMANode})
	fmt.Println(errors.Is(err, allocator.ErrNoNUMAFit))
	// BestEffort falls back to two nodes.
	fmt.Println(s.Fit(&allocator.Request{CPUs: 24, GPUs: 5, Policy: policy.BestEffort}))
	fmt.Println("live:", len(s.Live()))
	// Output:
	// <nil>
	// true
	// <nil>
	// live: 0
}

// docs/design.md's worked example: a 2-CPU SingleNUMANode pod makes node 0
// single, so an 8-GPU Restricted pod, whose span must be both nodes, is
// refused under the default exclusivity and admitted with Preferred.
func ExamplePlacementError() {
	m, _ := topology.Preset("dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	_, _ = s.Allocate(&allocator.Request{ID: "small", CPUs: 2, Policy: policy.SingleNUMANode})

	r := allocator.Request{ID: "big", GPUs: 8, Policy: policy.Restricted}
	_, err := s.Allocate(&r)
	var pe *allocator.PlacementError
	if errors.As(err, &pe) {
		fmt.Println(errors.Is(err, allocator.ErrExclusivity), pe.WidthCap, pe.Blocked)
		fmt.Println(pe.Reason)
	}

	r.Exclusive = policy.Preferred
	a, err := s.Allocate(&r)
	fmt.Println(a.NUMANodes(), err)
	// Output:
	// true 2 [0]
	// a set of 2 NUMA nodes (width_cap 2) with 8 GPUs free exists, but NUMA node(s) 0 are used by single-NUMA-node allocations, and a multi-node span may not use them (singleNUMANodeExclusive: Required)
	// [0 1] <nil>
}

// A snapshot carries the live allocations (and device health) across a
// restart; Restore rebuilds the same state.
func ExampleState_Restore() {
	m, _ := topology.Preset("dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	_, _ = s.Allocate(&allocator.Request{ID: "a", CPUs: 8, GPUs: 2, Policy: policy.SingleNUMANode})
	_, _ = s.Allocate(&allocator.Request{ID: "b", CPUs: 16, GPUs: 8 - 2, Policy: policy.BestEffort})
	_, _ = s.SetDeviceHealth("rdma", "mlx5_0", false)
	snap := s.Snapshot()

	restarted := allocator.MustNew(m, allocator.Options{})
	if err := restarted.Restore(snap); err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range restarted.Live() {
		fmt.Println(a.String())
	}
	fmt.Println("unhealthy:", restarted.Snapshot().Unhealthy)
	fmt.Println("same free CPUs:", restarted.FreeCPUs().Equal(s.FreeCPUs()))

	// Restoring it again on top would hold everything twice: refused,
	// naming the allocation, and nothing changes.
	err := restarted.Restore(snap)
	var re *allocator.RestoreError
	fmt.Println(errors.As(err, &re), re.ID, errors.Is(err, allocator.ErrDuplicateID))
	// Output:
	// "a" cpus 0-3,112-115 gpus [0 1] nodes [0]
	// "b" cpus 4-6,56-61,116-117,168-172 gpus [2 3 4 5 6 7] nodes [0 1]
	// unhealthy: map[rdma:[mlx5_0]]
	// same free CPUs: true
	// true a true
}

// Score ranks machines for a scheduler: an aligned placement scores 50-100,
// and by default (MostAllocated) a fuller machine scores higher.
func ExampleState_Score() {
	m, _ := topology.Preset("dgx-h100")
	empty := allocator.MustNew(m, allocator.Options{})
	busy := allocator.MustNew(m, allocator.Options{})
	_, _ = busy.Allocate(&allocator.Request{ID: "x", CPUs: 56, GPUs: 2, Policy: policy.SingleNUMANode})

	r := allocator.Request{CPUs: 24, GPUs: 2, Policy: policy.SingleNUMANode}
	e, _ := empty.Score(&r)
	b, _ := busy.Score(&r)
	fmt.Println("empty:", e, "busy:", b)

	// Four GPUs fit on one node of the empty machine, but need two nodes on
	// this one (two GPUs free on each): BestEffort admits it, unaligned.
	split := allocator.MustNew(m, allocator.Options{})
	_, _ = split.Claim(allocator.Allocation{ID: "y", GPUs: []int{0, 1}, Policy: policy.SingleNUMANode})
	_, _ = split.Claim(allocator.Allocation{ID: "z", GPUs: []int{4, 5}, Policy: policy.SingleNUMANode})
	be := allocator.Request{GPUs: 4, Policy: policy.BestEffort}
	e, _ = empty.Score(&be)
	sp, err := split.Score(&be)
	fmt.Println("empty:", e, "split:", sp, err)
	// Output:
	// empty: 58 busy: 71
	// empty: 75 split: 49 <nil>
}

// New refuses a nil machine instead of panicking later.
func ExampleNew() {
	_, err := allocator.New(nil, allocator.Options{})
	fmt.Println(errors.Is(err, allocator.ErrNoMachine), err)
	// Output:
	// true no machine: allocator.New needs a *topology.Machine, got nil
}

// A refusal says whether the request can never fit this machine or does
// not fit now, with every amount in its unit.
func ExamplePlacementError_never() {
	m, _ := topology.Preset("dgx-h100") // 2 NUMA nodes of 4 GPUs
	s := allocator.MustNew(m, allocator.Options{})
	err := s.Fit(&allocator.Request{ID: "big", GPUs: 5, Policy: policy.SingleNUMANode})
	var pe *allocator.PlacementError
	errors.As(err, &pe)
	fmt.Println(pe.Never, errors.Is(err, allocator.ErrNeverFits), pe.Reason)

	_, _ = s.Allocate(&allocator.Request{ID: "a", GPUs: 3, CPUs: 8, Policy: policy.SingleNUMANode})
	_, _ = s.Allocate(&allocator.Request{ID: "b", GPUs: 3, CPUs: 8, Policy: policy.SingleNUMANode})
	err = s.Fit(&allocator.Request{ID: "two", GPUs: 2, Policy: policy.SingleNUMANode})
	errors.As(err, &pe)
	fmt.Println(pe.Never, pe.Reason)
	// Output:
	// true true no NUMA node of this machine can ever hold 5 GPUs (one node has at most 4 GPUs)
	// false no NUMA node has 2 GPUs free now (at most 1 GPU free there)
}

// A snapshot names everything by ID: restored on a machine whose NUMA node
// 1 is gone, an allocation with memory there is refused, naming the node,
// instead of moving its memory to another node.
func ExampleNodeError() {
	two := topology.NewBuilder("two")
	two.AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 4096})
	two.AddNode(topology.Node{ID: 1, Socket: 0, CPUs: numa.CPURange(4, 7), MemoryMiB: 4096})
	m, _ := two.Build()
	s := allocator.MustNew(m, allocator.Options{})
	a, _ := s.Allocate(&allocator.Request{ID: "a", CPUs: 2, MemoryMiB: 5000, Policy: policy.BestEffort})
	fmt.Println(a.String())

	one := topology.NewBuilder("one")
	one.AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 7), MemoryMiB: 8192})
	m1, _ := one.Build()
	err := allocator.MustNew(m1, allocator.Options{}).Restore(s.Snapshot())
	var ne *allocator.NodeError
	fmt.Println(errors.As(err, &ne), ne.Node)
	fmt.Println(err)
	// Output:
	// "a" cpus 0-1 gpus [] nodes [0 1] memory 4096 MiB on node 0, 904 MiB on node 1
	// true 1
	// allocation "a": unknown NUMA node: NUMA node 1 does not exist on this machine (its NUMA nodes: 0), but the allocation has 904 MiB of memory on it
}
