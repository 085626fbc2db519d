package topology_test

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

func mustPreset(t testing.TB, name string) *topology.Machine {
	t.Helper()
	m, err := topology.Preset(name)
	require.NoError(t, err)
	return m
}

func TestPresetNames(t *testing.T) {
	names := topology.PresetNames()
	require.Equal(t, []string{"dgx-a100", "dgx-h100", "epyc-2s-nps4", "gb200-tray", "gh200", "numa64", "small-1s",
		"xeon-2s-snc2-8gpu", "xeon-max-snc4"}, names)
	require.True(t, slices.IsSorted(names))
	names[0] = "changed"
	require.Equal(t, "dgx-a100", topology.PresetNames()[0], "PresetNames must return a fresh slice")
}

func TestPresetShapes(t *testing.T) {
	tests := []struct {
		name                              string
		sockets, nodes, cores, cpus, gpus int
		threads, devices                  int
	}{
		{"dgx-h100", 2, 2, 112, 224, 8, 2, 8},
		{"dgx-a100", 2, 8, 128, 256, 8, 2, 8},
		{"epyc-2s-nps4", 2, 8, 128, 256, 0, 2, 0},
		{"xeon-2s-snc2-8gpu", 2, 4, 112, 224, 8, 2, 0},
		{"small-1s", 1, 1, 8, 16, 1, 2, 0},
		{"xeon-max-snc4", 2, 16, 112, 224, 0, 2, 0},
		{"numa64", 8, 64, 512, 1024, 128, 2, 0},
		{"gh200", 1, 9, 72, 72, 1, 1, 0},
		{"gb200-tray", 2, 34, 144, 144, 4, 1, 0},
	}
	require.Len(t, tests, len(topology.PresetNames()), "every preset has a row")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustPreset(t, tt.name)
			assert.Equal(t, tt.name, m.Name())
			assert.Len(t, m.Sockets(), tt.sockets)
			assert.Equal(t, tt.nodes, m.NumNodes())
			assert.Equal(t, tt.cores, m.NumCores())
			assert.Equal(t, tt.cpus, m.NumCPUs())
			assert.Equal(t, tt.gpus, m.NumGPUs())
			assert.Equal(t, tt.threads, m.ThreadsPerCore())
			assert.Len(t, m.Devices(), tt.devices)
			assert.True(t, m.ReservedCPUs().IsEmpty(), "presets reserve no CPU")
			// One NUMA set per socket, and every GPU's node is known.
			assert.Len(t, m.NUMASets(), tt.sockets)
			for _, g := range m.GPUs() {
				_, ok := m.NodeIndex(g.NUMANode)
				assert.True(t, ok, "GPU %d has a known NUMA node", g.ID)
				assert.NotEmpty(t, g.BusID)
			}
			// Every NUMA node has memory, but for the MIG placeholders
			// of the Grace machines.
			for i := range m.NumNodes() {
				if m.NodeKind(i) != topology.NodePlaceholder {
					assert.Positive(t, m.Node(i).MemoryMiB, "node %d memory", m.NodeID(i))
				}
			}
		})
	}
}

func TestPresetCached(t *testing.T) {
	var wg sync.WaitGroup
	got := make([]*topology.Machine, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = topology.Preset("dgx-a100")
		}()
	}
	wg.Wait()
	for _, m := range got {
		require.NotNil(t, m)
		require.Same(t, got[0], m)
	}
}

func TestPresetUnknown(t *testing.T) {
	m, err := topology.Preset("dgx-z900")
	require.Nil(t, m)
	require.ErrorIs(t, err, topology.ErrUnknownPreset)
	require.ErrorContains(t, err, `"dgx-z900"`)
	for _, name := range topology.PresetNames() {
		require.ErrorContains(t, err, name)
	}
}

// requireSiblings checks that every core of m is the pair {c, c+offset}.
func requireSiblings(t *testing.T, m *topology.Machine, offset int) {
	t.Helper()
	for i := range m.NumCores() {
		cpus := m.CoreCPUs(i)
		require.Equal(t, 2, cpus.Size(), "core %d", i)
		c := cpus.Min()
		require.Equal(t, numa.NewCPUSet(c, c+offset).String(), cpus.String(), "core %d", i)
	}
}

func gpuNodes(m *topology.Machine) map[int]numa.NodeID {
	out := map[int]numa.NodeID{}
	for _, g := range m.GPUs() {
		out[g.ID] = g.NUMANode
	}
	return out
}

