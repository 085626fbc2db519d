package topology

import (
	"archive/tar"
	"compress/bzip2"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
)

// hwlocFixtures is the folder of real sysfs dumps from hwloc's test suite
// (see docs/design.md, "Real data"), relative to this package's directory.
const hwlocFixtures = "../../shared/fixtures/hwloc"

// readTarFS reads a .tar.bz2 sysfs dump into memory. The archive holds one
// top-level folder (its name may differ from the file's), which is
// stripped so the tree is rooted where "/" was. Symbolic links stay links.
func readTarFS(t testing.TB, file string) fstest.MapFS {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(bzip2.NewReader(f))
	m := fstest.MapFS{}
	top := ""
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "%s", file)
		name := strings.TrimPrefix(path.Clean(h.Name), "./")
		first, rest, _ := strings.Cut(name, "/")
		if top == "" {
			top = first
		}
		require.Equal(t, top, first, "%s: more than one top-level folder", file)
		if rest == "" {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			m[rest] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
		case tar.TypeSymlink:
			m[rest] = &fstest.MapFile{Mode: fs.ModeSymlink | 0o777, Data: []byte(h.Linkname)}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			require.NoError(t, err, "%s: %s", file, h.Name)
			m[rest] = &fstest.MapFile{Mode: 0o444, Data: data}
		default:
			t.Fatalf("%s: %s: unexpected tar entry type %q", file, h.Name, h.Typeflag)
		}
	}
	return m
}

// hwlocExpect is NAME.expect.json: the NUMA nodes that have CPUs, with their
// CPUs and memory, and the distances between them, as hwloc's lstopo saw
// them (NAME.console).
type hwlocExpect struct {
	Nodes map[string]struct {
		CPUs   []int `json:"cpus"`
		MemMiB int64 `json:"memMiB"`
	} `json:"nodes"`
	Distances map[string]map[string]int `json:"distances"`
}

// hwlocMemoryMatches reports whether our MiB (MemTotal rounded down) is what
// lstopo printed. lstopo rounds to the nearest MiB below 10 GiB and to the
// nearest GiB above ("local=8190MiB", "local=124GiB"), and expect.json holds
// that printed value in MiB, so the comparison allows that rounding: 1 MiB
// below 10 GiB (our value is rounded down, lstopo's to nearest), half a GiB
// above.
func hwlocMemoryMatches(ours, hwloc int64) bool {
	diff := max(ours-hwloc, hwloc-ours)
	if hwloc < 10*1024 {
		return diff <= 1
	}
	return diff <= 512
}

// fixtureChecks are the facts of each dump beyond expect.json, read from its
// .console and from the tree itself.
var fixtureChecks = map[string]func(t *testing.T, m *Machine){
	// Old Linux without cpulist, thread_siblings_list, cpu/online or
	// node/online: hex masks and directories only. Each node holds two
	// packages (hwloc's P#0 and P#196611 in node 0): the node takes its
	// lowest CPU's package.
	"8ia64-2n2s2c": func(t *testing.T, m *Machine) {
		require.Equal(t, []int{0, 256}, m.Sockets())
		require.Equal(t, 8, m.NumCores())
		// The L3 shared_cpu_map is all zeros: each CPU holds its own L3.
		require.Len(t, m.L3Groups(), 8)
	},
	// Node IDs 0,1,2,33,34,45,72,73 with positional distance rows: by ID,
	// d(33,72) is 22 (hwloc's matrix), while reading row 33 by position
	// would run past the 8 entries.
	"48amd64-4pa2n6c-sparse": func(t *testing.T, m *Machine) {
		require.Equal(t, []numa.NodeID{0, 1, 2, 33, 34, 45, 72, 73}, m.NodeIDs())
		require.Equal(t, []int{0, 1, 2, 3}, m.Sockets())
		require.Len(t, m.L3Groups(), 8)
	},
	// Two Xeons with SMT and 8 NEC vector engines (class 0x0b40) behind
	// PLX switches, plus Mellanox and Intel NICs: none is a GPU.
	"32intel64-2p8co2t+8ve": func(t *testing.T, m *Machine) {
		require.Equal(t, 2, m.ThreadsPerCore())
		require.Equal(t, 16, m.NumCores())
		require.Zero(t, m.NumGPUs())
	},
	// POWER9 with 6 NVIDIA GPUs whose memory is onlined as CPU-less nodes
	// 250-255. The dump's PCI entries are bare directories (no links, no
	// vendor file): the NVIDIA driver's proc listing identifies them, and
	// local_cpus (hex) gives their NUMA nodes as hwloc shows them (3 under
	// each package). Only 16 of each node's 88 CPUs are online.
	"nvidiagpunumanodes": func(t *testing.T, m *Machine) {
		require.Equal(t, []numa.NodeID{0, 8, 250, 251, 252, 253, 254, 255}, m.NodeIDs())
		var nodes []numa.NodeID
		for _, g := range m.GPUs() {
			nodes = append(nodes, g.NUMANode)
			require.Empty(t, g.PCIeSwitch)
		}
		require.Equal(t, []numa.NodeID{0, 0, 0, 8, 8, 8}, nodes)
		require.Equal(t, 4, m.ThreadsPerCore())
		// GPU memory nodes join their GPU's package: 0004:05:00.0 (node 0)
		// holds node 255, 0035:05:00.0 (node 8) holds node 250.
		i, _ := m.NodeIndex(255)
		require.Equal(t, 0, m.Node(i).Socket)
		i, _ = m.NodeIndex(250)
		require.Equal(t, 8, m.Node(i).Socket)
		// Each numa_status names its GPU's memory node (GPUs in bus
		// order 0004:05, 0004:06, 0006:00, 0007:00, 0035:04, 0035:05):
		// the nodes hwloc hides on POWER are GPU memory, not pod memory.
		for g, want := range []numa.NodeID{255, 254, 253, 252, 251, 250} {
			id, ok := m.GPUMemoryNode(g)
			require.True(t, ok, "GPU %d", g)
			require.Equal(t, want, id, "GPU %d", g)
		}
		gpuMem, _ := m.MaskOf(250, 251, 252, 253, 254, 255)
		require.Equal(t, gpuMem, m.NodesOfKind(NodeGPUMemory))
		require.Zero(t, m.NodesOfKind(NodeMemory)|m.NodesOfKind(NodePlaceholder))
	},
	// Node 0 is offline (no directory; node/online says 1) and CPUs 0-3
	// and 21-23 are offline (cpu/online says 4-20). Node 1 lists the odd
	// CPUs 1-23, of which 5-19 are online. The online even CPUs 4-20
	// belong to offline node 0: hwloc shows them in package 0 outside any
	// NUMA node, and the machine leaves them out, as every CPU of a Machine
	// is in a NUMA node. node1/distance still has two entries ("21 10",
	// written for nodes 0 and 1); a one-node machine does not read it.
	"offline-cpu0-node0": func(t *testing.T, m *Machine) {
		require.Equal(t, "5,7,9,11,13,15,17,19", m.CPUs().String())
		require.Equal(t, 1, m.NumNodes())
		require.Equal(t, []int{1}, m.Sockets())
	},
}

