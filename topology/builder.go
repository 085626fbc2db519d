package topology

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/numaplace/numaplace/numa"
)

// Builder collects the parts of a machine and validates them in [Builder.Build].
// Its methods record and return the builder so that calls chain; every check
// happens in Build, which names the offending item. A Builder is not safe for
// concurrent use; it may be reused after Build (the Machine does not share
// its storage).
type Builder struct {
	name      string
	nodes     []Node
	distances [][]int
	cores     []numa.CPUSet
	l3        []numa.CPUSet
	gpus      []GPU
	devices   []Device
	nvlinks   []NVLink
	sets      [][]numa.NodeID
	reserved  numa.CPUSet
}

// NewBuilder returns an empty builder for a machine with the given name.
func NewBuilder(name string) *Builder { return &Builder{name: name} }

// AddNode adds a NUMA node. Nodes may be added in any order; the machine
// orders them by ID.
func (b *Builder) AddNode(n Node) *Builder {
	n.CPUs = n.CPUs.Clone()
	b.nodes = append(b.nodes, n)
	return b
}

// SetDistances sets the distance table; rows and columns follow the order in
// which the nodes were added. Without it every local distance is 10 and
// every remote one 20.
func (b *Builder) SetDistances(rows [][]int) *Builder {
	b.distances = make([][]int, len(rows))
	for i, r := range rows {
		b.distances[i] = slices.Clone(r)
	}
	return b
}

// AddCore adds a physical core (a group of SMT siblings). CPUs not in any
// added core become cores of one CPU each.
func (b *Builder) AddCore(cpus numa.CPUSet) *Builder {
	b.cores = append(b.cores, cpus.Clone())
	return b
}

// AddL3 adds a group of CPUs that share a last-level cache.
func (b *Builder) AddL3(cpus numa.CPUSet) *Builder {
	b.l3 = append(b.l3, cpus.Clone())
	return b
}

// AddGPU adds a GPU.
func (b *Builder) AddGPU(g GPU) *Builder {
	b.gpus = append(b.gpus, g)
	return b
}

// AddDevice adds a non-GPU device.
func (b *Builder) AddDevice(d Device) *Builder {
	b.devices = append(b.devices, d)
	return b
}

// AddNVLink records links NVLink links between GPUs a and b. A link may name
// a GPU the machine does not list (one hidden from this view of the
// machine, as in docs/design.md's JSON example): it is kept, round-trips through
// JSON, and plays no part in placement.
func (b *Builder) AddNVLink(a, c, links int) *Builder {
	b.nvlinks = append(b.nvlinks, NVLink{A: a, B: c, Links: links})
	return b
}

// SetNUMASets sets the NUMA sets by node ID; they must partition the nodes.
// Without it the machine has one set per socket (a node of unknown socket
// joins the set of its nearest node with a known socket, the lowest ID on a
// tie), or a single set when no node has a socket.
func (b *Builder) SetNUMASets(sets [][]numa.NodeID) *Builder {
	b.sets = make([][]numa.NodeID, len(sets))
	for i, s := range sets {
		b.sets[i] = slices.Clone(s)
	}
	return b
}

// SetReservedCPUs sets the CPUs that are never handed out.
func (b *Builder) SetReservedCPUs(cpus numa.CPUSet) *Builder {
	b.reserved = cpus.Clone()
	return b
}

func nodeItem(i int, n Node) string { return fmt.Sprintf("numaNodes[%d] (id %d)", i, n.ID) }

