package allocator

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
)

// TestDistClassesAgree: the distances from a node to a set, summed by
// value (to, toAll), are the sums along the table's row, for tables of few
// distinct distances (indexed) and of many (not indexed).
func TestDistClassesAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, numa.MaxNodes).Draw(t, "n")
		values := rapid.IntRange(1, 2*maxDistValues).Draw(t, "values")
		tab := make([]int32, n*n)
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				d := int32(10 + rapid.IntRange(0, values-1).Draw(t, "d"))
				tab[i*n+j], tab[j*n+i] = d, d
			}
		}
		dc := newDistClasses(tab, n)
		all := numa.FirstN(n)
		m := numa.Mask(rapid.Uint64().Draw(t, "m")) & all
		pool := (numa.Mask(rapid.Uint64().Draw(t, "pool")) | m) & all
		var to [numa.MaxNodes]int64
		dc.toAll(pool, m, &to)
		for i := 0; i < n; i++ {
			var want int64
			for j := range m.All() {
				want += int64(tab[i*n+j])
			}
			if got := dc.to(i, m); got != want {
				t.Fatalf("to(%d, %v) = %d, want %d", i, m, got, want)
			}
			if pool.Contains(i) && to[i] != want {
				t.Fatalf("toAll(%v, %v)[%d] = %d, want %d", pool, m, i, to[i], want)
			}
		}
	})
}
