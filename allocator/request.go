package allocator

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// Request asks for resources on one machine under a policy.
type Request struct {
	// ID identifies the allocation; it must be unique among live ones.
	// Fit and Score accept an empty ID.
	ID string
	// CPUs is the number of exclusive logical CPUs.
	CPUs int
	// GPUs is the number of whole GPUs.
	GPUs int
	// MemoryMiB is the memory in MiB, counted per NUMA node.
	MemoryMiB int64
	// Devices asks for devices of other classes (such as "rdma"), by class.
	Devices map[string]int
	// Amounts asks for units of the resource kinds of the caller's own
	// (Options.Resources, Options.NewResources), by kind, such as
	// {"hugepages-1Gi": 4}: the engine places them jointly with the rest.
	// The built-in kinds are asked for by their fields (CPUs, GPUs,
	// MemoryMiB, Devices); naming one here, or a kind the state does not
	// have, is an invalid request.
	Amounts map[string]int64
	// Policy is the placement policy (the zero value is None).
	Policy policy.Policy
	// Exclusive is the singleNUMANodeExclusive rule (the zero value is
	// Required).
	Exclusive policy.Exclusivity
	// FullPCPUs hands out whole physical cores only: CPUs must be a multiple
	// of the machine's threads per core.
	FullPCPUs bool
}

// String returns a short description such as
// `"a" 24 CPUs 4 GPUs SingleNUMANode/Required`.
func (r *Request) String() string {
	if r == nil {
		return "<nil request>"
	}
	s := fmt.Sprintf("%s %d CPUs %d GPUs", quote.Short(r.ID), r.CPUs, r.GPUs)
	if r.MemoryMiB > 0 {
		s += fmt.Sprintf(" %d MiB", r.MemoryMiB)
	}
	for _, c := range slices.Sorted(maps.Keys(r.Devices)) {
		s += fmt.Sprintf(" %d %s", r.Devices[c], quote.Bare(c))
	}
	for _, k := range slices.Sorted(maps.Keys(r.Amounts)) {
		s += fmt.Sprintf(" %d %s", r.Amounts[k], k)
	}
	if r.FullPCPUs {
		s += " fullPCPUs"
	}
	return s + " " + r.Policy.String() + "/" + r.Exclusive.String()
}

// Amount returns r.Amounts[kind]: what a resource of the caller's own
// reads as its [Resource.Demand].
func (r *Request) Amount(kind string) int64 { return r.Amounts[kind] }

func (r *Request) validate(tpc int) error {
	switch {
	case r.CPUs < 0:
		return invalidRequest(r, "cpus", "cannot be negative (%d CPUs)", r.CPUs)
	case r.GPUs < 0:
		return invalidRequest(r, "gpus", "cannot be negative (%d GPUs)", r.GPUs)
	case r.MemoryMiB < 0:
		return invalidRequest(r, "memoryMiB", "cannot be negative (%d MiB)", r.MemoryMiB)
	case !r.Policy.Valid():
		return invalidRequest(r, "policy", "%d is not a policy", r.Policy)
	case !r.Exclusive.Valid():
		return invalidRequest(r, "exclusive", "%d is not an exclusivity value", r.Exclusive)
	}
	any := r.CPUs > 0 || r.GPUs > 0 || r.MemoryMiB > 0
	if len(r.Devices) > 0 { // ranging over a nil map is not free
		for c, n := range r.Devices {
			if strings.EqualFold(c, GPUClass) {
				return invalidRequest(r, "devices["+quote.Bare(c)+"]", "GPUs are asked for with the GPUs field")
			}
			if n < 0 {
				return invalidRequest(r, "devices["+quote.Bare(c)+"]", "cannot be negative (%d %s devices)", n, quote.Bare(c))
			}
			any = any || n > 0
		}
	}
	if len(r.Amounts) > 0 {
		for kind, n := range r.Amounts {
			if f, ok := builtinField(kind); ok {
				return invalidRequest(r, "amounts["+kind+"]", "%s is a built-in kind, asked for with the %s field", kind, f)
			}
			if n < 0 {
				return invalidRequest(r, "amounts["+kind+"]", "cannot be negative (%d units of %s)", n, kind)
			}
			any = any || n > 0
		}
	}
	if !any {
		return invalidRequest(r, "", "every amount is zero")
	}
	if r.FullPCPUs && r.CPUs%tpc != 0 {
		return invalidRequest(r, "cpus", "fullPCPUs needs a multiple of the machine's %d threads per core, got %s", tpc, cpuCount(int64(r.CPUs)))
	}
	return nil
}

// NodeMemory is an amount of memory on one NUMA node.
type NodeMemory struct {
	// Node is the NUMA node's ID (as in the machine's topology, never a
	// dense index).
	Node numa.NodeID
	// MiB is the amount.
	MiB int64
}

// NodeUnits is an amount of a resource kind of the caller's own on one
// NUMA node.
type NodeUnits struct {
	// Node is the NUMA node's ID (never a dense index).
	Node numa.NodeID
	// Units is the amount, in the resource's units.
	Units int64
}

