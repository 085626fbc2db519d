package topology

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"testing/fstest"
)

// The sysfs parsers read files the kernel writes, but a broken or hostile
// tree (a container's fake /sys, a corrupted dump) must give an error, never
// a panic. `go test` runs the seeds; `go test -fuzz FuzzX ./topology` digs.

func FuzzParseMemTotal(f *testing.F) {
	for _, s := range []string{"Node 0 MemTotal:       131072 kB\n", "MemTotal: 1 kB", "MemTotal:", "MemTotal: -5 kB",
		"Node 1 MemFree: 3 kB\nNode 1 MemTotal: 9223372036854775807 kB", "MemTotal: 1 MB", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mib, err := parseMemTotal(s)
		if err == nil && mib < 0 {
			t.Fatalf("parseMemTotal(%q) = %d, negative", s, mib)
		}
	})
}

func FuzzParseDistanceRow(f *testing.F) {
	for _, s := range []string{"10 21\n", "10  16 22 16", "", "10 x", "10 256", "10 -1", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		row, err := parseDistanceRow(s)
		if err != nil {
			return
		}
		if len(row) != len(strings.Fields(s)) {
			t.Fatalf("parseDistanceRow(%q) = %v: not one entry per field", s, row)
		}
		for _, v := range row {
			if v < 1 || v > 255 {
				t.Fatalf("parseDistanceRow(%q) = %v: entry outside 1-255", s, row)
			}
		}
	})
}

func FuzzParseHexID(f *testing.F) {
	for _, s := range []string{"0x10de\n", "0x030200", "1002", "0x", "", "0x-1", "0xffffffff", "0x100000000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseHexID(s)
		if err != nil {
			return
		}
		back, err := parseHexID(fmt.Sprintf("0x%06x", v))
		if err != nil || back != v {
			t.Fatalf("parseHexID(%q) = %#x, which does not read back (%#x, %v)", s, v, back, err)
		}
	})
}

func FuzzPCIeSwitch(f *testing.F) {
	for _, s := range []string{
		"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0",
		"sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0",
		"pci0000:00", "0000:00:00.0", "", "/", "pci/0000:00:01.0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		sw := pcieSwitch(p)
		if sw == "" {
			return
		}
		if _, ok := parsePCIAddr(sw); !ok || !strings.Contains(p, sw) {
			t.Fatalf("pcieSwitch(%q) = %q: not a PCI address of the path", p, sw)
		}
	})
}

