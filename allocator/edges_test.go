package allocator_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// playOps applies the allocations and releases of ops to s, ignoring
// refusals.
func playOps(s *allocator.State, ops []allocatortest.Op) {
	for _, op := range ops {
		switch op.Kind {
		case allocatortest.OpAllocate:
			r := op.Request
			_, _ = s.Allocate(&r)
		case allocatortest.OpRelease:
			_ = s.Release(op.ID)
		}
	}
}

// sentinel returns the category of a refusal, for comparing answers.
func sentinel(err error) error {
	for _, s := range []error{allocator.ErrInsufficient, allocator.ErrNoNUMAFit, allocator.ErrExclusivity,
		allocator.ErrInvalidRequest, allocator.ErrDuplicateID, allocator.ErrUnknownID} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// TestFitWithoutAgreesWithReleasing: the preemption dry-run answers exactly
// what Fit answers after really releasing the victims, and changes nothing.
func TestFitWithoutAgreesWithReleasing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := allocatortest.Machine().Draw(t, "machine")
		s := allocator.MustNew(m, allocator.Options{})
		playOps(s, allocatortest.Stream(m).Draw(t, "ops"))
		live := s.Live()
		var victims []string
		for _, a := range live {
			if rapid.Bool().Draw(t, "victim") {
				victims = append(victims, a.ID)
			}
		}
		r := allocatortest.Request(m).Draw(t, "request")
		before := fmt.Sprint(s.Snapshot())
		got := s.FitWithout(&r, victims)
		require.Equal(t, before, fmt.Sprint(s.Snapshot()), "FitWithout changed the state")

		c := s.Clone()
		for _, id := range victims {
			require.NoError(t, c.Release(id))
		}
		want := c.Fit(&r)
		require.Equal(t, sentinel(want), sentinel(got), "FitWithout %v, Fit after releasing %v: %v", victims, got, want)
	})
}

func TestFitWithoutUnknownVictim(t *testing.T) {
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	s := allocator.MustNew(m, allocator.Options{})
	err = s.FitWithout(&allocator.Request{CPUs: 1}, []string{"nope"})
	require.ErrorIs(t, err, allocator.ErrUnknownID)
}

// TestFitWithoutExclusivityIsNotMonotone: releasing a multi-node allocation
// can turn a shared node single, which then refuses a multi-node request.
func TestFitWithoutExclusivityIsNotMonotone(t *testing.T) {
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	s := allocator.MustNew(m, allocator.Options{})
	_, err = s.Allocate(&allocator.Request{ID: "wide", CPUs: 2, GPUs: 8, Policy: policy.Restricted})
	require.NoError(t, err)
	_, err = s.Allocate(&allocator.Request{ID: "narrow", CPUs: 2, Policy: policy.SingleNUMANode,
		Exclusive: policy.Preferred})
	require.NoError(t, err)
	// A CPU-only request that needs both nodes fits now (both shared) ...
	big := allocator.Request{ID: "big", CPUs: 200, Policy: policy.Restricted}
	require.NoError(t, s.Fit(&big))
	// ... but not without "wide": its node becomes single (held by narrow).
	require.ErrorIs(t, s.FitWithout(&big, []string{"wide"}), allocator.ErrExclusivity)
	require.NoError(t, s.FitWithout(&big, []string{"wide", "narrow"}))
}

