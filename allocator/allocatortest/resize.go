package allocatortest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// ResizeVerdict is the model's answer for resizing one live allocation's
// CPUs (docs/design.md, "Resize").
type ResizeVerdict struct {
	// Valid is false when the ID is not live or the new size is not a
	// valid request.
	Valid bool
	// Admissible reports whether the resize must be granted.
	Admissible bool
	// Refusals are the sentinels an engine may answer when Admissible is
	// false (allocator.ErrUnknownID, ErrInvalidRequest, ErrInsufficient,
	// ErrNoNUMAFit or ErrExclusivity).
	Refusals []error
	// Reason explains the verdict in words.
	Reason string
	// Same reports a resize to the current size: nothing changes.
	Same bool
	// Grow reports a resize to more CPUs than the allocation holds.
	Grow bool
	// Width is the span width the policy demands for a fresh request of
	// the new size with the allocation's own resources free (as
	// [Verdict].Width); 0 for None, which may end on any span.
	Width int
	// DenseSpans are the spans the resized allocation may end on: for
	// growing, supersets of its span that add at most one node per CPU
	// added and have the free CPUs; for shrinking, subsets holding the
	// nodes of its GPUs, devices and memory and at most one node per CPU
	// kept besides them, where it keeps enough of its own; of the width
	// and inside one NUMA set as its policy demands, and allowed by the
	// exclusivity rule where it binds what the resize changes.
	DenseSpans []numa.Mask
}

// resizeCase is what DecideResize derives for one resize.
type resizeCase struct {
	a           allocator.Allocation
	r           allocator.Request
	hold, fixed numa.Mask
	unit        int
	want        int64
	freeU, ownU []int64
}

// DecideResize answers whether resizing the live allocation id to cpus CPUs
// must be granted, by the semantics of docs/design.md ("Resize") and
// allocator.State.Resize's doc comment, enumerating every NUMA mask:
//
//   - an ID that is not live is refused with ErrUnknownID; a size that
//     makes the allocation's request invalid (negative, not whole cores
//     under fullPCPUs, every amount zero) with ErrInvalidRequest; the
//     current size changes nothing;
//   - the width is that of a fresh request of the new size under the
//     allocation's policy with its own resources counted as free (its own
//     devices healthy even when marked unhealthy since) and the
//     exclusivity rule left out: one node for SingleNUMANode, width_cap
//     for Restricted (inside one NUMA set when width_cap was found in one),
//     width_free for BestEffort, any for None; when no fresh request of
//     the new size would fit, the resize is refused with that refusal;
//   - growing keeps every CPU and adds free ones, so its span is a
//     superset of the allocation's; shrinking keeps a subset, and the nodes
//     of its GPUs, devices and memory; every node a span adds (grow) or
//     keeps besides those (shrink) hosts at least one CPU (one whole core
//     under fullPCPUs);
//   - under Required (not None) the rule binds what the resize changes:
//     the nodes it adds, or every node when the span goes from one node to
//     several or back; for BestEffort only when some span of the width is
//     allowed so (the soft rule of a fresh request).
//
// A refusal is ErrExclusivity when a span would exist without the rule,
// else ErrNoNUMAFit (ErrInsufficient when a None allocation's growth finds
// too few free CPUs on the whole machine).
func (md *Model) DecideResize(id string, cpus int) ResizeVerdict {
	v, _ := md.decideResize(id, cpus)
	return v
}

