package topology

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/numaplace/numaplace/internal/quote"
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

func gpuItem(i int, g GPU) string { return fmt.Sprintf("gpus[%d] (id %d)", i, g.ID) }

func linkItem(i int, l NVLink) string { return fmt.Sprintf("nvlinks[%d] (%d-%d)", i, l.A, l.B) }

func devItem(i int, d Device) string { return fmt.Sprintf("devices[%d] (id %s)", i, quote.Short(d.ID)) }

// Build validates the description and returns the machine. Errors are
// *[ValidationError] (unwrapping to [ErrInvalid]) naming the offending item,
// or *[TooManyNodesError] for more than 64 NUMA nodes. Checks: at least one
// node; node IDs non-negative and unique; sockets >= -1; memory >= 0; every
// CPU in exactly one node; the distance table square with every entry in
// 1-255 and each local distance the smallest of its row; cores disjoint, each
// inside one node; L3 groups disjoint and made of known CPUs; reserved CPUs
// known; GPU IDs non-negative and unique; GPU memory
// non-negative; devices with an ID and a class
// other than "gpu", unique per class; device and GPU nodes known or -1;
// NVLinks between two distinct GPU IDs (not necessarily listed) with a
// positive count, each pair once; a GPU memory node (Node.GPUMemory)
// without CPUs, of a listed GPU, at most one per GPU, and no GPU or device
// whose NUMA node is a GPU memory node (the error names the nearest node
// with CPUs, the one to give instead); NUMA sets a partition of the nodes; CPU
// numbers at most numa.MaxCPUID; the sum of the nodes' memory within an
// int64; the name and every GPU and device string valid UTF-8.
//
// Before anything is allocated, the sizes are checked against the caps
// [MaxCPUs], [MaxDevices] and [MaxNVLinks] (a *[LimitError]). Build takes
// O(n log n) time in the CPUs, devices and NVLinks (plus a bitset's words
// per core and L3 group), and memory linear in the devices and NVLinks.
func (b *Builder) Build() (*Machine, error) {
	if b == nil {
		return nil, invalid("builder", "nil *Builder: use NewBuilder")
	}
	if len(b.nodes) == 0 {
		return nil, invalid("numaNodes", "the machine has no NUMA node")
	}
	if len(b.nodes) > numa.MaxNodes {
		return nil, &TooManyNodesError{Nodes: len(b.nodes)}
	}
	if err := b.checkLimits(); err != nil {
		return nil, err
	}
	if err := b.checkText(); err != nil {
		return nil, err
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
	var total int64
	for i, n := range b.nodes {
		if n.MemoryMiB > math.MaxInt64-total {
			return nil, invalid(nodeItem(i, n), "memoryMiB %d makes the machine's memory overflow: "+
				"the nodes' memory must add up to at most %d MiB", n.MemoryMiB, int64(math.MaxInt64))
		}
		total += n.MemoryMiB
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
		return nil, invalid("reservedCPUs", "CPUs %s are not in any NUMA node", shortSet(b.reserved.Difference(m.allCPUs)))
	}
	m.reserved = b.reserved.Clone()
	if err := m.buildGPUs(b.gpus, b.nvlinks); err != nil {
		return nil, err
	}
	if err := m.buildKinds(b.nodes); err != nil {
		return nil, err
	}
	if err := m.buildDevices(b.devices); err != nil {
		return nil, err
	}
	if err := m.checkDeviceNodes(); err != nil {
		return nil, err
	}
	if err := m.buildSets(b.sets); err != nil {
		return nil, err
	}
	return m, nil
}

// checkLimits refuses a description larger than the caps, before anything
// is allocated for it.
func (b *Builder) checkLimits() error {
	cpus := 0
	for _, n := range b.nodes {
		cpus += n.CPUs.Size()
	}
	for _, c := range []struct {
		what         string
		count, limit int
	}{
		{"CPUs", cpus, MaxCPUs},
		{"cores", len(b.cores), MaxCPUs},
		{"L3 groups", len(b.l3), MaxCPUs},
		{"devices (GPUs and other devices)", len(b.gpus) + len(b.devices), MaxDevices},
		{"NVLinks", len(b.nvlinks), MaxNVLinks},
	} {
		if c.count > c.limit {
			return &LimitError{What: c.what, Count: c.count, Limit: c.limit}
		}
	}
	return nil
}

// checkText refuses names and IDs that are not valid UTF-8: the JSON format
// could not carry them (encoding/json would write U+FFFD), so a machine
// built by hand and one read from JSON would differ.
func (b *Builder) checkText() error {
	bad := func(s string) bool { return !utf8.ValidString(s) }
	if bad(b.name) {
		return invalid("name", "%s is not valid UTF-8", quote.Short(b.name))
	}
	for i, g := range b.gpus {
		for _, f := range []struct{ field, v string }{{"busID", g.BusID}, {"pcieSwitch", g.PCIeSwitch}, {"uuid", g.UUID}} {
			if bad(f.v) {
				return invalid(gpuItem(i, g), "%s %s is not valid UTF-8", f.field, quote.Short(f.v))
			}
		}
	}
	for i, d := range b.devices {
		for _, f := range []struct{ field, v string }{{"id", d.ID}, {"class", d.Class}, {"busID", d.BusID}, {"pcieSwitch", d.PCIeSwitch}} {
			if bad(f.v) {
				return invalid(devItem(i, d), "%s %s is not valid UTF-8", f.field, quote.Short(f.v))
			}
		}
	}
	return nil
}

// cpuGroups checks groups of CPUs that must be disjoint and made of the
// machine's CPUs (cores, L3 groups) in time linear in their CPUs, with
// owner as scratch (one entry per CPU number, -1 when free; it is left
// holding the group index of each CPU). kind names an item ("cores"), one
// a group ("core"). It returns each group's lowest CPU.
func (m *Machine) cpuGroups(kind, one string, groups []numa.CPUSet, owner []int32) ([]int, error) {
	mins := make([]int, len(groups))
	for i, g := range groups {
		item := func() string { return fmt.Sprintf("%s[%d] (%s)", kind, i, shortSet(g)) }
		mins[i] = g.Min()
		if mins[i] < 0 {
			return nil, invalid(item(), "the %s has no CPU", one)
		}
		for cpu := range g.All() {
			if cpu >= len(owner) || m.cpuNode[cpu] < 0 {
				return nil, invalid(item(), "CPUs %s are not in any NUMA node", shortSet(g.Difference(m.allCPUs)))
			}
			if owner[cpu] >= 0 && int(owner[cpu]) != i {
				var other numa.CPUSet
				for c := range g.All() {
					if c < len(owner) && owner[c] >= 0 && int(owner[c]) != i {
						other.Add(c)
					}
				}
				return nil, invalid(item(), "CPUs %s are in another %s too", shortSet(other), one)
			}
			owner[cpu] = int32(i)
		}
	}
	return mins, nil
}

func (m *Machine) buildCores(cores []numa.CPUSet) error {
	mins, err := m.cpuGroups("cores", "core", cores, m.cpuCore)
	if err != nil {
		return err
	}
	for i, c := range cores {
		node := int(m.cpuNode[mins[i]])
		for cpu := range c.All() {
			if n := int(m.cpuNode[cpu]); n != node {
				return invalid(fmt.Sprintf("cores[%d] (%s)", i, shortSet(c)), "the core spans NUMA nodes %d and %d",
					m.nodes[node].ID, m.nodes[n].ID)
			}
		}
	}
	type entry struct{ min, core int } // core: index into cores, or -1 for a CPU of its own
	order := make([]entry, 0, len(cores))
	for i := range cores {
		order = append(order, entry{mins[i], i})
	}
	for cpu := range m.allCPUs.All() {
		if m.cpuCore[cpu] < 0 {
			order = append(order, entry{cpu, -1})
		}
	}
	slices.SortFunc(order, func(x, y entry) int { return cmp.Compare(x.min, y.min) })
	m.cores = make([]Core, len(order))
	m.threads = 1
	for i, e := range order {
		c := Core{NodeIndex: int(m.cpuNode[e.min])}
		if e.core < 0 {
			c.CPUs = numa.NewCPUSet(e.min)
		} else {
			c.CPUs = cores[e.core].Clone()
		}
		m.cores[i] = c
		m.threads = max(m.threads, c.CPUs.Size())
		for cpu := range c.CPUs.All() {
			m.cpuCore[cpu] = int32(i)
		}
	}
	return nil
}

func (m *Machine) buildL3(groups []numa.CPUSet) error {
	if len(groups) == 0 {
		return nil
	}
	owner := make([]int32, len(m.cpuNode))
	for i := range owner {
		owner[i] = -1
	}
	mins, err := m.cpuGroups("l3Groups", "group", groups, owner)
	if err != nil {
		return err
	}
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(mins[x], mins[y]) })
	m.l3 = make([]numa.CPUSet, len(groups))
	for i, g := range order {
		m.l3[i] = groups[g].Clone()
	}
	return nil
}

