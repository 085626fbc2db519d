package allocator

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/allocator/internal/general"
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
// Which devices: the engine decides how many each NUMA node of the span
// gives; the devices themselves are chosen by the one device chooser
// (allocator/devchoice, the same as kubelet.PreferredAllocator's
// GetPreferredAllocation), node by node, for every class the request asks
// for at once, so that NICs and other classes pair with the GPUs chosen
// under their PCIe switches (GPUDirect RDMA), in the order of
// [devchoice.Rank].
type Devices struct {
	class    string
	isGPU    bool     // class is GPUClass (no other class may be named so): asked for by Request.GPUs, held in Allocation.GPUs
	ids      []string // external IDs, ascending (numerically for GPUs)
	gpuIDs   []int    // GPU IDs when class is GPUClass
	dev      []devState
	sw       []int32 // switch index, -1 none
	byNode   [][]int32
	unplaced []int32
	nodeCap  []int64
	nodeFree []int64
	unCap    int32
	unFree   int32
	// The switch groups: the devices of one node under one PCIe switch (the
	// devices of a node whose switch is not known form one group, nothing
	// tells them apart). Device i is in group dev[i].group (-1: unknown
	// node); group g holds groupDev[groupOff[g]:groupOff[g+1]] (ascending
	// device index) of which groupFree[g] are free; node n has the groups
	// nodeGroups[n], in order of their lowest device.
	groupOff   []int32
	groupDev   []int32
	groupFree  []int32
	nodeGroups [][]int32
	oneGroup   []int32 // per node, its one group, or -1 when it has none or several
	// freeSet holds the free healthy devices (by index), for the chooser.
	freeSet devchoice.Set
	joint   *deviceJoint // shared by the state's device classes
	ci      int          // the class's index in joint
	gpuCut  carver[int]  // the allocations' GPU IDs (see record)
}

// devState is what the resource knows of one device, in one place (what
// holding or giving back a device reads and writes).
type devState struct {
	group   int32 // switch group, -1 when the node is unknown
	node    int16 // dense node, -1 unknown
	healthy bool
	held    bool
}

// free reports whether the device may be handed out: healthy and not held.
func (v *devState) free() bool { return v.healthy && !v.held }

// gpuChunk is the length of the chunks the GPU IDs of allocations are cut
// from.
const gpuChunk = 16

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
	return d.finish()
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
		class: class, dev: make([]devState, n), sw: make([]int32, n),
		byNode: make([][]int32, m.NumNodes()), nodeCap: make([]int64, m.NumNodes()),
		nodeFree:   make([]int64, m.NumNodes()),
		nodeGroups: make([][]int32, m.NumNodes()), oneGroup: make([]int32, m.NumNodes()), freeSet: devchoice.NewSet(n),
	}
}

