package cover

import (
	"cmp"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
)

// drawKeys draws n keys of one of several shapes: few distinct values, a
// spread below countingRange, a wide spread, and one beyond 2^56.
func drawKeys(t *rapid.T, n int) []int64 {
	spread := rapid.SampledFrom([]int64{0, 2, 200, 300, 1 << 20, 1 << 40, 1 << 57, 1 << 61}).Draw(t, "spread")
	base := rapid.Int64Range(0, 1<<20).Draw(t, "base")
	keys := make([]int64, n)
	for j := range keys {
		keys[j] = base + rapid.Int64Range(0, spread).Draw(t, "key")
	}
	return keys
}

// TestSortDescAgrees: SortDesc (counting, bucket, packed and closure
// paths) orders any nodes like a stable sort by key descending, the lower
// index first on a tie, and counts the distinct keys.
func TestSortDescAgrees(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, numa.MaxNodes).Draw(t, "n")
		keys := drawKeys(t, n)
		var key [numa.MaxNodes]int64
		all := make([]int, numa.MaxNodes)
		for i := range all {
			all[i] = i
		}
		nodes := rapid.Permutation(all).Draw(t, "nodes")[:n]
		slices.Sort(nodes)
		if rapid.Bool().Draw(t, "shuffled") {
			nodes = rapid.Permutation(nodes).Draw(t, "order")
		}
		ord := make([]int8, n)
		for j, i := range nodes {
			key[i] = keys[j]
			ord[j] = int8(i)
		}
		want := slices.Clone(ord)
		slices.SortFunc(want, func(a, b int8) int { return cmp.Or(cmp.Compare(key[b], key[a]), cmp.Compare(a, b)) })
		distinct := 0
		for j := range want {
			if j == 0 || key[want[j]] != key[want[j-1]] {
				distinct++
			}
		}
		asc := slices.IsSorted(ord)
		var buf [numa.MaxNodes]uint64
		d := SortDesc(ord, &key, &buf)
		if !slices.Equal(ord, want) || d != distinct {
			t.Fatalf("SortDesc = %v (%d distinct), want %v (%d)", ord, d, want, distinct)
		}
		if asc && n > 0 { // orderAscendingDesc: the same order, for nodes in ascending order
			ord2 := slices.Sorted(slices.Values(ord))
			mx, mn := key[ord2[0]], key[ord2[0]]
			for _, i := range ord2 {
				mx, mn = max(mx, key[i]), min(mn, key[i])
			}
			orderAscendingDesc(ord2, &key, mx, mn)
			if !slices.Equal(ord2, want) {
				t.Fatalf("orderAscendingDesc = %v, want %v", ord2, want)
			}
		}
	})
}

// TestSelectionsAgree: SumLargest and fewestLargest give what a sort by
// value descending gives.
func TestSelectionsAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, numa.MaxNodes).Draw(t, "n")
		v := drawKeys(t, n)
		for j := range v {
			v[j] %= 1 << 50 // sums of 64 stay far from overflowing
		}
		sorted := slices.Clone(v)
		slices.Sort(sorted)
		slices.Reverse(sorted)
		w := rapid.IntRange(-1, n+1).Draw(t, "w")
		var want int64
		for _, x := range sorted[:min(max(w, 0), n)] {
			want += x
		}
		if got := SumLargest(slices.Clone(v), w); got != want {
			t.Fatalf("SumLargest(%v, %d) = %d, want %d", v, w, got, want)
		}
		var total int64
		for _, x := range v {
			total += x
		}
		need := rapid.Int64Range(-1, total+1).Draw(t, "need")
		fewest := 0
		var acc int64
		for fewest < n && acc < need {
			acc += sorted[fewest]
			fewest++
		}
		if acc < need {
			fewest = -1
		}
		if got := fewestLargest(slices.Clone(v), need); got != fewest {
			t.Fatalf("fewestLargest(%v, %d) = %d, want %d", v, need, got, fewest)
		}
	})
}

// TestClassifyOrder: the members of the classes come ordered by the other
// kinds' amounts (lexicographic, descending), then the sorted kind
// descending, then the node, and two nodes share a class exactly when
// their other kinds' amounts are equal, on random problems of 17-64 nodes
// of up to 12 kinds (beyond the packing of ranks).
func TestClassifyOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := blankProblem()
		k := rapid.SampledFrom([]int{1, 2, 3, 5, 11, 12}).Draw(t, "kinds")
		n := rapid.IntRange(SmallPool+1, numa.MaxNodes).Draw(t, "nodes")
		c.loadRandom(t, k, n, func(int) int64 {
			return rapid.SampledFrom([]int64{1, 3, 40, 1000, 1 << 40}).Draw(t, "maxVal")
		})
		var cs classSearch
		cs.prepare(&c, numa.FirstN(n))
		if cs.uniform {
			return
		}
		cs.classify()
		sk := cs.sk
		want := make([]int8, n)
		for i := range want {
			want[i] = int8(i)
		}
		slices.SortFunc(want, func(a, b int8) int {
			for r := 0; r < c.K; r++ {
				if r != sk && c.Val[a][r] != c.Val[b][r] {
					return cmp.Compare(c.Val[b][r], c.Val[a][r])
				}
			}
			return cmp.Or(cmp.Compare(c.Val[b][sk], c.Val[a][sk]), cmp.Compare(a, b))
		})
		if got := cs.members[:n]; !slices.Equal(got, want) {
			t.Fatalf("members %v, want %v", got, want)
		}
		for j := 1; j < n; j++ {
			a, b := want[j-1], want[j]
			if same := cs.classOf[a] == cs.classOf[b]; same != sameOthers(&c, sk, a, b) {
				t.Fatalf("nodes %d and %d: one class %v, equal amounts %v", a, b, same, !same)
			}
		}
	})
}
