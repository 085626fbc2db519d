package allocator_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// TestCanonicalDeviceID: GPU IDs are decimal integers, canonicalised;
// other spellings are refused; other classes' IDs are names, kept as they
// are.
func TestCanonicalDeviceID(t *testing.T) {
	for in, want := range map[string]string{"3": "3", "+3": "3", "03": "3", "0000000003": "3", "0": "0", "000": "0", "+0": "0"} {
		got, err := allocator.CanonicalDeviceID(allocator.GPUClass, in)
		require.NoError(t, err, "%q", in)
		require.Equal(t, want, got, "%q", in)
	}
	for _, bad := range []string{"", "+", " 3", "3 ", "-3", "-0", "0x3", "3.0", "1e3", "٣", "++3", "3a", "99999999999999999999"} {
		_, err := allocator.CanonicalDeviceID(allocator.GPUClass, bad)
		require.ErrorIs(t, err, allocator.ErrUnknownDevice, "%q", bad)
		require.ErrorContains(t, err, fmt.Sprintf("%q", bad))
		require.ErrorContains(t, err, "not a decimal integer")
	}
	got, err := allocator.CanonicalDeviceID("rdma", "mlx5_0")
	require.NoError(t, err)
	require.Equal(t, "mlx5_0", got)
	got, err = allocator.CanonicalDeviceID("rdma", "03")
	require.NoError(t, err)
	require.Equal(t, "03", got, "names of other classes are kept as they are")
	_, err = allocator.CanonicalDeviceID("rdma", "")
	require.ErrorIs(t, err, allocator.ErrUnknownDevice)
}

// TestDeviceHealthIDForms: health set under any accepted spelling of a GPU
// ID and cleared with the canonical one ends healthy, in the state, its
// snapshot and a state restored from it; refused spellings and class names
// that differ in case change nothing and say what the machine has.
func TestDeviceHealthIDForms(t *testing.T) {
	m := tbPreset(t, "dgx-h100")
	for _, form := range []string{"+3", "03", "0000000003", "3"} {
		s := allocator.MustNew(m, allocator.Options{})
		_, err := s.SetDeviceHealth(allocator.GPUClass, form, false)
		require.NoError(t, err, form)
		require.Equal(t, map[string][]string{"gpu": {"3"}}, s.Snapshot().Unhealthy, form)
		restored := allocator.MustNew(m, allocator.Options{})
		require.NoError(t, restored.Restore(s.Snapshot()))
		require.Equal(t, map[string][]string{"gpu": {"3"}}, restored.Snapshot().Unhealthy)
		_, err = s.SetDeviceHealth(allocator.GPUClass, "3", true)
		require.NoError(t, err)
		require.Empty(t, s.Snapshot().Unhealthy, "cleared with %q after %q", "3", form)
		require.NoError(t, s.Fit(&allocator.Request{GPUs: 8}), "every GPU healthy again")
		// A snapshot written by hand with another spelling restores to
		// the canonical one.
		odd := allocator.MustNew(m, allocator.Options{})
		require.NoError(t, odd.Restore(allocator.Snapshot{Unhealthy: map[string][]string{"gpu": {form}}}))
		require.Equal(t, map[string][]string{"gpu": {"3"}}, odd.Snapshot().Unhealthy)
	}

	s := allocator.MustNew(m, allocator.Options{})
	before := tbText(s)
	for _, bad := range []string{" 3", "0x3", "-3", "3.0", ""} {
		_, err := s.SetDeviceHealth(allocator.GPUClass, bad, false)
		require.ErrorIs(t, err, allocator.ErrUnknownDevice, "%q", bad)
	}
	_, err := s.SetDeviceHealth("GPU", "3", false)
	require.ErrorIs(t, err, allocator.ErrUnknownDevice)
	require.ErrorContains(t, err, `the machine has no GPU devices (did you mean "gpu"? its device classes: gpu, rdma; names are case-sensitive)`)
	_, err = s.SetDeviceHealth("rdma", "MLX5_0", false)
	require.ErrorContains(t, err, `rdma device MLX5_0 does not exist on this machine (did you mean "mlx5_0"?)`)
	require.Equal(t, before, tbText(s), "refusals change nothing")

	// Requests and claims name classes exactly too.
	err = s.Fit(&allocator.Request{ID: "r", GPUs: 1, Devices: map[string]int{"RDMA": 1}})
	require.ErrorIs(t, err, allocator.ErrInsufficient)
	require.ErrorIs(t, err, allocator.ErrNeverFits)
	require.ErrorContains(t, err, `did you mean "rdma"? its device classes: gpu, rdma`)
	err = s.Fit(&allocator.Request{ID: "g", Devices: map[string]int{"GPU": 1}})
	require.ErrorIs(t, err, allocator.ErrInvalidRequest)
	require.ErrorContains(t, err, "GPUs are asked for with the GPUs field")
	_, err = s.Claim(allocator.Allocation{ID: "c", Devices: map[string][]string{"RDMA": {"mlx5_0"}}})
	require.ErrorIs(t, err, allocator.ErrConflict)
	require.ErrorContains(t, err, "its device classes: gpu, rdma")
	require.Equal(t, before, tbText(s))
}

