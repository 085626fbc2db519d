package numa_test

import (
	"encoding"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
)

var (
	_ encoding.TextMarshaler   = numa.CPUSet{}
	_ encoding.TextUnmarshaler = (*numa.CPUSet)(nil)
)

func TestParseCPUSet(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []int
		str  string // canonical String of the result
	}{
		{name: "empty", in: "", want: nil, str: ""},
		{name: "newline only", in: "\n", want: nil, str: ""},
		{name: "single", in: "5", want: []int{5}, str: "5"},
		{name: "range", in: "0-3", want: []int{0, 1, 2, 3}, str: "0-3"},
		{name: "two ranges", in: "0-3,8-11", want: []int{0, 1, 2, 3, 8, 9, 10, 11}, str: "0-3,8-11"},
		{name: "sysfs newline", in: "0-3,8-11\n", want: []int{0, 1, 2, 3, 8, 9, 10, 11}, str: "0-3,8-11"},
		{name: "spaces", in: "  0 - 1 ,\t4 ", want: []int{0, 1, 4}, str: "0-1,4"},
		{name: "unordered and overlapping", in: "9,2-4,3", want: []int{2, 3, 4, 9}, str: "2-4,9"},
		{name: "adjacent items merge", in: "0,1,2,3", want: []int{0, 1, 2, 3}, str: "0-3"},
		{name: "range of one", in: "7-7", want: []int{7}, str: "7"},
		{name: "word boundary", in: "63-64", want: []int{63, 64}, str: "63-64"},
		{name: "sparse high", in: "0,127,128,1000", want: []int{0, 127, 128, 1000}, str: "0,127-128,1000"},
		{name: "MaxCPUID", in: "65535", want: []int{numa.MaxCPUID}, str: "65535"},
		{name: "leading zeros", in: "007", want: []int{7}, str: "7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := numa.ParseCPUSet(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, collect(s.All()))
			require.Equal(t, tt.str, s.String())
			require.True(t, s.Equal(numa.NewCPUSet(tt.want...)))
			require.Equal(t, len(tt.want), s.Size())
			require.NotPanics(t, func() { numa.MustParseCPUSet(tt.in) })
		})
	}
}

