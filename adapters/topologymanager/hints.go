package topologymanager

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// IDMask is a set of NUMA nodes by node ID, the way the kubelet's Topology
// Manager holds them (its bitmask.BitMask): bit i stands for the NUMA node
// whose ID is i, so IDs 0 to 63 fit. It is not a numa.Mask, whose bit i is
// the machine's i-th node in ascending ID order: on a machine with nodes 0,
// 1, 2 and 33, node 33 is bit 33 of an IDMask and bit 3 of a numa.Mask
// (IDMaskFromDense and IDMask.Dense translate). The zero value is the empty
// set.
type IDMask uint64

// IDMaskOf returns the set of the given node IDs; an ID outside 0-63 is an
// error wrapping ErrHintConfig.
func IDMaskOf(ids ...numa.NodeID) (IDMask, error) {
	var m IDMask
	for _, id := range ids {
		if id < 0 || id > 63 {
			return 0, fmt.Errorf("%w: NUMA node ID %d outside 0-63", ErrHintConfig, id)
		}
		m |= 1 << uint(id)
	}
	return m, nil
}

// MustIDMask is IDMaskOf over plain integers for constants in code and
// tests; it panics on an ID outside 0-63.
func MustIDMask(ids ...int) IDMask {
	var m IDMask
	for _, id := range ids {
		if id < 0 || id > 63 {
			panic(fmt.Sprintf("topologymanager.MustIDMask: NUMA node ID %d outside 0-63", id))
		}
		m |= 1 << uint(id)
	}
	return m
}

// IDMaskFromDense returns the node IDs of a machine's dense mask (bits beyond
// the machine's nodes, and IDs above 63, are left out).
func IDMaskFromDense(m *topology.Machine, dense numa.Mask) IDMask {
	if m == nil {
		return 0
	}
	var r IDMask
	for _, id := range m.IDsOf(dense) {
		if id <= 63 {
			r |= 1 << uint(id)
		}
	}
	return r
}

// Dense returns the machine's dense mask of these node IDs, or an error
// naming an ID the machine does not have.
func (s IDMask) Dense(m *topology.Machine) (numa.Mask, error) {
	return m.MaskOf(s.IDs()...)
}

// Count returns the number of nodes in s.
func (s IDMask) Count() int { return bits.OnesCount64(uint64(s)) }

// IsEmpty reports whether s has no nodes.
func (s IDMask) IsEmpty() bool { return s == 0 }

// Contains reports whether node id is in s.
func (s IDMask) Contains(id numa.NodeID) bool { return id >= 0 && id < 64 && s&(1<<uint(id)) != 0 }

// IDs returns the node IDs of s, ascending. It allocates.
func (s IDMask) IDs() []numa.NodeID {
	ids := make([]numa.NodeID, 0, s.Count())
	for w := uint64(s); w != 0; w &= w - 1 {
		ids = append(ids, numa.NodeID(bits.TrailingZeros64(w)))
	}
	return ids
}

// IsNarrowerThanByValue is the kubelet's bitmask.IsNarrowerThan: s has
// fewer nodes than o, or as many and is the smaller unsigned integer, that
// is, the highest node ID where the two differ is in o ({1,2} is narrower
// than {0,3}). It is a strict order: s.IsNarrowerThanByValue(s) is false.
// The kubelet's comment says the mask "with more lower-numbered bits set"
// wins; its code compares the integers, and so does this method.
//
// The name says how it differs from numa.Mask.IsNarrowerThan (besides that
// one holding dense indices, this one node IDs): at equal count that one
// prefers the mask holding the lowest node where the two differ ({0,3}
// before {1,2}). The two orders agree on two masks of different counts,
// and on two of equal count exactly when the lowest and the highest node
// where they differ lie in different masks.
func (s IDMask) IsNarrowerThanByValue(o IDMask) bool {
	if cs, co := s.Count(), o.Count(); cs != co {
		return cs < co
	}
	return s < o
}

// String returns the IDs in list form, such as "0-2,5"; the empty set is "".
func (s IDMask) String() string { return numa.Mask(s).String() }

