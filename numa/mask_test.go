package numa_test

import (
	"iter"
	"math/bits"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
)

const full = ^numa.Mask(0)

func TestMaskOf(t *testing.T) {
	require.Equal(t, numa.Mask(0), numa.MaskOf())
	require.Equal(t, numa.Mask(0b1011), numa.MaskOf(0, 1, 3))
	require.Equal(t, numa.Mask(1)<<63, numa.MaskOf(63))
	require.Equal(t, numa.Mask(0b11), numa.MaskOf(1, 0, 1), "duplicates are harmless")
	require.Panics(t, func() { numa.MaskOf(64) })
	require.Panics(t, func() { numa.MaskOf(-1) })
}

func TestFirstN(t *testing.T) {
	tests := []struct {
		n    int
		want numa.Mask
	}{
		{-5, 0},
		{0, 0},
		{1, 1},
		{3, 0b111},
		{63, full >> 1},
		{64, full},
		{100, full},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, numa.FirstN(tt.n), "FirstN(%d)", tt.n)
	}
}

func TestMaskSetOps(t *testing.T) {
	a := numa.MaskOf(0, 1, 2, 63)
	b := numa.MaskOf(2, 3, 63)
	tests := []struct {
		name string
		got  numa.Mask
		want numa.Mask
	}{
		{"union", a.Union(b), numa.MaskOf(0, 1, 2, 3, 63)},
		{"union empty", a.Union(0), a},
		{"union full", a.Union(full), full},
		{"intersection", a.Intersection(b), numa.MaskOf(2, 63)},
		{"intersection empty", a.Intersection(0), 0},
		{"intersection full", a.Intersection(full), a},
		{"difference", a.Difference(b), numa.MaskOf(0, 1)},
		{"difference reversed", b.Difference(a), numa.MaskOf(3)},
		{"difference full", a.Difference(full), 0},
		{"full minus bit 63", full.Difference(numa.MaskOf(63)), numa.FirstN(63)},
		{"with", a.With(5), numa.MaskOf(0, 1, 2, 5, 63)},
		{"with present", a.With(0), a},
		{"with 63", numa.Mask(0).With(63), numa.Mask(1) << 63},
		{"without", a.Without(63), numa.MaskOf(0, 1, 2)},
		{"without absent", a.Without(10), a},
		{"without negative", a.Without(-1), a},
		{"without 64", a.Without(64), a},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.got)
		})
	}
	require.Panics(t, func() { a.With(64) })
	require.Panics(t, func() { a.With(-1) })
}

func TestMaskQueries(t *testing.T) {
	tests := []struct {
		name           string
		m              numa.Mask
		count          int
		lowest         int
		highest        int
		indices        []int
		str            string
		containsIn     []int
		containsNotIn  []int
		subsetOf       numa.Mask
		notSubsetOf    numa.Mask
		wantEmpty      bool
		wantSubsetSelf bool
	}{
		{
			name: "empty", m: 0, count: 0, lowest: -1, highest: -1, indices: nil, str: "",
			containsNotIn: []int{-1, 0, 63, 64}, subsetOf: 0, notSubsetOf: 0, wantEmpty: true,
		},
		{
			name: "one", m: numa.MaskOf(5), count: 1, lowest: 5, highest: 5, indices: []int{5}, str: "5",
			containsIn: []int{5}, containsNotIn: []int{4, 6, -1, 64}, subsetOf: numa.MaskOf(5, 6),
			notSubsetOf: numa.MaskOf(4, 6),
		},
		{
			name: "bit 63", m: numa.MaskOf(63), count: 1, lowest: 63, highest: 63, indices: []int{63}, str: "63",
			containsIn: []int{63}, containsNotIn: []int{0, 62, 64}, subsetOf: full, notSubsetOf: numa.FirstN(63),
		},
		{
			name: "ranges", m: numa.MaskOf(0, 1, 2, 5, 7, 8), count: 6, lowest: 0, highest: 8,
			indices: []int{0, 1, 2, 5, 7, 8}, str: "0-2,5,7-8",
			containsIn: []int{0, 1, 2, 5, 7, 8}, containsNotIn: []int{3, 4, 6, 9},
			subsetOf: numa.FirstN(9), notSubsetOf: numa.FirstN(8),
		},
		{
			name: "range ending at 63", m: numa.MaskOf(1, 60, 61, 62, 63), count: 5, lowest: 1, highest: 63,
			indices: []int{1, 60, 61, 62, 63}, str: "1,60-63",
			containsIn: []int{1, 63}, containsNotIn: []int{0, 59}, subsetOf: full, notSubsetOf: numa.FirstN(63),
		},
		{
			name: "full", m: full, count: 64, lowest: 0, highest: 63, indices: seq(0, 64), str: "0-63",
			containsIn: []int{0, 31, 32, 63}, containsNotIn: []int{-1, 64}, subsetOf: full,
			notSubsetOf: full.Without(17),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.m
			require.Equal(t, tt.count, m.Count())
			require.Equal(t, tt.wantEmpty, m.IsEmpty())
			require.Equal(t, tt.lowest, m.Lowest())
			require.Equal(t, tt.highest, m.Highest())
			require.Equal(t, tt.indices, m.Indices(nil))
			require.Equal(t, tt.indices, collect(m.All()))
			require.Equal(t, append([]int{-7}, tt.indices...), m.Indices([]int{-7}), "Indices appends")
			require.Equal(t, tt.str, m.String())
			for _, i := range tt.containsIn {
				require.True(t, m.Contains(i), "Contains(%d)", i)
			}
			for _, i := range tt.containsNotIn {
				require.False(t, m.Contains(i), "Contains(%d)", i)
			}
			require.True(t, m.IsSubsetOf(m))
			require.True(t, m.IsSubsetOf(tt.subsetOf))
			require.True(t, numa.Mask(0).IsSubsetOf(m))
			if !m.IsEmpty() {
				require.False(t, m.IsSubsetOf(tt.notSubsetOf))
			}
			require.True(t, m.Equal(m))
			require.False(t, m.Equal(m^1))
			got, err := numa.ParseMask(tt.str)
			require.NoError(t, err)
			require.Equal(t, m, got)
		})
	}
}

