package topology_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// sampleBuilder returns the machine of docs/design.md's JSON example, built by
// hand: nodes 0 (socket 0, CPUs 0-3,8-11), 2 (socket 1, CPUs 4-7,12-15) and
// 5 (socket 1, CPU-less), SMT pairs (c, c+8), two GPUs on nodes 0 and 2.
// The nodes are added out of ID order on purpose.
func sampleBuilder() *topology.Builder {
	b := topology.NewBuilder("sample").
		AddNode(topology.Node{ID: 2, Socket: 1, CPUs: numa.MustParseCPUSet("4-7,12-15"), MemoryMiB: 65536}).
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.MustParseCPUSet("0-3,8-11"), MemoryMiB: 65536}).
		AddNode(topology.Node{ID: 5, Socket: 1, MemoryMiB: 16384}).
		// Rows follow the order of AddNode: 2, 0, 5.
		SetDistances([][]int{{10, 21, 13}, {21, 10, 31}, {13, 31, 10}})
	for c := range 8 {
		b.AddCore(numa.NewCPUSet(c, c+8))
	}
	return b.
		SetReservedCPUs(numa.NewCPUSet(0, 8)).
		AddGPU(topology.GPU{ID: 1, NUMANode: 2, PCIeSwitch: "sw1"}).
		AddGPU(topology.GPU{ID: 0, NUMANode: 0, BusID: "0000:1b:00.0", PCIeSwitch: "sw0", UUID: "GPU-0"}).
		AddDevice(topology.Device{ID: "mlx5_1", Class: "rdma", NUMANode: 2}).
		AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: 0, PCIeSwitch: "sw0"}).
		AddDevice(topology.Device{ID: "nvme0", Class: "nvme", NUMANode: topology.UnknownNode}).
		AddNVLink(1, 0, 12)
}

