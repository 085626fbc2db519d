package topology_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

func picture(t *testing.T, m *topology.Machine, marks *topology.Marks) string {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, m.Picture(&buf, marks))
	out := buf.String()
	require.True(t, strings.HasSuffix(out, "\n"), "the picture ends with a newline")
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		require.LessOrEqual(t, utf8.RuneCountInString(l), topology.PictureWidth,
			"line %d is too wide: %q", i+1, l)
	}
	return out
}

// lineWithPrefix returns the first line that starts with prefix, or fails.
func lineWithPrefix(t *testing.T, out, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	require.Failf(t, "no such line", "no line starts with %q in:\n%s", prefix, out)
	return ""
}

func TestPictureEveryPresetFitsAndIsDeterministic(t *testing.T) {
	for _, name := range topology.PresetNames() {
		t.Run(name, func(t *testing.T) {
			m := mustPreset(t, name)
			marks := &topology.Marks{CPUs: map[int]rune{}, GPUs: map[int]rune{}, Legend: []string{"a = pod a"}}
			for cpu := range m.CPUs().All() {
				if cpu%3 == 0 {
					marks.CPUs[cpu] = 'a'
				}
			}
			for _, g := range m.GPUs() {
				marks.GPUs[g.ID] = 'a'
			}
			for _, mk := range []*topology.Marks{nil, marks} {
				first := picture(t, m, mk)
				for range 3 {
					require.Equal(t, first, picture(t, m, mk))
				}
				assert.True(t, strings.HasPrefix(first, name+": "), "starts with the name")
				// Every node appears with its ID (the placeholders, which
				// hold no device in the presets, on one line), every GPU
				// once.
				ph := m.NodesOfKind(topology.NodePlaceholder)
				for i, id := range m.NodeIDs() {
					if !ph.Contains(i) {
						assert.Contains(t, first, fmt.Sprintf("  node %d: ", id))
					}
				}
				if ph != 0 {
					assert.Contains(t, first, "NUMA placeholders (no CPUs, no memory): ")
					assert.Equal(t, 1, strings.Count(first, "placeholders ("), "one placeholder line")
				}
				for _, g := range m.GPUs() {
					assert.Equal(t, 1, strings.Count(first, fmt.Sprintf("] GPU %d ", g.ID)), "GPU %d", g.ID)
				}
			}
		})
	}
}

func TestPictureMarksAtTheirPlace(t *testing.T) {
	// One node, two SMT cores {0,2} and {1,3}; CPU 3 reserved.
	m, err := topology.NewBuilder("tiny").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 1536}).
		AddCore(numa.NewCPUSet(0, 2)).AddCore(numa.NewCPUSet(1, 3)).
		SetReservedCPUs(numa.NewCPUSet(3)).
		AddGPU(topology.GPU{ID: 0, NUMANode: 0, BusID: "0000:01:00.0", PCIeSwitch: "swA"}).
		AddGPU(topology.GPU{ID: 1, NUMANode: 0, BusID: "0000:02:00.0", PCIeSwitch: "swA"}).
		Build()
	require.NoError(t, err)

	out := picture(t, m, nil)
	assert.Contains(t, out, "\n    0-3 [..][.r]\n", "unmarked: free, reserved CPU 3 shows r")
	assert.Contains(t, out, "  node 0: 1536 MiB, 2 cores, CPUs 0-3\n")
	assert.Contains(t, out, "1 reserved")

	out = picture(t, m, &topology.Marks{
		CPUs:   map[int]rune{0: 'a', 2: 'b', 3: 'c', 99: 'z'},
		GPUs:   map[int]rune{1: topology.MarkUnhealthy, 7: 'z'},
		Legend: []string{"a = pod a", "x = unhealthy GPU"},
	})
	// Core {0,2} shows CPU 0 then CPU 2; a mark on reserved CPU 3 wins.
	assert.Contains(t, out, "\n    0-3 [ab][.c]\n")
	assert.NotContains(t, out, "z", "marks of unknown CPUs and GPUs are ignored")
	assert.Contains(t, out, "\n  a = pod a\n  x = unhealthy GPU\n")
	assert.Contains(t, out, "    PCIe switch swA\n      [.] GPU 0  0000:01:00.0\n      [x] GPU 1  0000:02:00.0\n")
}

