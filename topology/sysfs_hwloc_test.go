package topology

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
)

// hwlocTreesEnv lists directories holding hwloc's own Linux test trees
// (hwloc's tests/hwloc/linux: NAME.tar.bz2, NAME.test, NAME.console or
// NAME.xml), separated as in PATH. When it is set,
// TestDiscoverAgreesWithHwloc compares discovery with hwloc's output on
// every tree there, besides those it always reads (docs/design.md's "Real
// data" folder when present, testdata/hwloc).
const hwlocTreesEnv = "NUMAPLACE_HWLOC_TREES"

// hwlocNode is what hwloc's output says of one NUMA node.
type hwlocNode struct {
	cpus   numa.CPUSet // the PUs of the object the node is attached to
	atRoot bool        // attached to the Machine: no locality of its own
	memMiB int64       // local memory as printed (rounded) or exact (XML)
	exact  bool        // memMiB is exact (from XML)
}

// hwlocView is the NUMA part of hwloc's output for one tree.
type hwlocView struct {
	nodes       map[numa.NodeID]*hwlocNode
	pus         numa.CPUSet
	distances   map[[2]numa.NodeID]int // nil when hwloc reports none
	noDistances bool                   // the output format has no distances
	system      bool                   // hwloc 1.x "System" of several machines (Kerrighed)
}

// consoleLine is one object of lstopo's tree: "Type L#1 (P#3 ...)", or
// "Type P#3 (...)" without -v, or "Type #1 (phys=3 ...)" before hwloc 1.0.
var consoleLine = regexp.MustCompile(`^( *)(\S+)(?: L?#(\d+))?(?: P#(\d+))?(?: \((.*)\))?$`)

