package sim

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// Presets are the machines of the cluster: node i is presets[i%2].
var presets = [...]string{"dgx-h100", "dgx-a100"}

// maxHintNodes is the largest machine the simulation takes: the kubelet
// baselines enumerate every set of NUMA nodes, as the kubelet does.
const maxHintNodes = 8

// machineInfo is what the simulation reads of one machine, computed once
// per machine and shared by its nodes.
type machineInfo struct {
	m        *topology.Machine
	nodes    int
	cpuNode  []int8 // dense node by CPU ID, -1 for no CPU or a reserved one
	gpuNode  []int8 // dense node by GPU ID, -1 for no GPU or an unknown node
	gpuIDs   []int  // the GPU IDs, ascending
	gpuAll   uint64 // the GPU IDs as a mask
	nodeCPUs []int  // allocatable CPUs by node
	nodeGPUs []int  // GPUs by node
	// cores lists each node's cores (allocatable CPUs only), ascending.
	cores     [][][]int
	cpus      int // allocatable CPUs
	gpus      int // GPUs
	widthCaps map[[2]int]int
}

func newMachineInfo(m *topology.Machine) (*machineInfo, error) {
	n := m.NumNodes()
	if n > maxHintNodes {
		return nil, fmt.Errorf("%w: machine %s has %d NUMA nodes (at most %d)", ErrConfig, m.Name(), n, maxHintNodes)
	}
	mi := &machineInfo{m: m, nodes: n, nodeCPUs: make([]int, n), nodeGPUs: make([]int, n),
		cores: make([][][]int, n), widthCaps: map[[2]int]int{}}
	reserved := m.ReservedCPUs()
	all := m.CPUs()
	mi.cpuNode = make([]int8, all.Max()+1)
	for i := range mi.cpuNode {
		mi.cpuNode[i] = -1
	}
	for _, c := range m.Cores() {
		var cpus []int
		for cpu := range c.CPUs.All() {
			if reserved.Contains(cpu) {
				continue
			}
			cpus = append(cpus, cpu)
			mi.cpuNode[cpu] = int8(c.NodeIndex)
		}
		if len(cpus) > 0 {
			mi.cores[c.NodeIndex] = append(mi.cores[c.NodeIndex], cpus)
			mi.nodeCPUs[c.NodeIndex] += len(cpus)
			mi.cpus += len(cpus)
		}
	}
	for _, g := range m.GPUs() {
		if g.ID < 0 || g.ID >= 64 {
			return nil, fmt.Errorf("%w: machine %s has GPU ID %d (want 0-63)", ErrConfig, m.Name(), g.ID)
		}
		for len(mi.gpuNode) <= g.ID {
			mi.gpuNode = append(mi.gpuNode, -1)
		}
		mi.gpuIDs = append(mi.gpuIDs, g.ID)
		mi.gpuAll |= 1 << uint(g.ID)
		mi.gpus++
		if i, ok := m.NodeIndex(g.NUMANode); ok {
			mi.gpuNode[g.ID] = int8(i)
			mi.nodeGPUs[i]++
		}
	}
	slices.Sort(mi.gpuIDs)
	return mi, nil
}

// gpuMask returns the set of GPU IDs as a bit mask.
func gpuMask(ids []int) uint64 {
	var w uint64
	for _, id := range ids {
		w |= 1 << uint(id)
	}
	return w
}

// widthCap is the request's width_cap on the machine (docs/design.md): if some
// NUMA set has the capacity for the request, the fewest NUMA nodes inside
// one set whose capacity covers it; otherwise the fewest anywhere; 0 when
// the machine cannot hold it at all.
func (mi *machineInfo) widthCap(cpus, gpus int) int {
	key := [2]int{cpus, gpus}
	if w, ok := mi.widthCaps[key]; ok {
		return w
	}
	inSet, anywhere := 0, 0
	for mask := numa.Mask(1); mask < numa.Mask(1)<<mi.nodes; mask++ {
		c, g := 0, 0
		for i := range mask.All() {
			c += mi.nodeCPUs[i]
			g += mi.nodeGPUs[i]
		}
		if c < cpus || g < gpus {
			continue
		}
		k := mask.Count()
		if anywhere == 0 || k < anywhere {
			anywhere = k
		}
		if mi.m.SetsCrossed(mask) <= 1 && (inSet == 0 || k < inSet) {
			inSet = k
		}
	}
	w := anywhere
	if inSet > 0 {
		w = inSet
	}
	mi.widthCaps[key] = w
	return w
}

