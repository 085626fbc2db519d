package allocator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/numa"
)

// TestEngineOrderIsTheModels checks the engine's order of span criteria
// (rankOrder) against the reference model's (allocatortest.Criteria), one
// criterion at a time: of two ranks equal before criterion j, the one
// better at j and worse at every later criterion wins, both ways round.
// Swapping any two criteria in either list fails it at the earlier of the
// two, whatever the random seed (the property tests that compare the
// engine with the model catch such a swap only on some draws).
func TestEngineOrderIsTheModels(t *testing.T) {
	good := allocatortest.Rank{Penalty: []int64{0, 0}, Left: []int64{0, 0}, Span: numa.MaskOf(0, 1)}
	bad := allocatortest.Rank{RuleBroken: true, Sets: 2, Distance: 40, Penalty: []int64{0, 3}, Stranded: 4,
		Left: []int64{1, 0}, Span: numa.MaskOf(1, 2)}
	fields := func(r allocatortest.Rank) allocator.RankFields {
		return allocator.RankFields{RuleBroken: r.RuleBroken, Sets: r.Sets, Distance: r.Distance,
			Penalty: r.Penalty, Stranded: r.Stranded, Left: r.Left, Span: r.Span}
	}
	// mix takes good's criteria before j, at j good's (or with badAt
	// bad's), after j the other one's.
	mix := func(j int, badAt bool) allocator.RankFields {
		from := func(k int) allocatortest.Rank {
			if k < j || k == j && !badAt || k > j && badAt {
				return good
			}
			return bad
		}
		byName := map[string]allocatortest.Rank{}
		for k, name := range allocatortest.Criteria {
			byName[name] = from(k)
		}
		return fields(allocatortest.Rank{RuleBroken: byName["Rule"].RuleBroken, Sets: byName["Sets"].Sets,
			Distance: byName["Distance"].Distance, Penalty: byName["Penalty"].Penalty,
			Stranded: byName["Stranded"].Stranded, Left: byName["Left"].Left, Span: byName["Span"].Span})
	}
	require.Len(t, allocatortest.Criteria, 7, "a criterion added: give it here a good and a bad value")
	for j, name := range allocatortest.Criteria {
		a, b := mix(j, false), mix(j, true)
		require.Negative(t, allocator.CompareRankFields(a, b), "criterion %d (%s) decides before the later ones: %+v against %+v", j+1, name, a, b)
		require.Positive(t, allocator.CompareRankFields(b, a), "criterion %d (%s), the other way round", j+1, name)
	}
	require.Zero(t, allocator.CompareRankFields(fields(good), fields(good)))
}
