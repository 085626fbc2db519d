package topology

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/internal/readfile"
	"github.com/numaplace/numaplace/numa"
)

// Paths inside the file system handed to DiscoverFS (rooted at "/").
const (
	sysNodeDir  = "sys/devices/system/node"
	sysCPUDir   = "sys/devices/system/cpu"
	sysPCIDir   = "sys/bus/pci/devices"
	sysDevices  = "sys/devices"
	procMeminfo = "proc/meminfo"
	procNvidia  = "proc/driver/nvidia/gpus"
)

// PCI vendor IDs of the GPU makers discovery recognises.
const (
	vendorNVIDIA = 0x10de
	vendorAMD    = 0x1002
)

// DiscoverFS reads the machine from a Linux system tree: fsys is rooted
// where "/" would be, so it holds sys/devices/system/... (and optionally
// proc/); an fsys rooted at a sys directory itself (holding
// devices/system) is read as if it were mounted at sys/, without proc/.
// The machine is built with a [Builder]; its name is empty. The rules
// follow hwloc's Linux backend (topology-linux.c), the reference reader of
// these trees, on every point below that names it; its own test trees are
// compared with its output in this package's tests.
//
// How files are read:
//
//   - Only regular files, of at most [MaxSysfsFileBytes], and directories of
//     at most [MaxSysfsDirEntries] entries are read; anything else (a FIFO,
//     a link to /dev/zero, a huge file) is an error naming the path.
//   - A value ends at its first NUL byte and blanks around it are ignored,
//     as hwloc reads files into C strings: copies of /sys made with tar pad
//     each value with NULs.
//   - An empty value (an empty file, or NULs or blanks only, as some kernels
//     and copies leave them) of a one-value attribute (an online flag, a
//     package, a NUMA node, a cache level, a PCI ID, a distance row) counts
//     as a missing file, as in hwloc, whose reads fail on an empty file. An
//     empty CPU list or mask is the empty set. An empty cpu/online or
//     node/online reads as "0" (CPU 0, node 0), as hwloc's cpulist parser
//     hwloc__read_path_as_cpulist reads it.
//   - Errors quote a bad value escaped and cut to 64 bytes.
//
// What is read, and the rules applied:
//
//   - Online CPUs: sys/devices/system/cpu/online or, when that file is
//     missing, the cpuN directories, a cpuN/online file holding "0" marking
//     CPU N offline. Neither present is an error. As in hwloc, a CPU is
//     only there with its cpuN directory and, unless no CPU has one, its
//     cpuN/topology directory. Offline CPUs are left out of everything.
//   - NUMA nodes: the IDs in sys/devices/system/node/online or, when that
//     file is missing, the nodeN directories. A node's CPUs are its hex
//     nodeN/cpumap (as hwloc reads them; else nodeN/cpulist) intersected
//     with the online CPUs. As in hwloc, a listed node without either file
//     (or without a directory) is left out, and so is a node whose CPUs a
//     lower node already has (hwloc's "overlapping NUMA node cpusets"),
//     with its memory. Online CPUs that no node holds are left out: the
//     machine holds every CPU in exactly one node, and such CPUs (whose
//     node is offline) cannot be placed with a NUMA guarantee. With no node
//     at all (no node directory, as on kernels without NUMA, or no listed
//     node readable) the machine has one node 0 holding every online CPU,
//     with the MemTotal of proc/meminfo (0 when that file is missing).
//   - Memory: the MemTotal line of nodeN/meminfo, in kB, rounded down to MiB.
//     A missing meminfo gives 0 MiB (the node then offers no memory to
//     requests); a meminfo without a readable MemTotal is an error.
//   - Distances: nodeN/distance, whose entries are positional in ascending
//     order of the listed node IDs (left-out nodes included); they are
//     stored by ID. As hwloc does (hwloc_parse_nodes_distances), a row
//     longer than the number of listed nodes is read up to that number
//     (kernels list offline nodes' columns in some trees), and when any
//     listed node has no distance file (or an empty one), a row too short or
//     a non-numeric entry, the whole table takes the defaults (10 local, 20
//     remote), where hwloc reports no distances. So does a table with an
//     entry outside 1-255 or a local distance above another entry of its
//     row, which hwloc would keep and a machine cannot. A machine of one
//     listed node does not read its distance file (its table is the single
//     local distance 10).
//   - More than 64 NUMA nodes: a *[TooManyNodesError], before any per-node
//     file is read.
//   - Sockets: a node's socket is the topology/physical_package_id of its
//     lowest CPU whose package is known (a node whose CPUs disagree takes the
//     package of that lowest CPU); a node whose CPUs report no package
//     (missing file or -1) has [UnknownSocket]. A CPU-less node has
//     [UnknownSocket] too, unless it is the memory of an NVIDIA GPU (see
//     below): then it takes the socket of the GPU's NUMA node. NUMA sets
//     are the builder's default (one per socket; a node of unknown socket
//     joins its nearest node's set).
//   - Kinds of CPU-less node (see [NodeKind]): a node the NVIDIA driver
//     names as a GPU's memory (the "Node:" line of
//     proc/driver/nvidia/gpus/BUS/numa_status, as on POWER9 and Grace
//     machines, read as hwloc reads it) is that GPU's memory node
//     ([Node.GPUMemory], [NodeGPUMemory]), provided it is listed and has no
//     CPUs and no other GPU named it first; the GPU's [GPU.MemoryMiB] is
//     then the node's MemTotal (otherwise discovery leaves it 0, unknown). Where the driver's file is
//     missing (a copy of /sys alone), a CPU-less node with memory that an
//     NVIDIA GPU's PCI numa_node names is that GPU's memory, as on Grace
//     machines, unless it is already a GPU's. A CPU-less node with memory
//     that no GPU names is plain memory ([NodeMemory]: HBM in flat mode,
//     CXL); a node with neither CPUs nor memory is a placeholder
//     ([NodePlaceholder], such as the nodes Grace machines reserve for MIG
//     instances).
//   - Cores: the SMT sibling groups of topology/thread_siblings_list (else
//     the hex thread_siblings), restricted to the machine's CPUs; a CPU with
//     neither file (or no cpuN/topology directory) is a core by itself.
//     Inconsistent sibling groups (overlapping another CPU's group, or
//     spanning NUMA nodes, as fake-NUMA setups produce) are cut to the CPU's
//     node and to the CPUs no earlier core holds, scanning CPUs in ascending
//     order.
//   - L3 groups (optional): cpuN/cache/indexK with level 3 (instruction
//     caches skipped) and shared_cpu_list (else the hex shared_cpu_map),
//     restricted to the machine's CPUs and always including CPU N itself (some
//     architectures report an empty map). Missing cache directories are
//     skipped; a group that overlaps an earlier one is cut to the CPUs no
//     earlier group holds.
//   - GPUs: the PCI devices of sys/bus/pci/devices (or, when that directory
//     is missing, the PCI device directories under sys/devices/pci*) whose
//     vendor is NVIDIA (0x10de) or AMD (0x1002) and whose class is 0x0300xx
//     (VGA) or 0x0302xx (3D controller), or 0x0380xx (display controller)
//     for AMD, as AMD Instinct accelerators report. Other devices, such as an
//     NVSwitch (class 0x0680) or a GPU's audio function, are ignored. A
//     device without a vendor file counts as NVIDIA when the NVIDIA driver
//     lists it in proc/driver/nvidia/gpus; a device without a vendor or class
//     is not a GPU.
//   - A GPU's NUMA node: its numa_node, unless that is negative or not an
//     online node; then the node whose CPUs hold every machine CPU of the
//     device's local_cpulist (else the hex local_cpus) when exactly one node
//     does; then, on a one-node machine, that node; else [UnknownNode].
//     A GPU whose node so found is a GPU memory node (its PCI numa_node
//     names its own memory, as on Grace machines) is placed on the
//     nearest node with CPUs by the distance table; on a tie, the one
//     whose CPUs hold the GPU's local CPUs, else the lowest ID. Its memory
//     node stays in the machine, with its distances. An RDMA device whose
//     node is a GPU memory node is placed the same way.
//   - A GPU's BusID is its PCI address; GPU IDs are 0, 1, 2, ... in
//     ascending bus-ID order (domain, bus, device, function), nvidia-smi's
//     default PCI order. Its UUID is the "GPU UUID" of
//     proc/driver/nvidia/gpus/BUS/information where the NVIDIA driver
//     writes one (see [ReadNVIDIAGPUInfo]), else empty.
//   - RDMA devices: every entry of a PCI device's infiniband directory
//     (sys/bus/pci/devices/BUS/infiniband/IBDEV, such as infiniband/mlx5_0)
//     is a [Device] of class "rdma" with ID IBDEV, the PCI device's bus ID,
//     and its NUMA node and PCIeSwitch by the rules for GPUs below. An
//     entry that is not a directory, or whose name is not an InfiniBand
//     device name (printable ASCII without blanks, at most 63 bytes), is an
//     error naming it; two PCI devices listing the same IBDEV are an error.
//   - A GPU's PCIeSwitch comes from its sysfs device path: the target of its
//     sys/bus/pci/devices symlink when fsys implements [fs.ReadLinkFS] (an
//     absolute target is taken inside fsys, and the device's files are read
//     there), else the directory of that name found by scanning
//     sys/devices/pci*. Let B be the chain of PCI bridges
//     from the host bridge (pciDDDD:BB) down to the GPU, B[0] the root port
//     and B[k-1] the GPU's parent. The switch is named by the bus ID of
//     B[k-2], the grandparent: below a PCIe switch that is the switch's
//     upstream port (for .../pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0
//     it is "0000:01:00.0"; behind nested switches, the innermost one). A GPU
//     directly under a root port (k = 1) gets the root port's bus ID. A GPU on
//     the host bridge itself (k = 0), or whose path is unknown, gets "".
//
// Restrictions of the calling process (proc/self/cpuset, cgroups) are not
// applied: the machine describes the hardware, and CPUs kept from workloads
// are the business of [Builder.SetReservedCPUs] and the adapters.
//
// Missing optional files take the fallbacks above; a file that is present
// but malformed is an error naming it. Every error unwraps to
// [ErrDiscovery] and names the path it concerns; errors from the builder
// (such as *[TooManyNodesError] or *[ValidationError]) are wrapped as well,
// so errors.As finds them.
func DiscoverFS(fsys fs.FS) (*Machine, error) {
	d := &discovery{fsys: rootAtSys(fsys)}
	if err := d.readOnlineCPUs(); err != nil {
		return nil, err
	}
	if err := d.readNodes(); err != nil {
		return nil, err
	}
	if err := d.readCPUTopology(); err != nil {
		return nil, err
	}
	if err := d.readL3(); err != nil {
		return nil, err
	}
	if err := d.readGPUs(); err != nil {
		return nil, err
	}
	if err := d.readRDMA(); err != nil {
		return nil, err
	}
	if err := d.readGPUMemoryNodes(); err != nil {
		return nil, err
	}
	if err := d.readNVIDIAUUIDs(); err != nil {
		return nil, err
	}
	return d.build()
}