func (md *Model) decideResize(id string, cpus int) (ResizeVerdict, *resizeCase) {
	i := slices.IndexFunc(md.live, func(a allocator.Allocation) bool { return a.ID == id })
	if i < 0 {
		return ResizeVerdict{Refusals: []error{allocator.ErrUnknownID}, Reason: fmt.Sprintf("%q is not live", id)}, nil
	}
	c := &resizeCase{a: md.live[i], hold: md.spans[id], unit: 1}
	a := c.a
	c.r = allocator.Request{ID: a.ID, CPUs: cpus, GPUs: len(a.GPUs), Policy: a.Policy, Exclusive: a.Exclusive,
		FullPCPUs: a.FullPCPUs}
	for _, nm := range a.Memory {
		c.r.MemoryMiB += nm.MiB
	}
	for class, ids := range a.Devices {
		if c.r.Devices == nil {
			c.r.Devices = map[string]int{}
		}
		c.r.Devices[class] = len(ids)
	}
	if why := md.validate(&c.r); why != "" {
		return ResizeVerdict{Refusals: []error{allocator.ErrInvalidRequest}, Reason: "invalid size: " + why}, nil
	}
	rv := ResizeVerdict{Valid: true}
	if cpus == a.CPUs.Size() {
		rv.Admissible, rv.Same, rv.Reason = true, true, "the current size: nothing changes"
		return rv, c
	}
	rv.Grow = cpus > a.CPUs.Size()
	c.fixed = SpanOf(md.m, allocator.Allocation{GPUs: a.GPUs, Devices: a.Devices, Memory: a.Memory})
	if a.FullPCPUs {
		c.unit = md.tpc
	}
	c.freeU, c.ownU = make([]int64, md.n), make([]int64, md.n)
	for i := range md.n {
		c.freeU[i] = md.cpuUnits(i, a.FullPCPUs, true)
		c.ownU[i] = int64(a.CPUs.IntersectionCount(md.m.NodeCPUs(i)) / c.unit)
	}
	c.want = int64(cpus / c.unit)
	if rv.Grow {
		c.want = int64((cpus - a.CPUs.Size()) / c.unit)
	}

	// The model without the allocation, its own devices healthy.
	without, err := md.Without(id)
	if err != nil {
		panic(err) // live, checked above
	}
	for _, k := range devKeys(a) {
		if md.unhealthy[k] {
			if without, err = without.WithHealth(k.class, k.id, true); err != nil {
				panic(err)
			}
		}
	}
	fresh := c.r
	fresh.Exclusive = policy.Preferred
	v := without.Decide(&fresh)
	w := v.Width
	if a.Policy == policy.None {
		w = 0
	} else if !v.Admissible {
		rv.Refusals = v.Refusals
		rv.Reason = "a fresh request of the new size would be refused: " + v.Reason
		return rv, c
	}
	rv.Width = w

	all := md.m.AllNodes()
	allowed := all
	if binds(&c.r) {
		single, shared := without.NodeTypes()
		al := all &^ single
		if w == 1 {
			al = all &^ shared
		}
		if (w > 1) == (width(c.hold) > 1) {
			al |= c.hold
		}
		must := a.Policy != policy.BestEffort
		for _, sp := range v.DenseSpans {
			must = must || sp&^al == 0
		}
		if must {
			allowed = al
		}
	}
	inSet := a.Policy == policy.Restricted && v.InSet
	var legal, ruleFree []numa.Mask
	masks := md.masks()
	if w == 0 {
		masks = append(masks, 0) // None: what it keeps may lie on no known node
	}
	for _, mask := range masks {
		if (w > 0 && width(mask) != w) || (inSet && !md.inOneSet(mask)) || !c.fits(mask, rv.Grow) {
			continue
		}
		ruleFree = append(ruleFree, mask)
		if mask&^allowed == 0 {
			legal = append(legal, mask)
		}
	}
	what := fmt.Sprintf("%s %s of %s from %d to %d CPUs (width %d, 0: any; it holds %s)",
		a.Policy, map[bool]string{true: "growth", false: "shrink"}[rv.Grow], a.ID, a.CPUs.Size(), cpus, w,
		md.ids(c.hold))
	switch {
	case len(legal) > 0:
		rv.Admissible, rv.DenseSpans = true, legal
		rv.Reason = what + ": legal spans " + md.spanList(legal)
	case len(ruleFree) > 0:
		rv.Refusals = []error{allocator.ErrExclusivity}
		rv.Reason = fmt.Sprintf("%s: spans %s would do but the exclusivity rule forbids each (%s)",
			what, md.spanList(ruleFree), without.typesText())
	case a.Policy == policy.None && rv.Grow:
		rv.Refusals = []error{allocator.ErrInsufficient}
		rv.Reason = what + ": the machine has too few free CPUs"
	default:
		rv.Refusals = []error{allocator.ErrNoNUMAFit}
		rv.Reason = what + ": no span in place has the CPUs"
	}
	return rv, c
}

// fits reports whether the resized allocation can end on mask, the
// exclusivity rule and the width left out.
func (c *resizeCase) fits(mask numa.Mask, grow bool) bool {
	base, units := c.hold, c.freeU // grow: keep the span, add free units
	if !grow {
		base, units = c.fixed, c.ownU // shrink: keep the fixed nodes, keep own units
		if mask&^c.hold != 0 {
			return false
		}
	}
	if base&^mask != 0 || int64(width(mask&^base)) > c.want {
		return false
	}
	var got int64
	for i, u := range units {
		if !has(mask, i) {
			continue
		}
		if !has(base, i) && u < 1 {
			return false
		}
		got += u
	}
	return got >= c.want
}