// Allocation is what a request received. The CPU set and slices share
// storage with the allocator's state (the CPU words and GPU IDs of several
// allocations may lie in one chunk of memory, each slice's capacity its
// length): treat an Allocation as read-only (use [Allocation.Clone] for a
// copy to modify).
type Allocation struct {
	// ID is the request's ID.
	ID string
	// Policy is the request's placement policy.
	Policy policy.Policy
	// Exclusive is the request's singleNUMANodeExclusive rule.
	Exclusive policy.Exclusivity
	// FullPCPUs is the request's.
	FullPCPUs bool
	// DenseSpan is the set of NUMA nodes that host any of the allocation's
	// CPUs, GPUs, devices or memory, as a mask of dense indices of the
	// machine of the state that made it: it means nothing on another
	// machine. [Allocation.NUMANodes] gives the same nodes by ID. Claim,
	// Restore and ReplaceMachine ignore it and recompute it from what the
	// allocation holds.
	DenseSpan numa.Mask
	// CPUs are the exclusive CPUs.
	CPUs numa.CPUSet
	// GPUs are the GPU IDs, ascending.
	GPUs []int
	// Devices are the IDs of the devices of other classes, by class.
	Devices map[string][]string
	// Memory is the memory by NUMA node ID, ascending ID. Allocate leaves
	// out the nodes it takes none from; a claimed allocation keeps the
	// 0 MiB entries it names (they count in no span).
	Memory []NodeMemory
	// Amounts are the holdings of the resource kinds of the caller's own
	// (Options.Resources, Options.NewResources), by kind: the units each
	// NUMA node ID gives, ascending ID. Each such resource writes its entry
	// in Take and reads it in Give, Claim and Nodes; Snapshot, Restore,
	// Claim and Clone carry it. A kind whose units have identities of
	// their own (named devices) is recorded here by count per node only.
	Amounts map[string][]NodeUnits

	machine *topology.Machine
}

// NUMANodes returns the IDs of the span's nodes, ascending (nil for an
// allocation that no state made or claimed).
func (a *Allocation) NUMANodes() []numa.NodeID {
	if a == nil {
		return nil
	}
	if a.machine == nil {
		return nil
	}
	return a.machine.IDsOf(a.DenseSpan)
}

// MemoryMiB returns the total memory of the allocation.
func (a *Allocation) MemoryMiB() int64 {
	if a == nil {
		return 0
	}
	var t int64
	for _, m := range a.Memory {
		t += m.MiB
	}
	return t
}

// Clone returns a deep copy that shares no storage with the state.
func (a Allocation) Clone() Allocation {
	a.CPUs = a.CPUs.Clone()
	a.GPUs = slices.Clone(a.GPUs)
	a.Memory = slices.Clone(a.Memory)
	if a.Amounts != nil {
		h := make(map[string][]NodeUnits, len(a.Amounts))
		for k, units := range a.Amounts {
			h[k] = slices.Clone(units)
		}
		a.Amounts = h
	}
	if a.Devices != nil {
		d := make(map[string][]string, len(a.Devices))
		for c, ids := range a.Devices {
			d[c] = slices.Clone(ids)
		}
		a.Devices = d
	}
	return a
}

// Request returns the request this allocation satisfies (amounts taken from
// what it holds).
func (a *Allocation) Request() Request {
	if a == nil {
		return Request{}
	}
	r := Request{ID: a.ID, CPUs: a.CPUs.Size(), GPUs: len(a.GPUs), MemoryMiB: a.MemoryMiB(),
		Policy: a.Policy, Exclusive: a.Exclusive, FullPCPUs: a.FullPCPUs}
	if len(a.Devices) > 0 {
		r.Devices = make(map[string]int, len(a.Devices))
		for c, ids := range a.Devices {
			r.Devices[c] = len(ids)
		}
	}
	if len(a.Amounts) > 0 {
		r.Amounts = make(map[string]int64, len(a.Amounts))
		for k := range a.Amounts {
			r.Amounts[k] = a.Units(k)
		}
	}
	return r
}

// Units returns the total units of kind (a kind of the caller's own) the
// allocation holds.
func (a *Allocation) Units(kind string) int64 {
	var t int64
	for _, u := range a.Amounts[kind] {
		t += u.Units
	}
	return t
}

// String describes the allocation by IDs, such as `"a" cpus 0-3 gpus [0]
// nodes [0]`, followed by the devices of other classes, the kinds of the
// caller's own (`hugepages-1Gi 2 on node 0`) and the memory per NUMA node
// ID (`memory 1024 MiB on node 2`). The nodes are those of its
// span; an allocation that no state made or claimed has none.
func (a Allocation) String() string {
	s := fmt.Sprintf("%s cpus %s gpus %v nodes %v", quote.Short(a.ID), a.CPUs, a.GPUs, a.NUMANodes())
	if len(a.Devices) > 0 {
		keys := make([]string, 0, len(a.Devices))
		for c := range a.Devices {
			keys = append(keys, c)
		}
		sort.Strings(keys)
		for _, c := range keys {
			s += fmt.Sprintf(" %s %v", quote.Bare(c), a.Devices[c])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(a.Amounts)) {
		parts := make([]string, len(a.Amounts[k]))
		for i, u := range a.Amounts[k] {
			parts[i] = fmt.Sprintf("%d on node %d", u.Units, u.Node)
		}
		s += " " + k + " " + strings.Join(parts, ", ")
	}
	if len(a.Memory) > 0 {
		parts := make([]string, len(a.Memory))
		for i, x := range a.Memory {
			parts[i] = fmt.Sprintf("%d MiB on node %d", x.MiB, x.Node)
		}
		s += " memory " + strings.Join(parts, ", ")
	}
	return s
}