// placementShape is where a placement's CPUs and GPUs sit.
type placementShape struct {
	cpuNodes, gpuNodes numa.Mask
	cpus, gpus         int
}

func (mi *machineInfo) shapeOf(cpus numa.CPUSet, gpus []int) placementShape {
	var s placementShape
	for cpu := range cpus.All() {
		s.cpus++
		if cpu < len(mi.cpuNode) && mi.cpuNode[cpu] >= 0 {
			s.cpuNodes = s.cpuNodes.With(int(mi.cpuNode[cpu]))
		}
	}
	for _, g := range gpus {
		s.gpus++
		if g < len(mi.gpuNode) && mi.gpuNode[g] >= 0 {
			s.gpuNodes = s.gpuNodes.With(int(mi.gpuNode[g]))
		}
	}
	return s
}

// span is the set of NUMA nodes the placement uses.
func (s placementShape) span() numa.Mask { return s.cpuNodes.Union(s.gpuNodes) }

// crossNUMA says whether a placement is cross-NUMA: its span is wider
// than the request's width_cap (the narrowest the hardware allows), or
// some of its CPUs sit on NUMA nodes that hold none of its GPUs although
// the NUMA nodes of its GPUs have the CPUs for the whole request.
func (mi *machineInfo) crossNUMA(s placementShape) bool {
	if s.span().Count() > mi.widthCap(s.cpus, s.gpus) {
		return true
	}
	if s.gpus == 0 || s.cpuNodes.IsSubsetOf(s.gpuNodes) {
		return false
	}
	c := 0
	for i := range s.gpuNodes.All() {
		c += mi.nodeCPUs[i]
	}
	return c >= s.cpus
}

// pickCPUs adds up to n CPUs of free on the given nodes to dst, the
// kubelet-emulation rule: whole free cores first (nodes ascending, cores
// ascending), then the free threads of partly used cores (ascending). It
// returns how many it added.
func (mi *machineInfo) pickCPUs(free numa.CPUSet, nodes numa.Mask, n int, dst *numa.CPUSet) int {
	taken := 0
	for pass := 0; pass < 2 && taken < n; pass++ {
		for i := range nodes.All() {
			for _, core := range mi.cores[i] {
				k := 0
				for _, cpu := range core {
					if free.Contains(cpu) && !dst.Contains(cpu) {
						k++
					}
				}
				if k == 0 || (pass == 0 && k < len(core)) {
					continue
				}
				for _, cpu := range core {
					if taken == n {
						return taken
					}
					if free.Contains(cpu) && !dst.Contains(cpu) {
						dst.Add(cpu)
						taken++
					}
				}
			}
		}
	}
	return taken
}

// pickGPUs returns up to n GPU IDs not in held whose node is in nodes,
// ascending ID, appended to dst.
func (mi *machineInfo) pickGPUs(held uint64, nodes numa.Mask, n int, dst []int) []int {
	for _, id := range mi.gpuIDs {
		if n == 0 {
			break
		}
		if held&(1<<uint(id)) != 0 || mi.gpuNode[id] < 0 || !nodes.Contains(int(mi.gpuNode[id])) {
			continue
		}
		dst = append(dst, id)
		held |= 1 << uint(id)
		n--
	}
	return dst
}

// onesCount is the number of GPUs in a mask.
func onesCount(w uint64) int { return bits.OnesCount64(w) }

// cluster is the machines of the simulated nodes.
type cluster struct {
	names []string
	infos []*machineInfo // by node
	gpus  int            // every node's GPUs
}

func newCluster(nodes int) (*cluster, error) {
	var kinds [len(presets)]*machineInfo
	for i, name := range presets {
		m, err := topology.Preset(name)
		if err != nil {
			return nil, err
		}
		if kinds[i], err = newMachineInfo(m); err != nil {
			return nil, err
		}
	}
	width := max(5, len(fmt.Sprint(nodes-1)))
	c := &cluster{names: make([]string, nodes), infos: make([]*machineInfo, nodes)}
	for i := range nodes {
		c.names[i] = fmt.Sprintf("node-%0*d", width, i)
		c.infos[i] = kinds[i%len(kinds)]
		c.gpus += c.infos[i].gpus
	}
	return c, nil
}
