package draslices

import (
	"fmt"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/topology"
)

// MaxDevices is how many devices one slice holds, as the driver cuts them
// (the API's limit for slices with taints or list attributes).
const MaxDevices = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures

// Published returns the ResourceSlices the driver publishes for machine m
// on node: one pool named after the node, the GPUs (gpu-<index>) then the
// RDMA NICs (NICName), with the driver's attributes (type, index, minor,
// uuid, pcieSwitch, nvlinkGroup and nvlinks, ibDevice; the standard
// numaNode, and pciBusID when known) and the GPU memory capacity, cut into
// slices of MaxDevices devices named <node>-<driver>-<i>.
func Published(driver, node string, m *topology.Machine) []*resourceapi.ResourceSlice {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
	num := func(v int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: &v} }
	// nvlinkGroup: the lowest GPU index joined by NVLink (the presets
	// join all of them or none).
	peers := map[int]int{}
	lowest := -1
	for _, l := range m.NVLinks() {
		peers[l.A]++
		peers[l.B]++
		if lowest < 0 || min(l.A, l.B) < lowest {
			lowest = min(l.A, l.B)
		}
	}
	common := func(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, node int, bus, sw string) {
		attrs["resource.kubernetes.io/numaNode"] = num(int64(node))
		if bus != "" {
			attrs["resource.kubernetes.io/pciBusID"] = str(bus)
		}
		if sw != "" {
			attrs["pcieSwitch"] = str(sw)
		}
	}
	var devs []resourceapi.Device
	for _, g := range m.GPUs() {
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type": str("gpu"), "index": num(int64(g.ID)), "minor": num(int64(g.ID))}
		if g.UUID != "" {
			attrs["uuid"] = str(g.UUID)
		}
		if peers[g.ID] > 0 {
			attrs["nvlinkGroup"] = num(int64(lowest))
			attrs["nvlinks"] = num(int64(peers[g.ID]))
		}
		common(attrs, int(g.NUMANode), g.BusID, g.PCIeSwitch)
		d := resourceapi.Device{Name: "gpu-" + strconv.Itoa(g.ID), Attributes: attrs}
		if g.MemoryMiB > 0 {
			d.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(g.MemoryMiB<<20, resource.BinarySI)}}
		}
		devs = append(devs, d)
	}
	for _, d := range m.Devices() {
		if d.Class != "rdma" {
			continue
		}
		attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": str("nic"), "ibDevice": str(d.ID)}
		common(attrs, int(d.NUMANode), d.BusID, d.PCIeSwitch)
		devs = append(devs, resourceapi.Device{Name: NICName(d.ID), Attributes: attrs})
	}
	count := (len(devs) + MaxDevices - 1) / MaxDevices
	var out []*resourceapi.ResourceSlice
	for i := 0; i < len(devs); i += MaxDevices {
		out = append(out, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", node, driver, len(out))},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
				Pool:    resourceapi.ResourcePool{Name: node, ResourceSliceCount: int64(count)},
				Devices: devs[i:min(i+MaxDevices, len(devs))]},
		})
	}
	return out
}

// NICName is the device name the driver gives the NIC with InfiniBand
// device ibdev: nic-<ibdev>, underscores as hyphens.
func NICName(ibdev string) string { return "nic-" + strings.ReplaceAll(ibdev, "_", "-") }
