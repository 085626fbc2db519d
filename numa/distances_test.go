package numa_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
)

// sparseIDs are node IDs of a real 8-node machine, in the shuffled order a
// caller might list them.
var sparseIDs = []numa.NodeID{45, 0, 73, 2, 34, 1, 72, 33}

// sparseDist is the distance between two of sparseIDs, chosen so that every
// ordered pair has its own value: a table filled by position and read by ID
// gives wrong answers.
func sparseDist(a, b numa.NodeID) int {
	if a == b {
		return 10
	}
	return 11 + int(a)%50 + int(b)%7*20 // 11..241, asymmetric
}

func sparseRows(ids []numa.NodeID) [][]int {
	rows := make([][]int, len(ids))
	for i, a := range ids {
		rows[i] = make([]int, len(ids))
		for j, b := range ids {
			rows[i][j] = sparseDist(a, b)
		}
	}
	return rows
}

func TestDistancesSparseIDs(t *testing.T) {
	d, err := numa.NewDistances(sparseIDs, sparseRows(sparseIDs))
	require.NoError(t, err)
	require.Equal(t, 8, d.Len())
	require.Equal(t, []numa.NodeID{0, 1, 2, 33, 34, 45, 72, 73}, d.IDs())

	for _, a := range sparseIDs {
		for _, b := range sparseIDs {
			got, ok := d.Distance(a, b)
			require.True(t, ok)
			require.Equal(t, sparseDist(a, b), got, "Distance(%d, %d)", a, b)
		}
	}
	for i, a := range d.IDs() {
		idx, ok := d.Index(a)
		require.True(t, ok)
		require.Equal(t, i, idx)
		for j, b := range d.IDs() {
			require.Equal(t, sparseDist(a, b), d.At(i, j), "At(%d, %d)", i, j)
		}
	}
	// Rows come out in ascending ID order.
	require.Equal(t, sparseRows(d.IDs()), d.Rows())

	for _, missing := range []numa.NodeID{3, 44, 74, -1} {
		_, ok := d.Index(missing)
		require.False(t, ok)
		_, ok = d.Distance(missing, 0)
		require.False(t, ok)
		_, ok = d.Distance(0, missing)
		require.False(t, ok)
	}
}

func TestDistancesCopies(t *testing.T) {
	d, err := numa.NewDistances([]numa.NodeID{1, 0}, [][]int{{10, 21}, {31, 10}})
	require.NoError(t, err)
	ids := d.IDs()
	ids[0] = 99
	rows := d.Rows()
	rows[0][1] = 99
	require.Equal(t, []numa.NodeID{0, 1}, d.IDs())
	require.Equal(t, [][]int{{10, 31}, {21, 10}}, d.Rows())
}

func TestDistancesDefaults(t *testing.T) {
	d, err := numa.NewDistances([]numa.NodeID{5, 1, 9}, nil)
	require.NoError(t, err)
	require.Equal(t, [][]int{{10, 20, 20}, {20, 10, 20}, {20, 20, 10}}, d.Rows())
	v, ok := d.Distance(9, 9)
	require.True(t, ok)
	require.Equal(t, numa.LocalDistance, v)
	v, ok = d.Distance(9, 1)
	require.True(t, ok)
	require.Equal(t, numa.RemoteDistance, v)

	var zero numa.Distances
	require.Equal(t, 0, zero.Len())
	require.Empty(t, zero.IDs())
	require.Empty(t, zero.Rows())
	require.Equal(t, 0.0, zero.Average(numa.MaskOf(0, 1)))
	_, ok = zero.Distance(0, 0)
	require.False(t, ok)
}

// Regression: the IDs were sorted with a subtracting comparator, which
// overflows for IDs far apart and so misordered (and then misread) them.
func TestDistancesExtremeIDs(t *testing.T) {
	ids := []numa.NodeID{math.MaxInt, math.MinInt, 0}
	d, err := numa.NewDistances(ids, [][]int{{10, 12, 13}, {14, 10, 15}, {16, 17, 10}})
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{math.MinInt, 0, math.MaxInt}, d.IDs())
	v, ok := d.Distance(math.MaxInt, math.MinInt)
	require.True(t, ok)
	require.Equal(t, 12, v)
	v, ok = d.Distance(math.MinInt, 0)
	require.True(t, ok)
	require.Equal(t, 15, v)
}

