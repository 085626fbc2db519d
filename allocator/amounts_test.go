package allocator_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

// hugepagesOptions composes the example's hugepages kind, 16 pages a node.
func hugepagesOptions() allocator.Options {
	return allocator.Options{NewResources: func(m *topology.Machine) ([]allocator.Resource, error) {
		return []allocator.Resource{newHugepages(m, 16)}, nil
	}}
}

// TestAmountsRefused: Request.Amounts takes only the state's kinds of the
// caller's own, never negative; the refusal names the field and the kinds.
func TestAmountsRefused(t *testing.T) {
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	s := allocator.MustNew(m, hugepagesOptions())
	plain := allocator.MustNew(m, allocator.Options{})
	for _, c := range []struct {
		s      *allocator.State
		amount map[string]int64
		want   string
	}{
		{s, map[string]int64{"cpu": 2}, "amounts[cpu]: cpu is a built-in kind, asked for with the CPUs field"},
		{s, map[string]int64{"gpu": 1}, "asked for with the GPUs field"},
		{s, map[string]int64{"memory": 1}, "asked for with the MemoryMiB field"},
		{s, map[string]int64{hugepagesKind: -1}, "cannot be negative (-1 units of hugepages-1Gi)"},
		{s, map[string]int64{"hugepages-2Mi": 1}, `no resource of kind "hugepages-2Mi" (its kinds of the caller's own: hugepages-1Gi)`},
		{plain, map[string]int64{hugepagesKind: 1}, "the state has no kinds of the caller's own"},
	} {
		r := allocator.Request{ID: "x", CPUs: 1, Amounts: c.amount}
		err := c.s.Fit(&r)
		require.ErrorIs(t, err, allocator.ErrInvalidRequest, "%v", c.amount)
		require.ErrorContains(t, err, c.want)
		_, aerr := c.s.Allocate(&r)
		require.Equal(t, err.Error(), aerr.Error())
	}
	// An amount of 0 alone asks for nothing.
	r := allocator.Request{ID: "x", Amounts: map[string]int64{hugepagesKind: 0}}
	require.ErrorContains(t, s.Fit(&r), "every amount is zero")
}

// TestAmountsClaimAndReplace: a claim of a kind the state lacks is a
// conflict; NewResources is called for the new machine of ReplaceMachine,
// which keeps the pages; an error of NewResources fails New.
func TestAmountsClaimAndReplace(t *testing.T) {
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	plain := allocator.MustNew(m, allocator.Options{})
	_, err = plain.Claim(allocator.Allocation{ID: "x", Amounts: map[string][]allocator.NodeUnits{hugepagesKind: {{Node: 0, Units: 1}}}})
	require.ErrorIs(t, err, allocator.ErrConflict)
	require.ErrorContains(t, err, `no resource of kind "hugepages-1Gi"`)

	s := allocator.MustNew(m, hugepagesOptions())
	a, err := s.Allocate(&allocator.Request{ID: "db", CPUs: 2, Amounts: map[string]int64{hugepagesKind: 10}})
	require.NoError(t, err)
	require.Equal(t, []allocator.NodeUnits{{Node: 0, Units: 10}}, a.Amounts[hugepagesKind])
	require.Equal(t, int64(10), a.Request().Amounts[hugepagesKind])
	_, err = s.Claim(allocator.Allocation{ID: "y", Amounts: map[string][]allocator.NodeUnits{hugepagesKind: {{Node: 0, Units: 7}}}})
	require.ErrorIs(t, err, allocator.ErrConflict, "6 pages are left on node 0")

	require.NoError(t, s.ReplaceMachine(m))
	got, ok := s.Get("db")
	require.True(t, ok)
	require.Equal(t, a.Amounts, got.Amounts)
	require.Equal(t, int64(6), s.NodeFree(0)[hugepagesKind])

	_, err = allocator.New(m, allocator.Options{NewResources: func(*topology.Machine) ([]allocator.Resource, error) {
		return nil, errors.New("no hugepages file")
	}})
	require.ErrorIs(t, err, allocator.ErrInvalidOptions)
	require.ErrorContains(t, err, "no hugepages file")
	_, err = allocator.New(m, allocator.Options{NewResources: func(m *topology.Machine) ([]allocator.Resource, error) {
		return []allocator.Resource{newHugepages(m, 1), newHugepages(m, 1)}, nil
	}})
	require.ErrorContains(t, err, `of kind "hugepages-1Gi", which the state already has`)
}
