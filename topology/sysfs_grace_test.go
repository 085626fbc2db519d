package topology

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
)

// graceTree describes the sysfs tree of a Grace machine as numactl -H and
// nvidia-smi topo -m show it: cpuNodes Grace nodes of 72 CPUs (480 GiB
// each), then 8 nodes per GPU (the GPU's memory of gpuMiB, then seven empty
// MIG placeholders), GPU g on the Grace gpuGrace[g] at PCI address bus[g],
// whose PCI numa_node names its memory node (as on GB200) when pciOnMemory,
// else its Grace node (as on GH200), and whose local_cpulist is its Grace's
// CPUs unless noLocal. dist(i, j) gives the SLIT entries.
type graceTree struct {
	cpuNodes    int
	gpuGrace    []int
	gpuMiB      int64
	bus         []string
	pciOnMemory bool
	noLocal     bool
	noStatus    bool // no proc/driver/nvidia (a copy of /sys alone)
	nics        bool // an RDMA NIC mlx5_<g> beside each GPU, on the same numa_node
	dist        func(i, j int) int
}

// socketOf returns the Grace of node id in t's layout.
func (g graceTree) socketOf(id int) int {
	if id < g.cpuNodes {
		return id
	}
	return g.gpuGrace[(id-g.cpuNodes)/8]
}

func (g graceTree) fs(t *testing.T) fstest.MapFS {
	t.Helper()
	n := g.cpuNodes + 8*len(g.gpuGrace)
	f := fakeMachine{}
	for id := range n {
		var row []string
		for j := range n {
			row = append(row, fmt.Sprint(g.dist(id, j)))
		}
		node := fakeNode{id: id, dist: strings.Join(row, " "), mem: "0"}
		switch {
		case id < g.cpuNodes:
			node.cpus = fmt.Sprintf("%d-%d", 72*id, 72*id+71)
			node.mem = fmt.Sprint(480 << 20)
		case (id-g.cpuNodes)%8 == 0:
			node.mem = fmt.Sprint(g.gpuMiB << 10)
		}
		f.nodes = append(f.nodes, node)
	}
	for k := range g.cpuNodes {
		f.l3 = append(f.l3, fmt.Sprintf("%d-%d", 72*k, 72*k+71))
	}
	var status []string
	for k, grace := range g.gpuGrace {
		mem := g.cpuNodes + 8*k
		p := fakePCI{vendor: "0x10de", class: "0x030200", node: fmt.Sprint(grace)}
		dom := strings.Split(g.bus[k], ":")[0]
		p.path = fmt.Sprintf("pci%s:00/%s:00:00.0/%s", dom, dom, g.bus[k])
		if g.pciOnMemory {
			p.node = fmt.Sprint(mem)
		}
		if !g.noLocal {
			p.local = fmt.Sprintf("%d-%d", 72*grace, 72*grace+71)
		}
		f.pci = append(f.pci, p)
		if g.nics {
			nic := p
			nic.vendor, nic.class = "0x15b3", "0x020700"
			nic.path = fmt.Sprintf("pci%s:00/%s:00:01.0/%s:02:00.0", dom, dom, dom)
			f.pci = append(f.pci, nic)
			status = append(status, fmt.Sprintf("sys/devices/%s/infiniband/mlx5_%d/node_type = 1: CA", nic.path, k))
		}
		status = append(status, fmt.Sprintf("proc/driver/nvidia/gpus/%s/numa_status = Node:      %d\nStatus:    online", g.bus[k], mem))
	}
	m := f.fs(t)
	for _, l := range status {
		if !g.noStatus || !strings.HasPrefix(l, "proc/") {
			setTree(t, m, l)
		}
	}
	return m
}

// graceDistances is the SLIT the presets describe: 10 local, cpuCPU between
// Grace nodes, 80 within a Grace's nodes, 120 across.
func (g graceTree) graceDistances(cpuCPU int) func(i, j int) int {
	return func(i, j int) int {
		switch {
		case i == j:
			return 10
		case i < g.cpuNodes && j < g.cpuNodes:
			return cpuCPU
		case g.socketOf(i) == g.socketOf(j):
			return 80
		}
		return 120
	}
}