func mustBuild(t testing.TB, b *topology.Builder) *topology.Machine {
	t.Helper()
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

func TestBuilderSample(t *testing.T) {
	m := mustBuild(t, sampleBuilder())
	require.Equal(t, "sample", m.Name())
	require.Equal(t, 3, m.NumNodes())
	require.Equal(t, numa.FirstN(3), m.AllNodes())
	require.Equal(t, []numa.NodeID{0, 2, 5}, m.NodeIDs())
	require.Equal(t, numa.NodeID(5), m.NodeID(2))
	require.Equal(t, "0-3,8-11", m.Node(0).CPUs.String())
	require.Equal(t, "4-7,12-15", m.NodeCPUs(1).String())
	require.True(t, m.Node(2).CPUs.IsEmpty())
	require.Equal(t, int64(16384), m.Node(2).MemoryMiB)
	require.Equal(t, 0, m.Node(0).Socket)
	require.Equal(t, []int{0, 1}, m.Sockets())
	require.Equal(t, "0-15", m.CPUs().String())
	require.Equal(t, 16, m.NumCPUs())
	require.Equal(t, "0,8", m.ReservedCPUs().String())

	// Distances are keyed by ID although the rows were given in add order.
	d := m.Distances()
	for _, c := range []struct {
		a, b numa.NodeID
		want int
	}{{0, 2, 21}, {2, 0, 21}, {0, 5, 31}, {2, 5, 13}, {5, 5, 10}} {
		got, ok := d.Distance(c.a, c.b)
		require.True(t, ok)
		require.Equal(t, c.want, got, "distance %d-%d", c.a, c.b)
	}
	require.Equal(t, [][]int{{10, 21, 31}, {21, 10, 13}, {31, 13, 10}}, d.Rows())

	// Cores: SMT pairs, ordered by lowest CPU.
	require.Equal(t, 8, m.NumCores())
	require.Equal(t, 2, m.ThreadsPerCore())
	cores := m.Cores()
	for i, c := range cores {
		require.Equal(t, fmt.Sprintf("%d,%d", i, i+8), c.CPUs.String())
		require.Equal(t, c.CPUs.String(), m.CoreCPUs(i).String())
		wantNode := 0
		if i >= 4 {
			wantNode = 1
		}
		require.Equal(t, wantNode, c.NodeIndex)
		require.Equal(t, wantNode, m.CoreNode(i))
	}

	// GPUs by ID; devices by class then ID; NVLinks normalized to A < B.
	require.Equal(t, 2, m.NumGPUs())
	require.Equal(t, []topology.GPU{
		{ID: 0, NUMANode: 0, BusID: "0000:1b:00.0", PCIeSwitch: "sw0", UUID: "GPU-0"},
		{ID: 1, NUMANode: 2, PCIeSwitch: "sw1"},
	}, m.GPUs())
	g, ok := m.GPU(1)
	require.True(t, ok)
	require.Equal(t, numa.NodeID(2), g.NUMANode)
	_, ok = m.GPU(2)
	require.False(t, ok)
	_, ok = m.GPU(-1)
	require.False(t, ok)
	var devs []string
	for _, d := range m.Devices() {
		devs = append(devs, d.Class+"/"+d.ID)
	}
	require.Equal(t, []string{"nvme/nvme0", "rdma/mlx5_0", "rdma/mlx5_1"}, devs)
	require.Equal(t, []topology.NVLink{{A: 0, B: 1, Links: 12}}, m.NVLinks())
	require.Equal(t, 12, m.NVLinkCount(0, 1))
	require.Equal(t, 12, m.NVLinkCount(1, 0))
	require.Equal(t, 0, m.NVLinkCount(0, 0))
	require.Equal(t, 0, m.NVLinkCount(0, 7))

	// Sets by socket: node 5 is in socket 1.
	require.Equal(t, []numa.Mask{numa.MaskOf(0), numa.MaskOf(1, 2)}, m.NUMASets())
	require.Equal(t, 0, m.SetOf(0))
	require.Equal(t, 1, m.SetOf(1))
	require.Equal(t, 1, m.SetOf(2))
	require.Equal(t, 0, m.SetsCrossed(0))
	require.Equal(t, 1, m.SetsCrossed(numa.MaskOf(1, 2)))
	require.Equal(t, 2, m.SetsCrossed(numa.MaskOf(0, 2)))
	require.Empty(t, m.L3Groups())
}

// node returns a node with the given ID and socket and the CPUs of a cpulist.
func node(id numa.NodeID, socket int, cpus string) topology.Node {
	return topology.Node{ID: id, Socket: socket, CPUs: numa.MustParseCPUSet(cpus)}
}

// twoNodes returns a builder of two nodes, 0 (CPUs 0-3) and 1 (CPUs 4-7),
// on sockets 0 and 1, with GPUs 0 (node 0) and 1 (node 1).
func twoNodes() *topology.Builder {
	return topology.NewBuilder("two").
		AddNode(node(0, 0, "0-3")).
		AddNode(node(1, 1, "4-7")).
		AddGPU(topology.GPU{ID: 0, NUMANode: 0}).
		AddGPU(topology.GPU{ID: 1, NUMANode: 1})
}

func TestBuildValidationErrors(t *testing.T) {
	tests := []struct {
		name    string
		b       func() *topology.Builder
		item    string // the ValidationError's Item
		mention string // also in the message
		cause   error  // also matched by errors.Is, when set
	}{
		{"no node", func() *topology.Builder { return topology.NewBuilder("x") },
			"numaNodes", "no NUMA node", nil},
		{"negative node ID", func() *topology.Builder { return twoNodes().AddNode(node(-1, 0, "")) },
			"numaNodes[2] (id -1)", "must not be negative", nil},
		{"socket below -1", func() *topology.Builder { return twoNodes().AddNode(node(3, -2, "")) },
			"numaNodes[2] (id 3)", "socket -2", nil},
		{"negative memory", func() *topology.Builder {
			return twoNodes().AddNode(topology.Node{ID: 3, Socket: 0, MemoryMiB: -1})
		}, "numaNodes[2] (id 3)", "memoryMiB -1", nil},
		{"duplicate node ID", func() *topology.Builder { return twoNodes().AddNode(node(0, 0, "8")) },
			"numaNodes[2] (id 0)", "also used by numaNodes[0]", nil},
		{"CPU in two nodes", func() *topology.Builder { return twoNodes().AddNode(node(2, 1, "6-9")) },
			"cpu 6", "two NUMA nodes: 1 and 2", nil},
		{"distances not square", func() *topology.Builder {
			return twoNodes().SetDistances([][]int{{10, 20}, {20}})
		}, "distances", "row of node 1 has 1 entries", numa.ErrInvalidDistances},
		{"distances wrong row count", func() *topology.Builder {
			return twoNodes().SetDistances([][]int{{10, 20}})
		}, "distances", "1 rows for 2 nodes", numa.ErrInvalidDistances},
		{"distance zero", func() *topology.Builder {
			return twoNodes().SetDistances([][]int{{10, 0}, {20, 10}})
		}, "distances", "from node 0 to node 1 is 0", numa.ErrInvalidDistances},
		{"distance negative", func() *topology.Builder {
			return twoNodes().SetDistances([][]int{{10, 20}, {-20, 10}})
		}, "distances", "from node 1 to node 0 is -20", numa.ErrInvalidDistances},
		{"distance above 255", func() *topology.Builder {
			return twoNodes().SetDistances([][]int{{10, 256}, {20, 10}})
		}, "distances", "is 256", numa.ErrInvalidDistances},
		{"local distance not smallest", func() *topology.Builder {
			return twoNodes().SetDistances([][]int{{10, 20}, {20, 30}})
		}, "distances", "below its local distance 30", numa.ErrInvalidDistances},
		{"empty core", func() *topology.Builder { return twoNodes().AddCore(numa.CPUSet{}) },
			"cores[0] ()", "no CPU", nil},
		{"core of unknown CPUs", func() *topology.Builder { return twoNodes().AddCore(numa.NewCPUSet(7, 8)) },
			"cores[0] (7-8)", "CPUs 8 are not in any NUMA node", nil},
		{"cores overlap", func() *topology.Builder {
			return twoNodes().AddCore(numa.NewCPUSet(0, 1)).AddCore(numa.NewCPUSet(1, 2))
		}, "cores[1] (1-2)", "CPUs 1 are in another core too", nil},
		{"core spans nodes", func() *topology.Builder { return twoNodes().AddCore(numa.NewCPUSet(3, 4)) },
			"cores[0] (3-4)", "spans NUMA nodes 0 and 1", nil},
		{"empty L3 group", func() *topology.Builder { return twoNodes().AddL3(numa.CPUSet{}) },
			"l3Groups[0] ()", "no CPU", nil},
		{"L3 group of unknown CPUs", func() *topology.Builder { return twoNodes().AddL3(numa.CPURange(0, 9)) },
			"l3Groups[0] (0-9)", "CPUs 8-9 are not in any NUMA node", nil},
		{"L3 groups overlap", func() *topology.Builder {
			return twoNodes().AddL3(numa.CPURange(0, 3)).AddL3(numa.CPURange(3, 7))
		}, "l3Groups[1] (3-7)", "CPUs 3 are in another group too", nil},
		{"reserved CPUs unknown", func() *topology.Builder { return twoNodes().SetReservedCPUs(numa.NewCPUSet(0, 9)) },
			"reservedCPUs", "CPUs 9 are not in any NUMA node", nil},
		{"negative GPU ID", func() *topology.Builder { return twoNodes().AddGPU(topology.GPU{ID: -1, NUMANode: 0}) },
			"gpus[2] (id -1)", "must not be negative", nil},
		{"duplicate GPU ID", func() *topology.Builder { return twoNodes().AddGPU(topology.GPU{ID: 1, NUMANode: 0}) },
			"gpus[2] (id 1)", "also used by gpus[1]", nil},
		{"GPU on an unknown node", func() *topology.Builder { return twoNodes().AddGPU(topology.GPU{ID: 2, NUMANode: 7}) },
			"gpus[2] (id 2)", "NUMA node 7 does not exist", nil},
		{"GPU on node -2", func() *topology.Builder { return twoNodes().AddGPU(topology.GPU{ID: 2, NUMANode: -2}) },
			"gpus[2] (id 2)", "NUMA node -2 does not exist", nil},
		{"device without ID", func() *topology.Builder {
			return twoNodes().AddDevice(topology.Device{Class: "rdma", NUMANode: 0})
		}, `devices[0] (id "")`, "no id", nil},
		{"device without class", func() *topology.Builder {
			return twoNodes().AddDevice(topology.Device{ID: "mlx5_0", NUMANode: 0})
		}, `devices[0] (id "mlx5_0")`, "no class", nil},
		{"device of class gpu", func() *topology.Builder {
			return twoNodes().AddDevice(topology.Device{ID: "x", Class: "gpu", NUMANode: 0})
		}, `devices[0] (id "x")`, `class "gpu" is reserved`, nil},
		{"duplicate device", func() *topology.Builder {
			return twoNodes().
				AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: 0}).
				AddDevice(topology.Device{ID: "mlx5_0", Class: "nvme", NUMANode: 0}). // another class: fine
				AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: 1})
		}, `devices[2] (id "mlx5_0")`, "rdma/mlx5_0 is also listed as devices[0]", nil},
		{"device on an unknown node", func() *topology.Builder {
			return twoNodes().AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: 4})
		}, `devices[0] (id "mlx5_0")`, "NUMA node 4 does not exist", nil},
		{"NVLink to a negative GPU", func() *topology.Builder { return twoNodes().AddNVLink(-1, 0, 1) },
			"nvlinks[0] (-1-0)", "must not be negative", nil},
		{"NVLink to itself", func() *topology.Builder { return twoNodes().AddNVLink(1, 1, 2) },
			"nvlinks[0] (1-1)", "cannot link to itself", nil},
		{"NVLink count zero", func() *topology.Builder { return twoNodes().AddNVLink(0, 1, 0) },
			"nvlinks[0] (0-1)", "link count 0 must be positive", nil},
		{"NVLink count negative", func() *topology.Builder { return twoNodes().AddNVLink(0, 1, -3) },
			"nvlinks[0] (0-1)", "link count -3", nil},
		{"NVLink pair twice", func() *topology.Builder { return twoNodes().AddNVLink(0, 1, 4).AddNVLink(1, 0, 4) },
			"nvlinks[1] (1-0)", "listed twice", nil},
		{"empty NUMA set", func() *topology.Builder {
			return twoNodes().SetNUMASets([][]numa.NodeID{{0, 1}, {}})
		}, "numaSets[1]", "the set is empty", nil},
		{"NUMA set with an unknown node", func() *topology.Builder {
			return twoNodes().SetNUMASets([][]numa.NodeID{{0}, {1, 3}})
		}, "numaSets[1]", "NUMA node 3 does not exist", nil},
		{"node in two NUMA sets", func() *topology.Builder {
			return twoNodes().SetNUMASets([][]numa.NodeID{{0, 1}, {1}})
		}, "numaSets[1]", "NUMA node 1 is in more than one set", nil},
		{"node in no NUMA set", func() *topology.Builder {
			return twoNodes().SetNUMASets([][]numa.NodeID{{1}})
		}, "numaSets", "NUMA node 0 is in no set", nil},
		{"no NUMA set at all", func() *topology.Builder {
			return twoNodes().SetNUMASets([][]numa.NodeID{})
		}, "numaSets", "NUMA node 0 is in no set", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := tt.b().Build()
			require.Nil(t, m)
			require.Error(t, err)
			require.ErrorIs(t, err, topology.ErrInvalid)
			require.NotErrorIs(t, err, topology.ErrTooManyNodes)
			var ve *topology.ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.item, ve.Item)
			require.Contains(t, err.Error(), tt.item)
			require.Contains(t, err.Error(), tt.mention)
			if tt.cause != nil {
				require.ErrorIs(t, err, tt.cause)
				require.NotNil(t, ve.Cause)
			}
		})
	}
}