// Build validates the description and returns the machine. Errors are
// *[ValidationError] (unwrapping to [ErrInvalid]) naming the offending item,
// or *[TooManyNodesError] for more than 64 NUMA nodes. Checks: at least one
// node; node IDs non-negative and unique; sockets >= -1; memory >= 0; every
// CPU in exactly one node; the distance table square with every entry in
// 1-255 and each local distance the smallest of its row; cores disjoint, each
// inside one node; L3 groups disjoint and made of known CPUs; reserved CPUs
// known; GPU IDs non-negative and unique; devices with an ID and a class
// other than "gpu", unique per class; device and GPU nodes known or -1;
// NVLinks between two distinct GPU IDs (not necessarily listed) with a
// positive count, each pair once; NUMA sets a partition of the nodes; CPU
// numbers at most numa.MaxCPUID.
func (b *Builder) Build() (*Machine, error) {
	if len(b.nodes) == 0 {
		return nil, invalid("numaNodes", "the machine has no NUMA node")
	}
	if len(b.nodes) > numa.MaxNodes {
		return nil, &TooManyNodesError{Nodes: len(b.nodes)}
	}
	m := &Machine{name: b.name}

	// Nodes: IDs, sockets, memory, disjoint CPUs.
	ids := make([]numa.NodeID, len(b.nodes))
	for i, n := range b.nodes {
		if n.ID < 0 {
			return nil, invalid(nodeItem(i, n), "node ID must not be negative")
		}
		if n.Socket < UnknownSocket {
			return nil, invalid(nodeItem(i, n), "socket %d must be >= 0 (or -1 for unknown)", n.Socket)
		}
		if n.MemoryMiB < 0 {
			return nil, invalid(nodeItem(i, n), "memoryMiB %d must not be negative", n.MemoryMiB)
		}
		ids[i] = n.ID
	}
	for i, n := range b.nodes {
		if n.CPUs.Max() > numa.MaxCPUID {
			return nil, invalid(nodeItem(i, n), "CPU %d is above the limit %d", n.CPUs.Max(), numa.MaxCPUID)
		}
	}
	for i := range b.nodes {
		for j := 0; j < i; j++ {
			if b.nodes[j].ID == b.nodes[i].ID {
				return nil, invalid(nodeItem(i, b.nodes[i]), "node ID %d is also used by numaNodes[%d]", b.nodes[i].ID, j)
			}
			if b.nodes[j].CPUs.Intersects(b.nodes[i].CPUs) {
				common := b.nodes[j].CPUs.Intersection(b.nodes[i].CPUs)
				return nil, invalid(fmt.Sprintf("cpu %d", common.Min()),
					"the CPU is in two NUMA nodes: %d and %d", b.nodes[j].ID, b.nodes[i].ID)
			}
		}
	}
	dist, err := numa.NewDistances(ids, b.distances)
	if err != nil {
		return nil, &ValidationError{Item: "distances", Reason: "the table is not usable", Cause: err}
	}
	m.distances = dist
	m.nodes = slices.Clone(b.nodes)
	for i := range m.nodes {
		m.nodes[i].CPUs = m.nodes[i].CPUs.Clone() // the machine shares no storage with the builder
	}
	slices.SortFunc(m.nodes, func(x, y Node) int { return cmp.Compare(x.ID, y.ID) })
	for _, n := range m.nodes {
		m.allCPUs.UnionWith(n.CPUs)
		if n.Socket != UnknownSocket && !slices.Contains(m.sockets, n.Socket) {
			m.sockets = append(m.sockets, n.Socket)
		}
	}
	slices.Sort(m.sockets)
	maxCPU := m.allCPUs.Max()
	m.cpuNode = make([]int16, maxCPU+1)
	m.cpuCore = make([]int32, maxCPU+1)
	for c := range m.cpuNode {
		m.cpuNode[c], m.cpuCore[c] = -1, -1
	}
	for i, n := range m.nodes {
		for c := range n.CPUs.All() {
			m.cpuNode[c] = int16(i)
		}
	}

	if err := m.buildCores(b.cores); err != nil {
		return nil, err
	}
	if err := m.buildL3(b.l3); err != nil {
		return nil, err
	}
	if !b.reserved.IsSubsetOf(m.allCPUs) {
		return nil, invalid("reservedCPUs", "CPUs %s are not in any NUMA node", b.reserved.Difference(m.allCPUs))
	}
	m.reserved = b.reserved.Clone()
	if err := m.buildGPUs(b.gpus, b.nvlinks); err != nil {
		return nil, err
	}
	if err := m.buildDevices(b.devices); err != nil {
		return nil, err
	}
	if err := m.buildSets(b.sets); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Machine) buildCores(cores []numa.CPUSet) error {
	covered := numa.CPUSet{}
	for i, c := range cores {
		item := fmt.Sprintf("cores[%d] (%s)", i, c)
		if c.IsEmpty() {
			return invalid(item, "the core has no CPU")
		}
		if !c.IsSubsetOf(m.allCPUs) {
			return invalid(item, "CPUs %s are not in any NUMA node", c.Difference(m.allCPUs))
		}
		if c.Intersects(covered) {
			return invalid(item, "CPUs %s are in another core too", c.Intersection(covered))
		}
		node, _ := m.CPUNode(c.Min())
		for cpu := range c.All() {
			if n, _ := m.CPUNode(cpu); n != node {
				return invalid(item, "the core spans NUMA nodes %d and %d", m.nodes[node].ID, m.nodes[n].ID)
			}
		}
		covered.UnionWith(c)
		m.cores = append(m.cores, Core{CPUs: c.Clone(), Node: node})
	}
	for cpu := range m.allCPUs.All() {
		if !covered.Contains(cpu) {
			node, _ := m.CPUNode(cpu)
			m.cores = append(m.cores, Core{CPUs: numa.NewCPUSet(cpu), Node: node})
		}
	}
	slices.SortFunc(m.cores, func(x, y Core) int { return cmp.Compare(x.CPUs.Min(), y.CPUs.Min()) })
	m.threads = 1
	for i, c := range m.cores {
		m.threads = max(m.threads, c.CPUs.Size())
		for cpu := range c.CPUs.All() {
			m.cpuCore[cpu] = int32(i)
		}
	}
	return nil
}