func TestNewDistancesErrors(t *testing.T) {
	ids := []numa.NodeID{0, 2, 5}
	tests := []struct {
		name    string
		ids     []numa.NodeID
		rows    [][]int
		mention string
	}{
		{"too few rows", ids, [][]int{{10, 20, 20}, {20, 10, 20}}, "2 rows for 3 nodes"},
		{"too many rows", ids, [][]int{{10, 20, 20}, {20, 10, 20}, {20, 20, 10}, {20, 20, 10}}, "4 rows for 3 nodes"},
		{"empty rows", ids, [][]int{}, "0 rows for 3 nodes"},
		{"short row", ids, [][]int{{10, 20, 20}, {20, 10}, {20, 20, 10}}, "row of node 2 has 2 entries, want 3"},
		{"long row", ids, [][]int{{10, 20, 20}, {20, 10, 20}, {20, 20, 10, 7}}, "row of node 5 has 4 entries"},
		{"zero", ids, [][]int{{10, 20, 20}, {20, 10, 0}, {20, 20, 10}}, "from node 2 to node 5 is 0"},
		{"negative", ids, [][]int{{10, -20, 20}, {20, 10, 20}, {20, 20, 10}}, "from node 0 to node 2 is -20"},
		{"above 255", ids, [][]int{{10, 20, 20}, {20, 10, 20}, {256, 20, 10}}, "from node 5 to node 0 is 256"},
		{"zero local", ids, [][]int{{0, 20, 20}, {20, 10, 20}, {20, 20, 10}}, "from node 0 to node 0 is 0"},
		{"local not smallest", ids, [][]int{{10, 20, 20}, {20, 30, 21}, {20, 20, 10}}, "node 2 to node 0 (20) is below its local distance 30"},
		{"duplicate ID", []numa.NodeID{0, 2, 0}, nil, "node 0 listed twice"},
		{"duplicate ID with rows", []numa.NodeID{7, 7}, [][]int{{10, 20}, {20, 10}}, "node 7 listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := numa.NewDistances(tt.ids, tt.rows)
			require.ErrorIs(t, err, numa.ErrInvalidDistances)
			require.ErrorContains(t, err, tt.mention)
		})
	}
	// Equal to the local distance is allowed (some firmware reports it), and
	// 255 (unreachable in the SLIT) is in range; asymmetric tables are kept.
	d, err := numa.NewDistances([]numa.NodeID{0, 1}, [][]int{{10, 10}, {255, 10}})
	require.NoError(t, err)
	require.Equal(t, [][]int{{10, 10}, {255, 10}}, d.Rows())
}

func TestDistancesSumAverage(t *testing.T) {
	// IDs 0,2,5 given as 5,0,2; by ID: d(0,2)=21, d(0,5)=31, d(2,5)=13.
	d, err := numa.NewDistances([]numa.NodeID{5, 0, 2}, [][]int{
		{12, 31, 13}, // from 5
		{31, 10, 21}, // from 0
		{13, 21, 11}, // from 2
	})
	require.NoError(t, err)
	// Dense indices: 0 -> ID 0, 1 -> ID 2, 2 -> ID 5.
	tests := []struct {
		name      string
		m         numa.Mask
		sum, prs  int
		average   float64
		wantLocal bool
	}{
		{"empty", 0, 0, 0, 0, false},
		{"one node: its local distance", numa.MaskOf(2), 0, 0, 12, true},
		{"one node: dense 1", numa.MaskOf(1), 0, 0, 11, true},
		{"pair", numa.MaskOf(0, 2), 31, 1, 31, false},
		{"pair 1,2", numa.MaskOf(1, 2), 13, 1, 13, false},
		{"all", numa.MaskOf(0, 1, 2), 21 + 31 + 13, 3, 65.0 / 3, false},
		{"bits beyond the table are ignored", numa.MaskOf(0, 1, 2, 3, 63), 21 + 31 + 13, 3, 65.0 / 3, false},
		{"only bits beyond the table", numa.MaskOf(5, 63), 0, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, p := d.Sum(tt.m)
			require.Equal(t, tt.sum, s)
			require.Equal(t, tt.prs, p)
			require.InDelta(t, tt.average, d.Average(tt.m), 1e-12)
		})
	}
}

func TestDistancesSumAgainstDefinition(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 64).Draw(t, "n")
		ids := make([]numa.NodeID, n)
		for i := range ids {
			ids[i] = numa.NodeID(i*3 + 1)
		}
		rows := make([][]int, n)
		for i := range rows {
			rows[i] = make([]int, n)
			for j := range rows[i] {
				rows[i][j] = 10
				if i != j {
					rows[i][j] = rapid.IntRange(10, 255).Draw(t, "d")
				}
			}
		}
		d, err := numa.NewDistances(ids, rows)
		if err != nil {
			t.Fatal(err)
		}
		m := numa.Mask(rapid.Uint64().Draw(t, "m"))
		want, pairs := 0, 0
		for i := range n {
			for j := i + 1; j < n; j++ {
				if m.Contains(i) && m.Contains(j) {
					want += rows[i][j]
					pairs++
				}
			}
		}
		s, p := d.Sum(m)
		if s != want || p != pairs {
			t.Fatalf("Sum = %d/%d, want %d/%d", s, p, want, pairs)
		}
	})
}