func TestBuildTooManyNodes(t *testing.T) {
	b := topology.NewBuilder("big")
	for i := range numa.MaxNodes {
		b.AddNode(topology.Node{ID: numa.NodeID(i * 2), Socket: topology.UnknownSocket, CPUs: numa.NewCPUSet(i)})
	}
	m := mustBuild(t, b) // 64 nodes is the limit, still fine
	require.Equal(t, 64, m.NumNodes())
	require.Equal(t, numa.FirstN(64), m.AllNodes())
	require.Equal(t, []numa.NodeID{126}, m.IDsOf(numa.MaskOf(63)))

	b.AddNode(topology.Node{ID: 1000, Socket: 0})
	m, err := b.Build()
	require.Nil(t, m)
	require.ErrorIs(t, err, topology.ErrTooManyNodes)
	require.NotErrorIs(t, err, topology.ErrInvalid)
	var tm *topology.TooManyNodesError
	require.ErrorAs(t, err, &tm)
	require.Equal(t, 65, tm.Nodes)
	require.Contains(t, err.Error(), "65 NUMA nodes")
}

func TestValidationErrorUnwrap(t *testing.T) {
	cause := errors.New("the cause")
	err := error(&topology.ValidationError{Item: "gpus[3] (id 3)", Reason: "bad", Cause: cause})
	require.ErrorIs(t, err, topology.ErrInvalid)
	require.ErrorIs(t, err, cause)
	require.Equal(t, "invalid topology: gpus[3] (id 3): bad: the cause", err.Error())
	err = &topology.ValidationError{Item: "cpu 17", Reason: "bad"}
	require.ErrorIs(t, err, topology.ErrInvalid)
	require.Equal(t, "invalid topology: cpu 17: bad", err.Error())
}

