package allocator

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// pages is a minimal resource kind of the caller's own for internal
// tests: perNode free units on every node, taken and given back by count.
type pages struct {
	free []int64
}

func (p *pages) Kind() string                            { return "pages" }
func (p *pages) Demand(r *Request) int64                 { return r.Amount("pages") }
func (p *pages) Capacity(_ *Request, node int) int64     { return 8 }
func (p *pages) Free(_ *Request, node int) int64         { return p.free[node] }
func (p *pages) Unplaced(*Request) int64                 { return 0 }
func (p *pages) Describe(_ *Request, units int64) string { return "pages" }
func (p *pages) Take(_ *Request, amounts []int64, _ int64, _ *Allocation) {
	for i, k := range amounts {
		p.free[i] -= k
	}
}
func (p *pages) Give(*Allocation)        {}
func (p *pages) Claim(*Allocation) error { return nil }

// TestCustomKindKeepsOneNodeShortcut checks that on a state with a kind
// of the caller's own, Fit and Score answer a request that one node
// covers (with or without that kind) without a searcher, as on a state
// without one, and agree with the decision proper. The state's searcher
// slot is the counter: empty after a shortcut, filled by the decision
// proper, which is what the switch (general.On) makes Fit and Score take,
// with the same answers.
func TestCustomKindKeepsOneNodeShortcut(t *testing.T) {
	t.Cleanup(general.Set(false))
	m, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	p := &pages{free: make([]int64, m.NumNodes())}
	for i := range p.free {
		p.free[i] = 8
	}
	p.free[0] = 1
	var s *State
	for _, r := range []*Request{
		{CPUs: 4, GPUs: 1, Policy: policy.SingleNUMANode},
		{CPUs: 4, Amounts: map[string]int64{"pages": 4}, Policy: policy.Restricted},
		{GPUs: 2, Amounts: map[string]int64{"pages": 8}, Policy: policy.None},
	} {
		s = MustNew(m, Options{Resources: []Resource{p}}) // no searcher yet
		require.True(t, s.fitsOneNode(r), "request %s", r)
		require.NoError(t, s.Fit(r))
		sc, err := s.Score(r)
		require.NoError(t, err)
		require.Nil(t, s.spare.Peek(), "request %s: Fit and Score took no searcher", r)
		sr := s.searcher(r, nil)
		require.NoError(t, sr.decide(false))
		require.Equal(t, 1, sr.plan.width)
		sr.done()
		want, err := s.searchScore(r)
		require.NoError(t, err)
		require.Equal(t, want, sc, "request %s", r)

		// The general path, through the switch: a searcher each time, and
		// the same answers.
		general.Set(true)
		g := MustNew(m, Options{Resources: []Resource{p}})
		require.NoError(t, g.Fit(r), "request %s, general path", r)
		require.NotNil(t, g.spare.Peek(), "request %s: the general path took a searcher", r)
		gsc, err := g.Score(r)
		require.NoError(t, err)
		require.Equal(t, sc, gsc, "request %s: Score's shortcut and general path", r)
		general.Set(false)
	}
	// 9 pages fit no node: the decision proper answers (and refuses), as
	// the general path does.
	r := &Request{CPUs: 4, Amounts: map[string]int64{"pages": 9}, Policy: policy.SingleNUMANode}
	require.False(t, s.fitsOneNode(r))
	err = s.Fit(r)
	require.ErrorIs(t, err, ErrNoNUMAFit)
	general.Set(true)
	require.Equal(t, err.Error(), MustNew(m, Options{Resources: []Resource{p}}).Fit(r).Error())
	general.Set(false)
}

func (p *pages) Nodes(*Allocation) numa.Mask { return 0 }
func (p *pages) Clone() Resource             { return &pages{free: slices.Clone(p.free)} }