// firstDuplicate returns the lowest index i such that key(i) equals key(j)
// for some j < i, with that lowest j, or -1, -1 when the keys are distinct.
// It sorts n indices: O(n log n).
func firstDuplicate(n int, compare func(i, j int) int) (int, int) {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, compare)
	dup, first := -1, -1
	for k := 1; k < n; k++ {
		if compare(order[k-1], order[k]) != 0 {
			continue
		}
		// order[k] repeats a key: the lowest index with it is the start of
		// its run, which sorting kept in input order.
		start := k - 1
		for start > 0 && compare(order[start-1], order[k]) == 0 {
			start--
		}
		if dup < 0 || order[k] < dup {
			dup, first = order[k], order[start]
		}
	}
	return dup, first
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

// firstError returns the error of the lowest index among a per-item
// check's first failure (at index bad, or -1) and a duplicate (at index
// dup, or -1).
func firstError(bad int, badErr error, dup int, dupErr func() error) error {
	switch {
	case bad < 0 && dup < 0:
		return nil
	case dup < 0 || bad >= 0 && bad < dup:
		return badErr
	default:
		return dupErr()
	}
}

func (m *Machine) buildGPUs(gpus []GPU, links []NVLink) error {
	bad, badErr := -1, error(nil)
	for i, g := range gpus {
		if g.ID < 0 {
			bad, badErr = i, invalid(gpuItem(i, g), "GPU ID must not be negative")
			break
		}
		if _, ok := m.NodeIndex(g.NUMANode); !ok && g.NUMANode != UnknownNode {
			bad, badErr = i, m.checkNode(gpuItem(i, g), g.NUMANode)
			break
		}
		if g.MemoryMiB < 0 {
			bad, badErr = i, invalid(gpuItem(i, g), "memoryMiB %d is negative (0 means unknown)", g.MemoryMiB)
			break
		}
	}
	dup, first := firstDuplicate(len(gpus), func(i, j int) int { return cmp.Compare(gpus[i].ID, gpus[j].ID) })
	if err := firstError(bad, badErr, dup, func() error {
		return invalid(gpuItem(dup, gpus[dup]), "GPU ID %d is also used by gpus[%d]",
			gpus[dup].ID, first)
	}); err != nil {
		return err
	}
	m.gpus = slices.Clone(gpus)
	slices.SortFunc(m.gpus, func(x, y GPU) int { return cmp.Compare(x.ID, y.ID) })

	bad, badErr = -1, nil
	norm := make([]NVLink, len(links)) // A < B
	for i, l := range links {
		switch {
		case l.A < 0 || l.B < 0:
			badErr = invalid(linkItem(i, l), "GPU IDs must not be negative")
		case l.A == l.B:
			badErr = invalid(linkItem(i, l), "a GPU cannot link to itself")
		case l.Links <= 0:
			badErr = invalid(linkItem(i, l), "link count %d must be positive", l.Links)
		}
		if badErr != nil {
			bad = i
			break
		}
		if l.A > l.B {
			l.A, l.B = l.B, l.A
		}
		norm[i] = l
	}
	if bad >= 0 {
		norm = norm[:bad] // duplicates count only before the first bad link
	}
	dup, _ = firstDuplicate(len(norm), func(i, j int) int {
		return cmp.Or(cmp.Compare(norm[i].A, norm[j].A), cmp.Compare(norm[i].B, norm[j].B))
	})
	if err := firstError(bad, badErr, dup, func() error {
		return invalid(linkItem(dup, links[dup]), "the pair is listed twice")
	}); err != nil {
		return err
	}
	m.nvlinks = norm
	slices.SortFunc(m.nvlinks, func(x, y NVLink) int {
		return cmp.Or(cmp.Compare(x.A, y.A), cmp.Compare(x.B, y.B))
	})
	return nil
}