func (m *Machine) buildL3(groups []numa.CPUSet) error {
	covered := numa.CPUSet{}
	for i, g := range groups {
		item := fmt.Sprintf("l3Groups[%d] (%s)", i, g)
		if g.IsEmpty() {
			return invalid(item, "the group has no CPU")
		}
		if !g.IsSubsetOf(m.allCPUs) {
			return invalid(item, "CPUs %s are not in any NUMA node", g.Difference(m.allCPUs))
		}
		if g.Intersects(covered) {
			return invalid(item, "CPUs %s are in another group too", g.Intersection(covered))
		}
		covered.UnionWith(g)
		m.l3 = append(m.l3, g.Clone())
	}
	slices.SortFunc(m.l3, func(x, y numa.CPUSet) int { return cmp.Compare(x.Min(), y.Min()) })
	return nil
}

func (m *Machine) checkNode(item string, id numa.NodeID) error {
	if id == UnknownNode {
		return nil
	}
	if _, ok := m.NodeIndex(id); !ok {
		return invalid(item, "NUMA node %d does not exist (use -1 when it is unknown)", id)
	}
	return nil
}

func (m *Machine) buildGPUs(gpus []GPU, links []NVLink) error {
	for i, g := range gpus {
		item := fmt.Sprintf("gpus[%d] (id %d)", i, g.ID)
		if g.ID < 0 {
			return invalid(item, "GPU ID must not be negative")
		}
		for j := 0; j < i; j++ {
			if gpus[j].ID == g.ID {
				return invalid(item, "GPU ID %d is also used by gpus[%d]", g.ID, j)
			}
		}
		if err := m.checkNode(item, g.NUMANode); err != nil {
			return err
		}
	}
	m.gpus = slices.Clone(gpus)
	slices.SortFunc(m.gpus, func(x, y GPU) int { return cmp.Compare(x.ID, y.ID) })
	for i, l := range links {
		item := fmt.Sprintf("nvlinks[%d] (%d-%d)", i, l.A, l.B)
		if l.A < 0 || l.B < 0 {
			return invalid(item, "GPU IDs must not be negative")
		}
		if l.A == l.B {
			return invalid(item, "a GPU cannot link to itself")
		}
		if l.Links <= 0 {
			return invalid(item, "link count %d must be positive", l.Links)
		}
		if l.A > l.B {
			l.A, l.B = l.B, l.A
		}
		if m.NVLinkCount(l.A, l.B) != 0 {
			return invalid(item, "the pair is listed twice")
		}
		m.nvlinks = append(m.nvlinks, l)
	}
	slices.SortFunc(m.nvlinks, func(x, y NVLink) int {
		return cmp.Or(cmp.Compare(x.A, y.A), cmp.Compare(x.B, y.B))
	})
	return nil
}

