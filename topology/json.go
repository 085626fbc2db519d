package topology

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/numaplace/numaplace/internal/readfile"
	"github.com/numaplace/numaplace/internal/strictjson"
	"github.com/numaplace/numaplace/numa"
)

// Spec is the topology interchange format of numaplace (what `numaplan
// topology --json` prints and `--topology FILE` reads), field for field.
// Required: numaNodes, each with id, socket (-1 when unknown) and cpus (""
// for a CPU-less node); numaNode on every GPU and device (-1 when unknown).
// Every other field is optional. [ParseJSON] refuses unknown fields (see
// there); [ParseJSONWith] can ignore them.
type Spec struct {
	// Name is the machine's name (JSON "name"); it may be empty.
	Name string `json:"name,omitempty"`
	// NUMANodes lists the NUMA nodes in any order (JSON "numaNodes",
	// required, at least one).
	NUMANodes []NodeSpec `json:"numaNodes"`
	// Distances is the NUMA distance table (JSON "distances"): Distances[i][j]
	// is the distance from NUMANodes[i] to NUMANodes[j], rows and columns in
	// the order of NUMANodes, each entry 1-255 with the local distance the
	// smallest of its row. When absent every local distance is 10 and every
	// remote one 20.
	Distances [][]int `json:"distances,omitempty"`
	// NUMASets are the NUMA sets, each a non-empty list of node IDs (JSON
	// "numaSets"); together they must partition the nodes. When absent
	// there is one set per socket (a node of unknown socket joins the set of
	// its nearest node with a known socket), or a single set when no node
	// has a socket.
	NUMASets [][]int `json:"numaSets,omitempty"`
	// Cores lists the physical cores as Linux cpulists of their SMT siblings,
	// such as "0,64" (JSON "cores"). CPUs in no listed core are cores of one
	// CPU each; a core must not span NUMA nodes.
	Cores []string `json:"cores,omitempty"`
	// L3Groups lists, as Linux cpulists, the disjoint groups of CPUs that
	// share a last-level cache (JSON "l3Groups"); empty when unknown.
	L3Groups []string `json:"l3Groups,omitempty"`
	// ReservedCPUs is the Linux cpulist of the CPUs that are never handed out
	// (JSON "reservedCPUs", the kubelet's --reserved-cpus); empty for none.
	ReservedCPUs string `json:"reservedCPUs,omitempty"`
	// GPUs lists the machine's GPUs (JSON "gpus").
	GPUs []GPUSpec `json:"gpus,omitempty"`
	// Devices lists the machine's non-GPU PCI devices (JSON "devices").
	Devices []DevSpec `json:"devices,omitempty"`
	// NVLinks lists the NVLink connections (JSON "nvlinks"), each exactly
	// three numbers [gpuA, gpuB, links]: two distinct GPU IDs (not
	// necessarily listed in GPUs) and a positive link count, each pair once.
	NVLinks [][]int `json:"nvlinks,omitempty"`
}

// NodeSpec is one NUMA node of a [Spec]. ID, Socket and CPUs are pointers
// so that a missing field is told apart from 0 and "".
type NodeSpec struct {
	// ID is the operating system's node number (JSON "id", required,
	// non-negative, unique; IDs may be sparse).
	ID *int `json:"id"`
	// Socket is the physical package the node belongs to (JSON "socket",
	// required, as the Builder has no missing value either); -1
	// ([UnknownSocket]) means unknown.
	Socket *int `json:"socket"`
	// CPUs is the Linux cpulist of the node's logical CPUs, such as "0-31"
	// (JSON "cpus", required; "" for a CPU-less node).
	CPUs *string `json:"cpus"`
	// MemoryMiB is the node's memory in MiB (JSON "memoryMiB"); 0 when
	// absent, never negative.
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
	// GPUMemoryOf marks the node as the memory of the GPU with this ID,
	// onlined as a NUMA node by the GPU's driver (JSON "gpuMemoryOf",
	// optional; the node must have no CPUs). Such memory is never given to
	// pods; see [Node.GPUMemory].
	GPUMemoryOf *int `json:"gpuMemoryOf,omitempty"`
}

// GPUSpec is one GPU of a [Spec]. A missing id is the GPU's position in the
// list; numaNode is required (-1 when unknown).
type GPUSpec struct {
	// ID is the GPU's index on the machine, as in nvidia-smi (JSON "id",
	// non-negative, unique); nil means the GPU's position in Spec.GPUs.
	ID *int `json:"id,omitempty"`
	// NUMANode is the ID of the GPU's NUMA node (JSON "numaNode",
	// required); -1 ([UnknownNode]) means unknown.
	NUMANode *int `json:"numaNode"`
	// BusID is the PCI address, such as "0000:1b:00.0" (JSON "busID",
	// optional).
	BusID string `json:"busID,omitempty"`
	// PCIeSwitch names the PCIe switch (or root port) the GPU sits under
	// (JSON "pcieSwitch", optional); GPUs with the same non-empty value
	// share it.
	PCIeSwitch string `json:"pcieSwitch,omitempty"`
	// UUID is the vendor's unique identifier, such as "GPU-..." (JSON
	// "uuid", optional).
	UUID string `json:"uuid,omitempty"`
	// MemoryMiB is the GPU's own memory in MiB (JSON "memoryMiB",
	// optional); 0 or absent when unknown, never negative.
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
}

// DevSpec is one non-GPU device of a [Spec]: id, class and numaNode (-1
// when unknown) are required.
type DevSpec struct {
	// ID identifies the device within its class, such as "mlx5_0" (JSON
	// "id", required, unique per class).
	ID string `json:"id"`
	// Class is the device class, such as "rdma" (JSON "class", required;
	// "gpu" is refused: GPUs go in Spec.GPUs).
	Class string `json:"class"`
	// NUMANode is the ID of the device's NUMA node (JSON "numaNode",
	// required); -1 ([UnknownNode]) means unknown.
	NUMANode *int `json:"numaNode"`
	// BusID is the PCI address (JSON "busID", optional).
	BusID string `json:"busID,omitempty"`
	// PCIeSwitch names the PCIe switch the device sits under (JSON
	// "pcieSwitch", optional).
	PCIeSwitch string `json:"pcieSwitch,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// JSONOptions tune [ParseJSONWith].
type JSONOptions struct {
	// IgnoreUnknownFields accepts and ignores fields this version does not
	// know, as a file written by a newer version may have. A field that
	// differs from a known one only in case is still refused.
	IgnoreUnknownFields bool
}

// specAliases are names people write for fields of the format; an unknown
// field so named gets the real name suggested.
var specAliases = map[string]string{
	"nodes": "numaNodes", "numa_nodes": "numaNodes",
	"package": "socket", "physicalPackageID": "socket", "physical_package_id": "socket",
	"cpulist": "cpus", "cpuset": "cpus",
	"memory": "memoryMiB", "memMiB": "memoryMiB", "memoryMb": "memoryMiB", "memoryBytes": "memoryMiB",
	"node": "numaNode", "numa_node": "numaNode", "numa": "numaNode",
	"reserved": "reservedCPUs", "reservedCpuset": "reservedCPUs", "sets": "numaSets",
	"siblings": "cores", "l3": "l3Groups", "pciAddress": "busID", "pciBusID": "busID",
	"switch": "pcieSwitch", "pciSwitch": "pcieSwitch", "type": "class", "kind": "class",
	"links": "nvlinks", "nvlink": "nvlinks", "slit": "distances",
}

// ParseJSON reads a machine from the interchange JSON, strictly: exactly one
// object; field names are case-sensitive; an unknown field is an error that
// names it and suggests the known field it may mean; a duplicate field, a
// string that is not valid UTF-8 and a missing required field are errors.
// Errors name the offending item and unwrap to [ErrInvalid] (or
// [ErrTooManyNodes], [ErrTooLarge]).
func ParseJSON(data []byte) (*Machine, error) { return ParseJSONWith(data, JSONOptions{}) }

// ParseJSONWith is [ParseJSON] with options, such as ignoring unknown
// fields. The caps ([MaxCPUs] for cores and L3 groups, [MaxDevices] for
// GPUs and devices together, [MaxNVLinks], numa.MaxNodes for NUMA nodes and
// distance rows) are enforced while the document is read, before its lists
// are decoded: a description over them is refused with a *[LimitError] (or
// *[TooManyNodesError]) after reading at most one item past the cap.
func ParseJSONWith(data []byte, opts JSONOptions) (*Machine, error) {
	var s Spec
	var devices int
	count := func(field string, i int) error {
		switch field {
		case "gpus", "devices":
			if devices++; devices > MaxDevices {
				return &LimitError{What: "devices (GPUs and other devices)", Count: devices, Limit: MaxDevices, AtLeast: true}
			}
		case "nvlinks":
			if i >= MaxNVLinks {
				return &LimitError{What: "NVLinks", Count: i + 1, Limit: MaxNVLinks, AtLeast: true}
			}
		case "cores":
			if i >= MaxCPUs {
				return &LimitError{What: "cores", Count: i + 1, Limit: MaxCPUs, AtLeast: true}
			}
		case "l3Groups":
			if i >= MaxCPUs {
				return &LimitError{What: "L3 groups", Count: i + 1, Limit: MaxCPUs, AtLeast: true}
			}
		case "numaNodes", "distances", "numaSets":
			if i >= numa.MaxNodes {
				return &TooManyNodesError{Nodes: i + 1, AtLeast: true}
			}
		}
		return nil
	}
	err := strictjson.Decode(data, &s, strictjson.Options{AllowUnknownFields: opts.IgnoreUnknownFields,
		Aliases: specAliases, CountItems: count})
	var le *LimitError
	var tn *TooManyNodesError
	switch {
	case errors.As(err, &le):
		return nil, le
	case errors.As(err, &tn):
		return nil, tn
	case err != nil:
		return nil, &ValidationError{Item: "topology JSON", Reason: "cannot decode", Cause: err}
	}
	return s.Build()
}

// MaxJSONBytes is the largest topology JSON [ReadJSON] and [ReadJSONFile]
// read (64 MiB: a machine at every cap is written in less); a longer input
// is refused with an error wrapping [ErrTooLarge] once that much has been
// read.
const MaxJSONBytes = 64 << 20

var errJSONTooLong = fmt.Errorf("%w: the topology JSON is longer than %d bytes (topology.MaxJSONBytes)", ErrTooLarge, MaxJSONBytes)

// ReadJSON is [ParseJSON] over a reader, of which it reads at most
// [MaxJSONBytes] (and one byte more to tell that it is longer).
func ReadJSON(r io.Reader) (*Machine, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxJSONBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading topology JSON: %w", ErrInvalid, err)
	}
	if len(data) > MaxJSONBytes {
		return nil, errJSONTooLong
	}
	return ParseJSON(data)
}

// ReadJSONFile is [ReadJSON] of the file at path, which must be a regular
// file (a FIFO, a device such as /dev/zero or a directory is refused
// without being read, so it cannot hang or grow without end). Errors name
// the path.
func ReadJSONFile(path string) (*Machine, error) {
	data, err := readfile.Regular(path, MaxJSONBytes)
	if errors.Is(err, readfile.ErrTooLarge) {
		return nil, fmt.Errorf("%s: %w", path, errJSONTooLong)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("%s: %w", path, pe.Err)
	}
	if err != nil {
		return nil, err
	}
	m, err := ParseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Build validates the spec and returns the machine (see [Builder.Build] for
// the checks).
func (s *Spec) Build() (*Machine, error) {
	if s == nil {
		return nil, invalid("topology JSON", "nil *Spec")
	}
	if s.NUMANodes == nil {
		return nil, invalid("numaNodes", "the field is required")
	}
	b := NewBuilder(s.Name)
	for i, n := range s.NUMANodes {
		item := fmt.Sprintf("numaNodes[%d]", i)
		if n.ID == nil {
			return nil, invalid(item, `"id" is required`)
		}
		item = fmt.Sprintf("numaNodes[%d] (id %d)", i, *n.ID)
		if n.CPUs == nil {
			return nil, invalid(item, `"cpus" is required ("" for a CPU-less node)`)
		}
		cpus, err := numa.ParseCPUSet(*n.CPUs)
		if err != nil {
			return nil, &ValidationError{Item: item, Reason: "bad cpus", Cause: err}
		}
		if n.Socket == nil {
			return nil, invalid(item, `"socket" is required (-1 when unknown)`)
		}
		node := Node{ID: numa.NodeID(*n.ID), Socket: *n.Socket, CPUs: cpus, MemoryMiB: n.MemoryMiB}
		if n.GPUMemoryOf != nil {
			node.GPUMemory, node.GPU = true, *n.GPUMemoryOf
		}
		b.AddNode(node)
	}
	if s.Distances != nil {
		b.SetDistances(s.Distances)
	}
	if s.NUMASets != nil {
		sets := make([][]numa.NodeID, len(s.NUMASets))
		for i, set := range s.NUMASets {
			for _, id := range set {
				sets[i] = append(sets[i], numa.NodeID(id))
			}
		}
		b.SetNUMASets(sets)
	}
	for i, c := range s.Cores {
		cpus, err := numa.ParseCPUSet(c)
		if err != nil {
			return nil, &ValidationError{Item: fmt.Sprintf("cores[%d]", i), Reason: "bad CPU list", Cause: err}
		}
		b.AddCore(cpus)
	}
	for i, c := range s.L3Groups {
		cpus, err := numa.ParseCPUSet(c)
		if err != nil {
			return nil, &ValidationError{Item: fmt.Sprintf("l3Groups[%d]", i), Reason: "bad CPU list", Cause: err}
		}
		b.AddL3(cpus)
	}
	reserved, err := numa.ParseCPUSet(s.ReservedCPUs)
	if err != nil {
		return nil, &ValidationError{Item: "reservedCPUs", Reason: "bad CPU list", Cause: err}
	}
	b.SetReservedCPUs(reserved)
	for i, g := range s.GPUs {
		gpu := GPU{ID: i, BusID: g.BusID, PCIeSwitch: g.PCIeSwitch, UUID: g.UUID, MemoryMiB: g.MemoryMiB}
		if g.ID != nil {
			gpu.ID = *g.ID
		}
		if g.NUMANode == nil {
			return nil, invalid(gpuItem(i, gpu), `"numaNode" is required (-1 when unknown)`)
		}
		gpu.NUMANode = numa.NodeID(*g.NUMANode)
		b.AddGPU(gpu)
	}
	for i, d := range s.Devices {
		dev := Device{ID: d.ID, Class: d.Class, BusID: d.BusID, PCIeSwitch: d.PCIeSwitch}
		if d.NUMANode == nil {
			return nil, invalid(devItem(i, dev), `"numaNode" is required (-1 when unknown)`)
		}
		dev.NUMANode = numa.NodeID(*d.NUMANode)
		b.AddDevice(dev)
	}
	for i, l := range s.NVLinks {
		if len(l) != 3 {
			return nil, invalid(fmt.Sprintf("nvlinks[%d]", i), "want [gpuA, gpuB, links], got %d numbers", len(l))
		}
		b.AddNVLink(l[0], l[1], l[2])
	}
	return b.Build()
}

// Spec returns the machine in the interchange format. Cores are written only
// when some core has more than one CPU (one CPU per core is the default);
// distances and NUMA sets are always written.
func (m *Machine) Spec() Spec {
	if m == nil {
		return Spec{}
	}
	s := Spec{Name: m.name, Distances: m.distances.Rows()}
	for _, n := range m.nodes {
		ns := NodeSpec{ID: ptr(int(n.ID)), Socket: ptr(n.Socket), CPUs: ptr(n.CPUs.String()), MemoryMiB: n.MemoryMiB}
		if n.GPUMemory {
			ns.GPUMemoryOf = ptr(n.GPU)
		}
		s.NUMANodes = append(s.NUMANodes, ns)
	}
	for _, set := range m.sets {
		ids := []int{}
		for i := range set.All() {
			ids = append(ids, int(m.nodes[i].ID))
		}
		s.NUMASets = append(s.NUMASets, ids)
	}
	if m.threads > 1 {
		for _, c := range m.cores {
			s.Cores = append(s.Cores, c.CPUs.String())
		}
	}
	for _, g := range m.l3 {
		s.L3Groups = append(s.L3Groups, g.String())
	}
	s.ReservedCPUs = m.reserved.String()
	for _, g := range m.gpus {
		s.GPUs = append(s.GPUs, GPUSpec{ID: ptr(g.ID), NUMANode: ptr(int(g.NUMANode)),
			BusID: g.BusID, PCIeSwitch: g.PCIeSwitch, UUID: g.UUID, MemoryMiB: g.MemoryMiB})
	}
	for _, d := range m.devices {
		s.Devices = append(s.Devices, DevSpec{ID: d.ID, Class: d.Class, NUMANode: ptr(int(d.NUMANode)),
			BusID: d.BusID, PCIeSwitch: d.PCIeSwitch})
	}
	for _, l := range m.nvlinks {
		s.NVLinks = append(s.NVLinks, []int{l.A, l.B, l.Links})
	}
	return s
}

var errNilMachine = fmt.Errorf("%w: nil *Machine", ErrInvalid)

// MarshalJSON writes the machine in the interchange format.
func (m *Machine) MarshalJSON() ([]byte, error) {
	if m == nil {
		return nil, errNilMachine
	}
	return json.Marshal(m.Spec())
}

// WriteJSON writes the machine in the interchange format, indented, with a
// final newline.
func (m *Machine) WriteJSON(w io.Writer) error {
	if m == nil {
		return errNilMachine
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(m.Spec())
}
