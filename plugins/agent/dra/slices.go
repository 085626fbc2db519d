package dra

import (
	"cmp"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// DriverName is the DRA driver name numaplace-agent registers by default.
const DriverName = "gpu.numaplace.io"

// The attributes of the published devices. The standard ones
// (resource.kubernetes.io/...) are fully qualified; numaplace's own are
// unqualified, so they belong to the driver's domain (gpu.numaplace.io/type
// and so on, with the default driver name); a CEL selector reads them as
// device.attributes["gpu.numaplace.io"].type.
const (
	// AttrNUMANode is the standard NUMA node attribute (KEP-6072): an int,
	// or an int list with [Inventory.ListAttributes].
	AttrNUMANode = deviceattribute.StandardDeviceAttributeNUMANode
	// AttrPCIeRoot is the standard PCIe root complex attribute, a string
	// such as "pci0000:00".
	AttrPCIeRoot = deviceattribute.StandardDeviceAttributePCIeRoot
	// AttrPCIBusID is the standard PCI address attribute, a string such as
	// "0000:1b:00.0".
	AttrPCIBusID = deviceattribute.StandardDeviceAttributePCIBusID
	// AttrType is "gpu" or "nic" (string).
	AttrType resourceapi.QualifiedName = "type"
	// AttrUUID is a GPU's UUID (string), when known.
	AttrUUID resourceapi.QualifiedName = "uuid"
	// AttrIndex is a GPU's index on the machine, as nvidia-smi numbers it
	// (int).
	AttrIndex resourceapi.QualifiedName = "index"
	// AttrMinor is a GPU's device minor, N of /dev/nvidiaN (int).
	AttrMinor resourceapi.QualifiedName = "minor"
	// AttrPCIeSwitch names the PCIe switch a GPU or NIC sits under
	// (string), when known; devices with the same value share it.
	AttrPCIeSwitch resourceapi.QualifiedName = "pcieSwitch"
	// AttrNVLinkGroup is the NVLink domain of a GPU with NVLinks (int): the
	// lowest GPU index among the GPUs it reaches over NVLink, directly or
	// not. GPUs with the same value are joined by NVLink; a GPU without
	// NVLinks has no such attribute.
	AttrNVLinkGroup resourceapi.QualifiedName = "nvlinkGroup"
	// AttrNVLinks is the number of GPUs a GPU has a direct NVLink to (int).
	AttrNVLinks resourceapi.QualifiedName = "nvlinks"
	// AttrIBDevice is a NIC's InfiniBand device name, such as "mlx5_0"
	// (string).
	AttrIBDevice resourceapi.QualifiedName = "ibDevice"
	// CapacityMemory is a GPU's own memory (a quantity in Mi), when known.
	CapacityMemory resourceapi.QualifiedName = "memory"
)

// Type values of [AttrType].
const (
	TypeGPU = "gpu"
	TypeNIC = "nic"
)

// UnhealthyReason is the value of the NoSchedule taint an unhealthy device
// gets: its device node is missing.
const UnhealthyReason = "DeviceNodeMissing"

// MaxDevicesPerSlice is how many devices one ResourceSlice holds: the API's
// limit for slices whose devices may carry taints or list attributes
// (resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures), so a device
// that turns unhealthy never makes its slice invalid.
const MaxDevicesPerSlice = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures

// Inventory is what the published devices are made of: the machine and
// what the node knows of its devices besides.
type Inventory struct {
	// Machine is the node's machine.
	Machine *topology.Machine
	// DriverName is the driver's name, the domain of numaplace's own
	// attributes and of the unhealthy taint's key; "" means [DriverName].
	DriverName string
	// Pool is the pool's name: the node's name.
	Pool string
	// Minors are the GPUs' device minors by GPU ID; a GPU without one is
	// published with its index.
	Minors map[int]int
	// PCIeRoots are the PCIe root complexes ("pci0000:00") by PCI bus ID;
	// a device without one has no pcieRoot attribute (see [PCIeRoots]).
	PCIeRoots map[string]string
	// ListAttributes publishes resource.kubernetes.io/numaNode as a list
	// (the cluster's DRAListTypeAttributes feature must be on).
	ListAttributes bool
	// GPUs restricts the published GPUs to these IDs (nil: every GPU).
	GPUs []int
	// NoNICs leaves the RDMA NICs out.
	NoNICs bool
}

// DeviceRef says which of the machine's devices a published device is.
type DeviceRef struct {
	// Class is allocator.GPUClass ("gpu") or the device's class ("rdma").
	Class string
	// GPU is the GPU's ID, for class "gpu".
	GPU int
	// ID is the device's ID (such as "mlx5_0"), for other classes.
	ID string
}

// device is one published device with what it is.
type device struct {
	name string
	ref  DeviceRef
	dev  resourceapi.Device
}

// Catalog is the devices of an inventory, built once: their names,
// attributes and capacities. It is immutable and safe for concurrent use.
type Catalog struct {
	inv     Inventory
	devices []device // GPUs by ID, then NICs by ID
	byName  map[string]int
	notes   []string
	sockets []int // by dense node index
}

// NewCatalog builds the devices of inv. Devices whose NUMA node has no
// CPUs get the nearest node with CPUs (see [Catalog.Notes] for what was
// left out, such as the numaNode of a device whose node is unknown).
func NewCatalog(inv Inventory) (*Catalog, error) {
	if inv.Machine == nil {
		return nil, fmt.Errorf("dra: no machine")
	}
	if inv.DriverName == "" {
		inv.DriverName = DriverName
	}
	c := &Catalog{inv: inv, byName: map[string]int{}, sockets: nodeSockets(inv.Machine)}
	m := inv.Machine
	var served map[int]bool
	if inv.GPUs != nil {
		served = map[int]bool{}
		for _, g := range inv.GPUs {
			if _, ok := m.GPU(g); !ok {
				return nil, fmt.Errorf("dra: GPU %d is not a GPU of this machine", g)
			}
			served[g] = true
		}
	}
	groups := nvlinkGroups(m)
	peers := map[int]int{}
	for _, l := range m.NVLinks() {
		peers[l.A]++
		peers[l.B]++
	}
	for _, g := range m.GPUs() {
		if served != nil && !served[g.ID] {
			continue
		}
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrType:  str(TypeGPU),
			AttrIndex: integer(int64(g.ID)),
		}
		minor, ok := inv.Minors[g.ID]
		if !ok {
			minor = g.ID
		}
		attrs[AttrMinor] = integer(int64(minor))
		if err := setString(attrs, AttrUUID, g.UUID); err != nil {
			return nil, fmt.Errorf("dra: GPU %d: %w", g.ID, err)
		}
		if group, ok := groups[g.ID]; ok {
			attrs[AttrNVLinkGroup] = integer(int64(group))
			attrs[AttrNVLinks] = integer(int64(peers[g.ID]))
		}
		name := "gpu-" + strconv.Itoa(g.ID)
		if err := c.common(attrs, name, g.NUMANode, g.BusID, g.PCIeSwitch); err != nil {
			return nil, fmt.Errorf("dra: GPU %d: %w", g.ID, err)
		}
		dev := resourceapi.Device{Name: name, Attributes: attrs}
		if g.MemoryMiB > 0 {
			dev.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				CapacityMemory: {Value: *resource.NewQuantity(g.MemoryMiB<<20, resource.BinarySI)},
			}
		}
		c.add(device{name: name, ref: DeviceRef{Class: allocator.GPUClass, GPU: g.ID}, dev: dev})
	}
	if !inv.NoNICs {
		for _, d := range m.Devices() {
			if d.Class != "rdma" {
				continue
			}
			attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{AttrType: str(TypeNIC)}
			if err := setString(attrs, AttrIBDevice, d.ID); err != nil {
				return nil, fmt.Errorf("dra: RDMA device %s: %w", d.ID, err)
			}
			name := c.uniqueName("nic-" + dnsLabel(d.ID))
			if err := c.common(attrs, name, d.NUMANode, d.BusID, d.PCIeSwitch); err != nil {
				return nil, fmt.Errorf("dra: RDMA device %s: %w", d.ID, err)
			}
			c.add(device{name: name, ref: DeviceRef{Class: d.Class, ID: d.ID},
				dev: resourceapi.Device{Name: name, Attributes: attrs}})
		}
	}
	return c, nil
}

