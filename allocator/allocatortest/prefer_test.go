package allocatortest_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// TestCriteriaFollowTheRankDocComment: the model's order of criteria is the
// numbered list of the doc comment of the allocator's ranking type (rank,
// else the list rankOrder), the only statement of the order, its names
// without the "crit" prefix. The model states the order again on
// purpose (it must not call the engine's comparison); when the engine's
// order changes, this test says which list to change.
func TestCriteriaFollowTheRankDocComment(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, "..", nil, parser.ParseComments)
	require.NoError(t, err)
	docs := map[string]string{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, spec := range g.Specs {
					doc := g.Doc
					var names []*ast.Ident
					switch sp := spec.(type) {
					case *ast.TypeSpec:
						names = []*ast.Ident{sp.Name}
					case *ast.ValueSpec:
						names = sp.Names
						if sp.Doc != nil {
							doc = sp.Doc
						}
					}
					for _, n := range names {
						if doc != nil && (n.Name == "rankOrder" || n.Name == "rank") {
							docs[n.Name] = doc.Text()
						}
					}
				}
			}
		}
	}
	item := regexp.MustCompile(`(?m)^\s*\d+\.\s+(\w+):`)
	var names []string
	for _, decl := range []string{"rank", "rankOrder"} {
		for _, m := range item.FindAllStringSubmatch(docs[decl], -1) {
			names = append(names, strings.ToLower(strings.TrimPrefix(m[1], "crit")))
		}
		if len(names) > 0 {
			break
		}
	}
	require.NotEmpty(t, names, "no numbered list of criteria in the doc comment of rank or rankOrder")
	var model []string
	for _, c := range allocatortest.Criteria {
		model = append(model, strings.ToLower(c))
	}
	assert.Equal(t, names, model, "the allocator's criteria (first) and the model's (allocatortest.Criteria)")
}

// TestCompareRanksOrder: each criterion decides before every later one:
// of two ranks equal up to criterion j, the one better at j wins however
// much worse it is at every criterion after j.
func TestCompareRanksOrder(t *testing.T) {
	good := allocatortest.Rank{Penalty: []int64{0, 0}, Left: []int64{0, 0}, Span: numa.MaskOf(0, 1)}
	bad := allocatortest.Rank{RuleBroken: true, Sets: 2, Distance: 40, Penalty: []int64{0, 3}, Stranded: 4,
		Left: []int64{1, 0}, Span: numa.MaskOf(1, 2)}
	for j, name := range allocatortest.Criteria {
		// a is good at j and bad after it; b is bad at j and good after it;
		// both share good's values before j.
		a, b := mix(good, bad, j, false), mix(good, bad, j, true)
		c, why := allocatortest.CompareRanks(a, b)
		assert.Negative(t, c, "criterion %s: %s vs %s", name, a, b)
		assert.Equal(t, name, why)
		c, _ = allocatortest.CompareRanks(b, a)
		assert.Positive(t, c, name)
	}
	c, why := allocatortest.CompareRanks(good, good)
	assert.Zero(t, c)
	assert.Empty(t, why)
	// Penalty and Left compare kind by kind: the first kind decides.
	c, _ = allocatortest.CompareRanks(allocatortest.Rank{Penalty: []int64{0, 9}}, allocatortest.Rank{Penalty: []int64{1, 0}})
	assert.Negative(t, c)
}

// mix returns a rank with good's criteria before j, good's (or, with
// badAt, bad's) at j and the other one's after j.
func mix(good, bad allocatortest.Rank, j int, badAt bool) allocatortest.Rank {
	pick := func(k int) allocatortest.Rank {
		switch {
		case k < j:
			return good
		case k == j && badAt, k > j && !badAt:
			return bad
		}
		return good
	}
	return allocatortest.Rank{RuleBroken: pick(0).RuleBroken, Sets: pick(1).Sets, Distance: pick(2).Distance,
		Penalty: pick(3).Penalty, Stranded: pick(4).Stranded, Left: pick(5).Left, Span: pick(6).Span}
}

