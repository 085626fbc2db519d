package allocator_test

import (
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/topology"
)

// TestGeneralPathsAgree is the one differential of the fast paths: it plays
// random request streams (Allocate, Release, Resize, Fit, Score,
// FitWithout, SetDeviceHealth, Snapshot and Restore) on two states of the
// same machine, one with every fast path of allocator and devchoice on
// and one with the switch (general.On) routing each to its general path,
// and requires identical results, errors and states after every
// operation. The machines are random ones (allocatortest.Machine and
// SmallMachine, sometimes with a kind of the caller's own), every preset,
// and numa64 fragmented by a burst of small allocations first.
func TestGeneralPathsAgree(t *testing.T) {
	t.Cleanup(general.Set(false))
	check := func(t *testing.T, machine *rapid.Generator[*topology.Machine], fill int) {
		rapid.Check(t, func(rt *rapid.T) {
			m := machine.Draw(rt, "machine")
			playBoth(rt, m, fill)
		})
	}
	t.Run("random", func(t *testing.T) { check(t, allocatortest.Machine(), 0) })
	t.Run("small", func(t *testing.T) { check(t, allocatortest.SmallMachine(), 0) })
	for _, name := range topology.PresetNames() {
		m, err := topology.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		fill := 0
		if name == "numa64" {
			fill = 200 // fragmented first
		}
		t.Run(name, func(t *testing.T) { check(t, rapid.Just(m), fill) })
	}
}

// pair is the two states of the differential: fast paths on (fast) and
// routed to their general paths (slow).
type pair struct {
	fast, slow *allocator.State
}

// both runs f on the fast state with the switch off and on the slow one
// with it on, and returns both answers.
func both[T any](p *pair, f func(s *allocator.State) T) (T, T) {
	general.On = false
	a := f(p.fast)
	general.On = true
	b := f(p.slow)
	general.On = false
	return a, b
}

// errText is err's message, or "<nil>".
func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// answer is one operation's result as text, for comparing and printing.
type answer struct {
	A     allocator.Allocation
	Score int
	IDs   []string
	Err   string
}

// playBoth plays a random stream on two states of m (after fill small
// allocations) and fails at the first operation whose answers or states
// differ.
func playBoth(rt *rapid.T, m *topology.Machine, fill int) {
	custom := rapid.IntRange(0, 3).Draw(rt, "custom") == 0
	opts := func() allocator.Options {
		var o allocator.Options
		if custom {
			o.NewResources = func(m *topology.Machine) ([]allocator.Resource, error) {
				return []allocator.Resource{newHugepages(m, 4)}, nil
			}
		}
		return o
	}
	newState := func() *allocator.State { return allocator.MustNew(m, opts()) }
	p := &pair{newState(), newState()}
	req := allocatortest.Request(m)
	type dev struct{ class, id string }
	var devs []dev
	for _, g := range m.GPUs() {
		devs = append(devs, dev{allocator.GPUClass, fmt.Sprint(g.ID)})
	}
	for _, d := range m.Devices() {
		devs = append(devs, dev{d.Class, d.ID})
	}
	drawReq := func(label string) *allocator.Request {
		r := req.Draw(rt, label)
		if custom && rapid.Bool().Draw(rt, label+"-pages") {
			r.Amounts = map[string]int64{hugepagesKind: rapid.Int64Range(0, 9).Draw(rt, label+"-n")}
		}
		return &r
	}
	liveID := func(label string) string {
		live := p.fast.Live()
		if len(live) == 0 || rapid.IntRange(0, 9).Draw(rt, label+"-unknown") == 0 {
			return "none"
		}
		return live[rapid.IntRange(0, len(live)-1).Draw(rt, label)].ID
	}
	for i := range fill {
		r := &allocator.Request{ID: fmt.Sprintf("f%d", i), CPUs: rapid.IntRange(1, 6).Draw(rt, "fillCPUs"),
			MemoryMiB: rapid.Int64Range(0, 2048).Draw(rt, "fillMem")}
		_, _ = both(p, func(s *allocator.State) error { _, err := s.Allocate(r); return err })
	}
	n := rapid.IntRange(1, 40).Draw(rt, "ops")
	for i := range n {
		var op string
		var f func(s *allocator.State) answer
		switch k := rapid.IntRange(0, 9).Draw(rt, "op"); k {
		case 0, 1, 2:
			op = "allocate"
			r := drawReq("req")
			r.ID = fmt.Sprintf("p%d", i)
			if rapid.IntRange(0, 5).Draw(rt, "dup") == 0 {
				r.ID = liveID("dupID")
			}
			f = func(s *allocator.State) answer { a, err := s.Allocate(r); return answer{A: a, Err: errText(err)} }
		case 3:
			op = "release"
			id := liveID("releaseID")
			f = func(s *allocator.State) answer { return answer{Err: errText(s.Release(id))} }
		case 4:
			op = "resize"
			id := liveID("resizeID")
			cpus := rapid.IntRange(-1, 24).Draw(rt, "resizeCPUs")
			f = func(s *allocator.State) answer { a, err := s.Resize(id, cpus); return answer{A: a, Err: errText(err)} }
		case 5:
			op = "fit"
			r := drawReq("fitReq")
			f = func(s *allocator.State) answer { return answer{Err: errText(s.Fit(r))} }
		case 6:
			op = "score"
			r := drawReq("scoreReq")
			f = func(s *allocator.State) answer { sc, err := s.Score(r); return answer{Score: sc, Err: errText(err)} }
		case 7:
			op = "fitWithout"
			r := drawReq("withoutReq")
			var victims []string
			for range rapid.IntRange(0, 3).Draw(rt, "victims") {
				victims = append(victims, liveID("victim"))
			}
			f = func(s *allocator.State) answer { return answer{Err: errText(s.FitWithout(r, victims))} }
		case 8:
			op = "health"
			if len(devs) == 0 {
				continue
			}
			d := devs[rapid.IntRange(0, len(devs)-1).Draw(rt, "dev")]
			healthy := rapid.IntRange(0, 2).Draw(rt, "healthy") == 0
			f = func(s *allocator.State) answer {
				ids, err := s.SetDeviceHealth(d.class, d.id, healthy)
				return answer{IDs: ids, Err: errText(err)}
			}
		case 9:
			op = "snapshot/restore"
			f = func(s *allocator.State) answer {
				snap := s.Snapshot()
				s2 := allocator.MustNew(m, opts())
				err := s2.Restore(snap)
				if err == nil {
					if s == p.fast {
						p.fast = s2
					} else {
						p.slow = s2
					}
				}
				return answer{Err: errText(err)}
			}
		}
		a, b := both(p, f)
		if !reflect.DeepEqual(a, b) {
			rt.Fatalf("op %d (%s): fast paths answer\n%+v\ngeneral paths answer\n%+v\nmachine:\n%s", i, op, a, b, allocatortest.MachineJSON(m))
		}
		sa, sb := both(p, func(s *allocator.State) allocator.Snapshot { return s.Snapshot() })
		if !reflect.DeepEqual(sa, sb) {
			rt.Fatalf("op %d (%s): states differ:\nfast %+v\ngeneral %+v", i, op, sa, sb)
		}
	}
}
