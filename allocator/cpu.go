package allocator

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// CPUs is the CPU [Resource]: exclusive logical CPUs, SMT-aware. Reserved
// CPUs are never handed out. A request's units are CPUs, or whole cores with
// FullPCPUs (a whole core has all of its threads allocatable and free).
//
// Preferences inside a node: whole free cores first (the lowest-numbered);
// the remainder from cores that are already partly used, then by splitting
// a free core; the lowest CPU IDs on a tie.
type CPUs struct {
	m         *topology.Machine
	tpc       int
	alloc     numa.CPUSet // allocatable: every CPU minus the reserved ones
	free      numa.CPUSet
	nodeCap   []int64
	nodeFree  []int64
	wholeCap  []int64     // per node: cores with tpc allocatable threads
	wholeFree []int64     // per node: such cores with every thread free
	coreAlloc []int8      // allocatable threads per core
	coreTab   []coreEntry // by core: its free threads as bits, its whole mask, its bit in wholeWords
	cpuTab    []cpuEntry  // by CPU: its core, its position in the core's threads, its node
	nodeCores [][]int32   // by node: its cores, ascending
	// The whole free cores, as bits: node i's words are
	// wholeWords[wholeOff[i]:wholeOff[i+1]], whose bit s is set when core
	// nodeCores[i][s] can be handed out whole and every thread of it is
	// free.
	wholeWords []uint64
	wholeOff   []int32
	coreNode   []int32 // by core: its node
	// The allocatable threads of core k are threads[threadOff[k]:threadOff[k+1]],
	// ascending.
	threads   []int32
	threadOff []int32
	// pickBits holds the CPUs being picked (bit cpu%64 of word cpu/64),
	// from the start of a Take (or of a grown Resize) to its end.
	pickBits []uint64
	list     []int
	words    carver[uint64] // the allocations' CPU words (see picked)
}

// cpuEntry is what the CPU resource keeps of one logical CPU: its core (-1
// for a CPU the machine does not have), the CPU's position among the core's
// allocatable threads (its bit in the core's free bits) and the core's node.
type cpuEntry struct {
	core   int32
	thread uint8
	node   uint8
}

// coreEntry is what the CPU resource keeps of one core: free, bit t set
// when its allocatable thread threadsOf(k)[t] is free; whole, every bit of
// free set when the core can be handed out whole (all of its tpc threads
// are allocatable), 0 when it cannot (the core is whole and free exactly
// when free equals a whole that is not 0); and the core's bit in
// wholeWords, bit bit of word word; and its first two allocatable threads
// (for the unrolled take of a whole core on SMT2 machines).
type coreEntry struct {
	free  uint64
	whole uint64
	word  int32
	bit   uint8
	pair  [2]int32
}

// setWhole sets (on) or clears core k's bit in wholeWords.
func (c *CPUs) setWhole(k int32, on bool) {
	e := &c.coreTab[k]
	if on {
		c.wholeWords[e.word] |= 1 << (e.bit & 63)
	} else {
		c.wholeWords[e.word] &^= 1 << (e.bit & 63)
	}
}

var (
	_ Resource   = (*CPUs)(nil)
	_ Penalizer  = (*CPUs)(nil)
	_ BulkReader = (*CPUs)(nil)
)

// cpuWordChunk is the words of the chunks the CPU sets of allocations are
// cut from (four sets of a 256-CPU machine).
const cpuWordChunk = 16

