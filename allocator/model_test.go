package allocator_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// The property tests below play random operation streams on random small
// machines against the engine and the reference model of
// allocatortest. Run more cases with -rapid.checks=N; a failure logs the
// machine as topology JSON and the operations as `numaplan place` input.

// sentinels are the categories an answer is compared by.
var sentinels = []error{allocator.ErrInvalidRequest, allocator.ErrDuplicateID, allocator.ErrUnknownID,
	allocator.ErrInsufficient, allocator.ErrNoNUMAFit, allocator.ErrExclusivity}

// category returns the sentinel err wraps ("nil" for nil, "other" for none).
func category(err error) string {
	if err == nil {
		return "nil"
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "other: " + err.Error()
}

// logCase logs the machine and the operations, for the failure report.
func logCase(t *rapid.T, m *topology.Machine, ops []allocatortest.Op) {
	t.Logf("machine:\n%s", allocatortest.MachineJSON(m))
	t.Logf("operations:\n%s", allocatortest.FormatOps(ops))
}

// describe writes an answer of the engine, for the determinism check.
func describe(a allocator.Allocation, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	c := a.Clone()
	return fmt.Sprintf("%s span %s devices %v memory %v", c.String(), c.DenseSpan, c.Devices, c.Memory)
}

// sameState reports how s differs from the model md: live allocations,
// free CPUs, free amounts per node, node types.
func sameState(s *allocator.State, md *allocatortest.Model) error {
	want := allocator.Snapshot{Allocations: md.Live(), Unhealthy: md.Unhealthy()}
	got := s.Snapshot()
	if err := allocatortest.CompareSnapshots(want, got); err != nil {
		return fmt.Errorf("the engine's live allocations are not those it handed out: %w", err)
	}
	if w, g := md.FreeCPUs(), s.FreeCPUs(); !w.Equal(g) {
		return fmt.Errorf("FreeCPUs: model %q, engine %q", w, g)
	}
	m := s.Machine()
	for i := range m.NumNodes() {
		if w, g := md.Free(i, false), s.NodeFree(i); !maps.Equal(w, g) {
			return fmt.Errorf("NodeFree(node %d): model %v, engine %v", m.NodeID(i), w, g)
		}
	}
	ws, wsh := md.NodeTypes()
	gs, gsh := s.NodeTypes()
	if ws != gs || wsh != gsh {
		return fmt.Errorf("NodeTypes (dense): model single {%s} shared {%s}, engine single {%s} shared {%s}",
			ws, wsh, gs, gsh)
	}
	return nil
}

// mayTakeUnplaced reports whether r is a None request for a device class of
// which m has devices of unknown NUMA node.
func mayTakeUnplaced(m *topology.Machine, r *allocator.Request) bool {
	if r.Policy != policy.None {
		return false
	}
	for _, g := range m.GPUs() {
		if g.NUMANode == topology.UnknownNode && r.GPUs > 0 {
			return true
		}
	}
	for _, d := range m.Devices() {
		if d.NUMANode == topology.UnknownNode && r.Devices[d.Class] > 0 {
			return true
		}
	}
	return false
}

// unchanged fails when s's snapshot or free CPUs differ from before.
func unchanged(t *rapid.T, what string, s *allocator.State, before allocator.Snapshot, freeBefore string) {
	if err := allocatortest.CompareSnapshots(before, s.Snapshot()); err != nil {
		t.Fatalf("%s changed the state: %v", what, err)
	}
	if got := s.FreeCPUs().String(); got != freeBefore {
		t.Fatalf("%s changed FreeCPUs: %q before, %q after", what, freeBefore, got)
	}
}

// apply runs op on s and returns the answer in words.
func apply(s *allocator.State, op allocatortest.Op) string {
	switch op.Kind {
	case allocatortest.OpAllocate:
		r := op.Request
		return describe(s.Allocate(&r))
	case allocatortest.OpRelease:
		return category(s.Release(op.ID))
	}
	affected, err := s.SetDeviceHealth(op.Class, op.ID, op.Healthy)
	return fmt.Sprintf("affected %q %s", affected, category(err))
}

// play runs ops on a fresh state and returns its answers, one per
// operation.
func play(m *topology.Machine, opts allocator.Options, ops []allocatortest.Op) []string {
	s := allocator.MustNew(m, opts)
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = apply(s, op)
	}
	return out
}