func TestPictureDGXH100Marks(t *testing.T) {
	m := mustPreset(t, "dgx-h100")
	// CPU 57 and its sibling 169 form node 1's second core.
	out := picture(t, m, &topology.Marks{
		CPUs: map[int]rune{0: 'a', 112: 'a', 57: 'b', 55: 'c'},
		GPUs: map[int]rune{3: 'a', 4: 'b'},
	})
	first := lineWithPrefix(t, out, "    0-19,112-131 ")
	grid := strings.Fields(first)[1]
	assert.Equal(t, "[aa]", grid[:4])
	assert.Equal(t, strings.Repeat("[..]", 19), grid[4:])

	node1 := lineWithPrefix(t, out, "    56-75,168-187 ")
	grid = strings.Fields(node1)[1]
	assert.Equal(t, "[..][b.]"+strings.Repeat("[..]", 18), grid)

	last := lineWithPrefix(t, out, "    40-55,152-167 ")
	grid = strings.Fields(last)[1]
	assert.Len(t, grid, 16*4, "56 cores: lines of 20, 20 and 16")
	assert.Equal(t, "[c.]", grid[len(grid)-4:])

	assert.Contains(t, out, "    PCIe switch sw3\n      [a] GPU 3         0000:61:00.0\n"+
		"          rdma mlx5_5   0000:5e:00.0\n")
	assert.Contains(t, out, "      [b] GPU 4         0000:9d:00.0\n")
	assert.Contains(t, out, "NVLink: every pair of GPUs 0-7, 18 links each\n")
	assert.Contains(t, out, "distances\n  node   0   1\n     0  10  21\n     1  21  10\n")
	// Node 0 comes under socket 0, node 1 under socket 1.
	assert.Less(t, strings.Index(out, "socket 0\n"), strings.Index(out, "  node 0: 1024 GiB, 56 cores, CPUs 0-55,112-167\n"))
	assert.Less(t, strings.Index(out, "  node 0: "), strings.Index(out, "socket 1\n"))
	assert.Less(t, strings.Index(out, "socket 1\n"), strings.Index(out, "  node 1: "))
}

func TestPictureDGXA100(t *testing.T) {
	out := picture(t, mustPreset(t, "dgx-a100"), nil)
	assert.Contains(t, out, "dgx-a100: 2 sockets, 8 NUMA nodes, 256 CPUs on 128 cores, 8 GPUs, 8 rdma\n")
	// GPUs 0 and 1 are on node 3 under one switch with their two NICs.
	node3 := out[strings.Index(out, "  node 3: "):strings.Index(out, "socket 1\n")]
	assert.Contains(t, node3, "    PCIe switch sw0\n      [.] GPU 0        0000:07:00.0\n"+
		"      [.] GPU 1        0000:0f:00.0\n          rdma mlx5_0  0000:0c:00.0\n")
	assert.Contains(t, out, "\n     3  12  12  12  10  32  32  32  32\n")
	assert.Contains(t, out, "NUMA sets: {0-3} {4-7}\n")
	assert.NotContains(t, out, "unknown")
}

func TestPictureNUMA64Abbreviated(t *testing.T) {
	out := picture(t, mustPreset(t, "numa64"), nil)
	assert.Contains(t, out, "\n  node 0: 10 self, 12 to 1-7, 32 to 8-63\n")
	assert.Contains(t, out, "\n  node 9: 10 self, 12 to 8,10-15, 32 to 0-7,16-63\n")
	assert.NotContains(t, out, "  node   0   1", "no full matrix for 64 nodes")
	assert.Contains(t, out, "    504-511,1016-1023 [..][..][..][..][..][..][..][..]\n")
}