// TopologyHint is the kubelet's topologymanager.TopologyHint: the NUMA nodes
// a resource could be allocated from, and whether that is a preferred
// (narrowest) placement.
//
// The kubelet's nil NUMANodeAffinity ("no NUMA preference, any node") is Any:
// when Any is set NUMANodeAffinity is ignored (and is 0 in every hint this
// package returns). An affinity that is empty but not nil is
// NUMANodeAffinity 0 with Any unset; the kubelet treats it as a mask like any
// other (it merges to nothing). The zero value is therefore an empty, not
// preferred affinity, unlike the kubelet's zero TopologyHint: write
// AnyHint(false) for that.
//
// In the maps handed to Merge, a resource's list keeps the kubelet's
// distinction: a nil list means the provider has no preference for the
// resource (treated as one preferred "any" hint), an empty non-nil list means
// it cannot satisfy the request at all (one non-preferred "any" hint), and a
// provider whose whole map is nil or empty has no preference for anything.
type TopologyHint struct {
	// NUMANodeAffinity holds the NUMA nodes by ID (bit i = node ID i).
	NUMANodeAffinity IDMask
	// Any is the kubelet's nil affinity.
	Any bool
	// Preferred marks a placement on the fewest NUMA nodes the provider
	// could use.
	Preferred bool
}

// Hint returns a hint on the given NUMA nodes.
func Hint(affinity IDMask, preferred bool) TopologyHint {
	return TopologyHint{NUMANodeAffinity: affinity, Preferred: preferred}
}

// AnyHint returns a hint without NUMA affinity (the kubelet's nil affinity).
func AnyHint(preferred bool) TopologyHint { return TopologyHint{Any: true, Preferred: preferred} }

// Equal reports whether h and o are the same hint: both "any" or both on the
// same nodes, and equally preferred.
func (h TopologyHint) Equal(o TopologyHint) bool {
	if h.Any || o.Any {
		return h.Any == o.Any && h.Preferred == o.Preferred
	}
	return h.NUMANodeAffinity == o.NUMANodeAffinity && h.Preferred == o.Preferred
}

// String returns the hint as "{0-1 preferred}", "{any not preferred}" or
// "{none not preferred}" (an empty affinity).
func (h TopologyHint) String() string {
	nodes := "any"
	if !h.Any {
		nodes = h.NUMANodeAffinity.String()
		if nodes == "" {
			nodes = "none"
		}
	}
	if h.Preferred {
		return "{" + nodes + " preferred}"
	}
	return "{" + nodes + " not preferred}"
}

// NodeAmount is how much of one resource a NUMA node holds, as a kubelet hint
// provider counts it.
type NodeAmount struct {
	// Node is the NUMA node's ID.
	Node numa.NodeID
	// Total counts every unit on the node: it decides the preferred width.
	// The CPU manager counts all the node's CPUs, reserved ones included;
	// the device manager every registered device, unhealthy ones included.
	Total int
	// Available counts the units a new pod may take: free and allocatable
	// CPUs; healthy devices no pod holds.
	Available int
}

// forEachMask calls f with every non-empty set of the given node IDs
// (ascending) in the order of the kubelet's bitmask.IterateBitMasks: by
// number of nodes, then in lexicographic order of the sorted ID lists. idx
// holds the positions in ids of the set's nodes and must not be kept.
func forEachMask(ids []numa.NodeID, f func(idx []int, mask IDMask)) {
	n := len(ids)
	idx := make([]int, 0, n)
	for k := 1; k <= n; k++ {
		idx = idx[:k]
		for i := range idx {
			idx[i] = i
		}
		for {
			var mask IDMask
			for _, i := range idx {
				mask |= 1 << uint(ids[i])
			}
			f(idx, mask)
			i := k - 1
			for i >= 0 && idx[i] == n-k+i {
				i--
			}
			if i < 0 {
				break
			}
			idx[i]++
			for j := i + 1; j < k; j++ {
				idx[j] = idx[j-1] + 1
			}
		}
	}
}

// sortedAmounts returns the amounts ordered by node ID, optionally without
// the nodes that hold nothing.
func sortedAmounts(nodes []NodeAmount, dropEmpty bool) ([]numa.NodeID, []NodeAmount) {
	s := make([]NodeAmount, 0, len(nodes))
	for _, a := range nodes {
		if !dropEmpty || a.Total > 0 {
			s = append(s, a)
		}
	}
	slices.SortFunc(s, func(a, b NodeAmount) int { return cmp.Compare(a.Node, b.Node) })
	ids := make([]numa.NodeID, len(s))
	for i, a := range s {
		ids[i] = a.Node
	}
	return ids, s
}

