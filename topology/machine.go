package topology

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/numaplace/numaplace/numa"
)

// UnknownNode is the NUMA node of a device whose node the firmware does not
// report (sysfs numa_node -1, common in virtual machines).
const UnknownNode numa.NodeID = -1

// UnknownSocket is the socket of a NUMA node whose socket is not known (a
// CPU-less memory node, or a description without socket information).
const UnknownSocket = -1

// Node is one NUMA node.
type Node struct {
	// ID is the operating system's node number (may be sparse).
	ID numa.NodeID
	// Socket is the physical package the node belongs to, or
	// [UnknownSocket]. There is no missing value: the zero value is socket
	// 0, so set UnknownSocket when it is not known (the JSON format requires
	// "socket" for the same reason).
	Socket int
	// CPUs are the node's logical CPUs; empty for a CPU-less (HBM, CXL) node.
	CPUs numa.CPUSet
	// MemoryMiB is the node's memory in MiB. For a GPU memory node it is
	// the GPU's memory, which pods are never given (see [NodeGPUMemory]).
	MemoryMiB int64
	// GPUMemory marks a CPU-less node that holds the memory of the GPU
	// whose ID is GPU, onlined as a NUMA node by the GPU's driver (as the
	// NVIDIA driver does on Grace and POWER9 machines, naming the node in
	// /proc/driver/nvidia/gpus/BUS/numa_status). Such a node is never pod
	// memory and never widens a span; see [NodeKind].
	GPUMemory bool
	// GPU is the ID of the GPU whose memory the node holds. It is meaningful
	// only when GPUMemory is set (the zero value is GPU 0).
	GPU int
}

// NodeKind says what a NUMA node holds, and so what pods may be given from
// it. A machine derives it from the node: see [Machine.NodeKind].
type NodeKind uint8

// The kinds of NUMA node.
const (
	// NodeCPU is a node with CPUs (and usually memory).
	NodeCPU NodeKind = iota
	// NodeMemory is a node of plain memory without CPUs, such as HBM in
	// flat mode or a CXL memory expander: pods may be given its memory, by
	// its distance to their CPUs' nodes as for any node.
	NodeMemory
	// NodeGPUMemory is a GPU's memory onlined as a NUMA node (its
	// [Node.GPUMemory] is set): never handed out as pod memory, never part
	// of a span.
	NodeGPUMemory
	// NodePlaceholder is a node with neither CPUs nor memory (such as the
	// nodes Grace machines reserve for MIG instances): it holds nothing and
	// is ignored.
	NodePlaceholder
)

// String returns "cpu", "memory", "gpuMemory" or "placeholder".
func (k NodeKind) String() string {
	switch k {
	case NodeCPU:
		return "cpu"
	case NodeMemory:
		return "memory"
	case NodeGPUMemory:
		return "gpuMemory"
	case NodePlaceholder:
		return "placeholder"
	}
	return fmt.Sprintf("NodeKind(%d)", uint8(k))
}

// kindOf returns the kind of node n: NodeCPU with CPUs, else NodeGPUMemory
// when it is a GPU's memory, else NodeMemory with memory, else
// NodePlaceholder.
func kindOf(n *Node) NodeKind {
	switch {
	case !n.CPUs.IsEmpty():
		return NodeCPU
	case n.GPUMemory:
		return NodeGPUMemory
	case n.MemoryMiB > 0:
		return NodeMemory
	}
	return NodePlaceholder
}

// Core is one physical core: a group of SMT sibling threads.
type Core struct {
	// CPUs are the core's logical CPUs (its hardware threads).
	CPUs numa.CPUSet
	// NodeIndex is the dense index of the NUMA node that holds the core
	// (its position in ascending ID order, 0 to NumNodes()-1), not its ID:
	// Machine.NodeID(NodeIndex) is the ID.
	NodeIndex int
}

// GPU is one GPU.
type GPU struct {
	// ID is the GPU's index on the machine (as in nvidia-smi), unique.
	ID int
	// NUMANode is the ID of the GPU's NUMA node, or [UnknownNode]. There is
	// no missing value: the zero value is node 0, so set UnknownNode when it
	// is not known (the JSON format requires "numaNode" for the same
	// reason).
	NUMANode numa.NodeID
	// BusID is the PCI address, such as "0000:1b:00.0" (optional).
	BusID string
	// PCIeSwitch names the PCIe switch (or root port) the GPU sits under;
	// GPUs with the same non-empty value share it (optional).
	PCIeSwitch string
	// UUID is the vendor's unique identifier, such as "GPU-..." (optional).
	UUID string
	// MemoryMiB is the GPU's own memory in MiB, as nvidia-smi reports its
	// total memory; 0 when unknown, never negative (optional). Discovery
	// gives it only to a GPU whose memory is a NUMA node (Grace, POWER9):
	// that node's MemTotal; presets set it where the GPU model is
	// published, and on Grace presets as the memory node's size.
	MemoryMiB int64
}

