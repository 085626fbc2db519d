package allocator

import (
	"github.com/numaplace/numaplace/numa"
)

// Resource is one kind of resource the allocator composes: CPUs, devices of
// a class (GPUs, RDMA NICs, ...), memory, or a kind of the caller's own
// (Options.Resources, Options.NewResources). The engine decides the span
// and how many units each NUMA node of the span gives; the resource
// decides which units, by its own preferences. A kind of the caller's own
// reads its demand from [Request.Amount] and records what it holds in
// [Allocation].Amounts (units per NUMA node ID), which Snapshot, Restore
// and Claim carry; ExampleOptions_hugepages is a complete one.
//
// Amounts are in the resource's units, which may depend on the request
// (whole cores for a fullPCPUs request). Node arguments are dense node
// indices. The engine calls the read-only methods (Kind, Demand, Capacity,
// Free, Unplaced, Describe, Nodes, and Penalty when implemented) under a
// read lock, possibly from several goroutines at once; they must not
// mutate. Take, Give, Claim and the methods of optional interfaces that
// change state are called under the write lock.
type Resource interface {
	// Kind names the resource, such as "cpu", "gpu", "memory" or "rdma".
	Kind() string
	// Demand returns how many units r asks for (0: none).
	Demand(r *Request) int64
	// Capacity returns the allocatable units on the node usable by r when
	// nothing is allocated (health counts: an unhealthy device is not
	// capacity).
	Capacity(r *Request, node int) int64
	// Free returns the units on the node usable by r now.
	Free(r *Request, node int) int64
	// Unplaced returns the free units that belong to no known NUMA node;
	// only None requests receive them.
	Unplaced(r *Request) int64
	// Take takes amounts[i] units on each node i and unplaced units from
	// the unplaced pool, by the resource's preferences, and records them in
	// a. The engine guarantees that the amounts are free.
	Take(r *Request, amounts []int64, unplaced int64, a *Allocation)
	// Give returns what a holds of this resource. After a successful Claim
	// of a, Give(a) must restore exactly the state before it: a claim whose
	// later resource refuses undoes the earlier ones so.
	Give(a *Allocation)
	// Claim takes exactly what a holds of this resource, or returns an error
	// wrapping [ErrConflict] naming what is unknown or not free; on error
	// nothing changes.
	Claim(a *Allocation) error
	// Nodes returns the NUMA nodes that host what a holds of this resource.
	Nodes(a *Allocation) numa.Mask
	// Describe writes an amount in words, such as "4 GPUs" or "8 whole cores".
	Describe(r *Request, units int64) string
	// Clone returns an independent copy sharing no mutable state.
	Clone() Resource
}

// Penalizer is an optional ability of a [Resource]: how far a split of
// amounts over the nodes of a span is from the resource's own preference
// (GPUs under one PCIe switch, whole cores). Lower is better; the engine
// ranks candidate spans by it where the preference order puts it (the
// fourth criterion of the order the package doc states).
type Penalizer interface {
	// Penalty returns how far taking amounts[i] units on each node i of
	// span for r is from the resource's preference: 0 when it matches,
	// more the worse. amounts has one entry per node of the machine; the
	// entries of nodes outside span are not to be read. It must not
	// mutate.
	Penalty(r *Request, span numa.Mask, amounts []int64) int64
}

// BulkReader is an optional ability of a [Resource] that the engine uses on
// its hot path instead of calling Free and Capacity once per node: the
// values of every node at once, as a view of the resource's own counters.
// The engine reads a view only while it holds the state's lock and never
// writes it; a searcher keeps the slice header until its next decision
// overwrites it (keeping the counters alive, a few words per node), never
// reading it after the decision.
type BulkReader interface {
	// FreeView returns Free(r, i) for every node i: one entry per node of
	// the machine.
	FreeView(r *Request) []int64
	// CapacityView returns Capacity(r, i) for every node i: one entry per
	// node of the machine.
	CapacityView(r *Request) []int64
}

// Returner is an optional ability of a [Resource] that makes
// [State.FitWithout] cheap: the free amounts as if the given live
// allocations had given back what they hold, without changing anything.
// For resources without it, FitWithout works on a copy of the state.
type Returner interface {
	// FreeWithout sets dst[i] to the units on node i usable by r as if the
	// live allocations victims had given back what they hold of this
	// resource; dst has one entry per node of the machine. It must not
	// mutate.
	FreeWithout(r *Request, victims []*Allocation, dst []int64)
	// UnplacedWithout returns the free units that belong to no known NUMA
	// node as if victims had given back what they hold (see
	// [Resource.Unplaced]). It must not mutate.
	UnplacedWithout(r *Request, victims []*Allocation) int64
}
