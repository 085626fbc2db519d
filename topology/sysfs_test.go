package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
)

// sysTree builds a file system from lines "path = content" (a file, to which
// a newline is appended as sysfs does) and "path -> target" (a symbolic
// link). Blank lines are ignored.
func sysTree(t testing.TB, lines ...string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	setTree(t, m, lines...)
	return m
}

// setTree adds or replaces entries of m, as sysTree describes them.
func setTree(t testing.TB, m fstest.MapFS, lines ...string) {
	t.Helper()
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if p, content, ok := strings.Cut(l, " = "); ok {
			m[p] = &fstest.MapFile{Data: []byte(content + "\n"), Mode: 0o444}
		} else if p, target, ok := strings.Cut(l, " -> "); ok {
			m[p] = &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
		} else if p, ok := strings.CutSuffix(l, " ="); ok {
			m[p] = &fstest.MapFile{Data: []byte("\n"), Mode: 0o444}
		} else {
			t.Fatalf("sysTree: cannot read line %q", l)
		}
	}
}

// removeTree deletes every entry of m at or below one of the paths.
func removeTree(m fstest.MapFS, paths ...string) {
	for k := range m {
		for _, p := range paths {
			if k == p || strings.HasPrefix(k, p+"/") {
				delete(m, k)
			}
		}
	}
}

// fakeMachine is a compact description of a Linux machine; fs renders its
// sysfs tree the way a recent kernel lays it out.
type fakeMachine struct {
	online string     // cpu/online; "" = the union of the nodes' CPUs
	nodes  []fakeNode // node/online lists them all
	cores  []string   // SMT sibling lists; other CPUs are cores of one
	pkgs   []string   // CPUs of package 0, 1, ...; default: package = node index
	l3     []string   // L3 sharing lists
	pci    []fakePCI
}

type fakeNode struct {
	id   int
	cpus string // cpulist
	dist string // distance row; "" = no distance file
	mem  string // MemTotal in kB; "" = no meminfo file
}

type fakePCI struct {
	path   string // below sys/devices, ending with the device's bus ID
	vendor string
	class  string
	node   string // numa_node; "" = no file
	local  string // local_cpulist; "" = no file
}

func (f fakeMachine) fs(t testing.TB) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	var all numa.CPUSet
	var ids []string
	for _, n := range f.nodes {
		dir := fmt.Sprintf("sys/devices/system/node/node%d", n.id)
		setTree(t, m, dir+"/cpulist = "+n.cpus)
		if n.dist != "" {
			setTree(t, m, dir+"/distance = "+n.dist)
		}
		if n.mem != "" {
			setTree(t, m, fmt.Sprintf("%s/meminfo = Node %d MemTotal:       %s kB\nNode %d MemFree:        1024 kB",
				dir, n.id, n.mem, n.id))
		}
		all.UnionWith(numa.MustParseCPUSet(n.cpus))
		ids = append(ids, fmt.Sprint(n.id))
	}
	if len(f.nodes) > 0 {
		setTree(t, m, "sys/devices/system/node/online = "+strings.Join(ids, ","),
			"sys/devices/system/node/possible = "+strings.Join(ids, ","))
	}
	online := all.String()
	if f.online != "" {
		online = f.online
		all.UnionWith(numa.MustParseCPUSet(f.online))
	}
	setTree(t, m, "sys/devices/system/cpu/online = "+online)
	pkgOf := func(cpu int) int {
		for i, p := range f.pkgs {
			if numa.MustParseCPUSet(p).Contains(cpu) {
				return i
			}
		}
		for i, n := range f.nodes {
			if numa.MustParseCPUSet(n.cpus).Contains(cpu) {
				return i
			}
		}
		return 0
	}
	listOf := func(lists []string, cpu int) string {
		for _, l := range lists {
			if numa.MustParseCPUSet(l).Contains(cpu) {
				return l
			}
		}
		return fmt.Sprint(cpu)
	}
	for cpu := range all.All() {
		dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d", cpu)
		setTree(t, m,
			fmt.Sprintf("%s/topology/physical_package_id = %d", dir, pkgOf(cpu)),
			fmt.Sprintf("%s/topology/core_id = %d", dir, cpu),
			dir+"/topology/thread_siblings_list = "+listOf(f.cores, cpu),
			dir+"/cache/index0/level = 1",
			dir+"/cache/index0/type = Data",
			dir+"/cache/index0/shared_cpu_list = "+listOf(f.cores, cpu),
		)
		if len(f.l3) > 0 {
			setTree(t, m,
				dir+"/cache/index3/level = 3",
				dir+"/cache/index3/type = Unified",
				dir+"/cache/index3/shared_cpu_list = "+listOf(f.l3, cpu))
		}
		if cpu != 0 {
			setTree(t, m, dir+"/online = 1")
		}
	}
	for _, p := range f.pci {
		parts := strings.Split(p.path, "/")
		for i, c := range parts[1:] { // bridges above the device
			if i == len(parts)-2 {
				break
			}
			bridge := "sys/devices/" + strings.Join(parts[:i+2], "/")
			if _, ok := m[bridge+"/class"]; !ok {
				setTree(t, m, bridge+"/vendor = 0x10b5", bridge+"/class = 0x060400",
					"sys/bus/pci/devices/"+c+" -> ../../../devices/"+strings.Join(parts[:i+2], "/"))
			}
		}
		dir := "sys/devices/" + p.path
		bus := parts[len(parts)-1]
		setTree(t, m, dir+"/vendor = "+p.vendor, dir+"/class = "+p.class,
			"sys/bus/pci/devices/"+bus+" -> ../../../devices/"+p.path)
		if p.node != "" {
			setTree(t, m, dir+"/numa_node = "+p.node)
		}
		if p.local != "" {
			setTree(t, m, dir+"/local_cpulist = "+p.local)
		}
	}
	return m
}