func gb200TrayTree() graceTree {
	g := graceTree{cpuNodes: 2, gpuGrace: []int{0, 0, 1, 1}, gpuMiB: 186 << 10, pciOnMemory: true,
		bus: []string{"0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"}}
	g.dist = g.graceDistances(40)
	return g
}

// noStatus returns g without the NVIDIA driver's numa_status files: the
// GPUs' PCI numa_node (their memory nodes, on GB200) tell their memory.
func noStatus(g graceTree) graceTree {
	g.noStatus = true
	return g
}

func gh200Tree() graceTree {
	g := graceTree{cpuNodes: 1, gpuGrace: []int{0}, gpuMiB: 96 << 10, bus: []string{"0009:01:00.0"}}
	g.dist = g.graceDistances(0)
	return g
}

// requireSameMachine checks that discovery found preset's nodes (kinds and
// GPU memory included), distances, NUMA sets and GPUs.
func requireSameMachine(t *testing.T, preset string, got *Machine) {
	t.Helper()
	want, err := Preset(preset)
	require.NoError(t, err)
	require.Equal(t, want.Nodes(), got.Nodes())
	for k := NodeCPU; k <= NodePlaceholder; k++ {
		require.Equal(t, want.NodesOfKind(k), got.NodesOfKind(k), "nodes of kind %s", k)
	}
	require.Equal(t, want.Distances().Rows(), got.Distances().Rows())
	require.Equal(t, want.NUMASets(), got.NUMASets())
	require.Equal(t, want.L3Groups(), got.L3Groups())
	var wg, gg []string
	for _, g := range want.GPUs() {
		wg = append(wg, fmt.Sprintf("%d n%d %s %d MiB", g.ID, g.NUMANode, g.BusID, g.MemoryMiB))
	}
	for _, g := range got.GPUs() {
		gg = append(gg, fmt.Sprintf("%d n%d %s %d MiB", g.ID, g.NUMANode, g.BusID, g.MemoryMiB))
	}
	require.Equal(t, wg, gg)
}

// TestDiscoverGraceTrees discovers synthetic sysfs trees of a GH200 and a
// GB200 compute tray, written from their published numactl -H layouts, and
// finds the presets: GPU memory nodes told apart from placeholders, and each
// GB200 GPU, whose PCI numa_node names its memory node, placed on its Grace.
func TestDiscoverGraceTrees(t *testing.T) {
	for _, tc := range []struct {
		preset string
		tree   graceTree
		name   string
	}{{"gh200", gh200Tree(), "gh200"}, {"gb200-tray", gb200TrayTree(), "gb200-tray"}, {"gb200-tray", noStatus(gb200TrayTree()), "gb200-tray without numa_status"}} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DiscoverFS(tc.tree.fs(t))
			require.NoError(t, err)
			requireSameMachine(t, tc.preset, m)
		})
	}
}

// TestDiscoverGPUOnItsMemoryNode checks the placement of a GPU whose PCI
// numa_node is its own memory node: the nearest node with CPUs by the SLIT,
// then on a tie the node of its local CPUs, then the lowest ID.
func TestDiscoverGPUOnItsMemoryNode(t *testing.T) {
	gpuNodes := func(m *Machine) []numa.NodeID {
		var out []numa.NodeID
		for _, g := range m.GPUs() {
			out = append(out, g.NUMANode)
		}
		return out
	}
	t.Run("SLIT decides", func(t *testing.T) {
		g := gb200TrayTree()
		g.noLocal = true
		m, err := DiscoverFS(g.fs(t))
		require.NoError(t, err)
		require.Equal(t, []numa.NodeID{0, 0, 1, 1}, gpuNodes(m))
	})
	flat := gb200TrayTree()
	flat.dist = func(i, j int) int { // every GPU node 80 from both Graces
		switch {
		case i == j:
			return 10
		case i < 2 && j < 2:
			return 40
		}
		return 80
	}
	t.Run("local CPUs break a tie", func(t *testing.T) {
		m, err := DiscoverFS(flat.fs(t))
		require.NoError(t, err)
		require.Equal(t, []numa.NodeID{0, 0, 1, 1}, gpuNodes(m))
		// The memory nodes join their GPU's socket.
		for _, id := range []numa.NodeID{18, 26} {
			i, _ := m.NodeIndex(id)
			require.Equal(t, 1, m.Node(i).Socket, "node %d", id)
		}
	})
	t.Run("lowest ID without local CPUs", func(t *testing.T) {
		g := flat
		g.noLocal = true
		m, err := DiscoverFS(g.fs(t))
		require.NoError(t, err)
		require.Equal(t, []numa.NodeID{0, 0, 0, 0}, gpuNodes(m))
	})
}