// widthHints is the loop the CPU and device managers share: every mask whose
// available units cover the request, preferred when its number of nodes is
// the fewest whose total units could cover it (all nodes when none could).
func widthHints(ids []numa.NodeID, amounts []NodeAmount, request int) []TopologyHint {
	minWidth := len(ids)
	hints := make([]TopologyHint, 0, min(1<<uint(len(ids))-1, 256))
	forEachMask(ids, func(idx []int, mask IDMask) {
		total, avail := 0, 0
		for _, i := range idx {
			total += amounts[i].Total
			avail += amounts[i].Available
		}
		if total >= request && len(idx) < minWidth {
			minWidth = len(idx)
		}
		if avail >= request {
			hints = append(hints, TopologyHint{NUMANodeAffinity: mask})
		}
	})
	for i := range hints {
		hints[i].Preferred = hints[i].NUMANodeAffinity.Count() == minWidth
	}
	return hints
}

// CPUHints returns the hints the kubelet's static CPU manager policy
// generates (generateCPUTopologyHints) for request exclusive CPUs, with no
// CPUs reused from init containers: every set of NUMA nodes with CPUs whose
// available CPUs cover the request, in the kubelet's order (by number of
// nodes, then lexicographically by IDs), preferred when it has as few nodes
// as the narrowest set whose CPUs, all of them, reserved and busy ones
// included, could hold the request. Nodes with no CPU (Total 0) are not NUMA
// nodes of the CPU manager and take no part. The result is empty, not nil,
// when nothing fits (the kubelet's "cannot satisfy"). There are 2^n - 1 sets
// for n nodes, as in the kubelet.
//
// The full-pcpus-only option does not change the kubelet's hints (it refuses
// the pod later, in allocation; Predict models that).
func CPUHints(nodes []NodeAmount, request int) []TopologyHint {
	ids, amounts := sortedAmounts(nodes, true)
	return widthHints(ids, amounts, request)
}

// DeviceHints returns the hints the kubelet's device manager generates for
// request devices of one resource (GetTopologyHints and
// generateDeviceTopologyHints), with no devices reused from init containers.
// nodes lists the NUMA nodes of the machine with their devices;
// unplacedAvailable counts the available devices that report no NUMA node.
// As the kubelet does since v1.37, only the NUMA nodes that host a
// registered device of the resource take part in the sets (earlier kubelets
// iterated every NUMA node of the machine, giving extra sets that include
// device-less nodes).
//
// As in the kubelet: the result is nil (no preference) when no device has a
// NUMA node; empty (cannot satisfy) when fewer devices are available in all
// than requested; otherwise every set of NUMA nodes whose available devices
// cover the request, preferred when it has as few nodes as the narrowest set
// whose registered devices, healthy or not, could. Devices without a NUMA node
// count toward the availability check but in no set, so a request they would
// complete gets an empty list.
func DeviceHints(nodes []NodeAmount, unplacedAvailable, request int) []TopologyHint {
	ids, amounts := sortedAmounts(nodes, true)
	total, avail := 0, unplacedAvailable
	for _, a := range amounts {
		total += a.Total
		avail += a.Available
	}
	if total == 0 {
		return nil
	}
	if avail < request {
		return []TopologyHint{}
	}
	return widthHints(ids, amounts, request)
}

// MemoryNode is one NUMA node of the kubelet's memory manager state (static
// policy, regular memory).
type MemoryNode struct {
	// Node is the NUMA node's ID.
	Node numa.NodeID
	// AllocatableMiB is the node's memory minus the memory reserved on it.
	AllocatableMiB int64
	// FreeMiB is what no container holds.
	FreeMiB int64
	// Group is the kubelet's Cells: the NUMA nodes of the memory
	// allocations that use this node. 0 stands for the node alone (the
	// kubelet's default).
	Group IDMask
	// Assignments counts the memory allocations that use the node.
	Assignments int
}

