package cover

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
)

// TestLargestMaskIsSortedPrefix checks that largestMask picks exactly the
// first w nodes of SortAscendingDesc's order, on random pools whose keys
// tie often, cluster, or spread up to 2^61.
func TestLargestMaskIsSortedPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 8))
	for trial := 0; trial < 20000; trial++ {
		pool := numa.Mask(rng.Uint64())
		if trial%7 == 0 {
			pool = numa.Mask(1<<uint(rng.IntN(64)+1) - 1)
		}
		if pool == 0 {
			continue
		}
		var nodes []int8
		for wd := uint64(pool); wd != 0; wd &= wd - 1 {
			nodes = append(nodes, int8(bits.TrailingZeros64(wd)))
		}
		var key [numa.MaxNodes]int64
		spread := int64(1) << uint(rng.IntN(62))
		base := rng.Int64N(1 << 40)
		distinct := 1 + rng.IntN(len(nodes)+1)
		vals := make([]int64, distinct)
		for v := range vals {
			vals[v] = base + rng.Int64N(spread)
		}
		mx, mn := int64(-1<<63), int64(1<<62)
		for _, i := range nodes {
			key[i] = vals[rng.IntN(distinct)]
			mx, mn = max(mx, key[i]), min(mn, key[i])
		}
		ord := append([]int8(nil), nodes...)
		SortAscendingDesc(ord, &key, mx, mn)
		w := 1 + rng.IntN(len(nodes))
		if got, want := largestMask(pool, &key, w, mx, mn), maskOf(ord[:w]); got != want {
			t.Fatalf("trial %d: w=%d of %v keys %v: largestMask %v, sorted prefix %v", trial, w, nodes, key, got, want)
		}
	}
}

// TestPrepareShares: prepare's scores and makeShares' shares are share's, for demands
// that shareFast takes and for those beyond recip's bound (the division
// pass), mixed in one Problem.
func TestPrepareShares(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := blankProblem()
		k := rapid.IntRange(1, 4).Draw(t, "kinds")
		n := rapid.IntRange(SmallPool+1, numa.MaxNodes).Draw(t, "nodes")
		maxVals := make([]int64, k)
		for r := range maxVals {
			maxVals[r] = rapid.SampledFrom([]int64{1, 40, 1 << 20, 1 << 45, 1 << 55}).Draw(t, "maxVal")
		}
		c.loadRandom(t, k, n, func(r int) int64 { return maxVals[r] })
		var cs classSearch
		cs.prepare(&c, numa.FirstN(n))
		if cs.uniform {
			return
		}
		cs.makeShares()
		mx, mn := int64(0), int64(1<<62)
		for i := 0; i < n; i++ {
			var sc int64
			for r := 0; r < k; r++ {
				want := share(c.Val[i][r], c.Need[r])
				if got := cs.shares[i][r]; got != want {
					t.Fatalf("node %d kind %d: share %d of %d is %d, want %d", i, r, c.Val[i][r], c.Need[r], got, want)
				}
				sc += want
			}
			if cs.score[i] != sc {
				t.Fatalf("node %d: score %d, want %d", i, cs.score[i], sc)
			}
			mx, mn = max(mx, sc), min(mn, sc)
		}
		if cs.scoreMax != mx || cs.scoreMin != mn {
			t.Fatalf("scores between %d and %d, want %d and %d", cs.scoreMin, cs.scoreMax, mn, mx)
		}
	})
}