func TestBuildDefaultNUMASets(t *testing.T) {
	tests := []struct {
		name  string
		nodes []topology.Node
		dist  [][]int
		sets  []numa.Mask // dense indices
	}{
		{
			name:  "one per socket",
			nodes: []topology.Node{node(0, 0, "0"), node(1, 0, "1"), node(2, 1, "2"), node(3, 1, "3")},
			sets:  []numa.Mask{numa.MaskOf(0, 1), numa.MaskOf(2, 3)},
		},
		{
			name:  "interleaved sockets, sets ordered by lowest node",
			nodes: []topology.Node{node(0, 1, "0"), node(1, 0, "1"), node(2, 1, "2"), node(3, 0, "3")},
			sets:  []numa.Mask{numa.MaskOf(0, 2), numa.MaskOf(1, 3)},
		},
		{
			name:  "socket numbers need not be dense",
			nodes: []topology.Node{node(4, 7, "0"), node(9, 3, "1")},
			sets:  []numa.Mask{numa.MaskOf(0), numa.MaskOf(1)},
		},
		{
			// Node 5 (unknown socket, CPU-less) is nearer to node 2 (socket 1).
			name: "CPU-less node joins its nearest socket",
			nodes: []topology.Node{
				node(0, 0, "0-3"), node(2, 1, "4-7"),
				node(5, topology.UnknownSocket, ""),
			},
			dist: [][]int{{10, 21, 31}, {21, 10, 13}, {31, 13, 10}},
			sets: []numa.Mask{numa.MaskOf(0), numa.MaskOf(1, 2)},
		},
		{
			name: "CPU-less node joins its nearest socket, given first",
			nodes: []topology.Node{
				node(7, topology.UnknownSocket, ""),
				node(0, 0, "0-3"), node(2, 1, "4-7"),
			},
			// Row order 7, 0, 2: node 7 is nearer to node 0.
			dist: [][]int{{10, 12, 30}, {12, 10, 21}, {30, 21, 10}},
			sets: []numa.Mask{numa.MaskOf(0, 2), numa.MaskOf(1)},
		},
		{
			name: "tie goes to the lowest ID",
			nodes: []topology.Node{
				node(3, 1, "4-7"), node(1, 0, "0-3"),
				node(8, topology.UnknownSocket, ""),
			},
			// Row order 3, 1, 8; node 8 is 20 from both.
			dist: [][]int{{10, 20, 20}, {20, 10, 20}, {20, 20, 10}},
			sets: []numa.Mask{numa.MaskOf(0, 2), numa.MaskOf(1)},
		},
		{
			name: "default distances: a tie, lowest ID wins",
			nodes: []topology.Node{
				node(0, 1, "0"), node(1, 0, "1"), node(2, topology.UnknownSocket, ""),
			},
			sets: []numa.Mask{numa.MaskOf(0, 2), numa.MaskOf(1)},
		},
		{
			name: "an unknown-socket node is not a candidate",
			nodes: []topology.Node{
				node(0, 0, "0"), node(1, topology.UnknownSocket, ""), node(2, topology.UnknownSocket, ""), node(3, 1, "1"),
			},
			// Node 1 is nearest to node 2 (unknown), then to node 3 (socket 1).
			dist: [][]int{
				{10, 30, 30, 20},
				{30, 10, 11, 25},
				{30, 11, 10, 40},
				{20, 25, 40, 10},
			},
			sets: []numa.Mask{numa.MaskOf(0, 2), numa.MaskOf(1, 3)},
		},
		{
			name: "no socket information: one set",
			nodes: []topology.Node{
				node(0, topology.UnknownSocket, "0-1"), node(4, topology.UnknownSocket, "2-3"),
				node(9, topology.UnknownSocket, ""),
			},
			sets: []numa.Mask{numa.MaskOf(0, 1, 2)},
		},
		{
			name:  "single node",
			nodes: []topology.Node{node(3, topology.UnknownSocket, "0-7")},
			sets:  []numa.Mask{numa.MaskOf(0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := topology.NewBuilder(tt.name)
			for _, n := range tt.nodes {
				b.AddNode(n)
			}
			if tt.dist != nil {
				b.SetDistances(tt.dist)
			}
			m := mustBuild(t, b)
			require.Equal(t, tt.sets, m.NUMASets())
			for si, s := range tt.sets {
				for i := range s.All() {
					require.Equal(t, si, m.SetOf(i))
				}
			}
		})
	}
}

func TestBuildExplicitNUMASets(t *testing.T) {
	m := mustBuild(t, topology.NewBuilder("x").
		AddNode(node(0, 0, "0")).AddNode(node(2, 0, "1")).AddNode(node(5, 1, "2")).AddNode(node(9, 1, "3")).
		SetNUMASets([][]numa.NodeID{{9, 2}, {5, 0}}))
	// Ordered by lowest node, whatever the given order; sockets are ignored.
	require.Equal(t, []numa.Mask{numa.MaskOf(0, 2), numa.MaskOf(1, 3)}, m.NUMASets())
	require.Equal(t, []int{0, 1, 0, 1}, []int{m.SetOf(0), m.SetOf(1), m.SetOf(2), m.SetOf(3)})
	require.Equal(t, 2, m.SetsCrossed(numa.MaskOf(0, 1)))
	require.Equal(t, 1, m.SetsCrossed(numa.MaskOf(1, 3)))
}

func TestBuildCores(t *testing.T) {
	t.Run("one CPU per core by default", func(t *testing.T) {
		m := mustBuild(t, topology.NewBuilder("x").AddNode(node(0, 0, "0-3")).AddNode(node(1, 1, "8,10")))
		require.Equal(t, 1, m.ThreadsPerCore())
		require.Equal(t, 6, m.NumCores())
		var got []string
		for _, c := range m.Cores() {
			got = append(got, fmt.Sprintf("%s@%d", c.CPUs, c.NodeIndex))
		}
		require.Equal(t, []string{"0@0", "1@0", "2@0", "3@0", "8@1", "10@1"}, got)
	})
	t.Run("SMT cores, a leftover CPU and a gap", func(t *testing.T) {
		// Node 0: CPUs 0-2 and 10-12 (cores {0,10} {1,11} {2} {12});
		// node 3: CPUs 20-27 as 4-thread cores {20-23} {24-27}.
		m := mustBuild(t, topology.NewBuilder("x").
			AddNode(node(3, 1, "20-27")).AddNode(node(0, 0, "0-2,10-12")).
			AddCore(numa.CPURange(24, 27)).
			AddCore(numa.NewCPUSet(1, 11)).
			AddCore(numa.NewCPUSet(10, 0)).
			AddCore(numa.CPURange(20, 23)))
		require.Equal(t, 4, m.ThreadsPerCore(), "the largest core")
		var got []string
		for i, c := range m.Cores() {
			got = append(got, fmt.Sprintf("%s@%d", c.CPUs, c.NodeIndex))
			require.Equal(t, c.NodeIndex, m.CoreNode(i))
		}
		require.Equal(t, []string{"0,10@0", "1,11@0", "2@0", "12@0", "20-23@1", "24-27@1"}, got)

		for _, c := range []struct{ cpu, node, core int }{
			{0, 0, 0}, {10, 0, 0}, {11, 0, 1}, {2, 0, 2}, {12, 0, 3}, {20, 1, 4}, {23, 1, 4}, {27, 1, 5},
		} {
			n, ok := m.CPUNode(c.cpu)
			require.True(t, ok, "CPUNode(%d)", c.cpu)
			require.Equal(t, c.node, n, "CPUNode(%d)", c.cpu)
			k, ok := m.CPUCore(c.cpu)
			require.True(t, ok, "CPUCore(%d)", c.cpu)
			require.Equal(t, c.core, k, "CPUCore(%d)", c.cpu)
		}
		for _, cpu := range []int{-1, 3, 9, 13, 19, 28, 1 << 20} {
			_, ok := m.CPUNode(cpu)
			require.False(t, ok, "CPUNode(%d)", cpu)
			_, ok = m.CPUCore(cpu)
			require.False(t, ok, "CPUCore(%d)", cpu)
		}
	})
	t.Run("CPU-less machine", func(t *testing.T) {
		m := mustBuild(t, topology.NewBuilder("x").AddNode(node(0, 0, "")))
		require.Equal(t, 0, m.NumCPUs())
		require.Equal(t, 0, m.NumCores())
		require.Equal(t, 1, m.ThreadsPerCore())
		_, ok := m.CPUNode(0)
		require.False(t, ok)
		_, ok = m.CPUCore(0)
		require.False(t, ok)
	})
}

func TestBuildL3Groups(t *testing.T) {
	m := mustBuild(t, topology.NewBuilder("x").AddNode(node(0, 0, "0-15")).
		AddL3(numa.CPURange(8, 15)).AddL3(numa.CPURange(0, 7)))
	groups := m.L3Groups()
	require.Len(t, groups, 2)
	require.Equal(t, "0-7", groups[0].String(), "ordered by lowest CPU")
	require.Equal(t, "8-15", groups[1].String())
}

func TestMachineMaskOfIDsOf(t *testing.T) {
	ids := []numa.NodeID{72, 0, 34, 2, 45, 1, 73, 33} // a real machine's IDs, shuffled
	b := topology.NewBuilder("sparse")
	for i, id := range ids {
		b.AddNode(node(id, i%2, fmt.Sprint(i)))
	}
	m := mustBuild(t, b)
	require.Equal(t, []numa.NodeID{0, 1, 2, 33, 34, 45, 72, 73}, m.NodeIDs())

	tests := []struct {
		ids  []numa.NodeID
		mask numa.Mask
	}{
		{nil, 0},
		{[]numa.NodeID{0}, numa.MaskOf(0)},
		{[]numa.NodeID{33}, numa.MaskOf(3)},
		{[]numa.NodeID{73, 0}, numa.MaskOf(0, 7)},
		{[]numa.NodeID{45, 72, 2}, numa.MaskOf(2, 5, 6)},
		{[]numa.NodeID{0, 1, 2, 33, 34, 45, 72, 73}, numa.FirstN(8)},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.ids), func(t *testing.T) {
			mask, err := m.MaskOf(tt.ids...)
			require.NoError(t, err)
			require.Equal(t, tt.mask, mask)
			want := slices.Clone(tt.ids)
			slices.Sort(want)
			if want == nil {
				want = []numa.NodeID{}
			}
			require.Equal(t, want, m.IDsOf(mask))
		})
	}
	for _, id := range []numa.NodeID{3, 44, 74, -1} {
		_, err := m.MaskOf(0, id)
		require.ErrorIs(t, err, topology.ErrInvalid)
		require.ErrorContains(t, err, fmt.Sprintf("no NUMA node %d", id))
	}
	// Bits beyond the machine's nodes are ignored.
	require.Equal(t, []numa.NodeID{1, 73}, m.IDsOf(numa.MaskOf(1, 7, 8, 63)))
	for i, id := range m.NodeIDs() {
		idx, ok := m.NodeIndex(id)
		require.True(t, ok)
		require.Equal(t, i, idx)
		require.Equal(t, id, m.NodeID(i))
		require.Equal(t, fmt.Sprint(slices.Index(ids, id)), m.Node(i).CPUs.String())
	}
	_, ok := m.NodeIndex(35)
	require.False(t, ok)
}

func TestMachineAccessorsReturnCopies(t *testing.T) {
	m := mustBuild(t, sampleBuilder().AddL3(numa.CPURange(0, 3)))
	before := m.Spec()

	n := m.Node(0)
	n.CPUs.Add(100)
	n.CPUs.Remove(0)
	for _, n := range m.Nodes() {
		n.CPUs.Clear()
	}
	cpus := m.CPUs()
	cpus.Clear()
	reserved := m.ReservedCPUs()
	reserved.Add(5)
	for _, c := range m.Cores() {
		c.CPUs.Add(99)
	}
	for _, g := range m.L3Groups() {
		g.Clear()
	}
	m.GPUs()[0].NUMANode = 5
	m.Devices()[0].ID = "changed"
	m.NVLinks()[0].Links = 1
	m.NUMASets()[0] = 0
	m.Sockets()[0] = 9
	m.NodeIDs()[0] = 9
	m.Distances().IDs()[0] = 9
	m.Distances().Rows()[0][1] = 99

	require.Equal(t, before, m.Spec(), "the machine did not change")
	require.Equal(t, "0-3,8-11", m.NodeCPUs(0).String())
	require.Equal(t, "0-15", m.CPUs().String())
	require.Equal(t, "0,8", m.ReservedCPUs().String())
	require.Equal(t, "0,8", m.CoreCPUs(0).String())
	require.Equal(t, "0-3", m.L3Groups()[0].String())
}