// MemoryHints returns the "memory" hints of the kubelet's memory manager
// (static policy, calculateHints) for requestMiB of regular memory: every
// set of NUMA nodes (in the kubelet's order) whose allocatable memory covers
// the request, whose free memory covers it, and that respects the groups of
// earlier allocations (a node grouped with others is not offered alone; a
// used node joins a set of several nodes only if the set is exactly its
// group, and never if it was used alone), preferred when it has as few nodes
// as the narrowest set whose allocatable memory covers the request.
//
// The result is nil when no set qualifies: the kubelet's memory manager then
// returns an empty map, which the Topology Manager reads as "no preference",
// and its allocation fails later. Hugepages are not modelled.
func MemoryHints(nodes []MemoryNode, requestMiB int64) []TopologyHint {
	s := slices.Clone(nodes)
	slices.SortFunc(s, func(a, b MemoryNode) int { return cmp.Compare(a.Node, b.Node) })
	ids := make([]numa.NodeID, len(s))
	for i, n := range s {
		ids[i] = n.Node
	}
	minWidth := len(ids)
	var hints []TopologyHint
	forEachMask(ids, func(idx []int, mask IDMask) {
		var alloc, free int64
		for _, i := range idx {
			alloc += s[i].AllocatableMiB
			free += s[i].FreeMiB
		}
		if alloc < requestMiB {
			return
		}
		minWidth = min(minWidth, len(idx))
		group := func(i int) IDMask {
			if s[i].Group == 0 {
				return 1 << uint(s[i].Node)
			}
			return s[i].Group
		}
		if len(idx) == 1 && group(idx[0]).Count() > 1 {
			return
		}
		if len(idx) > 1 {
			for _, i := range idx {
				if s[i].Assignments > 0 && (group(i).Count() == 1 || group(i) != mask) {
					return
				}
			}
		}
		if free < requestMiB {
			return
		}
		hints = append(hints, TopologyHint{NUMANodeAffinity: mask})
	})
	for i := range hints {
		hints[i].Preferred = hints[i].NUMANodeAffinity.Count() == minWidth
	}
	return hints
}

// PredictMaxNodes is the largest machine Predict and ProviderHints accept:
// the kubelet's hint providers list every set of NUMA nodes (2^n - 1 of
// them), which stops being practical beyond it.
const PredictMaxNodes = 16

// DefaultGPUResource is the extended resource name of GPUs when
// PredictOptions.GPUResource is empty.
const DefaultGPUResource = "nvidia.com/gpu"

// PredictOptions describe a node whose kubelet runs its own NUMA policy: the
// Topology Manager's options and the resource managers' settings.
type PredictOptions struct {
	PolicyOptions
	// StaticMemoryManager is --memory-manager-policy=Static: the memory
	// manager gives hints for the request's memory. Otherwise (policy None)
	// it gives none.
	StaticMemoryManager bool
	// FullPCPUsOnly is the static CPU manager's full-pcpus-only option.
	FullPCPUsOnly bool
	// GPUResource names the GPUs' extended resource (default
	// DefaultGPUResource). Other device classes are named by their class.
	GPUResource string
}

// ProviderHints returns the hints the kubelet's hint providers give for the
// request on a machine in the given state (nil: everything free), in the
// kubelet's provider order: the device manager (GPUs under
// opts.GPUResource, other classes under their class name), the static CPU
// manager ("cpu"; no preference when r.CPUs is 0) and the memory manager
// ("memory" under the static policy when r.MemoryMiB > 0, else no
// preference). The request is one container, or a pod under the kubelet's
// pod scope (its effective amounts); r.Policy, r.Exclusive and r.FullPCPUs
// are not read. Errors wrap ErrHintConfig or allocator.ErrInvalidRequest.
//
// The state's live allocations stand for what the kubelet's managers hold:
// CPUs held or reserved are not available, GPUs held or unhealthy are not
// available, memory held is not free, and a live allocation's memory nodes
// form its memory-manager group.
//
// The state is read by more than one call: pass one that no other
// goroutine changes meanwhile (a Clone, or a state under the caller's own
// lock, as the scheduler cache does), or the reads may be of different
// moments and, across an allocator.State.ReplaceMachine, of different
// machines.
func ProviderHints(m *topology.Machine, st *allocator.State, r *allocator.Request, opts PredictOptions) ([]map[string][]TopologyHint, error) {
	v, err := observe("", m, st, r, opts)
	if err != nil {
		return nil, err
	}
	return v.providers(r, opts), nil
}