// twoNodes is a 2-socket machine: 8 CPUs per node, SMT pairs (n, n+8).
func twoNodes() fakeMachine {
	return fakeMachine{
		nodes: []fakeNode{
			{id: 0, cpus: "0-3,8-11", dist: "10 21", mem: "134217728"},
			{id: 1, cpus: "4-7,12-15", dist: "21 10", mem: "134217728"},
		},
		cores: []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
		l3:    []string{"0-3,8-11", "4-7,12-15"},
	}
}

// summary is what the table tests compare: a readable digest of a machine.
type summary struct {
	Nodes     []string // "id socket cpus memMiB"
	Distances [][]int
	Cores     []string
	L3        []string
	GPUs      []string // "id node bus switch"
}

func summarize(m *Machine) summary {
	var s summary
	for _, n := range m.Nodes() {
		s.Nodes = append(s.Nodes, fmt.Sprintf("%d s%d [%s] %d", n.ID, n.Socket, n.CPUs, n.MemoryMiB))
	}
	s.Distances = m.Distances().Rows()
	for _, c := range m.Cores() {
		if c.CPUs.Size() > 1 {
			s.Cores = append(s.Cores, c.CPUs.String())
		}
	}
	for _, g := range m.L3Groups() {
		s.L3 = append(s.L3, g.String())
	}
	for _, g := range m.GPUs() {
		s.GPUs = append(s.GPUs, fmt.Sprintf("%d n%d %s %q", g.ID, g.NUMANode, g.BusID, g.PCIeSwitch))
	}
	return s
}

