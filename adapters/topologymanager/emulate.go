package topologymanager

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// KubeletAllocation returns what the kubelet's managers would take for r
// on machine m in state st once the Topology Manager has admitted it with
// hint, as an allocation with the given ID for st.Claim: the device
// manager's GPUs on the hint's NUMA nodes first (ascending ID), then on
// the others; the static CPU manager's exclusive CPUs on the hint's nodes
// first (whole free cores, then single threads, ascending), then on the
// others. A hint without affinity means every node. This is an emulation
// of the managers' choices (their own algorithms differ in detail, for
// example the CPU manager's preference for whole sockets), good for
// predicting where a pod lands, not a copy of them. With r.MemoryMiB > 0
// (a Guaranteed pod on a node whose kubelet runs the static memory manager)
// it takes the memory as that manager does: on the hint's NUMA nodes (with
// a hint without affinity, the best of the memory hints), extended to the
// best memory hint containing them when their free memory does not cover
// the request, refused when a node of a multi-node hint is already used
// alone or in another group; filled in ascending node ID, each node giving
// what it has free; and it lists every node of the hint in the
// allocation's memory, 0 MiB where none was taken, because the manager
// groups them all (a node grouped with others is then not offered alone).
// The allocation's policy is None: the kubelet does not hold to a span. An
// error says what the state cannot give.
//
// The state is read by more than one call: pass one that no other
// goroutine changes meanwhile (a Clone, or a state under the caller's own
// lock, as the scheduler cache does), or the reads may be of different
// moments and, across an allocator.State.ReplaceMachine, of different
// machines.
func KubeletAllocation(m *topology.Machine, st *allocator.State, id string, r *allocator.Request, hint TopologyHint) (allocator.Allocation, error) {
	if m == nil || st == nil || r == nil {
		return allocator.Allocation{}, fmt.Errorf("%w: KubeletAllocation needs a machine, a state and a request", ErrHintConfig)
	}
	all := m.AllNodes()
	nodes := all
	if !hint.Any {
		d, err := hint.NUMANodeAffinity.Dense(m)
		if err != nil {
			return allocator.Allocation{}, err
		}
		nodes = d
	}
	// Free GPUs: the machine's, less the held and the unhealthy ones.
	snap := st.Snapshot()
	taken := map[int]bool{}
	for _, a := range snap.Allocations {
		for _, g := range a.GPUs {
			taken[g] = true
		}
	}
	for _, id := range snap.Unhealthy[allocator.GPUClass] {
		if g, err := strconv.Atoi(id); err == nil {
			taken[g] = true
		}
	}
	var gpus []int
	for _, pass := range []numa.Mask{nodes, all &^ nodes} {
		for _, g := range m.GPUs() {
			if len(gpus) == r.GPUs {
				break
			}
			i, ok := m.NodeIndex(g.NUMANode)
			if ok && pass.Contains(i) && !taken[g.ID] {
				gpus = append(gpus, g.ID)
				taken[g.ID] = true
			}
		}
	}
	if len(gpus) < r.GPUs {
		return allocator.Allocation{}, fmt.Errorf("%w: %d GPUs wanted, %d free on NUMA nodes", allocator.ErrInsufficient, r.GPUs, len(gpus))
	}
	slices.Sort(gpus)
	free := st.FreeCPUs()
	var cpus numa.CPUSet
	want := r.CPUs
	for _, pass := range []numa.Mask{nodes, all &^ nodes} {
		// Whole free cores first, then single threads.
		for _, whole := range []bool{true, false} {
			for _, c := range m.Cores() {
				if want == 0 || !pass.Contains(c.NodeIndex) {
					continue
				}
				avail := c.CPUs.Intersection(free)
				avail.RemoveAll(cpus)
				if avail.IsEmpty() || (whole && (!avail.Equal(c.CPUs) || avail.Size() > want)) {
					continue
				}
				for cpu := range avail.All() {
					if want == 0 {
						break
					}
					cpus.Add(cpu)
					want--
				}
			}
		}
	}
	if want > 0 {
		return allocator.Allocation{}, fmt.Errorf("%w: %d CPUs wanted, %d free", allocator.ErrInsufficient, r.CPUs, r.CPUs-want)
	}
	a := allocator.Allocation{ID: id, Policy: policy.None, CPUs: cpus, GPUs: gpus}
	if r.MemoryMiB > 0 {
		mem, err := kubeletMemory(memoryNodes(m, &snap), r.MemoryMiB, hint)
		if err != nil {
			return allocator.Allocation{}, err
		}
		a.Memory = mem
	}
	return a, nil
}

// kubeletMemory is the static memory manager's allocation of requestMiB
// with the merged hint, on a machine whose memory state is nodes (ascending
// ID, as memoryNodes gives it): see KubeletAllocation.
func kubeletMemory(nodes []MemoryNode, requestMiB int64, hint TopologyHint) ([]allocator.NodeMemory, error) {
	hints := MemoryHints(nodes, requestMiB)
	best := func(keep func(IDMask) bool) (IDMask, bool) {
		var b TopologyHint
		found := false
		for _, h := range hints {
			if !keep(h.NUMANodeAffinity) {
				continue
			}
			if !found || (h.Preferred && !b.Preferred) ||
				(h.Preferred == b.Preferred && h.NUMANodeAffinity.IsNarrowerThanByValue(b.NUMANodeAffinity)) {
				b, found = h, true
			}
		}
		return b.NUMANodeAffinity, found
	}
	byID := make(map[numa.NodeID]int, len(nodes))
	for i, n := range nodes {
		byID[n.Node] = i
	}
	free := func(mask IDMask) int64 {
		var f int64
		for _, id := range mask.IDs() {
			if i, ok := byID[id]; ok {
				f += nodes[i].FreeMiB
			}
		}
		return f
	}
	mask := hint.NUMANodeAffinity
	if hint.Any || mask.IsEmpty() {
		b, ok := best(func(IDMask) bool { return true })
		if !ok {
			return nil, fmt.Errorf("%w: no set of NUMA nodes has %d MiB of memory free for the memory manager", allocator.ErrInsufficient, requestMiB)
		}
		mask = b
	}
	if free(mask) < requestMiB {
		b, ok := best(func(h IDMask) bool { return h&mask == mask })
		if !ok {
			return nil, fmt.Errorf("%w: NUMA nodes %s have less than %d MiB of memory free and no memory hint extends them",
				allocator.ErrInsufficient, mask, requestMiB)
		}
		mask = b
	}
	ids := mask.IDs()
	for _, id := range ids {
		if _, ok := byID[id]; !ok {
			return nil, fmt.Errorf("%w: hint names NUMA node %d, which the machine does not have", ErrHintConfig, id)
		}
	}
	if len(ids) > 1 {
		for _, id := range ids {
			n := nodes[byID[id]]
			group := n.Group
			if group == 0 {
				group = 1 << uint(id)
			}
			if n.Assignments > 0 && (group.Count() == 1 || group != mask) {
				return nil, fmt.Errorf("%w: NUMA node %d holds memory of another group of nodes than %s (the memory manager's rule)",
					allocator.ErrInsufficient, id, mask)
			}
		}
	}
	left := requestMiB
	out := make([]allocator.NodeMemory, 0, len(ids))
	for _, id := range ids {
		take := min(max(nodes[byID[id]].FreeMiB, 0), left)
		left -= take
		out = append(out, allocator.NodeMemory{Node: id, MiB: take})
	}
	return out, nil
}
