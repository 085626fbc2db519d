package allocator

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// TestCarverSlicesAreIndependent checks that the slices a carver cuts do
// not overlap, have no capacity beyond their length (an append allocates
// afresh instead of writing over the next slice) and that a large one is
// made alone.
func TestCarverSlicesAreIndependent(t *testing.T) {
	var c carver[int]
	var cut [][]int
	for i := range 40 {
		s := c.cut(1+i%5, 16)
		require.Len(t, s, 1+i%5)
		require.Equal(t, len(s), cap(s))
		for j := range s {
			require.Zero(t, s[j])
			s[j] = i
		}
		cut = append(cut, s)
	}
	for i, s := range cut {
		grown := append(s, -1)
		grown[0] = -2
		for _, v := range s {
			require.Equal(t, i, v, "slice %d was written by another's append or cut", i)
		}
	}
	require.Len(t, c.cut(100, 16), 100)
}

// TestCloneCutsItsOwnChunks checks that a state's clone does not cut CPU
// words or GPU IDs from its original's chunks: allocations made on the
// clone after the copy leave the original's allocations as they were, and
// the other way round.
func TestCloneCutsItsOwnChunks(t *testing.T) {
	m, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	s := MustNew(m, Options{})
	first, err := s.Allocate(&Request{ID: "first", CPUs: 4, GPUs: 1, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	c := s.Clone()
	var fromS, fromC []Allocation
	for i := range 6 {
		a, err := s.Allocate(&Request{ID: fmt.Sprint("s", i), CPUs: 2, GPUs: 1, Policy: policy.SingleNUMANode})
		require.NoError(t, err)
		fromS = append(fromS, a.Clone())
		b, err := c.Allocate(&Request{ID: fmt.Sprint("c", i), CPUs: 6, GPUs: 1, Policy: policy.SingleNUMANode})
		require.NoError(t, err)
		fromC = append(fromC, b.Clone())
	}
	got, _ := s.Get("first")
	require.Equal(t, first.CPUs.String(), got.CPUs.String())
	require.Equal(t, first.GPUs, got.GPUs)
	for i := range fromS {
		a, _ := s.Get(fmt.Sprint("s", i))
		require.Equal(t, fromS[i].CPUs.String(), a.CPUs.String())
		require.Equal(t, fromS[i].GPUs, a.GPUs)
		b, _ := c.Get(fmt.Sprint("c", i))
		require.Equal(t, fromC[i].CPUs.String(), b.CPUs.String())
		require.Equal(t, fromC[i].GPUs, b.GPUs)
	}
}

// TestStateKeepsASmallSearcher checks that after decisions a state's slot
// holds a searcher without working memory (it went back to the pool) and
// without references to the decision's state, request or victims, and that
// such a searcher stays small: memory per state stays small for a cluster
// of thousands of states. A Fit that one node answers (State.fitsOneNode)
// takes no searcher at all.
func TestStateKeepsASmallSearcher(t *testing.T) {
	m, err := topology.Preset("numa64")
	require.NoError(t, err)
	s := MustNew(m, Options{})
	require.NoError(t, s.Fit(&Request{CPUs: 4, Policy: policy.SingleNUMANode}))
	require.Nil(t, s.spare.Peek(), "a Fit on one node takes no searcher")
	for i, r := range []Request{
		{CPUs: 200, Policy: policy.BestEffort}, // wider than one node: the decision proper
		{ID: "a", CPUs: 60, GPUs: 2, Policy: policy.Restricted},
		{ID: "b", CPUs: 200, Policy: policy.BestEffort},
	} {
		if r.ID == "" {
			require.NoError(t, s.Fit(&r))
		} else {
			_, err := s.Allocate(&r)
			require.NoError(t, err)
		}
		sr := s.spare.Peek()
		require.NotNil(t, sr, "decision %d", i)
		require.Nil(t, sr.mem, "decision %d: the working memory went back to the pool", i)
		require.Nil(t, sr.cov)
		require.Nil(t, sr.take)
		require.Nil(t, sr.freeP.Val)
		require.Nil(t, sr.s)
		require.Nil(t, sr.r)
		require.Nil(t, sr.without)
	}
	require.Less(t, unsafe.Sizeof(searcher{}), uintptr(8<<10), "the searcher a state keeps is small")
}