func TestDiscoverFS(t *testing.T) {
	tests := []struct {
		name string
		fs   func(t *testing.T) fstest.MapFS
		want summary
		// check, when set, runs extra assertions on the machine.
		check func(t *testing.T, m *Machine)
	}{
		{
			name: "two nodes with SMT",
			fs:   func(t *testing.T) fstest.MapFS { return twoNodes().fs(t) },
			want: summary{
				Nodes:     []string{"0 s0 [0-3,8-11] 131072", "1 s1 [4-7,12-15] 131072"},
				Distances: [][]int{{10, 21}, {21, 10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
				L3:        []string{"0-3,8-11", "4-7,12-15"},
			},
			check: func(t *testing.T, m *Machine) {
				require.Equal(t, 2, m.ThreadsPerCore())
				require.Equal(t, []int{0, 1}, m.Sockets())
				require.Equal(t, []numa.Mask{numa.MaskOf(0), numa.MaskOf(1)}, m.NUMASets())
				require.Empty(t, m.Name())
			},
		},
		{
			// Rows are positional in the order of node/online; they must be
			// stored by ID: node 33 is the 4th column, not column 33.
			name: "sparse node IDs",
			fs: func(t *testing.T) fstest.MapFS {
				return fakeMachine{nodes: []fakeNode{
					{id: 0, cpus: "0-1", dist: "10 16 22 28", mem: "1048576"},
					{id: 1, cpus: "2-3", dist: "16 10 16 22", mem: "1048576"},
					{id: 2, cpus: "4-5", dist: "22 16 10 16", mem: "1048576"},
					{id: 33, cpus: "6-7", dist: "28 22 16 10", mem: "1048576"},
				}, pkgs: []string{"0-3", "4-7"}}.fs(t)
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-1] 1024", "1 s0 [2-3] 1024", "2 s1 [4-5] 1024", "33 s1 [6-7] 1024"},
				Distances: [][]int{{10, 16, 22, 28}, {16, 10, 16, 22}, {22, 16, 10, 16}, {28, 22, 16, 10}},
			},
			check: func(t *testing.T, m *Machine) {
				d, ok := m.Distances().Distance(33, 0)
				require.True(t, ok)
				require.Equal(t, 28, d)
				d, _ = m.Distances().Distance(2, 33)
				require.Equal(t, 16, d)
				require.Equal(t, []numa.NodeID{0, 1, 2, 33}, m.NodeIDs())
				require.Equal(t, []numa.Mask{numa.MaskOf(0, 1), numa.MaskOf(2, 3)}, m.NUMASets())
			},
		},
		{
			name: "offline CPUs are left out of nodes, cores and L3",
			fs: func(t *testing.T) fstest.MapFS {
				f := twoNodes()
				f.online = "0-2,4-15"
				m := f.fs(t)
				setTree(t, m, "sys/devices/system/cpu/online = 0-2,4-7,9-15")
				// An offline CPU has no topology directory.
				removeTree(m, "sys/devices/system/cpu/cpu3/topology", "sys/devices/system/cpu/cpu8/topology",
					"sys/devices/system/cpu/cpu3/cache", "sys/devices/system/cpu/cpu8/cache")
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-2,9-11] 131072", "1 s1 [4-7,12-15] 131072"},
				Distances: [][]int{{10, 21}, {21, 10}},
				Cores:     []string{"1,9", "2,10", "4,12", "5,13", "6,14", "7,15"},
				L3:        []string{"0-2,9-11", "4-7,12-15"},
			},
		},
		{
			name: "CPU-less node",
			fs: func(t *testing.T) fstest.MapFS {
				return fakeMachine{nodes: []fakeNode{
					{id: 0, cpus: "0-3", dist: "10 21 14", mem: "2097152"},
					{id: 1, cpus: "4-7", dist: "21 10 24", mem: "2097152"},
					{id: 2, cpus: "", dist: "14 24 10", mem: "16777216"},
				}}.fs(t)
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3] 2048", "1 s1 [4-7] 2048", "2 s-1 [] 16384"},
				Distances: [][]int{{10, 21, 14}, {21, 10, 24}, {14, 24, 10}},
			},
			check: func(t *testing.T, m *Machine) {
				// The builder puts the socket-less node with its nearest node.
				require.Equal(t, []numa.Mask{numa.MaskOf(0, 2), numa.MaskOf(1)}, m.NUMASets())
			},
		},
		{
			// No cpu/online (cpuN/online instead), no node/online (nodeN
			// directories), hex cpumap and thread_siblings only, no
			// cpulists anywhere, distances separated by several spaces.
			name: "old kernel with hex masks only",
			fs: func(t *testing.T) fstest.MapFS {
				m := twoNodes().fs(t)
				removeTree(m, "sys/devices/system/cpu/online", "sys/devices/system/node/online",
					"sys/devices/system/node/possible",
					"sys/devices/system/node/node0/cpulist", "sys/devices/system/node/node1/cpulist")
				setTree(t, m,
					"sys/devices/system/node/node0/cpumap = 00000000,00000f0f",
					"sys/devices/system/node/node1/cpumap = 00000000,0000f0f0",
					"sys/devices/system/node/node0/distance = 10  21",
					"sys/devices/system/cpu/cpu15/online = 0")
				for cpu := range 16 {
					dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology", cpu)
					removeTree(m, dir+"/thread_siblings_list")
					setTree(t, m, fmt.Sprintf("%s/thread_siblings = 00000000,%08x", dir, 1<<(cpu%8)|1<<(cpu%8+8)))
				}
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3,8-11] 131072", "1 s1 [4-7,12-14] 131072"},
				Distances: [][]int{{10, 21}, {21, 10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14"},
				L3:        []string{"0-3,8-11", "4-7,12-14"},
			},
		},
		{
			name: "no node directory: one node with every online CPU",
			fs: func(t *testing.T) fstest.MapFS {
				m := twoNodes().fs(t)
				removeTree(m, "sys/devices/system/node")
				setTree(t, m, "proc/meminfo = MemTotal:       8388608 kB\nMemFree:         1000 kB")
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-15] 8192"},
				Distances: [][]int{{10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
				L3:        []string{"0-3,8-11", "4-7,12-15"},
			},
		},
		{
			name: "no node directory and no proc/meminfo: memory 0",
			fs: func(t *testing.T) fstest.MapFS {
				m := twoNodes().fs(t)
				removeTree(m, "sys/devices/system/node")
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-15] 0"},
				Distances: [][]int{{10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
				L3:        []string{"0-3,8-11", "4-7,12-15"},
			},
		},
		{
			name: "missing meminfo gives memory 0, missing distance gives defaults",
			fs: func(t *testing.T) fstest.MapFS {
				m := twoNodes().fs(t)
				removeTree(m, "sys/devices/system/node/node1/meminfo", "sys/devices/system/node/node1/distance")
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3,8-11] 131072", "1 s1 [4-7,12-15] 0"},
				Distances: [][]int{{10, 20}, {20, 10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
				L3:        []string{"0-3,8-11", "4-7,12-15"},
			},
		},
		{
			// Node 0 holds CPUs of packages 0 and 1: the lowest CPU's wins.
			// CPUs 2-3 report -1 (unknown), CPU 4's file is missing.
			name: "sockets: lowest CPU with a known package",
			fs: func(t *testing.T) fstest.MapFS {
				m := fakeMachine{nodes: []fakeNode{
					{id: 0, cpus: "0-1", dist: "10 20", mem: "1024"},
					{id: 1, cpus: "2-5", dist: "20 10", mem: "1024"},
				}, pkgs: []string{"1", "0", "", "", "", "", "", "5"}}.fs(t)
				setTree(t, m, "sys/devices/system/cpu/cpu2/topology/physical_package_id = -1",
					"sys/devices/system/cpu/cpu3/topology/physical_package_id = -1")
				removeTree(m, "sys/devices/system/cpu/cpu4/topology/physical_package_id")
				return m
			},
			want: summary{
				Nodes:     []string{"0 s1 [0-1] 1", "1 s7 [2-5] 1"},
				Distances: [][]int{{10, 20}, {20, 10}},
			},
		},
		{
			name: "L3 with an empty shared map holds its own CPU",
			fs: func(t *testing.T) fstest.MapFS {
				m := twoNodes().fs(t)
				for cpu := range 16 {
					dir := fmt.Sprintf("sys/devices/system/cpu/cpu%d/cache/index3", cpu)
					removeTree(m, dir+"/shared_cpu_list")
					setTree(t, m, dir+"/shared_cpu_map = 00000000,00000000")
				}
				// Instruction caches and caches without a level are skipped.
				setTree(t, m, "sys/devices/system/cpu/cpu0/cache/index1/level = 3",
					"sys/devices/system/cpu/cpu0/cache/index1/type = Instruction",
					"sys/devices/system/cpu/cpu0/cache/index1/shared_cpu_list = 0-15",
					"sys/devices/system/cpu/cpu0/cache/index2/shared_cpu_list = 0-15")
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3,8-11] 131072", "1 s1 [4-7,12-15] 131072"},
				Distances: [][]int{{10, 21}, {21, 10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
				L3: []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13",
					"14", "15"},
			},
		},
		{
			name: "no cache directories: no L3 groups",
			fs: func(t *testing.T) fstest.MapFS {
				m := twoNodes().fs(t)
				for cpu := range 16 {
					removeTree(m, fmt.Sprintf("sys/devices/system/cpu/cpu%d/cache", cpu))
				}
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3,8-11] 131072", "1 s1 [4-7,12-15] 131072"},
				Distances: [][]int{{10, 21}, {21, 10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
			},
		},
		{
			// Two switches per socket's root port; GPUs listed out of bus
			// order; a second-level switch under the first; bridges, an
			// NVSwitch (0x0680) and a GPU audio function (0x0403) ignored.
			name: "GPUs under PCIe switches",
			fs: func(t *testing.T) fstest.MapFS {
				f := twoNodes()
				f.pci = []fakePCI{
					{path: "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:10.0/0000:84:00.0", vendor: "0x10de", class: "0x030200", node: "1"},
					{path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
					{path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
					{path: "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:08.0/0000:83:00.0", vendor: "0x10de", class: "0x030000", node: "1"},
					{path: "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:08.0/0000:83:00.1", vendor: "0x10de", class: "0x040300", node: "1"},
					{path: "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:18.0/0000:85:00.0", vendor: "0x10de", class: "0x068000", node: "1"},
					// A switch below a switch: the innermost switch names it.
					{path: "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:1c.0/0000:86:00.0/0000:87:00.0/0000:88:00.0", vendor: "0x10de", class: "0x030200", node: "1"},
				}
				return f.fs(t)
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3,8-11] 131072", "1 s1 [4-7,12-15] 131072"},
				Distances: [][]int{{10, 21}, {21, 10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
				L3:        []string{"0-3,8-11", "4-7,12-15"},
				GPUs: []string{
					`0 n0 0000:03:00.0 "0000:01:00.0"`,
					`1 n0 0000:04:00.0 "0000:01:00.0"`,
					`2 n1 0000:83:00.0 "0000:81:00.0"`,
					`3 n1 0000:84:00.0 "0000:81:00.0"`,
					`4 n1 0000:88:00.0 "0000:86:00.0"`,
				},
			},
		},
		{
			name: "GPU under a root port, on a host bridge, and AMD GPUs",
			fs: func(t *testing.T) fstest.MapFS {
				f := twoNodes()
				f.pci = []fakePCI{
					{path: "pci0000:00/0000:00:02.0/0000:05:00.0", vendor: "0x1002", class: "0x030000", node: "0"},
					{path: "pci0000:00/0000:00:1e.0", vendor: "0x10de", class: "0x030200", node: "0"},
					// AMD Instinct: display controller class 0x0380.
					{path: "pci0000:80/0000:80:03.1/0000:c1:00.0", vendor: "0x1002", class: "0x038000", node: "1"},
					// VMD domain: the chain starts below the last host bridge.
					{path: "pci0000:80/0000:80:05.5/pci10000:e0/10000:e0:06.0/10000:e1:00.0", vendor: "0x10de", class: "0x030200", node: "1"},
					// 0x0380 is not a GPU class for NVIDIA; other vendors never.
					{path: "pci0000:80/0000:80:04.0/0000:d1:00.0", vendor: "0x10de", class: "0x038000", node: "1"},
					{path: "pci0000:80/0000:80:04.1/0000:d2:00.0", vendor: "0x8086", class: "0x030000", node: "1"},
				}
				return f.fs(t)
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3,8-11] 131072", "1 s1 [4-7,12-15] 131072"},
				Distances: [][]int{{10, 21}, {21, 10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
				L3:        []string{"0-3,8-11", "4-7,12-15"},
				GPUs: []string{
					`0 n0 0000:00:1e.0 ""`,
					`1 n0 0000:05:00.0 "0000:00:02.0"`,
					`2 n1 0000:c1:00.0 "0000:80:03.1"`,
					`3 n1 10000:e1:00.0 "10000:e0:06.0"`,
				},
			},
		},
		{
			name: "GPU NUMA node from local_cpulist",
			fs: func(t *testing.T) fstest.MapFS {
				f := twoNodes()
				f.pci = []fakePCI{
					// -1 and local CPUs in node 1 only (offline CPUs ignored).
					{path: "pci0000:00/0000:00:01.0/0000:01:00.0", vendor: "0x10de", class: "0x030200", node: "-1", local: "4-7,12-15,40-47"},
					// -1 and local CPUs spanning both nodes: unknown.
					{path: "pci0000:00/0000:00:02.0/0000:02:00.0", vendor: "0x10de", class: "0x030200", node: "-1", local: "0-15"},
					// No numa_node file and no local CPUs at all: unknown.
					{path: "pci0000:00/0000:00:03.0/0000:03:00.0", vendor: "0x10de", class: "0x030200"},
					// A node that is not online: use local_cpulist.
					{path: "pci0000:00/0000:00:04.0/0000:04:00.0", vendor: "0x10de", class: "0x030200", node: "5", local: "0-1"},
					// Local CPUs only offline ones: unknown.
					{path: "pci0000:00/0000:00:05.0/0000:05:00.0", vendor: "0x10de", class: "0x030200", node: "-1", local: "40-47"},
				}
				m := f.fs(t)
				// An absolute link is taken relative to the tree's root.
				setTree(t, m, "sys/bus/pci/devices/0000:01:00.0 -> /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0")
				// Hex local_cpus when local_cpulist is missing.
				setTree(t, m, "sys/devices/pci0000:00/0000:00:03.0/0000:03:00.0/local_cpus = 00000000,0000f0f0")
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3,8-11] 131072", "1 s1 [4-7,12-15] 131072"},
				Distances: [][]int{{10, 21}, {21, 10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
				L3:        []string{"0-3,8-11", "4-7,12-15"},
				GPUs: []string{
					`0 n1 0000:01:00.0 "0000:00:01.0"`,
					`1 n-1 0000:02:00.0 "0000:00:02.0"`,
					`2 n1 0000:03:00.0 "0000:00:03.0"`,
					`3 n0 0000:04:00.0 "0000:00:04.0"`,
					`4 n-1 0000:05:00.0 "0000:00:05.0"`,
				},
			},
		},
		{
			name: "GPU of unknown node on a one-node machine",
			fs: func(t *testing.T) fstest.MapFS {
				return fakeMachine{
					nodes: []fakeNode{{id: 0, cpus: "0-3", dist: "10", mem: "1048576"}},
					pci:   []fakePCI{{path: "pci0000:00/0000:00:05.0", vendor: "0x10de", class: "0x030200", node: "-1", local: "0-3"}},
				}.fs(t)
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3] 1024"},
				Distances: [][]int{{10}},
				GPUs:      []string{`0 n0 0000:00:05.0 ""`},
			},
		},
		{
			// sys/bus/pci/devices holds directories instead of links (as in
			// some dumps): the paths come from scanning sys/devices.
			name: "PCI device paths from scanning sys/devices",
			fs: func(t *testing.T) fstest.MapFS {
				f := twoNodes()
				f.pci = []fakePCI{
					{path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
				}
				m := f.fs(t)
				for k, v := range m {
					if strings.HasPrefix(k, "sys/bus/pci/devices/") && v.Mode&fs.ModeSymlink != 0 {
						target := path.Join(path.Dir(k), string(v.Data))
						delete(m, k)
						for k2, v2 := range m {
							if strings.HasPrefix(k2, target+"/") && !strings.Contains(k2[len(target)+1:], "/") {
								m[k+"/"+path.Base(k2)] = v2
							}
						}
					}
				}
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3,8-11] 131072", "1 s1 [4-7,12-15] 131072"},
				Distances: [][]int{{10, 21}, {21, 10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
				L3:        []string{"0-3,8-11", "4-7,12-15"},
				GPUs:      []string{`0 n0 0000:03:00.0 "0000:01:00.0"`},
			},
		},
		{
			name: "no sys/bus/pci: devices found under sys/devices",
			fs: func(t *testing.T) fstest.MapFS {
				f := twoNodes()
				f.pci = []fakePCI{
					{path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
					{path: "pci0000:80/0000:80:01.0/0000:81:00.0", vendor: "0x1002", class: "0x030200", node: "1"},
				}
				m := f.fs(t)
				removeTree(m, "sys/bus")
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3,8-11] 131072", "1 s1 [4-7,12-15] 131072"},
				Distances: [][]int{{10, 21}, {21, 10}},
				Cores:     []string{"0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"},
				L3:        []string{"0-3,8-11", "4-7,12-15"},
				GPUs:      []string{`0 n0 0000:03:00.0 "0000:01:00.0"`, `1 n1 0000:81:00.0 "0000:80:01.0"`},
			},
		},
		{
			// A POWER9-like dump: bus entries are bare directories with a
			// class and local_cpus but no vendor; the NVIDIA driver lists
			// the GPUs and the CPU-less node holding each GPU's memory.
			name: "NVIDIA GPU memory nodes",
			fs: func(t *testing.T) fstest.MapFS {
				m := fakeMachine{nodes: []fakeNode{
					{id: 0, cpus: "0-3", dist: "10 40 80 80", mem: "1048576"},
					{id: 8, cpus: "4-7", dist: "40 10 80 80", mem: "1048576"},
					{id: 254, cpus: "", dist: "80 80 10 80", mem: "1048576"},
					{id: 255, cpus: "", dist: "80 80 80 10", mem: "1048576"},
				}, pkgs: []string{"0-3", "", "", "", "", "", "", "", "4-7"}}.fs(t)
				setTree(t, m,
					"sys/bus/pci/devices/0004:04:00.0/class = 0x030200",
					"sys/bus/pci/devices/0004:04:00.0/local_cpus = 0f",
					"sys/bus/pci/devices/0035:03:00.0/class = 0x030200",
					"sys/bus/pci/devices/0035:03:00.0/local_cpus = f0",
					"sys/bus/pci/devices/0035:03:00.1/class = 0x030200",
					"proc/driver/nvidia/gpus/0004:04:00.0/numa_status = Node:      255\nStatus:    online",
					"proc/driver/nvidia/gpus/0035:03:00.0/numa_status = Node:      254\nStatus:    online")
				return m
			},
			want: summary{
				Nodes:     []string{"0 s0 [0-3] 1024", "8 s8 [4-7] 1024", "254 s8 [] 1024", "255 s0 [] 1024"},
				Distances: [][]int{{10, 40, 80, 80}, {40, 10, 80, 80}, {80, 80, 10, 80}, {80, 80, 80, 10}},
				GPUs:      []string{`0 n0 0004:04:00.0 ""`, `1 n8 0035:03:00.0 ""`},
			},
			check: func(t *testing.T, m *Machine) {
				require.Equal(t, []numa.Mask{numa.MaskOf(0, 3), numa.MaskOf(1, 2)}, m.NUMASets())
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DiscoverFS(tc.fs(t))
			require.NoError(t, err)
			require.Equal(t, tc.want, summarize(m))
			if tc.check != nil {
				tc.check(t, m)
			}
		})
	}
}

// noLinkFS hides the ReadLink method of a MapFS: discovery must then find
// PCI paths by scanning sys/devices.
type noLinkFS struct{ m fstest.MapFS }

func (f noLinkFS) Open(name string) (fs.File, error) { return f.m.Open(name) }

func TestDiscoverFSWithoutReadLink(t *testing.T) {
	f := twoNodes()
	f.pci = []fakePCI{
		{path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
		{path: "pci0000:00/0000:00:02.0/0000:05:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
	}
	m, err := DiscoverFS(noLinkFS{f.fs(t)})
	require.NoError(t, err)
	require.Equal(t, []string{`0 n0 0000:03:00.0 "0000:01:00.0"`, `1 n0 0000:05:00.0 "0000:00:02.0"`},
		summarize(m).GPUs)
}

// TestDiscoverDir writes a fake tree to disk, with real symbolic links, and
// checks that Discover over os.DirFS sees what DiscoverFS sees in memory.
func TestDiscoverDir(t *testing.T) {
	f := twoNodes()
	f.pci = []fakePCI{
		{path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
		{path: "pci0000:80/0000:80:01.0/0000:81:00.0", vendor: "0x1002", class: "0x030000", node: "-1", local: "4-7"},
	}
	mem := f.fs(t)
	root := t.TempDir()
	writeTree(t, mem, root)
	want, err := DiscoverFS(mem)
	require.NoError(t, err)
	got, err := Discover(root)
	require.NoError(t, err)
	require.Equal(t, summarize(want), summarize(got))
	require.Len(t, got.GPUs(), 2)
}

// TestDiscoverThisMachine reads the machine the test runs on, when it is a
// Linux machine with sysfs.
func TestDiscoverThisMachine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("sysfs discovery needs Linux")
	}
	if _, err := os.Stat("/sys/devices/system/cpu"); err != nil {
		t.Skipf("no sysfs here: %v", err)
	}
	m, err := Discover("/")
	require.NoError(t, err)
	require.Positive(t, m.NumCPUs())
	t.Logf("this machine: %d NUMA nodes, %d CPUs, %d cores, %d GPUs", m.NumNodes(), m.NumCPUs(), m.NumCores(), m.NumGPUs())
}

func TestDiscoverFSErrors(t *testing.T) {
	const (
		node0 = "sys/devices/system/node/node0"
		cpu0  = "sys/devices/system/cpu/cpu0"
	)
	tests := []struct {
		name string
		edit func(t *testing.T, m fstest.MapFS)
		// want are substrings of the error message (the file it names).
		want []string
	}{
		{"garbage cpulist", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, node0+"/cpulist = 0-3,x")
		}, []string{node0 + "/cpulist", `"x"`}},
		{"garbage cpumap", func(t *testing.T, m fstest.MapFS) {
			removeTree(m, node0+"/cpulist")
			setTree(t, m, node0+"/cpumap = zz")
		}, []string{node0 + "/cpumap"}},
		{"meminfo without MemTotal", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, node0+"/meminfo = Node 0 MemFree: 10 kB")
		}, []string{node0 + "/meminfo", "no MemTotal line"}},
		{"meminfo with a bad number", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, node0+"/meminfo = Node 0 MemTotal: lots kB")
		}, []string{node0 + "/meminfo", `"lots"`}},
		{"meminfo in MB", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, node0+"/meminfo = Node 0 MemTotal: 10 MB")
		}, []string{node0 + "/meminfo", "kB"}},
		{"no cpu/online and no cpuN", func(t *testing.T, m fstest.MapFS) {
			removeTree(m, "sys/devices/system/cpu")
		}, []string{"sys/devices/system/cpu", "neither the online file nor any cpuN directory"}},
		{"cpu/online names no cpuN directory", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, "sys/devices/system/cpu/online = 100-101")
		}, []string{"sys/devices/system/cpu/online", "no CPU is online (the file lists 100-101, the cpuN directories 0-15)"}},
		{"garbage cpu/online", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, "sys/devices/system/cpu/online = 0-")
		}, []string{"sys/devices/system/cpu/online"}},
		{"garbage cpuN/online", func(t *testing.T, m fstest.MapFS) {
			removeTree(m, "sys/devices/system/cpu/online")
			setTree(t, m, "sys/devices/system/cpu/cpu3/online = yes")
		}, []string{"sys/devices/system/cpu/cpu3/online", `"yes`}},
		{"garbage node/online", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, "sys/devices/system/node/online = 0,,1")
		}, []string{"sys/devices/system/node/online"}},
		{"garbage thread_siblings_list", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, cpu0+"/topology/thread_siblings_list = 0;8")
		}, []string{cpu0 + "/topology/thread_siblings_list"}},
		{"garbage thread_siblings", func(t *testing.T, m fstest.MapFS) {
			removeTree(m, cpu0+"/topology/thread_siblings_list")
			setTree(t, m, cpu0+"/topology/thread_siblings = 0x1g")
		}, []string{cpu0 + "/topology/thread_siblings"}},
		{"garbage physical_package_id", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, cpu0+"/topology/physical_package_id = zero")
		}, []string{cpu0 + "/topology/physical_package_id", `"zero"`}},
		{"garbage cache level", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, cpu0+"/cache/index3/level = L3")
		}, []string{cpu0 + "/cache/index3/level"}},
		{"garbage PCI vendor", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor = nvidia")
		}, []string{"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/vendor", `"nvidia"`}},
		{"garbage PCI class", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/class = 0x03_00_00")
		}, []string{"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/class"}},
		{"garbage numa_node", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node = one")
		}, []string{"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node"}},
		{"garbage local_cpulist", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node = -1",
				"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/local_cpulist = all")
		}, []string{"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/local_cpulist"}},
		{"garbage nvidia numa_status", func(t *testing.T, m fstest.MapFS) {
			setTree(t, m, "proc/driver/nvidia/gpus/0000:01:00.0/numa_status = Node: ?")
		}, []string{"proc/driver/nvidia/gpus/0000:01:00.0/numa_status"}},
		{"unreadable file", func(t *testing.T, m fstest.MapFS) {
			// A directory where a file should be: reading it fails.
			removeTree(m, node0+"/meminfo")
			setTree(t, m, node0+"/meminfo/x = 1")
		}, []string{node0 + "/meminfo"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := twoNodes()
			f.pci = []fakePCI{{path: "pci0000:00/0000:00:01.0/0000:01:00.0", vendor: "0x10de", class: "0x030200", node: "0"}}
			m := f.fs(t)
			tc.edit(t, m)
			_, err := DiscoverFS(m)
			require.Error(t, err)
			require.ErrorIs(t, err, ErrDiscovery)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestDiscoverFSTooManyNodes(t *testing.T) {
	var f fakeMachine
	for id := range 65 {
		f.nodes = append(f.nodes, fakeNode{id: id, cpus: fmt.Sprint(id), mem: "1024"})
	}
	_, err := DiscoverFS(f.fs(t))
	require.ErrorIs(t, err, ErrDiscovery)
	require.ErrorIs(t, err, ErrTooManyNodes)
	var tm *TooManyNodesError
	require.True(t, errors.As(err, &tm))
	require.Equal(t, 65, tm.Nodes)

	// 64 nodes are fine.
	f.nodes = f.nodes[:64]
	m, err := DiscoverFS(f.fs(t))
	require.NoError(t, err)
	require.Equal(t, 64, m.NumNodes())
}

func TestParseMemTotal(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"Node 0 MemTotal:       131072 kB\nNode 0 MemFree: 1 kB\n", 128, ""},
		{"MemTotal:        2047 kB\n", 1, ""},
		{"Node 3 MemFree: 5 kB\nNode 3 MemTotal: 1048576 kB", 1024, ""},
		{"MemTotal: 2048", 2, ""},
		{"", 0, "no MemTotal"},
		{"MemTotal:", 0, "want a number"},
		{"MemTotal: -1 kB", 0, "not a size"},
		{"MemTotal: 1 GB", 0, "want a number of kB"},
		{"MemTotal: 1 kB extra", 0, "want a number of kB"},
		{"MemTotal: 99999999999999999999 kB", 0, "not a size"},
	}
	for _, tc := range tests {
		got, err := parseMemTotal(tc.in)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, "input %q", tc.in)
			continue
		}
		require.NoError(t, err, "input %q", tc.in)
		require.Equal(t, tc.want, got, "input %q", tc.in)
	}
}