// options draws the engine's options: mostly the defaults, sometimes
// spread packing, least-allocated scoring, a tiny search budget or GPU-local
// CPUs spent, none of which may change what is admitted (the model is told
// of those that change the preferred span).
func options(t *rapid.T) allocator.Options {
	if rapid.IntRange(0, 2).Draw(t, "defaultOptions") != 2 {
		return allocator.Options{}
	}
	return allocator.Options{
		Packing:           rapid.SampledFrom([]allocator.Packing{allocator.BestFit, allocator.Spread}).Draw(t, "packing"),
		Scoring:           rapid.SampledFrom([]allocator.Scoring{allocator.MostAllocated, allocator.LeastAllocated}).Draw(t, "scoring"),
		SearchBudget:      rapid.IntRange(0, 3).Draw(t, "searchBudget"),
		SpendGPULocalCPUs: rapid.Bool().Draw(t, "spendGPULocalCPUs"),
	}
}

// TestEngineAgainstModel is the state-machine property: after every
// operation of a random stream the engine's answer passes the model's
// Check; Fit agrees exactly with Allocate; Fit and Score change nothing;
// a release of the allocation just made restores the state before it; an
// unknown release or a duplicate ID changes nothing; the engine's state is
// the model's; Snapshot then Restore into a fresh State gives the same
// snapshot; SetDeviceHealth reports the allocations holding the device.
// At the end the same stream on two fresh States gives the same answers.
// The options are mostly the defaults, sometimes others that must not
// change what is admitted.
func TestEngineAgainstModel(t *testing.T) { rapid.Check(t, streamsOn(allocatortest.Machine())) }

// streamsOn is the property of TestEngineAgainstModel on the machines
// drawn from machines.
func streamsOn(machines *rapid.Generator[*topology.Machine]) func(*rapid.T) {
	return func(t *rapid.T) {
		m := machines.Draw(t, "machine")
		ops := allocatortest.StreamWithHealth(m).Draw(t, "ops")
		opts := options(t)
		logCase(t, m, ops)
		t.Logf("options: %+v", opts)
		checkStream(t, m, opts, ops)
	}
}

// TestEngineAgainstModelOnSmallMachines is the same property on machines
// of 2-4 NUMA nodes with SMT, distances and PCIe switches always, where
// the model also checks that every span is the top-ranked admissible one
// and every criterion of the order can decide.
func TestEngineAgainstModelOnSmallMachines(t *testing.T) {
	rapid.Check(t, streamsOn(allocatortest.SmallMachine()))
}

// TestEngineAgainstModelOnPresets is the same property on the built-in
// machines of at most 8 NUMA nodes (real shapes, large amounts per node).
func TestEngineAgainstModelOnPresets(t *testing.T) {
	var machines []*topology.Machine
	for _, name := range topology.PresetNames() {
		m, err := topology.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if m.NumNodes() <= 8 {
			machines = append(machines, m)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(machines).Draw(t, "preset")
		ops := allocatortest.StreamWithHealth(m).Draw(t, "ops")
		opts := options(t)
		t.Logf("preset %s; operations:\n%s", m.Name(), allocatortest.FormatOps(ops))
		t.Logf("options: %+v", opts)
		checkStream(t, m, opts, ops)
	})
}