func TestPresetDGXH100(t *testing.T) {
	m := mustPreset(t, "dgx-h100")
	require.Equal(t, []numa.NodeID{0, 1}, m.NodeIDs())
	assert.Equal(t, "0-55,112-167", m.NodeCPUs(0).String())
	assert.Equal(t, "56-111,168-223", m.NodeCPUs(1).String())
	assert.Equal(t, 0, m.Node(0).Socket)
	assert.Equal(t, 1, m.Node(1).Socket)
	assert.EqualValues(t, 1048576, m.Node(0).MemoryMiB)
	requireSiblings(t, m, 112)

	assert.Equal(t, map[int]numa.NodeID{0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}, gpuNodes(m))
	var buses []string
	switches := map[string]int{}
	for _, g := range m.GPUs() {
		buses = append(buses, g.BusID)
		switches[g.PCIeSwitch]++
	}
	assert.Equal(t, []string{"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
		"0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"}, buses)
	assert.Len(t, switches, 8, "each GPU under its own PCIe switch")
	for sw, n := range switches {
		assert.Equal(t, 1, n, "switch %s", sw)
	}
	// One ConnectX-7 beside each GPU, on the GPU's node.
	for _, d := range m.Devices() {
		assert.Equal(t, "rdma", d.Class)
		assert.Equal(t, 1, switches[d.PCIeSwitch], "NIC %s shares a GPU's switch", d.ID)
	}
	for a := range 8 {
		for b := a + 1; b < 8; b++ {
			assert.Equal(t, 18, m.NVLinkCount(a, b), "NVLink %d-%d", a, b)
		}
	}
	d := m.Distances()
	assert.Equal(t, [][]int{{10, 21}, {21, 10}}, d.Rows())
}

func TestPresetDGXA100(t *testing.T) {
	m := mustPreset(t, "dgx-a100")
	require.Equal(t, []numa.NodeID{0, 1, 2, 3, 4, 5, 6, 7}, m.NodeIDs())
	for n := range 8 {
		want := fmt.Sprintf("%d-%d,%d-%d", 16*n, 16*n+15, 128+16*n, 128+16*n+15)
		assert.Equal(t, want, m.NodeCPUs(n).String(), "node %d", n)
		assert.Equal(t, n/4, m.Node(n).Socket, "node %d socket", n)
		assert.EqualValues(t, 128*1024, m.Node(n).MemoryMiB)
	}
	requireSiblings(t, m, 128)
	assert.Equal(t, map[int]numa.NodeID{0: 3, 1: 3, 2: 1, 3: 1, 4: 7, 5: 7, 6: 5, 7: 5}, gpuNodes(m))

	gpus := m.GPUs()
	var buses []string
	for _, g := range gpus {
		buses = append(buses, g.BusID[5:7])
	}
	assert.Equal(t, []string{"07", "0f", "47", "4e", "87", "90", "b7", "bd"}, buses)
	for a := range gpus {
		for b := range gpus {
			same := gpus[a].PCIeSwitch == gpus[b].PCIeSwitch
			assert.Equal(t, a/2 == b/2, same, "GPUs %d and %d share a switch", a, b)
		}
	}
	// Two NICs under each GPU pair's switch, on the pair's node.
	nics := map[string][]string{}
	for _, d := range m.Devices() {
		assert.Equal(t, "rdma", d.Class)
		nics[d.PCIeSwitch] = append(nics[d.PCIeSwitch], d.ID)
		for _, g := range gpus {
			if g.PCIeSwitch == d.PCIeSwitch {
				assert.Equal(t, g.NUMANode, d.NUMANode, "NIC %s", d.ID)
			}
		}
	}
	assert.Equal(t, []string{"mlx5_0", "mlx5_1"}, nics[gpus[0].PCIeSwitch])
	assert.Equal(t, []string{"mlx5_8", "mlx5_9"}, nics[gpus[6].PCIeSwitch])
	assert.Len(t, nics, 4)

	d := m.Distances()
	for i := range 8 {
		for j := range 8 {
			want := 32
			switch {
			case i == j:
				want = 10
			case i/4 == j/4:
				want = 12
			}
			assert.Equal(t, want, d.At(i, j), "distance %d-%d", i, j)
		}
	}
	assert.Equal(t, 12, m.NVLinkCount(0, 7))
	assert.Equal(t, []numa.Mask{numa.MaskOf(0, 1, 2, 3), numa.MaskOf(4, 5, 6, 7)}, m.NUMASets())
}