func TestParseDistanceRow(t *testing.T) {
	row, err := parseDistanceRow("10 21  31\t41\n")
	require.NoError(t, err)
	require.Equal(t, []int{10, 21, 31, 41}, row)
	for _, bad := range []string{"", "\n", "10 x", "10 0", "10 256", "10 -1", "10 2.5", "10,20"} {
		_, err := parseDistanceRow(bad)
		require.Error(t, err, "input %q", bad)
	}
}

func TestParseHexID(t *testing.T) {
	for in, want := range map[string]uint32{"0x10de\n": 0x10de, "0x030200": 0x030200, "1002": 0x1002, "0XFFFFFFFF": 0xffffffff} {
		got, err := parseHexID(in)
		require.NoError(t, err, "input %q", in)
		require.Equal(t, want, got, "input %q", in)
	}
	for _, bad := range []string{"", "0x", "nvidia", "0x-1", "-0x1", "+10", "0x100000000", "0x10 de"} {
		_, err := parseHexID(bad)
		require.Error(t, err, "input %q", bad)
	}
}

func TestIsGPU(t *testing.T) {
	tests := []struct {
		vendor, class uint32
		want          bool
	}{
		{0x10de, 0x030000, true},
		{0x10de, 0x030200, true},
		{0x10de, 0x038000, false},
		{0x10de, 0x068000, false}, // NVSwitch
		{0x10de, 0x040300, false}, // HDMI audio
		{0x1002, 0x030000, true},
		{0x1002, 0x030200, true},
		{0x1002, 0x038000, true}, // Instinct
		{0x8086, 0x030000, false},
		{0x1bcf, 0x0b4000, false}, // NEC vector engine
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, isGPU(tc.vendor, tc.class), "%#x %#x", tc.vendor, tc.class)
	}
}