// rankMachine has four NUMA nodes in two sockets ({0,1} and {2,3}, node IDs
// 0, 1, 4, 5), SMT (two threads per core, four cores per node), the SLIT
// of a ring (0-1 and 4-5 at 12, 1-4 at 21, 0-5 at 31, else 25) and GPUs:
// node 0 GPUs 0 and 1 under switch a and 2 under b, node 1 GPUs 3-5 under
// c, node 4 none, node 5 GPU 6; 2048 MiB per node.
func rankMachine(t *testing.T) *topology.Machine {
	t.Helper()
	b := topology.NewBuilder("rank")
	ids := []numa.NodeID{0, 1, 4, 5}
	for i, id := range ids {
		cpus := numa.CPURange(8*i, 8*i+7)
		b.AddNode(topology.Node{ID: id, Socket: i / 2, CPUs: cpus, MemoryMiB: 2048})
		for c := 0; c < 4; c++ {
			b.AddCore(numa.NewCPUSet(8*i+2*c, 8*i+2*c+1))
		}
	}
	for _, g := range []topology.GPU{{ID: 0, NUMANode: 0, PCIeSwitch: "a"}, {ID: 1, NUMANode: 0, PCIeSwitch: "a"},
		{ID: 2, NUMANode: 0, PCIeSwitch: "b"}, {ID: 3, NUMANode: 1, PCIeSwitch: "c"}, {ID: 4, NUMANode: 1, PCIeSwitch: "c"},
		{ID: 5, NUMANode: 1, PCIeSwitch: "c"}, {ID: 6, NUMANode: 5}} {
		b.AddGPU(g)
	}
	b.SetDistances([][]int{{10, 12, 25, 31}, {12, 10, 21, 25}, {25, 21, 10, 12}, {31, 25, 12, 10}})
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// TestRankSpanOnFixedSpans ranks fixed spans of rankMachine criterion by
// criterion, and checks the spans Preferred returns.
func TestRankSpanOnFixedSpans(t *testing.T) {
	m := rankMachine(t)
	md := model(t, m)

	// Sets and distance: 4 GPUs (BestEffort, width 2).
	r := &allocator.Request{ID: "g", GPUs: 4, CPUs: 6, Policy: policy.BestEffort}
	rk := md.RankSpan(r, numa.MaskOf(0, 1))
	assert.Equal(t, 1, rk.Sets)
	assert.Equal(t, 12, rk.Distance)
	assert.False(t, rk.RuleBroken)
	// The split: GPUs from the node with the most free first (3 each: the
	// lower index, node 0: 3, node 1: 1), CPUs in proportion (4.5 and 1.5: the rounding unit to the
	// larger fraction, the earlier node on a tie: 5 and 1).
	split := md.Split(r, numa.MaskOf(0, 1))
	assert.Equal(t, []int64{3, 1, 0, 0}, split[0], "GPUs")
	assert.Equal(t, []int64{5, 1, 0, 0}, split[1], "CPUs")
	// Penalty: node 0 gives 3 GPUs from switches a (2) and b (1): one group
	// beyond one; node 1 one GPU from c. CPUs: node 0's 5 CPUs need a split
	// core (1), node 1's one CPU too (1).
	assert.Equal(t, []int64{1, 2}, rk.Penalty)
	assert.Equal(t, int64(0), rk.Stranded, "the request asks for GPUs")
	assert.Equal(t, []int64{2, 10}, rk.Left, "6 GPUs free on the span, 16 CPUs")
	other := md.RankSpan(r, numa.MaskOf(0, 3))
	assert.Equal(t, 2, other.Sets)
	assert.Equal(t, 31, other.Distance)
	c, why := allocatortest.CompareRanks(rk, other)
	assert.Negative(t, c)
	assert.Equal(t, "Sets", why)
	top, best := md.Preferred(r)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0, 1)}, top)
	assert.Equal(t, rk, best)

	// Stranded: a CPU-only pod prefers node 4 (no GPUs), then best fit.
	cpu := &allocator.Request{ID: "c", CPUs: 4, Policy: policy.SingleNUMANode}
	assert.Equal(t, int64(3), md.RankSpan(cpu, numa.MaskOf(0)).Stranded)
	assert.Equal(t, []int64{0}, md.RankSpan(cpu, numa.MaskOf(0)).Penalty, "two whole cores")
	top, _ = md.Preferred(cpu)
	assert.Equal(t, []numa.Mask{numa.MaskOf(2)}, top)
	top, _ = md.WithOptions(allocator.Options{SpendGPULocalCPUs: true}).Preferred(cpu)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0)}, top, "without the preference: the lowest node of equal fit")

	// Penalty before Left: 2 GPUs fit under one switch on nodes 0 and 1
	// alike (the lower node wins); with GPU 0 held, node 0's two free GPUs
	// sit under two switches, so node 1 wins though best fit would take 0.
	two := &allocator.Request{ID: "o", GPUs: 2, Policy: policy.SingleNUMANode}
	top, _ = md.Preferred(two)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0)}, top)
	held := allocator.Allocation{ID: "h", GPUs: []int{0}, DenseSpan: numa.MaskOf(0), Policy: policy.None}
	md2 := model(t, m, held)
	rk0, rk1 := md2.RankSpan(two, numa.MaskOf(0)), md2.RankSpan(two, numa.MaskOf(1))
	assert.Equal(t, []int64{1}, rk0.Penalty, "GPUs 1 and 2 sit under two switches")
	assert.Equal(t, []int64{0}, rk1.Penalty)
	assert.Equal(t, []int64{0}, rk0.Left)
	assert.Equal(t, []int64{1}, rk1.Left)
	top, _ = md2.Preferred(two)
	assert.Equal(t, []numa.Mask{numa.MaskOf(1)}, top)

	// Left: best fit, or the emptiest with Spread.
	three := &allocator.Request{ID: "t", CPUs: 2, MemoryMiB: 1024, Policy: policy.SingleNUMANode}
	md3 := model(t, m, allocator.Allocation{ID: "x", CPUs: numa.NewCPUSet(16, 17), DenseSpan: numa.MaskOf(2),
		Policy: policy.SingleNUMANode})
	top, _ = md3.WithOptions(allocator.Options{SpendGPULocalCPUs: true}).Preferred(three)
	assert.Equal(t, []numa.Mask{numa.MaskOf(2)}, top, "best fit: node 4 has the fewest CPUs left")
	top, _ = md3.WithOptions(allocator.Options{Packing: allocator.Spread, SpendGPULocalCPUs: true}).Preferred(three)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0)}, top, "Spread: the most left, the lowest node on a tie")

	// RuleBroken first: under Preferred a wide span over a single node is
	// allowed but ranks after one that keeps the rule, even across sets.
	single := allocator.Allocation{ID: "s", CPUs: numa.NewCPUSet(8), DenseSpan: numa.MaskOf(1), Policy: policy.SingleNUMANode}
	md4 := model(t, m, single)
	wide := &allocator.Request{ID: "w", CPUs: 12, Policy: policy.BestEffort, Exclusive: policy.Preferred}
	assert.True(t, md4.RankSpan(wide, numa.MaskOf(0, 1)).RuleBroken)
	top, _ = md4.Preferred(wide)
	assert.Equal(t, []numa.Mask{numa.MaskOf(2, 3)}, top, "{4,5} keeps the rule, {0,1} is as good on every later criterion")
}