// parseHwlocConsole reads `lstopo -v` output: the object tree (two spaces
// per level; NUMA nodes are memory children of the object whose PUs they
// are local to) and the NUMALatency matrix (by logical index).
func parseHwlocConsole(t testing.TB, file string) hwlocView {
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	v := hwlocView{nodes: map[numa.NodeID]*hwlocNode{}}
	type obj struct {
		typ    string
		depth  int
		pus    numa.CPUSet
		memory bool
	}
	var stack []*obj
	var all []*obj
	nodeParent := map[numa.NodeID]*obj{}
	nodeObj := map[numa.NodeID]*obj{}
	logical := map[int]numa.NodeID{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	inTree, inMatrix := true, false
	var matrixCols []int
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "depth 0:") {
			inTree = false
		}
		if strings.HasPrefix(line, "Relative latency matrix (name NUMALatency") ||
			strings.HasPrefix(line, "Relative latency matrix (kind") && strings.Contains(line, "NUMANodes") {
			inMatrix, matrixCols = true, nil
			v.distances = map[[2]numa.NodeID]int{}
			continue
		}
		if inMatrix {
			f := strings.Fields(line)
			if len(f) > 0 && f[0] == "index" {
				for _, c := range f[1:] {
					n, err := strconv.Atoi(c)
					require.NoError(t, err, line)
					matrixCols = append(matrixCols, n)
				}
				continue
			}
			if len(f) == len(matrixCols)+1 {
				nums := make([]int, len(f))
				ok := true
				for i, c := range f {
					n, err := strconv.Atoi(c)
					nums[i], ok = n, ok && err == nil
				}
				if ok {
					for i, d := range nums[1:] {
						v.distances[[2]numa.NodeID{logical[nums[0]], logical[matrixCols[i]]}] = d
					}
					continue
				}
			}
			inMatrix = false
		}
		if !inTree {
			continue
		}
		m := consoleLine.FindStringSubmatch(strings.TrimSuffix(line, " (disallowed)"))
		if m == nil || len(m[1])%2 != 0 {
			continue
		}
		depth := len(m[1]) / 2
		o := &obj{typ: m[2], depth: depth}
		o.memory = strings.HasPrefix(o.typ, "NUMANode") || strings.HasPrefix(o.typ, "MemCache")
		stack = stack[:min(depth, len(stack))]
		attrs := strings.Fields(m[5])
		pIndex := -1
		if m[4] != "" {
			pIndex, _ = strconv.Atoi(m[4])
		}
		if len(attrs) > 0 {
			if n, ok := strings.CutPrefix(attrs[0], "P#"); ok {
				pIndex, _ = strconv.Atoi(n)
			} else if n, ok := strings.CutPrefix(attrs[0], "phys="); ok {
				pIndex, _ = strconv.Atoi(n)
				v.noDistances = true // lstopo before 1.0 printed none
			}
		}
		if depth == 0 && o.typ == "System" {
			v.system = true
		}
		switch {
		case o.typ == "PU":
			v.pus.Add(pIndex)
			for _, a := range stack {
				a.pus.Add(pIndex)
			}
		case strings.HasPrefix(o.typ, "NUMANode"):
			id := numa.NodeID(pIndex)
			n := &hwlocNode{}
			for _, a := range attrs {
				if s, ok := strings.CutPrefix(a, "local="); ok {
					n.memMiB = parseHwlocSize(t, s)
				} else if strings.HasSuffix(a, "B)") || strings.HasSuffix(a, "B") && len(attrs) == 1 { // "(3958MiB)" without -v
					n.memMiB = parseHwlocSize(t, strings.TrimSuffix(strings.TrimPrefix(a, "("), ")"))
				}
			}
			v.nodes[id] = n
			nodeObj[id] = o
			l, _ := strconv.Atoi(m[3])
			logical[l] = id
			for i := len(stack) - 1; i >= 0; i-- {
				if !stack[i].memory {
					nodeParent[id] = stack[i]
					break
				}
			}
		}
		stack = append(stack, o)
		all = append(all, o)
	}
	require.NoError(t, sc.Err())
	if len(v.nodes) == 0 && !v.system {
		// hwloc before 2.0 made no NUMA node on a machine without NUMA:
		// the machine is one node 0.
		v.nodes[0] = &hwlocNode{cpus: v.pus, atRoot: true, memMiB: -1}
		return v
	}
	for id, p := range nodeParent {
		v.nodes[id].cpus = p.pus
		v.nodes[id].atRoot = p.depth == 0
		if own := nodeObj[id]; !own.pus.IsEmpty() { // hwloc 1.x: NUMA nodes are parents of their PUs
			v.nodes[id].cpus = own.pus
			v.nodes[id].atRoot = false
		}
	}
	return v
}

// parseHwlocSize reads lstopo's sizes such as "8190MiB" or "124GiB" in MiB.
func parseHwlocSize(t testing.TB, s string) int64 {
	for _, u := range []struct {
		suffix string
		mul    float64
	}{{"KiB", 1.0 / 1024}, {"MiB", 1}, {"GiB", 1024}, {"TiB", 1024 * 1024}, {"PiB", 1024 * 1024 * 1024},
		{"KB", 1.0 / 1024}, {"MB", 1}, {"GB", 1024}, {"TB", 1024 * 1024}} { // older lstopo: KB for KiB
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(num, 64)
			require.NoError(t, err, s)
			return int64(f * u.mul)
		}
	}
	t.Fatalf("size %q without a unit", s)
	return 0
}

// parseHwlocMask reads an hwloc XML bitmap such as "0x00000011,0x11111111".
func parseHwlocMask(t testing.TB, s string) numa.CPUSet {
	var words []string
	for w := range strings.SplitSeq(s, ",") {
		w = strings.TrimPrefix(w, "0x")
		if strings.Trim(w, "f") == "" && len(w) > 8 { // hwloc's infinite prefix
			continue
		}
		words = append(words, fmt.Sprintf("%08s", w))
	}
	set, err := numa.ParseCPUMask(strings.Join(words, ","))
	require.NoError(t, err, s)
	return set
}