// CheckResize says what is wrong with the answer (a, err) of
// [allocator.State.Resize] for resizing the live allocation id to cpus, or
// returns nil: the verdict of [Model.DecideResize] is kept (a refusal of an
// admissible resize or a grant of one that is not is an error, as is a
// refusal of the wrong category, one that is not a
// *[allocator.PlacementError] or, for a placement refusal, one whose
// reason names by ID neither the allocation's nodes nor those of its GPUs,
// devices and memory); a granted resize
// keeps the ID, policy, GPUs, devices and memory, holds exactly cpus CPUs,
// a superset of its CPUs when growing (the new ones free and allocatable,
// whole cores under fullPCPUs) and a subset when shrinking, and ends with
// its DenseSpan the nodes of what it holds, one of the verdict's spans. A
// resize to the current size returns the allocation unchanged.
func (md *Model) CheckResize(id string, cpus int, a allocator.Allocation, err error) error {
	v, c := md.decideResize(id, cpus)
	what := fmt.Sprintf("resize of %q to %d CPUs", id, cpus)
	if err != nil {
		if v.Admissible {
			return fmt.Errorf("%s refused though admissible (completeness): engine said %q; model: %s", what, err, v.Reason)
		}
		if !slices.ContainsFunc(v.Refusals, func(s error) bool { return errors.Is(err, s) }) {
			return fmt.Errorf("%s refused with the wrong category: engine said %q, the model expects %s: %s",
				what, err, sentinelNames(v.Refusals), v.Reason)
		}
		if v.Valid {
			var pe *allocator.PlacementError
			if !errors.As(err, &pe) {
				return fmt.Errorf("%s: the refusal %q (%T) is not a *allocator.PlacementError", what, err, err)
			}
			// Its span's nodes, or those of its GPUs, devices and memory
			// when those stand in the way.
			ids, fixed := md.idList(c.hold), md.idList(c.fixed)
			if ids != "" && !strings.Contains(err.Error(), ids) && (fixed == "" || !strings.Contains(err.Error(), fixed)) {
				return fmt.Errorf("%s: the refusal %q does not name the allocation's own NUMA nodes by ID (%s)", what, err, ids)
			}
		}
		return nil
	}
	if !v.Admissible {
		return fmt.Errorf("%s granted though not admissible (soundness): engine gave %s; model: %s, want %s",
			what, a, v.Reason, sentinelNames(v.Refusals))
	}
	if v.Same {
		if err := CompareAllocations(c.a, a); err != nil {
			return fmt.Errorf("%s, its current size, must change nothing: %w", what, err)
		}
		return nil
	}
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	old := c.a
	if a.ID != old.ID || a.Policy != old.Policy || a.Exclusive != old.Exclusive || a.FullPCPUs != old.FullPCPUs {
		add("ID %q %s/%s fullPCPUs %t, want the allocation's %q %s/%s fullPCPUs %t", a.ID, a.Policy, a.Exclusive,
			a.FullPCPUs, old.ID, old.Policy, old.Exclusive, old.FullPCPUs)
	}
	if !slices.Equal(a.GPUs, old.GPUs) || !maps.EqualFunc(a.Devices, old.Devices, slices.Equal) ||
		!slices.Equal(a.Memory, old.Memory) {
		add("GPUs %v devices %v memory %v moved (were %v %v %v)", a.GPUs, a.Devices, a.Memory, old.GPUs, old.Devices, old.Memory)
	}
	if n := a.CPUs.Size(); n != cpus {
		add("%d CPUs (%s), want %d", n, a.CPUs, cpus)
	}
	if v.Grow {
		if !old.CPUs.IsSubsetOf(a.CPUs) {
			add("growing dropped CPUs %s", old.CPUs.Difference(a.CPUs))
		}
		for cpu := range a.CPUs.Difference(old.CPUs).All() {
			if _, known := md.m.CPUNode(cpu); !known || !md.cpuFree(cpu) {
				add("CPU %d was not free (held, reserved or unknown)", cpu)
			}
		}
	} else if !a.CPUs.IsSubsetOf(old.CPUs) {
		add("shrinking added CPUs %s", a.CPUs.Difference(old.CPUs))
	}
	if a.FullPCPUs {
		for cpu := range a.CPUs.All() {
			if k, ok := md.m.CPUCore(cpu); ok && !md.m.CoreCPUs(k).IsSubsetOf(a.CPUs) {
				add("fullPCPUs: CPU %d's core %s is not held whole", cpu, md.m.CoreCPUs(k))
			}
		}
	}
	span := SpanOf(md.m, a)
	if a.DenseSpan != span {
		add("DenseSpan %s is not the nodes hosting what it holds, %s", md.ids(a.DenseSpan), md.ids(span))
	}
	if !slices.Contains(v.DenseSpans, span) {
		add("span %s is not legal; legal spans: %s", md.ids(span), md.spanList(v.DenseSpans))
	}
	if len(p) > 0 {
		return fmt.Errorf("%s got %s:\n  - %s\n(model: %s)", what, a, strings.Join(p, "\n  - "), v.Reason)
	}
	return nil
}

