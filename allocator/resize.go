package allocator

import (
	"errors"
	"fmt"

	"github.com/numaplace/numaplace/allocator/internal/cover"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// Resize grows or shrinks the CPUs of the live allocation id to cpus in
// place, under its policy's span rule, and returns the allocation as it now
// is. Growing keeps every CPU the allocation holds and adds free ones;
// shrinking gives back CPUs and keeps the rest; the GPUs, devices, memory
// and holdings of kinds of the caller's own do not move. The result must satisfy the allocation's policy as a
// fresh request of the new size would, with the allocation's own resources
// counted as free and the exclusivity rule judged without it:
// SingleNUMANode stays on its node; Restricted ends on exactly width_cap
// nodes (inside one NUMA set when the new size fits in one); BestEffort on
// exactly width_free nodes (the narrowest the bounded search knows where
// its bound cuts it, see [ErrSearchLimit]); None anywhere. The exclusivity rule binds only
// what the resize changes: the nodes it adds to the span, or all of them
// when the span goes from one node to several or back (a node the
// allocation keeps in a span of the same kind is never held against it).
// Devices the allocation holds count as its own even when they have been
// marked unhealthy since: they stay with it, count in width_cap, and stay
// unhealthy. Growing adds, to its nodes, those with the most free CPUs;
// shrinking keeps the nodes of its GPUs, devices and memory and those with
// the most of its CPUs, and gives back the CPUs of cores it holds in part
// before whole cores. A resize to the current size
// changes nothing and returns the allocation as it is. When that is
// impossible in place
// (growing would need a node the allocation cannot reach, shrinking would
// leave it wider than the rule allows) the error says why and the
// allocation is left as it was. An ID that is not live returns
// [ErrUnknownID]; a nil state is an error.
//
// Bound: the decision of the widths (Fit's bound) and O(n log n) for n
// NUMA nodes to find the span, then O(CPUs moved · span),
// under the write lock. A refusal is exact (or, for Restricted,
// ErrSearchLimit when width_cap could not be decided within the search
// bound) and names the allocation's own nodes by ID.
func (s *State) Resize(id string, cpus int) (Allocation, error) {
	if s == nil {
		return Allocation{}, errNilState
	}
	s.lockWrite()
	defer s.mu.Unlock()
	idx, ok := s.ids.get(id)
	if !ok {
		return Allocation{}, fmt.Errorf("%w: %s", ErrUnknownID, quote.Short(id))
	}
	a := &s.recs[idx]
	r := a.Request()
	r.CPUs = cpus
	if err := r.validate(s.m.ThreadsPerCore()); err != nil {
		return Allocation{}, err
	}
	if cpus == a.CPUs.Size() {
		return *a, nil
	}
	// Devices it holds that have failed since count as its own for the
	// decision (they do not move): healthy until Resize returns.
	sick := s.healHeld(a)
	defer s.sicken(sick)
	rz := resizer{s: s, a: a, r: &r}
	span, err := rz.plan()
	if err != nil {
		return Allocation{}, err
	}
	s.count(a.DenseSpan, -1)
	fixed := s.nonCPUNodes(a)
	if rz.grow {
		s.growCPUs(a, &r, span, cpus-a.CPUs.Size())
	} else {
		s.shrinkCPUs(a, &r, span, fixed, a.CPUs.Size()-cpus)
	}
	a.DenseSpan = fixed | s.cpu.Nodes(a)
	s.count(a.DenseSpan, 1)
	return *a, nil
}

// resizer is the decision of one Resize: whether the allocation a can take
// r's CPUs in place, and on which span.
//
// Bound: one decision of the engine for the widths (that of Fit, see
// [State.Fit]) and, for the span, O(n log n) work for n NUMA nodes: with
// the allocation's GPUs, devices and memory fixed, only CPUs are left to
// place, a single kind, for which taking the nodes with the most CPUs
// (free ones when growing, its own when shrinking) is exact. No subset of
// its nodes is ever enumerated.
type resizer struct {
	s    *State
	a    *Allocation
	r    *Request
	grow bool
	p    plan
	// unit is the CPUs per unit (threads per core with FullPCPUs, else 1);
	// own and free are a's units and the free units per node (dense).
	unit      int
	own, free [numa.MaxNodes]int64
	want      int64 // units to add (grow) or to keep (shrink)
}

// plan returns the span of the resized allocation, or the refusal.
func (rz *resizer) plan() (numa.Mask, error) {
	s, a, r := rz.s, rz.a, rz.r
	rz.grow = r.CPUs > a.CPUs.Size()
	rz.unit = 1
	if r.FullPCPUs {
		rz.unit = s.m.ThreadsPerCore()
	}
	for i := range a.DenseSpan.All() {
		if r.FullPCPUs {
			rz.own[i] = int64(s.wholeCoresIn(a, i))
		} else {
			rz.own[i] = int64(a.CPUs.IntersectionCount(s.m.NodeCPUs(i)))
		}
	}
	copy(rz.free[:s.n], s.cpu.FreeView(r))
	if rz.grow {
		rz.want = int64((r.CPUs - a.CPUs.Size()) / rz.unit)
	} else {
		rz.want = int64(r.CPUs / rz.unit)
	}

	if r.Policy == policy.None {
		// Any span and no exclusivity: only the CPUs to add must be free.
		return rz.planNone()
	}
	// The widths, as for a fresh request of the new size with a's own
	// resources counted as free (a view of the state without a), and
	// without the exclusivity rule, which binds below only what the resize
	// changes.
	free := *r
	free.Exclusive = policy.Preferred
	view := s
	var without []*Allocation
	if s.returns {
		without = []*Allocation{a}
	} else {
		// A resource of the caller's own cannot say what is free without
		// a: decide on a copy of the state without it.
		view = s.cloneLocked()
		view.releaseLocked(a.ID)
	}
	sr := view.searcher(&free, without)
	defer sr.done()
	if err := sr.decide(false); err != nil {
		return 0, rz.failedDecision(err)
	}
	p := sr.plan
	rz.p = p
	sr.nodeTypes()
	single, shared := sr.single, sr.shared
	// Whether the span must be allowed by the exclusivity rule: always when
	// the rule binds hard; for BestEffort under Required, whenever some span
	// of the demanded width is allowed (as for a fresh request). The rule
	// binds what the resize changes: the nodes it adds to the span, or every
	// node when the span goes from one node to several or back. Nodes the
	// allocation keeps in a span of the same kind stay allowed, whatever
	// other allocations made of them since.
	all := s.m.AllNodes()
	hold := a.DenseSpan
	allowed := policy.AllowedPool(p.width, all, single, shared)
	if (p.width > 1) == (hold.Count() > 1) {
		allowed |= hold
	}
	if !policy.Binds(r.Policy, r.Exclusive) ||
		(r.Policy == policy.BestEffort && !sr.anyCover(s.allPool[:], allowed, p.width)) {
		allowed = all
	}
	if sr.cut() {
		return 0, rz.refuse(ErrSearchLimit, false, "%s (it holds %s)", searchLimitText, rz.nodesText(rz.a.DenseSpan))
	}
	if rz.grow {
		return rz.planGrow(allowed)
	}
	return rz.planShrink(allowed)
}

// planNone finds the span of a resized None allocation: no width, no
// exclusivity, O(n log n).
func (rz *resizer) planNone() (numa.Mask, error) {
	s, all := rz.s, rz.s.m.AllNodes()
	if !rz.grow {
		return rz.planShrink(all)
	}
	var free, capa int64
	for i := 0; i < s.n; i++ {
		free += rz.free[i]
		capa += s.cpu.Capacity(rz.r, i)
	}
	if free < rz.want {
		own := rz.ownTotal()
		return 0, rz.refuse(ErrInsufficient, capa < own+rz.want, "the machine has %s free besides the %s it holds on %s (%s in all): %s short",
			rz.cpuText(free), rz.cpuText(own), rz.nodesText(rz.a.DenseSpan), rz.cpuText(capa), rz.cpuText(rz.want-free))
	}
	return rz.planGrow(all)
}

// byRule ends a refusal where only the exclusivity rule stands in the way.
const byRule = " (singleNUMANodeExclusive: Required binds the NUMA nodes a resize adds, and all of them when the span goes from one node to several or back)"

// failedDecision turns a refusal of the widths' decision into one about
// the allocation: no span of the demanded width anywhere has the free
// resources, so none that keeps its nodes has.
func (rz *resizer) failedDecision(err error) error {
	var pe *PlacementError
	if !errors.As(err, &pe) {
		return err
	}
	rz.p = plan{width: pe.Width, widthCap: pe.WidthCap, widthFree: pe.WidthFree, inSet: pe.InSet}
	switch {
	case errors.Is(err, ErrSearchLimit):
		return rz.refuse(ErrSearchLimit, false, "%s (it holds %s)", searchLimitText, rz.nodesText(rz.a.DenseSpan))
	case errors.Is(err, ErrInsufficient):
		return rz.refuse(ErrInsufficient, pe.Never, "the machine has %s free counting the %s it holds on %s",
			rz.cpuText(pe.haveOf("cpu")), rz.s.cpu.Describe(rz.r, rz.ownTotal()), rz.nodesText(rz.a.DenseSpan))
	}
	// ErrNoNUMAFit: no span of the width anywhere has the free resources,
	// so none in place has; the in-place search says why in its terms.
	all := rz.s.m.AllNodes()
	var perr error
	if rz.grow {
		_, perr = rz.planGrow(all)
	} else {
		_, perr = rz.planShrink(all)
	}
	if perr == nil {
		return err // cannot happen: an in-place span is a span of the width
	}
	perr.(*PlacementError).Never = perr.(*PlacementError).Never || pe.Never
	return perr
}

// planGrow finds the span of the grown allocation, or the refusal.
func (rz *resizer) planGrow(allowed numa.Mask) (numa.Mask, error) {
	hold, all := rz.a.DenseSpan, rz.s.m.AllNodes()
	span, ok, most := rz.growSpan(&rz.free, allowed)
	if ok {
		return span, nil
	}
	if rz.r.Policy != policy.None && hold.Count() > rz.p.width {
		return 0, rz.refuse(ErrNoNUMAFit, rz.neverGrow(), "it spans the %d NUMA nodes %s, more than the %s %s allows at that size (%s), and growing keeps every node it has",
			hold.Count(), idList(rz.s.m.IDsOf(hold)), nodeCount(rz.p.width), rz.r.Policy, rz.widthText())
	}
	if allowed != all {
		if _, free, _ := rz.growSpan(&rz.free, all); free {
			return 0, rz.refuse(ErrExclusivity, false, "every %s that contains its %s and has %s free besides its own uses a node the rule forbids"+byRule,
				rz.setText(), rz.nodesText(hold), rz.cpuText(rz.want))
		}
	}
	if rz.p.width == hold.Count() {
		verb := "have"
		if hold.Count() == 1 {
			verb = "has"
		}
		return 0, rz.refuse(ErrNoNUMAFit, rz.neverGrow(), "%s (%s) keeps it on its %s, which %s %s free besides the %s it holds: %s short",
			rz.r.Policy, rz.widthText(), rz.nodesText(hold), verb, rz.cpuText(most), rz.cpuText(rz.ownTotal()), rz.cpuText(rz.want-most))
	}
	return 0, rz.refuse(ErrNoNUMAFit, rz.neverGrow(), "no %s that contains its %s has %s free besides its own (at most %s)",
		rz.setText(), rz.nodesText(hold), rz.cpuText(rz.want), rz.cpuText(most))
}

// neverGrow reports whether the grow could not succeed in place even with
// every other allocation released: for SingleNUMANode and Restricted,
// whose widths do not depend on what is free, judged on the capacity.
func (rz *resizer) neverGrow() bool {
	if rz.r.Policy != policy.SingleNUMANode && rz.r.Policy != policy.Restricted {
		return false
	}
	var room [numa.MaxNodes]int64
	for i := 0; i < rz.s.n; i++ {
		room[i] = rz.s.cpu.Capacity(rz.r, i) - rz.own[i]
	}
	_, ok, _ := rz.growSpan(&room, rz.s.m.AllNodes())
	return !ok
}

// growSpan finds a superset of a's span of the demanded width (any width
// for None) inside allowed whose units in free (besides a's own) cover
// rz.want, with at least one unit on every node it adds. It takes, inside
// each candidate pool, the nodes with the most free units (the lowest
// index on a tie): with one kind left to place that is exact. It returns
// the span, whether one exists, and the most units any candidate offered.
func (rz *resizer) growSpan(free *[numa.MaxNodes]int64, allowed numa.Mask) (numa.Mask, bool, int64) {
	s, hold := rz.s, rz.a.DenseSpan
	var have int64
	for i := range hold.All() {
		have += free[i]
	}
	if rz.r.Policy == policy.None || rz.p.width == 0 {
		// Any span: its nodes and the fewest more, the freest first.
		m, got := hold, have
		var order [numa.MaxNodes]int8
		for _, i := range byValue(order[:0], free, s.m.AllNodes()&^hold) {
			if got >= rz.want {
				break
			}
			if free[i] > 0 {
				m, got = m.With(int(i)), got+free[i]
			}
		}
		return m, got >= rz.want, got
	}
	k := rz.p.width - hold.Count()
	if k < 0 {
		return 0, false, have
	}
	pools := s.allPool[:]
	if rz.r.Policy == policy.Restricted && rz.p.inSet {
		pools = s.setMasks
	}
	most := int64(-1)
	for _, pool := range pools {
		pool &= allowed
		if !hold.IsSubsetOf(pool) {
			continue
		}
		var order [numa.MaxNodes]int8
		top := byValue(order[:0], free, pool&^hold)
		got, m := have, hold
		for _, i := range top[:min(k, len(top))] {
			if free[i] > 0 {
				got, m = got+free[i], m.With(int(i))
			}
		}
		most = max(most, got)
		if m.Count() == rz.p.width && int64(k) <= rz.want && got >= rz.want {
			return m, true, got
		}
	}
	return 0, false, max(most, 0)
}

// planShrink finds the span of the shrunk allocation, or the refusal.
func (rz *resizer) planShrink(allowed numa.Mask) (numa.Mask, error) {
	s, hold, all := rz.s, rz.a.DenseSpan, rz.s.m.AllNodes()
	fixed := s.nonCPUNodes(rz.a)
	span, ok, most := rz.shrinkSpan(fixed, allowed)
	if ok {
		return span, nil
	}
	if fixed.Count() > max(rz.p.width, 1) {
		return 0, rz.refuse(ErrNoNUMAFit, false, "its GPUs, devices and memory lie on %s, more than the %s %s allows at that size (%s)",
			rz.nodesText(fixed), nodeCount(max(rz.p.width, 1)), rz.r.Policy, rz.widthText())
	}
	if allowed != all {
		if _, free, _ := rz.shrinkSpan(fixed, all); free {
			return 0, rz.refuse(ErrExclusivity, false, "every %s of its %s that keeps %s of its own with its GPUs, devices and memory uses a node the rule forbids"+byRule,
				rz.setText(), rz.nodesText(hold), rz.cpuText(rz.want))
		}
	}
	return 0, rz.refuse(ErrNoNUMAFit, false, "no %s of its %s keeps %s of its own with its GPUs, devices and memory (at most %s)",
		rz.setText(), rz.nodesText(hold), rz.cpuText(rz.want), rz.cpuText(most))
}

// shrinkSpan finds a subset of a's nodes inside allowed that holds its
// non-CPU resources (fixed), of the demanded width (any for None), where a
// keeps rz.want of its units with at least one on every node outside
// fixed. It takes, inside each candidate pool, fixed and the nodes with the
// most of a's units (the lowest index on a tie), which is exact, and of the
// pools the one that keeps the most. It returns the span, whether one
// exists, and the most units any candidate kept.
func (rz *resizer) shrinkSpan(fixed, allowed numa.Mask) (numa.Mask, bool, int64) {
	s, hold := rz.s, rz.a.DenseSpan
	var order [numa.MaxNodes]int8
	if rz.r.Policy == policy.None || rz.p.width == 0 {
		// Any span: the nodes of its other resources and the fewest more,
		// those with the most of its CPUs first.
		m, got := fixed, int64(0)
		for i := range fixed.All() {
			got += rz.own[i]
		}
		for _, i := range byValue(order[:0], &rz.own, hold&^fixed) {
			if got >= rz.want {
				break
			}
			m, got = m.With(int(i)), got+rz.own[i]
		}
		return m, true, got
	}
	k := rz.p.width - fixed.Count()
	if k < 0 {
		return 0, false, 0
	}
	pools := s.allPool[:]
	if rz.r.Policy == policy.Restricted && rz.p.inSet {
		pools = s.setMasks
	}
	var best numa.Mask
	found, most := false, int64(0)
	for _, pool := range pools {
		pool &= allowed
		if !fixed.IsSubsetOf(pool) {
			continue
		}
		got, m := int64(0), fixed
		for i := range fixed.All() {
			got += rz.own[i]
		}
		top := byValue(order[:0], &rz.own, (hold&^fixed)&pool)
		for _, i := range top[:min(k, len(top))] {
			if rz.own[i] > 0 {
				got, m = got+rz.own[i], m.With(int(i))
			}
		}
		most = max(most, got)
		if m.Count() == rz.p.width && int64(k) <= rz.want && got >= rz.want && (!found || got > rz.keptOn(best)) {
			best, found = m, true
		}
	}
	return best, found, most
}

// keptOn returns a's units on m.
func (rz *resizer) keptOn(m numa.Mask) int64 {
	var t int64
	for i := range m.All() {
		t += rz.own[i]
	}
	return t
}

// ownTotal returns a's units.
func (rz *resizer) ownTotal() int64 { return rz.keptOn(rz.a.DenseSpan) }

// byValue appends the nodes of m to dst ordered by v descending, the lower
// index first on a tie (v holds non-negative amounts).
func byValue(dst []int8, v *[numa.MaxNodes]int64, m numa.Mask) []int8 {
	n := len(dst)
	for i := range m.All() {
		dst = append(dst, int8(i))
	}
	var buf [numa.MaxNodes]uint64
	cover.SortDesc(dst[n:], v, &buf)
	return dst
}

// refuse builds a resize refusal.
func (rz *resizer) refuse(why error, never bool, format string, args ...any) error {
	err := rz.s.refuse(rz.r, rz.p, why, nil, nil,
		fmt.Sprintf("cannot resize in place to %s: ", rz.s.cpu.Describe(rz.r, int64(rz.r.CPUs/rz.unit)))+
			fmt.Sprintf(format, args...)).(*PlacementError)
	err.Never = never
	return err
}

// cpuText writes units of CPUs in words.
func (rz *resizer) cpuText(units int64) string { return rz.s.cpu.Describe(rz.r, units) }

// nodesText names the nodes of m by ID, such as "NUMA node 3" or "NUMA
// nodes 0-2".
func (rz *resizer) nodesText(m numa.Mask) string {
	if m == 0 {
		return "no NUMA node"
	}
	if m.Count() == 1 {
		return "NUMA node " + idList(rz.s.m.IDsOf(m))
	}
	return "NUMA nodes " + idList(rz.s.m.IDsOf(m))
}

// setText names the span the policy demands, such as "set of 3 NUMA nodes
// inside one NUMA set".
func (rz *resizer) setText() string {
	w := max(rz.p.width, 1)
	t := fmt.Sprintf("set of %d NUMA nodes", w)
	if w == 1 {
		t = "NUMA node"
	}
	if rz.r.Policy == policy.Restricted && rz.p.inSet && w > 1 {
		t += " inside one NUMA set"
	}
	return t + " (" + rz.widthText() + ")"
}

// widthText names the width the policy demands.
func (rz *resizer) widthText() string {
	switch rz.r.Policy {
	case policy.SingleNUMANode:
		return "one NUMA node"
	case policy.Restricted:
		return fmt.Sprintf("width_cap %d", rz.p.widthCap)
	}
	return fmt.Sprintf("width_free %d", rz.p.widthFree)
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
			if !d.dev[i].healthy {
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
	copy(free[:s.n], s.cpu.FreeView(r))
	for _, g := range a.GPUs {
		if gpu, ok := s.m.GPU(g); ok {
			if i, ok := s.m.NodeIndex(gpu.NUMANode); ok {
				gpus[i]++
			}
		}
	}
	left := int64(extra / unit)
	for i := range (span &^ a.DenseSpan).All() {
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
	var scr splitScratch
	proportional(left, &weights, avail[:], order, &add, &scr)
	clear(s.cpu.pickBits)
	for _, i := range order {
		if k := want[i] + add[i]; k > 0 {
			s.cpu.pick(int(i), int(k)*unit, r.FullPCPUs)
		}
	}
	a.CPUs = a.CPUs.Union(s.cpu.takePicked())
}

// shrinkCPUs gives back drop of a's CPUs: every CPU outside span first;
// then, on the span, one unit (a CPU, a whole core with FullPCPUs) at a
// time from the node with the most kept CPUs per GPU of a (plus one), the
// lowest index on a tie, never the last unit of a node outside fixed (so
// the span stays what the resize decided); on each node the CPUs of cores
// a holds in part first, then whole cores, the highest first. It costs
// O(units dropped · span) plus one pass over the nodes' cores.
func (s *State) shrinkCPUs(a *Allocation, r *Request, span, fixed numa.Mask, drop int) {
	unit := 1
	if r.FullPCPUs {
		unit = s.m.ThreadsPerCore()
	}
	var kept, gpus, take [numa.MaxNodes]int
	// Everything outside span goes, by word operations: a's CPUs minus
	// the span's nodes' CPUs.
	give := a.CPUs.Clone()
	for i := range span.All() {
		kept[i] = a.CPUs.IntersectionCount(s.m.NodeCPUs(i))
		give.RemoveAll(s.m.NodeCPUs(i))
	}
	drop -= give.Size()
	for _, id := range a.GPUs {
		if gpu, ok := s.m.GPU(id); ok {
			if i, ok := s.m.NodeIndex(gpu.NUMANode); ok {
				gpus[i]++
			}
		}
	}
	for drop > 0 {
		best := -1
		for i := range span.All() {
			left := kept[i] - take[i]
			if left < unit || (!fixed.Contains(i) && left <= unit) {
				continue
			}
			if best < 0 || left*(gpus[best]+1) > (kept[best]-take[best])*(gpus[i]+1) {
				best = i
			}
		}
		if best < 0 {
			break // cannot happen: the span keeps enough units
		}
		take[best] += unit
		drop -= unit
	}
	for i := range span.All() {
		if take[i] == 0 {
			continue
		}
		cores := s.cpu.nodeCores[i]
		for pass := 0; pass < 2 && take[i] > 0; pass++ {
			for j := len(cores) - 1; j >= 0 && take[i] > 0; j-- {
				k := int(cores[j])
				mine := 0
				for cpu := range s.m.CoreCPUs(k).All() {
					if a.CPUs.Contains(cpu) {
						mine++
					}
				}
				if mine == 0 {
					continue
				}
				whole := mine == int(s.cpu.coreAlloc[k]) && s.cpu.full(k)
				if !r.FullPCPUs && (pass == 0) == whole {
					continue // partly held cores first, then whole ones
				}
				if r.FullPCPUs && pass == 1 {
					break
				}
				cpus := s.m.CoreCPUs(k).AppendTo(s.cpu.list[:0])
				for c := len(cpus) - 1; c >= 0 && take[i] > 0; c-- {
					if a.CPUs.Contains(cpus[c]) {
						give.Add(cpus[c])
						take[i]--
					}
				}
				s.cpu.list = cpus
			}
		}
	}
	s.cpu.Give(&Allocation{CPUs: give})
	a.CPUs = a.CPUs.Difference(give)
}

// nodeCount writes "1 NUMA node" or "3 NUMA nodes".
func nodeCount(n int) string {
	if n == 1 {
		return "1 NUMA node"
	}
	return fmt.Sprintf("%d NUMA nodes", n)
}