func TestPresetXeon2sSNC2(t *testing.T) {
	m := mustPreset(t, "xeon-2s-snc2-8gpu")
	assert.Equal(t, "0-27,112-139", m.NodeCPUs(0).String())
	assert.Equal(t, "84-111,196-223", m.NodeCPUs(3).String())
	assert.Equal(t, map[int]numa.NodeID{0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3}, gpuNodes(m))
	assert.Equal(t, [][]int{{10, 12, 21, 21}, {12, 10, 21, 21}, {21, 21, 10, 12}, {21, 21, 12, 10}},
		m.Distances().Rows())
	requireSiblings(t, m, 112)
}

func TestPresetXeonMaxSNC4(t *testing.T) {
	m := mustPreset(t, "xeon-max-snc4")
	for i := range 16 {
		n := m.Node(i)
		require.EqualValues(t, i, n.ID)
		if i < 8 {
			assert.Equal(t, 28, n.CPUs.Size(), "DDR node %d has CPUs", i)
			assert.EqualValues(t, 32*1024, n.MemoryMiB)
			assert.Equal(t, i/4, n.Socket)
		} else {
			assert.True(t, n.CPUs.IsEmpty(), "HBM node %d has no CPU", i)
			assert.EqualValues(t, 16*1024, n.MemoryMiB)
			assert.Equal(t, (i-8)/4, n.Socket)
		}
	}
	assert.Equal(t, "0-13,112-125", m.NodeCPUs(0).String())
	requireSiblings(t, m, 112)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0, 1, 2, 3, 8, 9, 10, 11), numa.MaskOf(4, 5, 6, 7, 12, 13, 14, 15)},
		m.NUMASets())
	// Rows 0 and 8 of the SLIT of a real 2-socket Xeon Max in flat SNC4.
	rows := m.Distances().Rows()
	assert.Equal(t, []int{10, 12, 12, 12, 21, 21, 21, 21, 13, 14, 14, 14, 23, 23, 23, 23}, rows[0])
	assert.Equal(t, []int{13, 14, 14, 14, 23, 23, 23, 23, 10, 14, 14, 14, 23, 23, 23, 23}, rows[8])
	assert.Equal(t, []int{21, 21, 21, 21, 12, 12, 12, 10, 23, 23, 23, 23, 14, 14, 14, 13}, rows[7])
	for i := range rows {
		for j := range rows {
			assert.Equal(t, rows[i][j], rows[j][i], "symmetric %d-%d", i, j)
		}
	}
}

func TestPresetNUMA64(t *testing.T) {
	m := mustPreset(t, "numa64")
	require.Equal(t, numa.MaxNodes, m.NumNodes())
	assert.Equal(t, ^numa.Mask(0), m.AllNodes())
	assert.Equal(t, "0-7,512-519", m.NodeCPUs(0).String())
	assert.Equal(t, "504-511,1016-1023", m.NodeCPUs(63).String())
	requireSiblings(t, m, 512)
	d := m.Distances()
	assert.Equal(t, 10, d.At(5, 5))
	assert.Equal(t, 12, d.At(8, 15))
	assert.Equal(t, 32, d.At(7, 8))
	for id, node := range gpuNodes(m) {
		assert.EqualValues(t, id/2, node, "GPU %d", id)
	}
	g0, _ := m.GPU(0)
	g1, _ := m.GPU(1)
	g2, _ := m.GPU(2)
	assert.Equal(t, g0.PCIeSwitch, g1.PCIeSwitch)
	assert.NotEqual(t, g0.PCIeSwitch, g2.PCIeSwitch)
	assert.Len(t, m.NUMASets(), 8)
}

func TestPresetSmall1s(t *testing.T) {
	m := mustPreset(t, "small-1s")
	assert.Equal(t, "0-15", m.NodeCPUs(0).String())
	requireSiblings(t, m, 8)
	g, ok := m.GPU(0)
	require.True(t, ok)
	assert.Equal(t, numa.NodeID(0), g.NUMANode)
	assert.Empty(t, g.PCIeSwitch)
}

func TestPresetJSONRoundTrip(t *testing.T) {
	for _, name := range topology.PresetNames() {
		t.Run(name, func(t *testing.T) {
			m := mustPreset(t, name)
			var buf bytes.Buffer
			require.NoError(t, m.WriteJSON(&buf))
			back, err := topology.ParseJSON(buf.Bytes())
			require.NoError(t, err)
			require.Equal(t, m.Spec(), back.Spec())
			require.Equal(t, m.NumCores(), back.NumCores())
			require.Equal(t, m.NVLinks(), back.NVLinks())
		})
	}
}