// TestCheckWantsThePreferredSpan: on a small machine Check refuses a legal
// span that is not the top-ranked one, naming the criterion.
func TestCheckWantsThePreferredSpan(t *testing.T) {
	m := rankMachine(t)
	md := model(t, m)
	r := &allocator.Request{ID: "c", CPUs: 2, Policy: policy.SingleNUMANode}
	bad := allocator.Allocation{ID: "c", Policy: policy.SingleNUMANode, CPUs: numa.NewCPUSet(0, 1), DenseSpan: numa.MaskOf(0)}
	err := md.Check(r, bad, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "span {0} is not the preferred one: {4} ranks before it on Stranded")
	good, err := md.Place(r)
	require.NoError(t, err)
	assert.Equal(t, numa.MaskOf(2), good.DenseSpan)
	assert.NoError(t, md.Check(r, good, nil))
	// Foreign resource kinds: the preference is not checked.
	assert.NoError(t, md.WithOptions(allocator.Options{Resources: []allocator.Resource{nil}}).Check(r, bad, nil))
}

// TestModelResizesAndClaimsWhatItAdmits plays random streams against the
// model alone: its own resizes pass its CheckResize and refuse exactly
// what DecideResize refuses; a claim of what a twin model placed passes
// CheckClaim exactly when Claim accepts it.
func TestModelResizesAndClaimsWhatItAdmits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := allocatortest.Machine().Draw(t, "machine")
		md := play(t, m, allocatortest.Stream(m).Draw(t, "ops"))
		twin := play(t, m, allocatortest.Stream(m).Draw(t, "twinOps"))
		for _, a := range md.Live() {
			cpus := rapid.IntRange(-1, m.NumCPUs()+1).Draw(t, "cpus")
			v := md.DecideResize(a.ID, cpus)
			next, got, err := md.Resize(a.ID, cpus)
			if err != nil {
				if v.Admissible || !errors.Is(err, v.Refusals[0]) {
					t.Fatalf("Resize %q to %d: %v, verdict %+v", a.ID, cpus, err, v)
				}
				continue
			}
			if cerr := md.CheckResize(a.ID, cpus, got, nil); cerr != nil {
				t.Fatalf("the model's own resize: %v", cerr)
			}
			md = next
		}
		for _, a := range twin.Live() {
			next, got, err := md.Claim(a)
			if err != nil {
				if md.CheckClaim(a, a, nil) == nil {
					t.Fatalf("Claim refused %s (%v), CheckClaim accepts it", a, err)
				}
				continue
			}
			if cerr := md.CheckClaim(a, got, nil); cerr != nil {
				t.Fatalf("the model's own claim: %v", cerr)
			}
			md = next
		}
	})
}

