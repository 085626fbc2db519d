package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/internal/strictjson"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// NodeResourceTopology names and numaplace's attributes.
const (
	// NRTAPIVersion and NRTKind are those of the NodeResourceTopology CRD
	// (k8s.io/noderesourcetopology-api, v1alpha2).
	NRTAPIVersion = "topology.node.k8s.io/v1alpha2"
	NRTKind       = "NodeResourceTopology"
	// NRTZoneTypeNode is the type of a zone that is one NUMA node, named
	// "node-<id>".
	NRTZoneTypeNode = "Node"

	// AnnotationTopology is the node annotation in which the node side
	// publishes its machine in numaplace's topology interchange JSON, and
	// from which the scheduler side reads it.
	AnnotationTopology = "numaplace.io/topology"

	// NRTAttributeTopology is a report-level attribute holding the whole
	// machine in numaplace's topology interchange JSON (compact). When
	// present, [MachineFromNRT] builds the machine from it, so the
	// scheduler's model is the node's own, CPU for CPU: SMT cores, PCIe
	// switches, NVLinks, other device classes, NUMA sets and GPUs of unknown
	// NUMA node included.
	NRTAttributeTopology = "numaplace.io/topology"
	// NRTAttributeCPUs is a zone attribute: the zone's CPUs (Linux cpulist).
	NRTAttributeCPUs = "numaplace.io/cpus"
	// NRTAttributeReservedCPUs is a zone attribute: the zone's CPUs that
	// are never handed out (the kubelet's --reserved-cpus).
	NRTAttributeReservedCPUs = "numaplace.io/reserved-cpus"
	// NRTAttributeSocket is a zone attribute: the zone's socket number.
	NRTAttributeSocket = "numaplace.io/socket"
	// NRTAttributeGPUs is a zone attribute: the IDs of the zone's GPUs
	// (cpulist syntax, such as "0-3").
	NRTAttributeGPUs = "numaplace.io/gpus"

	// NRTAttributeTopologyManagerPolicy and NRTAttributeTopologyManagerScope
	// are the report-level attributes in which the kubelet's exporters
	// publish its Topology Manager settings.
	NRTAttributeTopologyManagerPolicy = "topologyManagerPolicy"
	NRTAttributeTopologyManagerScope  = "topologyManagerScope"

	// AnnotationKoordCPUTopology is Koordinator's node annotation with the
	// CPUs of the node: {"detail":[{"id":0,"core":0,"socket":0,"node":0}, ...]}.
	AnnotationKoordCPUTopology = "node.koordinator.sh/cpu-topology"
)

// ErrInvalidNRT is the category of unusable NodeResourceTopology reports and
// Koordinator CPU topology annotations.
var ErrInvalidNRT = errors.New("invalid node topology report")

// NRTQuantity is a Kubernetes quantity as a NodeResourceTopology writes it
// (a JSON string such as "56" or "1Ti"; a JSON number is read too).
type NRTQuantity string

// UnmarshalJSON reads a JSON string or number.
func (q *NRTQuantity) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*q = NRTQuantity(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("a quantity is a string or a number, got %s", b)
	}
	*q = NRTQuantity(n.String())
	return nil
}

// NRTResource is one resource of a zone.
type NRTResource struct {
	// Name is the resource name ("cpu", "aliyun.com/gpu", "memory").
	Name string `json:"name"`
	// Capacity is what the zone has (JSON "capacity").
	Capacity NRTQuantity `json:"capacity"`
	// Allocatable is what pods may get (JSON "allocatable"): the capacity
	// without reserved CPUs and unhealthy devices. For "cpu", empty means
	// the whole capacity.
	Allocatable NRTQuantity `json:"allocatable"`
	// Available is what is not allocated now (JSON "available");
	// [MachineFromNRT] does not read it.
	Available NRTQuantity `json:"available"`
}

// NRTCost is the distance from a zone to the named zone.
type NRTCost struct {
	// Name is the other zone's name, such as "node-1" (JSON "name").
	Name string `json:"name"`
	// Value is the distance to that zone (JSON "value"), as in the ACPI
	// SLIT: 10 to itself, 1-255.
	Value int64 `json:"value"`
}