// checkStream plays ops on a fresh State of m and checks every step (see
// TestEngineAgainstModel).
func checkStream(t *rapid.T, m *topology.Machine, opts allocator.Options, ops []allocatortest.Op) {
	s := allocator.MustNew(m, opts)
	md, err := allocatortest.NewModel(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	md = md.WithOptions(opts)
	var answers []string
	// The state before the last allocation, while it was the last
	// operation and succeeded.
	var lastID string
	var lastSnap allocator.Snapshot
	var lastFree string
	var lastModel *allocatortest.Model

	for i, op := range ops {
		before := s.Snapshot()
		freeBefore := s.FreeCPUs().String()
		step := fmt.Sprintf("op %d %s", i, op)
		switch op.Kind {
		case allocatortest.OpAllocate:
			r := op.Request
			fitErr := s.Fit(&r)
			unchanged(t, step+": Fit", s, before, freeBefore)
			if err := md.CheckFit(&r, fitErr); err != nil {
				t.Fatalf("%s: Fit: %v", step, err)
			}
			anon := r
			anon.ID = ""
			if err := md.CheckFit(&anon, s.Fit(&anon)); err != nil {
				t.Fatalf("%s: Fit without an ID: %v", step, err)
			}
			unchanged(t, step+": Fit without an ID", s, before, freeBefore)
			score, scoreErr := s.Score(&r)
			unchanged(t, step+": Score", s, before, freeBefore)
			if category(scoreErr) != category(fitErr) {
				t.Fatalf("%s: Score says %v, Fit says %v", step, scoreErr, fitErr)
			}
			if scoreErr == nil && (score < 0 || score > 100) {
				t.Fatalf("%s: Score %d is outside 0-100", step, score)
			}

			a, err := s.Allocate(&r)
			answers = append(answers, describe(a, err))
			if (fitErr == nil) != (err == nil) || category(fitErr) != category(err) {
				t.Fatalf("%s: Fit and Allocate disagree: Fit %v, Allocate %s", step, fitErr, describe(a, err))
			}
			if err := md.Check(&r, a, err); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			lastID = ""
			if err != nil {
				unchanged(t, step+": refused Allocate", s, before, freeBefore)
				break
			}
			a = a.Clone()
			// Score's alignment band: 50-100 when the span is no wider
			// than width_cap, 0-49 otherwise. Not checked for a None
			// request that may take devices of unknown NUMA node: whether
			// they lower its width_cap is left open by docs/design.md.
			wc := md.Decide(&r).WidthCap
			if aligned := a.DenseSpan.Count() <= wc; !mayTakeUnplaced(m, &r) && aligned != (score >= 50) {
				t.Fatalf("%s: Score %d, but the span %v has %d node(s) and width_cap is %d",
					step, score, a.NUMANodes(), a.DenseSpan.Count(), wc)
			}
			next, err := md.With(a)
			if err != nil {
				t.Fatalf("%s: the allocation is not a possible state: %v", step, err)
			}
			lastID, lastSnap, lastFree, lastModel = r.ID, before, freeBefore, md
			md = next

		case allocatortest.OpRelease:
			err := s.Release(op.ID)
			answers = append(answers, category(err))
			if !md.IsLive(op.ID) {
				if !errors.Is(err, allocator.ErrUnknownID) {
					t.Fatalf("%s: releasing an unknown ID: want ErrUnknownID, got %v", step, err)
				}
				unchanged(t, step+": unknown Release", s, before, freeBefore)
				lastID = ""
				break
			}
			if err != nil {
				t.Fatalf("%s: releasing a live ID: %v", step, err)
			}
			next, err := md.Without(op.ID)
			if err != nil {
				t.Fatal(err)
			}
			md = next
			if op.ID == lastID {
				unchanged(t, step+": Release of the allocation just made (compared with before it)",
					s, lastSnap, lastFree)
				if err := sameState(s, lastModel); err != nil {
					t.Fatalf("%s: Release of the allocation just made does not restore the state before it: %v",
						step, err)
				}
			}
			lastID = ""

		case allocatortest.OpHealth:
			affected, err := s.SetDeviceHealth(op.Class, op.ID, op.Healthy)
			answers = append(answers, fmt.Sprintf("affected %q %s", affected, category(err)))
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			if want := md.Holders(op.Class, op.ID); !slices.Equal(affected, want) {
				t.Fatalf("%s: affected %q, want the holders %q", step, affected, want)
			}
			if md, err = md.WithHealth(op.Class, op.ID, op.Healthy); err != nil {
				t.Fatal(err)
			}
			lastID = ""
		}

		if err := sameState(s, md); err != nil {
			t.Fatalf("after %s: %v", step, err)
		}
		snap := s.Snapshot()
		fresh := allocator.MustNew(m, opts)
		if err := fresh.Restore(snap); err != nil {
			t.Fatalf("after %s: Restore of the snapshot into a fresh State: %v", step, err)
		}
		if err := allocatortest.CompareSnapshots(snap, fresh.Snapshot()); err != nil {
			t.Fatalf("after %s: Snapshot, Restore, Snapshot: %v", step, err)
		}
		if err := sameState(fresh, md); err != nil {
			t.Fatalf("after %s: the restored State: %v", step, err)
		}
	}

	// Determinism: a replay on two fresh States answers the same.
	for run := 1; run <= 2; run++ {
		again := play(m, opts, ops)
		for i := range ops {
			if again[i] != answers[i] {
				t.Fatalf("not deterministic: replay %d answers op %d %s with\n  %s\nthe first play answered\n  %s",
					run, i, ops[i], again[i], answers[i])
			}
		}
	}
}

// TestRefusalsAreTyped: after a random stream, a refusal of a valid request
// is a *allocator.PlacementError that unwraps to ErrInsufficient,
// ErrNoNUMAFit or ErrExclusivity (whose widths, when given, are the
// model's), and an invalid request is refused with ErrInvalidRequest (a
// *allocator.RequestError), by Fit and Allocate alike.
func TestRefusalsAreTyped(t *testing.T) {
	placement := []error{allocator.ErrInsufficient, allocator.ErrNoNUMAFit, allocator.ErrExclusivity}
	rapid.Check(t, func(t *rapid.T) {
		m := allocatortest.Machine().Draw(t, "machine")
		ops := allocatortest.StreamWithHealth(m).Draw(t, "ops")
		s := allocator.MustNew(m, allocator.Options{})
		for _, op := range ops {
			apply(s, op)
		}
		r := allocatortest.Request(m).Draw(t, "request")
		r.ID = "typed"
		t.Logf("machine:\n%s", allocatortest.MachineJSON(m))
		t.Logf("operations:\n%s%s", allocatortest.FormatOps(ops),
			allocatortest.Op{Kind: allocatortest.OpAllocate, ID: r.ID, Request: r})

		md, err := allocatortest.FromSnapshot(m, s.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		v := md.Decide(&r)
		fitErr := s.Fit(&r)
		_, err = s.Allocate(&r)
		for name, err := range map[string]error{"Fit": fitErr, "Allocate": err} {
			if err == nil {
				continue
			}
			if !v.Valid {
				var re *allocator.RequestError
				if !errors.Is(err, allocator.ErrInvalidRequest) || !errors.As(err, &re) {
					t.Fatalf("%s of an invalid request (%s): want a *RequestError wrapping ErrInvalidRequest, got %T %v",
						name, v.Reason, err, err)
				}
				continue
			}
			var pe *allocator.PlacementError
			if !errors.As(err, &pe) {
				t.Fatalf("%s refused a valid request with %T %v, not a *PlacementError", name, err, err)
			}
			if !slices.Contains(placement, pe.Unwrap()) {
				t.Fatalf("%s: PlacementError.Unwrap() = %v, want one of %v", name, pe.Unwrap(), placement)
			}
			var bad []string
			if pe.ID != r.ID || pe.Policy != r.Policy || pe.Exclusive != r.Exclusive {
				bad = append(bad, fmt.Sprintf("ID/policy/exclusive %q %s/%s, want %q %s/%s",
					pe.ID, pe.Policy, pe.Exclusive, r.ID, r.Policy, r.Exclusive))
			}
			if pe.WidthCap != 0 && (pe.WidthCap != v.WidthCap || pe.InSet != v.InSet) {
				bad = append(bad, fmt.Sprintf("WidthCap %d InSet %t, the model's %d %t",
					pe.WidthCap, pe.InSet, v.WidthCap, v.InSet))
			}
			if pe.WidthFree != 0 && pe.WidthFree != v.WidthFree {
				bad = append(bad, fmt.Sprintf("WidthFree %d, the model's %d", pe.WidthFree, v.WidthFree))
			}
			if pe.Width != 0 && v.Width != 0 && pe.Width != v.Width {
				bad = append(bad, fmt.Sprintf("Width %d, the model's %d", pe.Width, v.Width))
			}
			if len(bad) > 0 {
				t.Fatalf("%s's PlacementError %q: %s (model: %s)", name, pe, strings.Join(bad, "; "), v.Reason)
			}
		}
		if !v.Valid && (fitErr == nil || err == nil) {
			t.Fatalf("invalid request (%s) admitted: Fit %v, Allocate %v", v.Reason, fitErr, err)
		}
	})
}

// played draws a machine and a stream (with device health changes), plays
// the stream on a fresh State and returns the machine, the State and its
// model.
func played(t *rapid.T) (*topology.Machine, *allocator.State, *allocatortest.Model) {
	m := allocatortest.Machine().Draw(t, "machine")
	ops := allocatortest.StreamWithHealth(m).Draw(t, "ops")
	logCase(t, m, ops)
	s := allocator.MustNew(m, allocator.Options{})
	for _, op := range ops {
		apply(s, op)
	}
	md, err := allocatortest.FromSnapshot(m, s.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	return m, s, md
}

// judged ends one step whose answer the model judged (cerr): it fails on
// the model's complaint; after a refusal (err) it checks that nothing
// changed since before, else it moves the model on (next) and compares
// the engine's state with it. It returns the model after the step.
func judged(t *rapid.T, step string, s *allocator.State, md *allocatortest.Model, before allocator.Snapshot,
	freeBefore string, err, cerr error, next func() (*allocatortest.Model, error)) *allocatortest.Model {
	if cerr != nil {
		t.Fatalf("%s: %v", step, cerr)
	}
	if err != nil {
		unchanged(t, step+": refused", s, before, freeBefore)
		return md
	}
	md, err = next()
	if err != nil {
		t.Fatalf("%s: the result is not a possible state: %v", step, err)
	}
	if err := sameState(s, md); err != nil {
		t.Fatalf("after %s: %v", step, err)
	}
	return md
}

// resizeSize draws the new size of a resize of a: mostly near its current
// size (a few CPUs or cores more or less), sometimes anything up to the
// machine's CPUs and one more, sometimes negative.
func resizeSize(t *rapid.T, m *topology.Machine, a allocator.Allocation) int {
	switch rapid.IntRange(0, 9).Draw(t, "sizeKind") {
	case 0:
		return -rapid.IntRange(1, 3).Draw(t, "negative")
	case 1, 2, 3:
		return rapid.IntRange(0, m.NumCPUs()+1).Draw(t, "anySize")
	}
	step := m.ThreadsPerCore()
	if !a.FullPCPUs || rapid.IntRange(0, 7).Draw(t, "oddStep") == 0 {
		step = 1
	}
	return max(0, a.CPUs.Size()+step*rapid.IntRange(-3, 3).Draw(t, "steps"))
}

// TestResizeAgainstModel: after a random stream (with device health
// changes), a few resizes of random live allocations (and of unknown IDs)
// are each answered as the reference model decides (allocatortest's
// DecideResize, by enumerating every NUMA mask): a resize is granted
// exactly when the model admits it, a refusal is of the model's category
// and names the allocation's nodes by ID, a granted one holds what the
// model allows on a span it allows, and a refused one changes nothing;
// after each the engine's state is the model's.
func TestResizeAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, s, md := played(t)
		for k := range rapid.IntRange(1, 4).Draw(t, "resizes") {
			live := s.Live()
			id, a := "ghost", allocator.Allocation{}
			if len(live) > 0 && rapid.IntRange(0, 9).Draw(t, "unknown") != 0 {
				a = live[rapid.IntRange(0, len(live)-1).Draw(t, "which")].Clone()
				id = a.ID
			}
			cpus := resizeSize(t, m, a)
			step := fmt.Sprintf("resize %d: %q to %d CPUs", k, id, cpus)
			t.Logf("%s (verdict: %s)", step, md.DecideResize(id, cpus).Reason)
			before, freeBefore := s.Snapshot(), s.FreeCPUs().String()
			got, err := s.Resize(id, cpus)
			md = judged(t, step, s, md, before, freeBefore, err, md.CheckResize(id, cpus, got, err),
				func() (*allocatortest.Model, error) { return md.WithResized(got.Clone()) })
		}
	})
}

