package allocator

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// swapped returns rankOrder with criteria a and b exchanged.
func swapped(a, b criterion) []criterion {
	order := slices.Clone(rankOrder)
	ia, ib := -1, -1
	for i, c := range order {
		if startsWith([]criterion{c}, a) {
			ia = i
		}
		if startsWith([]criterion{c}, b) {
			ib = i
		}
	}
	order[ia], order[ib] = order[ib], order[ia]
	return order
}

// TestRankOrder ranks two fixed spans both ways: near (nodes 0 and 1,
// distance 12, its GPUs under two PCIe switches) against tidy (nodes 0 and
// 2, distance 20, its GPUs under one switch per node). rankOrder puts the
// distance before the penalty, so near wins; with the two criteria
// swapped, which is a change of the one list rankOrder, tidy wins, and
// the shortcuts that need the sets and the distance first turn off.
func TestRankOrder(t *testing.T) {
	near := rank{sets: 1, distance: 12, penalty: [maxKinds]int64{1}, span: numa.MaskOf(0, 1)}
	tidy := rank{sets: 1, distance: 20, penalty: [maxKinds]int64{0}, span: numa.MaskOf(0, 2)}
	require.Negative(t, compareRanks(&near, &tidy, 1), "the distance comes before the penalty")
	require.Positive(t, compareRanks(&tidy, &near, 1))
	require.True(t, setsFirst)

	order := swapped(critDistance, critPenalty)
	require.Positive(t, compareRanksBy(order, &near, &tidy, 1), "the penalty first: tidy wins")
	require.Negative(t, compareRanksBy(order, &tidy, &near, 1))
	require.True(t, startsWith(order, critRule, critSets), "only the two criteria moved")
	require.False(t, startsWith(order, critRule, critSets, critDistance))

	// The order is total: only a span equals itself.
	require.Zero(t, compareRanks(&near, &near, 1))
	twin := near
	twin.span = numa.MaskOf(2, 3)
	require.Negative(t, compareRanks(&near, &twin, 1), "the lower node indices last")
}

// TestImproveFollowsTheOrder: with the order changed (the penalty before
// the sets and the distance), the local search of a large pool optimises
// that order: no single swap of the chosen span's nodes that still covers
// ranks lower under it.
func TestImproveFollowsTheOrder(t *testing.T) {
	m, err := topology.Preset("numa64")
	require.NoError(t, err)
	s := MustNew(m, Options{SearchBudget: 1 << 16})
	// The nodes of socket 0 keep 14 free CPUs with two broken cores (one
	// thread of each held), the others 12 free CPUs in whole cores: the
	// admission's cover is made of socket 0's nodes, which pay a CPU
	// penalty that spans reaching into socket 1 pay less of.
	for i := 0; i < m.NumNodes(); i++ {
		cpus := numa.CPURange(8*i, 8*i+1)
		if i >= 8 {
			cpus = cpus.Union(numa.CPURange(512+8*i, 512+8*i+1))
		}
		_, err := s.Claim(Allocation{ID: "c" + string(rune('A'+i)), Policy: policy.None, CPUs: cpus})
		require.NoError(t, err)
	}
	order := []criterion{critRule, critPenalty, critLeft, critSets, critDistance, critStranded, critSpan}
	saved, savedFirst, savedBits := rankOrder, setsFirst, rankBits
	rankOrder, setsFirst, rankBits = order, startsWith(order, critRule, critSets, critDistance), orderBits(order)
	t.Cleanup(func() { rankOrder, setsFirst, rankBits = saved, savedFirst, savedBits })
	require.False(t, setsFirst)

	r := &Request{ID: "x", CPUs: 40, GPUs: 5, Policy: policy.BestEffort}
	sr := s.searcher(r, nil)
	defer sr.done()
	require.NoError(t, sr.decide(true))
	span := sr.plan.span
	require.Equal(t, 3, span.Count())
	require.NotZero(t, span&^numa.FirstN(8), "the penalty before the sets: the span reaches into socket 1")
	var best rank
	sr.rankOf(span, &best)
	p := &sr.freeP
	p.Clip()
	for i := range span.All() {
		for j := range (m.AllNodes() &^ span).All() {
			next := span.Without(i).With(j)
			if !p.Covers(next) {
				continue
			}
			var rk rank
			sr.rankOf(next, &rk)
			require.GreaterOrEqual(t, compareRanks(&rk, &best, sr.k), 0, "swapping %d for %d ranks lower", i, j)
		}
	}
}

// TestProportionalAnyTotal checks proportional's split when the weights
// sum to 2^56 or more (no packed keys then): weights scaled by 2^57 give
// the same floors and the same order of fractional parts as the weights
// themselves (whose split takes the packed keys), so the same split.
// (Scaled by 2^54, weights of a total of at least 4 sum to 2^56 or more.)
func TestProportionalAnyTotal(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 12).Draw(rt, "n")
		need := rapid.Int64Range(0, 40).Draw(rt, "need")
		var small, big [numa.MaxNodes]int64
		free := make([]int64, numa.MaxNodes)
		order := make([]int8, n)
		for p := range order {
			order[p] = int8(p)
			small[p] = rapid.Int64Range(0, 31).Draw(rt, "w")
			big[p] = small[p] << 54
			free[p] = rapid.Int64Range(0, 20).Draw(rt, "free")
		}
		var total int64
		for p := range order {
			total += small[p]
		}
		if total < 4 {
			return
		}
		var want, got [numa.MaxNodes]int64
		var scr splitScratch
		proportional(need, &small, free, order, &want, &scr)
		proportional(need, &big, free, order, &got, &scr)
		require.Equal(rt, want, got)
	})
}