func TestMaskAllBreak(t *testing.T) {
	var got []int
	for i := range numa.MaskOf(1, 4, 9, 63).All() {
		got = append(got, i)
		if len(got) == 2 {
			break
		}
	}
	require.Equal(t, []int{1, 4}, got)
}

func TestMaskIsNarrowerThan(t *testing.T) {
	tests := []struct {
		name string
		m, o numa.Mask
		want bool
	}{
		{"fewer nodes first", numa.MaskOf(7), numa.MaskOf(0, 1), true},
		{"more nodes later", numa.MaskOf(0, 1), numa.MaskOf(7), false},
		{"empty before anything", 0, numa.MaskOf(63), true},
		{"equal is not narrower", numa.MaskOf(2, 3), numa.MaskOf(2, 3), false},
		{"empty vs empty", 0, 0, false},
		{"lower index first", numa.MaskOf(0, 5), numa.MaskOf(1, 2), true},
		{"lower index first reversed", numa.MaskOf(1, 2), numa.MaskOf(0, 5), false},
		// Sorted lists [0 2 9] and [0 3 4]: first difference 2 < 3.
		{"lexicographic on sorted lists", numa.MaskOf(0, 2, 9), numa.MaskOf(0, 3, 4), true},
		{"lexicographic on sorted lists reversed", numa.MaskOf(0, 3, 4), numa.MaskOf(0, 2, 9), false},
		{"bit 63", numa.MaskOf(62), numa.MaskOf(63), true},
		{"full vs full minus one", full.Without(0), full, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.m.IsNarrowerThan(tt.o))
		})
	}
}

