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
type CPUs struct {
	m         *topology.Machine
	tpc       int
	alloc     numa.CPUSet // allocatable: every CPU minus the reserved ones
	free      numa.CPUSet
	nodeCap   []int32
	nodeFree  []int32
	wholeCap  []int32 // per node: cores with tpc allocatable threads
	wholeFree []int32 // per node: such cores with every thread free
	coreAlloc []int8  // allocatable threads per core
	coreFree  []int8  // free allocatable threads per core
	nodeCores [][]int32
	cpuCore   []int32 // by CPU: its core (-1: none)
	coreNode  []int32 // by core: its node
	picked    numa.CPUSet
	list      []int
}

var (
	_ Resource   = (*CPUs)(nil)
	_ Penalizer  = (*CPUs)(nil)
	_ BulkReader = (*CPUs)(nil)
)

// newCPUs returns the CPU resource of m with every allocatable CPU free.
func newCPUs(m *topology.Machine) *CPUs {
	n := m.NumNodes()
	c := &CPUs{
		m: m, tpc: m.ThreadsPerCore(),
		nodeCap: make([]int32, n), nodeFree: make([]int32, n),
		wholeCap: make([]int32, n), wholeFree: make([]int32, n),
		coreAlloc: make([]int8, m.NumCores()), coreFree: make([]int8, m.NumCores()),
		nodeCores: make([][]int32, n),
	}
	c.alloc = m.CPUs()
	c.alloc.RemoveAll(m.ReservedCPUs())
	c.free = c.alloc.Clone()
	for k := 0; k < m.NumCores(); k++ {
		node := m.CoreNode(k)
		cpus := m.CoreCPUs(k)
		a := cpus.IntersectionCount(c.alloc)
		c.coreAlloc[k], c.coreFree[k] = int8(a), int8(a)
		c.nodeCap[node] += int32(a)
		if c.full(k) {
			c.wholeCap[node]++
		}
		c.nodeCores[node] = append(c.nodeCores[node], int32(k))
	}
	copy(c.nodeFree, c.nodeCap)
	copy(c.wholeFree, c.wholeCap)
	c.cpuCore = make([]int32, m.CPUs().Max()+1)
	for cpu := range c.cpuCore {
		k, ok := m.CPUCore(cpu)
		if !ok {
			k = -1
		}
		c.cpuCore[cpu] = int32(k)
	}
	c.coreNode = make([]int32, m.NumCores())
	for k := range c.coreNode {
		c.coreNode[k] = int32(m.CoreNode(k))
	}
	// Size the pick set for the whole machine so picking never grows it.
	c.picked.Add(max(m.CPUs().Max(), 0))
	c.picked.Clear()
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

// FreeInto writes Free of every node into dst.
func (c *CPUs) FreeInto(r *Request, dst []int64) {
	src := c.nodeFree
	if r.FullPCPUs {
		src = c.wholeFree
	}
	for i, v := range src {
		dst[i] = int64(v)
	}
}

// CapacityInto writes Capacity of every node into dst.
func (c *CPUs) CapacityInto(r *Request, dst []int64) {
	src := c.nodeCap
	if r.FullPCPUs {
		src = c.wholeCap
	}
	for i, v := range src {
		dst[i] = int64(v)
	}
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
		whole := min(k/int64(c.tpc), int64(c.wholeFree[i]))
		p += k - whole*int64(c.tpc)
	}
	return p
}

// count marks cpu taken (delta -1) or given back (+1) in the per-core and
// per-node counters; the caller updates the free set.
func (c *CPUs) count(cpu int, delta int8) {
	k := c.cpuCore[cpu]
	node := c.coreNode[k]
	wasWhole := c.coreFree[k] == c.coreAlloc[k] && c.full(int(k))
	c.coreFree[k] += delta
	c.nodeFree[node] += int32(delta)
	if isWhole := c.coreFree[k] == c.coreAlloc[k] && c.full(int(k)); isWhole != wasWhole {
		c.wholeFree[node] += int32(delta)
	}
}

// Take picks the CPUs: per node, whole free cores first, then partly used
// cores, then a split of a free core.
func (c *CPUs) Take(r *Request, amounts []int64, _ int64, a *Allocation) {
	c.picked.Clear()
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
	c.free.RemoveAll(c.picked)
	a.CPUs = c.picked.Clone()
}

// pick takes want free CPUs of node into c.picked.
func (c *CPUs) pick(node, want int, wholeOnly bool) {
	cores := c.nodeCores[node]
	// Pass 1: whole free cores, a word operation each.
	for _, k := range cores {
		if want < c.tpc {
			break
		}
		if c.full(int(k)) && c.coreFree[k] == c.coreAlloc[k] {
			c.picked.UnionWith(c.m.CoreCPUs(int(k)))
			c.coreFree[k] = 0
			c.nodeFree[node] -= int32(c.tpc)
			c.wholeFree[node]--
			want -= c.tpc
		}
	}
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
			f := int(c.coreFree[k])
			if f == 0 {
				continue
			}
			untouched := f == int(c.coreAlloc[k]) && c.full(int(k))
			if (pass == 0) == untouched {
				continue
			}
			n := min(f, want)
			for cpu := range c.m.CoreCPUs(int(k)).All() {
				if n == 0 {
					break
				}
				if c.free.Contains(cpu) && !c.picked.Contains(cpu) {
					c.count(cpu, -1)
					c.picked.Add(cpu)
					n--
					want--
				}
			}
		}
	}
}

// Give returns a's CPUs.
func (c *CPUs) Give(a *Allocation) {
	c.list = a.CPUs.AppendTo(c.list[:0])
	for _, cpu := range c.list {
		c.count(cpu, 1)
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
	d.nodeFree = append([]int32(nil), c.nodeFree...)
	d.wholeFree = append([]int32(nil), c.wholeFree...)
	d.coreFree = append([]int8(nil), c.coreFree...)
	d.picked, d.list = c.picked.Clone(), nil
	d.picked.Add(max(c.m.CPUs().Max(), 0))
	d.picked.Clear()
	return &d
}

// coreOf returns cpu's core, or -1 for a CPU the machine does not have.
func (c *CPUs) coreOf(cpu int) int32 {
	if cpu < 0 || cpu >= len(c.cpuCore) {
		return -1
	}
	return c.cpuCore[cpu]
}