func TestParseCPUSetErrors(t *testing.T) {
	tests := []struct {
		in      string
		mention string // the error must quote this
	}{
		{"a", `"a"`},
		{"3-1", `"3-1"`},
		{"1,,2", "empty item"},
		{",", "empty item"},
		{"1,", "empty item"},
		{"-1", `"-1"`},
		{"1-", `"1-"`},
		{"+1", `"+1"`},
		{"1-2-3", `"1-2-3"`},
		{"1 2", `"1 2"`},
		{"0x10", `"0x10"`},
		{"65536", "65536"},
		{"0-65536", "65536"},
		{"4000000000", "4000000000"},
		{"0-99999999999999999999", "99999999999999999999"},
		{"1.5", `"1.5"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := numa.ParseCPUSet(tt.in)
			require.ErrorIs(t, err, numa.ErrInvalidCPUSet)
			require.Contains(t, err.Error(), tt.mention)
			require.True(t, s.IsEmpty())
			require.Panics(t, func() { numa.MustParseCPUSet(tt.in) })
			var u numa.CPUSet
			require.ErrorIs(t, u.UnmarshalText([]byte(tt.in)), numa.ErrInvalidCPUSet)
		})
	}
}

func TestParseCPUMask(t *testing.T) {
	tests := []struct {
		in   string
		want string // as a cpulist
	}{
		{"00000000,0000ff00", "8-15"},
		{"ff", "0-7"},
		{"ff\n", "0-7"},
		{"0xff", "0-7"},
		{"0XF0", "4-7"},
		{"0", ""},
		{"00000000,00000000", ""},
		{"80000000", "31"},
		{"1,00000000", "32"},
		{"00000001,80000000", "31-32"},
		{"ffffffff,ffffffff", "0-63"},
		{"f,0,0", "64-67"},
		{"00000003,00000000,00000001", "0,64-65"},
		{"aBcD", "0,2-3,6-9,11,13,15"},
		{" 0000ff00 , 00000000 ", "40-47"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s, err := numa.ParseCPUMask(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, s.String())
		})
	}
}

func TestParseCPUMaskErrors(t *testing.T) {
	tests := []string{
		"",
		"  \n",
		"0x",
		"g",
		"ff,,ff",
		",ff",
		"ff,",
		"123456789", // nine digits in one word
		"-1",        // no sign
		"+1",        // no sign
		"0-3",       // a cpulist is not a hex mask
		"ff ff",     // a space is not a separator
		"0x0x1",     // one prefix only
		"1_0",       // no digit separators
		strings.Repeat("0,", numa.MaxCPUID/32+1) + "1", // above MaxCPUID
	}
	for _, in := range tests {
		name := in
		if len(name) > 20 {
			name = name[:20] + "..."
		}
		t.Run(name, func(t *testing.T) {
			s, err := numa.ParseCPUMask(in)
			require.ErrorIs(t, err, numa.ErrInvalidCPUSet)
			require.True(t, s.IsEmpty())
		})
	}
	// The largest mask accepted: exactly MaxCPUID+1 bits.
	s, err := numa.ParseCPUMask("80000000" + strings.Repeat(",00000000", (numa.MaxCPUID+1)/32-1))
	require.NoError(t, err)
	require.Equal(t, []int{numa.MaxCPUID}, s.List())
}

func TestCPUSetZeroValue(t *testing.T) {
	var z numa.CPUSet
	require.True(t, z.IsEmpty())
	require.Equal(t, 0, z.Size())
	require.Equal(t, "", z.String())
	require.Equal(t, -1, z.Min())
	require.Equal(t, -1, z.Max())
	require.Empty(t, z.List())
	require.Empty(t, collect(z.All()))
	require.False(t, z.Contains(0))
	require.True(t, z.Equal(numa.NewCPUSet()))
	require.True(t, numa.NewCPUSet().Equal(z))
	require.True(t, z.Equal(numa.MustParseCPUSet("")))
	require.True(t, z.IsSubsetOf(numa.NewCPUSet()))
	require.True(t, z.IsSubsetOf(numa.NewCPUSet(3)))
	require.False(t, numa.NewCPUSet(3).IsSubsetOf(z))
	require.Equal(t, 0, z.IntersectionCount(numa.NewCPUSet(1)))
	require.Equal(t, 0, z.DifferenceCount(numa.NewCPUSet(1)))
	require.False(t, z.Intersects(numa.NewCPUSet(1)))
	require.True(t, z.Clone().IsEmpty())
	require.True(t, z.Union(z).IsEmpty())

	// In-place forms work on the zero value too.
	z.UnionWith(numa.NewCPUSet(3, 70))
	require.Equal(t, "3,70", z.String())
	var z2 numa.CPUSet
	z2.Add(5)
	require.Equal(t, "5", z2.String())
}

func TestCPUSetEqualIgnoresStorage(t *testing.T) {
	grown := numa.NewCPUSet(1, 2, 1000) // several words of storage
	grown.Remove(1000)                  // back to one word's worth of CPUs
	fresh := numa.NewCPUSet(1, 2)
	require.True(t, grown.Equal(fresh))
	require.True(t, fresh.Equal(grown))
	require.True(t, grown.IsSubsetOf(fresh))
	require.True(t, fresh.IsSubsetOf(grown))
	require.Equal(t, "1-2", grown.String())
	require.Equal(t, 2, grown.Max())

	cleared := numa.CPURange(0, 500)
	cleared.Clear()
	require.True(t, cleared.Equal(numa.CPUSet{}))
	require.True(t, cleared.IsEmpty())
	require.Equal(t, -1, cleared.Max())

	require.False(t, numa.NewCPUSet(1, 2).Equal(numa.NewCPUSet(1, 2, 1000)))
	require.False(t, numa.NewCPUSet(1, 2, 1000).Equal(numa.NewCPUSet(1, 2)))
}

func TestCPUSetConstructors(t *testing.T) {
	require.Equal(t, "0-3,8", numa.NewCPUSet(8, 0, 1, 2, 3, 3).String())
	require.Equal(t, "4-9", numa.CPURange(4, 9).String())
	require.Equal(t, "4", numa.CPURange(4, 4).String())
	require.True(t, numa.CPURange(5, 4).IsEmpty())
	require.Equal(t, "60-200", numa.CPURange(60, 200).String())
	require.Panics(t, func() { numa.NewCPUSet(-1) })
	require.Panics(t, func() { numa.CPURange(-1, 3) })
	var s numa.CPUSet
	require.Panics(t, func() { s.Add(-2) })
	require.Panics(t, func() { s.AddRange(0, -2) })
}

func TestCPUSetClone(t *testing.T) {
	orig := numa.NewCPUSet(1, 2, 3)
	c := orig.Clone()
	c.Add(100)
	c.Remove(1)
	require.Equal(t, "1-3", orig.String(), "mutating a clone leaves the original alone")
	require.Equal(t, "2-3,100", c.String())
	orig.Add(7)
	require.Equal(t, "2-3,100", c.String(), "mutating the original leaves the clone alone")

	// The documented caveat: a plain copy shares storage.
	shared := orig
	shared.Remove(2)
	require.False(t, orig.Contains(2))
}

func TestCPUSetAllocatingOps(t *testing.T) {
	a := numa.MustParseCPUSet("0-7,64-65,200")
	b := numa.MustParseCPUSet("4-11,65")
	tests := []struct {
		name string
		got  numa.CPUSet
		want string
	}{
		{"union", a.Union(b), "0-11,64-65,200"},
		{"union empty", a.Union(numa.CPUSet{}), "0-7,64-65,200"},
		{"empty union", numa.CPUSet{}.Union(a), "0-7,64-65,200"},
		{"intersection", a.Intersection(b), "4-7,65"},
		{"intersection reversed", b.Intersection(a), "4-7,65"},
		{"intersection empty", a.Intersection(numa.CPUSet{}), ""},
		{"difference", a.Difference(b), "0-3,64,200"},
		{"difference reversed", b.Difference(a), "8-11"},
		{"difference self", a.Difference(a), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.got.String())
		})
	}
	require.Equal(t, "0-7,64-65,200", a.String(), "operands unchanged")
	require.Equal(t, "4-11,65", b.String(), "operands unchanged")
}

func TestCPUSetInPlaceOps(t *testing.T) {
	tests := []struct {
		name string
		op   func(s *numa.CPUSet)
		from string
		want string
	}{
		{"add", func(s *numa.CPUSet) { s.Add(9) }, "0-3", "0-3,9"},
		{"add far", func(s *numa.CPUSet) { s.Add(4000) }, "0-3", "0-3,4000"},
		{"add range", func(s *numa.CPUSet) { s.AddRange(60, 70) }, "0-3", "0-3,60-70"},
		{"add empty range", func(s *numa.CPUSet) { s.AddRange(9, 8) }, "0-3", "0-3"},
		{"remove", func(s *numa.CPUSet) { s.Remove(2) }, "0-3", "0-1,3"},
		{"remove absent", func(s *numa.CPUSet) { s.Remove(2000) }, "0-3", "0-3"},
		{"remove negative", func(s *numa.CPUSet) { s.Remove(-1) }, "0-3", "0-3"},
		{"clear", func(s *numa.CPUSet) { s.Clear() }, "0-3,100", ""},
		{"union with", func(s *numa.CPUSet) { s.UnionWith(numa.NewCPUSet(2, 130)) }, "0-1", "0-2,130"},
		{"union with empty", func(s *numa.CPUSet) { s.UnionWith(numa.CPUSet{}) }, "0-1", "0-1"},
		{"intersect with", func(s *numa.CPUSet) { s.IntersectWith(numa.MustParseCPUSet("1-2,100")) }, "0-3,100,300", "1-2,100"},
		{"intersect with shorter", func(s *numa.CPUSet) { s.IntersectWith(numa.NewCPUSet(0)) }, "0,300", "0"},
		{"remove all", func(s *numa.CPUSet) { s.RemoveAll(numa.MustParseCPUSet("1-2,300")) }, "0-3,100", "0,3,100"},
		{"remove all longer", func(s *numa.CPUSet) { s.RemoveAll(numa.NewCPUSet(0, 5000)) }, "0-3", "1-3"},
		{"copy from", func(s *numa.CPUSet) { s.CopyFrom(numa.NewCPUSet(7, 99)) }, "0-3,500", "7,99"},
		{"copy from empty", func(s *numa.CPUSet) { s.CopyFrom(numa.CPUSet{}) }, "0-3", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := numa.MustParseCPUSet(tt.from)
			tt.op(&s)
			require.Equal(t, tt.want, s.String())
			require.True(t, s.Equal(numa.MustParseCPUSet(tt.want)))
			// Contains and Remove agree with the members String shows.
			for c := range s.All() {
				require.True(t, s.Contains(c), "Contains(%d)", c)
			}
		})
	}
}

// Regression: UnionWith (and CopyFrom) into a set whose bitset length ends
// inside a word wrote the new bits without extending the length, so Contains
// said false and Remove did nothing for CPUs that Size and String reported.
func TestCPUSetUnionWithWithinLastWord(t *testing.T) {
	s := numa.NewCPUSet(3) // bitset length 4, one word of storage
	s.UnionWith(numa.NewCPUSet(10, 63))
	require.Equal(t, "3,10,63", s.String())
	require.True(t, s.Contains(10))
	require.True(t, s.Contains(63))
	s.Remove(10)
	require.Equal(t, "3,63", s.String())
	require.False(t, s.Contains(10))

	var c numa.CPUSet
	c.Add(1)
	c.CopyFrom(numa.NewCPUSet(40))
	require.True(t, c.Contains(40))
	require.Equal(t, 1, c.Size())
}

func TestCPUSetCounts(t *testing.T) {
	a := numa.MustParseCPUSet("0-7,64-65,200")
	b := numa.MustParseCPUSet("4-11,65")
	require.Equal(t, 11, a.Size())
	require.Equal(t, 5, a.IntersectionCount(b))
	require.Equal(t, 5, b.IntersectionCount(a))
	require.Equal(t, 6, a.DifferenceCount(b))
	require.Equal(t, 4, b.DifferenceCount(a))
	require.True(t, a.Intersects(b))
	require.False(t, a.Intersects(numa.NewCPUSet(100, 1000)))
	require.False(t, a.IsSubsetOf(b))
	require.True(t, numa.NewCPUSet(4, 65).IsSubsetOf(a))
	require.False(t, numa.NewCPUSet(4, 1000).IsSubsetOf(a))
}

func TestCPUSetMinMax(t *testing.T) {
	tests := []struct {
		in       string
		min, max int
	}{
		{"", -1, -1},
		{"0", 0, 0},
		{"63", 63, 63},
		{"64", 64, 64},
		{"5-9,300", 5, 300},
		{"127-128", 127, 128},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			s := numa.MustParseCPUSet(tt.in)
			require.Equal(t, tt.min, s.Min())
			require.Equal(t, tt.max, s.Max())
		})
	}
}

func TestCPUSetListAndAll(t *testing.T) {
	s := numa.MustParseCPUSet("1,3,64,130")
	require.Equal(t, []int{1, 3, 64, 130}, s.List())
	require.Equal(t, []int{9, 1, 3, 64, 130}, s.AppendTo([]int{9}))
	var got []int
	for c := range s.All() {
		got = append(got, c)
		if c == 64 {
			break
		}
	}
	require.Equal(t, []int{1, 3, 64}, got)
}

func TestCPUSetText(t *testing.T) {
	s := numa.MustParseCPUSet("0-3,8-11")
	b, err := s.MarshalText()
	require.NoError(t, err)
	require.Equal(t, "0-3,8-11", string(b))

	var u numa.CPUSet
	require.NoError(t, u.UnmarshalText([]byte("4-5\n")))
	require.Equal(t, "4-5", u.String())

	// As a JSON field it is a cpulist string.
	type doc struct {
		CPUs numa.CPUSet `json:"cpus"`
	}
	out, err := json.Marshal(doc{CPUs: s})
	require.NoError(t, err)
	require.JSONEq(t, `{"cpus":"0-3,8-11"}`, string(out))
	var d doc
	require.NoError(t, json.Unmarshal([]byte(`{"cpus":"7,9-10"}`), &d))
	require.Equal(t, "7,9-10", d.CPUs.String())
	require.ErrorIs(t, json.Unmarshal([]byte(`{"cpus":"x"}`), &d), numa.ErrInvalidCPUSet)
	require.Equal(t, "7,9-10", d.CPUs.String(), "a failed unmarshal leaves the set alone")
}

// genCPUSet draws a CPU set that often spans several words and sometimes
// carries extra storage beyond its highest CPU (grown, then shrunk).
func genCPUSet() *rapid.Generator[numa.CPUSet] {
	return rapid.Custom(func(t *rapid.T) numa.CPUSet {
		limit := rapid.SampledFrom([]int{8, 64, 130, 300}).Draw(t, "limit")
		cpus := rapid.SliceOfN(rapid.IntRange(0, limit), 0, 40).Draw(t, "cpus")
		s := numa.NewCPUSet(cpus...)
		if rapid.Bool().Draw(t, "ranges") {
			lo := rapid.IntRange(0, limit).Draw(t, "lo")
			s.AddRange(lo, lo+rapid.IntRange(0, 100).Draw(t, "len"))
		}
		if rapid.Bool().Draw(t, "slack") {
			s.Add(1000)
			s.Remove(1000)
		}
		return s
	})
}

func sizeOf(s numa.CPUSet) int { return len(s.List()) }

// rebuild returns a copy of s made by adding its CPUs one by one.
func rebuild(s numa.CPUSet) numa.CPUSet { return numa.NewCPUSet(s.List()...) }

func TestCPUSetLaws(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genCPUSet().Draw(t, "a")
		b := genCPUSet().Draw(t, "b")
		c := genCPUSet().Draw(t, "c")
		eq := func(x, y numa.CPUSet, law string) {
			if !x.Equal(y) || x.String() != y.String() {
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
		eq(a.Difference(b).Union(a.Intersection(b)), a, "(A\\B)∪(A∩B) = A")
		eq(a.Difference(a), numa.CPUSet{}, "A\\A = ∅")
		if !a.Difference(b).Intersection(b).IsEmpty() {
			t.Fatalf("(A\\B)∩B is not empty")
		}
		if a.Union(b).Size()+a.Intersection(b).Size() != a.Size()+b.Size() {
			t.Fatalf("|A∪B|+|A∩B| != |A|+|B|")
		}
		if a.Size() != sizeOf(a) {
			t.Fatalf("Size %d != len(List) %d", a.Size(), sizeOf(a))
		}
		if a.IntersectionCount(b) != a.Intersection(b).Size() {
			t.Fatalf("IntersectionCount disagrees")
		}
		if a.DifferenceCount(b) != a.Difference(b).Size() {
			t.Fatalf("DifferenceCount disagrees")
		}
		if a.Intersects(b) != (a.IntersectionCount(b) > 0) {
			t.Fatalf("Intersects disagrees")
		}
		if a.IsSubsetOf(b) != a.Difference(b).IsEmpty() {
			t.Fatalf("IsSubsetOf disagrees with Difference")
		}
		if a.Equal(b) != (a.IsSubsetOf(b) && b.IsSubsetOf(a)) {
			t.Fatalf("Equal disagrees with mutual IsSubsetOf")
		}
		if a.Equal(b) != (a.String() == b.String()) {
			t.Fatalf("Equal disagrees with String")
		}
		for cpu := range a.All() {
			if !a.Contains(cpu) {
				t.Fatalf("Contains(%d) false for a member", cpu)
			}
		}

		// In-place forms equal the allocating forms, and leave the operand
		// alone. The receivers are rebuilt by Add, not cloned, so that their
		// storage is shaped as the generator left it.
		bs := b.String()
		u := rebuild(a)
		u.UnionWith(b)
		eq(u, a.Union(b), "UnionWith")
		i := rebuild(a)
		i.IntersectWith(b)
		eq(i, a.Intersection(b), "IntersectWith")
		d := rebuild(a)
		d.RemoveAll(b)
		eq(d, a.Difference(b), "RemoveAll")
		cp := rebuild(c)
		cp.CopyFrom(a)
		eq(cp, a, "CopyFrom")
		if b.String() != bs {
			t.Fatalf("an in-place op changed its operand")
		}
		for _, s := range []numa.CPUSet{u, i, d, cp} {
			for cpu := range s.All() {
				if !s.Contains(cpu) {
					t.Fatalf("Contains(%d) false after an in-place op on %v", cpu, s)
				}
			}
		}
	})
}

func TestCPUSetStringRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genCPUSet().Draw(t, "s")
		got, err := numa.ParseCPUSet(s.String())
		if err != nil {
			t.Fatalf("ParseCPUSet(%q): %v", s.String(), err)
		}
		if !got.Equal(s) {
			t.Fatalf("ParseCPUSet(%q) = %v", s.String(), got)
		}
		text, _ := s.MarshalText()
		var u numa.CPUSet
		if err := u.UnmarshalText(text); err != nil || !u.Equal(s) {
			t.Fatalf("text round trip of %v gave %v, %v", s, u, err)
		}
	})
}

// Errors quote at most a short, escaped prefix of a bad value.
func TestParseErrorsQuoteShort(t *testing.T) {
	bad := "0-3,\x01" + strings.Repeat("9", 100_000)
	for _, err := range []error{
		func() error { _, err := numa.ParseCPUSet(bad); return err }(),
		func() error { _, err := numa.ParseCPUMask("ff," + strings.Repeat("z", 100_000)); return err }(),
		func() error { _, err := numa.ParseMask(bad); return err }(),
	} {
		require.Error(t, err)
		require.Less(t, len(err.Error()), 400, err.Error())
		require.Contains(t, err.Error(), "bytes)")
	}
	_, err := numa.ParseCPUSet("0-3,\x01")
	require.ErrorContains(t, err, `"0-3,\x01"`)
}

func TestCPUSetFromWords(t *testing.T) {
	s := numa.CPUSetFromWords([]uint64{1<<3 | 1<<63, 0, 1 << 1})
	if got := s.String(); got != "3,63,129" {
		t.Fatalf("CPUSetFromWords: %q, want 3,63,129", got)
	}
	s.Add(200)
	s.Remove(3)
	if got := s.String(); got != "63,129,200" || !s.Contains(129) || s.Contains(3) {
		t.Fatalf("after Add and Remove: %q", got)
	}
	if e := numa.CPUSetFromWords(nil); !e.IsEmpty() || !e.Equal(numa.CPUSet{}) {
		t.Fatal("CPUSetFromWords(nil) is not the empty set")
	}
}

func TestCPUSetWords(t *testing.T) {
	var empty numa.CPUSet
	for _, w := range empty.Words() {
		require.Zero(t, w, "the empty set has no CPU in its words")
	}
	s := numa.NewCPUSet(0, 5, 63, 64, 130)
	words := s.Words()
	require.GreaterOrEqual(t, len(words), 3)
	require.Equal(t, uint64(1)|1<<5|1<<63, words[0])
	require.Equal(t, uint64(1), words[1])
	require.Equal(t, uint64(1)<<2, words[2])
	// Rebuilding the set from the view gives the same CPUs.
	var got []int
	for i, w := range words {
		for b := 0; b < 64; b++ {
			if w&(1<<uint(b)) != 0 {
				got = append(got, 64*i+b)
			}
		}
	}
	require.Equal(t, s.List(), got)
}