func TestParsePCIAddr(t *testing.T) {
	a, ok := parsePCIAddr("0000:1b:00.0")
	require.True(t, ok)
	require.Equal(t, pciAddr{0, 0x1b, 0, 0}, a)
	a, ok = parsePCIAddr("10000:e1:1f.7")
	require.True(t, ok)
	require.Equal(t, pciAddr{0x10000, 0xe1, 0x1f, 7}, a)
	for _, bad := range []string{"", "0000:1b:00", "000:1b:00.0", "0000:1b:20.0", "0000:1b:00.8",
		"0000:1g:00.0", "0000:+1:00.0", "pci0000:00", "0000:1b:00.0:1", "000000000:00:00.0"} {
		_, ok := parsePCIAddr(bad)
		require.False(t, ok, "input %q", bad)
	}
	x, _ := parsePCIAddr("0000:ff:00.0")
	y, _ := parsePCIAddr("0001:00:00.0")
	require.Negative(t, x.compare(y))
}

func TestPCIeSwitch(t *testing.T) {
	tests := map[string]string{
		"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0":                           "0000:01:00.0",
		"sys/devices/pci0000:00/0000:00:01.0/0000:03:00.0":                                                     "0000:00:01.0",
		"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:03:00.0":                                        "0000:00:01.0",
		"sys/devices/pci0000:00/0000:00:1e.0":                                                                  "",
		"sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0/0000:04:10.0/0000:05:00.0": "0000:03:00.0",
		"sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0":                          "10000:e0:06.0",
		"": "",
		"sys/devices/LNXSYSTM:00/VMBUS:00/abcd/pci7f3c:00/7f3c:00:00.0": "",
		"garbage": "",
	}
	for in, want := range tests {
		require.Equal(t, want, pcieSwitch(in), "path %q", in)
	}
}