// NRTAttribute is a named string value.
type NRTAttribute struct {
	// Name is the attribute's name, such as [NRTAttributeCPUs] (JSON
	// "name").
	Name string `json:"name"`
	// Value is the attribute's value (JSON "value").
	Value string `json:"value"`
}

// NRTZone is one zone of a report; numaplace reads zones of type "Node"
// named "node-<id>" and skips the others.
type NRTZone struct {
	// Name is "node-<id>" for a NUMA node.
	Name string `json:"name"`
	// Type is "Node" for a NUMA node.
	Type string `json:"type"`
	// Parent is the enclosing zone; numaplace writes "socket-<n>".
	Parent string `json:"parent,omitempty"`
	// Costs are the distances to every Node zone, itself included.
	Costs []NRTCost `json:"costs,omitempty"`
	// Attributes are named values, such as numaplace's cpulist.
	Attributes []NRTAttribute `json:"attributes,omitempty"`
	// Resources are the zone's amounts.
	Resources []NRTResource `json:"resources,omitempty"`
}

// NRTObjectMeta is the part of a Kubernetes object's metadata a report
// needs, with the JSON names of metav1.ObjectMeta.
type NRTObjectMeta struct {
	// Name is the node's name.
	Name string `json:"name,omitempty"`
	// Labels are the object's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are the object's annotations.
	Annotations map[string]string `json:"annotations,omitempty"`
	// OwnerReferences name the objects the report belongs to: the node
	// side makes its Node the owner, so that the report goes when the Node
	// is deleted.
	OwnerReferences []NRTOwnerReference `json:"ownerReferences,omitempty"`
}

// NRTOwnerReference is an owner of a report, with the JSON names of
// metav1.OwnerReference.
type NRTOwnerReference struct {
	// APIVersion and Kind are the owner's, such as "v1" and "Node".
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Name and UID identify the owner.
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// NodeResourceTopology mirrors the NodeResourceTopology custom resource
// (v1alpha2): per NUMA node (zone "node-<id>", type "Node") the capacity,
// allocatable and available amounts of "cpu", "aliyun.com/gpu" and
// "memory", the distances as costs, and attributes. The CRD has no CPU IDs;
// numaplace adds them as attributes (see [MachineFromNRT]).
type NodeResourceTopology struct {
	// APIVersion is the object's API version, [NRTAPIVersion] in the
	// reports numaplace writes (JSON "apiVersion").
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind is the object's kind, [NRTKind] in the reports numaplace writes
	// (JSON "kind").
	Kind string `json:"kind,omitempty"`
	// Metadata names the node.
	Metadata NRTObjectMeta `json:"metadata"`
	// TopologyPolicies is v1alpha1's field, deprecated in v1alpha2 (kept so
	// that older reports read).
	TopologyPolicies []string `json:"topologyPolicies,omitempty"`
	// Attributes are report-level named values (the Topology Manager's
	// policy and scope, numaplace's topology).
	Attributes []NRTAttribute `json:"attributes,omitempty"`
	// Zones are the NUMA nodes (and possibly zones of other types).
	Zones []NRTZone `json:"zones"`
}

// ParseNRT reads a NodeResourceTopology object from JSON. Errors wrap
// [ErrInvalidNRT].
//
// The object comes from the Kubernetes API (or NFD), whose objects have
// more fields than these (metadata, newer API versions): unknown fields are
// ignored, but keys that differ from a known one only in case, repeated
// keys and strings that are not valid UTF-8 are refused (internal/strictjson
// in its lenient mode).
func ParseNRT(data []byte) (*NodeResourceTopology, error) {
	var r NodeResourceTopology
	if err := strictjson.Decode(data, &r, strictjson.Options{AllowUnknownFields: true}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidNRT, err)
	}
	return &r, nil
}

func attr(attrs []NRTAttribute, name string) (string, bool) {
	for _, a := range attrs {
		if a.Name == name {
			return a.Value, true
		}
	}
	return "", false
}

// Attribute returns the report-level attribute with the given name.
func (r *NodeResourceTopology) Attribute(name string) (string, bool) { return attr(r.Attributes, name) }

// SetAttribute sets the report-level attribute name to value, replacing
// the first attribute of that name or adding one at the end.
func (r *NodeResourceTopology) SetAttribute(name, value string) {
	for i := range r.Attributes {
		if r.Attributes[i].Name == name {
			r.Attributes[i].Value = value
			return
		}
	}
	r.Attributes = append(r.Attributes, NRTAttribute{Name: name, Value: value})
}