// Device is a PCI device of another class than GPU, such as an RDMA NIC.
type Device struct {
	// ID identifies the device within its class, such as "mlx5_0".
	ID string
	// Class is the device class, such as "rdma"; never "gpu".
	Class string
	// NUMANode is the ID of the device's NUMA node, or [UnknownNode]; the
	// zero value is node 0, as for [GPU.NUMANode].
	NUMANode numa.NodeID
	// BusID is the PCI address (optional).
	BusID string
	// PCIeSwitch names the PCIe switch the device sits under (optional).
	PCIeSwitch string
}

// NVLink says that GPUs A and B are joined by Links NVLink links.
type NVLink struct {
	// A and B are the IDs of the two GPUs, distinct; in a built [Machine]
	// A is the lower of the two.
	A, B int
	// Links is the number of NVLink links between A and B (positive).
	Links int
}

// Machine is an immutable description of one machine: its NUMA nodes (in
// ascending ID order; a node's position is its dense index, the bit that
// stands for it in a numa.Mask), sockets, SMT cores, optional L3 groups,
// GPUs and other devices, distances, NUMA sets and reserved CPUs.
//
// A Machine is built by a [Builder], by [Spec.Build] from the interchange
// JSON, by [Preset] or by discovery, and is safe for concurrent use. Slices
// and sets returned by its methods are copies unless a method says
// otherwise.
//
// A nil *Machine reads as a machine with nothing in it: its methods report
// no nodes, CPUs, cores, GPUs or devices (lookups return false), and
// [Machine.MarshalJSON], [Machine.WriteJSON] and [Machine.Picture] return an
// error. The accessors that take a dense index ([Machine.Node],
// [Machine.NodeCPUs], [Machine.NodeID], [Machine.CoreCPUs],
// [Machine.CoreNode], [Machine.SetOf], [Machine.NodeKind],
// [Machine.PodMemoryMiB]) panic on an index out of range, as a
// slice does; a nil machine has no index in range.
type Machine struct {
	name      string
	nodes     []Node // ascending ID
	cores     []Core // ordered by lowest CPU
	l3        []numa.CPUSet
	gpus      []GPU // ascending ID
	devices   []Device
	nvlinks   []NVLink
	distances numa.Distances
	sets      []numa.Mask
	setOf     []int // dense node index -> index into sets
	sockets   []int // distinct known sockets, ascending
	reserved  numa.CPUSet
	allCPUs   numa.CPUSet
	cpuNode   []int16 // cpu -> dense node index, -1 when absent
	cpuCore   []int32 // cpu -> core index, -1 when absent
	threads   int     // threads of the largest core
	kinds     [NodePlaceholder + 1]numa.Mask
}

// noMachine is what a nil *Machine reads as.
var noMachine Machine

// orEmpty returns m, or the empty machine when m is nil.
func (m *Machine) orEmpty() *Machine {
	if m == nil {
		return &noMachine
	}
	return m
}

// Name returns the machine's name (may be empty).
func (m *Machine) Name() string {
	if m == nil {
		return ""
	}
	return m.name
}

// NumNodes returns the number of NUMA nodes.
func (m *Machine) NumNodes() int {
	if m == nil {
		return 0
	}
	return len(m.nodes)
}

// AllNodes returns the mask of every NUMA node.
func (m *Machine) AllNodes() numa.Mask {
	m = m.orEmpty()
	return numa.FirstN(len(m.nodes))
}

// Node returns the NUMA node at dense index i (its CPUs are a copy).
// It panics when i is out of range: that is a programmer error.
func (m *Machine) Node(i int) Node {
	n := m.nodes[i]
	n.CPUs = n.CPUs.Clone()
	return n
}

// NodeKind returns the kind of the node at dense index i: [NodeCPU] when it
// has CPUs, else [NodeGPUMemory] when it is a GPU's memory, else
// [NodeMemory] when it has memory, else [NodePlaceholder]. It panics when i
// is out of range.
func (m *Machine) NodeKind(i int) NodeKind { return kindOf(&m.nodes[i]) }