// parseHwlocXML reads hwloc's XML export: NUMA nodes with their cpuset and
// local memory, the PUs, and the NUMALatency distances.
func parseHwlocXML(t testing.TB, file string) hwlocView {
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	v := hwlocView{nodes: map[numa.NodeID]*hwlocNode{}}
	dec := xml.NewDecoder(strings.NewReader(string(data)))
	var depth int
	var inDist, oldDist bool
	var base float64
	var order []numa.NodeID // NUMA nodes in document (logical) order
	var distIdx []numa.NodeID
	var distVals, oldVals []int
	var text strings.Builder
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch e := tok.(type) {
		case xml.StartElement:
			attr := func(name string) string {
				for _, a := range e.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			text.Reset()
			switch e.Name.Local {
			case "object":
				depth++
				idx, _ := strconv.Atoi(attr("os_index"))
				switch attr("type") {
				case "PU":
					v.pus.Add(idx)
				case "NUMANode":
					order = append(order, numa.NodeID(idx))
					mem, _ := strconv.ParseInt(attr("local_memory"), 10, 64)
					v.nodes[numa.NodeID(idx)] = &hwlocNode{cpus: parseHwlocMask(t, attr("cpuset")),
						memMiB: mem >> 20, exact: true, atRoot: depth == 2}
				}
			case "distances2":
				inDist = attr("name") == "NUMALatency" && attr("type") == "NUMANode" && attr("indexing") == "os"
				distIdx, distVals = nil, nil
			case "distances": // hwloc 1.x: relative latencies by logical index, times latency_base
				base, _ = strconv.ParseFloat(attr("latency_base"), 64)
				oldDist, distVals = true, nil
			case "latency":
				if oldDist {
					f, err := strconv.ParseFloat(attr("value"), 64)
					require.NoError(t, err)
					distVals = append(distVals, int(math.Round(f*base)))
				}
			}
		case xml.CharData:
			text.Write(e)
		case xml.EndElement:
			switch e.Name.Local {
			case "object":
				depth--
			case "indexes", "u64values":
				if inDist {
					for _, w := range strings.Fields(text.String()) {
						n, err := strconv.Atoi(w)
						require.NoError(t, err)
						if e.Name.Local == "indexes" {
							distIdx = append(distIdx, numa.NodeID(n))
						} else {
							distVals = append(distVals, n)
						}
					}
				}
			case "distances2":
				if inDist {
					v.distances = map[[2]numa.NodeID]int{}
					for i, a := range distIdx {
						for j, b := range distIdx {
							v.distances[[2]numa.NodeID{a, b}] = distVals[i*len(distIdx)+j]
						}
					}
				}
				inDist = false
			case "distances":
				if oldDist {
					oldVals = distVals
				}
				oldDist = false
			}
		}
	}
	if oldVals != nil && len(oldVals) == len(order)*len(order) {
		v.distances = map[[2]numa.NodeID]int{}
		for i, a := range order {
			for j, b := range order {
				v.distances[[2]numa.NodeID{a, b}] = oldVals[i*len(order)+j]
			}
		}
	}
	if len(v.nodes) == 0 { // hwloc 1.x without NUMA
		v.nodes[0] = &hwlocNode{cpus: v.pus, atRoot: true, memMiB: -1}
	}
	return v
}

// hwlocCase is one tree and what hwloc printed for it.
type hwlocCase struct {
	name, tarball, target string
	env                   map[string]string
	options               string
}

// hwlocCases lists the trees of dir: from NAME.test files (hwloc's test
// suite) when there are any, else NAME.tar.bz2 with NAME.console.
func hwlocCases(t testing.TB, dir string) []hwlocCase {
	tests, err := filepath.Glob(filepath.Join(dir, "*.test"))
	require.NoError(t, err)
	var out []hwlocCase
	for _, tf := range tests {
		data, err := os.ReadFile(tf)
		require.NoError(t, err)
		c := hwlocCase{name: strings.TrimSuffix(filepath.Base(tf), ".test"), env: map[string]string{}}
		for line := range strings.Lines(string(data)) {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			v = strings.TrimSpace(v)
			switch {
			case !ok:
			case k == "source":
				c.tarball = filepath.Join(dir, v)
			case k == "target":
				c.target = filepath.Join(dir, v)
			case k == "options":
				c.options = v
			case k == "env":
				if name, val, ok := strings.Cut(v, "="); ok && !strings.HasPrefix(v, "export ") {
					c.env[name] = strings.Trim(val, `"`)
				}
			}
		}
		out = append(out, c)
	}
	sources := map[string]bool{}
	for _, c := range out {
		sources[c.tarball] = true
	}
	tars, err := filepath.Glob(filepath.Join(dir, "*.tar.bz2"))
	require.NoError(t, err)
	for _, tb := range tars {
		if sources[tb] {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(tb), ".tar.bz2")
		for _, ext := range []string{".console", ".output", ".xml"} { // .output: older hwloc's name
			if _, err := os.Stat(filepath.Join(dir, name+ext)); err == nil {
				out = append(out, hwlocCase{name: name, tarball: tb, target: filepath.Join(dir, name+ext), env: map[string]string{}})
				break
			}
		}
	}
	return out
}

// nvidiaGPUMemoryNodes returns the NUMA nodes that the NVIDIA driver lists
// as GPU memory (proc/driver/nvidia/gpus/BUS/numa_status "Node:").
func nvidiaGPUMemoryNodes(fsys fs.FS) []numa.NodeID {
	var out []numa.NodeID
	entries, _ := fs.ReadDir(fsys, procNvidia)
	for _, e := range entries {
		s, err := fs.ReadFile(fsys, procNvidia+"/"+e.Name()+"/numa_status")
		if err != nil {
			continue
		}
		if id, ok, err := parseNumaStatusNode(string(s)); err == nil && ok {
			out = append(out, numa.NodeID(id))
		}
	}
	return out
}

// isKNL reports whether the tree's proc/cpuinfo describes a Xeon Phi
// (Intel family 6, model 87 or 133).
func isKNL(fsys fs.FS) bool {
	b, err := fs.ReadFile(fsys, "proc/cpuinfo")
	if err != nil {
		return false
	}
	intel, model := false, ""
	for line := range strings.Lines(string(b)) {
		k, v, _ := strings.Cut(line, ":")
		switch strings.TrimSpace(k) {
		case "vendor_id":
			intel = strings.TrimSpace(v) == "GenuineIntel"
		case "model":
			model = strings.TrimSpace(v)
		}
	}
	return intel && (model == "87" || model == "133")
}

// hwlocAllowed returns the CPUs and NUMA nodes the dumping process was
// allowed to use, found as hwloc finds them (hwloc's topology-linux.c,
// hwloc_find_linux_cgroup_mntpnt, hwloc_read_linux_cgroup_name,
// hwloc_admin_disable_set_from_cgroup): the cpuset of proc/self/cpuset, or
// of the ":cpuset:" (cgroup v1) or "::" (cgroup v2) line of
// proc/self/cgroup, under the first cgroup2 mount with the cpuset
// controller, cpuset mount, or cgroup mount with the cpuset option in
// proc/mounts. hwloc leaves the rest out of its output unless run with
// --disallowed; discovery describes the hardware and keeps it. ok is false
// when no restriction is found.
func hwlocAllowed(t testing.TB, fsys fs.FS) (cpus, mems numa.CPUSet, ok bool) {
	mounts, err := fs.ReadFile(fsys, "proc/mounts")
	if err != nil {
		return cpus, mems, false
	}
	kind, mnt := "", ""
	for line := range strings.Lines(string(mounts)) {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		dir := strings.TrimPrefix(f[1], "/")
		switch {
		case f[2] == "cgroup2":
			ctrls, err := fs.ReadFile(fsys, dir+"/cgroup.controllers")
			if err == nil && slices.Contains(strings.Fields(string(ctrls)), "cpuset") {
				kind, mnt = "cgroup2", dir
			}
		case f[2] == "cpuset":
			kind, mnt = "cpuset", dir
		case f[2] == "cgroup" && slices.Contains(strings.Split(f[3], ","), "cpuset"):
			kind, mnt = "cgroup1", dir
			if slices.Contains(strings.Split(f[3], ","), "noprefix") {
				kind = "cpuset"
			}
		}
		if kind != "" {
			break
		}
	}
	if kind == "" {
		return cpus, mems, false
	}
	name := ""
	if b, err := fs.ReadFile(fsys, "proc/self/cpuset"); err == nil && len(b) > 0 {
		name, _, _ = strings.Cut(string(b), "\n")
	} else if b, err := fs.ReadFile(fsys, "proc/self/cgroup"); err == nil {
		for line := range strings.Lines(string(b)) {
			_, rest, ok := strings.Cut(strings.TrimSuffix(line, "\n"), ":")
			if p, ok2 := strings.CutPrefix(rest, "cpuset:"); ok && ok2 {
				name = p
				break
			}
			if p, ok2 := strings.CutPrefix(rest, ":"); ok && ok2 {
				name = p
				break
			}
		}
	} else {
		return cpus, mems, false
	}
	read := func(attr string) (numa.CPUSet, bool) {
		file := mnt + name + "/"
		switch kind {
		case "cgroup2":
			file += "cpuset." + attr + ".effective"
		case "cgroup1":
			file += "cpuset." + attr
		default:
			file += attr
		}
		b, err := fs.ReadFile(fsys, strings.TrimPrefix(path.Clean(file), "/"))
		if err != nil {
			return numa.CPUSet{}, false
		}
		set, err := numa.ParseCPUSet(strings.TrimSpace(strings.TrimRight(string(b), "\x00")))
		require.NoError(t, err, file)
		return set, true
	}
	var okC, okM bool
	cpus, okC = read("cpus")
	mems, okM = read("mems")
	if !okC {
		cpus = numa.CPURange(0, numa.MaxCPUID)
	}
	if !okM {
		mems = numa.CPURange(0, numa.MaxCPUID)
	}
	return cpus, mems, okC || okM
}

// restrictToAllowed returns the view of m that hwloc prints without
// --disallowed: the NUMA nodes in mems, each with its CPUs in cpus.
func restrictToAllowed(t testing.TB, m *Machine, cpus, mems numa.CPUSet) *Machine {
	b := NewBuilder(m.Name())
	var keep []int
	for i, n := range m.Nodes() {
		if mems.Contains(int(n.ID)) {
			n.CPUs.IntersectWith(cpus)
			b.AddNode(n)
			keep = append(keep, i)
		}
	}
	rows := make([][]int, len(keep))
	for a, i := range keep {
		for _, j := range keep {
			rows[a] = append(rows[a], m.Distances().At(i, j))
		}
	}
	b.SetDistances(rows)
	for _, g := range m.GPUs() { // GPU memory nodes name their GPU
		if !mems.Contains(int(g.NUMANode)) {
			g.NUMANode = UnknownNode
		}
		b.AddGPU(g)
	}
	r, err := b.Build()
	require.NoError(t, err)
	return r
}

// compareWithHwloc returns how discovery's machine m differs from hwloc's
// view of the same tree (nil when they agree), and notes on what could not
// be compared. The rules:
//   - the same NUMA node IDs, except the NVIDIA GPU memory nodes hwloc
//     hides on POWER unless HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES=1;
//   - a node with CPUs has exactly the CPUs hwloc attaches it to; a node
//     without CPUs is attached by hwloc to the whole machine, or to the
//     CPUs hwloc found it local to (HMAT initiators, distances, the GPU it
//     belongs to): the machine has no such locality, so that is a note;
//   - local memory as printed (lstopo rounds) or exact (XML);
//   - the distances between nodes hwloc reports, or the defaults when it
//     reports none.
//   - with HWLOC_DEBUG_ALLOW_OVERLAPPING_NODE_CPUSETS set, hwloc keeps
//     nodes whose CPUs overlap a lower node's, which a machine cannot hold
//     (every CPU is in one node); discovery leaves them out, as hwloc does
//     by default, and such a node is a note.
//   - on Xeon Phi (KNL, KNM; x86 family 6, model 87 or 133), hwloc until
//     2.12 turned the distance matrix into memory-side caches and groups
//     and reported no distances; there discovery keeps the kernel's, and
//     the difference is a note.
func compareWithHwloc(m *Machine, want hwlocView, hidden []numa.NodeID, overlapKept, knl bool) (diffs, notes []string) {
	for _, n := range m.Nodes() {
		h, ok := want.nodes[n.ID]
		if !ok {
			if slices.Contains(hidden, n.ID) && n.CPUs.IsEmpty() {
				notes = append(notes, fmt.Sprintf("node %d: NVIDIA GPU memory, hidden by hwloc", n.ID))
				continue
			}
			diffs = append(diffs, fmt.Sprintf("node %d: not in hwloc's output", n.ID))
			continue
		}
		switch {
		case !n.CPUs.IsEmpty() && !n.CPUs.Equal(h.cpus) && !(h.atRoot && n.CPUs.Equal(m.CPUs()) && h.cpus.Equal(want.pus)):
			diffs = append(diffs, fmt.Sprintf("node %d: CPUs %s, hwloc %s", n.ID, n.CPUs, h.cpus))
		case n.CPUs.IsEmpty() && !h.atRoot && !h.cpus.IsEmpty():
			notes = append(notes, fmt.Sprintf("node %d: CPU-less, hwloc makes it local to CPUs %s", n.ID, h.cpus))
		}
		if h.memMiB >= 0 && (h.exact && n.MemoryMiB != h.memMiB || !h.exact && !hwlocMemoryMatches(n.MemoryMiB, h.memMiB)) {
			diffs = append(diffs, fmt.Sprintf("node %d: %d MiB, hwloc %d MiB", n.ID, n.MemoryMiB, h.memMiB))
		}
	}
	for id, h := range want.nodes {
		if _, ok := m.NodeIndex(id); ok {
			continue
		}
		overlaps := false
		for other, o := range want.nodes {
			overlaps = overlaps || other < id && o.cpus.Intersects(h.cpus)
		}
		if overlaps {
			// hwloc leaves such nodes out by default; its debug variable,
			// and hwloc before 2.5, keep them.
			notes = append(notes, fmt.Sprintf("node %d: its CPUs %s overlap a lower node's; hwloc kept it (overlap allowed: %v)",
				id, h.cpus, overlapKept))
			continue
		}
		diffs = append(diffs, fmt.Sprintf("node %d: in hwloc's output only", id))
	}
	ids := m.NodeIDs()
	if want.noDistances {
		notes = append(notes, "distances: the output format has none")
		ids = nil
	}
	for _, a := range ids {
		for _, b := range ids {
			d, _ := m.Distances().Distance(a, b)
			if want.distances == nil {
				def := 20
				if a == b {
					def = 10
				}
				if d != def && len(ids) > 1 {
					if knl {
						notes = append(notes, fmt.Sprintf("distance %d-%d: %d, hwloc's KNL quirk reports none", a, b, d))
						continue
					}
					diffs = append(diffs, fmt.Sprintf("distance %d-%d: %d, hwloc reports no distances (default %d)", a, b, d, def))
				}
				continue
			}
			if hd, ok := want.distances[[2]numa.NodeID{a, b}]; ok && hd != d {
				diffs = append(diffs, fmt.Sprintf("distance %d-%d: %d, hwloc %d", a, b, d, hd))
			}
		}
	}
	return diffs, notes
}

// TestDiscoverAgreesWithHwloc runs discovery over real sysfs trees and
// compares NUMA nodes, their CPUs and memory, and distances with hwloc's
// own output for the same tree (see compareWithHwloc). It reads
// docs/design.md's "Real data" folder when present, the few trees of
// testdata/hwloc, and every tree of the directories NUMAPLACE_HWLOC_TREES
// lists (separated as in PATH), such as a copy of hwloc's
// tests/hwloc/linux.
func TestDiscoverAgreesWithHwloc(t *testing.T) {
	dirs := []string{hwlocFixtures, "testdata/hwloc"}
	if d := os.Getenv(hwlocTreesEnv); d != "" {
		dirs = append(dirs, filepath.SplitList(d)...)
	}
	ran := 0
	for _, dir := range dirs {
		cases := hwlocCases(t, dir)
		for _, c := range cases {
			ran++
			t.Run(dir+"/"+c.name, func(t *testing.T) {
				if _, err := os.Stat(c.tarball); err != nil {
					t.Skipf("%s: no tree", c.tarball)
				}
				fsys := readTarFS(t, c.tarball)
				var want hwlocView
				head, err := os.ReadFile(c.target)
				require.NoError(t, err)
				if strings.HasPrefix(strings.TrimSpace(string(head)), "<?xml") {
					want = parseHwlocXML(t, c.target)
				} else {
					want = parseHwlocConsole(t, c.target)
				}
				if want.system {
					t.Skipf("%s: hwloc 1.x's System of several machines (a single-system-image cluster) is not one machine", c.target)
				}
				if _, err := fs.Stat(fsys, sysCPUDir); err != nil {
					// hwloc then makes a machine of one PU (or of proc/hwloc-nofile-info's
					// FallbackNbProcessors); discovery refuses a tree without CPU
					// information rather than guess.
					_, err := DiscoverFS(fsys)
					require.ErrorContains(t, err, "neither the online file nor any cpuN directory exists")
					t.Skipf("%s: no %s in the tree; discovery refuses it, hwloc guesses %s", c.tarball, sysCPUDir, want.pus)
				}
				m, err := DiscoverFS(fsys)
				require.NoError(t, err)
				var hidden []numa.NodeID
				if c.env["HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES"] != "1" {
					hidden = nvidiaGPUMemoryNodes(fsys)
				}
				// The nodes the NVIDIA driver names (hwloc's GPUMemory
				// nodes, hidden on POWER) are GPU memory in the machine.
				for _, id := range nvidiaGPUMemoryNodes(fsys) {
					if i, ok := m.NodeIndex(id); ok && m.NodeCPUs(i).IsEmpty() {
						require.Equal(t, NodeGPUMemory, m.NodeKind(i), "node %d", id)
					}
				}
				if !strings.Contains(c.options, "--disallowed") {
					if cpus, mems, ok := hwlocAllowed(t, fsys); ok {
						t.Logf("note: hwloc shows only the allowed CPUs %s and NUMA nodes %s", cpus, mems)
						m = restrictToAllowed(t, m, cpus, mems)
					}
				}
				diffs, notes := compareWithHwloc(m, want, hidden, c.env["HWLOC_DEBUG_ALLOW_OVERLAPPING_NODE_CPUSETS"] != "", isKNL(fsys))
				for _, n := range notes {
					t.Log("note:", n)
				}
				if len(diffs) > 0 {
					t.Errorf("%s (options %q, env %v) disagrees with hwloc:\n  %s", c.name, c.options, c.env,
						strings.Join(diffs, "\n  "))
				}
			})
		}
	}
	if ran == 0 {
		t.Skipf("no hwloc trees in %s (set %s to a copy of hwloc's tests/hwloc/linux)", hwlocFixtures, hwlocTreesEnv)
	}
}