func (d *Devices) add(m *topology.Machine, i int, node numa.NodeID, sw string, switches map[string]int32) {
	d.dev[i] = devState{group: -1, node: -1, healthy: true}
	d.freeSet.Add(i)
	if idx, ok := m.NodeIndex(node); ok && node != topology.UnknownNode {
		d.dev[i].node = int16(idx)
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
	// The switch groups, node by node, in order of their lowest device,
	// each group's devices in the node's order: one pass that numbers the
	// groups and counts their devices, one that places the devices (linear
	// in the devices, whatever the number of switches per node).
	d.groupOff = append(d.groupOff[:0], 0)
	groupOfSwitch := make(map[int32]int32)
	var next []int32
	for n, devs := range d.byNode {
		clear(groupOfSwitch)
		base := int32(len(d.groupOff) - 1)
		for _, i := range devs {
			g, ok := groupOfSwitch[d.sw[i]]
			if !ok {
				g = int32(len(d.groupOff) - 1)
				groupOfSwitch[d.sw[i]] = g
				d.nodeGroups[n] = append(d.nodeGroups[n], g)
				d.groupOff = append(d.groupOff, 0)
			}
			d.dev[i].group = g
			d.groupOff[g+1]++
		}
		end := int32(len(d.groupOff) - 1)
		next = next[:0]
		for g := base; g < end; g++ {
			d.groupFree = append(d.groupFree, d.groupOff[g+1])
			d.groupOff[g+1] += d.groupOff[g]
			next = append(next, d.groupOff[g])
		}
		d.oneGroup[n] = -1
		if len(d.nodeGroups[n]) == 1 {
			d.oneGroup[n] = d.nodeGroups[n][0]
		}
		d.groupDev = append(d.groupDev, make([]int32, len(devs))...)
		for _, i := range devs {
			k := d.dev[i].group - base
			d.groupDev[next[k]] = i
			next[k]++
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
	if d.isGPU {
		if units == 1 {
			return "1 GPU"
		}
		return groupDigits(units) + " GPUs"
	}
	return deviceCount(d.class, units)
}

func (d *Devices) isFree(i int32) bool { return d.dev[i].free() }

// hold marks device i held, and takes it off the free counts when it was
// free.
func (d *Devices) hold(i int32) {
	v := &d.dev[i]
	if v.held {
		return
	}
	v.held = true
	if !v.healthy {
		return
	}
	d.freeSet.Remove(int(i))
	if v.node >= 0 {
		d.nodeFree[v.node]--
		d.groupFree[v.group]--
	} else {
		d.unFree--
	}
}

// give marks device i not held, and counts it free again when healthy.
func (d *Devices) give(i int32) {
	v := &d.dev[i]
	if !v.held {
		return
	}
	v.held = false
	if !v.healthy {
		return
	}
	d.freeSet.Add(int(i))
	if v.node >= 0 {
		d.nodeFree[v.node]++
		d.groupFree[v.group]++
	} else {
		d.unFree++
	}
}

// holdFree marks every free healthy device of node held (hold for each):
// the node and its groups then have none free.
func (d *Devices) holdFree(node int) {
	for _, i := range d.byNode[node] {
		if v := &d.dev[i]; v.free() {
			v.held = true
			d.freeSet.Remove(int(i))
		}
	}
	d.nodeFree[node] = 0
	for _, g := range d.nodeGroups[node] {
		d.groupFree[g] = 0
	}
}

// SetHealthy marks device i (index in ascending ID order) healthy or not.
// It reports whether the health changed.
func (d *Devices) setHealthy(i int32, healthy bool) bool {
	v := &d.dev[i]
	if v.healthy == healthy {
		return false
	}
	v.healthy = healthy
	delta := int32(1)
	if !healthy {
		delta = -1
	}
	switch {
	case v.held:
	case healthy:
		d.freeSet.Add(int(i))
	default:
		d.freeSet.Remove(int(i))
	}
	if n := v.node; n >= 0 {
		d.nodeCap[n] += int64(delta)
		if !v.held {
			d.nodeFree[n] += int64(delta)
			d.groupFree[v.group] += delta
		}
	} else {
		d.unCap += delta
		if !v.held {
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
	if d.isGPU {
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

// gpuIndex returns the position of GPU id (small enough to be inlined;
// gpuSearch is its general case).
func (d *Devices) gpuIndex(id int) (int32, bool) {
	if uint(id) < uint(len(d.gpuIDs)) && d.gpuIDs[id] == id {
		return int32(id), true // dense IDs 0..n-1, the common case
	}
	return d.gpuSearch(id)
}

// gpuSearch is gpuIndex by binary search.
func (d *Devices) gpuSearch(id int) (int32, bool) {
	i, ok := slices.BinarySearch(d.gpuIDs, id)
	return int32(i), ok
}

// Penalty counts the PCIe switch groups the split uses beyond one per node
// of span (the largest groups of a node first). O(devices on span's nodes).
func (d *Devices) Penalty(_ *Request, span numa.Mask, amounts []int64) int64 {
	var p int64
	for w := uint64(span); w != 0; w &= w - 1 {
		node := bits.TrailingZeros64(w)
		k := amounts[node]
		switch g := d.oneGroup[node]; {
		case k <= 0:
		case g >= 0: // switchesNeeded of a node of one group
			if d.groupFree[g] == 0 {
				p--
			}
		default:
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

// Take records the amounts of one decision; the devices themselves are
// chosen once every device class the request asks for has recorded its
// amounts, so that the classes are chosen together and NICs pair with
// GPUs.
//
// A request without Devices demands GPUs as its only device class: its
// GPUs are chosen at once, from the amounts as given.
func (d *Devices) Take(r *Request, amounts []int64, unplaced int64, a *Allocation) {
	j := d.joint
	if d.isGPU && len(r.Devices) == 0 && !general.On {
		j.takeOne(d.ci, amounts, unplaced, a)
		return
	}
	j.record(d, r, amounts, unplaced, a)
}

// record records the amounts of class d for the decision of r into a, and
// takes the devices of every class once the last class the request asks
// for has recorded its own.
func (j *deviceJoint) record(d *Devices, r *Request, amounts []int64, unplaced int64, a *Allocation) {
	if j.r != r || j.a != a { // a new decision: forget any earlier record
		j.r, j.a = r, a
		clear(j.got)
	}
	copy(j.amt[d.ci], amounts)
	j.unplaced[d.ci] = unplaced
	j.got[d.ci] = true
	for ci, res := range j.res {
		if res != nil && !j.got[ci] && res.Demand(r) > 0 {
			return // another class of the request is still to come
		}
	}
	j.take(a)
	j.r, j.a = nil, nil
	clear(j.got)
}

// deviceJoint is what the device resources of one state share: the
// machine's device index for the one device chooser (allocator/devchoice,
// the same chooser kubelet.PreferredAllocator.GetPreferredAllocation uses), its
// working memory, and the amounts of the decision being taken. It is used
// under the state's write lock only; a clone of the state gets its own
// (sharing the immutable index).
type deviceJoint struct {
	x   *devchoice.Index
	ch  *devchoice.Chooser // made on the first choice
	res []*Devices         // by devchoice class index (nil: the state has no such resource)
	// The decision being taken: its request and allocation, and per class
	// the amounts recorded by Take (per node), the unplaced amount and
	// whether Take recorded them.
	r        *Request
	a        *Allocation
	amt      [][]int64
	unplaced []int64
	got      []bool
	active   []int           // the classes whose amounts Take recorded (set by take)
	before   []devchoice.Set // per class, its free devices before take
	wants    []devchoice.Want
	req      devchoice.Request
}

// linkDevices gives the device resources of s one shared deviceJoint (the
// index of ix when it is not nil, a new one otherwise). New and the clones
// of a state call it once their resources exist. It takes time linear in
// the machine's devices and NVLinks when it builds the index, O(classes)
// otherwise.
func (s *State) linkDevices(ix *devchoice.Index) {
	if ix == nil {
		ix, _ = devchoice.NewIndex(s.m) // never fails on a machine
	}
	names := ix.Classes()
	j := &deviceJoint{x: ix, res: make([]*Devices, len(names)), amt: make([][]int64, len(names)),
		unplaced: make([]int64, len(names)), got: make([]bool, len(names)), before: make([]devchoice.Set, len(names))}
	for ci, name := range names {
		d := s.gpu
		if ci > 0 {
			d = s.classes[name]
		}
		if d == nil {
			continue
		}
		d.joint, d.ci = j, ci
		j.res[ci] = d
		j.amt[ci] = make([]int64, s.n)
	}
}

// take chooses the devices of the recorded decision and records them in a.
// Node by node of the span, the classes' amounts there are one request to
// the chooser (GPUs first, so that the other classes pair with them under
// their PCIe switches), and the unplaced amounts one more, on the devices
// of unknown NUMA node; the chooser's cost (see devchoice.Chooser.Choose)
// is paid once per node that gives devices, except where one class takes
// every free device of the node (the only choice). The devices taken are
// those free before and not after (kept in j.before), so they are recorded
// in ascending order without a sort.
func (j *deviceJoint) take(a *Allocation) {
	j.active = j.active[:0]
	for ci, d := range j.res {
		if d != nil && j.got[ci] {
			j.active = append(j.active, ci)
		}
	}
	if len(j.active) == 1 && !general.On {
		ci := j.active[0]
		j.takeOne(ci, j.amt[ci], j.unplaced[ci], a)
		return
	}
	var nodes numa.Mask
	unplaced := false
	for _, ci := range j.active {
		j.before[ci] = append(j.before[ci][:0], j.res[ci].freeSet...)
		nodes |= numa.Mask(atLeast(j.amt[ci], 1))
		unplaced = unplaced || j.unplaced[ci] > 0
	}
	for w := uint64(nodes); w != 0; w &= w - 1 {
		j.choose(numa.Mask(w&-w), false)
	}
	if unplaced {
		j.choose(0, true)
	}
	for _, ci := range j.active {
		j.res[ci].record(j.before[ci], a)
	}
}

// takeOne takes amt[i] devices of class ci alone on each node i and
// unplaced ones of unknown NUMA node, and records them in a: take for a
// decision of one device class. Each node's want is chosen alone, and
// every free device of a node is the only choice when the amount is all
// of them.
func (j *deviceJoint) takeOne(ci int, amt []int64, unplaced int64, a *Allocation) {
	d := j.res[ci]
	j.before[ci] = append(j.before[ci][:0], d.freeSet...)
	for w := atLeast(amt, 1); w != 0; w &= w - 1 {
		node := bits.TrailingZeros64(w)
		if amt[node] == d.nodeFree[node] && !general.On {
			d.holdFree(node)
		} else {
			j.chooseOne(ci, numa.Mask(w&-w), false, amt[node])
		}
	}
	if unplaced > 0 {
		j.chooseOne(ci, 0, true, unplaced)
	}
	d.record(j.before[ci], a)
}

// chooseOne takes k devices of class ci alone on nodes (or on the unknown
// node): choose for a decision of one class.
func (j *deviceJoint) chooseOne(ci int, nodes numa.Mask, unknown bool, k int64) {
	j.wants = append(j.wants[:0], devchoice.Want{Class: ci, Count: int(k), Free: j.res[ci].freeSet})
	j.chooseWants(nodes, unknown, j.wants)
}

// choose takes the recorded amounts of every class on the one node of
// nodes, or the unplaced amounts when unknown is set.
func (j *deviceJoint) choose(nodes numa.Mask, unknown bool) {
	node := bits.TrailingZeros64(uint64(nodes))
	j.wants = j.wants[:0]
	for _, ci := range j.active {
		k := j.unplaced[ci]
		if !unknown {
			k = j.amt[ci][node]
		}
		if k > 0 {
			j.wants = append(j.wants, devchoice.Want{Class: ci, Count: int(k), Free: j.res[ci].freeSet})
		}
	}
	switch {
	case len(j.wants) == 0:
	case len(j.wants) == 1 && !unknown && int64(j.wants[0].Count) == j.res[j.wants[0].Class].nodeFree[node] && !general.On:
		// Every free device of the node: the only choice.
		j.res[j.wants[0].Class].holdFree(node)
	case len(j.wants) > devchoice.MaxWants:
		// More classes than one choice takes: each class on its own.
		for k := range j.wants {
			j.chooseWants(nodes, unknown, j.wants[k:k+1])
		}
	default:
		j.chooseWants(nodes, unknown, j.wants)
	}
}

// chooseWants takes the chooser's choice of wants on nodes (or on the
// unknown node).
func (j *deviceJoint) chooseWants(nodes numa.Mask, unknown bool, wants []devchoice.Want) {
	if j.ch == nil {
		j.ch = j.x.NewChooser()
	}
	j.req = devchoice.Request{Nodes: nodes, Unknown: unknown, Wants: wants}
	res, err := j.ch.Choose(&j.req)
	for k, w := range wants {
		d := j.res[w.Class]
		if err != nil { // cannot happen: the engine took the amounts from the free ones
			d.takeAny(nodes, unknown, w.Count)
			continue
		}
		for i := range res.Devices(k).All() {
			d.hold(int32(i))
		}
	}
}

// takeAny takes k free devices of the nodes (or of unknown node), the
// lowest indices first.
func (d *Devices) takeAny(nodes numa.Mask, unknown bool, k int) {
	for i := range d.dev {
		if k == 0 {
			break
		}
		n := int(d.dev[i].node)
		if d.isFree(int32(i)) && (n < 0 && unknown || n >= 0 && nodes.Contains(n)) {
			d.hold(int32(i))
			k--
		}
	}
}

// record writes the devices taken since before (the free devices then:
// those of before no longer free) into a, in ascending order.
func (d *Devices) record(before devchoice.Set, a *Allocation) {
	n := 0
	for wi, w := range before {
		n += bits.OnesCount64(w &^ d.freeSet[wi])
	}
	if n == 0 {
		return
	}
	if d.isGPU {
		a.GPUs = d.gpuCut.cut(n, gpuChunk)
		k := 0
		for wi, w := range before {
			for w &^= d.freeSet[wi]; w != 0; w &= w - 1 {
				a.GPUs[k] = d.gpuIDs[wi<<6|bits.TrailingZeros64(w)]
				k++
			}
		}
		return
	}
	ids := make([]string, 0, n)
	for wi, w := range before {
		for w &^= d.freeSet[wi]; w != 0; w &= w - 1 {
			ids = append(ids, d.ids[wi<<6|bits.TrailingZeros64(w)])
		}
	}
	if a.Devices == nil {
		a.Devices = map[string][]string{}
	}
	a.Devices[d.class] = ids
}

func (d *Devices) held2(a *Allocation) []string {
	if d.isGPU {
		return nil
	}
	return a.Devices[d.class]
}

// forEach calls f with the index of each device a holds, or returns an
// error naming an unknown one.
func (d *Devices) forEach(a *Allocation, f func(int32)) error {
	if d.isGPU {
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
	if d.isGPU {
		ids := d.gpuIDs
		for _, g := range a.GPUs {
			i := int32(g)
			if uint(g) >= uint(len(ids)) || ids[g] != g { // gpuIndex, inline for dense IDs
				var ok bool
				if i, ok = d.gpuSearch(g); !ok {
					continue
				}
			}
			d.give(i)
		}
		return
	}
	if len(a.Devices) == 0 { // holds no devices of other classes
		return
	}
	_ = d.forEach(a, d.give)
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
		if d.dev[i].held || seen[i] {
			bad = fmt.Errorf("%w: %s %s is already allocated", ErrConflict, d.noun(), quote.Bare(d.ids[i]))
		}
		seen[i] = true
	}); err != nil {
		return err
	}
	if bad != nil {
		return bad
	}
	_ = d.forEach(a, d.hold)
	return nil
}

func (d *Devices) noun() string {
	if d.isGPU {
		return "GPU"
	}
	return quote.Bare(d.class) + " device"
}

// Nodes returns the known nodes of a's devices.
func (d *Devices) Nodes(a *Allocation) numa.Mask {
	var m numa.Mask
	_ = d.forEach(a, func(i int32) {
		if n := d.dev[i].node; n >= 0 {
			m = m.With(int(n))
		}
	})
	return m
}

// Clone returns an independent copy.
func (d *Devices) Clone() Resource {
	c := *d
	c.dev = slices.Clone(d.dev)
	c.nodeCap = slices.Clone(d.nodeCap)
	c.nodeFree = slices.Clone(d.nodeFree)
	c.groupFree = slices.Clone(d.groupFree)
	c.freeSet = slices.Clone(d.freeSet)
	c.joint = nil // the state's clone links its own (State.linkDevices)
	c.gpuCut = carver[int]{}
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
	if d.isGPU {
		return ""
	}
	for _, x := range d.ids {
		if strings.EqualFold(x, id) {
			return fmt.Sprintf(" (did you mean %s?)", quote.Short(x))
		}
	}
	return ""
}