// claimCandidate draws an allocation to claim on m: one that a twin state
// made (after its own stream, so it may conflict with what s holds),
// sometimes changed to name something unknown, reserved, held or twice,
// memory on a node ID m lacks, negative memory, a class m lacks, a live or
// empty ID, or fullPCPUs over part of a core.
func claimCandidate(t *rapid.T, m *topology.Machine, s *allocator.State) allocator.Allocation {
	twin := allocator.MustNew(m, allocator.Options{})
	for _, op := range allocatortest.Stream(m).Draw(t, "twinOps") {
		apply(twin, op)
	}
	var a allocator.Allocation
	if live := twin.Live(); len(live) > 0 {
		a = live[rapid.IntRange(0, len(live)-1).Draw(t, "twinWhich")].Clone()
	}
	a.ID = "claim"
	a.DenseSpan = numa.Mask(rapid.Uint64().Draw(t, "ignoredSpan")) // Claim ignores it
	cpus := m.CPUs().List()
	for range rapid.IntRange(0, 2).Draw(t, "changes") {
		switch rapid.IntRange(0, 11).Draw(t, "change") {
		case 0:
			if len(cpus) > 0 {
				a.CPUs.Add(rapid.SampledFrom(cpus).Draw(t, "addCPU")) // maybe held or reserved
			}
		case 1:
			a.CPUs.Add(1000) // unknown
		case 2:
			if gpus := m.GPUs(); len(gpus) > 0 {
				a.GPUs = append(a.GPUs, rapid.SampledFrom(gpus).Draw(t, "addGPU").ID)
			}
		case 3:
			a.GPUs = append(a.GPUs, 999)
		case 4:
			if a.Devices == nil {
				a.Devices = map[string][]string{}
			}
			a.Devices[allocatortest.RDMAClass] = append(a.Devices[allocatortest.RDMAClass],
				rapid.SampledFrom([]string{"mlx5_0", "mlx5_1", "mlx5_9"}).Draw(t, "addRDMA"))
		case 5: // a class the machine lacks, or GPUs named as a device class
			a.Devices = map[string][]string{rapid.SampledFrom([]string{"RDMA", allocator.GPUClass}).Draw(t, "badClass"): {"0"}}
		case 6:
			a.Memory = append(a.Memory, allocator.NodeMemory{Node: 99, MiB: 1})
		case 7:
			node := m.NodeID(rapid.IntRange(0, m.NumNodes()-1).Draw(t, "memNode"))
			a.Memory = append(a.Memory, allocator.NodeMemory{Node: node,
				MiB: rapid.Int64Range(-1, 4096).Draw(t, "memMiB")})
		case 8:
			if live := s.Live(); len(live) > 0 {
				a.ID = rapid.SampledFrom(live).Draw(t, "liveID").ID
			}
		case 9:
			a.ID = ""
		case 10:
			a.FullPCPUs = !a.FullPCPUs
		case 11:
			a.Policy = policy.Policy(len(policy.Policies) + 1)
		}
	}
	return a
}