func TestReplaceMachine(t *testing.T) {
	build := func(cpus [2]string, gpus int) *topology.Machine {
		b := topology.NewBuilder("box")
		b.AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.MustParseCPUSet(cpus[0]), MemoryMiB: 1024})
		b.AddNode(topology.Node{ID: 1, Socket: 1, CPUs: numa.MustParseCPUSet(cpus[1]), MemoryMiB: 1024})
		for g := 0; g < gpus; g++ {
			b.AddGPU(topology.GPU{ID: g, NUMANode: numa.NodeID(g % 2)})
		}
		m, err := b.Build()
		require.NoError(t, err)
		return m
	}
	m := build([2]string{"0-7", "8-15"}, 4)
	s := allocator.MustNew(m, allocator.Options{})
	a, err := s.Allocate(&allocator.Request{ID: "a", CPUs: 4, GPUs: 1, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	b, err := s.Allocate(&allocator.Request{ID: "b", CPUs: 2, GPUs: 1, MemoryMiB: 100, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	_, err = s.SetDeviceHealth(allocator.GPUClass, "3", false)
	require.NoError(t, err)
	before := fmt.Sprint(s.Snapshot())

	// CPUs 0-1 offline and GPUs 1-3 gone: a holds CPUs 0-3, b holds GPU 2
	// (best fit put it next to a, on node 0).
	err = s.ReplaceMachine(build([2]string{"2-7", "8-15"}, 1))
	var tc *allocator.TopologyChangeError
	require.ErrorAs(t, err, &tc)
	require.ErrorIs(t, err, allocator.ErrTopologyChange)
	require.Equal(t, []string{"a", "b"}, tc.Affected(), "%v", err)
	require.Contains(t, err.Error(), "CPUs 0-1")
	require.Equal(t, []int{2}, b.GPUs)
	require.Contains(t, err.Error(), "GPU 2 does not exist")
	require.Equal(t, before, fmt.Sprint(s.Snapshot()), "a refused replacement changes nothing")

	// More CPUs and the same GPUs: everything is kept exactly.
	bigger := build([2]string{"0-11", "12-23"}, 4)
	require.NoError(t, s.ReplaceMachine(bigger))
	require.Same(t, bigger, s.Machine())
	got, ok := s.Get("a")
	require.True(t, ok)
	require.True(t, got.CPUs.Equal(a.CPUs))
	require.Equal(t, a.GPUs, got.GPUs)
	got, _ = s.Get("b")
	require.True(t, got.CPUs.Equal(b.CPUs))
	require.Equal(t, b.Memory, got.Memory)
	require.Equal(t, map[string][]string{allocator.GPUClass: {"3"}}, s.Snapshot().Unhealthy, "health carries over")
	// Spans are recomputed on the new machine (b stays on node 0).
	require.Equal(t, []numa.NodeID{0}, got.NUMANodes(), "%v", got)
	r := allocator.Request{ID: "c", CPUs: 12, Policy: policy.SingleNUMANode}
	require.NoError(t, s.Fit(&r), "the new CPUs are usable")
}

func TestResize(t *testing.T) {
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	s := allocator.MustNew(m, allocator.Options{})
	a, err := s.Allocate(&allocator.Request{ID: "a", CPUs: 8, GPUs: 4, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	old := a.CPUs.Clone()

	grown, err := s.Resize("a", 16)
	require.NoError(t, err)
	require.Equal(t, 16, grown.CPUs.Size())
	require.True(t, old.IsSubsetOf(grown.CPUs), "growing keeps the CPUs held")
	require.Equal(t, []numa.NodeID{0}, grown.NUMANodes())
	require.Equal(t, a.GPUs, grown.GPUs)

	shrunk, err := s.Resize("a", 4)
	require.NoError(t, err)
	require.Equal(t, 4, shrunk.CPUs.Size())
	require.True(t, shrunk.CPUs.IsSubsetOf(grown.CPUs), "shrinking keeps a subset")

	// SingleNUMANode cannot grow beyond its node: refused, unchanged.
	before := fmt.Sprint(s.Snapshot())
	_, err = s.Resize("a", 113)
	require.Error(t, err)
	require.Equal(t, before, fmt.Sprint(s.Snapshot()))

	// Restricted 8 GPUs: grows on both nodes, CPUs split by GPUs.
	require.NoError(t, s.Release("a"))
	_, err = s.Allocate(&allocator.Request{ID: "t", CPUs: 16, GPUs: 8, Policy: policy.Restricted})
	require.NoError(t, err)
	tr, err := s.Resize("t", 32)
	require.NoError(t, err)
	require.Equal(t, 16, tr.CPUs.IntersectionCount(m.NodeCPUs(0)))
	require.Equal(t, 16, tr.CPUs.IntersectionCount(m.NodeCPUs(1)))

	_, err = s.Resize("nope", 2)
	require.ErrorIs(t, err, allocator.ErrUnknownID)
	_, err = s.Resize("t", -1)
	require.ErrorIs(t, err, allocator.ErrInvalidRequest)
}

// TestResizeJudgesWhatChanges: a resize is not refused for what other
// allocations did to the nodes it keeps, nor for its own devices failing;
// the exclusivity rule still binds the nodes it adds.
func TestResizeJudgesWhatChanges(t *testing.T) {
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)

	// Its own GPU fails: the GPU stays with it, unhealthy, and does not
	// change width_cap (a Restricted 1-GPU pod stays on one node).
	s := allocator.MustNew(m, allocator.Options{})
	g, err := s.Allocate(&allocator.Request{ID: "g", CPUs: 4, GPUs: 1, Policy: policy.Restricted})
	require.NoError(t, err)
	gpu := strconv.Itoa(g.GPUs[0])
	affected, err := s.SetDeviceHealth(allocator.GPUClass, gpu, false)
	require.NoError(t, err)
	require.Equal(t, []string{"g"}, affected)
	grown, err := s.Resize("g", 8)
	require.NoError(t, err)
	require.Equal(t, 8, grown.CPUs.Size())
	require.Equal(t, g.GPUs, grown.GPUs)
	require.Equal(t, g.NUMANodes(), grown.NUMANodes())
	require.Equal(t, map[string][]string{allocator.GPUClass: {gpu}}, s.Snapshot().Unhealthy)
	_, err = s.Resize("g", 2)
	require.NoError(t, err)

	// A None pod spreads over its node and makes it shared: a
	// SingleNUMANode pod there still grows and shrinks on it.
	s = allocator.MustNew(m, allocator.Options{})
	one, err := s.Allocate(&allocator.Request{ID: "one", CPUs: 4, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	_, err = s.Allocate(&allocator.Request{ID: "wide", CPUs: 200, Policy: policy.None})
	require.NoError(t, err)
	_, shared := s.NodeTypes()
	require.True(t, shared.Contains(int(one.DenseSpan.Lowest())), "the None pod made the node shared")
	_, err = s.Resize("one", 8)
	require.NoError(t, err)
	_, err = s.Resize("one", 2)
	require.NoError(t, err)
	// A fresh SingleNUMANode request could not use that node.
	require.ErrorIs(t, s.Fit(&allocator.Request{ID: "new", CPUs: 2, Policy: policy.SingleNUMANode}), allocator.ErrExclusivity)

	// Growing from one node to two binds every node of the new span: a node
	// another pod holds alone cannot join a wider span.
	s = allocator.MustNew(m, allocator.Options{})
	r, err := s.Allocate(&allocator.Request{ID: "r", CPUs: 4, Policy: policy.Restricted})
	require.NoError(t, err)
	x, err := s.Allocate(&allocator.Request{ID: "x", CPUs: 2, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	require.Equal(t, r.DenseSpan, x.DenseSpan, "best fit packs x next to r")
	before := fmt.Sprint(s.Snapshot())
	_, err = s.Resize("r", 150) // width_cap 2: node of r would be shared
	require.ErrorIs(t, err, allocator.ErrExclusivity)
	require.ErrorContains(t, err, "singleNUMANodeExclusive")
	require.Equal(t, before, fmt.Sprint(s.Snapshot()))
	// Without x, it grows.
	require.NoError(t, s.Release("x"))
	wide, err := s.Resize("r", 150)
	require.NoError(t, err)
	require.Len(t, wide.NUMANodes(), 2)
}

// TestKeepGPULocalCPUs: a CPU-only pod goes to a NUMA node without free
// GPUs unless the option is turned off.
func TestKeepGPULocalCPUs(t *testing.T) {
	m, err := topology.Preset("dgx-a100") // GPUs on nodes 1, 3, 5, 7
	require.NoError(t, err)
	r := allocator.Request{ID: "cpu-only", CPUs: 8, Policy: policy.SingleNUMANode}
	a, err := allocator.MustNew(m, allocator.Options{}).Allocate(&r)
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{0}, a.NUMANodes(), "node 0 has no GPUs")

	s := allocator.MustNew(m, allocator.Options{SpendGPULocalCPUs: true})
	g, err := s.Allocate(&allocator.Request{ID: "g", CPUs: 2, GPUs: 1, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	a, err = s.Allocate(&r)
	require.NoError(t, err)
	require.Equal(t, g.NUMANodes(), a.NUMANodes(), "without the preference, best fit packs next to the GPU pod")
}

// snapText is a state's live allocations and device health as text, free
// of pointers (so that states on equal machines compare equal).
func snapText(s *allocator.State) string {
	snap := s.Snapshot()
	out := ""
	for _, a := range snap.Allocations {
		out += fmt.Sprintf("%s %v/%v full=%v span=%s mem=%v\n", a.String(), a.Policy, a.Exclusive, a.FullPCPUs, a.DenseSpan, a.Memory)
	}
	return out + fmt.Sprint(snap.Unhealthy)
}

// TestReplaceMachineProperty: replacing the machine by an equal copy keeps
// everything; dropping one CPU or one GPU fails exactly for the
// allocations that held it, and then changes nothing.
func TestReplaceMachineProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := allocatortest.Machine().Draw(t, "machine")
		s := allocator.MustNew(m, allocator.Options{})
		playOps(s, allocatortest.Stream(m).Draw(t, "ops"))
		before := snapText(s)

		spec := m.Spec()
		same, err := spec.Build()
		require.NoError(t, err)
		require.NoError(t, s.ReplaceMachine(same))
		require.Equal(t, before, snapText(s))

		// Drop one CPU (from its node, cores and reserved set) or one GPU.
		var holders []string
		if len(spec.GPUs) > 0 && rapid.Bool().Draw(t, "dropGPU") {
			j := rapid.IntRange(0, len(spec.GPUs)-1).Draw(t, "gpu")
			gone := *spec.GPUs[j].ID
			spec.GPUs = append(spec.GPUs[:j:j], spec.GPUs[j+1:]...)
			for _, a := range s.Live() {
				for _, g := range a.GPUs {
					if g == gone {
						holders = append(holders, a.ID)
					}
				}
			}
			var links [][]int
			for _, l := range spec.NVLinks {
				if l[0] != gone && l[1] != gone {
					links = append(links, l)
				}
			}
			spec.NVLinks = links
		} else {
			all := m.CPUs().List()
			if len(all) < 2 {
				return
			}
			cpu := all[rapid.IntRange(0, len(all)-1).Draw(t, "cpu")]
			for i := range spec.NUMANodes {
				c := numa.MustParseCPUSet(*spec.NUMANodes[i].CPUs)
				c.Remove(cpu)
				str := c.String()
				spec.NUMANodes[i].CPUs = &str
			}
			var cores []string
			for _, cs := range spec.Cores {
				c := numa.MustParseCPUSet(cs)
				c.Remove(cpu)
				if !c.IsEmpty() {
					cores = append(cores, c.String())
				}
			}
			spec.Cores = cores
			var l3 []string
			for _, g := range spec.L3Groups {
				c := numa.MustParseCPUSet(g)
				c.Remove(cpu)
				if !c.IsEmpty() {
					l3 = append(l3, c.String())
				}
			}
			spec.L3Groups = l3
			r := numa.MustParseCPUSet(spec.ReservedCPUs)
			r.Remove(cpu)
			spec.ReservedCPUs = r.String()
			for _, a := range s.Live() {
				if a.CPUs.Contains(cpu) {
					holders = append(holders, a.ID)
				}
			}
		}
		smaller, err := spec.Build()
		if err != nil {
			t.Skipf("the smaller machine is not valid: %v", err) // e.g. a node left without CPUs in a socket
		}
		err = s.ReplaceMachine(smaller)
		if len(holders) == 0 {
			require.NoError(t, err)
			return
		}
		var tc *allocator.TopologyChangeError
		require.ErrorAs(t, err, &tc)
		require.ElementsMatch(t, holders, tc.Affected())
		require.Equal(t, before, snapText(s), "a refused replacement changes nothing")
	})
}

// TestOwnResourcesSameAnswers: a state with a resource of the caller's own
// that cannot tell what is free without given allocations (no Returner)
// answers Resize and FitWithout from a copy of itself; the answers are
// those of the state without it.
func TestOwnResourcesSameAnswers(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := allocatortest.Machine().Draw(t, "machine")
		plain := allocator.MustNew(m, allocator.Options{})
		own := allocator.MustNew(m, allocator.Options{Resources: []allocator.Resource{kindOnly("extra")}})
		for _, op := range allocatortest.StreamWithHealth(m).Draw(t, "ops") {
			require.Equal(t, apply(plain, op), apply(own, op))
		}
		live := plain.Live()
		if len(live) == 0 {
			return
		}
		a := live[rapid.IntRange(0, len(live)-1).Draw(t, "which")]
		cpus := rapid.IntRange(0, m.NumCPUs()).Draw(t, "cpus")
		r := allocatortest.Request(m).Draw(t, "request")
		require.Equal(t, fmt.Sprint(plain.FitWithout(&r, []string{a.ID})), fmt.Sprint(own.FitWithout(&r, []string{a.ID})))
		require.Equal(t, describe(plain.Resize(a.ID, cpus)), describe(own.Resize(a.ID, cpus)))
		require.Equal(t, snapText(plain), snapText(own))
	})
}