// TestDiscoverHwlocFixtures runs discovery over hwloc's real sysfs dumps
// and compares with what hwloc found. Discovery describes the hardware and
// ignores the dumping process's cpuset (proc/self/cpuset, sys/fs/cgroup),
// and every dump agrees with hwloc that way: in offline-cpu0-node0 the
// cpuset equals the online CPUs (4-20); in 32intel64-2p8co2t+8ve it is the
// whole machine; in nvidiagpunumanodes the process sits in cgroup /jjh whose
// cpuset.cpus (0-175) covers the machine, and although its
// cpuset.effective_cpus says 0-87 (which would drop node 8), hwloc shows
// node 8 with CPUs 88-103, as discovery does.
func TestDiscoverHwlocFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(hwlocFixtures, "*.tar.bz2"))
	require.NoError(t, err)
	if len(files) == 0 {
		t.Skipf("no hwloc fixtures in %s", hwlocFixtures)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".tar.bz2")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(strings.TrimSuffix(file, ".tar.bz2") + ".expect.json")
			require.NoError(t, err)
			var want hwlocExpect
			require.NoError(t, json.Unmarshal(data, &want))

			m, err := DiscoverFS(readTarFS(t, file))
			require.NoError(t, err)

			// The nodes that have CPUs, and their CPUs.
			var gotIDs, wantIDs []numa.NodeID
			for _, n := range m.Nodes() {
				if !n.CPUs.IsEmpty() {
					gotIDs = append(gotIDs, n.ID)
				}
			}
			for k := range want.Nodes {
				id, err := strconv.Atoi(k)
				require.NoError(t, err)
				wantIDs = append(wantIDs, numa.NodeID(id))
			}
			slices.Sort(wantIDs)
			require.Equal(t, wantIDs, gotIDs, "NUMA nodes with CPUs")
			for k, wn := range want.Nodes {
				id, _ := strconv.Atoi(k)
				i, _ := m.NodeIndex(numa.NodeID(id))
				n := m.Node(i)
				require.Equal(t, numa.NewCPUSet(wn.CPUs...).String(), n.CPUs.String(), "CPUs of node %d", id)
				require.True(t, hwlocMemoryMatches(n.MemoryMiB, wn.MemMiB),
					"memory of node %d: %d MiB, hwloc printed %d MiB", id, n.MemoryMiB, wn.MemMiB)
			}

			// Distances between those nodes. hwloc records none for a
			// one-node machine (empty in expect.json).
			for a, row := range want.Distances {
				for b, wd := range row {
					ia, _ := strconv.Atoi(a)
					ib, _ := strconv.Atoi(b)
					d, ok := m.Distances().Distance(numa.NodeID(ia), numa.NodeID(ib))
					require.True(t, ok, "distance %s-%s", a, b)
					require.Equal(t, wd, d, "distance %s-%s", a, b)
				}
			}
			if len(want.Distances) > 0 {
				require.Len(t, want.Distances, len(wantIDs))
			}

			if check, ok := fixtureChecks[name]; ok {
				check(t, m)
			}
		})
	}
}
