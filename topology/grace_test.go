package topology_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// kindIDs returns the IDs of m's nodes of kind k.
func kindIDs(m *topology.Machine, k topology.NodeKind) []numa.NodeID {
	return m.IDsOf(m.NodesOfKind(k))
}

// TestPresetGH200 checks the GH200 layout its comment cites: node 0 the
// Grace CPU, node 1 the H100's memory, nodes 2-8 MIG placeholders.
func TestPresetGH200(t *testing.T) {
	m := mustPreset(t, "gh200")
	require.Equal(t, []numa.NodeID{0}, kindIDs(m, topology.NodeCPU))
	require.Equal(t, []numa.NodeID{1}, kindIDs(m, topology.NodeGPUMemory))
	require.Equal(t, []numa.NodeID{2, 3, 4, 5, 6, 7, 8}, kindIDs(m, topology.NodePlaceholder))
	require.Empty(t, kindIDs(m, topology.NodeMemory))
	require.Equal(t, "0-71", m.NodeCPUs(0).String())
	require.EqualValues(t, 98304, m.Node(1).MemoryMiB, "96 GiB of HBM3")
	gpu, _ := m.GPU(0)
	require.EqualValues(t, 98304, gpu.MemoryMiB, "the GPU's memory is its memory node's")
	require.Zero(t, m.PodMemoryMiB(1), "GPU memory is not pod memory")
	require.EqualValues(t, 480<<10, m.PodMemoryMiB(0))
	id, ok := m.GPUMemoryNode(0)
	require.True(t, ok)
	require.Equal(t, numa.NodeID(1), id)
	g, _ := m.GPU(0)
	require.Equal(t, numa.NodeID(0), g.NUMANode, "the GPU is attached to the Grace node")
	require.Equal(t, 80, m.Distances().At(0, 1))
}

// TestPresetGB200Tray checks the 34-node layout: two Grace nodes, and per
// GPU a memory node and seven placeholders, each GPU attached to the Grace
// of its superchip.
func TestPresetGB200Tray(t *testing.T) {
	m := mustPreset(t, "gb200-tray")
	require.Equal(t, 34, m.NumNodes())
	require.Equal(t, []numa.NodeID{0, 1}, kindIDs(m, topology.NodeCPU))
	require.Equal(t, []numa.NodeID{2, 10, 18, 26}, kindIDs(m, topology.NodeGPUMemory))
	require.Len(t, kindIDs(m, topology.NodePlaceholder), 28)
	require.Equal(t, "72-143", m.NodeCPUs(1).String())
	for g, want := range map[int]struct{ node, mem numa.NodeID }{0: {0, 2}, 1: {0, 10}, 2: {1, 18}, 3: {1, 26}} {
		gpu, ok := m.GPU(g)
		require.True(t, ok)
		require.Equal(t, want.node, gpu.NUMANode, "GPU %d", g)
		mem, ok := m.GPUMemoryNode(g)
		require.True(t, ok)
		require.Equal(t, want.mem, mem, "GPU %d", g)
		i, _ := m.NodeIndex(mem)
		require.Equal(t, int(want.node), m.Node(i).Socket, "GPU %d's memory node joins its socket", g)
	}
	// The NUMA sets follow the sockets, placeholders included.
	s0, _ := m.MaskOf(0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17)
	require.Equal(t, s0, m.NUMASets()[0])
	require.Equal(t, 18, m.NVLinkCount(0, 3))
}

func TestNodeKindString(t *testing.T) {
	for k, want := range map[topology.NodeKind]string{
		topology.NodeCPU: "cpu", topology.NodeMemory: "memory", topology.NodeGPUMemory: "gpuMemory",
		topology.NodePlaceholder: "placeholder", topology.NodeKind(9): "NodeKind(9)",
	} {
		require.Equal(t, want, k.String())
	}
}

// TestGPUMemoryNodeRules checks what the builder refuses about GPU memory
// nodes, each error naming the item.
func TestGPUMemoryNodeRules(t *testing.T) {
	base := func() *topology.Builder {
		return topology.NewBuilder("t").
			AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 1024}).
			AddNode(topology.Node{ID: 1, Socket: 1, CPUs: numa.CPURange(4, 7), MemoryMiB: 1024}).
			SetDistances([][]int{{10, 20, 30}, {20, 10, 80}, {30, 80, 10}})
	}
	tests := []struct {
		name string
		add  func(b *topology.Builder)
		want string
	}{
		{"CPUs on a GPU memory node", func(b *topology.Builder) {
			b.AddNode(topology.Node{ID: 2, Socket: -1, CPUs: numa.NewCPUSet(8), MemoryMiB: 1, GPUMemory: true})
			b.AddGPU(topology.GPU{ID: 0, NUMANode: 0})
		}, "numaNodes[2] (id 2): a GPU memory node (of GPU 0) has no CPUs, found 8"},
		{"unknown GPU", func(b *topology.Builder) {
			b.AddNode(topology.Node{ID: 2, Socket: -1, MemoryMiB: 1, GPUMemory: true, GPU: 5})
		}, "numaNodes[2] (id 2): the node is the memory of GPU 5, which the machine does not list"},
		{"two memory nodes for a GPU", func(b *topology.Builder) {
			b.AddNode(topology.Node{ID: 2, Socket: -1, MemoryMiB: 1, GPUMemory: true})
			b.AddNode(topology.Node{ID: 3, Socket: -1, MemoryMiB: 1, GPUMemory: true})
			b.SetDistances([][]int{{10, 20, 30, 30}, {20, 10, 80, 80}, {30, 80, 10, 80}, {30, 80, 80, 10}})
			b.AddGPU(topology.GPU{ID: 0, NUMANode: 0})
		}, "numaNodes[3] (id 3): GPU 0's memory is already node 2"},
		{"GPU on its memory node", func(b *topology.Builder) {
			b.AddNode(topology.Node{ID: 2, Socket: -1, MemoryMiB: 1, GPUMemory: true})
			b.AddGPU(topology.GPU{ID: 0, NUMANode: 2})
		}, "gpus[0] (id 0): numaNode 2 is the memory of GPU 0, not a node with CPUs: " +
			"give the node with CPUs the GPU is attached to (the nearest by distance is 0)"},
		{"NIC on a GPU memory node", func(b *topology.Builder) {
			b.AddNode(topology.Node{ID: 2, Socket: -1, MemoryMiB: 1, GPUMemory: true})
			b.AddGPU(topology.GPU{ID: 0, NUMANode: 1})
			b.AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: 2})
		}, "device rdma/mlx5_0: numaNode 2 is the memory of GPU 0, not a node with CPUs: " +
			"give the node with CPUs the device is attached to (the nearest by distance is 0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := base()
			tt.add(b)
			_, err := b.Build()
			require.ErrorIs(t, err, topology.ErrInvalid)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestGPUMemoryNodeJSON round-trips a GPU memory node through the interchange
// JSON, and checks that a machine without one writes no "gpuMemoryOf".
func TestGPUMemoryNodeJSON(t *testing.T) {
	m := mustPreset(t, "gh200")
	data, err := m.MarshalJSON()
	require.NoError(t, err)
	require.Contains(t, string(data), `"id":1,"socket":0,"cpus":"","memoryMiB":98304,"gpuMemoryOf":0}`)
	back, err := topology.ParseJSON(data)
	require.NoError(t, err)
	require.Equal(t, m.Nodes(), back.Nodes())
	require.Equal(t, topology.NodeGPUMemory, back.NodeKind(1))

	data, err = mustPreset(t, "xeon-max-snc4").MarshalJSON()
	require.NoError(t, err)
	require.NotContains(t, string(data), "gpuMemoryOf")
	x := mustPreset(t, "xeon-max-snc4")
	i, _ := x.NodeIndex(8)
	require.Equal(t, topology.NodeMemory, x.NodeKind(i), "HBM in flat mode is plain memory")
	require.EqualValues(t, x.Node(i).MemoryMiB, x.PodMemoryMiB(i))
}