// TestNilInputs: a nil machine, nil options' resources, a nil state and a
// nil request are errors, never panics.
func TestNilInputs(t *testing.T) {
	_, err := allocator.New(nil, allocator.Options{})
	require.ErrorIs(t, err, allocator.ErrNoMachine)
	m := tbPreset(t, "dgx-h100")
	for name, opts := range map[string]allocator.Options{
		"negative budget": {SearchBudget: -1},
		"nil resource":    {Resources: []allocator.Resource{nil}},
		"kind twice":      {Resources: []allocator.Resource{kindOnly("cpu")}},
		"no kind":         {Resources: []allocator.Resource{kindOnly("")}},
	} {
		_, err := allocator.New(m, opts)
		require.ErrorIs(t, err, allocator.ErrInvalidOptions, name)
	}
	require.Panics(t, func() { allocator.MustNew(nil, allocator.Options{}) }, "MustNew panics, as documented")

	var ns *allocator.State
	r := allocator.Request{ID: "x", CPUs: 1}
	require.ErrorIs(t, ns.Fit(&r), allocator.ErrNoMachine)
	_, err = ns.Allocate(&r)
	require.ErrorIs(t, err, allocator.ErrNoMachine)
	_, err = ns.Score(&r)
	require.ErrorIs(t, err, allocator.ErrNoMachine)
	require.ErrorIs(t, ns.FitWithout(&r, nil), allocator.ErrNoMachine)
	_, err = ns.Resize("x", 2)
	require.ErrorIs(t, err, allocator.ErrNoMachine)
	require.ErrorIs(t, ns.Release("x"), allocator.ErrNoMachine)
	require.ErrorIs(t, ns.Restore(allocator.Snapshot{}), allocator.ErrNoMachine)
	_, err = ns.Claim(allocator.Allocation{ID: "x"})
	require.ErrorIs(t, err, allocator.ErrNoMachine)
	_, err = ns.SetDeviceHealth("gpu", "0", false)
	require.ErrorIs(t, err, allocator.ErrNoMachine)
	require.ErrorIs(t, ns.ReplaceMachine(m), allocator.ErrNoMachine)
	_, ok := ns.Get("x")
	require.False(t, ok)
	require.Empty(t, ns.Live())
	require.Empty(t, ns.Snapshot().Allocations)
	require.Nil(t, ns.Clone())
	require.Nil(t, ns.Machine())
	require.True(t, ns.FreeCPUs().IsEmpty())
	require.Nil(t, ns.NodeFree(0))
	require.Nil(t, ns.Kinds())
	single, shared := ns.NodeTypes()
	require.Zero(t, single|shared)

	s := allocator.MustNew(m, allocator.Options{})
	before := tbText(s)
	require.ErrorIs(t, s.Fit(nil), allocator.ErrInvalidRequest)
	_, err = s.Allocate(nil)
	require.ErrorIs(t, err, allocator.ErrInvalidRequest)
	var re *allocator.RequestError
	require.ErrorAs(t, err, &re)
	require.Contains(t, re.Reason, "nil")
	_, err = s.Score(nil)
	require.ErrorIs(t, err, allocator.ErrInvalidRequest)
	require.ErrorIs(t, s.FitWithout(nil, nil), allocator.ErrInvalidRequest)
	require.ErrorIs(t, s.ReplaceMachine(nil), allocator.ErrNoMachine)
	require.Nil(t, s.NodeFree(-1))
	require.Nil(t, s.NodeFree(m.NumNodes()))
	require.Equal(t, before, tbText(s), "nothing changed")
	require.Same(t, m, s.Machine())
}