// play returns the model after the stream's allocations (placed by the
// model) and releases.
func play(t *rapid.T, m *topology.Machine, ops []allocatortest.Op) *allocatortest.Model {
	md, err := allocatortest.NewModel(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.Kind == allocatortest.OpRelease {
			if next, err := md.Without(op.ID); err == nil {
				md = next
			}
			continue
		}
		r := op.Request
		if a, err := md.Place(&r); err == nil {
			if md, err = md.With(a); err != nil {
				t.Fatal(err)
			}
		}
	}
	return md
}

// The preferred span of a 4-GPU BestEffort pod on xeon-2s-snc2-8gpu (two
// GPUs per NUMA node, NUMA sets {0,1} and {2,3}): on the empty machine the
// two spans inside one set tie up to the node indices; with GPU 0 held,
// {0,1} has too few GPUs free and {2,3} beats the spans that cross sets.
func ExampleModel_Preferred() {
	m, _ := topology.Preset("xeon-2s-snc2-8gpu")
	md, _ := allocatortest.NewModel(m, nil)
	r := &allocator.Request{ID: "train", CPUs: 16, GPUs: 4, Policy: policy.BestEffort}
	top, best := md.Preferred(r)
	_, why := allocatortest.CompareRanks(best, md.RankSpan(r, numa.MaskOf(2, 3)))
	fmt.Println(m.IDsOf(top[0]), "before {2,3} on", why)

	held := allocator.Allocation{ID: "one", GPUs: []int{0}, DenseSpan: numa.MaskOf(0)}
	md, _ = allocatortest.NewModel(m, []allocator.Allocation{held})
	top, best = md.Preferred(r)
	_, why = allocatortest.CompareRanks(best, md.RankSpan(r, numa.MaskOf(1, 2)))
	fmt.Println(m.IDsOf(top[0]), "before {1,2} on", why)
	// Output:
	// [0 1] before {2,3} on Span
	// [2 3] before {1,2} on Sets
}

// CheckResize judges an engine's resize: on dgx-h100 (112 CPUs per NUMA
// node), a SingleNUMANode pod cannot grow to 113 CPUs (no fresh request of
// that size fits one node), and grows to 16 on its node.
func ExampleModel_CheckResize() {
	m, _ := topology.Preset("dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	a, _ := s.Allocate(&allocator.Request{ID: "a", CPUs: 8, GPUs: 4, Policy: policy.SingleNUMANode})
	md, _ := allocatortest.NewModel(m, []allocator.Allocation{a})
	v := md.DecideResize("a", 113)
	fmt.Println(v.Admissible, v.Refusals)
	_, err := s.Resize("a", 113)
	fmt.Println(md.CheckResize("a", 113, allocator.Allocation{}, err))
	grown, err := s.Resize("a", 16)
	fmt.Println(md.CheckResize("a", 16, grown, err), md.DecideResize("a", 16).DenseSpans)
	// Output:
	// false [no NUMA placement satisfies the policy]
	// <nil>
	// <nil> [0]
}

// TestCheckWantsTheSplit: on a small machine Check refuses an allocation on
// the preferred span whose amounts per node are not the span's split.
func TestCheckWantsTheSplit(t *testing.T) {
	m := rankMachine(t)
	md := model(t, m)
	r := &allocator.Request{ID: "g", GPUs: 4, CPUs: 6, Policy: policy.BestEffort}
	a, err := md.Place(r)
	require.NoError(t, err)
	require.NoError(t, md.Check(r, a, nil))
	assert.Equal(t, []int{0, 1, 2, 3}, a.GPUs, "3 GPUs from node 0, 1 from node 1")
	assert.Equal(t, 5, a.CPUs.IntersectionCount(m.NodeCPUs(0)))
	// The same span with the CPUs 3 and 3.
	even := a.Clone()
	even.CPUs = numa.NewCPUSet(0, 1, 2, 8, 9, 10)
	err = md.Check(r, even, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cpu per node [3 3 0 0], the split gives [5 1 0 0]")
}
