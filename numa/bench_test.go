package numa_test

import (
	"testing"

	"github.com/numaplace/numaplace/numa"
)

// Sinks keep the compiler from removing the benchmarked calls.
var (
	sinkMask  numa.Mask
	sinkInt   int
	sinkBool  bool
	sinkFloat float64
)

func BenchmarkMask(b *testing.B) {
	x := numa.MaskOf(0, 3, 5, 17, 33, 63)
	y := numa.MaskOf(1, 3, 17, 40)
	b.Run("Union", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkMask = x.Union(y)
		}
	})
	b.Run("Count", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkInt = x.Count()
		}
	})
	b.Run("IsNarrowerThan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkBool = x.IsNarrowerThan(y)
		}
	})
}

// BenchmarkMaskSubsets walks every k-subset of an n-node mask; ns/op is per
// full walk, so divide by binomial(n, k) for the cost of one subset.
func BenchmarkMaskSubsets(b *testing.B) {
	for _, c := range []struct {
		name string
		m    numa.Mask
		k    int
	}{
		{"8choose4", numa.FirstN(8), 4},                                 // 70 subsets
		{"16choose2", numa.FirstN(16), 2},                               // 120 subsets
		{"64choose2", numa.FirstN(64), 2},                               // 2016 subsets
		{"sparse12choose6", 0x8421_0842_1084_2108 & numa.FirstN(64), 6}, // 924 subsets of 12 spread bits
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				for s := range c.m.Subsets(c.k) {
					n += int(s & 1)
				}
				sinkInt = n
			}
		})
	}
}

func BenchmarkMaskSubmasks(b *testing.B) {
	m := numa.FirstN(8) // 255 submasks
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for s := range m.Submasks() {
			n += int(s & 1)
		}
		sinkInt = n
	}
}

// benchSets returns two overlapping sets of a 224-CPU machine (a dgx-h100's
// size): every other CPU of 0-223, and the CPUs 0-111.
func benchSets() (a, b numa.CPUSet) {
	for c := 0; c < 224; c += 2 {
		a.Add(c)
	}
	return a, numa.CPURange(0, 111)
}

func BenchmarkCPUSet(b *testing.B) {
	x, y := benchSets()
	b.Run("IntersectionCount", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkInt = x.IntersectionCount(y)
		}
	})
	b.Run("DifferenceCount", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkInt = x.DifferenceCount(y)
		}
	})
	b.Run("IsSubsetOf", func(b *testing.B) {
		sub := y.Intersection(x)
		b.ReportAllocs()
		for b.Loop() {
			sinkBool = sub.IsSubsetOf(x)
		}
	})
	b.Run("Equal", func(b *testing.B) {
		same := x.Clone()
		b.ReportAllocs()
		for b.Loop() {
			sinkBool = x.Equal(same)
		}
	})
	b.Run("Size", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkInt = x.Size()
		}
	})
	b.Run("UnionWith", func(b *testing.B) {
		dst := numa.CPURange(0, 223) // pre-sized: never grows
		b.ReportAllocs()
		for b.Loop() {
			dst.Clear()
			dst.UnionWith(x)
			dst.UnionWith(y)
		}
		sinkInt = dst.Size()
	})
	b.Run("RemoveAll", func(b *testing.B) {
		dst := numa.CPURange(0, 223)
		b.ReportAllocs()
		for b.Loop() {
			dst.CopyFrom(x)
			dst.RemoveAll(y)
		}
		sinkInt = dst.Size()
	})
	b.Run("Intersection", func(b *testing.B) { // the allocating form, for comparison
		b.ReportAllocs()
		for b.Loop() {
			sinkInt = x.Intersection(y).Size()
		}
	})
	b.Run("String", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkInt = len(x.String())
		}
	})
	b.Run("Parse", func(b *testing.B) {
		s := "0-27,56-83,112-139,168-195"
		b.ReportAllocs()
		for b.Loop() {
			c, _ := numa.ParseCPUSet(s)
			sinkInt = c.Size()
		}
	})
}