// NodesOfKind returns the mask of the nodes of kind k (empty for a kind
// that does not exist).
func (m *Machine) NodesOfKind(k NodeKind) numa.Mask {
	m = m.orEmpty()
	if int(k) >= len(m.kinds) {
		return 0
	}
	return m.kinds[k]
}

// PodMemoryMiB returns the memory pods may be given on the node at dense
// index i: its MemoryMiB, or 0 for a GPU memory node. It panics when i is
// out of range.
func (m *Machine) PodMemoryMiB(i int) int64 {
	if m.nodes[i].GPUMemory {
		return 0
	}
	return m.nodes[i].MemoryMiB
}

// GPUMemoryNode returns the ID of the NUMA node holding the memory of the
// GPU with the given ID, and false when the machine has no such node.
func (m *Machine) GPUMemoryNode(gpu int) (numa.NodeID, bool) {
	m = m.orEmpty()
	for i := range m.kinds[NodeGPUMemory].All() {
		if m.nodes[i].GPU == gpu {
			return m.nodes[i].ID, true
		}
	}
	return 0, false
}

// Nodes returns every NUMA node in ascending ID order (copies).
func (m *Machine) Nodes() []Node {
	m = m.orEmpty()
	out := make([]Node, len(m.nodes))
	for i := range m.nodes {
		out[i] = m.Node(i)
	}
	return out
}

// NodeCPUs returns the CPUs of the node at dense index i without copying:
// the caller must not modify the result. It panics when i is out of range.
func (m *Machine) NodeCPUs(i int) numa.CPUSet { return m.nodes[i].CPUs }

// NodeID returns the ID of the node at dense index i. It panics when i is
// out of range.
func (m *Machine) NodeID(i int) numa.NodeID { return m.nodes[i].ID }

// NodeIDs returns every node ID in ascending order.
func (m *Machine) NodeIDs() []numa.NodeID {
	m = m.orEmpty()
	ids := make([]numa.NodeID, len(m.nodes))
	for i, n := range m.nodes {
		ids[i] = n.ID
	}
	return ids
}

// NodeIndex returns the dense index of the node with the given ID, and
// false when the machine (or a nil machine) has no such node. It takes
// O(log n) comparisons.
func (m *Machine) NodeIndex(id numa.NodeID) (int, bool) {
	if m == nil {
		return 0, false
	}
	// The IDs are compared in place: slices.BinarySearchFunc would copy
	// each probed Node.
	nodes := m.nodes
	lo := sort.Search(len(nodes), func(i int) bool { return nodes[i].ID >= id })
	return lo, lo < len(nodes) && nodes[lo].ID == id
}

// MaskOf returns the mask of the given node IDs, or an error naming the
// first ID the machine does not have.
func (m *Machine) MaskOf(ids ...numa.NodeID) (numa.Mask, error) {
	var mask numa.Mask
	for _, id := range ids {
		i, ok := m.NodeIndex(id)
		if !ok {
			return 0, fmt.Errorf("%w: the machine has no NUMA node %d", ErrInvalid, id)
		}
		mask = mask.With(i)
	}
	return mask, nil
}

// IDsOf returns the node IDs of mask, ascending. Bits beyond the machine's
// nodes are ignored.
func (m *Machine) IDsOf(mask numa.Mask) []numa.NodeID {
	m = m.orEmpty()
	mask &= m.AllNodes()
	ids := make([]numa.NodeID, 0, mask.Count())
	for i := range mask.All() {
		ids = append(ids, m.nodes[i].ID)
	}
	return ids
}

// Sockets returns the known socket numbers, ascending.
func (m *Machine) Sockets() []int {
	m = m.orEmpty()
	return slices.Clone(m.sockets)
}

// Cores returns the physical cores, ordered by their lowest CPU (copies).
func (m *Machine) Cores() []Core {
	m = m.orEmpty()
	out := make([]Core, len(m.cores))
	for i, c := range m.cores {
		out[i] = Core{CPUs: c.CPUs.Clone(), NodeIndex: c.NodeIndex}
	}
	return out
}

// NumCores returns the number of physical cores.
func (m *Machine) NumCores() int {
	if m == nil {
		return 0
	}
	return len(m.cores)
}

// CoreCPUs returns the CPUs of core i without copying: the caller must not
// modify the result. It panics when i is out of range.
func (m *Machine) CoreCPUs(i int) numa.CPUSet { return m.cores[i].CPUs }

// CoreNode returns the dense index (not the ID) of the NUMA node of core
// i: its position in ascending ID order; m.NodeID(m.CoreNode(i)) is the ID.
// It panics when i is out of range.
func (m *Machine) CoreNode(i int) int { return m.cores[i].NodeIndex }