// kindOnly is a Resource of the given kind that holds nothing, for the
// option checks of New.
type kindOnly string

func (k kindOnly) Kind() string                                                 { return string(k) }
func (kindOnly) Demand(*allocator.Request) int64                                { return 0 }
func (kindOnly) Capacity(*allocator.Request, int) int64                         { return 0 }
func (kindOnly) Free(*allocator.Request, int) int64                             { return 0 }
func (kindOnly) Unplaced(*allocator.Request) int64                              { return 0 }
func (kindOnly) Take(*allocator.Request, []int64, int64, *allocator.Allocation) {}
func (kindOnly) Give(*allocator.Allocation)                                     {}
func (kindOnly) Claim(*allocator.Allocation) error                              { return nil }
func (kindOnly) Nodes(*allocator.Allocation) numa.Mask                          { return 0 }
func (kindOnly) Describe(_ *allocator.Request, n int64) string                  { return fmt.Sprint(n, " units") }
func (k kindOnly) Clone() allocator.Resource                                    { return k }

// TestNeverAndNow: refusals say whether the request can ever fit this
// machine under its policy, in words and in PlacementError.Never /
// ErrNeverFits, with every amount in its unit.
func TestNeverAndNow(t *testing.T) {
	s := tbState(t, "dgx-h100") // 2 nodes of 112 CPUs, 4 GPUs and 1 TiB
	tests := []struct {
		r     allocator.Request
		want  error
		never bool
		says  []string
	}{
		{allocator.Request{ID: "a", GPUs: 9}, allocator.ErrInsufficient, true,
			[]string{"can never hold it", "9 GPUs wanted, 8 GPUs in all"}},
		{allocator.Request{ID: "b", GPUs: 5, Policy: policy.SingleNUMANode}, allocator.ErrNoNUMAFit, true,
			[]string{"no NUMA node of this machine can ever hold 5 GPUs (one node has at most 4 GPUs)"}},
		{allocator.Request{ID: "c", CPUs: 1, MemoryMiB: 1100 << 10, Policy: policy.SingleNUMANode}, allocator.ErrNoNUMAFit, true,
			[]string{"1 CPU and 1,126,400 MiB of memory", "at most 1,048,576 MiB of memory"}},
		{allocator.Request{ID: "d", CPUs: 2, Devices: map[string]int{"fpga": 1}}, allocator.ErrInsufficient, true,
			[]string{"no fpga devices", "1 fpga device"}},
		{allocator.Request{ID: "e", CPUs: 226, FullPCPUs: true}, allocator.ErrInsufficient, true,
			[]string{"113 whole cores (226 CPUs) wanted, 112 whole cores (224 CPUs) in all"}},
	}
	for _, tt := range tests {
		t.Run(tt.r.ID, func(t *testing.T) {
			pe := tbRefused(t, s, tt.r, tt.want)
			require.Equal(t, tt.never, pe.Never)
			require.Equal(t, tt.never, errors.Is(pe, allocator.ErrNeverFits))
			for _, w := range tt.says {
				require.Contains(t, pe.Reason, w)
			}
		})
	}
	// Now full: the same shapes that fit an empty machine do not fit now,
	// and say so.
	tbMust(t, s, allocator.Request{ID: "full", GPUs: 6, CPUs: 200, Policy: policy.None})
	for _, tt := range []struct {
		r    allocator.Request
		want error
		says string
	}{
		{allocator.Request{ID: "f", GPUs: 4}, allocator.ErrInsufficient, "not enough free on the whole machine now: 4 GPUs wanted, 2 GPUs free (8 GPUs in all)"},
		{allocator.Request{ID: "g", CPUs: 1, GPUs: 2, Policy: policy.Restricted}, allocator.ErrNoNUMAFit, ""},
		{allocator.Request{ID: "h", CPUs: 30}, allocator.ErrInsufficient, "30 CPUs wanted, 24 CPUs free (224 CPUs in all)"},
		{allocator.Request{ID: "i", GPUs: 1, CPUs: 1, Policy: policy.SingleNUMANode, Exclusive: policy.Preferred}, nil, ""},
		{allocator.Request{ID: "k", GPUs: 1, CPUs: 1, Policy: policy.SingleNUMANode}, allocator.ErrExclusivity, "singleNUMANodeExclusive"},
		{allocator.Request{ID: "j", GPUs: 3, Policy: policy.SingleNUMANode}, allocator.ErrInsufficient, "3 GPUs wanted, 2 GPUs free"},
	} {
		err := s.Fit(&tt.r)
		if tt.want == nil {
			require.NoError(t, err, tt.r.ID)
			continue
		}
		if !errors.Is(err, tt.want) {
			var pe *allocator.PlacementError
			require.ErrorAs(t, err, &pe)
		}
		require.False(t, errors.Is(err, allocator.ErrNeverFits), "%s: %v", tt.r.ID, err)
		require.ErrorContains(t, err, tt.says)
	}
}

