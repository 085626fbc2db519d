package allocator

import (
	"fmt"
	"math/bits"

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
//
// The free set is the only record of which CPUs are free; the per-node
// counters are recounted from it by word operations after every change.
// Inside a node, cores are slots (ascending core IDs) and the free threads
// are seen as planes of bits by slot, plane t holding each core's t-th
// thread (ascending CPU IDs): a plane is copied from and to the free set run
// by run, a run being slots whose t-th threads are consecutive CPUs (one run
// per plane on machines that number a node's first threads, then their
// siblings, in order), so a node's whole free cores are the AND of its
// planes and taking k of them is k bit operations plus a few copies.
type CPUs struct {
	m         *topology.Machine
	tpc       int
	alloc     numa.CPUSet // allocatable: every CPU minus the reserved ones
	free      numa.CPUSet
	nodeCap   []int64
	nodeFree  []int64
	wholeCap  []int64 // per node: cores with tpc allocatable threads
	wholeFree []int64 // per node: such cores with every thread free
	coreAlloc []int8  // allocatable threads per core
	cpuCore   []int32 // by CPU: its core, -1 for a CPU the machine does not have
	nodeCores [][]int32
	// Node i's slots are nodeCores[i] (its cores, ascending); the layout of
	// its planes is layout[i].
	layout []planeLayout
	// By CPU: its node and the node's CPUs in the CPU's word.
	cpuNode []wordMask
	// The allocatable threads of core k are threads[threadOff[k]:threadOff[k+1]],
	// ascending; its t-th thread (ascending, the thread of plane t) is
	// coreThread[k*tpc+t] (-1 when it has fewer threads).
	threads    []int32
	threadOff  []int32
	coreThread []int32
	// pickBits holds the CPUs being picked (bit cpu%64 of word cpu/64),
	// from the start of a Take (or of a grown Resize), which clears it,
	// to its end; planes
	// holds one node's planes, its whole free cores and the cores taken
	// whole while it picks or recounts (tpc+2 times the widest node's slot
	// words).
	pickBits []uint64
	planes   []uint64
	list     []int
	words    carver[uint64] // the allocations' CPU words (see picked)
}

// cpuRun is a run of a node's plane inside one word of the plane and one
// word of a CPU set: bits mask of the node's planes' word pw (its planes
// laid one after the other) are the bits of CPU word cw rotated left by
// rot (the run's first slot bit minus its first CPU bit, mod 64: the run
// lies inside both words, so the rotation moves exactly its bits into
// place). keep is 0 for a run that is the first of its plane word, which
// sets the word, and all ones for the others, which add to it (see
// loadPlanes).
type cpuRun struct {
	mask, keep uint64
	cw, pw, sw int32 // sw: the slot word of pw (pw is t*nw+sw)
	rot        uint8
}

// planeLayout is how one node's planes are laid out: each plane is nw
// words (one bit per slot); able holds the slot bits of the cores that can
// be handed out whole (nw words); runs are the runs of its planes (plane by
// plane, slot by slot, then one empty run, mask 0, for each word of its
// planes that no run reaches, so that every word is set by a run and
// loadPlanes clears nothing). One struct per node, so that loading a
// node's planes reads its layout from one place.
type planeLayout struct {
	runs []cpuRun
	able []uint64
	nw   int32
}

// wordMask is a node's CPUs in one word of a CPU set: bits mask of node w
// (in cpuNode, whose index says the word).
type wordMask struct {
	w    int32
	mask uint64
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
		coreAlloc: make([]int8, m.NumCores()),
		nodeCores: make([][]int32, n),
	}
	c.alloc = m.CPUs()
	c.alloc.RemoveAll(m.ReservedCPUs())
	c.free = c.alloc.Clone()
	for k := 0; k < m.NumCores(); k++ {
		node := m.CoreNode(k)
		a := m.CoreCPUs(k).IntersectionCount(c.alloc)
		c.coreAlloc[k] = int8(a)
		c.nodeCap[node] += int64(a)
		if c.full(k) {
			c.wholeCap[node]++
		}
		c.nodeCores[node] = append(c.nodeCores[node], int32(k))
	}
	copy(c.nodeFree, c.nodeCap)
	copy(c.wholeFree, c.wholeCap)
	c.cpuCore = make([]int32, m.CPUs().Max()+1)
	for cpu := range c.cpuCore {
		c.cpuCore[cpu] = -1
		if k, ok := m.CPUCore(cpu); ok {
			c.cpuCore[cpu] = int32(k)
		}
	}
	c.threadOff = make([]int32, m.NumCores()+1)
	c.coreThread = make([]int32, m.NumCores()*c.tpc)
	for k := 0; k < m.NumCores(); k++ {
		for t := range c.tpc {
			c.coreThread[k*c.tpc+t] = -1
		}
		for t, cpu := range m.CoreCPUs(k).List() {
			c.coreThread[k*c.tpc+t] = int32(cpu)
		}
		for cpu := range m.CoreCPUs(k).All() {
			if c.alloc.Contains(cpu) {
				c.threads = append(c.threads, int32(cpu))
			}
		}
		c.threadOff[k+1] = int32(len(c.threads))
	}
	c.layout = make([]planeLayout, n)
	widest, slotWords := 0, 0
	for node, cores := range c.nodeCores {
		nw := (len(cores) + 63) / 64
		widest = max(widest, nw)
		slotWords += nw
		c.layout[node].nw = int32(nw)
		// A run: slots [slot, slot+n) whose t-th threads are the CPUs
		// [cpu, cpu+n), in one word of each.
		type span struct{ t, cpu, slot, n int }
		var spans []span
		for t := 0; t < c.tpc; t++ {
			first := len(spans)
			for slot, k := range cores {
				cpus := m.CoreCPUs(int(k)).List()
				if t >= len(cpus) {
					continue
				}
				cpu := cpus[t]
				if r := len(spans) - 1; r >= first && spans[r].cpu+spans[r].n == cpu && spans[r].slot+spans[r].n == slot &&
					spans[r].cpu>>6 == cpu>>6 && spans[r].slot>>6 == slot>>6 {
					spans[r].n++
				} else {
					spans = append(spans, span{t: t, cpu: cpu, slot: slot, n: 1})
				}
			}
		}
		runs, set := make([]cpuRun, len(spans)), make([]bool, c.tpc*nw)
		for i, s := range spans {
			runs[i] = cpuRun{cw: int32(s.cpu >> 6), pw: int32(s.t*nw + s.slot>>6), sw: int32(s.slot >> 6),
				rot: uint8(s.slot-s.cpu) & 63, mask: (1<<uint(s.n) - 1) << uint(s.slot&63), keep: ^uint64(0)}
			if i == 0 || runs[i-1].pw != runs[i].pw {
				runs[i].keep = 0
				set[runs[i].pw] = true
			}
		}
		for pw, ok := range set {
			if !ok { // an empty run sets the word to 0
				runs = append(runs, cpuRun{pw: int32(pw), sw: int32(pw % nw)})
			}
		}
		c.layout[node].runs = runs
	}
	wholeable := make([]uint64, slotWords) // every node's able, one after the other
	for node, cores := range c.nodeCores {
		nw := int(c.layout[node].nw)
		able := wholeable[:nw:nw]
		wholeable = wholeable[nw:]
		for slot, k := range cores {
			if c.full(int(k)) {
				able[slot>>6] |= 1 << (slot & 63)
			}
		}
		c.layout[node].able = able
	}
	nwords := max(m.CPUs().Max(), 0)/64 + 1
	c.cpuNode = make([]wordMask, nwords*64)
	for node := 0; node < n; node++ {
		for wi, w := range m.NodeCPUs(node).Words() {
			for b := w; b != 0; b &= b - 1 {
				c.cpuNode[wi<<6|bits.TrailingZeros64(b)] = wordMask{w: int32(node), mask: w}
			}
		}
	}
	c.pickBits = make([]uint64, nwords)
	c.planes = make([]uint64, (c.tpc+2)*widest)
	return c
}

