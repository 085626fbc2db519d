package allocator

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// GPUClass is the device class of GPUs.
const GPUClass = "gpu"

// Devices is the [Resource] for the whole devices of one class: GPUs
// or any other PCI class such as RDMA NICs, so
// that GPU+NIC requests align on the same NUMA nodes. Devices whose NUMA node
// is unknown are unplaced: only None requests receive them. Unhealthy
// devices are never handed out and are not capacity.
//
// Preferences inside a node: the devices of one PCIe switch when one switch
// has enough free (the switch with the fewest free that suffices, so larger
// groups stay whole), else switches in decreasing order of free devices;
// within a switch, GPUs with more NVLink links among themselves when the
// machine describes NVLinks; the lowest IDs on a tie.
type Devices struct {
	class    string
	isGPU    bool     // class is GPUClass: asked for by Request.GPUs, held in Allocation.GPUs
	ids      []string // external IDs, ascending (numerically for GPUs)
	gpuIDs   []int    // GPU IDs when class is GPUClass
	node     []int16  // dense node, -1 unknown
	sw       []int32  // switch index, -1 none
	healthy  []bool
	held     []bool
	byNode   [][]int32
	unplaced []int32
	nodeCap  []int64
	nodeFree []int64
	unCap    int32
	unFree   int32
	// The switch groups: the devices of one node under one PCIe switch (the
	// devices of a node whose switch is not known form one group, nothing
	// tells them apart). Device i is in group groupOf[i] (-1: unknown
	// node); group g holds groupDev[groupOff[g]:groupOff[g+1]] (ascending
	// device index) of which groupFree[g] are free; node n has the groups
	// nodeGroups[n], in order of their lowest device.
	groupOf    []int32
	groupOff   []int32
	groupDev   []int32
	groupFree  []int32
	nodeGroups [][]int32
	// The NVLink links between devices (GPUs only), as adjacency lists:
	// device i links to linkPeer[linkOff[i]:linkOff[i+1]] (ascending
	// device index) with linkN of them each. Memory is linear in devices
	// plus links; linkOff is nil when the machine describes no NVLinks.
	linkOff  []int32
	linkPeer []int32
	linkN    []int32
	scratch  []int32
	pick     pickScratch
}

var (
	_ Resource   = (*Devices)(nil)
	_ Penalizer  = (*Devices)(nil)
	_ BulkReader = (*Devices)(nil)
)

// newGPUs returns the GPU resource of m, every GPU healthy and free.
func newGPUs(m *topology.Machine) *Devices {
	gpus := m.GPUs()
	d := allocDevices(m, GPUClass, len(gpus))
	d.isGPU = true
	switches := map[string]int32{}
	for i, g := range gpus {
		d.gpuIDs = append(d.gpuIDs, g.ID)
		d.ids = append(d.ids, strconv.Itoa(g.ID))
		d.add(m, i, g.NUMANode, g.PCIeSwitch, switches)
	}
	d.buildLinks(m.NVLinks())
	return d.finish()
}

// buildLinks builds the adjacency lists of the NVLinks between known GPUs
// (links may name GPUs the machine does not list; those are left out) in
// O(n + l log l) time and O(n + l) memory for n GPUs and l links.
func (d *Devices) buildLinks(links []topology.NVLink) {
	type half struct{ a, b, n int32 }
	var halves []half
	for _, l := range links {
		a, okA := d.gpuIndex(l.A)
		b, okB := d.gpuIndex(l.B)
		if okA && okB && a != b && l.Links > 0 {
			halves = append(halves, half{a, b, int32(l.Links)}, half{b, a, int32(l.Links)})
		}
	}
	if len(halves) == 0 {
		return
	}
	slices.SortFunc(halves, func(x, y half) int { return cmp.Or(cmp.Compare(x.a, y.a), cmp.Compare(x.b, y.b)) })
	d.linkOff = make([]int32, len(d.gpuIDs)+1)
	d.linkPeer = make([]int32, 0, len(halves))
	d.linkN = make([]int32, 0, len(halves))
	for j, h := range halves {
		if j > 0 && halves[j-1].a == h.a && halves[j-1].b == h.b {
			continue // a pair listed twice keeps its first count
		}
		d.linkPeer = append(d.linkPeer, h.b)
		d.linkN = append(d.linkN, h.n)
		d.linkOff[h.a+1]++
	}
	for i := 1; i < len(d.linkOff); i++ {
		d.linkOff[i] += d.linkOff[i-1]
	}
}