// idList writes the node IDs of mask in cpulist form ("0,33-34"), as
// refusals name nodes; "" for no node.
func (md *Model) idList(mask numa.Mask) string {
	var set numa.CPUSet
	for _, id := range md.m.IDsOf(mask) {
		set.Add(int(id))
	}
	return set.String()
}

// Resize is the model's own resize, a slow reference: on the first span of
// [Model.DecideResize]'s verdict it adds (grow) one free CPU, or whole core
// under fullPCPUs, on each node the span adds and then the lowest free ones
// of the span's nodes in ascending order, or keeps (shrink) one of its own
// on each node of the span outside its GPUs', devices' and memory's and
// then its lowest ones in node order. It returns the model after the
// resize and the resized allocation, or an error wrapping the verdict's
// first sentinel.
func (md *Model) Resize(id string, cpus int) (*Model, allocator.Allocation, error) {
	v, c := md.decideResize(id, cpus)
	if !v.Admissible {
		return nil, allocator.Allocation{}, fmt.Errorf("%w: %s", v.Refusals[0], v.Reason)
	}
	if v.Same {
		return md, c.a.Clone(), nil
	}
	span, base := v.DenseSpans[0], c.fixed
	pick := func(i int) []numa.CPUSet { return md.ownUnits(c.a, i) }
	var cpuSet numa.CPUSet
	if v.Grow {
		base, cpuSet = c.hold, c.a.CPUs.Clone()
		pick = func(i int) []numa.CPUSet { return md.freeUnits(i, c.a.FullPCPUs) }
	}
	taken := map[int][]numa.CPUSet{}
	n := c.want
	for i := range md.n {
		if has(span, i) && !has(base, i) {
			taken[i] = pick(i)[:1]
			n--
		}
	}
	for i := range md.n {
		if !has(span, i) {
			continue
		}
		units := pick(i)[len(taken[i]):]
		k := min(n, int64(len(units)))
		taken[i] = append(taken[i], units[:k]...)
		n -= k
	}
	for _, units := range taken {
		for _, u := range units {
			cpuSet.UnionWith(u)
		}
	}
	a := c.a.Clone()
	a.CPUs = cpuSet
	a.DenseSpan = SpanOf(md.m, a)
	next, err := md.WithResized(a)
	if err != nil {
		return nil, allocator.Allocation{}, err
	}
	return next, a, nil
}

// freeUnits lists node i's free CPUs one by one, or its free whole cores.
func (md *Model) freeUnits(i int, full bool) []numa.CPUSet {
	var out []numa.CPUSet
	if !full {
		for cpu := range md.m.NodeCPUs(i).All() {
			if md.cpuFree(cpu) {
				out = append(out, numa.NewCPUSet(cpu))
			}
		}
		return out
	}
	for k := 0; k < md.m.NumCores(); k++ {
		if md.m.CoreNode(k) == i && md.wholeCore(k, md.cpuFree) {
			out = append(out, md.m.CoreCPUs(k))
		}
	}
	return out
}

// ownUnits lists a's CPUs on node i one by one, or its whole cores there.
func (md *Model) ownUnits(a allocator.Allocation, i int) []numa.CPUSet {
	var out []numa.CPUSet
	seen := map[int]bool{}
	for cpu := range a.CPUs.Intersection(md.m.NodeCPUs(i)).All() {
		if !a.FullPCPUs {
			out = append(out, numa.NewCPUSet(cpu))
			continue
		}
		if k, ok := md.m.CPUCore(cpu); ok && !seen[k] {
			seen[k] = true
			out = append(out, md.m.CoreCPUs(k))
		}
	}
	return out
}

// WithResized returns a new model in which the live allocation a.ID is
// replaced by a (what a resize returned), device health unchanged; see
// [NewModel] for the errors, and [allocator.ErrUnknownID] when a.ID is not
// live.
func (md *Model) WithResized(a allocator.Allocation) (*Model, error) {
	i := slices.IndexFunc(md.live, func(x allocator.Allocation) bool { return x.ID == a.ID })
	if i < 0 {
		return nil, fmt.Errorf("%w: %q", allocator.ErrUnknownID, a.ID)
	}
	live := slices.Clone(md.live)
	live[i] = a.Clone()
	return build(md.m, live, md.unhealthy, md.opts)
}