// Discover reads the machine from the Linux system tree under root: either
// the directory holding sys/ (and optionally proc/), such as "/" for this
// machine, or a sys directory itself (such as "/sys", or a copy of one),
// whose proc/ is then its sibling directory "proc" when there is one. See
// [DiscoverFS] for the rules.
func Discover(root string) (*Machine, error) {
	if isDir(filepath.Join(root, "sys")) || !isDir(filepath.Join(root, "devices", "system")) {
		return DiscoverFS(os.DirFS(root))
	}
	f := sysOnlyFS{sys: os.DirFS(root)}
	if proc := filepath.Join(filepath.Dir(filepath.Clean(root)), "proc"); isDir(proc) {
		f.proc = os.DirFS(proc)
	}
	return DiscoverFS(f)
}

func isDir(p string) bool {
	info, err := os.Stat(p)
	return err == nil && info.IsDir()
}

// sysOnlyFS presents a file system rooted at a sys directory (and
// optionally one rooted at a proc directory) as one rooted at "/": "sys/x"
// is x of sys, "proc/x" is x of proc.
type sysOnlyFS struct{ sys, proc fs.FS }

// split returns the file system and the name inside it that name denotes.
func (f sysOnlyFS) split(op, name string) (fs.FS, string, error) {
	if !fs.ValidPath(name) {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	for _, top := range []struct {
		dir  string
		fsys fs.FS
	}{{"sys", f.sys}, {"proc", f.proc}} {
		if top.fsys == nil {
			continue
		}
		if name == top.dir {
			return top.fsys, ".", nil
		}
		if rest, ok := strings.CutPrefix(name, top.dir+"/"); ok {
			return top.fsys, rest, nil
		}
	}
	return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

// Open implements fs.FS.
func (f sysOnlyFS) Open(name string) (fs.File, error) {
	fsys, rest, err := f.split("open", name)
	if err != nil {
		return nil, err
	}
	return fsys.Open(rest)
}

// Stat implements fs.StatFS.
func (f sysOnlyFS) Stat(name string) (fs.FileInfo, error) {
	fsys, rest, err := f.split("stat", name)
	if err != nil {
		return nil, err
	}
	return fs.Stat(fsys, rest)
}

// ReadLink implements fs.ReadLinkFS.
func (f sysOnlyFS) ReadLink(name string) (string, error) {
	fsys, rest, err := f.split("readlink", name)
	if err != nil {
		return "", err
	}
	return fs.ReadLink(fsys, rest)
}

// Lstat implements fs.ReadLinkFS.
func (f sysOnlyFS) Lstat(name string) (fs.FileInfo, error) {
	fsys, rest, err := f.split("lstat", name)
	if err != nil {
		return nil, err
	}
	return fs.Lstat(fsys, rest)
}

// rootAtSys returns fsys as DiscoverFS reads it: fsys itself when it holds
// sys/, or a view that puts it under sys/ when it is a sys directory itself
// (it holds devices/system).
func rootAtSys(fsys fs.FS) fs.FS {
	if info, err := fs.Stat(fsys, "sys"); err == nil && info.IsDir() {
		return fsys
	}
	if info, err := fs.Stat(fsys, "devices/system"); err == nil && info.IsDir() {
		return sysOnlyFS{sys: fsys}
	}
	return fsys
}

// discovery holds what DiscoverFS has read so far.
type discovery struct {
	fsys fs.FS

	online  numa.CPUSet // online CPUs
	cpuDirs numa.CPUSet // CPUs with a cpuN directory

	nodes     []Node // ascending ID
	nodeFile  []string
	distances [][]int     // positional, in the order of nodes; nil = defaults
	machine   numa.CPUSet // union of the nodes' CPUs

	pkg     map[int]int // cpu -> physical package (only known ones)
	cores   []numa.CPUSet
	l3      []numa.CPUSet
	gpus    []GPU
	gpuDirs []string // directory each GPU's attributes are read from
	gpuNV   []bool   // whether each GPU is NVIDIA's
	devs    []Device // RDMA devices
	devDirs []string // directory each device's attributes are read from

	pciList    []pciDevice // pciDevices' answer, once read
	pciListed  bool
	pciScanned bool
	pciPaths   map[string]string // bus ID -> directory under sys/devices
}

// discoveryError wraps err as a discovery failure concerning path. A
// *fs.PathError is unwrapped to its cause so the path is not said twice.
func discoveryError(p string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%w: %s: %w", ErrDiscovery, p, err)
}

// malformed returns a discovery failure for a file whose content is wrong.
func malformed(p, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrDiscovery, p, fmt.Sprintf(format, args...))
}

// Bounds on what discovery reads, so that a hostile or broken tree (a FIFO,
// a link to /dev/zero, a huge file or directory) gives an error instead of
// a hang or an out-of-memory.
const (
	// MaxSysfsFileBytes is the largest file discovery reads. Sysfs
	// attributes hold at most a page (a hex mask of 65,536 CPUs is 18 KiB);
	// a larger file is an error naming it.
	MaxSysfsFileBytes = 1 << 20
	// MaxSysfsDirEntries is the most entries discovery reads from one
	// directory; a larger directory is an error naming it.
	MaxSysfsDirEntries = 1 << 20
)

// read returns the content of file p up to its first NUL byte, and false
// (without error) when it does not exist. As hwloc does (it reads sysfs
// files into C strings: hwloc_read_path_by_length and hwloc__read_fd in
// hwloc's topology-linux.c), the value ends at the first NUL, so the NUL
// padding that tar gives copies of /sys (which report a size of 4096 bytes
// whatever they hold) is ignored. Only regular files are read, and at most
// MaxSysfsFileBytes of them: anything else (a directory, a FIFO, a device
// such as a link to /dev/zero) is an error naming p.
func (d *discovery) read(p string) (string, bool, error) {
	info, err := fs.Stat(d.fsys, p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, nil
		}
		return "", false, discoveryError(p, err)
	}
	if !info.Mode().IsRegular() {
		return "", false, malformed(p, "not a regular file (%s)", readfile.Kind(info.Mode()))
	}
	f, err := d.fsys.Open(p)
	if err != nil {
		return "", false, discoveryError(p, err)
	}
	defer f.Close()
	// The file may have been replaced since the Stat: check what was opened.
	if info, err := f.Stat(); err != nil {
		return "", false, discoveryError(p, err)
	} else if !info.Mode().IsRegular() {
		return "", false, malformed(p, "not a regular file (%s)", readfile.Kind(info.Mode()))
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSysfsFileBytes+1))
	if err != nil {
		return "", false, discoveryError(p, err)
	}
	if len(b) > MaxSysfsFileBytes {
		return "", false, malformed(p, "larger than %d bytes", MaxSysfsFileBytes)
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b), true, nil
}