// newDeviceClass returns the resource of m's devices of the given class (not
// "gpu"), every device healthy and free.
func newDeviceClass(m *topology.Machine, class string) *Devices {
	var devs []topology.Device
	for _, x := range m.Devices() {
		if x.Class == class {
			devs = append(devs, x)
		}
	}
	d := allocDevices(m, class, len(devs))
	switches := map[string]int32{}
	for i, x := range devs {
		d.ids = append(d.ids, x.ID)
		d.add(m, i, x.NUMANode, x.PCIeSwitch, switches)
	}
	return d.finish()
}

func allocDevices(m *topology.Machine, class string, n int) *Devices {
	return &Devices{
		class: class, node: make([]int16, n), sw: make([]int32, n),
		healthy: make([]bool, n), held: make([]bool, n),
		byNode: make([][]int32, m.NumNodes()), nodeCap: make([]int64, m.NumNodes()),
		nodeFree: make([]int64, m.NumNodes()), groupOf: make([]int32, n),
		nodeGroups: make([][]int32, m.NumNodes()),
	}
}

func (d *Devices) add(m *topology.Machine, i int, node numa.NodeID, sw string, switches map[string]int32) {
	d.healthy[i] = true
	d.node[i] = -1
	if idx, ok := m.NodeIndex(node); ok && node != topology.UnknownNode {
		d.node[i] = int16(idx)
		d.byNode[idx] = append(d.byNode[idx], int32(i))
		d.nodeCap[idx]++
	} else {
		d.unplaced = append(d.unplaced, int32(i))
		d.unCap++
	}
	d.sw[i] = -1
	if sw != "" {
		s, ok := switches[sw]
		if !ok {
			s = int32(len(switches))
			switches[sw] = s
		}
		d.sw[i] = s
	}
}

func (d *Devices) finish() *Devices {
	copy(d.nodeFree, d.nodeCap)
	d.unFree = d.unCap
	// The switch groups, node by node, in order of their lowest device.
	for i := range d.groupOf {
		d.groupOf[i] = -1
	}
	d.groupOff = append(d.groupOff[:0], 0)
	for n, devs := range d.byNode {
		for _, i := range devs {
			if d.groupOf[i] >= 0 {
				continue
			}
			g := int32(len(d.groupOff) - 1)
			d.nodeGroups[n] = append(d.nodeGroups[n], g)
			for _, j := range devs {
				if d.groupOf[j] < 0 && d.sw[j] == d.sw[i] {
					d.groupOf[j] = g
					d.groupDev = append(d.groupDev, j)
				}
			}
			d.groupOff = append(d.groupOff, int32(len(d.groupDev)))
			d.groupFree = append(d.groupFree, d.groupOff[g+1]-d.groupOff[g])
		}
	}
	return d
}

// Kind returns the class.
func (d *Devices) Kind() string { return d.class }

// Demand returns r.GPUs for GPUs, r.Devices[class] otherwise.
func (d *Devices) Demand(r *Request) int64 {
	if d.isGPU {
		return int64(r.GPUs)
	}
	if len(r.Devices) == 0 {
		return 0
	}
	return int64(r.Devices[d.class])
}

// Capacity returns the node's healthy devices.
func (d *Devices) Capacity(_ *Request, node int) int64 { return d.nodeCap[node] }

// Free returns the node's healthy devices not held.
func (d *Devices) Free(_ *Request, node int) int64 { return d.nodeFree[node] }

// FreeView returns Free of every node (a view of the counters).
func (d *Devices) FreeView(*Request) []int64 { return d.nodeFree }

// CapacityView returns Capacity of every node (a view of the counters).
func (d *Devices) CapacityView(*Request) []int64 { return d.nodeCap }

// Unplaced returns the free healthy devices of unknown NUMA node.
func (d *Devices) Unplaced(*Request) int64 { return int64(d.unFree) }

// Describe writes "1 GPU", "4 GPUs" or "2 rdma devices".
func (d *Devices) Describe(_ *Request, units int64) string {
	if d.class == GPUClass {
		if units == 1 {
			return "1 GPU"
		}
		return groupDigits(units) + " GPUs"
	}
	return deviceCount(d.class, units)
}

func (d *Devices) isFree(i int32) bool { return d.healthy[i] && !d.held[i] }

func (d *Devices) setHeld(i int32, held bool) {
	if d.held[i] == held {
		return
	}
	d.held[i] = held
	if !d.healthy[i] {
		return
	}
	delta := int32(1)
	if held {
		delta = -1
	}
	if n := d.node[i]; n >= 0 {
		d.nodeFree[n] += int64(delta)
		d.groupFree[d.groupOf[i]] += delta
	} else {
		d.unFree += delta
	}
}

