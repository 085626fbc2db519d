package topology

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
)

// gpuMachine is twoNodes with an NVIDIA GPU behind a switch on node 0 and
// an AMD one on node 1.
func gpuMachine() fakeMachine {
	f := twoNodes()
	f.pci = []fakePCI{
		{path: "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0", vendor: "0x10de", class: "0x030200", node: "0"},
		{path: "pci0000:80/0000:80:01.0/0000:81:00.0", vendor: "0x1002", class: "0x030000", node: "1", local: "4-7"},
	}
	return f
}

// writeTree writes a MapFS to a directory, symbolic links included.
func writeTree(t *testing.T, mem fstest.MapFS, root string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(mem)) {
		file := mem[name]
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		if file.Mode&fs.ModeSymlink != 0 {
			require.NoError(t, os.Symlink(string(file.Data), p))
		} else if !file.Mode.IsDir() {
			require.NoError(t, os.WriteFile(p, file.Data, 0o644))
		}
	}
}

// Copies of /sys made with tar pad each value with NUL bytes up to the size
// the file reports (4096): discovery reads them as the originals, as hwloc
// does (a value ends at its first NUL).
func TestDiscoverFSNULPadded(t *testing.T) {
	plain := gpuMachine().fs(t)
	padded := fstest.MapFS{}
	for name, f := range plain {
		c := *f
		if c.Mode.IsRegular() {
			c.Data = append(bytes.Clone(c.Data), make([]byte, 4096-len(c.Data))...)
		}
		padded[name] = &c
	}
	want, err := DiscoverFS(plain)
	require.NoError(t, err)
	got, err := DiscoverFS(padded)
	require.NoError(t, err)
	require.Equal(t, summarize(want), summarize(got))
	require.Len(t, got.GPUs(), 2)
	// Blanks and NULs around a value, and a value without its newline.
	setTree(t, padded, "sys/devices/system/node/node0/distance = \t 10   21 \x00\x00garbage")
	padded["sys/devices/system/cpu/online"] = &fstest.MapFile{Data: []byte(" 0-15"), Mode: 0o444}
	got, err = DiscoverFS(padded)
	require.NoError(t, err)
	require.Equal(t, summarize(want), summarize(got))
}

// Attribute files left empty (by some kernels, and by copies of /sys) read
// as hwloc reads them: an empty one-value attribute is a missing one; an
// empty CPU list or mask is the empty set; an empty online list is "0".
func TestDiscoverFSEmptyAttributes(t *testing.T) {
	const (
		node0 = "sys/devices/system/node/node0"
		cpu0  = "sys/devices/system/cpu/cpu0"
		gpu0  = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"
	)
	for _, c := range []struct {
		name  string
		files []string // emptied (0 bytes)
		pad   bool     // filled with NULs instead
		check func(t *testing.T, m *Machine)
	}{
		{"cpuN/online without cpu/online", []string{"sys/devices/system/cpu/cpu3/online"}, false, func(t *testing.T, m *Machine) {
			require.True(t, m.CPUs().Contains(3), "an empty online file says nothing: the CPU stays online")
		}},
		{"physical_package_id", []string{cpu0 + "/topology/physical_package_id"}, true, func(t *testing.T, m *Machine) {
			require.Equal(t, 0, m.Node(0).Socket, "the next CPU of the node gives the package")
		}},
		{"node cpulist", []string{node0 + "/cpulist"}, false, func(t *testing.T, m *Machine) {
			require.True(t, m.NodeCPUs(0).IsEmpty(), "an empty CPU list: a node without CPUs")
			require.Equal(t, "4-7,12-15", m.CPUs().String())
		}},
		{"thread_siblings_list", []string{cpu0 + "/topology/thread_siblings_list"}, false, func(t *testing.T, m *Machine) {
			c, _ := m.CPUCore(0)
			require.Equal(t, "0", m.CoreCPUs(c).String())
		}},
		{"distance", []string{node0 + "/distance"}, true, func(t *testing.T, m *Machine) {
			require.Equal(t, [][]int{{10, 20}, {20, 10}}, m.Distances().Rows(), "no distances: the defaults")
		}},
		{"meminfo", []string{node0 + "/meminfo"}, true, nil}, // an error: no MemTotal line
		{"cache level", []string{cpu0 + "/cache/index3/level"}, false, func(t *testing.T, m *Machine) {
			require.Len(t, m.L3Groups(), 2, "CPU 0's L3 comes from the next CPU of its group")
		}},
		{"GPU numa_node", []string{gpu0 + "/numa_node"}, false, func(t *testing.T, m *Machine) {
			require.Equal(t, UnknownNode, m.GPUs()[0].NUMANode, "no node and no local CPUs: unknown")
		}},
		{"GPU vendor", []string{gpu0 + "/vendor"}, true, func(t *testing.T, m *Machine) {
			require.Len(t, m.GPUs(), 1, "a device without a vendor is no GPU")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := gpuMachine().fs(t)
			for _, f := range c.files {
				data := []byte{}
				if c.pad {
					data = make([]byte, 4096)
				}
				m[f] = &fstest.MapFile{Data: data, Mode: 0o444}
			}
			got, err := DiscoverFS(m)
			if c.check == nil {
				require.ErrorIs(t, err, ErrDiscovery)
				require.ErrorContains(t, err, c.files[0])
				return
			}
			require.NoError(t, err)
			c.check(t, got)
		})
	}
}