// TestDiscoverFSInconsistentGroups: sibling and L3 lists that contradict
// each other or span NUMA nodes (fake-NUMA setups, broken firmware) are cut
// rather than refusing the machine, so the NUMA nodes still come through.
func TestDiscoverFSInconsistentGroups(t *testing.T) {
	const cpu = "sys/devices/system/cpu"
	m := twoNodes().fs(t)
	setTree(t, m,
		cpu+"/cpu0/topology/thread_siblings_list = 0,4", // spans nodes 0 and 1
		cpu+"/cpu1/topology/thread_siblings_list = 1,8", // overlaps core 0,8
		cpu+"/cpu4/cache/index3/shared_cpu_list = 3-7",  // overlaps node 0's L3 group
	)
	got, err := DiscoverFS(m)
	require.NoError(t, err)
	require.Equal(t, "0-3,8-11", got.NodeCPUs(0).String())
	require.Equal(t, "4-7,12-15", got.NodeCPUs(1).String())
	cores := map[string]bool{}
	for _, c := range got.Cores() {
		cores[c.CPUs.String()] = true
	}
	// CPUs in ascending order: 0's group "0,4" is cut to its node; 1 takes
	// "1,8" as written; 9's group "1,9" is cut to the CPUs no core holds.
	require.True(t, cores["0"], "%v", cores)
	require.True(t, cores["1,8"], "%v", cores)
	require.True(t, cores["9"], "%v", cores)
	require.True(t, cores["4,12"], "%v", cores)
	for _, g := range got.L3Groups() {
		require.False(t, g.Contains(3) && g.Contains(5), "L3 groups stay disjoint: %v", got.L3Groups())
	}
}