// TestClaimAgainstModel: after a random stream, claims of allocations
// decided elsewhere (a twin state's, sometimes changed to conflict) are
// granted exactly when the reference model accepts them (allocatortest's
// Model.Claim), returning the model's allocation; a refusal is of the
// model's category (a *NodeError for a NUMA node ID the machine lacks) and
// changes nothing; the engine's state is then the model's.
func TestClaimAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, s, md := played(t)
		for k := range rapid.IntRange(1, 3).Draw(t, "claims") {
			a := claimCandidate(t, m, s)
			a.ID += strconv.Itoa(k)
			step := fmt.Sprintf("claim %d of %s memory %v devices %v fullPCPUs %t", k, a, a.Memory, a.Devices, a.FullPCPUs)
			before, freeBefore := s.Snapshot(), s.FreeCPUs().String()
			got, err := s.Claim(a.Clone())
			md = judged(t, step, s, md, before, freeBefore, err, md.CheckClaim(a, got, err),
				func() (*allocatortest.Model, error) { next, _, err := md.Claim(a); return next, err })
		}
	})
}

// TestEngineAgainstModelOnSMT4 is the property of TestEngineAgainstModel
// on machines of four threads per core (as POWER's SMT4), where a node's
// last core may have one to three threads (never whole) and some CPUs
// are reserved: the CPU resource's whole-core bookkeeping for more than
// two threads.
func TestEngineAgainstModelOnSMT4(t *testing.T) {
	rapid.Check(t, streamsOn(smt4Machine()))
}