// readAttr returns the value of the one-value attribute file p with the
// surrounding blanks removed. An empty value (an empty file, or one of
// NULs or blanks only) is reported as a missing file, as hwloc does:
// hwloc_read_path_by_length fails on an empty read, so hwloc_read_path_as_int
// and hwloc_read_path_as_uint treat the attribute as absent (some kernels
// and copies of /sys leave attribute files empty).
func (d *discovery) readAttr(p string) (string, bool, error) {
	s, ok, err := d.read(p)
	s = strings.TrimSpace(s)
	return s, ok && s != "", err
}

// readDir lists directory p (at most MaxSysfsDirEntries entries, in name
// order); a missing directory is empty and reported as false, anything
// other than a directory is an error.
func (d *discovery) readDir(p string) ([]fs.DirEntry, bool, error) {
	info, err := fs.Stat(d.fsys, p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		return nil, false, discoveryError(p, err)
	}
	if !info.IsDir() {
		return nil, false, malformed(p, "not a directory (%s)", readfile.Kind(info.Mode()))
	}
	f, err := d.fsys.Open(p)
	if err != nil {
		return nil, false, discoveryError(p, err)
	}
	defer f.Close()
	dir, ok := f.(fs.ReadDirFile)
	if !ok {
		return nil, false, malformed(p, "cannot be listed")
	}
	var entries []fs.DirEntry
	for {
		chunk, err := dir.ReadDir(1024)
		entries = append(entries, chunk...)
		if len(entries) > MaxSysfsDirEntries {
			return nil, false, malformed(p, "more than %d entries", MaxSysfsDirEntries)
		}
		if errors.Is(err, io.EOF) || err == nil && len(chunk) == 0 {
			break
		}
		if err != nil {
			return nil, false, discoveryError(p, err)
		}
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return entries, true, nil
}

// cpuFile is a file holding a CPU set: a Linux cpulist, or a hex mask.
type cpuFile struct {
	path string
	mask bool
}

// readCPUs reads a CPU set from the first of files that exists. An empty
// value (as of a node without CPUs, or a file left empty) is the empty set,
// as hwloc's mask parser hwloc__read_path_as_cpumask reads it. It returns
// the path it read, or "" when no file exists.
func (d *discovery) readCPUs(files ...cpuFile) (numa.CPUSet, string, error) {
	for _, f := range files {
		s, ok, err := d.read(f.path)
		if err != nil {
			return numa.CPUSet{}, f.path, err
		}
		if !ok {
			continue
		}
		s = strings.TrimSpace(s)
		if s == "" {
			return numa.CPUSet{}, f.path, nil
		}
		parse := numa.ParseCPUSet
		if f.mask {
			parse = numa.ParseCPUMask
		}
		set, err := parse(s)
		if err != nil {
			return numa.CPUSet{}, f.path, discoveryError(f.path, err)
		}
		return set, f.path, nil
	}
	return numa.CPUSet{}, "", nil
}

// listAndMask returns the cpuFiles of a cpulist file and, as fallback, its
// hex mask twin.
func listAndMask(list, mask string) []cpuFile {
	return []cpuFile{{path: list}, {path: mask, mask: true}}
}

// readOnlineList reads an online file (sys/devices/system/cpu/online or
// node/online), a cpulist, as hwloc's hwloc__read_path_as_cpulist does: an
// empty value reads as "0" (the parser starts from a full set and clears
// around the ranges it finds; strtoul of an empty string is 0, so only 0
// stays), that is CPU 0 or node 0 alone.
func (d *discovery) readOnlineList(p string) (numa.CPUSet, bool, error) {
	s, ok, err := d.read(p)
	if err != nil || !ok {
		return numa.CPUSet{}, false, err
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return numa.NewCPUSet(0), true, nil
	}
	set, err := numa.ParseCPUSet(s)
	if err != nil {
		return numa.CPUSet{}, false, discoveryError(p, err)
	}
	return set, true, nil
}

// numberedEntries returns the N of the entries named prefix+N (N decimal),
// ascending. Directories and symbolic links count (sysfs has both).
func numberedEntries(entries []fs.DirEntry, prefix string) []int {
	var out []int
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.TrimLeft(rest, "0123456789") != "" {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n > numa.MaxCPUID {
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (d *discovery) readOnlineCPUs() error {
	entries, _, err := d.readDir(sysCPUDir)
	if err != nil {
		return err
	}
	for _, n := range numberedEntries(entries, "cpu") {
		d.cpuDirs.Add(n)
	}
	p := sysCPUDir + "/online"
	online, ok, err := d.readOnlineList(p)
	if err != nil {
		return err
	}
	if ok {
		d.online = online.Clone()
		if !d.cpuDirs.IsEmpty() {
			// As hwloc, which lists the cpuN directories and keeps the
			// online ones: a CPU without a directory is not there.
			d.online.IntersectWith(d.cpuDirs)
		}
		if d.online.IsEmpty() {
			return malformed(p, "no CPU is online (the file lists %s, the cpuN directories %s)",
				shortSet(online), shortSet(d.cpuDirs))
		}
		return d.dropCPUsWithoutTopology()
	}
	if d.cpuDirs.IsEmpty() {
		return malformed(sysCPUDir, "neither the online file nor any cpuN directory exists")
	}
	for cpu := range d.cpuDirs.All() {
		p := fmt.Sprintf("%s/cpu%d/online", sysCPUDir, cpu)
		s, ok, err := d.readAttr(p)
		if err != nil {
			return err
		}
		switch {
		case !ok:
			// No online file, or an empty one (hwloc reads nothing from
			// it): the CPU cannot be taken offline (often cpu0).
		case s == "1":
		case s == "0":
			continue
		default:
			return malformed(p, "want 0 or 1, found %s", quote.Short(s))
		}
		d.online.Add(cpu)
	}
	if d.online.IsEmpty() {
		return malformed(sysCPUDir, "every cpuN directory is marked offline")
	}
	return d.dropCPUsWithoutTopology()
}

// dropCPUsWithoutTopology leaves out the online CPUs whose cpuN/topology
// directory is missing, as hwloc's look_sysfscpu does ("no accessible
// topology"), unless no CPU has one (trees of kernels without the
// directory keep every online CPU).
func (d *discovery) dropCPUsWithoutTopology() error {
	if d.cpuDirs.IsEmpty() {
		return nil
	}
	var without numa.CPUSet
	for cpu := range d.online.All() {
		p := fmt.Sprintf("%s/cpu%d/topology", sysCPUDir, cpu)
		if _, err := fs.Stat(d.fsys, p); errors.Is(err, fs.ErrNotExist) {
			without.Add(cpu)
		} else if err != nil {
			return discoveryError(p, err)
		}
	}
	if !without.Equal(d.online) {
		d.online.RemoveAll(without)
	}
	return nil
}

func (d *discovery) readNodes() error {
	entries, _, err := d.readDir(sysNodeDir)
	if err != nil {
		return err
	}
	var ids []int
	set, ok, err := d.readOnlineList(sysNodeDir + "/online") // node lists use the cpulist format
	if err != nil {
		return err
	}
	if ok {
		ids = set.List()
	} else {
		ids = numberedEntries(entries, "node")
	}
	if len(ids) == 0 {
		return d.singleNode()
	}
	if len(ids) > numa.MaxNodes {
		return discoveryError(sysNodeDir, &TooManyNodesError{Nodes: len(ids)})
	}
	var kept []int      // indexes into ids of the nodes read
	var raw numa.CPUSet // union of the kept nodes' CPU masks, offline CPUs included
	for k, id := range ids {
		dir := fmt.Sprintf("%s/node%d", sysNodeDir, id)
		cpus, file, err := d.readCPUs(cpuFile{path: dir + "/cpumap", mask: true}, cpuFile{path: dir + "/cpulist"})
		if err != nil {
			return err
		}
		if file == "" || cpus.Intersects(raw) {
			// As hwloc's look_sysfsnode: a node whose CPU mask cannot be
			// read (no directory, no cpumap) is not created, and a node
			// whose CPUs an earlier (lower ID) node already has is
			// ignored ("buggy BIOS with overlapping NUMA node cpusets").
			continue
		}
		raw.UnionWith(cpus)
		cpus.IntersectWith(d.online)
		mem, err := d.readMemTotal(dir + "/meminfo")
		if err != nil {
			return err
		}
		d.nodes = append(d.nodes, Node{ID: numa.NodeID(id), Socket: UnknownSocket, CPUs: cpus, MemoryMiB: mem})
		d.nodeFile = append(d.nodeFile, file)
		d.machine.UnionWith(cpus)
		kept = append(kept, k)
	}
	if len(d.nodes) == 0 {
		// hwloc then makes one NUMA node of the whole machine.
		return d.singleNode()
	}
	if len(ids) > 1 {
		return d.readDistances(ids, kept)
	}
	return nil
}

// singleNode makes the machine one node 0 holding every online CPU.
func (d *discovery) singleNode() error {
	mem, err := d.readMemTotal(procMeminfo)
	if err != nil {
		return err
	}
	d.nodes = []Node{{ID: 0, Socket: UnknownSocket, CPUs: d.online.Clone(), MemoryMiB: mem}}
	d.nodeFile = []string{sysCPUDir + "/online"}
	d.machine = d.online.Clone()
	return nil
}

// readMemTotal returns the MemTotal of meminfo file p in MiB, 0 when the file
// is missing.
func (d *discovery) readMemTotal(p string) (int64, error) {
	s, ok, err := d.read(p)
	if err != nil || !ok {
		return 0, err
	}
	mib, err := parseMemTotal(s)
	if err != nil {
		return 0, discoveryError(p, err)
	}
	return mib, nil
}

// parseMemTotal finds the MemTotal line of a meminfo file, either the
// per-node form "Node 0 MemTotal:  131072 kB" or the /proc/meminfo form
// "MemTotal:  131072 kB", and returns it in MiB, rounded down. The unit, when
// present, must be kB.
func parseMemTotal(s string) (int64, error) {
	for line := range strings.Lines(s) {
		_, rest, ok := strings.Cut(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 || len(f) > 2 || (len(f) == 2 && f[1] != "kB") {
			return 0, fmt.Errorf("MemTotal line %s: want a number of kB", quote.Short(strings.TrimSpace(line)))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("MemTotal line %s: %s is not a size in kB", quote.Short(strings.TrimSpace(line)), quote.Short(f[0]))
		}
		return kb / 1024, nil
	}
	return 0, errors.New("no MemTotal line")
}

// parseDistanceRow parses one nodeN/distance file: whitespace-separated
// decimal distances, each in 1-255 (Linux keeps them in a byte).
func parseDistanceRow(s string) ([]int, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return nil, errors.New("no distance")
	}
	row := make([]int, len(f))
	for i, w := range f {
		v, err := strconv.Atoi(w)
		if err != nil || v < 1 || v > 255 {
			return nil, fmt.Errorf("entry %d is %s, want a number in 1-255", i, quote.Short(w))
		}
		row[i] = v
	}
	return row, nil
}

// readDistances reads the distance rows of the listed nodes ids (positional
// in that order) and keeps the rows and columns of the nodes read (kept,
// indexes into ids); any missing, empty or unusable row gives the defaults
// (see DiscoverFS), as hwloc_parse_nodes_distances gives no distances.
func (d *discovery) readDistances(ids, kept []int) error {
	rows := make([][]int, len(ids))
	for i, id := range ids {
		p := fmt.Sprintf("%s/node%d/distance", sysNodeDir, id)
		s, ok, err := d.readAttr(p)
		if err != nil {
			return err // an unreadable file, not a malformed one
		}
		if !ok {
			return nil // documented fallback: default distances
		}
		row, err := parseDistanceRow(s)
		if err != nil || len(row) < len(ids) {
			return nil // documented fallback: default distances
		}
		rows[i] = row[:len(ids)]
	}
	table := make([][]int, len(kept))
	nodeIDs := make([]numa.NodeID, len(kept))
	for a, i := range kept {
		nodeIDs[a] = numa.NodeID(ids[i])
		for _, j := range kept {
			table[a] = append(table[a], rows[i][j])
		}
	}
	if _, err := numa.NewDistances(nodeIDs, table); err != nil {
		return nil // documented fallback: default distances
	}
	d.distances = table
	return nil
}

// parseInt parses a decimal integer file such as physical_package_id or
// numa_node.
func parseInt(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s is not a decimal integer", quote.Short(strings.TrimSpace(s)))
	}
	return v, nil
}

// parseHexID parses a PCI identifier file such as vendor ("0x10de") or class
// ("0x030200"): hexadecimal, "0x" prefix optional, at most 32 bits.
func parseHexID(s string) (uint32, error) {
	t := strings.TrimSpace(s)
	h := strings.TrimPrefix(strings.TrimPrefix(t, "0x"), "0X")
	if h == "" || h[0] == '+' || h[0] == '-' {
		return 0, fmt.Errorf("%s is not a hexadecimal identifier", quote.Short(t))
	}
	v, err := strconv.ParseUint(h, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%s is not a hexadecimal identifier", quote.Short(t))
	}
	return uint32(v), nil
}

func (d *discovery) readCPUTopology() error {
	d.pkg = make(map[int]int)
	var assigned numa.CPUSet
	for cpu := range d.machine.All() {
		if !d.cpuDirs.Contains(cpu) {
			continue
		}
		dir := fmt.Sprintf("%s/cpu%d/topology", sysCPUDir, cpu)
		p := dir + "/physical_package_id"
		s, ok, err := d.readAttr(p)
		if err != nil {
			return err
		}
		if ok {
			v, err := parseInt(s)
			if err != nil {
				return discoveryError(p, err)
			}
			if v >= 0 {
				d.pkg[cpu] = v
			}
		}
		if assigned.Contains(cpu) {
			continue
		}
		sib, file, err := d.readCPUs(listAndMask(dir+"/thread_siblings_list", dir+"/thread_siblings")...)
		if err != nil {
			return err
		}
		if file == "" {
			continue // no sibling information: a core by itself
		}
		sib.IntersectWith(d.machine)
		// Inconsistent sibling lists (overlapping another core's, or
		// spanning NUMA nodes, as fake-NUMA setups produce) are cut to the
		// CPU's node and to the CPUs no core holds yet, as hwloc does,
		// rather than refusing the machine.
		sib.RemoveAll(assigned)
		if node := d.nodeOf(cpu); node >= 0 {
			sib.IntersectWith(d.nodes[node].CPUs)
		}
		sib.Add(cpu)
		assigned.UnionWith(sib)
		d.cores = append(d.cores, sib)
	}
	for i := range d.nodes {
		for cpu := range d.nodes[i].CPUs.All() {
			if p, ok := d.pkg[cpu]; ok {
				d.nodes[i].Socket = p
				break
			}
		}
	}
	return nil
}

// nodeOf returns the index in d.nodes of the node holding cpu, or -1.
func (d *discovery) nodeOf(cpu int) int {
	for i, n := range d.nodes {
		if n.CPUs.Contains(cpu) {
			return i
		}
	}
	return -1
}

func (d *discovery) readL3() error {
	var covered numa.CPUSet
	for cpu := range d.machine.All() {
		if !d.cpuDirs.Contains(cpu) || covered.Contains(cpu) {
			continue
		}
		cacheDir := fmt.Sprintf("%s/cpu%d/cache", sysCPUDir, cpu)
		entries, _, err := d.readDir(cacheDir)
		if err != nil {
			return err
		}
		for _, k := range numberedEntries(entries, "index") {
			dir := fmt.Sprintf("%s/index%d", cacheDir, k)
			p := dir + "/level"
			s, ok, err := d.readAttr(p)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			level, err := parseInt(s)
			if err != nil {
				return discoveryError(p, err)
			}
			if level != 3 {
				continue
			}
			if t, _, err := d.readAttr(dir + "/type"); err != nil {
				return err
			} else if t == "Instruction" {
				continue
			}
			group, _, err := d.readCPUs(listAndMask(dir+"/shared_cpu_list", dir+"/shared_cpu_map")...)
			if err != nil {
				return err
			}
			group.IntersectWith(d.machine)
			group.RemoveAll(covered) // inconsistent maps: cut to CPUs no group holds yet
			group.Add(cpu)
			covered.UnionWith(group)
			d.l3 = append(d.l3, group)
			break
		}
	}
	return nil
}

// pciAddr is a parsed PCI address DDDD:BB:DD.F.
type pciAddr struct{ domain, bus, dev, fn uint32 }

// parsePCIAddr parses a PCI address such as "0000:1b:00.0" (the domain may
// have 4 to 8 hex digits, as VMD domains such as "10000" do).
func parsePCIAddr(s string) (pciAddr, bool) {
	dom, rest, ok1 := strings.Cut(s, ":")
	bus, rest, ok2 := strings.Cut(rest, ":")
	dev, fn, ok3 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !ok3 || len(dom) < 4 || len(dom) > 8 || len(bus) != 2 || len(dev) != 2 || len(fn) != 1 {
		return pciAddr{}, false
	}
	var a pciAddr
	for _, f := range []struct {
		s   string
		v   *uint32
		max uint64
	}{{dom, &a.domain, 1<<32 - 1}, {bus, &a.bus, 0xff}, {dev, &a.dev, 0x1f}, {fn, &a.fn, 7}} {
		if f.s[0] == '+' || f.s[0] == '-' {
			return pciAddr{}, false
		}
		v, err := strconv.ParseUint(f.s, 16, 32)
		if err != nil || v > f.max {
			return pciAddr{}, false
		}
		*f.v = uint32(v)
	}
	return a, true
}

func (a pciAddr) compare(b pciAddr) int {
	return cmp.Or(cmp.Compare(a.domain, b.domain), cmp.Compare(a.bus, b.bus),
		cmp.Compare(a.dev, b.dev), cmp.Compare(a.fn, b.fn))
}

// isHostBridge reports whether a sysfs path component names a PCI host
// bridge, such as "pci0000:00".
func isHostBridge(s string) bool {
	rest, ok := strings.CutPrefix(s, "pci")
	if !ok {
		return false
	}
	_, ok = parsePCIAddr(rest + ":00.0")
	return ok
}

// pcieSwitch names the PCIe switch above the device at sysfs path p (see
// DiscoverFS): the bus ID of the device's grandparent bridge, or of its
// parent when that is the root port, or "" when the device sits on the host
// bridge or p is unknown.
func pcieSwitch(p string) string {
	if p == "" {
		return ""
	}
	parts := strings.Split(p, "/")
	start := 0
	for i, c := range parts {
		if isHostBridge(c) {
			start = i + 1
		}
	}
	chain := parts[start:]
	k := len(chain)
	for k > 0 {
		if _, ok := parsePCIAddr(chain[k-1]); !ok {
			break
		}
		k--
	}
	chain = chain[k:]
	if len(chain) == 0 {
		return ""
	}
	bridges := chain[:len(chain)-1]
	switch len(bridges) {
	case 0:
		return ""
	case 1:
		return bridges[0]
	default:
		return bridges[len(bridges)-2]
	}
}

// scanPCI maps every PCI device directory under sys/devices/pci* to its
// path, once.
func (d *discovery) scanPCI() error {
	if d.pciScanned {
		return nil
	}
	d.pciScanned = true
	d.pciPaths = make(map[string]string)
	entries, _, err := d.readDir(sysDevices)
	if err != nil {
		return err
	}
	var walk func(dir string, depth int) error
	walk = func(dir string, depth int) error {
		if depth > 64 { // PCI hierarchies are far shallower; guards odd trees
			return nil
		}
		entries, _, err := d.readDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			name := e.Name()
			if _, ok := parsePCIAddr(name); ok {
				if _, seen := d.pciPaths[name]; !seen {
					d.pciPaths[name] = dir + "/" + name
				}
			} else if !isHostBridge(name) {
				continue
			}
			if err := walk(dir+"/"+name, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range entries {
		if e.IsDir() && isHostBridge(e.Name()) {
			if err := walk(sysDevices+"/"+e.Name(), 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// pciDevice is one PCI device found for GPU discovery.
type pciDevice struct {
	addr pciAddr
	bus  string // PCI address as sysfs spells it
	dir  string // directory its attributes are read from
	path string // its directory under sys/devices, "" when unknown
}

// pciDevices lists the PCI devices with their sysfs paths, in bus-ID order;
// the list is read once.
func (d *discovery) pciDevices() ([]pciDevice, error) {
	if d.pciListed {
		return d.pciList, nil
	}
	devs, err := d.listPCIDevices()
	if err != nil {
		return nil, err
	}
	d.pciList, d.pciListed = devs, true
	return devs, nil
}

func (d *discovery) listPCIDevices() ([]pciDevice, error) {
	entries, ok, err := d.readDir(sysPCIDir)
	if err != nil {
		return nil, err
	}
	var devs []pciDevice
	if !ok {
		if err := d.scanPCI(); err != nil {
			return nil, err
		}
		for bus, p := range d.pciPaths {
			a, _ := parsePCIAddr(bus)
			devs = append(devs, pciDevice{addr: a, bus: bus, dir: p, path: p})
		}
	} else {
		for _, e := range entries {
			a, ok := parsePCIAddr(e.Name())
			if !ok {
				continue
			}
			dev := pciDevice{addr: a, bus: e.Name(), dir: sysPCIDir + "/" + e.Name()}
			if target, err := fs.ReadLink(d.fsys, dev.dir); err == nil {
				// Read the attributes from the link's target too: an
				// absolute target must be taken relative to fsys, not to
				// the host's root.
				p := path.Join(sysPCIDir, target)
				if path.IsAbs(target) {
					p = path.Clean(strings.TrimPrefix(target, "/"))
				}
				if fs.ValidPath(p) && p != "." {
					dev.path, dev.dir = p, p
				}
			} else {
				if err := d.scanPCI(); err != nil {
					return nil, err
				}
				dev.path = d.pciPaths[dev.bus]
			}
			devs = append(devs, dev)
		}
	}
	slices.SortFunc(devs, func(x, y pciDevice) int {
		return cmp.Or(x.addr.compare(y.addr), strings.Compare(x.bus, y.bus))
	})
	return devs, nil
}

// isGPU reports whether a PCI vendor and class make a GPU (see DiscoverFS).
func isGPU(vendor, class uint32) bool {
	switch base := class >> 8; {
	case vendor != vendorNVIDIA && vendor != vendorAMD:
		return false
	case base == 0x0300 || base == 0x0302:
		return true
	default:
		return vendor == vendorAMD && base == 0x0380
	}
}

func (d *discovery) readGPUs() error {
	devs, err := d.pciDevices()
	if err != nil {
		return err
	}
	for _, dev := range devs {
		vendor, ok, err := d.readHex(dev.dir + "/vendor")
		if err != nil {
			return err
		}
		if !ok {
			if _, err := fs.Stat(d.fsys, procNvidia+"/"+dev.bus); err != nil {
				continue
			}
			vendor = vendorNVIDIA
		}
		class, ok, err := d.readHex(dev.dir + "/class")
		if err != nil {
			return err
		}
		if !ok || !isGPU(vendor, class) {
			continue
		}
		node, err := d.deviceNode(dev.dir)
		if err != nil {
			return err
		}
		d.gpus = append(d.gpus, GPU{
			ID:         len(d.gpus),
			NUMANode:   node,
			BusID:      dev.bus,
			PCIeSwitch: pcieSwitch(dev.path),
		})
		d.gpuDirs = append(d.gpuDirs, dev.dir)
		d.gpuNV = append(d.gpuNV, vendor == vendorNVIDIA)
	}
	return nil
}

// readRDMA finds the RDMA devices (see DiscoverFS): every entry of a PCI
// device's infiniband directory is one, named by the entry.
func (d *discovery) readRDMA() error {
	devs, err := d.pciDevices()
	if err != nil {
		return err
	}
	for _, dev := range devs {
		dir := dev.dir + "/infiniband"
		entries, ok, err := d.readDir(dir)
		if err != nil {
			return err
		}
		if !ok || len(entries) == 0 {
			continue
		}
		node, err := d.deviceNode(dev.dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := dir + "/" + e.Name()
			if !e.IsDir() {
				// sysfs lists each InfiniBand device as a directory; follow
				// a symbolic link (as copies of /sys may hold) before judging.
				info, err := fs.Stat(d.fsys, p)
				if err != nil {
					return discoveryError(p, err)
				}
				if !info.IsDir() {
					return malformed(p, "not a directory (%s): an InfiniBand device is a directory named after it", readfile.Kind(info.Mode()))
				}
			}
			if !validIBDevName(e.Name()) {
				return malformed(p, "%s is not an InfiniBand device name (printable ASCII without blanks, at most 64 bytes)", quote.Short(e.Name()))
			}
			d.devs = append(d.devs, Device{
				ID:         e.Name(),
				Class:      "rdma",
				NUMANode:   node,
				BusID:      dev.bus,
				PCIeSwitch: pcieSwitch(dev.path),
			})
			d.devDirs = append(d.devDirs, dev.dir)
		}
	}
	return nil
}

// validIBDevName reports whether s can be the name of an InfiniBand device:
// the kernel's names (IB_DEVICE_NAME_MAX is 64 with the NUL) are printable
// ASCII without blanks or slashes, such as "mlx5_0" or "rxe0".
func validIBDevName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '/' {
			return false
		}
	}
	return true
}

// readGPUMemoryNodes marks the CPU-less nodes that hold NVIDIA GPUs' memory,
// moves a GPU whose NUMA node is such a node to the nearest node with CPUs,
// gives each memory node its GPU's socket and each such GPU the node's
// memory (see DiscoverFS).
func (d *discovery) readGPUMemoryNodes() error {
	found := false
	noStatus := make([]bool, len(d.gpus))
	for gi, g := range d.gpus {
		p := procNvidia + "/" + g.BusID + "/numa_status"
		s, ok, err := d.read(p)
		if err != nil {
			return err
		}
		if !ok {
			noStatus[gi] = true
			continue
		}
		id, ok, err := parseNumaStatusNode(s)
		if err != nil {
			return discoveryError(p, err)
		}
		i := d.nodeIndex(numa.NodeID(id))
		if !ok || id < 0 || i < 0 || !d.nodes[i].CPUs.IsEmpty() || d.nodes[i].GPUMemory {
			continue // no node, a node with CPUs, or another GPU's: not this GPU's memory
		}
		d.nodes[i].GPUMemory, d.nodes[i].GPU = true, gi
		found = true
	}
	// Without the driver's word (no numa_status, as in a copy of /sys
	// alone), an NVIDIA GPU whose PCI numa_node is a CPU-less node with
	// memory names its own memory, as on Grace machines.
	for gi, g := range d.gpus {
		i := d.nodeIndex(g.NUMANode)
		if !noStatus[gi] || !d.gpuNV[gi] || i < 0 || !d.nodes[i].CPUs.IsEmpty() ||
			d.nodes[i].MemoryMiB == 0 || d.nodes[i].GPUMemory || d.memoryOf(gi) {
			continue
		}
		d.nodes[i].GPUMemory, d.nodes[i].GPU = true, gi
		found = true
	}
	if !found {
		return nil
	}
	for gi, g := range d.gpus {
		i := d.nodeIndex(g.NUMANode)
		if i < 0 || !d.nodes[i].GPUMemory {
			continue
		}
		near, err := d.nearestCPUNode(i, d.gpuDirs[gi])
		if err != nil {
			return err
		}
		if near >= 0 {
			d.gpus[gi].NUMANode = d.nodes[near].ID
		} else {
			d.gpus[gi].NUMANode = UnknownNode
		}
	}
	for di, dv := range d.devs { // an RDMA NIC likewise
		i := d.nodeIndex(dv.NUMANode)
		if i < 0 || !d.nodes[i].GPUMemory {
			continue
		}
		near, err := d.nearestCPUNode(i, d.devDirs[di])
		if err != nil {
			return err
		}
		if near >= 0 {
			d.devs[di].NUMANode = d.nodes[near].ID
		} else {
			d.devs[di].NUMANode = UnknownNode
		}
	}
	for i := range d.nodes {
		n := &d.nodes[i]
		if !n.GPUMemory {
			continue
		}
		d.gpus[n.GPU].MemoryMiB = n.MemoryMiB
		if n.Socket != UnknownSocket {
			continue
		}
		if host := d.nodeIndex(d.gpus[n.GPU].NUMANode); host >= 0 {
			n.Socket = d.nodes[host].Socket
		}
	}
	return nil
}

// nearestCPUNode returns the index in d.nodes of the node with CPUs nearest
// to node i by distance; on a tie, the one whose CPUs hold the local CPUs of
// the PCI device whose attributes are in dir (its local_cpulist, else
// local_cpus), else the lowest ID. It returns -1 when no node has CPUs.
func (d *discovery) nearestCPUNode(i int, dir string) (int, error) {
	dist := func(a, b int) int {
		if d.distances != nil {
			return d.distances[a][b]
		}
		if a == b {
			return 10
		}
		return 20
	}
	var best []int
	for j, n := range d.nodes {
		if n.CPUs.IsEmpty() {
			continue
		}
		switch {
		case len(best) == 0 || dist(i, j) < dist(i, best[0]):
			best = []int{j}
		case dist(i, j) == dist(i, best[0]):
			best = append(best, j)
		}
	}
	if len(best) <= 1 {
		if len(best) == 0 {
			return -1, nil
		}
		return best[0], nil
	}
	local, file, err := d.readCPUs(listAndMask(dir+"/local_cpulist", dir+"/local_cpus")...)
	if err != nil {
		return 0, err
	}
	if file != "" {
		local.IntersectWith(d.machine)
		for _, j := range best {
			if !local.IsEmpty() && local.IsSubsetOf(d.nodes[j].CPUs) {
				return j, nil
			}
		}
	}
	return best[0], nil
}

// memoryOf reports whether some node is already GPU gi's memory.
func (d *discovery) memoryOf(gi int) bool {
	for _, n := range d.nodes {
		if n.GPUMemory && n.GPU == gi {
			return true
		}
	}
	return false
}

// parseNumaStatusNode returns the value of the "Node:" line of an NVIDIA
// numa_status file, and false when there is none.
func parseNumaStatusNode(s string) (int, bool, error) {
	for line := range strings.Lines(s) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Node:"); ok {
			v, err := parseInt(rest)
			if err != nil {
				return 0, false, fmt.Errorf("Node line: %w", err)
			}
			return v, true, nil
		}
	}
	return 0, false, nil
}

// nodeIndex returns the index in d.nodes of the node with the given ID, or
// -1.
func (d *discovery) nodeIndex(id numa.NodeID) int {
	for i, n := range d.nodes {
		if n.ID == id {
			return i
		}
	}
	return -1
}

func (d *discovery) readHex(p string) (uint32, bool, error) {
	s, ok, err := d.readAttr(p)
	if err != nil || !ok {
		return 0, false, err
	}
	v, err := parseHexID(s)
	if err != nil {
		return 0, false, discoveryError(p, err)
	}
	return v, true, nil
}

// deviceNode returns the NUMA node of the PCI device in dir (see
// DiscoverFS).
func (d *discovery) deviceNode(dir string) (numa.NodeID, error) {
	p := dir + "/numa_node"
	s, ok, err := d.readAttr(p)
	if err != nil {
		return 0, err
	}
	if ok {
		v, err := parseInt(s)
		if err != nil {
			return 0, discoveryError(p, err)
		}
		if v >= 0 && d.nodeIndex(numa.NodeID(v)) >= 0 {
			return numa.NodeID(v), nil
		}
	}
	local, file, err := d.readCPUs(listAndMask(dir+"/local_cpulist", dir+"/local_cpus")...)
	if err != nil {
		return 0, err
	}
	if file != "" {
		local.IntersectWith(d.machine)
		if !local.IsEmpty() {
			if i := d.nodeOf(local.Min()); i >= 0 && local.IsSubsetOf(d.nodes[i].CPUs) {
				return d.nodes[i].ID, nil
			}
		}
	}
	if len(d.nodes) == 1 {
		return d.nodes[0].ID, nil
	}
	return UnknownNode, nil
}

func (d *discovery) build() (*Machine, error) {
	b := NewBuilder("")
	for _, n := range d.nodes {
		b.AddNode(n)
	}
	if d.distances != nil {
		b.SetDistances(d.distances)
	}
	for _, c := range d.cores {
		b.AddCore(c)
	}
	for _, g := range d.l3 {
		b.AddL3(g)
	}
	for _, g := range d.gpus {
		b.AddGPU(g)
	}
	for _, dev := range d.devs {
		b.AddDevice(dev)
	}
	m, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("%w: the machine read from %s is not valid: %w", ErrDiscovery, sysDevices, err)
	}
	return m, nil
}