// newCPUs returns the CPU resource of m with every allocatable CPU free.
func newCPUs(m *topology.Machine) *CPUs {
	n := m.NumNodes()
	c := &CPUs{
		m: m, tpc: m.ThreadsPerCore(),
		nodeCap: make([]int64, n), nodeFree: make([]int64, n),
		wholeCap: make([]int64, n), wholeFree: make([]int64, n),
		coreAlloc: make([]int8, m.NumCores()), coreTab: make([]coreEntry, m.NumCores()),
		nodeCores: make([][]int32, n),
	}
	c.alloc = m.CPUs()
	c.alloc.RemoveAll(m.ReservedCPUs())
	c.free = c.alloc.Clone()
	for k := 0; k < m.NumCores(); k++ {
		node := m.CoreNode(k)
		cpus := m.CoreCPUs(k)
		a := cpus.IntersectionCount(c.alloc)
		c.coreAlloc[k] = int8(a)
		c.nodeCap[node] += int64(a)
		if c.full(k) {
			c.wholeCap[node]++
		}
		c.nodeCores[node] = append(c.nodeCores[node], int32(k))
	}
	copy(c.nodeFree, c.nodeCap)
	copy(c.wholeFree, c.wholeCap)
	c.wholeOff = make([]int32, n+1)
	for node, cores := range c.nodeCores {
		c.wholeOff[node+1] = c.wholeOff[node] + int32((len(cores)+63)/64)
	}
	c.wholeWords = make([]uint64, c.wholeOff[n])
	for node, cores := range c.nodeCores {
		for slot, k := range cores {
			c.coreTab[k].word, c.coreTab[k].bit = c.wholeOff[node]+int32(slot>>6), uint8(slot&63)
			if c.full(int(k)) {
				c.setWhole(k, true)
			}
		}
	}
	c.cpuTab = make([]cpuEntry, m.CPUs().Max()+1)
	for cpu := range c.cpuTab {
		c.cpuTab[cpu].core = -1
		if k, ok := m.CPUCore(cpu); ok {
			c.cpuTab[cpu] = cpuEntry{core: int32(k), node: uint8(m.CoreNode(k))}
		}
	}
	c.coreNode = make([]int32, m.NumCores())
	c.threadOff = make([]int32, m.NumCores()+1)
	for k := range c.coreNode {
		c.coreNode[k] = int32(m.CoreNode(k))
		for cpu := range m.CoreCPUs(k).All() {
			if c.alloc.Contains(cpu) {
				t := len(c.threads) - int(c.threadOff[k])
				c.cpuTab[cpu].thread = uint8(t)
				c.coreTab[k].free |= 1 << uint(t)
				c.threads = append(c.threads, int32(cpu))
			}
		}
		c.threadOff[k+1] = int32(len(c.threads))
		copy(c.coreTab[k].pair[:], c.threads[c.threadOff[k]:])
		if c.full(k) {
			c.coreTab[k].whole = c.coreTab[k].free
		}
	}
	c.pickBits = make([]uint64, max(m.CPUs().Max(), 0)/64+1)
	return c
}

// full reports whether core k can be handed out whole: all of its tpc
// threads are allocatable.
func (c *CPUs) full(k int) bool { return int(c.coreAlloc[k]) == c.tpc }

// Kind returns "cpu".
func (c *CPUs) Kind() string { return "cpu" }

// Demand returns r.CPUs, in whole cores when r.FullPCPUs.
func (c *CPUs) Demand(r *Request) int64 {
	if r.FullPCPUs {
		return int64(r.CPUs / c.tpc)
	}
	return int64(r.CPUs)
}

// Capacity returns the node's allocatable CPUs (whole cores for FullPCPUs).
func (c *CPUs) Capacity(r *Request, node int) int64 {
	if r.FullPCPUs {
		return int64(c.wholeCap[node])
	}
	return int64(c.nodeCap[node])
}

// Free returns the node's free CPUs (whole free cores for FullPCPUs).
func (c *CPUs) Free(r *Request, node int) int64 {
	if r.FullPCPUs {
		return int64(c.wholeFree[node])
	}
	return int64(c.nodeFree[node])
}

// FreeView returns Free of every node (a view of the counters).
func (c *CPUs) FreeView(r *Request) []int64 {
	if r.FullPCPUs {
		return c.wholeFree
	}
	return c.nodeFree
}

// CapacityView returns Capacity of every node (a view of the counters).
func (c *CPUs) CapacityView(r *Request) []int64 {
	if r.FullPCPUs {
		return c.wholeCap
	}
	return c.nodeCap
}

// Unplaced returns 0: every CPU has a NUMA node.
func (c *CPUs) Unplaced(*Request) int64 { return 0 }

// Describe writes "1 CPU", "1,024 CPUs" or, for a FullPCPUs request, "4
// whole cores (8 CPUs)".
func (c *CPUs) Describe(r *Request, units int64) string {
	if r != nil && r.FullPCPUs {
		core := " whole cores ("
		if units == 1 {
			core = " whole core ("
		}
		return groupDigits(units) + core + cpuCount(units*int64(c.tpc)) + ")"
	}
	return cpuCount(units)
}

// cpuCount writes "1 CPU" or "24 CPUs".
func cpuCount(n int64) string {
	if n == 1 {
		return "1 CPU"
	}
	return groupDigits(n) + " CPUs"
}

// FreeCPUs returns a copy of the free allocatable CPUs.
func (c *CPUs) FreeCPUs() numa.CPUSet { return c.free.Clone() }

// Allocatable returns a copy of the allocatable CPUs (reserved ones excluded).
func (c *CPUs) Allocatable() numa.CPUSet { return c.alloc.Clone() }

