package allocator

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/numaplace/numaplace/numa"
)

// TestLargestMaskIsSortedPrefix checks that largestMask picks exactly the
// first w nodes of sortAscendingDesc's order, on random pools whose keys
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
		sortAscendingDesc(ord, &key, mx, mn)
		w := 1 + rng.IntN(len(nodes))
		if got, want := largestMask(nodes, &key, w, mx, mn), maskOf(ord[:w]); got != want {
			t.Fatalf("trial %d: w=%d of %v keys %v: largestMask %v, sorted prefix %v", trial, w, nodes, key, got, want)
		}
	}
}