func (c *Catalog) add(d device) {
	c.byName[d.name] = len(c.devices)
	c.devices = append(c.devices, d)
}

// common sets the attributes GPUs and NICs share: numaNode, pciBusID,
// pcieRoot and pcieSwitch.
func (c *Catalog) common(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name string, node numa.NodeID, bus, sw string) error {
	if ids, ok := numaNodeValue(c.inv.Machine, c.sockets, node, c.inv.ListAttributes); ok {
		if c.inv.ListAttributes {
			attrs[AttrNUMANode] = resourceapi.DeviceAttribute{IntValues: ids}
		} else {
			attrs[AttrNUMANode] = integer(ids[0])
		}
	} else {
		c.notes = append(c.notes, fmt.Sprintf("%s: no %s attribute: its NUMA node is unknown", name, AttrNUMANode))
	}
	if bus != "" {
		if IsPCIBusID(bus) {
			attrs[AttrPCIBusID] = str(bus)
		} else {
			c.notes = append(c.notes, fmt.Sprintf("%s: no %s attribute: %q is not a PCI address in extended BDF notation (dddd:bb:dd.f, lower case)", name, AttrPCIBusID, bus))
		}
		if root, ok := c.inv.PCIeRoots[bus]; ok {
			attrs[AttrPCIeRoot] = str(root)
		}
	}
	return setString(attrs, AttrPCIeSwitch, sw)
}