// Penalty counts the CPUs of the split that cannot come as whole free
// cores: on each node of span, those beyond its whole free cores' threads
// and the remainder below a whole core. O(span).
func (c *CPUs) Penalty(r *Request, span numa.Mask, amounts []int64) int64 {
	if r.FullPCPUs || c.tpc == 1 {
		return 0
	}
	var p int64
	for w := uint64(span); w != 0; w &= w - 1 {
		i := bits.TrailingZeros64(w)
		k := amounts[i]
		if k == 0 {
			continue
		}
		whole := min(k/int64(c.tpc), c.wholeFree[i])
		p += k - whole*int64(c.tpc)
	}
	return p
}

// count marks cpu taken (delta -1) or given back (+1) in the per-core and
// per-node counters; the caller updates the free set.
func (c *CPUs) count(cpu int, delta int8) {
	e := c.cpuTab[cpu]
	k, node := e.core, e.node
	wasWhole := c.wholeFree1(k)
	c.coreTab[k].free ^= 1 << (e.thread & 63)
	c.nodeFree[node] += int64(delta)
	if isWhole := c.wholeFree1(k); isWhole != wasWhole {
		c.wholeFree[node] += int64(delta)
		c.setWhole(k, isWhole)
	}
}

// wholeFree1 reports whether core k can be handed out whole and every
// thread of it is free.
func (c *CPUs) wholeFree1(k int32) bool {
	ce := &c.coreTab[k]
	return ce.whole != 0 && ce.free == ce.whole
}

// freeThreads returns the free allocatable threads of core k.
func (c *CPUs) freeThreads(k int32) int8 { return int8(bits.OnesCount64(c.coreTab[k].free)) }

// threadsOf returns the allocatable threads of core k, ascending.
func (c *CPUs) threadsOf(k int32) []int32 { return c.threads[c.threadOff[k]:c.threadOff[k+1]] }

// Take picks the CPUs: per node, whole free cores first, then partly used
// cores, then a split of a free core.
func (c *CPUs) Take(r *Request, amounts []int64, _ int64, a *Allocation) {
	clear(c.pickBits)
	for node, k := range amounts {
		if k == 0 {
			continue
		}
		want := int(k)
		if r.FullPCPUs {
			want *= c.tpc
		}
		c.pick(node, want, r.FullPCPUs)
	}
	a.CPUs = c.picked()
	c.free.RemoveAll(a.CPUs)
}

// picked returns the CPUs picked since pickBits was cleared, as a new set
// of the words up to the highest CPU picked (cut from a chunk shared with
// other allocations' sets: one allocation of memory per cpuWordChunk
// words).
func (c *CPUs) picked() numa.CPUSet {
	n := len(c.pickBits)
	for n > 0 && c.pickBits[n-1] == 0 {
		n--
	}
	if n == 0 {
		return numa.CPUSet{}
	}
	w := c.words.cut(n, cpuWordChunk)
	copy(w, c.pickBits)
	return numa.CPUSetFromWords(w)
}

// isPicked reports whether cpu is in pickBits.
func (c *CPUs) isPicked(cpu int) bool { return c.pickBits[cpu>>6]&(1<<(uint(cpu)&63)) != 0 }

// pick takes want free CPUs of node into pickBits and the counters (the
// caller removes them from the free set).
func (c *CPUs) pick(node, want int, wholeOnly bool) {
	cores := c.nodeCores[node]
	// Pass 1: whole free cores, the lowest first, found by their bits.
	want -= c.takeWhole(node, want)
	if wholeOnly {
		return
	}
	// Pass 2: cores already partly used (or never whole); pass 3: split a
	// free core.
	for pass := 0; pass < 2 && want > 0; pass++ {
		for _, k := range cores {
			if want == 0 {
				break
			}
			fb := c.coreTab[k].free
			if fb == 0 {
				continue
			}
			untouched := fb == c.coreTab[k].whole // a whole free core
			if (pass == 0) == untouched {
				continue
			}
			ts := c.threadsOf(k)
			n := 0
			for ; fb != 0 && want > 0; fb &= fb - 1 { // the lowest free threads
				cpu := ts[bits.TrailingZeros64(fb)]
				c.pickBits[cpu>>6] |= 1 << (uint(cpu) & 63)
				n++
				want--
			}
			c.coreTab[k].free = fb
			c.nodeFree[node] -= int64(n)
			if untouched { // a whole free core split
				c.wholeFree[node]--
				c.setWhole(k, false)
			}
		}
	}
}

