package numa

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Default distances used when a machine describes none, as Linux reports
// them on machines without an ACPI SLIT.
const (
	LocalDistance  = 10
	RemoteDistance = 20
)

// ErrInvalidDistances is returned (wrapped) by [NewDistances] when the table
// is not usable.
var ErrInvalidDistances = errors.New("invalid NUMA distances")

// Distances is the NUMA distance table (the ACPI SLIT) keyed by node ID, so
// sparse IDs never shift a row. The zero value has no nodes. A Distances is
// immutable once built and safe for concurrent use.
type Distances struct {
	ids []NodeID // ascending; position is the dense index
	d   []int    // len(ids)^2, row-major by dense index
}

// NewDistances builds the table for the given node IDs (any order, no
// duplicates) from rows[i][j], the distance from ids[i] to ids[j] — rows are
// positional in the order of ids, as in /sys/devices/system/node/nodeN/distance.
// The table must be square with len(ids) rows, every entry positive and at
// most 255, and each node's distance to itself must be the smallest of its
// row. A nil rows gives the defaults (10 local, 20 remote).
func NewDistances(ids []NodeID, rows [][]int) (Distances, error) {
	n := len(ids)
	order := make([]int, n) // order[dense] = position in ids
	for i := range order {
		order[i] = i
	}
	// cmp.Compare, not ids[a]-ids[b]: the difference overflows for IDs far
	// apart, which misorders the table (and hides duplicates from the check
	// below).
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(ids[a], ids[b]) })
	sorted := make([]NodeID, n)
	for k, p := range order {
		sorted[k] = ids[p]
		if k > 0 && sorted[k] == sorted[k-1] {
			return Distances{}, fmt.Errorf("%w: node %d listed twice", ErrInvalidDistances, sorted[k])
		}
	}
	d := make([]int, n*n)
	if rows == nil {
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				d[i*n+j] = RemoteDistance
			}
			d[i*n+i] = LocalDistance
		}
		return Distances{ids: sorted, d: d}, nil
	}
	if len(rows) != n {
		return Distances{}, fmt.Errorf("%w: %d rows for %d nodes", ErrInvalidDistances, len(rows), n)
	}
	for i, row := range rows {
		if len(row) != n {
			return Distances{}, fmt.Errorf("%w: row of node %d has %d entries, want %d",
				ErrInvalidDistances, ids[i], len(row), n)
		}
		for j, v := range row {
			if v <= 0 || v > 255 {
				return Distances{}, fmt.Errorf("%w: distance from node %d to node %d is %d, want 1-255",
					ErrInvalidDistances, ids[i], ids[j], v)
			}
		}
		for j, v := range row {
			if j != i && v < row[i] {
				return Distances{}, fmt.Errorf("%w: distance from node %d to node %d (%d) is below its local distance %d",
					ErrInvalidDistances, ids[i], ids[j], v, row[i])
			}
		}
	}
	for a, pa := range order {
		for b, pb := range order {
			d[a*n+b] = rows[pa][pb]
		}
	}
	return Distances{ids: sorted, d: d}, nil
}

// Len returns the number of nodes in the table.
func (t Distances) Len() int { return len(t.ids) }

// IDs returns the node IDs in ascending order (a fresh slice).
func (t Distances) IDs() []NodeID { return slices.Clone(t.ids) }

// Index returns the dense index of id, or false when id is not in the table.
func (t Distances) Index(id NodeID) (int, bool) {
	return slices.BinarySearch(t.ids, id)
}

// Distance returns the distance from node a to node b, by ID, or false when
// either is not in the table.
func (t Distances) Distance(a, b NodeID) (int, bool) {
	i, ok := t.Index(a)
	if !ok {
		return 0, false
	}
	j, ok := t.Index(b)
	if !ok {
		return 0, false
	}
	return t.d[i*len(t.ids)+j], true
}

// At returns the distance between dense indices i and j. It panics when
// either is out of range: that is a programmer error.
func (t Distances) At(i, j int) int { return t.d[i*len(t.ids)+j] }

// Rows returns the table as rows in ascending ID order (fresh slices), the
// form the topology JSON uses.
func (t Distances) Rows() [][]int {
	n := len(t.ids)
	rows := make([][]int, n)
	for i := range rows {
		rows[i] = slices.Clone(t.d[i*n : (i+1)*n])
	}
	return rows
}

// Sum returns the sum of the distances over the unordered pairs of distinct
// nodes of m (dense indices), and the number of such pairs. It never
// allocates. Indices beyond the table are ignored.
func (t Distances) Sum(m Mask) (sum, pairs int) {
	n := len(t.ids)
	m &= FirstN(n)
	for w := uint64(m); w != 0; w &= w - 1 {
		i := trailing(w)
		for v := w & (w - 1); v != 0; v &= v - 1 {
			sum += t.d[i*n+trailing(v)]
			pairs++
		}
	}
	return sum, pairs
}

// Average returns the average distance of the NUMA nodes of m (dense
// indices): the mean over the unordered pairs of distinct nodes, or the
// node's local distance when m has one node, or 0 when m is empty. It never
// allocates.
func (t Distances) Average(m Mask) float64 {
	m &= FirstN(len(t.ids))
	switch m.Count() {
	case 0:
		return 0
	case 1:
		i := m.Lowest()
		return float64(t.d[i*len(t.ids)+i])
	}
	s, p := t.Sum(m)
	return float64(s) / float64(p)
}