// SetHealthy marks device i (index in ascending ID order) healthy or not.
// It reports whether the health changed.
func (d *Devices) setHealthy(i int32, healthy bool) bool {
	if d.healthy[i] == healthy {
		return false
	}
	d.healthy[i] = healthy
	delta := int32(1)
	if !healthy {
		delta = -1
	}
	if n := d.node[i]; n >= 0 {
		d.nodeCap[n] += int64(delta)
		if !d.held[i] {
			d.nodeFree[n] += int64(delta)
			d.groupFree[d.groupOf[i]] += delta
		}
	} else {
		d.unCap += delta
		if !d.held[i] {
			d.unFree += delta
		}
	}
	return true
}

// CanonicalDeviceID returns the canonical form of the ID of a device of the
// given class, the form a State records and reports (in Snapshot.Unhealthy,
// in errors): GPU IDs are non-negative integers written in decimal without
// sign or leading zeros, so "+3", "03" and "0000000003" all mean GPU 3 and
// become "3"; any other spelling of a GPU ID (empty, spaces, a minus sign,
// hexadecimal, non-ASCII digits, beyond the range of int) is an error
// wrapping [ErrUnknownDevice] that says so. The IDs of other classes are
// names ("mlx5_0"): they are canonical as they are, compared exactly
// (case-sensitive), and only the empty name is an error.
func CanonicalDeviceID(class, id string) (string, error) {
	if class != GPUClass {
		if id == "" {
			return "", fmt.Errorf("%w: empty %s device ID", ErrUnknownDevice, quote.Bare(class))
		}
		return id, nil
	}
	g, ok := parseGPUID(id)
	if !ok {
		return "", fmt.Errorf("%w: GPU ID %s is not a decimal integer (GPU IDs are non-negative integers such as 3)", ErrUnknownDevice, quote.Short(id))
	}
	return strconv.Itoa(g), nil
}

// ParseGPUID reads a GPU ID written as text, in any spelling
// [CanonicalDeviceID] accepts ("+3", "03" and "0000000003" are GPU 3), and
// reports false for any other. It allocates nothing, for readers of GPU IDs
// from outside (the device plugins, the node agent) that must agree with a
// State on what names a GPU.
func ParseGPUID(id string) (int, bool) { return parseGPUID(id) }