func (m *Machine) buildDevices(devs []Device) error {
	for i, d := range devs {
		item := fmt.Sprintf("devices[%d] (id %q)", i, d.ID)
		switch {
		case d.ID == "":
			return invalid(item, "the device has no id")
		case d.Class == "":
			return invalid(item, "the device has no class")
		case d.Class == "gpu":
			return invalid(item, `class "gpu" is reserved: list GPUs under "gpus"`)
		}
		for j := 0; j < i; j++ {
			if devs[j].ID == d.ID && devs[j].Class == d.Class {
				return invalid(item, "device %s/%s is also listed as devices[%d]", d.Class, d.ID, j)
			}
		}
		if err := m.checkNode(item, d.NUMANode); err != nil {
			return err
		}
	}
	m.devices = slices.Clone(devs)
	slices.SortFunc(m.devices, func(x, y Device) int {
		return cmp.Or(cmp.Compare(x.Class, y.Class), cmp.Compare(x.ID, y.ID))
	})
	return nil
}

func (m *Machine) buildSets(sets [][]numa.NodeID) error {
	n := len(m.nodes)
	m.setOf = make([]int, n)
	var masks []numa.Mask
	if sets != nil {
		var seen numa.Mask
		for si, s := range sets {
			item := fmt.Sprintf("numaSets[%d]", si)
			if len(s) == 0 {
				return invalid(item, "the set is empty")
			}
			var mask numa.Mask
			for _, id := range s {
				i, ok := m.NodeIndex(id)
				if !ok {
					return invalid(item, "NUMA node %d does not exist", id)
				}
				if mask.Contains(i) {
					return invalid(item, "NUMA node %d is listed twice in the set", id)
				}
				if seen.Contains(i) {
					return invalid(item, "NUMA node %d is in more than one set", id)
				}
				seen, mask = seen.With(i), mask.With(i)
			}
			masks = append(masks, mask)
		}
		if missing := m.AllNodes().Difference(seen); missing != 0 {
			return invalid("numaSets", "NUMA node %d is in no set", m.nodes[missing.Lowest()].ID)
		}
	} else {
		masks = m.defaultSets()
	}
	slices.SortFunc(masks, func(x, y numa.Mask) int { return cmp.Compare(x.Lowest(), y.Lowest()) })
	m.sets = masks
	for si, s := range masks {
		for i := range s.All() {
			m.setOf[i] = si
		}
	}
	return nil
}

// defaultSets groups the nodes by socket; a node of unknown socket joins the
// set of its nearest node with a known socket (lowest ID on a tie).
func (m *Machine) defaultSets() []numa.Mask {
	if len(m.sockets) == 0 {
		return []numa.Mask{m.AllNodes()}
	}
	bySocket := make(map[int]numa.Mask)
	for i, n := range m.nodes {
		s := n.Socket
		if s == UnknownSocket {
			best := -1
			for j, o := range m.nodes {
				if o.Socket == UnknownSocket {
					continue
				}
				if best < 0 || m.distances.At(i, j) < m.distances.At(i, best) {
					best = j
				}
			}
			s = m.nodes[best].Socket
		}
		bySocket[s] = bySocket[s].With(i)
	}
	masks := make([]numa.Mask, 0, len(bySocket))
	for _, s := range m.sockets {
		masks = append(masks, bySocket[s])
	}
	return masks
}