// takeWhole takes whole free cores of node, the lowest first, into
// pickBits and the counters, as many as want CPUs hold, and returns how
// many CPUs it took.
func (c *CPUs) takeWhole(node, want int) int {
	whole := c.wholeWords[c.wholeOff[node]:c.wholeOff[node+1]]
	cores, tpc, pick, taken := c.nodeCores[node], c.tpc, c.pickBits, 0
	for wi := 0; wi < len(whole) && want >= tpc; wi++ {
		w := whole[wi]
		for ; want >= tpc && w != 0; w &= w - 1 {
			k := cores[wi<<6|bits.TrailingZeros64(w)]
			ce := &c.coreTab[k]
			if tpc == 2 { // the common SMT machine, unrolled
				c0, c1 := uint(ce.pair[0]), uint(ce.pair[1])
				pick[c0>>6] |= 1 << (c0 & 63)
				pick[c1>>6] |= 1 << (c1 & 63)
			} else {
				for _, cpu := range c.threadsOf(k) {
					pick[uint(cpu)>>6] |= 1 << (uint(cpu) & 63)
				}
			}
			ce.free = 0
			taken++
			want -= tpc
		}
		whole[wi] = w
	}
	c.nodeFree[node] -= int64(taken * tpc)
	c.wholeFree[node] -= int64(taken)
	return taken * tpc
}

// Give returns a's CPUs, walking them word by word.
func (c *CPUs) Give(a *Allocation) {
	tab, cores, nodeFree := c.cpuTab, c.coreTab, c.nodeFree
	for wi, w := range a.CPUs.Words() {
		base := wi << 6
		for ; w != 0; w &= w - 1 {
			e := tab[base|bits.TrailingZeros64(w)]
			k := e.core
			ce := &cores[k]
			fb := ce.free | 1<<(e.thread&63)
			ce.free = fb
			nodeFree[e.node]++
			if fb == ce.whole { // the core is whole and free again (fb is not 0)
				c.wholeFree[e.node]++
				c.wholeWords[ce.word] |= 1 << (ce.bit & 63)
			}
		}
	}
	c.free.UnionWith(a.CPUs)
}

// Claim takes exactly a's CPUs.
func (c *CPUs) Claim(a *Allocation) error {
	if !a.CPUs.IsSubsetOf(c.alloc) {
		bad := a.CPUs.Difference(c.alloc)
		return fmt.Errorf("%w: CPUs %s are not allocatable on this machine (unknown or reserved)", ErrConflict, bad)
	}
	if !a.CPUs.IsSubsetOf(c.free) {
		return fmt.Errorf("%w: CPUs %s are already allocated", ErrConflict, a.CPUs.Difference(c.free))
	}
	if a.FullPCPUs {
		for cpu := range a.CPUs.All() {
			k, _ := c.m.CPUCore(cpu)
			if !c.full(k) || !c.m.CoreCPUs(k).IsSubsetOf(a.CPUs) {
				return fmt.Errorf("%w: fullPCPUs allocation holds part of core %s", ErrConflict, c.m.CoreCPUs(k))
			}
		}
	}
	for cpu := range a.CPUs.All() {
		c.count(cpu, -1)
	}
	c.free.RemoveAll(a.CPUs)
	return nil
}

// Nodes returns the nodes of a's CPUs, by word operations on each node's
// CPUs.
func (c *CPUs) Nodes(a *Allocation) numa.Mask {
	var m numa.Mask
	if a.CPUs.IsEmpty() {
		return m
	}
	for i := range c.nodeCap {
		if a.CPUs.Intersects(c.m.NodeCPUs(i)) {
			m = m.With(i)
		}
	}
	return m
}

// Clone returns an independent copy.
func (c *CPUs) Clone() Resource {
	d := *c
	d.free = c.free.Clone()
	d.nodeFree = append([]int64(nil), c.nodeFree...)
	d.wholeFree = append([]int64(nil), c.wholeFree...)
	d.wholeWords = slices.Clone(c.wholeWords)
	d.coreTab = slices.Clone(c.coreTab)
	d.pickBits, d.list, d.words = make([]uint64, len(c.pickBits)), nil, carver[uint64]{}
	return &d
}

// coreOf returns cpu's core, or -1 for a CPU the machine does not have.
func (c *CPUs) coreOf(cpu int) int32 {
	if cpu < 0 || cpu >= len(c.cpuTab) {
		return -1
	}
	return c.cpuTab[cpu].core
}