// ThreadsPerCore returns the number of hardware threads of the machine's
// largest core (1 without SMT).
func (m *Machine) ThreadsPerCore() int {
	m = m.orEmpty()
	return m.threads
}

// L3Groups returns the CPU groups that share a last-level cache (may be empty).
func (m *Machine) L3Groups() []numa.CPUSet {
	m = m.orEmpty()
	out := make([]numa.CPUSet, len(m.l3))
	for i, g := range m.l3 {
		out[i] = g.Clone()
	}
	return out
}

// CPUs returns every logical CPU of the machine, reserved ones included.
func (m *Machine) CPUs() numa.CPUSet {
	m = m.orEmpty()
	return m.allCPUs.Clone()
}

// NumCPUs returns the number of logical CPUs, reserved ones included.
func (m *Machine) NumCPUs() int {
	if m == nil {
		return 0
	}
	return m.allCPUs.Size()
}

// ReservedCPUs returns the CPUs never handed out (the kubelet's --reserved-cpus).
func (m *Machine) ReservedCPUs() numa.CPUSet {
	m = m.orEmpty()
	return m.reserved.Clone()
}

// CPUNode returns the dense index of the node holding cpu, or false when the
// machine has no such CPU.
func (m *Machine) CPUNode(cpu int) (int, bool) {
	m = m.orEmpty()
	if cpu < 0 || cpu >= len(m.cpuNode) || m.cpuNode[cpu] < 0 {
		return 0, false
	}
	return int(m.cpuNode[cpu]), true
}

// CPUCore returns the index of the core holding cpu, or false when the
// machine has no such CPU.
func (m *Machine) CPUCore(cpu int) (int, bool) {
	m = m.orEmpty()
	if cpu < 0 || cpu >= len(m.cpuCore) || m.cpuCore[cpu] < 0 {
		return 0, false
	}
	return int(m.cpuCore[cpu]), true
}

// Distances returns the NUMA distance table.
func (m *Machine) Distances() numa.Distances {
	m = m.orEmpty()
	return m.distances
}

// NUMASets returns the NUMA sets: a partition of the nodes, by default one
// set per socket. Sets are ordered by their lowest node.
func (m *Machine) NUMASets() []numa.Mask {
	m = m.orEmpty()
	return slices.Clone(m.sets)
}

// SetOf returns the index (into NUMASets) of the set holding the node at
// dense index i. It panics when i is out of range.
func (m *Machine) SetOf(i int) int { return m.setOf[i] }

// SetsCrossed returns how many NUMA sets mask touches.
func (m *Machine) SetsCrossed(mask numa.Mask) int {
	m = m.orEmpty()
	n := 0
	for _, s := range m.sets {
		if s&mask != 0 {
			n++
		}
	}
	return n
}

// GPUs returns the GPUs in ascending ID order.
func (m *Machine) GPUs() []GPU {
	m = m.orEmpty()
	return slices.Clone(m.gpus)
}

// NumGPUs returns the number of GPUs.
func (m *Machine) NumGPUs() int {
	if m == nil {
		return 0
	}
	return len(m.gpus)
}

// GPU returns the GPU with the given ID.
func (m *Machine) GPU(id int) (GPU, bool) {
	m = m.orEmpty()
	i, ok := slices.BinarySearchFunc(m.gpus, id, func(g GPU, id int) int { return g.ID - id })
	if !ok {
		return GPU{}, false
	}
	return m.gpus[i], true
}

// Devices returns the non-GPU devices, ordered by class then ID.
func (m *Machine) Devices() []Device {
	m = m.orEmpty()
	return slices.Clone(m.devices)
}

// NVLinks returns the NVLink connections, ordered by (A, B) with A < B.
func (m *Machine) NVLinks() []NVLink {
	m = m.orEmpty()
	return slices.Clone(m.nvlinks)
}

// NVLinkCount returns the number of NVLink links between GPUs a and b (0 when
// none is described). It takes O(log n) time in the NVLinks.
func (m *Machine) NVLinkCount(a, b int) int {
	m = m.orEmpty()
	if a > b {
		a, b = b, a
	}
	i, ok := slices.BinarySearchFunc(m.nvlinks, NVLink{A: a, B: b}, func(l, t NVLink) int {
		return cmp.Or(cmp.Compare(l.A, t.A), cmp.Compare(l.B, t.B))
	})
	if !ok {
		return 0
	}
	return m.nvlinks[i].Links
}
