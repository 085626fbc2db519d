package allocator

import (
	"fmt"
	"math/bits"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// Resize grows or shrinks the CPUs of the live allocation id to cpus in
// place, under its policy's span rule, and returns the allocation as it now
// is. Growing keeps every CPU the allocation holds and adds free ones;
// shrinking gives back CPUs and keeps the rest; the GPUs, devices and
// memory do not move. The result must satisfy the allocation's policy as a
// fresh request of the new size would, with the allocation's own resources
// counted as free and the exclusivity rule judged without it:
// SingleNUMANode stays on its node; Restricted ends on exactly width_cap
// nodes (inside one NUMA set when the new size fits in one); BestEffort on
// exactly width_free nodes; None anywhere. The exclusivity rule binds only
// what the resize changes: the nodes it adds to the span, or all of them
// when the span goes from one node to several or back (a node the
// allocation keeps in a span of the same kind is never held against it).
// Devices the allocation holds count as its own even when they have been
// marked unhealthy since: they stay with it, count in width_cap, and stay
// unhealthy. A resize to the current size changes nothing and returns the
// allocation as it is. When that is impossible in place
// (growing would need a node the allocation cannot reach, shrinking would
// leave it wider than the rule allows) the error says why and the
// allocation is left as it was. An ID that is not live returns
// [ErrUnknownID].
func (s *State) Resize(id string, cpus int) (Allocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.ids[id]
	if !ok {
		return Allocation{}, fmt.Errorf("%w: %q", ErrUnknownID, id)
	}
	old := s.recs[idx].Clone()
	r := old.Request()
	r.CPUs = cpus
	if err := r.validate(s.m.ThreadsPerCore()); err != nil {
		return Allocation{}, err
	}
	n := old.CPUs.Size()
	if cpus == n {
		return s.recs[idx], nil
	}
	// Work on a copy without the allocation, so that a refusal changes
	// nothing and the decision sees its resources as free. Devices it holds
	// that have failed since count as its own for the decision (they do not
	// move), and are marked unhealthy again before the copy is adopted.
	t := s.cloneLocked()
	sick := t.healHeld(&old)
	t.releaseLocked(id)
	sc := t.getScratch()
	defer t.putScratch(sc)
	// The widths without the exclusivity rule, which binds below only what
	// the resize changes.
	free := r
	free.Exclusive = policy.Preferred
	p, err := t.decide(&free, sc, false)
	if err != nil {
		return Allocation{}, err
	}
	refuse := func(why error, format string, args ...any) (Allocation, error) {
		return Allocation{}, t.refuse(&r, p, why, nil, nil,
			fmt.Sprintf("cannot resize in place to %d CPUs: ", cpus)+fmt.Sprintf(format, args...))
	}
	// byRule ends a refusal where only the exclusivity rule stands in the way.
	const byRule = " (singleNUMANodeExclusive: Required binds the NUMA nodes a resize adds, and all of them when the span goes from one node to several or back)"
	hold := old.Span // the nodes the allocation uses now
	fixed := t.nonCPUNodes(&old)
	// Whether the span must be allowed by the exclusivity rule: always when
	// the rule binds hard; for BestEffort under Required, whenever some span
	// of the demanded width is allowed (as for a fresh request). The rule
	// binds what the resize changes: the nodes it adds to the span, or every
	// node when the span goes from one node to several or back. Nodes the
	// allocation keeps in a span of the same kind stay allowed, whatever
	// other allocations made of them since.
	all := s.m.AllNodes()
	allowed := policy.AllowedPool(p.width, all, t.singleMask, t.sharedMask)
	if (p.width > 1) == (hold.Count() > 1) {
		allowed |= hold
	}
	mustAllow := policy.Binds(r.Policy, r.Exclusive) &&
		(r.Policy != policy.BestEffort || t.anyCover(sc, t.allPool[:], allowed, p.width))
	if !mustAllow {
		allowed = all
	}
	var span numa.Mask
	if cpus > n {
		span, ok = t.growSpan(&r, sc, p, hold, allowed)
		if !ok {
			if _, free := t.growSpan(&r, sc, p, hold, all); free && allowed != all {
				return refuse(ErrExclusivity, "the sets of %d NUMA nodes that contain its nodes %v and have %d free CPUs all use nodes the rule forbids"+byRule, p.width, s.m.IDsOf(hold), cpus-n)
			}
			return refuse(ErrNoNUMAFit, "no set of %d NUMA nodes that contains its nodes %v has %d free CPUs", p.width, s.m.IDsOf(hold), cpus-n)
		}
	} else {
		span, ok = t.shrinkSpan(&r, p, &old, fixed, allowed)
		if !ok {
			if _, free := t.shrinkSpan(&r, p, &old, fixed, all); free && allowed != all {
				return refuse(ErrExclusivity, "every %d of its NUMA nodes %v that hold its GPUs, memory and %d of its CPUs use a node the rule forbids"+byRule, max(p.width, 1), s.m.IDsOf(hold), cpus)
			}
			return refuse(ErrNoNUMAFit, "its CPUs, GPUs and memory cannot fit %d of its NUMA nodes %v", max(p.width, 1), s.m.IDsOf(hold))
		}
	}
	// Claim the allocation back exactly, then add or give back CPUs.
	if err := t.claim(old.Clone()); err != nil {
		return Allocation{}, fmt.Errorf("resize %q: %w", id, err) // cannot happen: t is s without it
	}
	tIdx := t.ids[id]
	a := &t.recs[tIdx]
	t.count(a.Span, -1)
	if cpus > n {
		t.growCPUs(a, &r, span, cpus-n)
	} else {
		t.shrinkCPUs(a, &r, span, n-cpus)
	}
	a.Span = fixed
	for _, res := range t.res {
		a.Span |= res.Nodes(a)
	}
	t.count(a.Span, 1)
	t.sicken(sick)
	s.adopt(t)
	return s.recs[s.ids[id]], nil
}

// heldDevice is one device of a class.
type heldDevice struct {
	d *Devices
	i int32
}

// healHeld marks the unhealthy devices a holds healthy and returns them.
func (s *State) healHeld(a *Allocation) []heldDevice {
	var sick []heldDevice
	for _, res := range s.res {
		d, ok := res.(*Devices)
		if !ok {
			continue
		}
		_ = d.forEach(a, func(i int32) {
			if !d.healthy[i] {
				d.setHealthy(i, true)
				sick = append(sick, heldDevice{d, i})
			}
		})
	}
	return sick
}

// sicken marks the devices healHeld returned unhealthy again.
func (s *State) sicken(sick []heldDevice) {
	for _, h := range sick {
		h.d.setHealthy(h.i, false)
	}
}

// nonCPUNodes returns the nodes of a's resources other than CPUs.
func (s *State) nonCPUNodes(a *Allocation) numa.Mask {
	var m numa.Mask
	for _, res := range s.res {
		if res != Resource(s.cpu) {
			m |= res.Nodes(a)
		}
	}
	return m
}

// growSpan finds the span of a grown allocation: a superset of hold of the
// width the policy demands (any width for None), inside allowed, whose free
// resources (the allocation's own included) cover r. The cover in sc holds
// r's demands and the free amounts.
func (s *State) growSpan(r *Request, sc *scratch, p plan, hold, allowed numa.Mask) (numa.Mask, bool) {
	c := &sc.c
	if r.Policy == policy.None || p.width == 0 {
		if c.covers(hold) {
			return hold, true
		}
		w, m := s.reducedCover(sc, hold, s.m.AllNodes(), -1)
		return hold | m, w >= 0
	}
	if hold.Count() > p.width {
		return 0, false
	}
	pools := s.allPool[:]
	if r.Policy == policy.Restricted && p.inSet {
		pools = s.setMasks
	}
	for _, pool := range pools {
		pool &= allowed
		if !hold.IsSubsetOf(pool) {
			continue
		}
		if w, m := s.reducedCover(sc, hold, pool, p.width-hold.Count()); w >= 0 {
			return hold | m, true
		}
	}
	return 0, false
}

// reducedCover finds nodes of pool outside hold that, with hold, cover the
// demands: exactly w of them, or the fewest when w < 0. It returns the
// width found (-1: none) and the nodes.
func (s *State) reducedCover(sc *scratch, hold, pool numa.Mask, w int) (int, numa.Mask) {
	c := &sc.c
	saved := *c
	defer func() { *c = saved }()
	sums := c.sums(hold)
	for r := 0; r < c.k; r++ {
		c.need[r] = max(0, c.need[r]-sums[r])
		for wd := uint64(pool &^ hold); wd != 0; wd &= wd - 1 {
			i := bits.TrailingZeros64(wd)
			c.val[i][r] = min(c.val[i][r], c.need[r])
		}
	}
	c.gen++
	rest := pool &^ hold
	if c.covers(0) {
		if w <= 0 {
			return 0, 0
		}
	}
	if w < 0 {
		got, m := c.minCover(rest, &sc.d)
		return got, m
	}
	if w == 0 {
		return -1, 0
	}
	m, ok := c.exists(rest, w, &sc.d)
	if !ok {
		return -1, 0
	}
	return w, m
}

// shrinkSpan finds the span of a shrunk allocation: a subset of its nodes
// inside allowed that holds its non-CPU resources, of the width the policy
// demands (any for None), where the allocation's own CPUs number at least
// r.CPUs (whole cores with FullPCPUs).
func (s *State) shrinkSpan(r *Request, p plan, a *Allocation, fixed, allowed numa.Mask) (numa.Mask, bool) {
	tpc := s.m.ThreadsPerCore()
	held := func(m numa.Mask) int {
		n := 0
		for i := range m.All() {
			if r.FullPCPUs {
				n += s.wholeCoresIn(a, i) * tpc
			} else {
				n += a.CPUs.IntersectionCount(s.m.NodeCPUs(i))
			}
		}
		return n
	}
	hold := a.Span
	if r.Policy == policy.None || p.width == 0 {
		// Any span: keep the nodes holding other resources and the fewest
		// more, preferring the nodes with the most of its CPUs.
		return s.fewestCPUNodes(a, hold, fixed, r.CPUs, held), true
	}
	if fixed.Count() > p.width {
		return 0, false
	}
	for sub := range (hold &^ fixed).Subsets(p.width - fixed.Count()) {
		m := fixed | sub
		if held(m) < r.CPUs || !m.IsSubsetOf(allowed) {
			continue
		}
		if r.Policy == policy.Restricted && p.inSet && s.m.SetsCrossed(m) > 1 {
			continue
		}
		return m, true
	}
	return 0, false
}

// fewestCPUNodes returns fixed plus the fewest nodes of hold, those with
// the most of a's CPUs first, whose CPUs of a reach want.
func (s *State) fewestCPUNodes(a *Allocation, hold, fixed numa.Mask, want int, held func(numa.Mask) int) numa.Mask {
	m := fixed
	for held(m) < want {
		best, bestN := -1, -1
		for i := range (hold &^ m).All() {
			if n := held(numa.MaskOf(i)); n > bestN {
				best, bestN = i, n
			}
		}
		if best < 0 {
			break
		}
		m = m.With(best)
	}
	return m
}

// wholeCoresIn counts the cores of node i that a holds whole.
func (s *State) wholeCoresIn(a *Allocation, i int) int {
	n := 0
	for _, k := range s.cpu.nodeCores[i] {
		if s.cpu.full(int(k)) && s.m.CoreCPUs(int(k)).IsSubsetOf(a.CPUs) {
			n++
		}
	}
	return n
}

// growCPUs adds extra free CPUs to a on span: at least one to each node of
// the span a does not use yet, the rest in proportion to a's GPUs per node
// (else to the nodes with the most free CPUs), whole cores first.
func (s *State) growCPUs(a *Allocation, r *Request, span numa.Mask, extra int) {
	unit := 1
	if r.FullPCPUs {
		unit = s.m.ThreadsPerCore()
	}
	var want [numa.MaxNodes]int64
	var free [numa.MaxNodes]int64
	var gpus [numa.MaxNodes]int64
	s.cpu.FreeInto(r, free[:s.n])
	for _, g := range a.GPUs {
		if gpu, ok := s.m.GPU(g); ok {
			if i, ok := s.m.NodeIndex(gpu.NUMANode); ok {
				gpus[i]++
			}
		}
	}
	left := int64(extra / unit)
	for i := range (span &^ a.Span).All() {
		if left > 0 && free[i] > 0 {
			want[i], left = 1, left-1
		}
	}
	var order []int8
	for i := range span.All() {
		order = append(order, int8(i))
	}
	var avail [numa.MaxNodes]int64
	for _, i := range order {
		avail[i] = free[i] - want[i]
	}
	weights := gpus
	var total int64
	for _, i := range order {
		total += weights[i]
	}
	if total == 0 {
		weights = avail
	}
	var add [numa.MaxNodes]int64
	proportional(left, &weights, &avail, order, &add)
	s.cpu.picked.Clear()
	for _, i := range order {
		if k := want[i] + add[i]; k > 0 {
			s.cpu.pick(int(i), int(k)*unit, r.FullPCPUs)
		}
	}
	s.cpu.free.RemoveAll(s.cpu.picked)
	a.CPUs = a.CPUs.Union(s.cpu.picked)
}

// shrinkCPUs gives back drop of a's CPUs: every CPU outside span first,
// then, on the span, the CPUs of cores a holds in part, then whole cores,
// from the nodes with the most CPUs per GPU of a, highest IDs first.
func (s *State) shrinkCPUs(a *Allocation, r *Request, span numa.Mask, drop int) {
	var give numa.CPUSet
	for cpu := range a.CPUs.All() {
		if i, ok := s.m.CPUNode(cpu); ok && !span.Contains(i) {
			give.Add(cpu)
		}
	}
	keep := a.CPUs.Difference(give)
	drop -= give.Size()
	tpc := s.m.ThreadsPerCore()
	for drop > 0 {
		// The node with the most kept CPUs per GPU of a (plus one).
		best, bestScore := -1, -1.0
		for i := range span.All() {
			n := keep.IntersectionCount(s.m.NodeCPUs(i))
			if n == 0 {
				continue
			}
			g := 0
			for _, id := range a.GPUs {
				if gpu, ok := s.m.GPU(id); ok {
					if j, ok := s.m.NodeIndex(gpu.NUMANode); ok && j == i {
						g++
					}
				}
			}
			if score := float64(n) / float64(g+1); score > bestScore {
				best, bestScore = i, score
			}
		}
		if best < 0 {
			break
		}
		// In that node: a CPU of a core held in part, else a whole core
		// (its highest thread, or all of it with FullPCPUs).
		cores := s.cpu.nodeCores[best]
		picked := -1
		for pass := 0; pass < 2 && picked < 0; pass++ {
			for j := len(cores) - 1; j >= 0 && picked < 0; j-- {
				k := int(cores[j])
				mine := s.m.CoreCPUs(k).Intersection(keep)
				if mine.IsEmpty() {
					continue
				}
				whole := mine.Size() == int(s.cpu.coreAlloc[k]) && s.cpu.full(k)
				if (pass == 0) == whole && !r.FullPCPUs {
					continue
				}
				if r.FullPCPUs {
					for cpu := range mine.All() {
						give.Add(cpu)
						keep.Remove(cpu)
					}
					drop -= tpc
					picked = k
				} else {
					cpu := mine.Max()
					give.Add(cpu)
					keep.Remove(cpu)
					drop--
					picked = k
				}
			}
		}
		if picked < 0 {
			break
		}
	}
	s.cpu.Give(&Allocation{CPUs: give})
	a.CPUs = keep
}