// Predict says what a kubelet running Topology Manager policy with the
// given options would do with the request on a machine in the given state
// (nil: everything free): the merged hint and whether the pod is admitted.
// It generates the hint providers' hints (ProviderHints) and merges them
// (Merger.Merge). A pod the policy admits is still refused, as the kubelet's
// resource managers refuse it in allocation, when fewer CPUs or devices are
// available than requested, when full-pcpus-only is set and the CPUs are not
// whole free cores (a count not a multiple of the threads per core, or more
// than the free whole cores hold), or when the static memory manager finds no
// set of nodes for the memory. As the kubelet refuses to start its
// Topology Manager, Predict refuses with an error saying why (wrapping
// ErrHintConfig) a max-allowable-numa-nodes below 8 and, under a policy
// other than none, a machine with more NUMA nodes than
// opts.MaxAllowableNUMANodes (default 8), counting every node as the
// kubelet does, CPU-less ones included (a GH200 has 9, a GB200 compute tray
// 34). Machines with more than PredictMaxNodes are refused too, the error
// saying that the kubelet's hint providers would list every subset of
// their nodes. The state is read as by ProviderHints.
func Predict(policy Policy, opts PredictOptions, m *topology.Machine, st *allocator.State, r *allocator.Request) (TopologyHint, bool, error) {
	v, err := observe(policy, m, st, r, opts)
	if err != nil {
		return TopologyHint{}, false, err
	}
	mg, err := NewMerger(policy, v.m.NodeIDs(), v.m.Distances(), opts.PolicyOptions)
	if err != nil {
		return TopologyHint{}, false, err
	}
	providers := v.providers(r, opts)
	h, admit := mg.Merge(providers)
	return h, admit && v.allocatable(r, opts, providers), nil
}

// view is what the kubelet's managers know of a machine in a state.
type view struct {
	m            *topology.Machine
	cpus         []NodeAmount
	freeCPUs     int
	freeCoreCPUs int // CPUs of cores whose every CPU is available
	gpus         []NodeAmount
	gpuUnplaced  int
	devs         map[string][]NodeAmount
	devUnplaced  map[string]int
	mem          []MemoryNode
}

// checkNodeLimit refuses what the kubelet's topologymanager.NewManager
// refuses when it starts (k8s.io/kubernetes v1.37.2): a
// max-allowable-numa-nodes below DefaultMaxAllowableNUMANodes ("the minimum
// value of ... should not be less than 8"), and, under any policy but none,
// a machine of more NUMA nodes than that limit ("unsupported on machines
// with more than 8 NUMA Nodes"). The kubelet counts every node cadvisor
// lists, one per sys/devices/system/node/nodeN directory, CPU-less ones
// included (GPU memory, placeholders, plain memory): a GH200 has 9, a GB200
// compute tray 34, though only 1 or 2 have CPUs. policy "" (ProviderHints)
// is checked as a policy other than none.
func checkNodeLimit(m *topology.Machine, policy Policy, opts PolicyOptions) error {
	limit := opts.MaxAllowableNUMANodes
	if limit == 0 {
		limit = DefaultMaxAllowableNUMANodes
	}
	if limit < DefaultMaxAllowableNUMANodes {
		return fmt.Errorf("%w: max-allowable-numa-nodes %d: the minimum value of %q should not be less than %d",
			ErrHintConfig, limit, "max-allowable-numa-nodes", DefaultMaxAllowableNUMANodes)
	}
	if policy != PolicyNone && m.NumNodes() > limit {
		return fmt.Errorf("%w: the kubelet's Topology Manager does not start: unsupported on machines with more than %d NUMA Nodes "+
			"(%s; the kubelet counts every NUMA node, CPU-less ones included; raise max-allowable-numa-nodes to at least %d)",
			ErrHintConfig, limit, countNodes(m), m.NumNodes())
	}
	return nil
}

