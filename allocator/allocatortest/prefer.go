package allocatortest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// MaxPreferNodes is the largest machine (in NUMA nodes) on which
// [Model.Check] also checks that the engine chose the top-ranked admissible
// span ([Model.Preferred]): every admissible span is ranked, which is cheap
// on a few nodes, and the engine enumerates every candidate there whatever
// its SearchBudget (at least 64 candidates per pool, more than the 6 spans
// of any width on 4 nodes).
const MaxPreferNodes = 4

// options is what the model knows of the engine's options: the two that
// change the preference order, and whether the engine has resource kinds
// the model cannot see (then the preference is not checked).
type options struct {
	spread, spendGPULocal, foreign bool
}

// WithOptions returns a copy of the model that expects an engine built with
// opts: Packing Spread reverses the best-fit criterion and
// SpendGPULocalCPUs drops the stranded-GPU criterion of the preference
// order; with Options.Resources or Options.NewResources (kinds the model
// does not know) the preference is not checked at all. The other options do not change what
// the model checks. A model from [NewModel] expects the zero Options.
func (md *Model) WithOptions(opts allocator.Options) *Model {
	c := *md
	c.opts = options{spread: opts.Packing == allocator.Spread, spendGPULocal: opts.SpendGPULocalCPUs,
		foreign: len(opts.Resources) > 0 || opts.NewResources != nil}
	return &c
}

// Rank is where a span stands in the engine's preference order among the
// admissible spans of one request, computed by the model from the order's
// statement (the allocator's package doc, and the doc comments of the
// options it names) rather than by the engine's code. Of two spans the one
// whose Rank compares lower ([CompareRanks]) is preferred; the fields are
// the criteria in the order they are compared, each lower first.
type Rank struct {
	// RuleBroken: the span breaks the singleNUMANodeExclusive rule (a
	// one-node span on a shared node, a wider span on a single node).
	RuleBroken bool
	// Sets is the number of NUMA sets the span crosses.
	Sets int
	// Distance is the sum of the SLIT distances over the pairs of the
	// span's nodes (each pair read from the lower index's row).
	Distance int
	// Penalty is, per demanded kind in the engine's kind order (GPUs, the
	// other device classes by name, CPUs, memory), how far the span's split
	// of the request is from the resource's preference: for devices the PCIe
	// switch groups used beyond one per node (a node's free devices under
	// one named switch form a group, those without a switch name one group;
	// a node's largest groups are used first), for CPUs the CPUs that
	// cannot come as whole free cores (0 under fullPCPUs or without SMT),
	// for memory 0.
	Penalty []int64
	// Stranded is, for a request without GPUs, the free GPUs on the span
	// (0 with Options.SpendGPULocalCPUs).
	Stranded int64
	// Left is, per demanded kind in kind order, the free units the span
	// keeps after the placement (negated with Options.Packing Spread).
	Left []int64
	// Span is the span (dense); of two spans of one width the one with
	// the lower node indices (compared as sorted index lists) comes first.
	Span numa.Mask
}

// Criteria names the criteria of [Rank] (Rule for RuleBroken, the others
// as their fields) in the order [CompareRanks] compares them.
var Criteria = []string{"Rule", "Sets", "Distance", "Penalty", "Stranded", "Left", "Span"}