func TestBuilderCopiesItsInputs(t *testing.T) {
	cpus := numa.CPURange(0, 3)
	core := numa.NewCPUSet(0, 1)
	l3 := numa.CPURange(0, 3)
	reserved := numa.NewCPUSet(0)
	rows := [][]int{{10, 20}, {20, 10}}
	sets := [][]numa.NodeID{{0}, {1}}
	b := topology.NewBuilder("x").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: cpus}).
		AddNode(node(1, 1, "4-7")).
		AddCore(core).AddL3(l3).SetReservedCPUs(reserved).SetDistances(rows).SetNUMASets(sets)
	// Mutate everything after handing it over.
	cpus.Add(50)
	core.Add(2)
	l3.Add(9)
	reserved.Add(1)
	rows[0][1] = 99
	sets[0][0] = 1
	m := mustBuild(t, b)
	require.Equal(t, "0-3", m.NodeCPUs(0).String())
	require.Equal(t, "0-1", m.CoreCPUs(0).String())
	require.Equal(t, "0-3", m.L3Groups()[0].String())
	require.Equal(t, "0", m.ReservedCPUs().String())
	require.Equal(t, [][]int{{10, 20}, {20, 10}}, m.Distances().Rows())
	require.Equal(t, []numa.Mask{numa.MaskOf(0), numa.MaskOf(1)}, m.NUMASets())

	// The builder can be reused; the first machine is not affected.
	first := m.Spec()
	m2 := mustBuild(t, b.AddGPU(topology.GPU{ID: 0, NUMANode: 1}))
	require.Equal(t, first, m.Spec())
	require.Equal(t, 0, m.NumGPUs())
	require.Equal(t, 1, m2.NumGPUs())
}