func TestPictureCPULessAndSparse(t *testing.T) {
	m := mustPreset(t, "xeon-max-snc4")
	out := picture(t, m, nil)
	assert.Contains(t, out, "  node 8: 16 GiB, no CPUs (memory only)\n")
	assert.Contains(t, out, "NUMA sets: {0-3,8-11} {4-7,12-15}\n")
	// HBM node 8 is listed under socket 0, before socket 1.
	assert.Less(t, strings.Index(out, "  node 8: "), strings.Index(out, "socket 1\n"))

	// Sparse IDs, no socket information, GPUs and devices of unknown node.
	sparse, err := topology.NewBuilder("").
		AddNode(topology.Node{ID: 0, Socket: topology.UnknownSocket, CPUs: numa.CPURange(0, 1)}).
		AddNode(topology.Node{ID: 33, Socket: topology.UnknownSocket, CPUs: numa.CPURange(2, 3), MemoryMiB: 2048}).
		AddGPU(topology.GPU{ID: 5, NUMANode: topology.UnknownNode, BusID: "0000:af:00.0"}).
		AddGPU(topology.GPU{ID: 6, NUMANode: 33}).
		AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: topology.UnknownNode}).
		SetDistances([][]int{{10, 31}, {31, 10}}).
		Build()
	require.NoError(t, err)
	out = picture(t, sparse, &topology.Marks{GPUs: map[int]rune{5: 'q'}})
	assert.True(t, strings.HasPrefix(out, "machine: 2 NUMA nodes, 4 CPUs on 4 cores, 2 GPUs, 1 rdma\n"), out)
	assert.Contains(t, out, "NUMA nodes (no socket information)\n  node 0: 0 MiB, 2 cores, CPUs 0-1\n")
	assert.Contains(t, out, "  node 33: 2 GiB, 2 cores, CPUs 2-3\n    2-3 [.][.]\n    no PCIe switch\n      [.] GPU 6\n")
	assert.Contains(t, out, "GPUs and devices of unknown NUMA node\n  no PCIe switch\n"+
		"    [q] GPU 5        0000:af:00.0\n        rdma mlx5_0\n")
	assert.Contains(t, out, "  node   0  33\n     0  10  31\n    33  31  10\n")
	assert.Contains(t, out, "NUMA sets: {0,33}\n")
}

func TestPictureLongListsWrap(t *testing.T) {
	// Node 0 holds the even CPUs, node 1 the odd ones: CPU lists of 64 items.
	var even, odd numa.CPUSet
	for c := 0; c < 128; c += 2 {
		even.Add(c)
		odd.Add(c + 1)
	}
	long := strings.Repeat("very-long-switch-name-", 6)
	m, err := topology.NewBuilder(strings.Repeat("a-very-long-machine-name-", 3)).
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: even}).
		AddNode(topology.Node{ID: 1, Socket: 1, CPUs: odd}).
		AddGPU(topology.GPU{ID: 0, NUMANode: 1, PCIeSwitch: long, BusID: "0000:01:00.0"}).
		AddDevice(topology.Device{ID: strings.Repeat("nic", 30), Class: "rdma", NUMANode: 0, PCIeSwitch: long}).
		Build()
	require.NoError(t, err)
	out := picture(t, m, &topology.Marks{Legend: []string{strings.Repeat("word ", 40)}})
	// The CPU list is wrapped, not lost: every CPU appears in the node lines.
	head := out[strings.Index(out, "  node 0: "):]
	head = head[:strings.Index(head, "\n    0,2")]
	assert.Contains(t, head, "126")
	assert.Greater(t, strings.Count(head, "\n"), 0, "the CPU list takes several lines")
	// Long grid labels are shortened with "..".
	assert.Contains(t, out, "..")
	assert.Contains(t, out, "1 GPU, 1 rdma")
}

func TestPictureErrors(t *testing.T) {
	m := mustPreset(t, "small-1s")
	err := m.Picture(&bytes.Buffer{}, &topology.Marks{CPUs: map[int]rune{0: '\n'}})
	require.ErrorContains(t, err, "CPU 0")
	err = m.Picture(&bytes.Buffer{}, &topology.Marks{GPUs: map[int]rune{0: ' '}})
	require.ErrorContains(t, err, "GPU 0")

	boom := errors.New("disk full")
	require.ErrorIs(t, m.Picture(failWriter{boom}, nil), boom)
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }
