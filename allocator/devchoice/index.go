package devchoice

import (
	"cmp"
	"errors"
	"slices"
	"strconv"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// GPUClass is the name of the GPU class, always class 0 of an [Index].
const GPUClass = "gpu"

// unknownDistance is the distance from the group of devices of unknown NUMA
// node to every NUMA node: above every SLIT value, the farthest.
const unknownDistance = 1000

// denseLinkGPUs is the most GPUs for which an Index also keeps an n×n table
// of NVLink counts (16 KiB at most): memory stays linear in GPUs and NVLinks.
const denseLinkGPUs = 64

// Index is the per-machine structure the chooser reads: the devices of every
// class by dense index, their NUMA nodes and PCIe switches, and the NVLinks
// between GPUs. Build it once per machine with [NewIndex]; it is immutable
// and safe for concurrent use. Its memory is linear in the machine's
// devices and NVLinks (plus the NUMA distance table).
//
// Dense indices: class 0 is "gpu", its devices the machine's GPUs in
// ascending ID order (the order of topology.Machine.GPUs); the other classes
// follow in ascending name order, each with its devices in the order of
// topology.Machine.Devices (ascending ID). These are the positions the
// allocator's device resources use, so a Set can be kept in step with them.
type Index struct {
	m        *topology.Machine
	classes  []classInfo
	nodes    int       // NUMA nodes; group index nodes is the unknown node
	nodeMask numa.Mask // every NUMA node of the machine
	gdist    []int32   // (nodes+1)² distances between groups
	// Buckets: a group's devices under one switch; bucket b's of class c are
	// masks[off[b*stride+c]:off[b*stride+c+1]], one per word (stride classes+1).
	buckets       []bucketInfo
	off           []int32
	masks         []wordBits
	nswitch       int
	switchInGroup bool // no switch spans two groups: a switch is one bucket
	// The NVLinks between GPUs: GPU i's neighbours are
	// linkTo[linkStart[i]:linkStart[i+1]], ascending, their counts in linkN.
	linkStart []int32
	linkTo    []int32
	linkN     []int32
	rows      [][denseLinkGPUs]int32 // the n×n table when n <= denseLinkGPUs (no bounds checks)
	maxLink   int32
	uniform   bool // every pair of GPUs has the same positive links (NVSwitch)
	// k GPUs share at most half the sum of their k largest degrees (links
	// to all others): gdeg[gdegStart[g]+j] sums the j largest of group g's
	// GPUs (j up to their count); bdeg likewise per bucket of classes[0].cb.
	gdeg, bdeg           []int32
	gdegStart, bdegStart []int32
	gpuCB                []int32 // bucket -> its class-0 bucket, -1 when none
}

// classInfo is one class's devices and their places.
type classInfo struct {
	name   string
	ids    []string
	gpuIDs []int   // class 0 only
	group  []int32 // device -> group (dense node, or nodes for unknown)
	bucket []int32 // device -> bucket
	// The buckets holding devices of the class, group g's cb[cbStart[g]:cbStart[g+1]].
	cb      []classBucket
	cbStart []int32
	groups  []int32 // the groups holding any, ascending
	// Classes of at most 64 devices, as words: each group's devices (gm),
	// each bucket's of cb (bm), the groups holding any (wg).
	gm                  []uint64
	bm                  []uint64
	wg                  []wordGroup
	maxBucket, maxGroup int32 // the most devices of a bucket, of a group
	// Class 0 only: the links among all the GPUs of each bucket (as bm) and
	// group of wg; exactWord's pair of each bucket's GPUs and its links.
	bLinks     []int32
	wgLinks    []int32
	bPair      []uint64 // for 2 to 11 GPUs below device 63 with the dense table, else 0
	bPairLinks []int32
}

// wordGroup is a group of a class of at most 64 devices: its devices gm and
// its buckets' words bm[lo:hi].
type wordGroup struct {
	gm        uint64
	g, lo, hi int32
}

// classBucket is a bucket's devices of one class: the bits masks[lo:hi].
type classBucket struct{ b, lo, hi int32 }

// bucketInfo is a bucket's group and switch ID (the same for a named switch's).
type bucketInfo struct{ group, sw int32 }

// wordBits are the devices of word w of a Set.
type wordBits struct {
	w    int32
	bits uint64
}

// NewIndex returns the index of machine m. It takes O(n log n) time in the
// machine's devices and NVLinks.
func NewIndex(m *topology.Machine) (*Index, error) {
	if m == nil {
		return nil, errors.New("devchoice: nil machine")
	}
	x := &Index{m: m, nodes: m.NumNodes(), nodeMask: numa.FirstN(m.NumNodes())}
	// A named switch is one switch wherever its devices are; the devices of
	// one group whose switch is not described share one (keyed by group).
	type swKey struct {
		name  string
		group int32
	}
	switches, bucketOf := map[swKey]int32{}, map[bucketInfo]int32{}
	// add appends a device to class c, with its switch ID for its bucket
	// until the buckets are sorted, and lists a new bucket in x.buckets.
	add := func(c int, id string, node numa.NodeID, sw string) {
		g := int32(x.nodes)
		if i, ok := m.NodeIndex(node); ok && node != topology.UnknownNode {
			g = int32(i)
		}
		k := swKey{name: sw, group: -1}
		if sw == "" {
			k.group = g
		}
		if _, ok := switches[k]; !ok {
			switches[k] = int32(len(switches))
		}
		if b := (bucketInfo{g, switches[k]}); bucketOf[b] == 0 {
			bucketOf[b] = 1
			x.buckets = append(x.buckets, b)
		}
		cl := &x.classes[c]
		cl.ids = append(cl.ids, id)
		cl.group = append(cl.group, g)
		cl.bucket = append(cl.bucket, switches[k])
	}
	x.classes = append(x.classes, classInfo{name: GPUClass})
	for _, gpu := range m.GPUs() {
		x.classes[0].gpuIDs = append(x.classes[0].gpuIDs, gpu.ID)
		add(0, strconv.Itoa(gpu.ID), gpu.NUMANode, gpu.PCIeSwitch)
	}
	for _, d := range m.Devices() { // ordered by class, then ID
		if c := len(x.classes) - 1; c == 0 || x.classes[c].name != d.Class {
			x.classes = append(x.classes, classInfo{name: d.Class})
		}
		add(len(x.classes)-1, d.ID, d.NUMANode, d.PCIeSwitch)
	}
	x.nswitch = len(switches)
	// Buckets group by group, in each group in order of their first device
	// (GPUs first), so that a group's buckets are a range of indices.
	slices.SortStableFunc(x.buckets, func(a, b bucketInfo) int { return cmp.Compare(a.group, b.group) })
	for b, k := range x.buckets {
		bucketOf[k] = int32(b)
	}
	// A switch on two groups has a bucket on each.
	x.switchInGroup = len(x.buckets) == x.nswitch
	// The devices of bucket b and class c, ascending: devs[b*stride+c].
	ng, stride := x.nodes+1, len(x.classes)+1
	devs := make([][]int32, len(x.buckets)*stride)
	for c := range x.classes {
		cl := &x.classes[c]
		cl.cbStart = make([]int32, ng+1)
		for i, s := range cl.bucket {
			cl.bucket[i] = bucketOf[bucketInfo{cl.group[i], s}]
			k := int(cl.bucket[i])*stride + c
			devs[k] = append(devs[k], int32(i))
		}
	}
	// Their masks, and each class's buckets (group by group) with them.
	x.off = make([]int32, 1, len(devs)+1)
	for k, ds := range devs {
		lo := int32(len(x.masks))
		for _, i := range ds {
			if n := len(x.masks); int32(n) == lo || x.masks[n-1].w != i>>6 {
				x.masks = append(x.masks, wordBits{w: i >> 6})
			}
			x.masks[len(x.masks)-1].bits |= 1 << uint(i&63)
		}
		x.off = append(x.off, int32(len(x.masks)))
		if len(ds) > 0 {
			b, cl := k/stride, &x.classes[k%stride]
			cl.cb = append(cl.cb, classBucket{b: int32(b), lo: lo, hi: int32(len(x.masks))})
			cl.cbStart[x.buckets[b].group+1]++
		}
	}
	for c := range x.classes {
		cl := &x.classes[c]
		for g := range ng {
			cl.cbStart[g+1] += cl.cbStart[g]
			if cl.cbStart[g+1] > cl.cbStart[g] {
				cl.groups = append(cl.groups, int32(g))
			}
		}
		if len(cl.ids) <= 64 { // one word: the word path's masks
			cl.gm = make([]uint64, ng)
			for _, e := range cl.cb {
				bm := x.masks[e.lo].bits // the bucket's one entry
				cl.bm = append(cl.bm, bm)
				cl.gm[x.buckets[e.b].group] |= bm
				cl.maxBucket = max(cl.maxBucket, int32(popcount(bm)))
			}
			for _, g := range cl.groups {
				cl.wg = append(cl.wg, wordGroup{gm: cl.gm[g], g: g, lo: cl.cbStart[g], hi: cl.cbStart[g+1]})
				cl.maxGroup = max(cl.maxGroup, int32(popcount(cl.gm[g])))
			}
		}
	}
	// Distances between groups: the SLIT's between nodes, unknownDistance
	// between the unknown group and a node, 0 from a group to itself.
	dist := m.Distances()
	x.gdist = make([]int32, ng*ng)
	for a := range x.nodes {
		for b := range x.nodes {
			if a != b {
				x.gdist[a*ng+b] = int32(dist.At(a, b))
			}
		}
		x.gdist[a*ng+x.nodes], x.gdist[x.nodes*ng+a] = unknownDistance, unknownDistance
	}
	x.buildLinks(m.NVLinks())
	if cl := &x.classes[0]; len(cl.bm) > 0 {
		for _, wg := range cl.wg {
			cl.wgLinks = append(cl.wgLinks, int32(x.linksWord(wg.gm)))
		}
		cl.bPair = make([]uint64, len(cl.bm))
		cl.bPairLinks = make([]int32, len(cl.bm))
		c := x.NewChooser() // for exactWord (no must-include device)
		for i, bm := range cl.bm {
			cl.bLinks = append(cl.bLinks, int32(x.linksWord(bm)))
			if n := popcount(bm); x.rows != nil && n >= 2 && n <= 11 && bm>>63 == 0 {
				p := c.exactWord(bm, 2)
				cl.bPair[i], cl.bPairLinks[i] = p, int32(x.linksWord(p))
			}
		}
	}
	return x, nil
}

// buildLinks fills the NVLinks' lists (without links naming an unlisted
// GPU; a pair listed twice keeps its first count), dense table, gpuCB and
// the degrees' prefix sums.
func (x *Index) buildLinks(links []topology.NVLink) {
	cl := &x.classes[0]
	n := len(cl.gpuIDs)
	type edge struct{ from, to, n int32 }
	edges := make([]edge, 0, 2*len(links))
	for _, l := range links {
		a, okA := slices.BinarySearch(cl.gpuIDs, l.A)
		b, okB := slices.BinarySearch(cl.gpuIDs, l.B)
		if okA && okB && a != b && l.Links > 0 {
			edges = append(edges, edge{int32(a), int32(b), int32(l.Links)}, edge{int32(b), int32(a), int32(l.Links)})
		}
	}
	slices.SortStableFunc(edges, func(p, q edge) int { return cmp.Or(cmp.Compare(p.from, q.from), cmp.Compare(p.to, q.to)) })
	edges = slices.CompactFunc(edges, func(p, q edge) bool { return p.from == q.from && p.to == q.to })
	x.linkStart = make([]int32, n+1)
	deg := make([]int32, n)
	x.uniform = n > 1 && len(edges) == n*(n-1)
	if n <= denseLinkGPUs && len(edges) > 0 {
		x.rows = make([][denseLinkGPUs]int32, n)
	}
	for _, e := range edges {
		x.linkStart[e.from+1]++
		x.linkTo, x.linkN = append(x.linkTo, e.to), append(x.linkN, e.n)
		deg[e.from] += e.n
		x.maxLink = max(x.maxLink, e.n)
		x.uniform = x.uniform && e.n == edges[0].n
		if x.rows != nil {
			x.rows[e.from][e.to] = e.n
		}
	}
	for i := range n {
		x.linkStart[i+1] += x.linkStart[i]
	}
	x.gpuCB = slices.Repeat([]int32{-1}, len(x.buckets))
	for i, e := range cl.cb {
		x.gpuCB[e.b] = int32(i)
	}
	byGroup := make([][]int32, x.nodes+1)
	byBucket := make([][]int32, len(cl.cb))
	for d, dg := range deg {
		byGroup[cl.group[d]] = append(byGroup[cl.group[d]], dg)
		i := x.gpuCB[cl.bucket[d]]
		byBucket[i] = append(byBucket[i], dg)
	}
	// prefix returns each list's running sums from 0 of its degrees, sorted
	// descending, and where each list starts.
	prefix := func(lists [][]int32) (sums, start []int32) {
		for _, ds := range lists {
			start = append(start, int32(len(sums)))
			slices.SortFunc(ds, func(a, b int32) int { return cmp.Compare(b, a) })
			sums = append(sums, 0)
			for _, d := range ds {
				sums = append(sums, sums[len(sums)-1]+d)
			}
		}
		return sums, start
	}
	x.gdeg, x.gdegStart = prefix(byGroup)
	x.bdeg, x.bdegStart = prefix(byBucket)
}

// groupTop returns the sum of the k largest link degrees of group g's
// GPUs (of all of them when it has fewer).
func (x *Index) groupTop(g int32, k int32) int32 { return topOf(x.gdeg, x.gdegStart, g, k) }

// bucketTop is groupTop for the GPUs of class-0 bucket i.
func (x *Index) bucketTop(i int32, k int32) int32 { return topOf(x.bdeg, x.bdegStart, i, k) }

// topOf returns entry min(k, last) of item i's prefix sums (deg from start[i]).
func topOf(deg, start []int32, i, k int32) int32 {
	lo, hi := start[i], int32(len(deg))
	if int(i)+1 < len(start) {
		hi = start[i+1]
	}
	return deg[lo+min(k, hi-lo-1)]
}

// link returns the NVLink links between GPU indices a and b (0 when none).
func (x *Index) link(a, b int32) int32 {
	if x.rows != nil {
		return x.rows[a][b&63]
	}
	lo, hi := x.linkStart[a], x.linkStart[a+1]
	if k, ok := slices.BinarySearch(x.linkTo[lo:hi], b); ok {
		return x.linkN[int(lo)+k]
	}
	return 0
}

// Machine returns the machine the index describes.
func (x *Index) Machine() *topology.Machine { return x.m }

// Classes returns the class names by class index: "gpu" first, then the
// machine's other classes in ascending order. It allocates.
func (x *Index) Classes() []string {
	out := make([]string, len(x.classes))
	for i, c := range x.classes {
		out[i] = c.name
	}
	return out
}

// Class returns the index of the named class (case-sensitive). "gpu" is
// always class 0, even on a machine without GPUs.
func (x *Index) Class(name string) (int, bool) {
	for i, c := range x.classes {
		if c.name == name {
			return i, true
		}
	}
	return 0, false
}

// Len returns the number of devices of class c (0 for an unknown class).
func (x *Index) Len(c int) int {
	if c < 0 || c >= len(x.classes) {
		return 0
	}
	return len(x.classes[c].ids)
}

// ID returns the ID of device i of class c: the decimal GPU ID for GPUs,
// the device's ID otherwise. It panics when c or i is out of range.
func (x *Index) ID(c, i int) string { return x.classes[c].ids[i] }

// Find returns the dense index of the device of class c with the given ID,
// as ID writes it (the GPU ID in decimal for GPUs). It takes O(log n) time
// for GPUs and O(n) for other classes.
func (x *Index) Find(c int, id string) (int, bool) {
	if c < 0 || c >= len(x.classes) {
		return 0, false
	}
	if c == 0 { // the round trip refuses what Atoi refuses, and "007"
		if g, _ := strconv.Atoi(id); strconv.Itoa(g) == id {
			return x.GPU(g)
		}
		return 0, false
	}
	i := slices.Index(x.classes[c].ids, id)
	return i, i >= 0
}

// GPU returns the dense index of the GPU with the given ID.
func (x *Index) GPU(id int) (int, bool) { return slices.BinarySearch(x.classes[0].gpuIDs, id) }

// Node returns the dense index of the NUMA node of device i of class c, or
// -1 when the device's node is unknown.
func (x *Index) Node(c, i int) int {
	if g := int(x.classes[c].group[i]); g < x.nodes {
		return g
	}
	return -1
}