func TestMachineConcurrentReads(t *testing.T) {
	m := mustBuild(t, sampleBuilder())
	want := m.Spec()
	done := make(chan topology.Spec)
	for range 4 {
		go func() {
			for range 20 {
				_ = m.Nodes()
				_ = m.Cores()
				_, _ = m.MaskOf(0, 5)
				_ = m.IDsOf(m.AllNodes())
				_ = m.Distances().Average(m.AllNodes())
			}
			done <- m.Spec()
		}()
	}
	for range 4 {
		require.Equal(t, want, <-done)
	}
}

// TestNodeIndex finds every node of machines of 1 to 64 nodes with sparse
// IDs (even IDs only, so every odd ID, and every ID past the last, is
// absent) at its dense index, and reports absent IDs and a nil machine as
// not found.
func TestNodeIndex(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 8, 33, 64} {
		b := topology.NewBuilder("sparse")
		for i := range n {
			b.AddNode(topology.Node{ID: numa.NodeID(i * 2), Socket: topology.UnknownSocket, CPUs: numa.NewCPUSet(i)})
		}
		m := mustBuild(t, b)
		for id := -1; id <= 2*n+1; id++ {
			i, ok := m.NodeIndex(numa.NodeID(id))
			if id >= 0 && id%2 == 0 && id < 2*n {
				require.True(t, ok, "%d nodes, id %d", n, id)
				require.Equal(t, id/2, i, "%d nodes, id %d", n, id)
				require.Equal(t, numa.NodeID(id), m.NodeID(i))
			} else {
				require.False(t, ok, "%d nodes, id %d", n, id)
			}
		}
	}
	var nilMachine *topology.Machine
	_, ok := nilMachine.NodeIndex(0)
	require.False(t, ok)
}