// unitless finds amounts written without their unit in a refusal's
// reason: every number must be an amount followed by its unit ("4 GPUs",
// "1,024 MiB", "2 whole cores", "1 rdma device", "2 NUMA nodes", "512
// steps"), node IDs after "node", "nodes" or "node(s)" ("NUMA nodes
// 0-3,5"), a width after "width_cap" or "width_free", or part of a name
// ("mlx5_0"). Quoted text (IDs) is left out.
var (
	quotedRE = regexp.MustCompile(`"[^"]*"`)
	numberRE = regexp.MustCompile(`[0-9][0-9,\-]*[0-9]|[0-9]`)
	unitRE   = regexp.MustCompile(`^[0-9,\-]+( CPUs?\b| GPUs?\b| MiB\b| whole cores?\b| [a-z][a-z0-9_]* devices?\b| NUMA nodes?\b| steps\b| threads per core\b)`)
	idRE     = regexp.MustCompile(`(\bnodes? |\bnode\(s\) |\bwidth_cap |\bwidth_free |[A-Za-z0-9_])$`)
)

// ownNodesRE matches a resize refusal that names nodes by ID.
var ownNodesRE = regexp.MustCompile(`NUMA nodes? [0-9]|no NUMA node`)

func unitless(reason string) []string {
	reason = quotedRE.ReplaceAllString(reason, `""`)
	var bad []string
	for _, loc := range numberRE.FindAllStringIndex(reason, -1) {
		if unitRE.MatchString(reason[loc[0]:]) || idRE.MatchString(reason[:loc[0]]) {
			continue
		}
		bad = append(bad, reason[max(0, loc[0]-25):min(len(reason), loc[1]+10)])
	}
	return bad
}

