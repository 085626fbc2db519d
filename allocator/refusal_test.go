package allocator

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// TestQuickRefusalAgreesWithDecide checks that every refusal quickRefusal
// names without a search is decide's: decide refuses the request with a
// *PlacementError of that category, on states that random allocations
// filled in part; and that quickRefusal names one for every request of
// built-in amounts that decide refuses for lack of free units on the whole
// machine (every policy) or for lack of a one-node cover (SingleNUMANode).
func TestQuickRefusalAgreesWithDecide(t *testing.T) {
	named := 0
	for _, m := range withUnknownGPU(t, "dgx-a100", "dgx-h100", "small-1s", "numa64", "xeon-2s-snc2-8gpu") {
		rapid.Check(t, func(rt *rapid.T) {
			s := MustNew(m, Options{})
			r := fillAndDraw(rt, s)
			fits := s.fitsOneNode(r)
			var cat error
			if !fits {
				cat = s.quickRefusal(r)
			}
			sr := s.searcher(r, nil)
			err := sr.decide(false)
			sr.done()
			if fits {
				require.NoError(rt, err, "request %s", r)
				return
			}
			var pe *PlacementError
			isPE := errors.As(err, &pe)
			if cat != nil {
				named++
				require.True(rt, isPE, "request %s: quickRefusal names %v, decide says %v", r, cat, err)
				require.Equal(rt, cat, pe.Unwrap(), "request %s: %v", r, err)
				return
			}
			if isPE && len(r.Devices) == 0 {
				c := pe.Unwrap()
				require.False(rt, c == ErrInsufficient || r.Policy == policy.SingleNUMANode && c != ErrSearchLimit,
					"request %s: decide refuses with %v and quickRefusal does not name it", r, err)
			}
		})
	}
	require.Positive(t, named, "no refusal named without a search")
}

// TestFitRefusalExplainedWhenAsked checks that a refusal Fit names without
// a search explains itself exactly as the decision proper does (the same
// message and the same PlacementError through errors.As, the category
// through errors.Is), allocates nothing when the same request is refused
// again on the same state, and says that only the category is known when
// the state changed before the explanation was asked for.
func TestFitRefusalExplainedWhenAsked(t *testing.T) {
	m, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	s := MustNew(m, Options{})
	for i := range m.NumNodes() { // 12 CPUs of 32 left on each node
		_, err = s.Allocate(&Request{ID: fmt.Sprint("fill", i), CPUs: 20, Policy: policy.SingleNUMANode})
		require.NoError(t, err)
	}
	for _, r := range []*Request{
		{ID: "short", CPUs: 200, Policy: policy.Restricted},                            // ErrInsufficient
		{ID: "never", CPUs: 8, GPUs: 3, Policy: policy.SingleNUMANode},                 // ErrNoNUMAFit, never
		{ID: "nonuma", CPUs: 20, GPUs: 1, MemoryMiB: 1, Policy: policy.SingleNUMANode}, // ErrNoNUMAFit now
	} {
		restore := general.Set(true)
		want := s.Fit(r) // decided eagerly by the decision proper
		restore()
		got := s.Fit(r)
		require.Error(t, want, r.ID)
		require.IsType(t, (*refusal)(nil), got, r.ID)
		var wantPE, gotPE *PlacementError
		require.True(t, errors.As(want, &wantPE))
		require.True(t, errors.As(got, &gotPE), r.ID)
		require.True(t, reflect.DeepEqual(wantPE, gotPE), "%s: want %#v, got %#v", r.ID, wantPE, gotPE)
		require.Equal(t, want.Error(), got.Error())
		require.True(t, errors.Is(got, errors.Unwrap(wantPE)))
		require.Equal(t, errors.Is(want, ErrNeverFits), errors.Is(got, ErrNeverFits), r.ID)
		require.Zero(t, testing.AllocsPerRun(100, func() { _ = s.Fit(r) }), r.ID)
	}
	r := &Request{ID: "later", CPUs: 100, Policy: policy.None}
	got := s.Fit(r)
	require.NoError(t, s.Release("fill0"))
	require.ErrorIs(t, got, ErrInsufficient)
	require.True(t, strings.Contains(got.Error(), "the state changed before the explanation was asked for"), got.Error())
	require.NoError(t, s.Fit(r))
}

// TestPlainRequestHasEveryField fails when Request gains a field that
// plainRequest (the refusal's copy) does not carry.
func TestPlainRequestHasEveryField(t *testing.T) {
	require.Equal(t, reflect.TypeOf(Request{}).NumField(), reflect.TypeOf(plainRequest{}).NumField()+2)
}