// smt4Machine generates machines of 1-3 NUMA nodes with 0-13 CPUs each in
// cores of four threads (the last one of a node shorter when the count is
// not a multiple of four), CPU numbers sometimes interleaved across nodes,
// 0-2 GPUs per node and sometimes 1-3 reserved CPUs.
func smt4Machine() *rapid.Generator[*topology.Machine] {
	return rapid.Custom(func(t *rapid.T) *topology.Machine {
		n := rapid.IntRange(1, 3).Draw(t, "nodes")
		counts := make([]int, n)
		total := 0
		for k := range counts {
			counts[k] = rapid.IntRange(0, 13).Draw(t, fmt.Sprintf("cpus%d", k))
			total += counts[k]
		}
		perm := make([]int, total)
		for i := range perm {
			perm[i] = i
		}
		if total > 1 && rapid.Bool().Draw(t, "shuffle") {
			perm = rapid.Permutation(perm).Draw(t, "cpuOrder")
		}
		b := topology.NewBuilder("smt4")
		first, gpuID := 0, 0
		for k, c := range counts {
			var set numa.CPUSet
			for j := range c {
				set.Add(perm[first+j])
			}
			for j := 0; j < c; j += 4 {
				var core numa.CPUSet
				for x := j; x < min(j+4, c); x++ {
					core.Add(perm[first+x])
				}
				b.AddCore(core)
			}
			first += c
			b.AddNode(topology.Node{ID: numa.NodeID(k), Socket: topology.UnknownSocket, CPUs: set, MemoryMiB: 1024})
			for range rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("gpus%d", k)) {
				b.AddGPU(topology.GPU{ID: gpuID, NUMANode: numa.NodeID(k)})
				gpuID++
			}
		}
		if total > 0 && rapid.IntRange(0, 2).Draw(t, "hasReserved") == 0 {
			var set numa.CPUSet
			for _, i := range rapid.SliceOfNDistinct(rapid.IntRange(0, total-1), 1, min(total, 3), rapid.ID[int]).Draw(t, "reserved") {
				set.Add(perm[i])
			}
			b.SetReservedCPUs(set)
		}
		m, err := b.Build()
		if err != nil {
			t.Fatalf("smt4Machine built an invalid machine: %v", err)
		}
		if slices.Max(counts) >= 4 && m.ThreadsPerCore() != 4 {
			t.Fatalf("smt4Machine: %d threads per core, want 4", m.ThreadsPerCore())
		}
		return m
	})
}