// TestRefusalsSayUnitsAndNever: after a random stream, every refusal of a
// valid request and of a resize writes each amount with its unit (a
// resize's names the allocation's own nodes), and Never is exact:
// a request that can never fit is refused on the empty machine (with the
// same device health) too, and one that is refused now but not Never
// fits the empty machine.
func TestRefusalsSayUnitsAndNever(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := allocatortest.Machine().Draw(t, "machine")
		s := allocator.MustNew(m, allocator.Options{})
		for _, op := range allocatortest.StreamWithHealth(m).Draw(t, "ops") {
			apply(s, op)
		}
		if live := s.Live(); len(live) > 0 {
			a := live[rapid.IntRange(0, len(live)-1).Draw(t, "resized")]
			_, err := s.Resize(a.ID, rapid.IntRange(0, m.NumCPUs()).Draw(t, "cpus"))
			var pe *allocator.PlacementError
			if errors.As(err, &pe) {
				if bad := unitless(pe.Reason); len(bad) > 0 {
					t.Fatalf("amounts without their unit in %q: %q", pe.Reason, bad)
				}
				if !ownNodesRE.MatchString(pe.Reason) {
					t.Fatalf("a refused resize does not name the allocation's own nodes: %q", pe.Reason)
				}
			}
		}
		r := allocatortest.Request(m).Draw(t, "request")
		r.ID = "r"
		err := s.Fit(&r)
		var pe *allocator.PlacementError
		if !errors.As(err, &pe) {
			return
		}
		if bad := unitless(pe.Reason); len(bad) > 0 {
			t.Fatalf("amounts without their unit in %q: %q", pe.Reason, bad)
		}
		empty := allocator.MustNew(m, allocator.Options{})
		if err := empty.Restore(allocator.Snapshot{Unhealthy: s.Snapshot().Unhealthy}); err != nil {
			t.Fatal(err)
		}
		onEmpty := empty.Fit(&r)
		if pe.Never && onEmpty == nil {
			t.Fatalf("%v: Never, but the empty machine admits it", err)
		}
		if !pe.Never && onEmpty != nil {
			t.Fatalf("%v: not Never, but the empty machine refuses it too: %v", err, onEmpty)
		}
		if pe.Never && !errors.Is(onEmpty, allocator.ErrNeverFits) {
			t.Fatalf("%v: Never, but on the empty machine: %v", err, onEmpty)
		}
		if pe.Never != errors.Is(err, allocator.ErrNeverFits) {
			t.Fatalf("errors.Is(ErrNeverFits) disagrees with Never: %v", err)
		}
	})
}

// TestAllocationPrintsIDs: an allocation prints NUMA node IDs, never dense
// indices, however it is formatted.
func TestAllocationPrintsIDs(t *testing.T) {
	b := topology.NewBuilder("sparse")
	b.AddNode(topology.Node{ID: 4, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 1024})
	b.AddNode(topology.Node{ID: 9, Socket: 0, CPUs: numa.CPURange(4, 7), MemoryMiB: 1024})
	m, err := b.Build()
	require.NoError(t, err)
	s := allocator.MustNew(m, allocator.Options{})
	a, err := s.Allocate(&allocator.Request{ID: "a", CPUs: 6, MemoryMiB: 1500, Policy: policy.BestEffort})
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{4, 9}, a.NUMANodes())
	for _, text := range []string{a.String(), fmt.Sprint(a), fmt.Sprintf("%v", &a), fmt.Sprintf("%s", a)} {
		require.Contains(t, text, "nodes [4 9]")
		require.Regexp(t, `MiB on node (4|9)`, text)
		require.NotContains(t, text, "nodes [0 1]")
		require.NotContains(t, text, "on node 0")
	}
	for _, x := range a.Memory {
		require.True(t, slices.Contains([]numa.NodeID{4, 9}, x.Node))
	}
}

