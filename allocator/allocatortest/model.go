package allocatortest

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// MaxModelNodes is the largest number of NUMA nodes [NewModel] accepts: the
// model enumerates every one of the 2^n NUMA masks for each question, which
// is instant for n <= 8 and already slow at 20.
const MaxModelNodes = 20

// Model is a brute-force reference model of the allocation semantics of
// docs/design.md ("Semantics (the contract)"), written from that document and
// not from the engine, so that it can catch the engine's mistakes.
//
// A Model is the state of one machine with a given list of live allocations
// (as [allocator.State.Allocate] returned them) and, optionally, unhealthy
// devices. From those it derives, per NUMA node, the allocatable capacity
// and the free amount of every resource, the free devices of unknown NUMA
// node and the node types (idle, single, shared). [Model.Decide] answers
// whether a request is admissible, with its width_cap, width_free and the
// spans legal for it, by enumerating every NUMA mask; [Model.Check] says
// what is wrong with an engine's answer (on machines of at most
// [MaxPreferNodes] nodes also when its span is not the preferred one,
// [Model.Preferred]). [Model.DecideResize] and [Model.CheckResize] judge
// resizes, [Model.Claim] and [Model.CheckClaim] claims.
//
// Complexity: Decide, Check, CheckFit, Place, DecideResize, CheckResize and
// Resize cost O(2^n · n · k) for n NUMA nodes and k demanded resource kinds
// (and the preference check of Check ranks at most C(4, 2) spans, each in
// O(machine)); Claim and CheckClaim cost O(what the claim names); building a
// model costs O(size of the machine + size of the live allocations). It is meant for machines of
// n <= 8 nodes (see [Machine]); NewModel refuses more than [MaxModelNodes].
//
// A Model is immutable: [Model.With] and [Model.Without] return new models.
// It is safe for concurrent use.
type Model struct {
	m        *topology.Machine
	n        int
	tpc      int
	classes  []string                  // non-GPU device classes of the machine, ascending
	devs     map[string][]device       // by class, GPUs under allocator.GPUClass
	devIdx   map[string]map[string]int // class -> ID -> index into devs[class]
	reserved numa.CPUSet

	unhealthy map[devKey]bool
	live      []allocator.Allocation // deep copies, ordered by ID
	spans     map[string]numa.Mask   // live ID -> span recomputed from what it holds
	cpuHolder map[int]string
	devHolder map[devKey]string
	memUsed   []int64
	single    numa.Mask
	shared    numa.Mask

	opts options // what the preference check knows of the engine's options
}

type device struct {
	id   string
	node int    // dense index, -1 when the NUMA node is unknown
	sw   string // the PCIe switch, "" when not named
}

type devKey struct{ class, id string }

func (k devKey) String() string {
	if k.class == allocator.GPUClass {
		return "GPU " + k.id
	}
	return k.class + " device " + k.id
}

// NewModel returns the model of machine m with the given live allocations,
// every device healthy. Each allocation's span is recomputed from what it
// holds ([SpanOf]). It returns an error when the allocations are not a
// possible state: an unknown or reserved CPU, an unknown device, anything
// held twice, more memory than a node has, a duplicate or empty ID, or a
// Span field that is not the nodes hosting what the allocation holds. It
// also refuses a machine of more than [MaxModelNodes] NUMA nodes.
func NewModel(m *topology.Machine, live []allocator.Allocation) (*Model, error) {
	return build(m, live, nil, options{})
}

// FromSnapshot returns the model of machine m holding the allocations of
// snap and its unhealthy devices (see [NewModel] for the errors).
func FromSnapshot(m *topology.Machine, snap allocator.Snapshot) (*Model, error) {
	unhealthy := map[devKey]bool{}
	for class, ids := range snap.Unhealthy {
		for _, id := range ids {
			unhealthy[devKey{class, id}] = true
		}
	}
	return build(m, snap.Allocations, unhealthy, options{})
}

func build(m *topology.Machine, live []allocator.Allocation, unhealthy map[devKey]bool, opts options) (*Model, error) {
	if m.NumNodes() > MaxModelNodes {
		return nil, fmt.Errorf("allocatortest: the model enumerates 2^n NUMA masks; %d nodes is more than %d",
			m.NumNodes(), MaxModelNodes)
	}
	md := &Model{m: m, n: m.NumNodes(), tpc: m.ThreadsPerCore(), reserved: m.ReservedCPUs(),
		devs: map[string][]device{}, devIdx: map[string]map[string]int{},
		unhealthy: map[devKey]bool{}, spans: map[string]numa.Mask{}, cpuHolder: map[int]string{},
		devHolder: map[devKey]string{}, memUsed: make([]int64, m.NumNodes()), opts: opts}
	md.addDevClass(allocator.GPUClass)
	for _, g := range m.GPUs() {
		md.addDev(allocator.GPUClass, strconv.Itoa(g.ID), g.NUMANode, g.PCIeSwitch)
	}
	for _, d := range m.Devices() {
		if _, ok := md.devIdx[d.Class]; !ok {
			md.addDevClass(d.Class)
			md.classes = append(md.classes, d.Class)
		}
		md.addDev(d.Class, d.ID, d.NUMANode, d.PCIeSwitch)
	}
	slices.Sort(md.classes)
	for k := range unhealthy {
		if _, ok := md.devIdx[k.class][k.id]; !ok {
			return nil, fmt.Errorf("allocatortest: unhealthy %s does not exist on the machine", k)
		}
		md.unhealthy[k] = true
	}
	live = slices.Clone(live)
	slices.SortFunc(live, func(a, b allocator.Allocation) int { return strings.Compare(a.ID, b.ID) })
	var spans []numa.Mask
	for _, a := range live {
		if err := md.hold(a); err != nil {
			return nil, fmt.Errorf("allocatortest: allocation %q: %w", a.ID, err)
		}
		md.live = append(md.live, a.Clone())
		spans = append(spans, md.spans[a.ID])
	}
	md.single, md.shared = nodeTypes(spans)
	return md, nil
}

// The model computes the node types, the exclusivity rule and every mask
// enumeration itself, with plain bit loops, rather than through package
// policy or numa.Mask's iterators, so that a mistake there cannot hide in
// the engine and the model alike.

// nodeTypes returns the single and shared nodes of the given spans.
func nodeTypes(spans []numa.Mask) (single, shared numa.Mask) {
	var used numa.Mask
	for _, s := range spans {
		used |= s
		if bits.OnesCount64(uint64(s)) > 1 {
			shared |= s
		}
	}
	return used &^ shared, shared
}