// loadPlanes fills c.planes with node's planes of free threads (plane t at
// [t*nw, (t+1)*nw)) and its whole free cores (at [tpc*nw, (tpc+1)*nw)), nw
// being its slot words, and returns nw.
func (c *CPUs) loadPlanes(node int) int {
	l := &c.layout[node]
	nw := int(l.nw)
	np := c.tpc * nw // the planes' words, the whole free cores after them
	p := c.planes[:np+nw]
	loadRuns(p, c.free.Words(), l.runs)
	planes, whole := p[:np], p[np:]
	for j, w := range l.able {
		for t := j; t < len(planes); t += nw {
			w &= planes[t]
		}
		whole[j] = w
	}
	return nw
}

// loadRuns sets the plane words p from the CPU words free, run by run (a
// word past free reads as 0).
func loadRuns(p, free []uint64, runs []cpuRun) {
	for i := range runs {
		r := &runs[i]
		var w uint64
		if uint(r.cw) < uint(len(free)) {
			w = free[r.cw]
		}
		pw := &p[r.pw]
		*pw = *pw&r.keep | bits.RotateLeft64(w, int(r.rot))&r.mask
	}
}

// recount sets the counters of every node with a CPU in set from the free
// set.
func (c *CPUs) recount(set numa.CPUSet) {
	var nodes uint64
	for wi, w := range set.Words() {
		for w != 0 && wi < len(c.cpuNode)>>6 {
			x := c.cpuNode[wi<<6|bits.TrailingZeros64(w)]
			nodes |= 1 << (x.w & 63)
			w &^= x.mask | w&-w // a CPU of no node is skipped alone
		}
	}
	for ; nodes != 0; nodes &= nodes - 1 {
		c.recountNode(bits.TrailingZeros64(nodes))
	}
}

