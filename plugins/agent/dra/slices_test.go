package dra_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	draCEL "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/numaplace/numaplace/plugins/agent/dra"
	"github.com/numaplace/numaplace/topology"
)

// writeSys writes a file tree under root from "path = content" (a file)
// and "path -> target" (a symbolic link) lines.
func writeSys(t *testing.T, root string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if p, content, ok := strings.Cut(l, " = "); ok {
			p = filepath.Join(root, p)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(content+"\n"), 0o644))
		} else if p, target, ok := strings.Cut(l, " -> "); ok {
			p = filepath.Join(root, p)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.Symlink(target, p))
		} else {
			t.Fatalf("writeSys: cannot read %q", l)
		}
	}
}

// fakeSys writes a machine of 2 CPU nodes (0: CPUs 0-1, 1: CPUs 2-3, one
// socket) and a CPU-less node 2 whose distances (row2) say which CPU node
// is nearer; a GPU whose PCI numa_node is 2, under a PCIe switch, beside
// ConnectX mlx5_0 (node 0); and NIC mlx5_1 on node 1 under another root
// complex.
func fakeSys(t *testing.T, row0, row1, row2 string) string {
	t.Helper()
	root := t.TempDir()
	var lines []string
	for n, cpus := range []string{"0-1", "2-3", ""} {
		dir := "sys/devices/system/node/node" + string(rune('0'+n))
		lines = append(lines, dir+"/cpulist = "+cpus, dir+"/distance = "+[]string{row0, row1, row2}[n])
	}
	lines = append(lines, "sys/devices/system/node/online = 0-2", "sys/devices/system/cpu/online = 0-3")
	for cpu := range 4 {
		lines = append(lines, "sys/devices/system/cpu/cpu"+string(rune('0'+cpu))+"/topology/physical_package_id = 0")
	}
	gpu := "devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"
	nic0 := "devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0"
	nic1 := "devices/pci0000:80/0000:80:02.0/0000:81:00.0"
	for _, b := range []string{"devices/pci0000:00/0000:00:01.0", "devices/pci0000:00/0000:00:01.0/0000:01:00.0",
		"devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0", "devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0",
		"devices/pci0000:80/0000:80:02.0"} {
		lines = append(lines, "sys/"+b+"/class = 0x060400", "sys/"+b+"/vendor = 0x10b5",
			"sys/bus/pci/devices/"+filepath.Base(b)+" -> ../../../"+b)
	}
	lines = append(lines,
		"sys/"+gpu+"/vendor = 0x10de", "sys/"+gpu+"/class = 0x030200", "sys/"+gpu+"/numa_node = 2",
		"sys/bus/pci/devices/0000:03:00.0 -> ../../../"+gpu,
		"sys/"+nic0+"/vendor = 0x15b3", "sys/"+nic0+"/class = 0x020700", "sys/"+nic0+"/numa_node = 0",
		"sys/"+nic0+"/infiniband/mlx5_0/node_type = 1: CA",
		"sys/bus/pci/devices/0000:04:00.0 -> ../../../"+nic0,
		"sys/"+nic1+"/vendor = 0x15b3", "sys/"+nic1+"/class = 0x020700", "sys/"+nic1+"/numa_node = 1",
		"sys/"+nic1+"/infiniband/mlx5_1/node_type = 1: CA",
		"sys/bus/pci/devices/0000:81:00.0 -> ../../../"+nic1,
	)
	writeSys(t, root, lines...)
	return root
}

// catalogOf discovers the machine under root and builds its catalog with
// the PCIe roots read from the same tree.
func catalogOf(t *testing.T, root string, list bool) (*topology.Machine, *dra.Catalog) {
	t.Helper()
	m, err := topology.Discover(root)
	require.NoError(t, err)
	sys := os.DirFS(filepath.Join(root, "sys")).(fs.ReadLinkFS)
	c, err := dra.NewCatalog(dra.Inventory{Machine: m, Pool: "node-a", PCIeRoots: dra.PCIeRoots(m, sys), ListAttributes: list})
	require.NoError(t, err)
	return m, c
}