// uniqueName returns name, or name with "-2", "-3", ... when a device
// already has it.
func (c *Catalog) uniqueName(name string) string {
	if _, ok := c.byName[name]; !ok {
		return name
	}
	for k := 2; ; k++ {
		n := name + "-" + strconv.Itoa(k)
		if _, ok := c.byName[n]; !ok {
			return n
		}
	}
}

// Notes says what the catalog left out and why, one line per device
// attribute (for the log).
func (c *Catalog) Notes() []string { return slices.Clone(c.notes) }

// Inventory returns the inventory the catalog was built from.
func (c *Catalog) Inventory() Inventory { return c.inv }

// Lookup returns what the device of the given name is, and false for a
// name the catalog does not publish.
func (c *Catalog) Lookup(name string) (DeviceRef, bool) {
	i, ok := c.byName[name]
	if !ok {
		return DeviceRef{}, false
	}
	return c.devices[i].ref, true
}

// Names returns the names of the published devices, in publishing order
// (GPUs by index, then NICs by ID).
func (c *Catalog) Names() []string {
	out := make([]string, len(c.devices))
	for i, d := range c.devices {
		out[i] = d.name
	}
	return out
}

// NameOf returns the published name of a device, and false when the
// catalog does not publish it.
func (c *Catalog) NameOf(ref DeviceRef) (string, bool) {
	for _, d := range c.devices {
		if d.ref == ref {
			return d.name, true
		}
	}
	return "", false
}

