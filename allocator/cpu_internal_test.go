package allocator

import (
	"math/bits"
	"testing"

	"pgregory.net/rapid"
)

// TestLowestBits checks lowestBits against its definition, the n lowest
// set bits of w taken one by one, for every n it is called with (0 < n <
// OnesCount64(w)), on words of every density.
func TestLowestBits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := rapid.Uint64().Draw(t, "w")
		if rapid.Bool().Draw(t, "dense") {
			w |= rapid.Uint64().Draw(t, "more")
		}
		if bits.OnesCount64(w) < 2 {
			return
		}
		n := rapid.IntRange(1, bits.OnesCount64(w)-1).Draw(t, "n")
		var want uint64
		for x, k := w, 0; k < n; k, x = k+1, x&(x-1) {
			want |= x & -x
		}
		if got := lowestBits(w, n); got != want {
			t.Fatalf("lowestBits(%#x, %d) = %#x, want %#x", w, n, got, want)
		}
	})
}