// Attribute returns the zone attribute with the given name.
func (z *NRTZone) Attribute(name string) (string, bool) { return attr(z.Attributes, name) }

// Resource returns the zone's resource with the given name.
func (z *NRTZone) Resource(name string) (NRTResource, bool) {
	for _, r := range z.Resources {
		if r.Name == name {
			return r, true
		}
	}
	return NRTResource{}, false
}

// nodeZoneID returns the NUMA node ID of a zone named "node-<id>".
func nodeZoneID(name string) (numa.NodeID, bool) {
	s, ok := strings.CutPrefix(name, "node-")
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(s)
	if err != nil || id < 0 || strconv.Itoa(id) != s {
		return 0, false
	}
	return numa.NodeID(id), true
}

func nodeZoneName(id numa.NodeID) string { return "node-" + id.String() }

// Limits of a report read without numaplace's attributes, whose CPUs and
// GPUs are numbered by count.
const (
	maxNRTGPUs = 1 << 12
)

// nrtZone is a parsed Node zone.
type nrtZone struct {
	z        *NRTZone
	id       numa.NodeID
	cpus     int64 // capacity
	cpuAlloc int64
	gpus     int64 // capacity
	memMiB   int64
}

// MachineFromNRT builds the machine a NodeResourceTopology report describes.
//
// With the report-level attribute [NRTAttributeTopology] (which
// [NRTFromState] always writes) the machine is the node's own, exactly; its
// zones must then agree with it (one zone per NUMA node with its CPU and GPU
// counts), else the report is refused as inconsistent.
//
// Otherwise it is built from the zones of type "Node" (named "node-<id>"),
// in ascending ID order:
//   - CPUs: the zone attribute [NRTAttributeCPUs] when present (it must
//     hold as many CPUs as the cpu capacity says); otherwise CPU IDs are
//     synthetic, numbered by count: the zones in ascending ID order take
//     consecutive blocks of IDs, as many as their cpu capacity (zone
//     node-0 with capacity 56 gets 0-55, node-1 the next 56, ...). Such IDs
//     serve counting (Filter, Score) but are not the node's: a decision
//     made on them names CPUs by position only.
//   - Reserved CPUs: the zone attribute [NRTAttributeReservedCPUs] when
//     present, else the zone's lowest capacity-allocatable CPUs.
//   - Sockets: the zone attribute [NRTAttributeSocket], else a parent
//     named "socket-<n>", else unknown (the machine is then one NUMA set).
//   - GPUs: the "aliyun.com/gpu" resource (or "nvidia.com/gpu" when the
//     zone has no aliyun.com/gpu) gives each zone capacity GPUs; their IDs
//     are the zone attribute [NRTAttributeGPUs] when present, else
//     consecutive by zone order (node-0's first). Allocatable below
//     capacity means unhealthy GPUs; which ones, the report does not say:
//     mark them with allocator.State.SetDeviceHealth if known.
//   - Memory: the "memory" resource's capacity, in MiB.
//   - Distances: the costs (a missing cost is 10 to itself, 20 to others).
//
// SMT cores, PCIe switches, NVLinks, other device classes and GPUs of
// unknown NUMA node need the topology attribute. Errors wrap
// [ErrInvalidNRT] (and topology.ErrInvalid when the machine is invalid).
func MachineFromNRT(r *NodeResourceTopology) (*topology.Machine, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: no report (nil)", ErrInvalidNRT)
	}
	zones, err := r.nodeZones()
	if err != nil {
		return nil, err
	}
	if js, ok := r.Attribute(NRTAttributeTopology); ok {
		m, err := topology.ParseJSON([]byte(js))
		if err != nil {
			return nil, fmt.Errorf("%w: attribute %s: %w", ErrInvalidNRT, NRTAttributeTopology, err)
		}
		if err := checkZones(m, zones); err != nil {
			return nil, err
		}
		return m, nil
	}
	if len(zones) == 0 {
		return nil, fmt.Errorf("%w: no zone of type %q named node-<id>", ErrInvalidNRT, NRTZoneTypeNode)
	}
	b := topology.NewBuilder(r.Metadata.Name)
	var reserved numa.CPUSet
	nextCPU, nextGPU := int64(0), 0
	var total int64
	for _, z := range zones {
		total += z.cpus
	}
	if total > numa.MaxCPUID+1 {
		return nil, fmt.Errorf("%w: %d CPUs in all, more than %d", ErrInvalidNRT, total, numa.MaxCPUID+1)
	}
	for _, z := range zones {
		item := func(format string, args ...any) error {
			return fmt.Errorf("%w: zone %s: %s", ErrInvalidNRT, quote.Bare(z.z.Name), fmt.Sprintf(format, args...))
		}
		var cpus numa.CPUSet
		if v, ok := z.z.Attribute(NRTAttributeCPUs); ok {
			if cpus, err = numa.ParseCPUSet(v); err != nil {
				return nil, item("attribute %s: %v", NRTAttributeCPUs, err)
			}
			if int64(cpus.Size()) != z.cpus {
				return nil, item("attribute %s lists %d CPUs, the cpu capacity is %d", NRTAttributeCPUs, cpus.Size(), z.cpus)
			}
		} else if z.cpus > 0 {
			cpus = numa.CPURange(int(nextCPU), int(nextCPU+z.cpus-1))
			nextCPU += z.cpus
		}
		if v, ok := z.z.Attribute(NRTAttributeReservedCPUs); ok {
			res, err := numa.ParseCPUSet(v)
			if err != nil {
				return nil, item("attribute %s: %v", NRTAttributeReservedCPUs, err)
			}
			if !res.IsSubsetOf(cpus) {
				return nil, item("reserved CPUs %s are not the zone's", res.Difference(cpus))
			}
			reserved.UnionWith(res)
		} else if n := z.cpus - z.cpuAlloc; n > 0 {
			for c := range cpus.All() {
				if n == 0 {
					break
				}
				reserved.Add(c)
				n--
			}
		}
		socket := topology.UnknownSocket
		if v, ok := z.z.Attribute(NRTAttributeSocket); ok {
			if socket, err = strconv.Atoi(v); err != nil || socket < 0 {
				return nil, item("attribute %s %s is not a socket number", NRTAttributeSocket, quote.Short(v))
			}
		} else if s, ok := strings.CutPrefix(z.z.Parent, "socket-"); ok {
			if socket, err = strconv.Atoi(s); err != nil || socket < 0 {
				return nil, item("parent %s is not socket-<n>", quote.Short(z.z.Parent))
			}
		}
		b.AddNode(topology.Node{ID: z.id, Socket: socket, CPUs: cpus, MemoryMiB: z.memMiB})

		var gpuIDs []int
		if v, ok := z.z.Attribute(NRTAttributeGPUs); ok {
			set, err := numa.ParseCPUSet(v)
			if err != nil {
				return nil, item("attribute %s: %v", NRTAttributeGPUs, err)
			}
			gpuIDs = set.List()
			if int64(len(gpuIDs)) != z.gpus {
				return nil, item("attribute %s lists %d GPUs, the GPU capacity is %d", NRTAttributeGPUs, len(gpuIDs), z.gpus)
			}
		} else {
			for range z.gpus {
				gpuIDs = append(gpuIDs, nextGPU)
				nextGPU++
			}
		}
		for _, g := range gpuIDs {
			b.AddGPU(topology.GPU{ID: g, NUMANode: z.id})
		}
	}
	b.SetReservedCPUs(reserved)
	rows, err := costRows(zones)
	if err != nil {
		return nil, err
	}
	b.SetDistances(rows)
	m, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidNRT, err)
	}
	return m, nil
}