// distanceTable returns an n-node table with IDs 0..n-1 and distances that
// grow with the gap between IDs.
func distanceTable(tb testing.TB, n int) numa.Distances {
	ids := make([]numa.NodeID, n)
	rows := make([][]int, n)
	for i := range n {
		ids[i] = numa.NodeID(i)
		rows[i] = make([]int, n)
		for j := range n {
			rows[i][j] = 10
			if i != j {
				rows[i][j] = 11 + (i-j)*(i-j)%200
			}
		}
	}
	d, err := numa.NewDistances(ids, rows)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

func BenchmarkDistancesAverage(b *testing.B) {
	for _, c := range []struct {
		name string
		n    int
		m    numa.Mask
	}{
		{"numa2/2nodes", 2, numa.FirstN(2)},
		{"numa8/4nodes", 8, numa.MaskOf(0, 2, 4, 6)},
		{"numa64/8nodes", 64, numa.MaskOf(0, 9, 18, 27, 36, 45, 54, 63)},
		{"numa64/64nodes", 64, numa.FirstN(64)},
	} {
		d := distanceTable(b, c.n)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkFloat = d.Average(c.m)
			}
		})
	}
}

// TestNoAllocs shows, by counting allocations rather than timing anything,
// that the hot-path forms allocate nothing.
func TestNoAllocs(t *testing.T) {
	x := numa.MaskOf(0, 3, 5, 17, 33, 63)
	y := numa.MaskOf(1, 3, 17, 40)
	a, b := benchSets()
	sub := b.Intersection(a)
	same := a.Clone()
	dst := numa.CPURange(0, 300) // larger than any operand: never grows
	d := distanceTable(t, 64)
	idx := make([]int, 0, 64)

	tests := []struct {
		name string
		f    func()
	}{
		{"Mask set ops", func() {
			sinkMask = x.Union(y).Intersection(x).Difference(y).With(9).Without(3)
		}},
		{"Mask queries", func() {
			sinkInt = x.Count() + x.Lowest() + x.Highest()
			sinkBool = x.Contains(5) && x.IsSubsetOf(y) && x.IsNarrowerThan(y) && x.Equal(y) && x.IsEmpty()
		}},
		{"Mask.Indices into capacity", func() { idx = x.Indices(idx[:0]) }},
		{"Mask.All", func() {
			for i := range x.All() {
				sinkInt += i
			}
		}},
		{"Mask.Subsets", func() {
			for s := range numa.FirstN(16).Subsets(3) {
				sinkMask |= s
			}
		}},
		{"Mask.Submasks", func() {
			for s := range numa.FirstN(8).Submasks() {
				sinkMask |= s
			}
		}},
		{"CPUSet count-only forms", func() {
			sinkInt = a.Size() + a.IntersectionCount(b) + a.DifferenceCount(b) + a.Min() + a.Max()
			sinkBool = sub.IsSubsetOf(a) && a.Equal(same) && a.Intersects(b) && a.Contains(4) && a.IsEmpty()
		}},
		{"CPUSet.All", func() {
			for c := range a.All() {
				sinkInt += c
			}
		}},
		{"CPUSet in place", func() {
			dst.Clear()
			dst.UnionWith(a)
			dst.UnionWith(b)
			dst.IntersectWith(same)
			dst.RemoveAll(b)
			dst.Add(7)
			dst.AddRange(100, 120)
			dst.Remove(7)
			dst.CopyFrom(b)
		}},
		{"Distances", func() {
			sinkFloat = d.Average(x) + d.Average(numa.MaskOf(4))
			s, p := d.Sum(numa.FirstN(64))
			sinkInt = s + p
			v, _ := d.Distance(3, 40)
			sinkInt += v + d.At(1, 2)
			i, _ := d.Index(17)
			sinkInt += i
		}},
	}
	// The measurement itself works: the allocating form does allocate.
	if n := testing.AllocsPerRun(10, func() { sinkInt = a.Intersection(b).Size() }); n == 0 {
		t.Fatalf("CPUSet.Intersection: AllocsPerRun saw no allocation")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, tt.f); n != 0 {
				t.Fatalf("%s: %v allocations per run, want 0", tt.name, n)
			}
		})
	}
}