func deviceByName(t *testing.T, res []resourceapi.Device, name string) resourceapi.Device {
	t.Helper()
	for _, d := range res {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no device %s", name)
	return resourceapi.Device{}
}

func TestSlicesFromSysfs(t *testing.T) {
	// Node 2 is at 11 from both CPU nodes: the tie goes to node 0.
	root := fakeSys(t, "10 12 11", "12 10 11", "11 11 10")
	m, c := catalogOf(t, root, false)
	g, _ := m.GPU(0)
	require.Equal(t, 2, int(g.NUMANode), "discovery keeps the PCI numa_node")
	require.Equal(t, []string{"gpu-0", "nic-mlx5-0", "nic-mlx5-1"}, c.Names())
	devs := c.Resources(nil).Pools["node-a"].Slices[0].Devices

	gpu := deviceByName(t, devs, "gpu-0")
	require.Equal(t, int64(0), *gpu.Attributes[dra.AttrNUMANode].IntValue, "the nearest CPU node, ties to the lowest ID")
	require.Equal(t, "pci0000:00", *gpu.Attributes[dra.AttrPCIeRoot].StringValue)
	require.Equal(t, "0000:03:00.0", *gpu.Attributes[dra.AttrPCIBusID].StringValue)
	require.Equal(t, "0000:01:00.0", *gpu.Attributes[dra.AttrPCIeSwitch].StringValue)
	require.Equal(t, "gpu", *gpu.Attributes[dra.AttrType].StringValue)
	require.Equal(t, int64(0), *gpu.Attributes[dra.AttrIndex].IntValue)
	require.Equal(t, int64(0), *gpu.Attributes[dra.AttrMinor].IntValue)
	require.NotContains(t, gpu.Attributes, dra.AttrUUID, "no UUID known")
	require.NotContains(t, gpu.Attributes, dra.AttrNVLinkGroup)
	require.Empty(t, gpu.Capacity, "discovery does not know the memory")

	nic0 := deviceByName(t, devs, "nic-mlx5-0")
	require.Equal(t, "mlx5_0", *nic0.Attributes[dra.AttrIBDevice].StringValue)
	require.Equal(t, *gpu.Attributes[dra.AttrPCIeSwitch].StringValue, *nic0.Attributes[dra.AttrPCIeSwitch].StringValue,
		"the GPU and mlx5_0 share the switch")
	nic1 := deviceByName(t, devs, "nic-mlx5-1")
	require.Equal(t, int64(1), *nic1.Attributes[dra.AttrNUMANode].IntValue)
	require.Equal(t, "pci0000:80", *nic1.Attributes[dra.AttrPCIeRoot].StringValue)

	// Node 2 nearer node 1: the GPU's numaNode is 1.
	root = fakeSys(t, "10 12 13", "12 10 11", "13 11 10")
	_, c = catalogOf(t, root, false)
	gpu = deviceByName(t, c.Resources(nil).Pools["node-a"].Slices[0].Devices, "gpu-0")
	require.Equal(t, int64(1), *gpu.Attributes[dra.AttrNUMANode].IntValue)

	// List form: the CPU node first, then its same-socket nodes at the
	// least distance (node 0 at 12; node 2 has no socket).
	_, c = catalogOf(t, root, true)
	gpu = deviceByName(t, c.Resources(nil).Pools["node-a"].Slices[0].Devices, "gpu-0")
	require.Nil(t, gpu.Attributes[dra.AttrNUMANode].IntValue)
	require.Equal(t, []int64{1, 0}, gpu.Attributes[dra.AttrNUMANode].IntValues)
}

func TestNUMANodeValue(t *testing.T) {
	a100, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	// GPU 0 is on node 3 of socket 0 (nodes 0-3 at 12, the other socket at 32).
	v, ok := dra.NUMANodeValue(a100, 3, true)
	require.True(t, ok)
	require.Equal(t, []int64{3, 0, 1, 2}, v)
	v, _ = dra.NUMANodeValue(a100, 3, false)
	require.Equal(t, []int64{3}, v)
	_, ok = dra.NUMANodeValue(a100, topology.UnknownNode, true)
	require.False(t, ok, "an unknown node gets no attribute")

	// Xeon Max in flat SNC4: HBM node 9 (CPU-less) sits in the quadrant of
	// DDR node 1 (13, against 14 and 23 to the others).
	xm, err := topology.Preset("xeon-max-snc4")
	require.NoError(t, err)
	n, ok := dra.CPUNode(xm, 9)
	require.True(t, ok)
	require.EqualValues(t, 1, n)
	v, _ = dra.NUMANodeValue(xm, 9, true)
	require.Equal(t, []int64{1, 0, 2, 3}, v, "DDR nodes of socket 0 at 12; the HBM ones are farther")

	// A device whose node is unknown has no numaNode attribute.
	m, err := topology.ParseJSON([]byte(`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0-1"}, {"id": 1, "socket": 0, "cpus": "2-3"}],
		"gpus": [{"id": 0, "numaNode": -1}]}`))
	require.NoError(t, err)
	c, err := dra.NewCatalog(dra.Inventory{Machine: m, Pool: "p"})
	require.NoError(t, err)
	require.NotContains(t, c.Resources(nil).Pools["p"].Slices[0].Devices[0].Attributes, dra.AttrNUMANode)
	require.Equal(t, []string{"gpu-0: no resource.kubernetes.io/numaNode attribute: its NUMA node is unknown"}, c.Notes())
}

func TestSlicesPresets(t *testing.T) {
	a100, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	c, err := dra.NewCatalog(dra.Inventory{Machine: a100, Pool: "p", Minors: map[int]int{0: 7}})
	require.NoError(t, err)
	res := c.Resources(nil)
	require.Len(t, res.Pools["p"].Slices, 1)
	devs := res.Pools["p"].Slices[0].Devices
	require.Len(t, devs, 16, "8 GPUs and 8 NICs")
	g0 := devs[0]
	require.Equal(t, "gpu-0", g0.Name)
	require.Equal(t, int64(7), *g0.Attributes[dra.AttrMinor].IntValue)
	require.Equal(t, int64(0), *g0.Attributes[dra.AttrNVLinkGroup].IntValue, "one NVSwitch fabric: group 0")
	require.Equal(t, int64(7), *g0.Attributes[dra.AttrNVLinks].IntValue)
	require.Equal(t, resource.MustParse("40Gi"), g0.Capacity[dra.CapacityMemory].Value)
	require.LessOrEqual(t, len(g0.Attributes)+len(g0.Capacity), resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice)

	numa64, err := topology.Preset("numa64")
	require.NoError(t, err)
	res, err = dra.BuildResources(dra.Inventory{Machine: numa64, Pool: "p", ListAttributes: true}, nil)
	require.NoError(t, err)
	slices := res.Pools["p"].Slices
	require.Len(t, slices, 2, "128 GPUs in slices of at most 64")
	require.Len(t, slices[0].Devices, 64)
	require.Equal(t, "gpu-64", slices[1].Devices[0].Name)
	// GPU 10 is on node 5, socket 0: its list is 5 then the other nodes
	// of socket 0.
	require.Equal(t, []int64{5, 0, 1, 2, 3, 4, 6, 7}, slices[0].Devices[10].Attributes[dra.AttrNUMANode].IntValues)

	// Only some GPUs (the others for the device plugin), no NICs.
	c, err = dra.NewCatalog(dra.Inventory{Machine: a100, Pool: "p", GPUs: []int{4, 5}, NoNICs: true})
	require.NoError(t, err)
	require.Equal(t, []string{"gpu-4", "gpu-5"}, c.Names())
	_, err = dra.NewCatalog(dra.Inventory{Machine: a100, Pool: "p", GPUs: []int{9}})
	require.ErrorContains(t, err, "GPU 9 is not a GPU of this machine")
}

func TestSlicesTaints(t *testing.T) {
	h100, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	c, err := dra.NewCatalog(dra.Inventory{Machine: h100, Pool: "p"})
	require.NoError(t, err)
	taints := func(unhealthy map[string][]string) map[string][]resourceapi.DeviceTaint {
		out := map[string][]resourceapi.DeviceTaint{}
		for _, d := range c.Resources(unhealthy).Pools["p"].Slices[0].Devices {
			if len(d.Taints) > 0 {
				out[d.Name] = d.Taints
			}
		}
		return out
	}
	want := []resourceapi.DeviceTaint{{Key: "gpu.numaplace.io/unhealthy", Value: "DeviceNodeMissing", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	require.Equal(t, map[string][]resourceapi.DeviceTaint{"gpu-3": want, "nic-mlx5-5": want},
		taints(map[string][]string{"gpu": {"3"}, "rdma": {"mlx5_5"}}))
	require.Empty(t, taints(nil), "recovered: no taint")
}

// TestCELSelectors evaluates selectors on numaplace's attributes as the
// scheduler's allocator does (k8s.io/dynamic-resource-allocation/cel).
func TestCELSelectors(t *testing.T) {
	a100, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	for _, list := range []bool{false, true} {
		res, err := dra.BuildResources(dra.Inventory{Machine: a100, Pool: "p", ListAttributes: list}, nil)
		require.NoError(t, err)
		devs := res.Pools["p"].Slices[0].Devices
		compiler := draCEL.GetCompiler(draCEL.Features{EnableListTypeAttributes: list})
		match := func(expr string) []string {
			t.Helper()
			r := compiler.CompileCELExpression(expr, draCEL.Options{})
			require.Nil(t, r.Error, "%s", expr)
			var out []string
			for _, d := range devs {
				ok, _, err := r.DeviceMatches(context.Background(), draCEL.Device{Driver: dra.DriverName, Attributes: d.Attributes, Capacity: d.Capacity})
				require.NoError(t, err, "%s on %s", expr, d.Name)
				if ok {
					out = append(out, d.Name)
				}
			}
			return out
		}
		require.Equal(t, []string{"gpu-2", "gpu-3", "nic-mlx5-2", "nic-mlx5-3"},
			match(`device.attributes["gpu.numaplace.io"].pcieSwitch == "sw1"`))
		require.Equal(t, []string{"gpu-2", "gpu-3"},
			match(`device.attributes["gpu.numaplace.io"].type == "gpu" && device.attributes["gpu.numaplace.io"].pcieSwitch == "sw1"`))
		// Attributes a device lacks are a CEL error (the allocator fails the
		// claim): guard them with type (&& absorbs the error when false) or
		// has().
		require.Len(t, match(`device.attributes["gpu.numaplace.io"].type == "gpu" && device.attributes["gpu.numaplace.io"].nvlinkGroup == 0`), 8)
		require.Len(t, match(`has(device.attributes["gpu.numaplace.io"].nvlinkGroup) && device.attributes["gpu.numaplace.io"].nvlinkGroup == 0`), 8)
		require.Equal(t, []string{"gpu-4", "gpu-5", "gpu-6", "gpu-7"},
			match(`device.attributes["gpu.numaplace.io"].type == "gpu" && device.attributes["gpu.numaplace.io"].index >= 4`))
		require.Len(t, match(`device.attributes["gpu.numaplace.io"].type == "gpu" && device.capacity["gpu.numaplace.io"].memory.compareTo(quantity("40Gi")) >= 0`), 8)
		if list {
			// GPUs 0,1 on node 3; the list names socket 0's nodes 0-3.
			require.Equal(t, []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "nic-mlx5-0", "nic-mlx5-1", "nic-mlx5-2", "nic-mlx5-3"},
				match(`device.attributes["resource.kubernetes.io"].numaNode.exists(n, n == 0)`))
		} else {
			require.Equal(t, []string{"gpu-0", "gpu-1", "nic-mlx5-0", "nic-mlx5-1"},
				match(`device.attributes["resource.kubernetes.io"].numaNode == 3`))
		}
	}
}

// TestIsPCIBusID: the format is deviceattribute's own.
func TestIsPCIBusID(t *testing.T) {
	for _, s := range []string{"0000:1b:00.0", "0001:10:00.7", "0000:1B:00.0", "000:1b:00.0", "0000:1b:00.8x", "0000:1b:00", "", "10000:1b:00.0", "0000:1b:1f.f"} {
		_, err := deviceattribute.GetPCIBusIDAttribute(s)
		require.Equal(t, err == nil, dra.IsPCIBusID(s), "%q", s)
	}
}
