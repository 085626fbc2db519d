package kubelet

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
// predicting where a pod lands, not a copy of them. The allocation's
// policy is None: the kubelet does not hold to a span. An error says what
// the state cannot give.
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
				if want == 0 || !pass.Contains(c.Node) {
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
	return allocator.Allocation{ID: id, Policy: policy.None, CPUs: cpus, GPUs: gpus}, nil
}