// recountNode sets node i's counters from the free set: its free threads
// and its whole free cores are the bits of its planes.
func (c *CPUs) recountNode(i int) {
	nw := c.loadPlanes(i)
	np := c.tpc * nw
	p := c.planes[:np+nw]
	var n, whole int
	for _, w := range p[:np] {
		n += bits.OnesCount64(w)
	}
	for _, w := range p[np:] {
		whole += bits.OnesCount64(w)
	}
	c.nodeFree[i], c.wholeFree[i] = int64(n), int64(whole)
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

// freeThreads returns the free allocatable threads of core k.
func (c *CPUs) freeThreads(k int32) int8 {
	var n int8
	for _, cpu := range c.threadsOf(k) {
		if c.free.Contains(int(cpu)) {
			n++
		}
	}
	return n
}

// threadsOf returns the allocatable threads of core k, ascending.
func (c *CPUs) threadsOf(k int32) []int32 { return c.threads[c.threadOff[k]:c.threadOff[k+1]] }

// Take picks the CPUs: per node, whole free cores first, then partly used
// cores, then a split of a free core.
func (c *CPUs) Take(r *Request, amounts []int64, _ int64, a *Allocation) {
	clear(c.pickBits) // the picks start from none
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
	a.CPUs = c.takePicked()
}

// takePicked takes the CPUs picked (in pickBits, which the caller cleared
// before its picks) out of the free set and returns them as a new set.
func (c *CPUs) takePicked() numa.CPUSet {
	picked := c.picked()
	c.free.RemoveAll(picked)
	return picked
}

// picked returns the CPUs in pickBits as a new set of the words up to the
// highest CPU picked (cut from a chunk shared with other allocations' sets:
// one allocation of memory per cpuWordChunk words).
func (c *CPUs) picked() numa.CPUSet {
	pb := c.pickBits
	n := len(pb)
	for n > 0 && pb[n-1] == 0 {
		n--
	}
	if n == 0 {
		return numa.CPUSet{}
	}
	w := c.words.cut(n, cpuWordChunk)
	copy(w, pb[:n])
	return numa.CPUSetFromWords(w)
}

// pick adds want free CPUs of node to pickBits and takes them off the
// node's counters (the caller takes them out of the free set, see
// takePicked); it reads the free set, so every node is picked from at most
// once between two takePicked.
//
// Pass 1 takes whole free cores, the lowest first; pass 2 every free
// thread of the cores already partly used (or never whole), the lowest
// cores first; pass 3 splits whole free cores; the lowest free threads of a
// core first. The cores a pass takes entirely are bits of a mask by slot,
// whose threads go to pickBits plane by plane, run by run: all of a word's
// partly used cores at once when their threads fit, else those that fit
// one core at a time, the last core of a pass thread by thread.
func (c *CPUs) pick(node, want int, wholeOnly bool) {
	nw, tpc := c.loadPlanes(node), c.tpc
	p := c.planes[:(tpc+2)*nw]
	whole, sel := p[tpc*nw:(tpc+1)*nw], p[(tpc+1)*nw:]
	wantCores := want / tpc
	n, got, split := wantCores, 0, 0
	for j := range sel {
		w := whole[j]
		if n == 0 {
			w = 0
		} else if k := bits.OnesCount64(w); k <= n {
			n -= k
		} else {
			w, n = lowestBits(w, n), 0
		}
		sel[j] = w
		whole[j] &^= w
	}
	got = (wantCores - n) * tpc
	if !wholeOnly {
		for j := 0; j < nw && got < want; j++ {
			var part uint64 // the cores of pass 2
			for t := j; t < tpc*nw; t += nw {
				part |= p[t]
			}
			part &^= sel[j] | whole[j]
			if k := c.threadsIn(p, nw, j, part); got+k <= want {
				sel[j] |= part
				got += k
				continue
			}
			// The lowest cores that fit go whole, the next thread by
			// thread.
			for w := part; got < want; w &= w - 1 {
				s := bits.TrailingZeros64(w)
				if k := c.threadsIn(p, nw, j, 1<<uint(s)); got+k <= want {
					sel[j] |= 1 << uint(s)
					got += k
					continue
				}
				got = c.pickThreads(node, j, s, want, got)
			}
		}
		for j := 0; j < nw && got < want; j++ { // pass 3
			for w := whole[j]; w != 0 && got < want; w &= w - 1 {
				got = c.pickThreads(node, j, bits.TrailingZeros64(w), want, got)
				split++
			}
		}
	}
	runs := c.layout[node].runs
	for i := range runs {
		r := &runs[i]
		c.pickBits[r.cw] |= bits.RotateLeft64(p[r.pw]&sel[r.sw]&r.mask, -int(r.rot))
	}
	c.nodeFree[node] -= int64(got)
	c.wholeFree[node] -= int64(wantCores - n + split)
}

// threadsIn counts the free threads (in the planes p of nw words) of the
// cores of cores, a mask of slot word j.
func (c *CPUs) threadsIn(p []uint64, nw, j int, cores uint64) int {
	k := 0
	for t := j; t < c.tpc*nw; t += nw {
		k += bits.OnesCount64(p[t] & cores)
	}
	return k
}

// pickThreads adds the lowest free threads of the core of slot j*64+s of
// node to pickBits while got is below want (the planes being in c.planes),
// and returns got.
func (c *CPUs) pickThreads(node, j, s, want, got int) int {
	nw, tpc := int(c.layout[node].nw), c.tpc
	k := int(c.nodeCores[node][j<<6|s])
	for t := 0; t < tpc && got < want; t++ {
		if c.planes[t*nw+j]>>uint(s)&1 != 0 {
			cpu := uint(c.coreThread[k*tpc+t])
			c.pickBits[cpu>>6] |= 1 << (cpu & 63)
			got++
		}
	}
	return got
}

// lowestBits returns the n lowest set bits of w (0 < n < OnesCount64(w)):
// w without its highest bits when fewer of them go, else the n lowest
// cleared one by one from a copy; at most 32 steps of one bit.
func lowestBits(w uint64, n int) uint64 {
	if drop := bits.OnesCount64(w) - n; drop < n {
		for ; drop > 0; drop-- {
			w &^= 1 << (63 - bits.LeadingZeros64(w))
		}
		return w
	}
	rest := w
	for ; n > 0; n-- {
		rest &= rest - 1
	}
	return w &^ rest
}

// Give returns a's CPUs to the free set and recounts their nodes.
func (c *CPUs) Give(a *Allocation) {
	c.free.UnionWith(a.CPUs)
	c.recount(a.CPUs)
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
	c.free.RemoveAll(a.CPUs)
	c.recount(a.CPUs)
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
	d.pickBits, d.planes = make([]uint64, len(c.pickBits)), make([]uint64, len(c.planes))
	d.list, d.words = nil, carver[uint64]{}
	return &d
}

// coreOf returns cpu's core, or -1 for a CPU the machine does not have.
func (c *CPUs) coreOf(cpu int) int32 {
	if cpu < 0 || cpu >= len(c.cpuCore) {
		return -1
	}
	return c.cpuCore[cpu]
}
