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
// [Devices] of a class (GPUs, RDMA NICs, any PCI class) and [Memory];
// Options.Resources (one machine) and Options.NewResources (made per
// machine) add kinds of the caller's own, which requests ask for in
// Request.Amounts and allocations hold in Allocation.Amounts (see
// ExampleOptions_hugepages and docs/design.md for what does not carry
// them: the decision annotation and the node side). It searches the NUMA
// node sets jointly for all demanded kinds, narrowest first, with bounds
// and pruning, instead of multiplying per-resource hints.
//
// Among admissible spans it takes the top-ranked one. This list is the
// statement of the preference order (the code declares its criteria in
// this order and compares them so; the tests hold the code's order to the
// reference model's, criterion by criterion): two spans
// are compared on each criterion in turn, the first that differs deciding.
//
//  1. The span keeps the singleNUMANodeExclusive rule.
//  2. It crosses fewer NUMA sets.
//  3. Its pairs of nodes have a lower total SLIT distance.
//  4. The resources' own preferences, kind by kind ([Penalizer]: GPUs
//     under one PCIe switch, CPUs as whole free cores).
//  5. For a request without GPUs, fewer free GPUs on the span (unless
//     Options.SpendGPULocalCPUs).
//  6. Best fit, kind by kind in kind order: fewer free units left on the
//     span's nodes after the placement ([BestFit]; more with [Spread]).
//  7. The lowest node indices.
//
// Within the chosen span, each resource picks its units by its own
// preferences (devices under one PCIe switch and, for GPUs, with more
// NVLink links; CPUs as whole free cores); how many units each node of the
// span gives is the split: the first kind demanded (GPUs when there are
// any) from the nodes with the most free first, the others in proportion
// to it.
//
// Production edges: [State.SetDeviceHealth] takes a failed device out of
// service and names the allocations that hold it; [State.ReplaceMachine]
// moves the state to a changed machine, keeping every live allocation
// exactly or changing nothing; [State.Resize] grows or shrinks an
// allocation's CPUs in place under its policy; [State.FitWithout] and
// [State.Clone] are preemption dry-runs; [State.Claim] admits an allocation
// decided elsewhere (the node side of a scheduler's decision).
// The choice is the top-ranked admissible span when a pool of at most 16
// NUMA nodes has at most Options.SearchBudget candidates (else the best of
// the first candidates in node order); on larger pools it is a local
// optimum of a local search, on the same order, from the span the
// admission found.
// Admissibility is exact or refused: the subset search is exhaustive on up
// to 16 NUMA nodes, and beyond that a decision takes at most a fixed number
// of steps of its search over node classes and refuses a Restricted request
// with [ErrSearchLimit] when that bound cuts it; None and BestEffort are
// admitted by the free totals and never refused so (their width_free, and
// so their span's preference, is then the best the bound found). No method holds the state's lock
// for unbounded work; each method's doc comment states its bound.
//
// Everything that enters or leaves a State names NUMA nodes, CPUs and
// devices by ID: [Allocation] (memory per NUMA node ID, [NodeMemory]),
// [Snapshot], [State.Claim], [State.Restore], [State.ReplaceMachine]. A
// NUMA node a machine lacks is refused with a *[NodeError], never replaced
// by another. Dense masks (Allocation.DenseSpan, NodeTypes) mean something
// only on the state's own machine. GPU IDs given as text are canonical
// decimal ([CanonicalDeviceID]); class names are case-sensitive.
//
// Refusals are typed: a *[PlacementError] (read it with errors.As) says
// which rule refused, with every amount in its unit, and whether the
// request can never fit this machine ([ErrNeverFits]) or does not fit now. Fit's common refusals cost what its admissions do and build
// their explanation only when asked for (see [State.Fit]). A nil machine,
// state or request is an error, never a panic.
//
// Every method of State is safe for concurrent use.
//
// The common calls:
//
//	m, _ := topology.Preset("dgx-h100")
//	s, err := allocator.New(m, allocator.Options{})
//	if err != nil { return err }
//	a, err := s.Allocate(&allocator.Request{ID: "pod-1", CPUs: 24, GPUs: 4,
//		Policy: policy.SingleNUMANode})
//	var pe *allocator.PlacementError
//	if errors.As(err, &pe) { fmt.Println(pe.Reason, pe.Never) }
//	_ = s.Release("pod-1")
package allocator