// Resources returns the node's pool: every device of the catalog, each
// unhealthy one (unhealthy holds device IDs by class, as
// kubelet.Node.Unhealthy returns them: "gpu" by decimal index, "rdma" by
// ID) with a NoSchedule taint whose key is <driver name>/unhealthy, in
// slices of at most [MaxDevicesPerSlice] devices. The result shares
// nothing with the catalog.
func (c *Catalog) Resources(unhealthy map[string][]string) resourceslice.DriverResources {
	sick := map[DeviceRef]bool{}
	for class, ids := range unhealthy {
		for _, id := range ids {
			if class == allocator.GPUClass {
				g, err := strconv.Atoi(id)
				if err != nil {
					continue
				}
				sick[DeviceRef{Class: class, GPU: g}] = true
			} else {
				sick[DeviceRef{Class: class, ID: id}] = true
			}
		}
	}
	taint := resourceapi.DeviceTaint{Key: c.inv.DriverName + "/unhealthy", Value: UnhealthyReason,
		Effect: resourceapi.DeviceTaintEffectNoSchedule}
	pool := resourceslice.Pool{}
	for start := 0; start < len(c.devices); start += MaxDevicesPerSlice {
		chunk := c.devices[start:min(start+MaxDevicesPerSlice, len(c.devices))]
		s := resourceslice.Slice{Devices: make([]resourceapi.Device, len(chunk))}
		for i, d := range chunk {
			s.Devices[i] = *d.dev.DeepCopy()
			if sick[d.ref] {
				s.Devices[i].Taints = []resourceapi.DeviceTaint{taint}
			}
		}
		pool.Slices = append(pool.Slices, s)
	}
	if len(pool.Slices) == 0 {
		pool.Slices = []resourceslice.Slice{{}}
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{c.inv.Pool: pool}}
}

// BuildResources is [NewCatalog] then [Catalog.Resources]: the node's pool
// from the inventory and the unhealthy devices.
func BuildResources(inv Inventory, unhealthy map[string][]string) (resourceslice.DriverResources, error) {
	c, err := NewCatalog(inv)
	if err != nil {
		return resourceslice.DriverResources{}, err
	}
	return c.Resources(unhealthy), nil
}

// CPUNode returns the NUMA node whose CPUs are closest to a device on NUMA
// node id: id itself when it has CPUs, else the node with CPUs at the
// least SLIT distance from it (ties to the lowest ID), as on machines where
// a GPU's PCI numa_node is a CPU-less memory node. It returns false for an
// unknown node ([topology.UnknownNode] or one the machine lacks) or a
// machine without CPUs.
func CPUNode(m *topology.Machine, id numa.NodeID) (numa.NodeID, bool) {
	return m.NearestCPUNode(id)
}

// NUMANodeValue returns the value of resource.kubernetes.io/numaNode for a
// device on NUMA node id: the node of [CPUNode] first and, when list is
// true, then the other nodes of the same (known) socket at the least SLIT
// distance from it, ascending, as KEP-6072 specifies the list form (nodes
// of CPUs or plain memory only: not a GPU's memory, not a placeholder). It
// returns false when the node is unknown: such a device gets no numaNode
// attribute.
func NUMANodeValue(m *topology.Machine, id numa.NodeID, list bool) ([]int64, bool) {
	return numaNodeValue(m, nodeSockets(m), id, list)
}

// nodeSockets returns the socket of each node by dense index.
func nodeSockets(m *topology.Machine) []int {
	nodes := m.Nodes()
	out := make([]int, len(nodes))
	for i, n := range nodes {
		out[i] = n.Socket
	}
	return out
}

// numaNodeValue is NUMANodeValue with the nodes' sockets by dense index.
func numaNodeValue(m *topology.Machine, sockets []int, id numa.NodeID, list bool) ([]int64, bool) {
	first, ok := CPUNode(m, id)
	if !ok {
		return nil, false
	}
	out := []int64{int64(first)}
	if !list {
		return out, true
	}
	i, _ := m.NodeIndex(first)
	socket := sockets[i]
	if socket == topology.UnknownSocket {
		return out, true
	}
	d := m.Distances()
	type cand struct {
		id   numa.NodeID
		dist int
	}
	var cands []cand
	for j := range m.NumNodes() {
		other := m.NodeID(j)
		if other == first || sockets[j] != socket {
			continue
		}
		if k := m.NodeKind(j); k == topology.NodeGPUMemory || k == topology.NodePlaceholder {
			// A GPU's memory and an empty placeholder hold nothing a pod
			// is given: no CPU or memory driver publishes them.
			continue
		}
		if dist, ok := d.Distance(first, other); ok {
			cands = append(cands, cand{other, dist})
		}
	}
	if len(cands) == 0 {
		return out, true
	}
	least := slices.MinFunc(cands, func(a, b cand) int { return cmp.Compare(a.dist, b.dist) }).dist
	for _, c := range cands { // ascending IDs
		if c.dist == least {
			out = append(out, int64(c.id))
		}
	}
	return out, true
}