// FuzzDiscoverFS runs discovery over a two-node machine with one GPU whose
// file contents are fuzzed; drop removes files (bit i drops dropFiles[i]).
// Discovery must return a machine or an error unwrapping to ErrDiscovery.
func FuzzDiscoverFS(f *testing.F) {
	const (
		node0 = "sys/devices/system/node/node0/"
		node1 = "sys/devices/system/node/node1/"
		cpu0  = "sys/devices/system/cpu/cpu0/"
		gpu   = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0/"
	)
	fuzzed := []string{
		"sys/devices/system/cpu/online",
		"sys/devices/system/node/online",
		node0 + "cpulist",
		node1 + "cpulist",
		node0 + "distance",
		node1 + "distance",
		node0 + "meminfo",
		cpu0 + "topology/thread_siblings_list",
		cpu0 + "topology/physical_package_id",
		cpu0 + "cache/index3/shared_cpu_list",
		gpu + "class",
		gpu + "numa_node",
		gpu + "local_cpulist",
		"proc/driver/nvidia/gpus/0000:03:00.0/numa_status",
	}
	dropFiles := []string{
		"sys/devices/system/cpu/online",
		"sys/devices/system/node/online",
		node0 + "cpulist",
		node1 + "distance",
		node0 + "meminfo",
		cpu0 + "topology/thread_siblings_list",
		cpu0 + "cache/index3/level",
		gpu + "vendor",
		gpu + "numa_node",
		"sys/bus",
		"sys/devices/system/node",
	}
	base := twoNodes()
	base.pci = []fakePCI{{path: gpu[len("sys/devices/") : len(gpu)-1], vendor: "0x10de", class: "0x030200", node: "0", local: "0-3"}}
	tree := base.fs(f)
	setTree(f, tree, node1+"cpumap = 00000000,0000f0f0",
		"sys/devices/system/cpu/cpu1/topology/thread_siblings = 00000000,00000202")

	f.Add("0-15", "0-1", "0-3,8-11", "4-7,12-15", "10 21", "21 10", "Node 0 MemTotal: 1024 kB", "0,8", "0",
		"0-3,8-11", "0x030200", "0", "0-3", "Node: 255", uint16(0))
	f.Add("0-15", "0-1", "0-3,8-11", "4-7,12-15", "10 21", "21 10", "Node 0 MemTotal: 1024 kB", "0,8", "0",
		"0-3,8-11", "0x030200", "-1", "0-3", "Node: 255", uint16(1<<9))
	f.Add("0-3", "0-1", "0-3", "", "10 21", "21 10", "MemTotal: x kB", "0-3", "-1",
		"0-15", "0x030000", "-1", "4-7", "Node: -1", uint16(0b1010_0101))
	f.Add("0-65535", "0-63", "0-65535", "", "10", "", "", "", "", "", "", "", "", "", uint16(0xffff))
	f.Add("", "", "", "", "", "", "", "", "", "", "", "", "", "", uint16(0))
	f.Add("0-15", "0,1,33", "0-7", "8-15", "10 21 31", "21 10 31", "", "0,8", "0",
		"0-7", "0x038000", "33", "0-15", "", uint16(1<<10))
	// Copies of /sys: NUL padding, empty and blank files.
	f.Add("0-15\n\x00\x00\x00", "0-1\n\x00", "0-3,8-11\x00", "\x00\x00", "10 21\n\x00", "\x00", "Node 0 MemTotal: 1024 kB\n\x00\x00",
		"\x00", "\x00\x00\x00\x00", "", "0x030200\x00", "", "\x00", "Node: 255\x00", uint16(0))
	f.Add("", "", " ", "\t", "", "", "", "", "", "", "", "", "", "", uint16(1<<3))
	f.Add("\x00garbage", "\x000-1", "0-3\x00,99999999", "4-7", "10\x0021", "21 10", "MemTotal:\x00", "0,8", "-1\x00",
		"0-3,8-11", "0x03\x000200", "\x00-1", "0-3", "Node:\x00 255", uint16(0))
	f.Fuzz(func(t *testing.T, cpuOnline, nodeOnline, cpus0, cpus1, dist0, dist1, mem0, sib0, pkg0, l30,
		class, numaNode, local, numaStatus string, drop uint16) {
		m := maps.Clone(tree)
		for i, p := range []string{cpuOnline, nodeOnline, cpus0, cpus1, dist0, dist1, mem0, sib0, pkg0, l30,
			class, numaNode, local, numaStatus} {
			m[fuzzed[i]] = &fstest.MapFile{Data: []byte(p), Mode: 0o444}
		}
		for i, p := range dropFiles {
			if drop&(1<<i) != 0 {
				removeTree(m, p)
			}
		}
		machine, err := DiscoverFS(m)
		if err != nil {
			if !errors.Is(err, ErrDiscovery) {
				t.Fatalf("error does not unwrap to ErrDiscovery: %v", err)
			}
			return
		}
		for i := range machine.NumNodes() {
			if i > 0 && machine.NodeID(i) <= machine.NodeID(i-1) {
				t.Fatalf("node IDs not ascending: %v", machine.NodeIDs())
			}
		}
		for _, g := range machine.GPUs() {
			if _, ok := machine.NodeIndex(g.NUMANode); !ok && g.NUMANode != UnknownNode {
				t.Fatalf("GPU %d on unknown node %d", g.ID, g.NUMANode)
			}
		}
	})
}