// countNodes describes m's NUMA nodes for an error: "34 NUMA nodes (2 with
// CPUs, 4 of GPU memory, 28 placeholders)", the kinds present only.
func countNodes(m *topology.Machine) string {
	s := fmt.Sprintf("%d NUMA nodes", m.NumNodes())
	var parts []string
	for _, k := range []struct {
		kind topology.NodeKind
		what string
	}{{topology.NodeCPU, "with CPUs"}, {topology.NodeMemory, "of plain memory"},
		{topology.NodeGPUMemory, "of GPU memory"}, {topology.NodePlaceholder, "placeholders"}} {
		if c := m.NodesOfKind(k.kind).Count(); c > 0 && c < m.NumNodes() {
			parts = append(parts, fmt.Sprintf("%d %s", c, k.what))
		}
	}
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

func observe(policy Policy, m *topology.Machine, st *allocator.State, r *allocator.Request, opts PredictOptions) (*view, error) {
	if m == nil {
		if st == nil {
			return nil, fmt.Errorf("%w: no machine", ErrHintConfig)
		}
		m = st.Machine()
	} else if st != nil && st.Machine() != m {
		return nil, fmt.Errorf("%w: the state is of another machine than %q", ErrHintConfig, m.Name())
	}
	if r == nil || r.CPUs < 0 || r.GPUs < 0 || r.MemoryMiB < 0 {
		return nil, fmt.Errorf("%w: negative or missing amounts", allocator.ErrInvalidRequest)
	}
	for class, n := range r.Devices {
		if n < 0 {
			return nil, fmt.Errorf("%w: devices[%s] is negative", allocator.ErrInvalidRequest, class)
		}
	}
	if err := checkNodeLimit(m, policy, opts.PolicyOptions); err != nil {
		return nil, err
	}
	n := m.NumNodes()
	if n > PredictMaxNodes {
		return nil, fmt.Errorf("%w: %s: the kubelet's hint providers list every subset of them (2^%d - 1), "+
			"which does not finish in practice (kubernetes/kubernetes#135541); Predict emulates machines of at most %d nodes",
			ErrHintConfig, countNodes(m), n, PredictMaxNodes)
	}
	ids := m.NodeIDs()
	for _, id := range ids {
		if id > 63 {
			return nil, fmt.Errorf("%w: NUMA node ID %d outside 0-63", ErrHintConfig, id)
		}
	}

	var snap allocator.Snapshot
	if st != nil {
		snap = st.Snapshot()
	}
	held := m.ReservedCPUs()
	heldDev := map[string]map[string]bool{}
	for i := range snap.Allocations {
		a := &snap.Allocations[i]
		held.UnionWith(a.CPUs)
		mark := func(class, id string) {
			if heldDev[class] == nil {
				heldDev[class] = map[string]bool{}
			}
			heldDev[class][id] = true
		}
		for _, g := range a.GPUs {
			mark(allocator.GPUClass, strconv.Itoa(g))
		}
		for class, list := range a.Devices {
			for _, id := range list {
				mark(class, id)
			}
		}
	}
	unhealthy := map[string]map[string]bool{}
	for class, list := range snap.Unhealthy {
		unhealthy[class] = map[string]bool{}
		for _, id := range list {
			unhealthy[class][id] = true
		}
	}
	free := func(class, id string) bool { return !heldDev[class][id] && !unhealthy[class][id] }

	v := &view{m: m, devs: map[string][]NodeAmount{}, devUnplaced: map[string]int{}, mem: memoryNodes(m, &snap)}
	for i, id := range ids {
		cpus := m.NodeCPUs(i)
		avail := cpus.DifferenceCount(held)
		v.cpus = append(v.cpus, NodeAmount{Node: id, Total: cpus.Size(), Available: avail})
		v.freeCPUs += avail
		v.gpus = append(v.gpus, NodeAmount{Node: id})
	}
	for c := 0; c < m.NumCores(); c++ {
		if cpus := m.CoreCPUs(c); !cpus.Intersects(held) {
			v.freeCoreCPUs += cpus.Size()
		}
	}
	for _, g := range m.GPUs() {
		ok := free(allocator.GPUClass, strconv.Itoa(g.ID))
		i, placed := m.NodeIndex(g.NUMANode)
		switch {
		case !placed && ok:
			v.gpuUnplaced++
		case placed:
			v.gpus[i].Total++
			if ok {
				v.gpus[i].Available++
			}
		}
	}
	for _, d := range m.Devices() {
		if r.Devices[d.Class] == 0 {
			continue
		}
		if v.devs[d.Class] == nil {
			v.devs[d.Class] = make([]NodeAmount, n)
			for i, id := range ids {
				v.devs[d.Class][i].Node = id
			}
		}
		ok := free(d.Class, d.ID)
		i, placed := m.NodeIndex(d.NUMANode)
		switch {
		case !placed && ok:
			v.devUnplaced[d.Class]++
		case placed:
			v.devs[d.Class][i].Total++
			if ok {
				v.devs[d.Class][i].Available++
			}
		}
	}
	return v, nil
}

// memoryNodes is the memory manager's state of machine m holding the
// snapshot's allocations, in ascending node ID: each node's memory, what is
// free of it, and, for the nodes an allocation's memory uses (its Memory
// entries, 0 MiB ones included: the memory manager records every node of
// its hint), the allocation's nodes as the group and one more assignment.
func memoryNodes(m *topology.Machine, snap *allocator.Snapshot) []MemoryNode {
	ids := m.NodeIDs()
	out := make([]MemoryNode, len(ids))
	for i, id := range ids {
		mib := m.Node(i).MemoryMiB
		out[i] = MemoryNode{Node: id, AllocatableMiB: mib, FreeMiB: mib}
	}
	for i := range snap.Allocations {
		a := &snap.Allocations[i]
		var group IDMask
		for _, nm := range a.Memory {
			if j, ok := m.NodeIndex(nm.Node); ok {
				out[j].FreeMiB -= nm.MiB
				group |= 1 << uint(ids[j])
			}
		}
		for _, nm := range a.Memory {
			if j, ok := m.NodeIndex(nm.Node); ok {
				out[j].Assignments++
				out[j].Group = group
			}
		}
	}
	return out
}

func (v *view) providers(r *allocator.Request, opts PredictOptions) []map[string][]TopologyHint {
	gpuName := opts.GPUResource
	if gpuName == "" {
		gpuName = DefaultGPUResource
	}
	devices := map[string][]TopologyHint{}
	if r.GPUs > 0 {
		devices[gpuName] = DeviceHints(v.gpus, v.gpuUnplaced, r.GPUs)
	}
	for class, n := range r.Devices {
		if n <= 0 {
			continue
		}
		nodes := v.devs[class]
		if nodes == nil {
			// A class the machine does not have: the device manager does
			// not know the resource (the scheduler would not send the pod).
			nodes = make([]NodeAmount, len(v.cpus))
			for i := range nodes {
				nodes[i].Node = v.cpus[i].Node
			}
		}
		devices[class] = DeviceHints(nodes, v.devUnplaced[class], n)
	}
	var cpu map[string][]TopologyHint
	if r.CPUs > 0 {
		cpu = map[string][]TopologyHint{"cpu": CPUHints(v.cpus, r.CPUs)}
	}
	var memory map[string][]TopologyHint
	if opts.StaticMemoryManager && r.MemoryMiB > 0 {
		memory = map[string][]TopologyHint{}
		if hs := MemoryHints(v.mem, r.MemoryMiB); hs != nil {
			memory["memory"] = hs
		}
	}
	return []map[string][]TopologyHint{devices, cpu, memory}
}

// allocatable reports whether the kubelet's resource managers can allocate
// the request once admitted (providers are v.providers' result).
func (v *view) allocatable(r *allocator.Request, opts PredictOptions, providers []map[string][]TopologyHint) bool {
	if r.CPUs > v.freeCPUs {
		return false
	}
	if opts.FullPCPUsOnly && r.CPUs > 0 {
		if tpc := v.m.ThreadsPerCore(); r.CPUs%tpc != 0 || r.CPUs > v.freeCoreCPUs {
			return false
		}
	}
	if r.GPUs > 0 && r.GPUs > sumAvailable(v.gpus)+v.gpuUnplaced {
		return false
	}
	for class, n := range r.Devices {
		if n > 0 && n > sumAvailable(v.devs[class])+v.devUnplaced[class] {
			return false
		}
	}
	if mem := providers[2]; mem != nil && len(mem) == 0 {
		return false
	}
	return true
}

func sumAvailable(a []NodeAmount) int {
	s := 0
	for _, x := range a {
		s += x.Available
	}
	return s
}
