// Package allocator holds the allocation state of one machine and the joint
// CPU+GPU(+memory, +other devices) placement engine of numaplace.
//
// A [State] is built from a topology.Machine. [State.Fit] says whether a
// [Request] would be admitted (and agrees exactly with Allocate),
// [State.Allocate] places it, [State.Release] gives it back, [State.Score]
// rates the machine for a scheduler, and [State.Snapshot] /
// [State.Restore] carry the live allocations across a restart. The
// policies and the singleNUMANodeExclusive rule are those of docs/design.md
// (see package policy): SingleNUMANode spans exactly one NUMA node,
// Restricted exactly width_cap nodes (inside one NUMA set whenever the
// request fits in one), BestEffort exactly width_free nodes, None anywhere.
//
// The engine composes [Resource] implementations: [CPUs] (SMT-aware),
// [Devices] of a class (GPUs, RDMA NICs, any PCI class) and [Memory]; a new
// kind needs no change to the engine. It searches the NUMA node sets
// jointly for all demanded kinds, narrowest first, with bounds and pruning
// (see the cover type's comment for the complexity), instead of
// multiplying per-resource hints.
//
// Among admissible spans it prefers, in order: fewer NUMA sets crossed,
// then lower total NUMA distance; GPUs under one PCIe switch (and with more
// NVLink links); CPUs split over the span's nodes in proportion to the
// request's GPUs there; whole physical cores; for requests without GPUs,
// nodes with fewer free GPUs (GPU-local CPUs are kept for GPU pods unless
// [Options].SpendGPULocalCPUs); best fit (or spread); the lowest node
// indices.
//
// Production edges: [State.SetDeviceHealth] takes a failed device out of
// service and names the allocations that hold it; [State.ReplaceMachine]
// moves the state to a changed machine, keeping every live allocation
// exactly or changing nothing; [State.Resize] grows or shrinks an
// allocation's CPUs in place under its policy; [State.FitWithout] and
// [State.Clone] are preemption dry-runs; [State.Claim] admits an allocation
// decided elsewhere (the node side of a scheduler's decision).
// On machines where more candidate spans exist than Options.SearchBudget,
// the preference is a heuristic over the first candidates in node order;
// admissibility is always exact.
//
// Every method of State is safe for concurrent use.
//
// The common calls:
//
//	m, _ := topology.Preset("dgx-h100")
//	s := allocator.New(m, allocator.Options{})
//	a, err := s.Allocate(&allocator.Request{ID: "pod-1", CPUs: 24, GPUs: 4,
//		Policy: policy.SingleNUMANode})
//	var pe *allocator.PlacementError
//	if errors.As(err, &pe) { fmt.Println(pe.Reason) }
//	_ = s.Release("pod-1")
package allocator