// buildKinds checks the GPU memory nodes of nodes (in the order they were
// added) and fills m.kinds.
func (m *Machine) buildKinds(nodes []Node) error {
	owner := make(map[int]int) // GPU ID -> index in nodes of its memory node
	for i, n := range nodes {
		if !n.GPUMemory {
			continue
		}
		switch {
		case !n.CPUs.IsEmpty():
			return invalid(nodeItem(i, n), "a GPU memory node (of GPU %d) has no CPUs, found %s", n.GPU, shortSet(n.CPUs))
		case !m.hasGPU(n.GPU):
			return invalid(nodeItem(i, n), "the node is the memory of GPU %d, which the machine does not list", n.GPU)
		}
		if j, dup := owner[n.GPU]; dup {
			return invalid(nodeItem(i, n), "GPU %d's memory is already node %d", n.GPU, nodes[j].ID)
		}
		owner[n.GPU] = i
	}
	for i := range m.nodes {
		k := kindOf(&m.nodes[i])
		m.kinds[k] = m.kinds[k].With(i)
	}
	for i, g := range m.gpus {
		j, ok := m.NodeIndex(g.NUMANode)
		if !ok || !m.kinds[NodeGPUMemory].Contains(j) {
			continue
		}
		hint := "the machine has no node with CPUs"
		if near, ok := m.nearestCPUNode(j); ok {
			hint = fmt.Sprintf("the nearest by distance is %d", m.nodes[near].ID)
		}
		return invalid(gpuItem(i, g), "numaNode %d is the memory of GPU %d, not a node with CPUs: "+
			"give the node with CPUs the GPU is attached to (%s)", g.NUMANode, m.nodes[j].GPU, hint)
	}
	return nil
}