// parseGPUID reads a GPU ID: ASCII decimal digits, optionally after one
// '+', within the range of int.
func parseGPUID(id string) (int, bool) {
	digits := strings.TrimPrefix(id, "+")
	if digits == "" {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	g, err := strconv.Atoi(digits)
	return g, err == nil
}

// index returns the position of the device with the given ID (in any form
// CanonicalDeviceID accepts).
func (d *Devices) index(id string) (int32, bool) {
	if d.class == GPUClass {
		g, ok := parseGPUID(id)
		if !ok {
			return 0, false
		}
		i, ok := slices.BinarySearch(d.gpuIDs, g)
		return int32(i), ok
	}
	i, ok := slices.BinarySearch(d.ids, id)
	return int32(i), ok
}

func (d *Devices) gpuIndex(id int) (int32, bool) {
	if id >= 0 && id < len(d.gpuIDs) && d.gpuIDs[id] == id {
		return int32(id), true // dense IDs 0..n-1, the common case
	}
	i, ok := slices.BinarySearch(d.gpuIDs, id)
	return int32(i), ok
}

// Penalty counts the PCIe switch groups the split uses beyond one per node
// of span (the largest groups of a node first). O(devices on span's nodes).
func (d *Devices) Penalty(_ *Request, span numa.Mask, amounts []int64) int64 {
	var p int64
	for w := uint64(span); w != 0; w &= w - 1 {
		node := bits.TrailingZeros64(w)
		if k := amounts[node]; k > 0 {
			p += int64(d.switchesNeeded(node, int(k)) - 1)
		}
	}
	return p
}

// switchesNeeded returns how many switch groups of node supply k free
// devices when the largest groups are used first. It costs O(groups of the
// node) when one group suffices, O(g log g) otherwise, and never mutates.
func (d *Devices) switchesNeeded(node, k int) int {
	groups := d.nodeGroups[node]
	var most int32
	for _, g := range groups {
		most = max(most, d.groupFree[g])
	}
	if int(most) >= k {
		return 1
	}
	var buf [64]int32
	counts := buf[:0]
	for _, g := range groups {
		if f := d.groupFree[g]; f > 0 {
			counts = append(counts, f)
		}
	}
	slices.SortFunc(counts, func(a, b int32) int { return cmp.Compare(b, a) })
	n := 0
	for _, c := range counts {
		if k <= 0 {
			break
		}
		k -= int(c)
		n++
	}
	return n
}

// Take picks the devices.
func (d *Devices) Take(_ *Request, amounts []int64, unplaced int64, a *Allocation) {
	picked := d.scratch[:0]
	for node, k := range amounts {
		if k > 0 {
			picked = d.pickNode(node, int(k), picked)
		}
	}
	for _, i := range d.unplaced {
		if unplaced == 0 {
			break
		}
		if d.isFree(i) {
			d.setHeld(i, true)
			picked = append(picked, i)
			unplaced--
		}
	}
	d.scratch = picked
	if len(picked) == 0 {
		return
	}
	slices.Sort(picked)
	if d.class == GPUClass {
		a.GPUs = make([]int, len(picked))
		for j, i := range picked {
			a.GPUs[j] = d.gpuIDs[i]
		}
		return
	}
	ids := make([]string, len(picked))
	for j, i := range picked {
		ids[j] = d.ids[i]
	}
	if a.Devices == nil {
		a.Devices = map[string][]string{}
	}
	a.Devices[d.class] = ids
}

// pickNode takes k free devices of node, by switch preference: the
// smallest group that holds all k, else the largest, again while k is not
// reached.
func (d *Devices) pickNode(node, k int, dst []int32) []int32 {
	for k > 0 {
		best, bestCount := int32(-1), 0
		for _, g := range d.nodeGroups[node] {
			c := int(d.groupFree[g])
			better := false
			switch {
			case c == 0:
			case best < 0:
				better = true
			case c >= k && bestCount >= k:
				better = c < bestCount
			case c >= k:
				better = true
			case bestCount < k:
				better = c > bestCount
			}
			if better {
				best, bestCount = g, c
			}
		}
		if best < 0 {
			return dst // cannot happen when the engine checked Free
		}
		n := min(k, bestCount)
		dst = d.pickGroup(best, n, dst)
		k -= n
	}
	return dst
}

// pickGroup takes k free devices of switch group g: the lowest IDs, or,
// when the machine describes NVLinks, greedily the devices with the most
// links among themselves (the best-linked device first, then the one with
// the most links to those already chosen; the lowest ID on a tie). A
// request for one device takes the least-linked one. It costs O(k·f + the
// group's links) for f free devices in the group, and its working memory is
// linear in f.
func (d *Devices) pickGroup(g int32, k int, dst []int32) []int32 {
	members := d.groupDev[d.groupOff[g]:d.groupOff[g+1]]
	if d.linkOff == nil {
		for _, i := range members {
			if k == 0 {
				break
			}
			if d.isFree(i) {
				d.setHeld(i, true)
				dst = append(dst, i)
				k--
			}
		}
		return dst
	}
	cand := d.pick.cand[:0]
	for _, i := range members {
		if d.isFree(i) {
			cand = append(cand, i)
		}
	}
	d.pick.cand = cand
	if k >= len(cand) {
		for _, i := range cand {
			d.setHeld(i, true)
		}
		return append(dst, cand...)
	}
	// all[c]: links from candidate c to the other candidates; score[c]:
	// links to the candidates chosen so far. Both come from merging c's
	// adjacency list with the candidates (both ascending), so no table over
	// pairs of devices is ever built.
	nc := len(cand)
	all := growInts(&d.pick.all, nc)
	score := growInts(&d.pick.score, nc)
	chosen := growBools(&d.pick.chosen, nc)
	for c := range cand {
		d.eachLinkIn(cand[c], cand, func(_ int, l int32) { all[c] += int(l) })
		if k == 1 {
			all[c] = -all[c] // a lone device: the least linked, keeping links for wider requests
		}
	}
	for n := 0; n < k; n++ {
		best := -1
		for c := range cand {
			if chosen[c] {
				continue
			}
			if best < 0 || score[c] > score[best] || (score[c] == score[best] && all[c] > all[best]) {
				best = c
			}
		}
		chosen[best] = true
		d.eachLinkIn(cand[best], cand, func(o int, l int32) { score[o] += int(l) })
		d.setHeld(cand[best], true)
		dst = append(dst, cand[best])
	}
	return dst
}

// pickScratch is the working memory of pickGroup, reused between calls
// (under the state's write lock).
type pickScratch struct {
	cand   []int32
	all    []int
	score  []int
	chosen []bool
}

// growInts returns (*buf)[:n] zeroed, growing the buffer when needed.
func growInts(buf *[]int, n int) []int {
	if cap(*buf) < n {
		*buf = make([]int, n)
	}
	*buf = (*buf)[:n]
	clear(*buf)
	return *buf
}

// growBools returns (*buf)[:n] zeroed, growing the buffer when needed.
func growBools(buf *[]bool, n int) []bool {
	if cap(*buf) < n {
		*buf = make([]bool, n)
	}
	*buf = (*buf)[:n]
	clear(*buf)
	return *buf
}

// eachLinkIn calls f(j, links) for every candidate cand[j] that device i
// has NVLinks to; cand must be ascending.
func (d *Devices) eachLinkIn(i int32, cand []int32, f func(j int, links int32)) {
	peers := d.linkPeer[d.linkOff[i]:d.linkOff[i+1]]
	ns := d.linkN[d.linkOff[i]:d.linkOff[i+1]]
	for p, j := 0, 0; p < len(peers) && j < len(cand); {
		switch {
		case peers[p] < cand[j]:
			p++
		case peers[p] > cand[j]:
			j++
		default:
			f(j, ns[p])
			p++
			j++
		}
	}
}

func (d *Devices) held2(a *Allocation) []string {
	if d.class == GPUClass {
		return nil
	}
	return a.Devices[d.class]
}

// forEach calls f with the index of each device a holds, or returns an
// error naming an unknown one.
func (d *Devices) forEach(a *Allocation, f func(int32)) error {
	if d.class == GPUClass {
		for _, g := range a.GPUs {
			i, ok := d.gpuIndex(g)
			if !ok {
				return fmt.Errorf("%w: GPU %d does not exist on this machine", ErrConflict, g)
			}
			f(i)
		}
		return nil
	}
	for _, id := range d.held2(a) {
		i, ok := d.index(id)
		if !ok {
			return fmt.Errorf("%w: %s device %s does not exist on this machine", ErrConflict, quote.Bare(d.class), quote.Short(id))
		}
		f(i)
	}
	return nil
}

// Give returns a's devices.
func (d *Devices) Give(a *Allocation) {
	if d.class == GPUClass {
		for _, g := range a.GPUs {
			if i, ok := d.gpuIndex(g); ok {
				d.setHeld(i, false)
			}
		}
		return
	}
	_ = d.forEach(a, func(i int32) { d.setHeld(i, false) })
}

// Claim takes exactly a's devices. Unhealthy devices may be claimed (an
// allocation may hold a device that failed after it was placed).
func (d *Devices) Claim(a *Allocation) error {
	var bad error
	seen := map[int32]bool{}
	if err := d.forEach(a, func(i int32) {
		if bad != nil {
			return
		}
		if d.held[i] || seen[i] {
			bad = fmt.Errorf("%w: %s %s is already allocated", ErrConflict, d.noun(), quote.Bare(d.ids[i]))
		}
		seen[i] = true
	}); err != nil {
		return err
	}
	if bad != nil {
		return bad
	}
	_ = d.forEach(a, func(i int32) { d.setHeld(i, true) })
	return nil
}

func (d *Devices) noun() string {
	if d.class == GPUClass {
		return "GPU"
	}
	return quote.Bare(d.class) + " device"
}

// Nodes returns the known nodes of a's devices.
func (d *Devices) Nodes(a *Allocation) numa.Mask {
	var m numa.Mask
	_ = d.forEach(a, func(i int32) {
		if d.node[i] >= 0 {
			m = m.With(int(d.node[i]))
		}
	})
	return m
}

// Clone returns an independent copy.
func (d *Devices) Clone() Resource {
	c := *d
	c.healthy = slices.Clone(d.healthy)
	c.held = slices.Clone(d.held)
	c.nodeCap = slices.Clone(d.nodeCap)
	c.nodeFree = slices.Clone(d.nodeFree)
	c.groupFree = slices.Clone(d.groupFree)
	c.scratch, c.pick = nil, pickScratch{}
	return &c
}

// holds reports whether a holds device i.
func (d *Devices) holds(a *Allocation, i int32) bool {
	found := false
	_ = d.forEach(a, func(j int32) { found = found || j == i })
	return found
}

// nearID returns ` (did you mean "mlx5_0"?)` when the class has a device
// whose ID differs from id only in case, else "".
func (d *Devices) nearID(id string) string {
	if d.class == GPUClass {
		return ""
	}
	for _, x := range d.ids {
		if strings.EqualFold(x, id) {
			return fmt.Sprintf(" (did you mean %s?)", quote.Short(x))
		}
	}
	return ""
}