// nvlinkGroups returns, for each GPU with an NVLink, the lowest GPU ID of
// its connected component in the machine's NVLink graph.
func nvlinkGroups(m *topology.Machine) map[int]int {
	parent := map[int]int{}
	var find func(int) int
	find = func(x int) int {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	for _, l := range m.NVLinks() {
		for _, g := range []int{l.A, l.B} {
			if _, ok := parent[g]; !ok {
				parent[g] = g
			}
		}
		a, b := find(l.A), find(l.B)
		if a != b {
			parent[max(a, b)] = min(a, b)
		}
	}
	out := make(map[int]int, len(parent))
	for _, g := range slices.Sorted(maps.Keys(parent)) {
		out[g] = find(g)
	}
	return out
}

// dnsLabel turns s into a DNS label's characters: lower case letters,
// digits and '-', with '-' for anything else and none at the ends, at most
// 52 characters (room for "nic-" and a "-N" suffix).
func dnsLabel(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b = append(b, c)
		case c >= 'A' && c <= 'Z':
			b = append(b, c+'a'-'A')
		default:
			b = append(b, '-')
		}
	}
	out := strings.Trim(string(b), "-")
	if len(out) > 52 {
		out = strings.TrimRight(out[:52], "-")
	}
	if out == "" {
		out = "x"
	}
	return out
}

// pciBusID is the format deviceattribute.GetPCIBusIDAttribute accepts
// (its verifyPCIBDFFormat), compiled once: that function compiles it at
// every call, most of the time of building a catalog.
var pciBusID = regexp.MustCompile(`^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-9a-f]{1})$`)

// IsPCIBusID reports whether s is a PCI address as the standard
// resource.kubernetes.io/pciBusID attribute takes it: extended BDF
// notation in lower case, such as "0000:1b:00.0" (the format of
// deviceattribute.GetPCIBusIDAttribute).
func IsPCIBusID(s string) bool { return pciBusID.MatchString(s) }

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func integer(v int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: &v} }

// setString sets a string attribute when v is not empty; a value longer
// than the API allows is an error.
func setString(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, name resourceapi.QualifiedName, v string) error {
	if v == "" {
		return nil
	}
	if len(v) > resourceapi.DeviceAttributeMaxValueLength {
		return fmt.Errorf("attribute %s: %q is longer than %d bytes", name, v, resourceapi.DeviceAttributeMaxValueLength)
	}
	attrs[name] = str(v)
	return nil
}

// PCIeRoots returns the PCIe root complex ("pci0000:00") of each GPU and
// NIC of m that has a bus ID, read by deviceattribute's
// GetPCIeRootAttributeByPCIBusID from sys, a file system rooted at a sys
// directory (such as os.DirFS("/sys")): the first component of the
// device's path under devices/, the target of its bus/pci/devices link. A
// device the tree does not have (a machine described by --topology or
// --preset) is left out, and so has no pcieRoot attribute.
func PCIeRoots(m *topology.Machine, sys fs.ReadLinkFS) map[string]string {
	out := map[string]string{}
	if sys == nil {
		return out
	}
	var buses []string
	for _, g := range m.GPUs() {
		buses = append(buses, g.BusID)
	}
	for _, d := range m.Devices() {
		buses = append(buses, d.BusID)
	}
	for _, bus := range buses {
		if bus == "" {
			continue
		}
		a, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(bus, deviceattribute.WithFS(sys))
		if err == nil && a.Value.StringValue != nil {
			out[bus] = *a.Value.StringValue
		}
	}
	return out
}