// nodeZones returns the zones of type Node in ascending ID order, with their
// amounts read.
func (r *NodeResourceTopology) nodeZones() ([]nrtZone, error) {
	var out []nrtZone
	var gpus int64
	for i := range r.Zones {
		z := &r.Zones[i]
		if z.Type != NRTZoneTypeNode {
			continue
		}
		id, ok := nodeZoneID(z.Name)
		if !ok {
			return nil, fmt.Errorf("%w: zone %s of type %s is not named node-<id>", ErrInvalidNRT, quote.Short(z.Name), NRTZoneTypeNode)
		}
		if len(out) >= numa.MaxNodes {
			return nil, fmt.Errorf("%w: more than %d zones of type %s", ErrInvalidNRT, numa.MaxNodes, NRTZoneTypeNode)
		}
		nz := nrtZone{z: z, id: id}
		whole := func(res, which string, q NRTQuantity) (int64, error) {
			v, err := ParseWhole(string(q))
			if err != nil {
				return 0, fmt.Errorf("%w: zone %s: %s %s: %w", ErrInvalidNRT, quote.Bare(z.Name), res, which, err)
			}
			return v, nil
		}
		var err error
		if res, ok := z.Resource(ResourceCPU); ok {
			if nz.cpus, err = whole(ResourceCPU, "capacity", res.Capacity); err != nil {
				return nil, err
			}
			nz.cpuAlloc = nz.cpus
			if res.Allocatable != "" {
				if nz.cpuAlloc, err = whole(ResourceCPU, "allocatable", res.Allocatable); err != nil {
					return nil, err
				}
			}
			if nz.cpuAlloc > nz.cpus {
				return nil, fmt.Errorf("%w: zone %s: cpu allocatable %d is above the capacity %d", ErrInvalidNRT, quote.Bare(z.Name), nz.cpuAlloc, nz.cpus)
			}
			if nz.cpus > numa.MaxCPUID+1 {
				return nil, fmt.Errorf("%w: zone %s: cpu capacity %d is above %d", ErrInvalidNRT, quote.Bare(z.Name), nz.cpus, numa.MaxCPUID+1)
			}
		}
		gpuRes, ok := z.Resource(ResourceAliyunGPU)
		if !ok {
			gpuRes, ok = z.Resource(ResourceNvidiaGPU)
		}
		if ok {
			if nz.gpus, err = whole(gpuRes.Name, "capacity", gpuRes.Capacity); err != nil {
				return nil, err
			}
			if gpus += nz.gpus; gpus > maxNRTGPUs {
				return nil, fmt.Errorf("%w: more than %d GPUs", ErrInvalidNRT, maxNRTGPUs)
			}
		}
		if res, ok := z.Resource(ResourceMemory); ok {
			if nz.memMiB, err = ParseMiB(string(res.Capacity)); err != nil {
				return nil, fmt.Errorf("%w: zone %s: memory capacity: %w", ErrInvalidNRT, quote.Bare(z.Name), err)
			}
		}
		out = append(out, nz)
	}
	slices.SortFunc(out, func(a, b nrtZone) int { return int(a.id) - int(b.id) })
	for i := 1; i < len(out); i++ {
		if out[i].id == out[i-1].id {
			return nil, fmt.Errorf("%w: zone %s is listed twice", ErrInvalidNRT, out[i].z.Name)
		}
	}
	return out, nil
}