// TestDiscoverFSDistanceFallbacks: as hwloc does, a malformed distance table
// gives the default distances rather than refusing the machine, and a row
// longer than the online nodes is read up to their number.
func TestDiscoverFSDistanceFallbacks(t *testing.T) {
	const node0 = "sys/devices/system/node/node0"
	for _, row := range []string{"10 far", "10 256", "10", "", "30 21", "0 21"} {
		t.Run(row, func(t *testing.T) {
			m := twoNodes().fs(t)
			setTree(t, m, node0+"/distance = "+row)
			got, err := DiscoverFS(m)
			require.NoError(t, err)
			require.Equal(t, [][]int{{10, 20}, {20, 10}}, got.Distances().Rows())
		})
	}
	m := twoNodes().fs(t)
	setTree(t, m, node0+"/distance = 10 21 31", "sys/devices/system/node/node1/distance = 21 10 31")
	got, err := DiscoverFS(m)
	require.NoError(t, err)
	require.Equal(t, [][]int{{10, 21}, {21, 10}}, got.Distances().Rows())
}

// TestDiscoverFSContradictoryNodes: as hwloc's look_sysfsnode, an online
// node without a CPU mask (no directory, no cpumap or cpulist) is not
// created, and a node whose CPUs a lower node already has is ignored, with
// its CPUs and memory; the machine keeps the rest.
func TestDiscoverFSContradictoryNodes(t *testing.T) {
	m := twoNodes().fs(t)
	setTree(t, m, "sys/devices/system/node/online = 0-2",
		"sys/devices/system/node/node1/cpulist = 3-7,12-15")
	got, err := DiscoverFS(m)
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{0}, got.NodeIDs(), "node 1 overlaps node 0, node 2 has no CPU mask")
	require.Equal(t, "0-3,8-11", got.NodeCPUs(0).String())
	require.Equal(t, "0-3,8-11", got.CPUs().String())

	// Every listed node without a mask: the machine is one node of every
	// online CPU, as hwloc then makes one.
	m = twoNodes().fs(t)
	removeTree(m, "sys/devices/system/node/node0/cpulist", "sys/devices/system/node/node1/cpulist")
	got, err = DiscoverFS(m)
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{0}, got.NodeIDs())
	require.Equal(t, "0-15", got.CPUs().String())

	// The distances of the nodes kept are their own columns of the rows.
	m = fakeMachine{nodes: []fakeNode{
		{id: 0, cpus: "0", dist: "10 21 31", mem: "1024"},
		{id: 1, cpus: "0-1", dist: "21 10 41", mem: "1024"},
		{id: 2, cpus: "2", dist: "31 41 10", mem: "1024"},
	}}.fs(t)
	got, err = DiscoverFS(m)
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{0, 2}, got.NodeIDs())
	require.Equal(t, [][]int{{10, 31}, {31, 10}}, got.Distances().Rows())
}