// An empty online file reads as hwloc's hwloc__read_path_as_cpulist reads
// it: as "0".
func TestDiscoverFSEmptyOnlineFiles(t *testing.T) {
	m := twoNodes().fs(t)
	setTree(t, m, "sys/devices/system/node/online =")
	got, err := DiscoverFS(m)
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{0}, got.NodeIDs())

	m = twoNodes().fs(t)
	m["sys/devices/system/cpu/online"] = &fstest.MapFile{Data: make([]byte, 4096), Mode: 0o444}
	got, err = DiscoverFS(m)
	require.NoError(t, err)
	require.Equal(t, "0", got.CPUs().String())
}

// As hwloc, a CPU is there only with its cpuN directory and, when CPUs
// have one, its cpuN/topology directory.
func TestDiscoverFSCPUDirectories(t *testing.T) {
	m := twoNodes().fs(t)
	removeTree(m, "sys/devices/system/cpu/cpu5")
	removeTree(m, "sys/devices/system/cpu/cpu6/topology")
	got, err := DiscoverFS(m)
	require.NoError(t, err)
	require.Equal(t, "0-4,7-15", got.CPUs().String())
	// No CPU has a topology directory: every online CPU stays.
	for cpu := range 16 {
		removeTree(m, fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology", cpu))
	}
	got, err = DiscoverFS(m)
	require.NoError(t, err)
	require.Equal(t, "0-4,6-15", got.CPUs().String())
}

// Reads are bounded: only regular files of at most MaxSysfsFileBytes are
// read; a FIFO, a link to /dev/zero or a huge file is an error naming it,
// not a hang or an out-of-memory.
func TestDiscoverNotRegularFiles(t *testing.T) {
	const cpulist = "sys/devices/system/node/node0/cpulist"
	setup := func(t *testing.T, mk func(p string) error) string {
		root := t.TempDir()
		mem := twoNodes().fs(t)
		delete(mem, cpulist)
		writeTree(t, mem, root)
		require.NoError(t, mk(filepath.Join(root, filepath.FromSlash(cpulist))))
		return root
	}
	for _, c := range []struct {
		name, want string
		mk         func(p string) error
	}{
		{"FIFO", "not a regular file (a named pipe)", func(p string) error { return syscall.Mkfifo(p, 0o644) }},
		{"link to /dev/zero", "not a regular file (a character device)", func(p string) error { return os.Symlink("/dev/zero", p) }},
		{"huge file", "larger than 1048576 bytes", func(p string) error {
			return os.WriteFile(p, bytes.Repeat([]byte("0,"), MaxSysfsFileBytes), 0o644)
		}},
		{"directory", "not a regular file (a directory)", func(p string) error { return os.Mkdir(p, 0o755) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := setup(t, c.mk)
			done := make(chan error, 1)
			go func() {
				_, err := Discover(root)
				done <- err
			}()
			select {
			case err := <-done:
				require.ErrorIs(t, err, ErrDiscovery)
				require.ErrorContains(t, err, cpulist)
				require.ErrorContains(t, err, c.want)
			case <-time.After(20 * time.Second):
				t.Fatal("discovery hangs")
			}
		})
	}
	// A directory where a directory is wanted must be one.
	mem := twoNodes().fs(t)
	removeTree(mem, "sys/devices/system/cpu")
	mem["sys/devices/system/cpu"] = &fstest.MapFile{Data: []byte("x"), Mode: 0o444}
	_, err := DiscoverFS(mem)
	require.ErrorContains(t, err, "sys/devices/system/cpu: not a directory")
}

// An error quotes at most a short, escaped prefix of a bad value.
func TestDiscoverFSErrorsQuoteShort(t *testing.T) {
	m := twoNodes().fs(t)
	bad := "0-3,\x01\x1b[31m" + strings.Repeat("x", 100_000)
	m["sys/devices/system/node/node0/cpulist"] = &fstest.MapFile{Data: []byte(bad), Mode: 0o444}
	delete(m, "sys/devices/system/node/node0/cpumap")
	_, err := DiscoverFS(m)
	require.ErrorIs(t, err, ErrDiscovery)
	require.Less(t, len(err.Error()), 400, err.Error())
	require.Contains(t, err.Error(), `\x01\x1b[31m`)
	require.Contains(t, err.Error(), "... (100010 bytes)")
	require.NotContains(t, err.Error(), "\x1b")

	m = twoNodes().fs(t)
	setTree(t, m, "sys/devices/system/cpu/cpu0/topology/physical_package_id = "+strings.Repeat("\u00e9", 1000))
	_, err = DiscoverFS(m)
	require.Less(t, len(err.Error()), 300, err.Error())
}

// Discover and DiscoverFS take the directory holding sys/ or the sys
// directory itself; with the latter, Discover finds proc/ beside it.
func TestDiscoverSysDirectory(t *testing.T) {
	mem := gpuMachine().fs(t)
	// A CPU-less node holding the NVIDIA GPU's memory, known from proc/.
	setTree(t, mem, "sys/devices/system/node/online = 0-1,4",
		"sys/devices/system/node/node4/cpulist =",
		"sys/devices/system/node/node0/distance = 10 21 40",
		"sys/devices/system/node/node1/distance = 21 10 40",
		"sys/devices/system/node/node4/distance = 40 40 10",
		"proc/driver/nvidia/gpus/0000:03:00.0/numa_status = Node: 4")
	root := t.TempDir()
	writeTree(t, mem, root)
	want, err := Discover(root)
	require.NoError(t, err)
	i, _ := want.NodeIndex(4)
	require.Equal(t, 0, want.Node(i).Socket, "proc/ was read")

	got, err := Discover(filepath.Join(root, "sys"))
	require.NoError(t, err)
	require.Equal(t, want.Spec(), got.Spec())
	got, err = Discover(filepath.Join(root, "sys") + "/")
	require.NoError(t, err)
	require.Equal(t, want.Spec(), got.Spec())

	sub, err := fs.Sub(os.DirFS(root), "sys")
	require.NoError(t, err)
	got, err = DiscoverFS(sub)
	require.NoError(t, err)
	require.Equal(t, want.NodeIDs(), got.NodeIDs())
	require.Equal(t, summarize(want).GPUs, summarize(got).GPUs, "links resolve inside the sys directory")
	j, _ := got.NodeIndex(4)
	require.Equal(t, UnknownSocket, got.Node(j).Socket, "DiscoverFS of a sys directory has no proc/")

	// A directory that is neither: the error names what is missing.
	_, err = Discover(t.TempDir())
	require.ErrorContains(t, err, "neither the online file nor any cpuN directory exists")
}