// costRows returns the distance table of the zones (in their order).
func costRows(zones []nrtZone) ([][]int, error) {
	pos := make(map[string]int, len(zones))
	for i, z := range zones {
		pos[z.z.Name] = i
	}
	rows := make([][]int, len(zones))
	for i, z := range zones {
		rows[i] = make([]int, len(zones))
		for j := range rows[i] {
			rows[i][j] = numa.RemoteDistance
		}
		rows[i][i] = numa.LocalDistance
		for _, c := range z.z.Costs {
			j, ok := pos[c.Name]
			if !ok {
				return nil, fmt.Errorf("%w: zone %s: cost to unknown zone %s", ErrInvalidNRT, quote.Bare(z.z.Name), quote.Short(c.Name))
			}
			if c.Value < 1 || c.Value > 255 {
				return nil, fmt.Errorf("%w: zone %s: cost %d to %s is not in 1-255", ErrInvalidNRT, quote.Bare(z.z.Name), c.Value, c.Name)
			}
			rows[i][j] = int(c.Value)
		}
	}
	return rows, nil
}

// checkZones checks that a report's zones agree with the machine of its
// topology attribute.
// zoneNodes returns the nodes of m that a report gives a zone: those pods
// can use, the nodes with CPUs and the CPU-less nodes of plain memory. A
// GPU's memory node and a placeholder hold nothing a pod is given, so they
// have no zone; the machine in the topology attribute keeps them.
func zoneNodes(m *topology.Machine) numa.Mask {
	return m.NodesOfKind(topology.NodeCPU) | m.NodesOfKind(topology.NodeMemory)
}

// kindWords names a kind of node in an error.
func kindWords(k topology.NodeKind) string {
	switch k {
	case topology.NodeGPUMemory:
		return "a GPU's memory"
	case topology.NodePlaceholder:
		return "a placeholder without CPUs or memory"
	}
	return k.String()
}

func checkZones(m *topology.Machine, zones []nrtZone) error {
	if want := zoneNodes(m).Count(); len(zones) != want {
		return fmt.Errorf("%w: %d zones of type %s, but attribute %s has %d NUMA nodes pods can use",
			ErrInvalidNRT, len(zones), NRTZoneTypeNode, NRTAttributeTopology, want)
	}
	gpus := map[numa.NodeID]int64{}
	for _, g := range m.GPUs() {
		gpus[g.NUMANode]++
	}
	for _, z := range zones {
		i, ok := m.NodeIndex(z.id)
		if !ok {
			return fmt.Errorf("%w: zone %s: attribute %s has no NUMA node %d", ErrInvalidNRT, quote.Bare(z.z.Name), NRTAttributeTopology, z.id)
		}
		if !zoneNodes(m).Contains(i) {
			return fmt.Errorf("%w: zone %s: attribute %s gives NUMA node %d no zone (it is %s)",
				ErrInvalidNRT, quote.Bare(z.z.Name), NRTAttributeTopology, z.id, kindWords(m.NodeKind(i)))
		}
		if _, has := z.z.Resource(ResourceCPU); has && int64(m.NodeCPUs(i).Size()) != z.cpus {
			return fmt.Errorf("%w: zone %s: cpu capacity %d, but attribute %s gives the node %d CPUs",
				ErrInvalidNRT, quote.Bare(z.z.Name), z.cpus, NRTAttributeTopology, m.NodeCPUs(i).Size())
		}
		if z.gpus != gpus[z.id] {
			return fmt.Errorf("%w: zone %s: GPU capacity %d, but attribute %s gives the node %d GPUs",
				ErrInvalidNRT, quote.Bare(z.z.Name), z.gpus, NRTAttributeTopology, gpus[z.id])
		}
	}
	return nil
}