// binds reports whether the exclusivity rule binds r: under Required, for
// every policy but None.
func binds(r *allocator.Request) bool {
	return r.Exclusive == policy.Required && r.Policy != policy.None
}

// width returns the number of nodes of mask.
func width(mask numa.Mask) int { return bits.OnesCount64(uint64(mask)) }

// has reports whether dense node i is in mask.
func has(mask numa.Mask, i int) bool { return uint64(mask)>>uint(i)&1 == 1 }

// masks returns every non-empty mask of the machine's n nodes, ascending.
func (md *Model) masks() []numa.Mask {
	out := make([]numa.Mask, 0, 1<<md.n-1)
	for mask := numa.Mask(1); mask < 1<<md.n; mask++ {
		out = append(out, mask)
	}
	return out
}

// inOneSet reports whether mask lies inside one NUMA set.
func (md *Model) inOneSet(mask numa.Mask) bool {
	for _, set := range md.m.NUMASets() {
		if mask&^set == 0 {
			return true
		}
	}
	return false
}

// setsCrossed counts the NUMA sets mask touches.
func (md *Model) setsCrossed(mask numa.Mask) int {
	n := 0
	for _, set := range md.m.NUMASets() {
		if mask&set != 0 {
			n++
		}
	}
	return n
}

func (md *Model) addDevClass(class string) {
	md.devIdx[class] = map[string]int{}
}

func (md *Model) addDev(class, id string, node numa.NodeID, sw string) {
	i := -1
	if node != topology.UnknownNode {
		i, _ = md.m.NodeIndex(node)
	}
	md.devIdx[class][id] = len(md.devs[class])
	md.devs[class] = append(md.devs[class], device{id: id, node: i, sw: sw})
}

// hold records what a holds, refusing anything unknown or held twice.
func (md *Model) hold(a allocator.Allocation) error {
	if a.ID == "" {
		return errors.New("empty ID")
	}
	if _, ok := md.spans[a.ID]; ok {
		return errors.New("the ID is live twice")
	}
	for cpu := range a.CPUs.All() {
		if _, ok := md.m.CPUNode(cpu); !ok {
			return fmt.Errorf("CPU %d does not exist", cpu)
		}
		if md.reserved.Contains(cpu) {
			return fmt.Errorf("CPU %d is reserved", cpu)
		}
		if h, ok := md.cpuHolder[cpu]; ok {
			return fmt.Errorf("CPU %d is held by %q too", cpu, h)
		}
		md.cpuHolder[cpu] = a.ID
	}
	for _, k := range devKeys(a) {
		if _, ok := md.devIdx[k.class][k.id]; !ok {
			return fmt.Errorf("%s does not exist", k)
		}
		if h, ok := md.devHolder[k]; ok {
			return fmt.Errorf("%s is held by %q too", k, h)
		}
		md.devHolder[k] = a.ID
	}
	for _, nm := range a.Memory {
		i, ok := md.m.NodeIndex(nm.Node)
		if !ok {
			return fmt.Errorf("memory on NUMA node %d, which does not exist", nm.Node)
		}
		if nm.MiB < 0 {
			return fmt.Errorf("negative memory %d MiB on node %d", nm.MiB, nm.Node)
		}
		md.memUsed[i] += nm.MiB
		if have := md.m.PodMemoryMiB(i); md.memUsed[i] > have {
			return fmt.Errorf("node %d has %d MiB, %d MiB are held", nm.Node, have, md.memUsed[i])
		}
	}
	span := SpanOf(md.m, a)
	if a.DenseSpan != span {
		return fmt.Errorf("DenseSpan %s is not the nodes hosting what it holds, %s", md.ids(a.DenseSpan), md.ids(span))
	}
	md.spans[a.ID] = span
	return nil
}

// devKeys lists the devices a holds, GPUs first, then classes ascending.
func devKeys(a allocator.Allocation) []devKey {
	var out []devKey
	for _, g := range a.GPUs {
		out = append(out, devKey{allocator.GPUClass, strconv.Itoa(g)})
	}
	for _, c := range slices.Sorted(maps.Keys(a.Devices)) {
		for _, id := range a.Devices[c] {
			out = append(out, devKey{c, id})
		}
	}
	return out
}

// SpanOf returns the NUMA nodes (dense mask) of m that host any of a's
// CPUs, GPUs, devices or memory (nodes with a positive amount). Devices of
// unknown NUMA node and anything m does not have count nowhere.
func SpanOf(m *topology.Machine, a allocator.Allocation) numa.Mask {
	var span numa.Mask
	for cpu := range a.CPUs.All() {
		if i, ok := m.CPUNode(cpu); ok {
			span = span.With(i)
		}
	}
	for _, id := range a.GPUs {
		if g, ok := m.GPU(id); ok && g.NUMANode != topology.UnknownNode {
			if i, ok := m.NodeIndex(g.NUMANode); ok {
				span = span.With(i)
			}
		}
	}
	if len(a.Devices) > 0 {
		for _, d := range m.Devices() {
			if d.NUMANode == topology.UnknownNode || !slices.Contains(a.Devices[d.Class], d.ID) {
				continue
			}
			if i, ok := m.NodeIndex(d.NUMANode); ok {
				span = span.With(i)
			}
		}
	}
	for _, nm := range a.Memory {
		if i, ok := m.NodeIndex(nm.Node); ok && nm.MiB > 0 {
			span = span.With(i)
		}
	}
	return span
}

// With returns a new model with a added as a live allocation (see
// [NewModel] for the errors).
func (md *Model) With(a allocator.Allocation) (*Model, error) {
	return build(md.m, append(slices.Clone(md.live), a), md.unhealthy, md.opts)
}

// Without returns a new model without the live allocation id, or an error
// wrapping [allocator.ErrUnknownID] when no live allocation has it.
func (md *Model) Without(id string) (*Model, error) {
	i := slices.IndexFunc(md.live, func(a allocator.Allocation) bool { return a.ID == id })
	if i < 0 {
		return nil, fmt.Errorf("%w: %q", allocator.ErrUnknownID, id)
	}
	return build(md.m, slices.Delete(slices.Clone(md.live), i, i+1), md.unhealthy, md.opts)
}