// checkDeviceNodes refuses a device whose NUMA node is a GPU memory node,
// as buildKinds refuses such a GPU; the error names the device by class and
// ID.
func (m *Machine) checkDeviceNodes() error {
	for _, d := range m.devices {
		j, ok := m.NodeIndex(d.NUMANode)
		if !ok || !m.kinds[NodeGPUMemory].Contains(j) {
			continue
		}
		hint := "the machine has no node with CPUs"
		if near, ok := m.nearestCPUNode(j); ok {
			hint = fmt.Sprintf("the nearest by distance is %d", m.nodes[near].ID)
		}
		return invalid(fmt.Sprintf("device %s/%s", quote.Bare(d.Class), quote.Bare(d.ID)),
			"numaNode %d is the memory of GPU %d, not a node with CPUs: give the node with CPUs the device is attached to (%s)",
			d.NUMANode, m.nodes[j].GPU, hint)
	}
	return nil
}

// hasGPU reports whether m lists the GPU with the given ID (m.gpus sorted).
func (m *Machine) hasGPU(id int) bool {
	_, ok := slices.BinarySearchFunc(m.gpus, id, func(g GPU, id int) int { return cmp.Compare(g.ID, id) })
	return ok
}

// NearestCPUNode returns the NUMA node whose CPUs are closest to node id:
// id itself when it has CPUs, else the node with CPUs at the least SLIT
// distance from it (the lowest ID on a tie), as for a device whose PCI
// numa_node is a CPU-less memory node. It returns false for a node the
// machine lacks ([UnknownNode] included) or a machine without CPUs.
func (m *Machine) NearestCPUNode(id numa.NodeID) (numa.NodeID, bool) {
	i, ok := m.NodeIndex(id)
	if !ok {
		return 0, false
	}
	if !m.NodeCPUs(i).IsEmpty() {
		return id, true
	}
	j, ok := m.nearestCPUNode(i)
	if !ok {
		return 0, false
	}
	return m.NodeID(j), true
}

// nearestCPUNode returns the dense index of the node with CPUs nearest to the
// node at dense index i by distance (the lowest ID on a tie), and false
// when no node has CPUs.
func (m *Machine) nearestCPUNode(i int) (int, bool) {
	best := -1
	for j := range m.kinds[NodeCPU].All() {
		if best < 0 || m.distances.At(i, j) < m.distances.At(i, best) {
			best = j
		}
	}
	return best, best >= 0
}

func (m *Machine) buildDevices(devs []Device) error {
	bad, badErr := -1, error(nil)
	for i, d := range devs {
		switch {
		case d.ID == "":
			badErr = invalid(devItem(i, d), "the device has no id")
		case d.Class == "":
			badErr = invalid(devItem(i, d), "the device has no class")
		case d.Class == "gpu":
			badErr = invalid(devItem(i, d), `class "gpu" is reserved: list GPUs under "gpus"`)
		default:
			if _, ok := m.NodeIndex(d.NUMANode); !ok && d.NUMANode != UnknownNode {
				badErr = m.checkNode(devItem(i, d), d.NUMANode)
			}
		}
		if badErr != nil {
			bad = i
			break
		}
	}
	compare := func(i, j int) int {
		return cmp.Or(cmp.Compare(devs[i].Class, devs[j].Class), cmp.Compare(devs[i].ID, devs[j].ID))
	}
	dup, first := firstDuplicate(len(devs), compare)
	if err := firstError(bad, badErr, dup, func() error {
		d := devs[dup]
		return invalid(devItem(dup, d), "device %s/%s is also listed as devices[%d]",
			quote.Bare(d.Class), quote.Bare(d.ID), first)
	}); err != nil {
		return err
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