// TestErrorsCutLongValues: every error and description that quotes an ID,
// a class or a device name from outside quotes it escaped and cut to 64
// bytes, whichever path made it.
func TestErrorsCutLongValues(t *testing.T) {
	long := strings.Repeat("L", 300)
	ctl := strings.Repeat("\x01", 10)
	m := tbPreset(t, "dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	_, err := s.Allocate(&allocator.Request{ID: long, CPUs: 1})
	require.NoError(t, err)
	check := func(what, text string) {
		t.Helper()
		require.NotContains(t, text, strings.Repeat("L", 65), "%s quotes the 300-byte value uncut: %.200s", what, text)
		require.NotContains(t, text, "\x01", "%s quotes a control character unescaped", what)
	}
	var errs []error
	add := func(err error) {
		t.Helper()
		require.Error(t, err)
		errs = append(errs, err)
	}
	_, err = s.Allocate(&allocator.Request{ID: long, CPUs: 1})
	add(err) // duplicate
	add(s.Fit(&allocator.Request{ID: long, CPUs: 1}))
	_, err = s.Score(&allocator.Request{ID: long, CPUs: 1})
	add(err)
	add(s.FitWithout(&allocator.Request{ID: "x", CPUs: 1}, []string{long + "x"}))
	add(s.Release(long + "x"))
	_, err = s.Resize(long+"x", 2)
	add(err)
	_, err = s.Allocate(&allocator.Request{ID: long + "y", CPUs: 100000})
	add(err) // PlacementError
	_, err = s.Allocate(&allocator.Request{ID: long + "z", CPUs: -1})
	add(err) // RequestError
	_, err = s.Allocate(&allocator.Request{ID: "d", CPUs: 1, Devices: map[string]int{long + ctl: 1}})
	add(err) // unknown class
	_, err = s.Allocate(&allocator.Request{ID: "d", CPUs: 1, Devices: map[string]int{long + ctl: -1}})
	add(err) // negative class amount
	_, err = s.SetDeviceHealth(long+ctl, "1", false)
	add(err)
	_, err = s.SetDeviceHealth(allocator.GPUClass, long+ctl, false)
	add(err)
	_, err = s.Claim(allocator.Allocation{ID: long + ctl, Devices: map[string][]string{long + ctl: {"a"}}})
	add(err)
	add(allocator.MustNew(m, allocator.Options{}).Restore(allocator.Snapshot{Allocations: []allocator.Allocation{{ID: long + ctl, GPUs: []int{999}}}}))
	small := topology.NewBuilder("small")
	small.AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(1000, 1000)})
	sm, err := small.Build()
	require.NoError(t, err)
	add(s.Clone().ReplaceMachine(sm))
	for i, err := range errs {
		check(fmt.Sprintf("error %d (%T)", i, err), err.Error())
	}
	check("Request.String", (&allocator.Request{ID: long + ctl, CPUs: 1, Devices: map[string]int{long + ctl: 1}}).String())
	a, ok := s.Get(long)
	require.True(t, ok)
	check("Allocation.String", a.String())
	check("Allocation.String with devices", allocator.Allocation{ID: long, Devices: map[string][]string{long + ctl: {"a"}}}.String())
}

// TestNilReceivers: the exported methods that a nil pointer can reach (a
// nil *Request or *Allocation, a nil error of the package's types) answer
// without panicking.
func TestNilReceivers(t *testing.T) {
	var r *allocator.Request
	require.Equal(t, "<nil request>", r.String())
	var a *allocator.Allocation
	require.Nil(t, a.NUMANodes())
	require.Zero(t, a.MemoryMiB())
	require.Equal(t, allocator.Request{}, a.Request())
	var zero allocator.Allocation
	require.Nil(t, zero.NUMANodes(), "an allocation no state made has no nodes")
	for _, e := range []error{(*allocator.NodeError)(nil), (*allocator.RequestError)(nil), (*allocator.PlacementError)(nil),
		(*allocator.RestoreError)(nil), (*allocator.TopologyChangeError)(nil)} {
		require.Equal(t, "<nil>", e.Error(), "%T", e)
	}
	require.Nil(t, (*allocator.TopologyChangeError)(nil).Affected())
}
