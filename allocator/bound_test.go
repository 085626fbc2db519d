package allocator_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// hardNodes are the CPUs, GPUs and GiB of memory of 64 NUMA nodes on which
// the covering search is hard: every node trades one kind against the
// others, and no weighting of the kinds separates the widths (found by a
// random search for instances that exhaust the search bound).
var hardNodes = [64][3]int{
	{0, 1, 12}, {7, 5, 13}, {19, 1, 24}, {10, 5, 8}, {32, 0, 31}, {40, 1, 4}, {9, 2, 13}, {1, 1, 2},
	{21, 0, 8}, {18, 8, 30}, {30, 1, 9}, {8, 6, 0}, {40, 6, 11}, {4, 8, 1}, {0, 1, 2}, {19, 2, 9},
	{0, 2, 33}, {5, 2, 6}, {4, 6, 3}, {28, 0, 2}, {2, 3, 0}, {22, 1, 32}, {32, 2, 8}, {28, 3, 8},
	{24, 1, 5}, {5, 1, 0}, {39, 0, 19}, {0, 0, 31}, {29, 0, 3}, {4, 1, 4}, {25, 1, 5}, {34, 0, 27},
	{28, 0, 4}, {16, 5, 0}, {4, 2, 40}, {38, 3, 37}, {28, 0, 17}, {2, 2, 12}, {5, 4, 5}, {39, 3, 27},
	{26, 7, 9}, {18, 8, 3}, {2, 0, 8}, {11, 1, 36}, {18, 8, 3}, {15, 2, 5}, {9, 0, 4}, {8, 6, 8},
	{0, 4, 31}, {20, 8, 25}, {10, 8, 5}, {7, 0, 7}, {14, 0, 7}, {28, 0, 8}, {7, 8, 10}, {8, 1, 13},
	{9, 1, 40}, {16, 6, 21}, {26, 6, 7}, {2, 8, 10}, {7, 7, 34}, {14, 4, 7}, {35, 1, 6}, {24, 7, 5},
}

// hardMachine builds the 64 nodes of hardNodes, without socket information
// (one NUMA set of all of them).
func hardMachine(t *testing.T) *topology.Machine {
	t.Helper()
	b := topology.NewBuilder("hard64")
	cpu, gpu := 0, 0
	for i, n := range hardNodes {
		var cpus numa.CPUSet
		if n[0] > 0 {
			cpus = numa.CPURange(cpu, cpu+n[0]-1)
		}
		cpu += n[0]
		b.AddNode(topology.Node{ID: numa.NodeID(i), Socket: topology.UnknownSocket, CPUs: cpus,
			MemoryMiB: int64(n[2]) << 10})
		for range n[1] {
			b.AddGPU(topology.GPU{ID: gpu, NUMANode: numa.NodeID(i)})
			gpu++
		}
	}
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// TestSearchBound: a Restricted request whose width the bounded search
// cannot settle on a 64-node machine is refused with ErrSearchLimit,
// saying so, by Fit, Allocate, Score and FitWithout alike, and changes
// nothing; a request the search settles on the same machine is answered
// as usual.
func TestSearchBound(t *testing.T) {
	m := hardMachine(t)
	p := policy.Restricted
	s := allocator.MustNew(m, allocator.Options{})
	r := allocator.Request{ID: "hard", CPUs: 894, GPUs: 42, MemoryMiB: 644 << 10, Policy: p}
	before := fmt.Sprint(s.Snapshot())
	fitErr := s.Fit(&r)
	require.ErrorIs(t, fitErr, allocator.ErrSearchLimit)
	var pe *allocator.PlacementError
	require.ErrorAs(t, fitErr, &pe)
	require.Equal(t, allocator.ErrSearchLimit, pe.Unwrap())
	require.Contains(t, pe.Reason, "bound")
	require.False(t, errors.Is(fitErr, allocator.ErrNeverFits), "it may fit: the search cannot tell")
	_, err := s.Allocate(&r)
	require.Equal(t, fitErr.Error(), err.Error(), "Fit and Allocate agree")
	_, err = s.Score(&r)
	require.ErrorIs(t, err, allocator.ErrSearchLimit)
	require.ErrorIs(t, s.FitWithout(&r, nil), allocator.ErrSearchLimit)
	require.Equal(t, before, fmt.Sprint(s.Snapshot()), "a refusal changes nothing")

	small := allocator.Request{ID: "small", CPUs: 40, GPUs: 2, Policy: p}
	require.NoError(t, s.Fit(&small))
	_, err = s.Allocate(&small)
	require.NoError(t, err)
}

// TestSearchBoundSoft: the same request under BestEffort and None, which
// the free totals admit, is never refused by the bound: Fit, FitWithout
// and Score admit it, Allocate places exactly what it asks for on a span
// that covers it (the narrowest the bounded search knows, at least the
// width every kind alone needs), and Release gives it back.
func TestSearchBoundSoft(t *testing.T) {
	m := hardMachine(t)
	for _, p := range []policy.Policy{policy.BestEffort, policy.None} {
		t.Run(p.String(), func(t *testing.T) {
			s := allocator.MustNew(m, allocator.Options{})
			before := fmt.Sprint(s.Snapshot())
			r := allocator.Request{ID: "hard", CPUs: 894, GPUs: 42, MemoryMiB: 644 << 10, Policy: p}
			require.NoError(t, s.Fit(&r))
			require.NoError(t, s.FitWithout(&r, nil))
			score, err := s.Score(&r)
			require.NoError(t, err)
			require.Less(t, score, 50, "a width the bound left approximate counts as not aligned")
			a, err := s.Allocate(&r)
			require.NoError(t, err)
			require.Equal(t, r.CPUs, a.CPUs.Size())
			require.Len(t, a.GPUs, r.GPUs)
			require.Equal(t, r.MemoryMiB, a.MemoryMiB())
			// The CPUs alone need the 35 largest nodes (894 of 1,033).
			require.GreaterOrEqual(t, a.DenseSpan.Count(), 35)
			require.NoError(t, s.Release("hard"))
			require.Equal(t, before, fmt.Sprint(s.Snapshot()), "Release restores the state")
		})
	}
}
