package allocator

import "github.com/numaplace/numaplace/numa"

// RankFields are the fields of a span's rank, as the external tests give
// them (allocatortest.Rank's, of at most maxKinds kinds).
type RankFields struct {
	RuleBroken bool
	Sets       int
	Distance   int
	Penalty    []int64
	Stranded   int64
	Left       []int64
	Span       numa.Mask
}

// CompareRankFields compares two ranks with the engine's own comparison,
// compareRanks, so that the external tests can check the engine's order
// against the reference model's independent statement of it.
func CompareRankFields(a, b RankFields) int {
	conv := func(f RankFields) rank {
		r := rank{ruleBroken: f.RuleBroken, sets: f.Sets, distance: f.Distance, stranded: f.Stranded, span: f.Span}
		copy(r.penalty[:], f.Penalty)
		copy(r.left[:], f.Left)
		return r
	}
	ra, rb := conv(a), conv(b)
	return compareRanks(&ra, &rb, max(len(a.Penalty), len(a.Left)))
}