// NRTFromState returns the report the node side publishes for machine m
// whose allocations are s (nil: everything free): one zone "node-<id>" of
// type "Node" per NUMA node pods can use (every node but a GPU's memory
// node and a placeholder, see topology.NodeKind; costs only between such
// zones) with "cpu" (capacity: the node's CPUs;
// allocatable: without the reserved ones; available: the free ones),
// "aliyun.com/gpu" when the machine has GPUs (capacity: the node's GPUs;
// allocatable: the healthy ones; available: the free ones) and "memory"
// when the node's memory is known (available: what numaplace has not
// reserved per NUMA node); the distances as costs; numaplace's zone
// attributes (cpus, reserved CPUs, socket, GPU IDs); and the report-level
// attributes topologyManagerPolicy "none" and topologyManagerScope "pod"
// (numaplace nodes run the kubelet's Topology Manager with policy none) and
// [NRTAttributeTopology], the whole machine, so that [MachineFromNRT] gives
// back the same machine. Metadata.Name is left for the caller (the node's
// name). s must be a state of m, and is read by more than one call: pass
// one that no other goroutine changes meanwhile (a Clone, or a state under
// the caller's own lock, as kubelet.Node.Report does), or the amounts may
// be of different moments and, across an allocator.State.ReplaceMachine,
// of another machine than m.
func NRTFromState(m *topology.Machine, s *allocator.State) (*NodeResourceTopology, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: no machine (nil)", ErrInvalidNRT)
	}
	if s != nil && s.Machine() != m {
		return nil, fmt.Errorf("%w: the state is not of this machine", ErrInvalidNRT)
	}
	js, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidNRT, err)
	}
	r := &NodeResourceTopology{APIVersion: NRTAPIVersion, Kind: NRTKind, Attributes: []NRTAttribute{
		{Name: NRTAttributeTopologyManagerPolicy, Value: "none"},
		{Name: NRTAttributeTopologyManagerScope, Value: "pod"},
		{Name: NRTAttributeTopology, Value: string(js)},
	}}
	reserved := m.ReservedCPUs()
	gpusOf := map[numa.NodeID][]int{}
	for _, g := range m.GPUs() {
		gpusOf[g.NUMANode] = append(gpusOf[g.NUMANode], g.ID)
	}
	unhealthy := map[string]bool{}
	var freeCPUs numa.CPUSet
	if s != nil {
		for _, id := range s.Snapshot().Unhealthy[allocator.GPUClass] {
			unhealthy[id] = true
		}
		freeCPUs = s.FreeCPUs()
	} else {
		freeCPUs = m.CPUs().Difference(reserved)
	}
	zoned := zoneNodes(m)
	for i, n := range m.Nodes() {
		if !zoned.Contains(i) {
			continue
		}
		z := NRTZone{Name: nodeZoneName(n.ID), Type: NRTZoneTypeNode}
		if n.Socket != topology.UnknownSocket {
			z.Parent = "socket-" + strconv.Itoa(n.Socket)
		}
		for j := range zoned.All() {
			z.Costs = append(z.Costs, NRTCost{Name: nodeZoneName(m.NodeID(j)), Value: int64(m.Distances().At(i, j))})
		}
		res := n.CPUs.Intersection(reserved)
		z.Resources = append(z.Resources, NRTResource{Name: ResourceCPU,
			Capacity:    count(n.CPUs.Size()),
			Allocatable: count(n.CPUs.Size() - res.Size()),
			Available:   count(freeCPUs.IntersectionCount(n.CPUs))})
		if m.NumGPUs() > 0 {
			healthy := 0
			for _, g := range gpusOf[n.ID] {
				if !unhealthy[strconv.Itoa(g)] {
					healthy++
				}
			}
			free := int64(healthy)
			if s != nil {
				free = s.NodeFree(i)[allocator.GPUClass]
			}
			z.Resources = append(z.Resources, NRTResource{Name: ResourceAliyunGPU,
				Capacity: count(len(gpusOf[n.ID])), Allocatable: count(healthy), Available: count(int(free))})
		}
		if n.MemoryMiB > 0 {
			free := n.MemoryMiB
			if s != nil {
				free = s.NodeFree(i)["memory"]
			}
			z.Resources = append(z.Resources, NRTResource{Name: ResourceMemory,
				Capacity: mib(n.MemoryMiB), Allocatable: mib(n.MemoryMiB), Available: mib(free)})
		}
		z.Attributes = append(z.Attributes, NRTAttribute{Name: NRTAttributeCPUs, Value: n.CPUs.String()})
		if !res.IsEmpty() {
			z.Attributes = append(z.Attributes, NRTAttribute{Name: NRTAttributeReservedCPUs, Value: res.String()})
		}
		if n.Socket != topology.UnknownSocket {
			z.Attributes = append(z.Attributes, NRTAttribute{Name: NRTAttributeSocket, Value: strconv.Itoa(n.Socket)})
		}
		if ids := gpusOf[n.ID]; len(ids) > 0 {
			z.Attributes = append(z.Attributes, NRTAttribute{Name: NRTAttributeGPUs, Value: numa.NewCPUSet(ids...).String()})
		}
		r.Zones = append(r.Zones, z)
	}
	return r, nil
}

func count(n int) NRTQuantity { return NRTQuantity(strconv.Itoa(n)) }

func mib(n int64) NRTQuantity { return NRTQuantity(strconv.FormatInt(n, 10) + "Mi") }

// KoordCPUInfo is one CPU of Koordinator's node.koordinator.sh/cpu-topology
// annotation.
type KoordCPUInfo struct {
	// ID is the logical CPU's number (JSON "id"), unique.
	ID int `json:"id"`
	// Core is the CPU's physical core (JSON "core"), numbered within its
	// socket: CPUs with the same Socket and Core are SMT siblings.
	Core int `json:"core"`
	// Socket is the CPU's physical package (JSON "socket").
	Socket int `json:"socket"`
	// Node is the ID of the CPU's NUMA node (JSON "node").
	Node int `json:"node"`
}

// KoordCPUTopology is Koordinator's node.koordinator.sh/cpu-topology
// annotation.
type KoordCPUTopology struct {
	// Detail lists every CPU.
	Detail []KoordCPUInfo `json:"detail"`
}