// WithHealth returns a new model in which the device of the given class
// (allocator.GPUClass for GPUs, whose IDs are written in decimal) is
// healthy or not, or an error when the machine has no such device. An
// unhealthy device is neither capacity nor free; an allocation that holds
// it keeps it.
func (md *Model) WithHealth(class, id string, healthy bool) (*Model, error) {
	k := devKey{class, id}
	if _, ok := md.devIdx[class][id]; !ok {
		return nil, fmt.Errorf("allocatortest: %s does not exist on the machine", k)
	}
	unhealthy := maps.Clone(md.unhealthy)
	if healthy {
		delete(unhealthy, k)
	} else {
		unhealthy[k] = true
	}
	return build(md.m, md.live, unhealthy, md.opts)
}

// Unhealthy returns the unhealthy devices by class (allocator.GPUClass for
// GPUs), IDs ascending, in the form of [allocator.Snapshot].Unhealthy; nil
// when every device is healthy.
func (md *Model) Unhealthy() map[string][]string {
	var out map[string][]string
	for k := range md.unhealthy {
		if out == nil {
			out = map[string][]string{}
		}
		out[k.class] = append(out[k.class], k.id)
	}
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// Holders returns the IDs of the live allocations that hold the device of
// the given class (at most one), what [allocator.State.SetDeviceHealth]
// must report as affected.
func (md *Model) Holders(class, id string) []string {
	if h, ok := md.devHolder[devKey{class, id}]; ok {
		return []string{h}
	}
	return nil
}

// Machine returns the model's machine.
func (md *Model) Machine() *topology.Machine { return md.m }

// Live returns copies of the live allocations, ordered by ID.
func (md *Model) Live() []allocator.Allocation {
	out := make([]allocator.Allocation, len(md.live))
	for i, a := range md.live {
		out[i] = a.Clone()
	}
	return out
}

// IsLive reports whether an allocation with the given ID is live.
func (md *Model) IsLive(id string) bool {
	_, ok := md.spans[id]
	return ok
}

// NodeTypes returns the single and shared nodes (dense masks) of the live
// spans: shared when a live multi-node span uses the node, else single when
// any live span does.
func (md *Model) NodeTypes() (single, shared numa.Mask) { return md.single, md.shared }

// Type returns the exclusivity type of the node at dense index i.
func (md *Model) Type(i int) policy.NodeType {
	switch {
	case has(md.shared, i):
		return policy.Shared
	case has(md.single, i):
		return policy.Single
	}
	return policy.Idle
}

// FreeCPUs returns the allocatable CPUs no live allocation holds.
func (md *Model) FreeCPUs() numa.CPUSet {
	var free numa.CPUSet
	for cpu := range md.m.CPUs().All() {
		if md.cpuFree(cpu) {
			free.Add(cpu)
		}
	}
	return free
}

func (md *Model) cpuAllocatable(cpu int) bool { return !md.reserved.Contains(cpu) }

// cpuTrouble says why cpu cannot be handed out or claimed now (unknown,
// reserved or held), or returns "".
func (md *Model) cpuTrouble(cpu int) string {
	_, known := md.m.CPUNode(cpu)
	h, held := md.cpuHolder[cpu]
	switch {
	case !known:
		return fmt.Sprintf("CPU %d does not exist", cpu)
	case md.reserved.Contains(cpu):
		return fmt.Sprintf("CPU %d is reserved", cpu)
	case held:
		return fmt.Sprintf("CPU %d was not free: %q holds it", cpu, h)
	}
	return ""
}

func (md *Model) cpuFree(cpu int) bool {
	_, held := md.cpuHolder[cpu]
	return md.cpuAllocatable(cpu) && !held
}

// cpuUnits counts node i's allocatable (free: also not held) CPUs, or with
// full its whole cores: cores of exactly ThreadsPerCore threads, every one
// allocatable (and free).
func (md *Model) cpuUnits(i int, full, free bool) int64 {
	ok := md.cpuAllocatable
	if free {
		ok = md.cpuFree
	}
	var n int64
	if !full {
		for cpu := range md.m.NodeCPUs(i).All() {
			if ok(cpu) {
				n++
			}
		}
		return n
	}
	for c := 0; c < md.m.NumCores(); c++ {
		if md.m.CoreNode(c) == i && md.wholeCore(c, ok) {
			n++
		}
	}
	return n
}

func (md *Model) wholeCore(c int, ok func(int) bool) bool {
	cpus := md.m.CoreCPUs(c)
	if cpus.Size() != md.tpc {
		return false
	}
	for cpu := range cpus.All() {
		if !ok(cpu) {
			return false
		}
	}
	return true
}

// devUnits counts the healthy devices of class on node i (free: also not
// held); node -1 counts those of unknown NUMA node.
func (md *Model) devUnits(class string, i int, free bool) int64 {
	var n int64
	for _, d := range md.devs[class] {
		if d.node != i {
			continue
		}
		k := devKey{class, d.id}
		if md.unhealthy[k] {
			continue
		}
		if _, held := md.devHolder[k]; free && held {
			continue
		}
		n++
	}
	return n
}

func (md *Model) memUnits(i int, free bool) int64 {
	n := md.m.PodMemoryMiB(i)
	if free {
		n -= md.memUsed[i]
	}
	return n
}

// Capacity returns the allocatable capacity of the node at dense index i
// by resource kind: "cpu" (CPUs minus reserved ones, or with fullPCPUs the
// whole cores: cores of ThreadsPerCore threads none of which is reserved),
// allocator.GPUClass (healthy GPUs of the node), each other device class of
// the machine (healthy devices of the node) and "memory" (MiB).
func (md *Model) Capacity(i int, fullPCPUs bool) map[string]int64 {
	return md.units(i, fullPCPUs, false)
}

// Free returns what is free now on the node at dense index i, in the units
// and kinds of [Model.Capacity]: with fullPCPUs, "cpu" counts the whole
// cores all of whose threads are allocatable and free. Free(i, false) is
// what [allocator.State.NodeFree] must return.
func (md *Model) Free(i int, fullPCPUs bool) map[string]int64 { return md.units(i, fullPCPUs, true) }

func (md *Model) units(i int, full, free bool) map[string]int64 {
	out := map[string]int64{
		"cpu":              md.cpuUnits(i, full, free),
		allocator.GPUClass: md.devUnits(allocator.GPUClass, i, free),
		"memory":           md.memUnits(i, free),
	}
	for _, c := range md.classes {
		out[c] = md.devUnits(c, i, free)
	}
	return out
}

// Unplaced returns the free healthy devices of unknown NUMA node by class
// (allocator.GPUClass for GPUs), classes with none left out. Only None
// requests receive them.
func (md *Model) Unplaced() map[string]int64 {
	out := map[string]int64{}
	for _, c := range append([]string{allocator.GPUClass}, md.classes...) {
		if n := md.devUnits(c, -1, true); n > 0 {
			out[c] = n
		}
	}
	return out
}

// kind is one demanded resource kind of a request, with its amounts per node.
type kind struct {
	name      string
	role      role
	need      int64
	cap, free []int64
	unplaced  int64 // free units of unknown NUMA node (devices only)
}

// role says which of the machine's resources a kind is.
type role uint8

const (
	roleCPU role = iota
	roleDevice
	roleMemory
)

// kinds returns r's demanded kinds: cpu (whole cores for fullPCPUs), GPUs,
// device classes (ascending), memory. r must be valid.
func (md *Model) kinds(r *allocator.Request) []kind {
	var ks []kind
	add := func(name string, rl role, need int64, amount func(i int, free bool) int64, unplaced int64) {
		if need <= 0 {
			return
		}
		k := kind{name: name, role: rl, need: need, cap: make([]int64, md.n), free: make([]int64, md.n), unplaced: unplaced}
		for i := range md.n {
			k.cap[i], k.free[i] = amount(i, false), amount(i, true)
		}
		ks = append(ks, k)
	}
	cpus := int64(r.CPUs)
	name := "cpu"
	if r.FullPCPUs {
		cpus /= int64(md.tpc)
		name = "cpu (whole cores)"
	}
	add(name, roleCPU, cpus, func(i int, free bool) int64 { return md.cpuUnits(i, r.FullPCPUs, free) }, 0)
	dev := func(class string) func(int, bool) int64 {
		return func(i int, free bool) int64 { return md.devUnits(class, i, free) }
	}
	add(allocator.GPUClass, roleDevice, int64(r.GPUs), dev(allocator.GPUClass), md.devUnits(allocator.GPUClass, -1, true))
	for _, c := range slices.Sorted(maps.Keys(r.Devices)) {
		add(c, roleDevice, int64(r.Devices[c]), dev(c), md.devUnits(c, -1, true))
	}
	add("memory", roleMemory, r.MemoryMiB, func(i int, free bool) int64 { return md.memUnits(i, free) }, 0)
	return ks
}

func covers(ks []kind, mask numa.Mask, free bool) bool {
	for _, k := range ks {
		amount := k.cap
		if free {
			amount = k.free
		}
		var sum int64
		for i, x := range amount {
			if has(mask, i) {
				sum += x
			}
		}
		if sum < k.need {
			return false
		}
	}
	return true
}

// Verdict is the model's answer for one request.
type Verdict struct {
	// Valid is false when the request itself is malformed.
	Valid bool
	// Admissible reports whether the request must be admitted now.
	Admissible bool
	// Refusals are the sentinels an engine may answer when Admissible is
	// false (allocator.ErrInvalidRequest, ErrInsufficient, ErrNoNUMAFit or
	// ErrExclusivity); more than one only where docs/design.md leaves the
	// category open.
	Refusals []error
	// Reason explains the verdict in words, with the widths and spans.
	Reason string
	// WidthCap is width_cap (0 when the capacity of the known NUMA nodes
	// never covers the request).
	WidthCap int
	// InSet reports whether width_cap was found inside one NUMA set, so
	// that a Restricted request's span must lie inside one.
	InSet bool
	// WidthFree is width_free (0 when the free resources of the known NUMA
	// nodes do not cover the request).
	WidthFree int
	// Width is the span width the policy demands: 1 for SingleNUMANode,
	// WidthCap for Restricted, WidthFree for BestEffort, 0 for None.
	Width int
	// DenseSpans are the spans legal for an admissible request, as masks of
	// dense node indices, ascending; nil for None, which may be placed
	// anywhere (AnySpan).
	DenseSpans []numa.Mask
	// AnySpan is true for a valid None request: any span is legal and
	// Spans is not consulted.
	AnySpan bool
}

// validate returns why r is malformed, or "".
func (md *Model) validate(r *allocator.Request) string {
	switch {
	case r.CPUs < 0:
		return fmt.Sprintf("cpus %d is negative", r.CPUs)
	case r.GPUs < 0:
		return fmt.Sprintf("gpus %d is negative", r.GPUs)
	case r.MemoryMiB < 0:
		return fmt.Sprintf("memoryMiB %d is negative", r.MemoryMiB)
	case !r.Policy.Valid():
		return fmt.Sprintf("policy %d is not a policy", r.Policy)
	case !r.Exclusive.Valid():
		return fmt.Sprintf("exclusive %d is not an exclusivity value", r.Exclusive)
	}
	some := r.CPUs > 0 || r.GPUs > 0 || r.MemoryMiB > 0
	for _, c := range slices.Sorted(maps.Keys(r.Devices)) {
		if c == allocator.GPUClass {
			return "devices[gpu]: GPUs are asked for with the GPUs field"
		}
		if r.Devices[c] < 0 {
			return fmt.Sprintf("devices[%s] %d is negative", c, r.Devices[c])
		}
		some = some || r.Devices[c] > 0
	}
	if !some {
		return "every amount is zero"
	}
	if r.FullPCPUs && r.CPUs%md.tpc != 0 {
		return fmt.Sprintf("fullPCPUs needs a multiple of %d CPUs, got %d", md.tpc, r.CPUs)
	}
	return ""
}

// allowed reports whether span obeys the exclusivity rule now.
// Under Required, a one-node span may not use a shared node and a
// multi-node span may not use a single node.
func (md *Model) allowed(span numa.Mask) bool {
	if width(span) == 1 {
		return span&md.shared == 0
	}
	return span&md.single == 0
}

// Decide answers whether r is admissible now, ignoring its ID (see
// [Model.Check] for the ID rules), by the policy table of docs/design.md:
//
//   - SingleNUMANode: one node whose free resources cover r and which the
//     exclusivity rule allows (under Required).
//   - Restricted: a set of exactly width_cap nodes (inside one NUMA set when
//     width_cap was found inside one) whose free resources cover r and which
//     the rule allows (under Required).
//   - BestEffort: the free resources of the known nodes cover r; the span
//     has width_free nodes and, under Required, is allowed whenever some set
//     of width_free nodes with enough free is.
//   - None: the free resources, devices of unknown NUMA node included,
//     cover r; any span.
//
// Devices of unknown NUMA node count for None only. Capacity and free
// amounts are counted jointly: a set of nodes covers r when, for every
// demanded kind, the nodes' amounts add up to the demand.
func (md *Model) Decide(r *allocator.Request) Verdict {
	if why := md.validate(r); why != "" {
		return Verdict{Refusals: []error{allocator.ErrInvalidRequest}, Reason: "invalid request: " + why}
	}
	v := Verdict{Valid: true}
	ks := md.kinds(r)
	all := md.m.AllNodes()
	v.WidthCap, v.InSet = md.widthCap(ks)
	v.WidthFree = md.minWidth(all, func(mask numa.Mask) bool { return covers(ks, mask, true) })
	knownFree := covers(ks, all, true)

	if r.Policy == policy.None {
		v.AnySpan = true
		var short []string
		for _, k := range ks {
			if have := sum(k.free) + k.unplaced; have < k.need {
				short = append(short, fmt.Sprintf("%s: need %d, free %d (%d of unknown NUMA node)",
					k.name, k.need, have, k.unplaced))
			}
		}
		if len(short) > 0 {
			v.Refusals = []error{allocator.ErrInsufficient}
			v.Reason = "None: the free resources do not cover the request: " + strings.Join(short, "; ")
			return v
		}
		v.Admissible = true
		v.Reason = "None: the free resources cover the request (any span)"
		return v
	}

	if v.WidthCap == 0 || !knownFree {
		v.Refusals = []error{allocator.ErrInsufficient}
		var short []string
		unplacedHelps := true // every short kind has enough free of unknown NUMA node
		for _, k := range ks {
			if have := sum(k.free); have < k.need {
				short = append(short, fmt.Sprintf("%s: need %d, free %d on known NUMA nodes (capacity %d)",
					k.name, k.need, have, sum(k.cap)))
				unplacedHelps = unplacedHelps && have+k.unplaced >= k.need
			}
		}
		if len(short) > 0 && unplacedHelps {
			// The free resources exist, but not on any NUMA node: docs/design.md
			// does not say which of the two categories applies.
			v.Refusals = append(v.Refusals, allocator.ErrNoNUMAFit)
		}
		v.Reason = fmt.Sprintf("%s: the free resources of the known NUMA nodes do not cover the request: %s",
			r.Policy, strings.Join(short, "; "))
		return v
	}

	switch r.Policy {
	case policy.SingleNUMANode:
		v.Width = 1
	case policy.Restricted:
		v.Width = v.WidthCap
	case policy.BestEffort:
		v.Width = v.WidthFree
	}
	var fit []numa.Mask // spans of the demanded width with enough free, ascending
	for _, mask := range md.masks() {
		inSet := r.Policy != policy.Restricted || !v.InSet || md.inOneSet(mask)
		if width(mask) == v.Width && inSet && covers(ks, mask, true) {
			fit = append(fit, mask)
		}
	}
	var ok, blocked []numa.Mask
	for _, mask := range fit {
		if !binds(r) || md.allowed(mask) {
			ok = append(ok, mask)
		} else {
			blocked = append(blocked, mask)
		}
	}
	where := fmt.Sprintf("width_cap %d (across NUMA sets), width_free %d", v.WidthCap, v.WidthFree)
	within := ""
	if v.InSet {
		where = fmt.Sprintf("width_cap %d (inside one NUMA set), width_free %d", v.WidthCap, v.WidthFree)
		if r.Policy == policy.Restricted {
			within = " inside one NUMA set"
		}
	}
	switch {
	case len(fit) == 0:
		v.Refusals = []error{allocator.ErrNoNUMAFit}
		v.Reason = fmt.Sprintf("%s: %s; no span of %d node(s)%s has enough free", r.Policy, where, v.Width, within)
	case len(ok) == 0 && r.Policy == policy.BestEffort:
		// The soft rule: broken rather than the span widened.
		v.Admissible, v.DenseSpans = true, fit
		v.Reason = fmt.Sprintf("%s: %s; no span of width %d is allowed by the exclusivity rule, so any of %s (rule broken)",
			r.Policy, where, v.Width, md.spanList(fit))
	case len(ok) == 0:
		v.Refusals = []error{allocator.ErrExclusivity}
		v.Reason = fmt.Sprintf("%s: %s; spans %s have enough free but the exclusivity rule forbids each (%s)",
			r.Policy, where, md.spanList(fit), md.typesText())
	default:
		v.Admissible, v.DenseSpans = true, ok
		v.Reason = fmt.Sprintf("%s: %s; legal spans %s", r.Policy, where, md.spanList(ok))
		if len(blocked) > 0 {
			v.Reason += fmt.Sprintf(" (forbidden by the exclusivity rule: %s)", md.spanList(blocked))
		}
	}
	return v
}

// widthCap returns width_cap and whether it was found inside one NUMA set;
// 0 when the capacity never covers ks.
func (md *Model) widthCap(ks []kind) (int, bool) {
	capCovers := func(mask numa.Mask) bool { return covers(ks, mask, false) }
	best := 0
	for _, set := range md.m.NUMASets() {
		if w := md.minWidth(set, capCovers); w > 0 && (best == 0 || w < best) {
			best = w
		}
	}
	if best > 0 {
		return best, true
	}
	return md.minWidth(md.m.AllNodes(), capCovers), false
}

// minWidth returns the fewest nodes of a subset of within satisfying ok, 0
// when none does.
func (md *Model) minWidth(within numa.Mask, ok func(numa.Mask) bool) int {
	best := 0
	for _, mask := range md.masks() {
		if mask&^within == 0 && (best == 0 || width(mask) < best) && ok(mask) {
			best = width(mask)
		}
	}
	return best
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// ids writes a dense mask as node IDs, such as "{0,33}".
func (md *Model) ids(mask numa.Mask) string {
	var parts []string
	for _, id := range md.m.IDsOf(mask) {
		parts = append(parts, id.String())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func (md *Model) spanList(masks []numa.Mask) string {
	const most = 8
	var parts []string
	for i, mask := range masks {
		if i == most {
			parts = append(parts, fmt.Sprintf("... (%d in all)", len(masks)))
			break
		}
		parts = append(parts, md.ids(mask))
	}
	return strings.Join(parts, " ")
}

func (md *Model) typesText() string {
	return fmt.Sprintf("single nodes %s, shared nodes %s", md.ids(md.single), md.ids(md.shared))
}

// freeText describes the free amounts of r's kinds per node, for messages.
func (md *Model) freeText(r *allocator.Request) string {
	if md.validate(r) != "" {
		return ""
	}
	var parts []string
	for _, k := range md.kinds(r) {
		var nodes []string
		for i := range md.n {
			nodes = append(nodes, fmt.Sprintf("%d:%d/%d", md.m.NodeID(i), k.free[i], k.cap[i]))
		}
		s := fmt.Sprintf("%s need %d, free/capacity by node %s", k.name, k.need, strings.Join(nodes, " "))
		if k.unplaced > 0 {
			s += fmt.Sprintf(", %d free of unknown node", k.unplaced)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ") + "; " + md.typesText()
}

// CheckFit says what is wrong with err as the answer of
// [allocator.State.Fit] for r, or returns nil: Fit must return nil exactly
// when r is admissible, [allocator.ErrDuplicateID] when r's non-empty ID is
// live, and otherwise a refusal of the category the model expects.
func (md *Model) CheckFit(r *allocator.Request, err error) error {
	if r.ID != "" && md.IsLive(r.ID) {
		return md.checkDuplicate(r, err, "Fit")
	}
	return md.checkVerdict(r, err, nil)
}

// Check says what is wrong with the answer (a, err) of
// [allocator.State.Allocate] for r, or returns nil. It checks, against the
// state before the call:
//
//   - an empty ID is refused with [allocator.ErrInvalidRequest], an ID
//     already live with [allocator.ErrDuplicateID];
//   - completeness: an admissible request is not refused; soundness: a
//     request that is not admissible is refused, with a sentinel of the
//     category the model expects (a *[allocator.PlacementError] for
//     placement refusals);
//   - the allocation: its ID, policy, exclusivity and fullPCPUs are the
//     request's; exactly the CPUs, GPUs, devices of each class and total
//     memory asked for; nothing unknown, reserved, unhealthy, held twice or
//     not free before (memory no more than the node's free memory); whole
//     cores of ThreadsPerCore threads under fullPCPUs; devices of unknown
//     NUMA node only for None; Span exactly the nodes hosting what it
//     holds; and that span one the policy allows ([Verdict.DenseSpans]);
//   - on a machine of at most [MaxPreferNodes] nodes, for every policy but
//     None (whose span is free), that span is the top-ranked admissible one
//     ([Model.Preferred]) for the engine options given to
//     [Model.WithOptions] (none: the zero Options), and each node gives
//     what the span's split says ([Model.Split], the design's "within the
//     chosen span": the first kind from the nodes with the most free, the
//     others in proportion).
//
// The error lists every difference found.
func (md *Model) Check(r *allocator.Request, a allocator.Allocation, err error) error {
	if r.ID == "" {
		if !errors.Is(err, allocator.ErrInvalidRequest) {
			return fmt.Errorf("request %s: Allocate with an empty ID must be refused with ErrInvalidRequest, got %s",
				r, answer(a, err))
		}
		return nil
	}
	if md.IsLive(r.ID) {
		return md.checkDuplicate(r, err, "Allocate")
	}
	return md.checkVerdict(r, err, &a)
}

func answer(a allocator.Allocation, err error) string {
	if err != nil {
		return fmt.Sprintf("error %q", err)
	}
	return "allocation " + a.String()
}

func (md *Model) checkDuplicate(r *allocator.Request, err error, op string) error {
	if errors.Is(err, allocator.ErrDuplicateID) {
		return nil
	}
	if md.validate(r) != "" && errors.Is(err, allocator.ErrInvalidRequest) {
		return nil // both apply; docs/design.md does not order them
	}
	if err == nil {
		return fmt.Errorf("request %s: %s admitted it though ID %q is live; want ErrDuplicateID", r, op, r.ID)
	}
	return fmt.Errorf("request %s: ID %q is live; %s must refuse with ErrDuplicateID, got %q", r, r.ID, op, err)
}

// checkVerdict compares the engine's admission (err) with the model's, and
// the allocation when a is not nil.
func (md *Model) checkVerdict(r *allocator.Request, err error, a *allocator.Allocation) error {
	v := md.Decide(r)
	if err != nil {
		if v.Admissible {
			ex := ""
			if len(v.DenseSpans) > 0 {
				ex = fmt.Sprintf(" (for example span %s)", md.ids(v.DenseSpans[0]))
			}
			return fmt.Errorf("request %s refused though admissible (completeness): engine said %q; model: %s%s; state: %s",
				r, err, v.Reason, ex, md.freeText(r))
		}
		if !slices.ContainsFunc(v.Refusals, func(s error) bool { return errors.Is(err, s) }) {
			return fmt.Errorf("request %s refused with the wrong category: engine said %q, the model expects %s: %s; state: %s",
				r, err, sentinelNames(v.Refusals), v.Reason, md.freeText(r))
		}
		if v.Valid {
			var pe *allocator.PlacementError
			if !errors.As(err, &pe) {
				return fmt.Errorf("request %s: the refusal %q (%T) is not a *allocator.PlacementError", r, err, err)
			}
		}
		return nil
	}
	if !v.Admissible {
		got := "Fit admitted it"
		if a != nil {
			got = "engine gave " + a.String()
		}
		return fmt.Errorf("request %s admitted though not admissible (soundness): %s; model: %s, want %s; state: %s",
			r, got, v.Reason, sentinelNames(v.Refusals), md.freeText(r))
	}
	if a == nil {
		return nil
	}
	if problems := md.checkAllocation(r, *a, v); len(problems) > 0 {
		return fmt.Errorf("request %s got %s:\n  - %s\n(model: %s; state: %s)", r, a, strings.Join(problems, "\n  - "),
			v.Reason, md.freeText(r))
	}
	return nil
}

func sentinelNames(errs []error) string {
	names := map[error]string{
		allocator.ErrInvalidRequest: "ErrInvalidRequest", allocator.ErrInsufficient: "ErrInsufficient",
		allocator.ErrNoNUMAFit: "ErrNoNUMAFit", allocator.ErrExclusivity: "ErrExclusivity",
		allocator.ErrDuplicateID: "ErrDuplicateID", allocator.ErrUnknownID: "ErrUnknownID",
	}
	var parts []string
	for _, e := range errs {
		parts = append(parts, cmp.Or(names[e], e.Error()))
	}
	return strings.Join(parts, " or ")
}

// checkAllocation lists what is wrong with a as the allocation of the
// admissible request r.
func (md *Model) checkAllocation(r *allocator.Request, a allocator.Allocation, v Verdict) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }

	if a.ID != r.ID {
		add("ID %q, want %q", a.ID, r.ID)
	}
	if a.Policy != r.Policy || a.Exclusive != r.Exclusive || a.FullPCPUs != r.FullPCPUs {
		add("policy %s/%s fullPCPUs %t, want the request's %s/%s fullPCPUs %t",
			a.Policy, a.Exclusive, a.FullPCPUs, r.Policy, r.Exclusive, r.FullPCPUs)
	}

	// CPUs.
	if n := a.CPUs.Size(); n != r.CPUs {
		add("%d CPUs (%s), want exactly %d", n, a.CPUs, r.CPUs)
	}
	for cpu := range a.CPUs.All() {
		if why := md.cpuTrouble(cpu); why != "" {
			add("%s", why)
		}
	}
	if r.FullPCPUs {
		seen := map[int]bool{}
		for cpu := range a.CPUs.All() {
			c, ok := md.m.CPUCore(cpu)
			if !ok || seen[c] {
				continue
			}
			seen[c] = true
			core := md.m.CoreCPUs(c)
			if core.Size() != md.tpc || !core.IsSubsetOf(a.CPUs) {
				add("fullPCPUs: CPU %d's core %s is not handed out whole (a whole core has %d threads, got %s of it)",
					cpu, core, md.tpc, core.Intersection(a.CPUs))
			}
		}
	}

	// GPUs and devices.
	if n := len(a.GPUs); n != r.GPUs {
		add("%d GPUs %v, want exactly %d", n, a.GPUs, r.GPUs)
	}
	for _, c := range slices.Sorted(maps.Keys(a.Devices)) {
		if n, want := len(a.Devices[c]), r.Devices[c]; n != want {
			add("%d %s devices %v, want exactly %d", n, c, a.Devices[c], want)
		}
	}
	for _, c := range slices.Sorted(maps.Keys(r.Devices)) {
		if _, ok := a.Devices[c]; !ok && r.Devices[c] > 0 {
			add("no %s devices, want exactly %d", c, r.Devices[c])
		}
	}
	seen := map[devKey]bool{}
	for _, k := range devKeys(a) {
		if seen[k] {
			add("%s is handed out twice in the allocation", k)
			continue
		}
		seen[k] = true
		j, ok := md.devIdx[k.class][k.id]
		if !ok {
			add("%s does not exist", k)
			continue
		}
		h, held := md.devHolder[k]
		switch {
		case md.unhealthy[k]:
			add("%s is unhealthy", k)
		case held:
			add("%s was not free: %q holds it", k, h)
		}
		if md.devs[k.class][j].node < 0 && r.Policy != policy.None {
			add("%s has an unknown NUMA node; only None requests may receive it, this one is %s", k, r.Policy)
		}
	}

	// Memory.
	var total int64
	memNodes := map[numa.NodeID]bool{}
	for j, nm := range a.Memory {
		total += nm.MiB
		i, ok := md.m.NodeIndex(nm.Node)
		switch {
		case !ok:
			add("memory on NUMA node %d, which does not exist", nm.Node)
			continue
		case nm.MiB <= 0:
			add("memory entry of %d MiB on node %d (nodes with none are left out)", nm.MiB, nm.Node)
		case memNodes[nm.Node]:
			add("memory on node %d listed twice", nm.Node)
		case j > 0 && a.Memory[j-1].Node > nm.Node:
			add("memory on node %d listed after node %d (ascending node IDs)", nm.Node, a.Memory[j-1].Node)
		}
		memNodes[nm.Node] = true
		if free := md.memUnits(i, true); nm.MiB > free {
			add("%d MiB on node %d, which had only %d MiB free", nm.MiB, nm.Node, free)
		}
	}
	if total != r.MemoryMiB {
		add("%d MiB of memory, want exactly %d", total, r.MemoryMiB)
	}

	// Span.
	span := SpanOf(md.m, a)
	if a.DenseSpan != span {
		add("DenseSpan %s is not the nodes hosting its CPUs, GPUs, devices and memory, %s", md.ids(a.DenseSpan), md.ids(span))
	}
	if !v.AnySpan && !slices.Contains(v.DenseSpans, span) {
		add("span %s is not legal: %s", md.ids(span), md.whyIllegal(r, span, v))
	} else if why := md.checkPreferred(r, a, span, v); why != "" {
		add("%s", why)
	}
	return p
}

// whyIllegal explains why span is not among v.DenseSpans.
func (md *Model) whyIllegal(r *allocator.Request, span numa.Mask, v Verdict) string {
	var why []string
	if width(span) != v.Width {
		why = append(why, fmt.Sprintf("it has %d node(s), %s demands exactly %d (width_cap %d, width_free %d)",
			width(span), r.Policy, v.Width, v.WidthCap, v.WidthFree))
	}
	if r.Policy == policy.Restricted && v.InSet && !md.inOneSet(span) {
		why = append(why, fmt.Sprintf("it crosses %d NUMA sets though width_cap was found inside one", md.setsCrossed(span)))
	}
	if binds(r) && !md.allowed(span) {
		if r.Policy == policy.BestEffort {
			why = append(why, fmt.Sprintf("it breaks the exclusivity rule (%s) though %s of the same width is allowed",
				md.typesText(), md.ids(v.DenseSpans[0])))
		} else {
			why = append(why, fmt.Sprintf("the exclusivity rule forbids it (%s)", md.typesText()))
		}
	}
	if len(why) == 0 {
		why = append(why, "it does not have enough free resources for the request")
	}
	return strings.Join(why, "; ") + "; legal spans: " + md.spanList(v.DenseSpans)
}

// Place is the model's own allocation for r, a slow reference allocator:
// on a machine of at most [MaxPreferNodes] nodes, the preferred span
// ([Model.Preferred]) split as [Model.Split] says; else, on the first legal
// span ([Verdict.DenseSpans]; for None the nodes in ascending order, then
// devices of unknown NUMA node), each kind taken greedily node by node. On
// each node the lowest free CPUs (whole cores under fullPCPUs) and device
// IDs come first. It returns an error wrapping the verdict's first
// sentinel when r is not admissible, or [allocator.ErrDuplicateID] /
// [allocator.ErrInvalidRequest] for a live or empty ID. The allocation has
// no machine attached, so its NUMANodes method returns nil.
func (md *Model) Place(r *allocator.Request) (allocator.Allocation, error) {
	if r.ID == "" {
		return allocator.Allocation{}, fmt.Errorf("%w: empty ID", allocator.ErrInvalidRequest)
	}
	if md.IsLive(r.ID) {
		return allocator.Allocation{}, fmt.Errorf("%w: %q", allocator.ErrDuplicateID, r.ID)
	}
	v := md.Decide(r)
	if !v.Admissible {
		return allocator.Allocation{}, fmt.Errorf("%w: %s", v.Refusals[0], v.Reason)
	}
	nodes := md.m.AllNodes()
	a := allocator.Allocation{ID: r.ID, Policy: r.Policy, Exclusive: r.Exclusive, FullPCPUs: r.FullPCPUs}
	if !v.AnySpan {
		nodes = v.DenseSpans[0]
		if md.n <= MaxPreferNodes {
			top, _ := md.preferred(r, v)
			split := md.Split(r, top[0])
			for j, k := range md.rankKinds(r) {
				for i, n := range split[j] {
					md.take(r, &a, k.name, i, n)
				}
			}
			a.DenseSpan = SpanOf(md.m, a)
			return a, nil
		}
	}
	for _, k := range md.kinds(r) {
		rem := k.need
		for i := range md.n {
			if !has(nodes, i) {
				continue
			}
			take := min(k.free[i], rem)
			rem -= take
			md.take(r, &a, k.name, i, take)
		}
		if rem > 0 { // None only: devices of unknown NUMA node
			md.take(r, &a, k.name, -1, rem)
		}
	}
	a.DenseSpan = SpanOf(md.m, a)
	return a, nil
}

// take puts n units of kind name from node i (-1: unknown node) into a.
func (md *Model) take(r *allocator.Request, a *allocator.Allocation, name string, i int, n int64) {
	if n <= 0 {
		return
	}
	switch {
	case name == "memory":
		a.Memory = append(a.Memory, allocator.NodeMemory{Node: md.m.NodeID(i), MiB: n})
		slices.SortFunc(a.Memory, func(x, y allocator.NodeMemory) int { return cmp.Compare(x.Node, y.Node) })
	case strings.HasPrefix(name, "cpu"):
		if !r.FullPCPUs {
			for cpu := range md.m.NodeCPUs(i).All() {
				if n > 0 && md.cpuFree(cpu) {
					a.CPUs.Add(cpu)
					n--
				}
			}
			return
		}
		for c := 0; c < md.m.NumCores() && n > 0; c++ {
			if md.m.CoreNode(c) == i && md.wholeCore(c, md.cpuFree) {
				a.CPUs.UnionWith(md.m.CoreCPUs(c))
				n--
			}
		}
	default:
		var ids []string
		for _, d := range md.devs[name] {
			k := devKey{name, d.id}
			if _, held := md.devHolder[k]; d.node == i && !held && !md.unhealthy[k] {
				ids = append(ids, d.id)
			}
		}
		if name == allocator.GPUClass {
			nums := make([]int, 0, len(ids))
			for _, id := range ids {
				g, _ := strconv.Atoi(id)
				nums = append(nums, g)
			}
			slices.Sort(nums)
			a.GPUs = append(a.GPUs, nums[:n]...)
			slices.Sort(a.GPUs)
			return
		}
		slices.Sort(ids)
		if a.Devices == nil {
			a.Devices = map[string][]string{}
		}
		a.Devices[name] = append(a.Devices[name], ids[:n]...)
		slices.Sort(a.Devices[name])
	}
}

// CompareAllocations returns an error naming every field in which got
// differs from want (ID, policy, exclusivity, fullPCPUs, span, CPUs, GPUs,
// devices by class, memory by node), or nil. Empty and nil slices and maps
// are equal; the machine an allocation belongs to is not compared.
func CompareAllocations(want, got allocator.Allocation) error {
	var p []string
	add := func(field string, w, g any) { p = append(p, fmt.Sprintf("%s: want %v, got %v", field, w, g)) }
	if want.ID != got.ID {
		add("ID", strconv.Quote(want.ID), strconv.Quote(got.ID))
	}
	if want.Policy != got.Policy {
		add("policy", want.Policy, got.Policy)
	}
	if want.Exclusive != got.Exclusive {
		add("exclusive", want.Exclusive, got.Exclusive)
	}
	if want.FullPCPUs != got.FullPCPUs {
		add("fullPCPUs", want.FullPCPUs, got.FullPCPUs)
	}
	if want.DenseSpan != got.DenseSpan {
		add("span (dense)", "{"+want.DenseSpan.String()+"}", "{"+got.DenseSpan.String()+"}")
	}
	if !want.CPUs.Equal(got.CPUs) {
		add("CPUs", want.CPUs, got.CPUs)
	}
	if !slices.Equal(want.GPUs, got.GPUs) {
		add("GPUs", want.GPUs, got.GPUs)
	}
	classes := slices.Sorted(maps.Keys(want.Devices))
	for c := range got.Devices {
		if !slices.Contains(classes, c) {
			classes = append(classes, c)
		}
	}
	slices.Sort(classes)
	for _, c := range classes {
		if !slices.Equal(want.Devices[c], got.Devices[c]) {
			add(c+" devices", want.Devices[c], got.Devices[c])
		}
	}
	if !slices.Equal(want.Memory, got.Memory) {
		add("memory", want.Memory, got.Memory)
	}
	if len(p) > 0 {
		return fmt.Errorf("allocation %q differs: %s", want.ID, strings.Join(p, "; "))
	}
	return nil
}

// CompareSnapshots returns an error naming the first allocations (by ID)
// and the device health in which got differs from want, or nil.
func CompareSnapshots(want, got allocator.Snapshot) error {
	var p []string
	wantIDs, gotIDs := snapIDs(want), snapIDs(got)
	if !slices.Equal(wantIDs, gotIDs) {
		p = append(p, fmt.Sprintf("live IDs: want %q, got %q", wantIDs, gotIDs))
	} else {
		for i := range want.Allocations {
			if err := CompareAllocations(want.Allocations[i], got.Allocations[i]); err != nil {
				p = append(p, err.Error())
			}
		}
	}
	classes := slices.Sorted(maps.Keys(want.Unhealthy))
	for c := range got.Unhealthy {
		if !slices.Contains(classes, c) {
			classes = append(classes, c)
		}
	}
	slices.Sort(classes)
	for _, c := range classes {
		w, g := slices.Sorted(slices.Values(want.Unhealthy[c])), slices.Sorted(slices.Values(got.Unhealthy[c]))
		if !slices.Equal(w, g) {
			p = append(p, fmt.Sprintf("unhealthy %s devices: want %q, got %q", c, w, g))
		}
	}
	if len(p) > 0 {
		return fmt.Errorf("snapshots differ: %s", strings.Join(p, "; "))
	}
	return nil
}

func snapIDs(s allocator.Snapshot) []string {
	ids := make([]string, len(s.Allocations))
	for i, a := range s.Allocations {
		ids[i] = a.ID
	}
	return ids
}