// TestDiscoverNodeKinds checks the three kinds of CPU-less node on one
// machine: a GPU's memory (named by numa_status), plain memory (a CXL
// expander), and an empty placeholder; and that a numa_status naming a node
// with CPUs, or a node another GPU already named, marks nothing.
func TestDiscoverNodeKinds(t *testing.T) {
	f := fakeMachine{nodes: []fakeNode{
		{id: 0, cpus: "0-3", dist: "10 20 30 40 40", mem: "1048576"},
		{id: 1, cpus: "4-7", dist: "20 10 30 40 40", mem: "1048576"},
		{id: 2, cpus: "", dist: "30 30 10 40 40", mem: "2097152"},
		{id: 3, cpus: "", dist: "40 40 40 10 40", mem: "4194304"},
		{id: 4, cpus: "", dist: "40 40 40 40 10", mem: "0"},
	}, pci: []fakePCI{
		{path: "pci0000:00/0000:00:01.0/0000:01:00.0", vendor: "0x10de", class: "0x030200", node: "1"},
		{path: "pci0000:00/0000:00:02.0/0000:02:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
		{path: "pci0000:00/0000:00:03.0/0000:03:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
	}}
	m := f.fs(t)
	setTree(t, m,
		"proc/driver/nvidia/gpus/0000:01:00.0/numa_status = Node:      2\nStatus:    online",
		"proc/driver/nvidia/gpus/0000:02:00.0/numa_status = Node:      2\nStatus:    online",
		"proc/driver/nvidia/gpus/0000:03:00.0/numa_status = Node:      1\nStatus:    online")
	got, err := DiscoverFS(m)
	require.NoError(t, err)
	require.Equal(t, numa.MaskOf(0, 1), got.NodesOfKind(NodeCPU))
	require.Equal(t, numa.MaskOf(2), got.NodesOfKind(NodeGPUMemory))
	require.Equal(t, numa.MaskOf(3), got.NodesOfKind(NodeMemory))
	require.Equal(t, numa.MaskOf(4), got.NodesOfKind(NodePlaceholder))
	id, ok := got.GPUMemoryNode(0)
	require.True(t, ok)
	require.Equal(t, numa.NodeID(2), id)
	_, ok = got.GPUMemoryNode(1)
	require.False(t, ok, "node 2 is GPU 0's; GPU 1's numa_status names it too")
	require.Equal(t, 1, got.Node(2).Socket, "GPU 0's memory joins GPU 0's socket")
	require.Equal(t, UnknownSocket, got.Node(3).Socket)
	require.EqualValues(t, 0, got.PodMemoryMiB(2))
	require.EqualValues(t, 4096, got.PodMemoryMiB(3))
}

// TestDiscoverGraceNICs checks that an RDMA NIC whose PCI numa_node is a
// GPU memory node, as its GPU's is on GB200, is placed on the Grace node
// like the GPU, so that no device widens a span to GPU memory.
func TestDiscoverGraceNICs(t *testing.T) {
	g := gb200TrayTree()
	g.nics = true
	m, err := DiscoverFS(g.fs(t))
	require.NoError(t, err)
	var got []string
	for _, d := range m.Devices() {
		got = append(got, fmt.Sprintf("%s n%d", d.ID, d.NUMANode))
	}
	require.Equal(t, []string{"mlx5_0 n0", "mlx5_1 n0", "mlx5_2 n1", "mlx5_3 n1"}, got)
}