// MachineFromKoordinatorCPUTopology builds a machine from Koordinator's
// node.koordinator.sh/cpu-topology annotation value and the node's GPUs
// (which the annotation does not describe; pass nil for none). CPUs with
// the same socket and core form one physical core; a NUMA node's socket is
// its CPUs' (CPUs of one node on two sockets are refused). Memory,
// distances and reserved CPUs are not in the annotation: memory is
// unknown (0), distances are the defaults (10 local, 20 remote), no CPU is
// reserved. Errors wrap [ErrInvalidNRT].
func MachineFromKoordinatorCPUTopology(annotation string, gpus []topology.GPU) (*topology.Machine, error) {
	var t KoordCPUTopology
	// Koordinator's CPUInfo has more fields than these (and may gain
	// others): unknown fields are ignored; miscased and repeated keys and
	// invalid UTF-8 are refused.
	if err := strictjson.Decode([]byte(annotation), &t, strictjson.Options{AllowUnknownFields: true}); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidNRT, AnnotationKoordCPUTopology, err)
	}
	if len(t.Detail) == 0 {
		return nil, fmt.Errorf("%w: %s: no CPU in detail", ErrInvalidNRT, AnnotationKoordCPUTopology)
	}
	type coreKey struct{ socket, core int }
	nodes := map[int]*topology.Node{}
	var nodeOrder []int
	cores := map[coreKey]*numa.CPUSet{}
	var coreOrder []coreKey
	seen := map[int]bool{}
	for i, c := range t.Detail {
		item := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s: detail[%d] (cpu %d): %s", ErrInvalidNRT, AnnotationKoordCPUTopology, i, c.ID,
				fmt.Sprintf(format, args...))
		}
		switch {
		case c.ID < 0 || c.ID > numa.MaxCPUID:
			return nil, item("CPU ID out of range 0-%d", numa.MaxCPUID)
		case c.Node < 0 || c.Socket < 0 || c.Core < 0:
			return nil, item("negative node, socket or core")
		case seen[c.ID]:
			return nil, item("listed twice")
		}
		seen[c.ID] = true
		n, ok := nodes[c.Node]
		if !ok {
			if len(nodes) == numa.MaxNodes {
				return nil, item("more than %d NUMA nodes", numa.MaxNodes)
			}
			n = &topology.Node{ID: numa.NodeID(c.Node), Socket: c.Socket}
			nodes[c.Node] = n
			nodeOrder = append(nodeOrder, c.Node)
		}
		if n.Socket != c.Socket {
			return nil, item("NUMA node %d is on sockets %d and %d", c.Node, n.Socket, c.Socket)
		}
		n.CPUs.Add(c.ID)
		k := coreKey{c.Socket, c.Core}
		if cores[k] == nil {
			cores[k] = &numa.CPUSet{}
			coreOrder = append(coreOrder, k)
		}
		cores[k].Add(c.ID)
	}
	b := topology.NewBuilder("")
	slices.Sort(nodeOrder)
	for _, id := range nodeOrder {
		b.AddNode(*nodes[id])
	}
	for _, k := range coreOrder {
		b.AddCore(*cores[k])
	}
	for _, g := range gpus {
		b.AddGPU(g)
	}
	m, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidNRT, AnnotationKoordCPUTopology, err)
	}
	return m, nil
}

// KoordinatorCPUTopology returns machine m as Koordinator's
// node.koordinator.sh/cpu-topology annotation value: every CPU, ascending,
// with its core (the index of its physical core, ordered by lowest CPU),
// socket (0 when unknown) and NUMA node ID.
func KoordinatorCPUTopology(m *topology.Machine) string {
	if m == nil {
		return `{"error":"no machine (nil)"}`
	}
	var t KoordCPUTopology
	sockets := make([]int, m.NumNodes())
	for i, n := range m.Nodes() {
		sockets[i] = max(n.Socket, 0)
	}
	for cpu := range m.CPUs().All() {
		i, _ := m.CPUNode(cpu)
		core, _ := m.CPUCore(cpu)
		t.Detail = append(t.Detail, KoordCPUInfo{ID: cpu, Core: core, Socket: sockets[i], Node: int(m.NodeID(i))})
	}
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return string(b)
}