func TestParseMask(t *testing.T) {
	tests := []struct {
		in      string
		want    numa.Mask
		wantErr bool
	}{
		{in: "", want: 0},
		{in: "  \n", want: 0},
		{in: "0", want: 1},
		{in: "63", want: numa.MaskOf(63)},
		{in: "0-63", want: full},
		{in: "0-2,5", want: numa.MaskOf(0, 1, 2, 5)},
		{in: " 0 - 2 , 5 \n", want: numa.MaskOf(0, 1, 2, 5)},
		{in: "5,0-2", want: numa.MaskOf(0, 1, 2, 5), wantErr: false},
		{in: "3-3", want: numa.MaskOf(3)},
		{in: "1,1", want: numa.MaskOf(1)},
		{in: "64", wantErr: true},
		{in: "0-64", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "3-1", wantErr: true},
		{in: "1,,2", wantErr: true},
		{in: "1,", wantErr: true},
		{in: "a", wantErr: true},
		{in: "1-2-3", wantErr: true},
		{in: "0x1", wantErr: true},
		{in: "99999999999999999999", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := numa.ParseMask(tt.in)
			if tt.wantErr {
				require.ErrorIs(t, err, numa.ErrInvalidMask)
				require.Contains(t, err.Error(), tt.in, "the error quotes the input")
				require.Equal(t, numa.Mask(0), got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestSubmasks(t *testing.T) {
	for _, m := range []numa.Mask{0, 1, numa.MaskOf(63), numa.MaskOf(0, 3, 7), numa.MaskOf(1, 2, 33, 34, 45, 63), numa.FirstN(10)} {
		t.Run(m.String(), func(t *testing.T) {
			var got []numa.Mask
			seen := map[numa.Mask]bool{}
			for s := range m.Submasks() {
				require.NotZero(t, s, "the empty mask is not yielded")
				require.True(t, s.IsSubsetOf(m), "%v is not a subset of %v", s, m)
				require.False(t, seen[s], "%v yielded twice", s)
				seen[s] = true
				got = append(got, s)
			}
			require.Len(t, got, 1<<m.Count()-1)
			require.True(t, slices.IsSorted(got), "increasing numeric order")
		})
	}
}

func TestSubmasksBreak(t *testing.T) {
	n := 0
	for range full.Submasks() { // 2^64-1 submasks: only an early break ends this
		n++
		if n == 5 {
			break
		}
	}
	require.Equal(t, 5, n)
}

func binomial(n, k int) int {
	if k < 0 || k > n {
		return 0
	}
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
	}
	return r
}

func TestSubsets(t *testing.T) {
	masks := []numa.Mask{0, numa.MaskOf(4), numa.MaskOf(0, 3, 7, 63), numa.MaskOf(1, 2, 33, 34, 45, 63), numa.FirstN(12)}
	for _, m := range masks {
		n := m.Count()
		for k := -1; k <= n+1; k++ {
			t.Run(m.String()+"/"+itoa(k), func(t *testing.T) {
				var got []numa.Mask
				for s := range m.Subsets(k) {
					require.Equal(t, k, s.Count())
					require.True(t, s.IsSubsetOf(m))
					got = append(got, s)
				}
				require.Len(t, got, binomial(n, k))
				// Documented order: increasing numeric value (colexicographic),
				// first the k lowest indices, last the k highest.
				require.True(t, slices.IsSorted(got))
				require.Len(t, slices.Compact(slices.Clone(got)), len(got), "all distinct")
				if len(got) > 0 {
					idx := m.Indices(nil)
					require.Equal(t, maskOfSlice(idx[:k]), got[0])
					require.Equal(t, maskOfSlice(idx[n-k:]), got[len(got)-1])
				}
			})
		}
	}
}

func TestSubsetsOrderExample(t *testing.T) {
	m := numa.MaskOf(1, 4, 6, 9)
	var got []string
	for s := range m.Subsets(2) {
		got = append(got, s.String())
	}
	require.Equal(t, []string{"1,4", "1,6", "4,6", "1,9", "4,9", "6,9"}, got)
}

func TestSubsetsEdges(t *testing.T) {
	t.Run("k=0 yields the empty mask once", func(t *testing.T) {
		require.Equal(t, []numa.Mask{0}, collect(numa.MaskOf(1, 2).Subsets(0)))
		require.Equal(t, []numa.Mask{0}, collect(numa.Mask(0).Subsets(0)))
	})
	t.Run("k>n yields nothing", func(t *testing.T) {
		require.Empty(t, collect(numa.MaskOf(1, 2).Subsets(3)))
		require.Empty(t, collect(full.Subsets(65)))
	})
	t.Run("k<0 yields nothing", func(t *testing.T) {
		require.Empty(t, collect(numa.MaskOf(1, 2).Subsets(-1)))
	})
	t.Run("k=n=64", func(t *testing.T) {
		require.Equal(t, []numa.Mask{full}, collect(full.Subsets(64)))
	})
	t.Run("k=63 of 64", func(t *testing.T) {
		got := collect(full.Subsets(63))
		require.Len(t, got, 64)
		require.Equal(t, full.Without(63), got[0])
		require.Equal(t, full.Without(0), got[63])
	})
	t.Run("k=1 of 64", func(t *testing.T) {
		got := collect(full.Subsets(1))
		require.Len(t, got, 64)
		for i, s := range got {
			require.Equal(t, numa.MaskOf(i), s)
		}
	})
	t.Run("k=2 of 64", func(t *testing.T) {
		require.Len(t, collect(full.Subsets(2)), 64*63/2)
	})
	t.Run("k=n on a sparse mask", func(t *testing.T) {
		m := numa.MaskOf(0, 33, 63)
		require.Equal(t, []numa.Mask{m}, collect(m.Subsets(3)))
	})
	t.Run("early break", func(t *testing.T) {
		n := 0
		for range full.Subsets(32) { // about 1.8e18 subsets
			n++
			if n == 3 {
				break
			}
		}
		require.Equal(t, 3, n)
		n = 0
		for range numa.MaskOf(1, 2).Subsets(0) {
			n++
			break
		}
		require.Equal(t, 1, n)
	})
}

// genMask draws a mask biased towards the interesting cases (empty, full,
// high bits) as well as uniformly random words.
func genMask() *rapid.Generator[numa.Mask] {
	return rapid.OneOf(
		rapid.Custom(func(t *rapid.T) numa.Mask { return numa.Mask(rapid.Uint64().Draw(t, "word")) }),
		rapid.Custom(func(t *rapid.T) numa.Mask {
			idx := rapid.SliceOfN(rapid.IntRange(0, 63), 0, 8).Draw(t, "indices")
			return numa.MaskOf(idx...)
		}),
		rapid.SampledFrom([]numa.Mask{0, full, numa.MaskOf(63), numa.FirstN(63)}),
	)
}

func TestMaskLaws(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genMask().Draw(t, "a")
		b := genMask().Draw(t, "b")
		c := genMask().Draw(t, "c")
		eq := func(x, y numa.Mask, law string) {
			if x != y {
				t.Fatalf("%s: %v != %v", law, x, y)
			}
		}
		eq(a.Union(b), b.Union(a), "union commutes")
		eq(a.Intersection(b), b.Intersection(a), "intersection commutes")
		eq(a.Union(b).Union(c), a.Union(b.Union(c)), "union associates")
		eq(a.Intersection(b).Intersection(c), a.Intersection(b.Intersection(c)), "intersection associates")
		eq(a.Intersection(b.Union(c)), a.Intersection(b).Union(a.Intersection(c)), "distributes")
		eq(a.Difference(b.Union(c)), a.Difference(b).Intersection(a.Difference(c)), "A\\(B∪C) = (A\\B)∩(A\\C)")
		eq(a.Difference(b.Intersection(c)), a.Difference(b).Union(a.Difference(c)), "A\\(B∩C) = (A\\B)∪(A\\C)")
		eq(a.Difference(b), a.Intersection(full.Difference(b)), "A\\B = A∩¬B")
		eq(a.Difference(a), 0, "A\\A = ∅")
		eq(a.Difference(b).Intersection(b), 0, "(A\\B)∩B = ∅")
		eq(a.Difference(b).Union(a.Intersection(b)), a, "(A\\B)∪(A∩B) = A")
		if a.Union(b).Count()+a.Intersection(b).Count() != a.Count()+b.Count() {
			t.Fatalf("|A∪B|+|A∩B| != |A|+|B|")
		}
		if a.IsSubsetOf(b) != a.Difference(b).IsEmpty() {
			t.Fatalf("IsSubsetOf disagrees with Difference")
		}
		if a.Count() != len(a.Indices(nil)) || a.Count() != bits.OnesCount64(uint64(a)) {
			t.Fatalf("Count disagrees with Indices")
		}
		if a != maskOfSlice(collect(a.All())) {
			t.Fatalf("All does not rebuild the mask")
		}
		if a.IsNarrowerThan(b) && b.IsNarrowerThan(a) {
			t.Fatalf("IsNarrowerThan is not antisymmetric")
		}
		if a != b && !a.IsNarrowerThan(b) && !b.IsNarrowerThan(a) {
			t.Fatalf("IsNarrowerThan is not total on distinct masks")
		}
		if a.IsNarrowerThan(b) && b.IsNarrowerThan(c) && !a.IsNarrowerThan(c) {
			t.Fatalf("IsNarrowerThan is not transitive")
		}
		i := rapid.IntRange(0, 63).Draw(t, "i")
		if !a.With(i).Contains(i) || a.Without(i).Contains(i) {
			t.Fatalf("With/Without/Contains disagree at %d", i)
		}
		if a.With(i).Without(i) != a.Without(i) {
			t.Fatalf("With then Without")
		}
	})
}

func TestMaskStringRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := genMask().Draw(t, "m")
		got, err := numa.ParseMask(m.String())
		if err != nil {
			t.Fatalf("ParseMask(%q): %v", m.String(), err)
		}
		if got != m {
			t.Fatalf("ParseMask(%q) = %#x, want %#x", m.String(), uint64(got), uint64(m))
		}
	})
}

func TestSubsetsAgreesWithSubmasks(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		idx := rapid.SliceOfNDistinct(rapid.IntRange(0, 63), 0, 12, rapid.ID[int]).Draw(t, "indices")
		m := numa.MaskOf(idx...)
		k := rapid.IntRange(0, len(idx)+1).Draw(t, "k")
		var want []numa.Mask
		if k == 0 {
			want = []numa.Mask{0} // Submasks leaves out the empty mask.
		}
		for s := range m.Submasks() {
			if s.Count() == k {
				want = append(want, s)
			}
		}
		got := collect(m.Subsets(k))
		// Both walk in increasing numeric order, so the lists match exactly.
		if !slices.Equal(got, want) {
			t.Fatalf("Subsets(%d) of %v = %v, want %v", k, m, got, want)
		}
	})
}

// Helpers shared by the package's tests.

func collect[T any](s iter.Seq[T]) []T { return slices.Collect(s) }

func seq(lo, hi int) []int {
	var out []int
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

func maskOfSlice(idx []int) numa.Mask { return numa.MaskOf(idx...) }