// criteria compares two ranks criterion by criterion, in the order of
// Criteria.
var criteria = []func(a, b *Rank) int{
	func(a, b *Rank) int { return cmp.Compare(b2i(a.RuleBroken), b2i(b.RuleBroken)) },
	func(a, b *Rank) int { return cmp.Compare(a.Sets, b.Sets) },
	func(a, b *Rank) int { return cmp.Compare(a.Distance, b.Distance) },
	func(a, b *Rank) int { return slices.Compare(a.Penalty, b.Penalty) },
	func(a, b *Rank) int { return cmp.Compare(a.Stranded, b.Stranded) },
	func(a, b *Rank) int { return slices.Compare(a.Left, b.Left) },
	func(a, b *Rank) int { return compareLowest(a.Span, b.Span) },
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compareLowest orders masks of one width by their sorted index lists.
func compareLowest(a, b numa.Mask) int {
	var x, y []int
	for i := range numa.MaxNodes {
		if has(a, i) {
			x = append(x, i)
		}
		if has(b, i) {
			y = append(y, i)
		}
	}
	if c := cmp.Compare(len(x), len(y)); c != 0 {
		return c
	}
	return slices.Compare(x, y)
}

// CompareRanks compares two ranks of spans of one request: negative when a
// is preferred, positive when b is, 0 for the same span. It also returns
// the name of the first criterion that differs ("" for 0).
func CompareRanks(a, b Rank) (int, string) {
	for j, c := range criteria {
		if d := c(&a, &b); d != 0 {
			return d, Criteria[j]
		}
	}
	return 0, ""
}

// String writes the rank's criteria by name.
func (rk Rank) String() string {
	return fmt.Sprintf("RuleBroken=%t Sets=%d Distance=%d Penalty=%v Stranded=%d Left=%v Span={%s}",
		rk.RuleBroken, rk.Sets, rk.Distance, rk.Penalty, rk.Stranded, rk.Left, rk.Span)
}

// rankKinds returns r's demanded kinds in the engine's kind order: GPUs,
// the other device classes by name, CPUs, memory.
func (md *Model) rankKinds(r *allocator.Request) []kind {
	ks := md.kinds(r) // cpu, GPUs, classes ascending, memory
	var out []kind
	for _, rl := range []role{roleDevice, roleCPU, roleMemory} { // GPUs come first among devices
		for _, k := range ks {
			if k.role == rl {
				out = append(out, k)
			}
		}
	}
	return out
}

// RankSpan returns the rank of span for the valid request r in the model's
// state. It does not check that span is admissible.
func (md *Model) RankSpan(r *allocator.Request, span numa.Mask) Rank {
	ks := md.rankKinds(r)
	rk := Rank{RuleBroken: !md.allowed(span), Sets: md.setsCrossed(span), Span: span}
	d := md.m.Distances()
	for i := range md.n {
		for j := i + 1; j < md.n; j++ {
			if has(span, i) && has(span, j) {
				rk.Distance += d.At(i, j)
			}
		}
	}
	amounts := md.Split(r, span)
	for j, k := range ks {
		var pen int64
		switch k.role {
		case roleMemory:
		case roleCPU:
			if !r.FullPCPUs && md.tpc > 1 {
				for i := range md.n {
					if a := amounts[j][i]; has(span, i) && a > 0 {
						whole := min(a/int64(md.tpc), md.cpuUnits(i, true, true))
						pen += a - whole*int64(md.tpc)
					}
				}
			}
		default:
			for i := range md.n {
				if a := amounts[j][i]; has(span, i) && a > 0 {
					pen += int64(md.switchGroups(k.name, i, a) - 1)
				}
			}
		}
		rk.Penalty = append(rk.Penalty, pen)
		left := -k.need
		for i := range md.n {
			if has(span, i) {
				left += k.free[i]
			}
		}
		if md.opts.spread {
			left = -left
		}
		rk.Left = append(rk.Left, left)
	}
	if r.GPUs == 0 && !md.opts.spendGPULocal {
		for i := range md.n {
			if has(span, i) {
				rk.Stranded += md.devUnits(allocator.GPUClass, i, true)
			}
		}
	}
	return rk
}

// switchGroups returns how many PCIe switch groups of node i give k free
// devices of class when the largest groups are used first.
func (md *Model) switchGroups(class string, i int, k int64) int {
	free := map[string]int64{}
	for _, d := range md.devs[class] {
		key := devKey{class, d.id}
		if _, held := md.devHolder[key]; d.node == i && !held && !md.unhealthy[key] {
			free[d.sw]++
		}
	}
	var sizes []int64
	for _, n := range free {
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	slices.Reverse(sizes)
	n := 0
	for _, s := range sizes {
		if k <= 0 {
			break
		}
		k -= s
		n++
	}
	return n
}

// Split returns how many units of each demanded kind (in the engine's kind
// order, see [Rank].Penalty) each node gives when r is placed on span, as
// amounts[kind][dense node]: a one-node span gives everything; otherwise
// the first kind (the anchor: GPUs when r asks for any) comes from the
// span's nodes with the most free units first (the lower index on a tie),
// and every other kind in proportion to the anchor's split: each node the
// floor of its share, the rounding remainder to the largest fractional
// parts (the node earlier in the anchor's order on a tie), then what
// exceeds a node's free units to the nodes with room, in that order.
func (md *Model) Split(r *allocator.Request, span numa.Mask) [][]int64 {
	ks := md.rankKinds(r)
	out := make([][]int64, len(ks))
	for j := range out {
		out[j] = make([]int64, md.n)
	}
	var nodes []int
	for i := range md.n {
		if has(span, i) {
			nodes = append(nodes, i)
		}
	}
	if len(nodes) == 0 || len(ks) == 0 {
		return out
	}
	if len(nodes) == 1 {
		for j, k := range ks {
			out[j][nodes[0]] = k.need
		}
		return out
	}
	anchor := ks[0]
	slices.SortStableFunc(nodes, func(a, b int) int { return cmp.Compare(anchor.free[b], anchor.free[a]) })
	rem := anchor.need
	for _, i := range nodes {
		t := min(rem, anchor.free[i])
		out[0][i] = t
		rem -= t
	}
	total := anchor.need - rem
	for j := 1; j < len(ks); j++ {
		k, o := ks[j], out[j]
		rem := k.need
		if total > 0 { // else the span does not hold the anchor: no shares
			frac := make([]int64, md.n)
			for _, i := range nodes {
				o[i], frac[i] = k.need*out[0][i]/total, k.need*out[0][i]%total
				rem -= o[i]
			}
			byFrac := slices.Clone(nodes)
			slices.SortStableFunc(byFrac, func(a, b int) int { return cmp.Compare(frac[b], frac[a]) })
			for _, i := range byFrac[:rem] {
				o[i]++
			}
			rem = 0
		}
		for _, i := range nodes {
			if o[i] > k.free[i] {
				rem += o[i] - k.free[i]
				o[i] = k.free[i]
			}
		}
		for _, i := range nodes {
			t := min(rem, k.free[i]-o[i])
			o[i] += t
			rem -= t
		}
	}
	return out
}

// Preferred returns the admissible spans of r that rank first ([Rank]),
// with their rank: the spans an engine must choose among on a machine of
// at most [MaxPreferNodes] nodes. The order is total, so there is one
// unless r is not admissible (none) or a None request (none: it may go
// anywhere and its preference is not stated as a rank over spans).
func (md *Model) Preferred(r *allocator.Request) ([]numa.Mask, Rank) {
	v := md.Decide(r)
	if !v.Admissible || v.AnySpan {
		return nil, Rank{}
	}
	return md.preferred(r, v)
}

func (md *Model) preferred(r *allocator.Request, v Verdict) ([]numa.Mask, Rank) {
	var top []numa.Mask
	var best Rank
	for _, span := range v.DenseSpans {
		rk := md.RankSpan(r, span)
		c := -1
		if len(top) > 0 {
			c, _ = CompareRanks(rk, best)
		}
		switch {
		case c < 0:
			top, best = []numa.Mask{span}, rk
		case c == 0:
			top = append(top, span)
		}
	}
	return top, best
}

// checkPreferred says why a, whose span is legal for r, is not an
// allocation the engine may choose, or returns "": on machines of at most
// MaxPreferNodes nodes its span must be a top-ranked one and what each node
// gives of each kind the span's split ([Model.Split]).
func (md *Model) checkPreferred(r *allocator.Request, a allocator.Allocation, span numa.Mask, v Verdict) string {
	if md.n > MaxPreferNodes || md.opts.foreign || v.AnySpan || r.Policy == policy.None {
		return ""
	}
	top, best := md.preferred(r, v)
	if slices.Contains(top, span) {
		return md.checkSplit(r, a, span)
	}
	got := md.RankSpan(r, span)
	_, why := CompareRanks(best, got)
	return fmt.Sprintf("span %s is not the preferred one: %s ranks before it on %s (rank of %s: %s; of %s: %s)",
		md.ids(span), md.ids(top[0]), why, md.ids(top[0]), best, md.ids(span), got)
}

// checkSplit says how what a holds per node differs from the split of r
// over span ([Model.Split]), or returns "".
func (md *Model) checkSplit(r *allocator.Request, a allocator.Allocation, span numa.Mask) string {
	want := md.Split(r, span)
	var diffs []string
	for j, k := range md.rankKinds(r) {
		got := md.heldPerNode(a, k)
		if !slices.Equal(got, want[j]) {
			diffs = append(diffs, fmt.Sprintf("%s per node %v, the split gives %v", k.name, got, want[j]))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("on span %s it does not take the split of the request (the first kind from the nodes with the most free, the others in proportion; dense node order): %s",
		md.ids(span), strings.Join(diffs, "; "))
}

// heldPerNode counts what a holds of kind k on each node (dense), in k's
// units (whole cores for CPUs under fullPCPUs).
func (md *Model) heldPerNode(a allocator.Allocation, k kind) []int64 {
	out := make([]int64, md.n)
	switch k.role {
	case roleCPU:
		unit := 1
		if a.FullPCPUs {
			unit = md.tpc
		}
		for i := range md.n {
			out[i] = int64(a.CPUs.IntersectionCount(md.m.NodeCPUs(i)) / unit)
		}
	case roleMemory:
		for _, nm := range a.Memory {
			if i, ok := md.m.NodeIndex(nm.Node); ok {
				out[i] += nm.MiB
			}
		}
	default:
		for _, key := range devKeys(a) {
			if key.class != k.name {
				continue
			}
			if j, ok := md.devIdx[key.class][key.id]; ok && md.devs[key.class][j].node >= 0 {
				out[md.devs[key.class][j].node]++
			}
		}
	}
	return out
}
