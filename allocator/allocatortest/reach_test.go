package allocatortest_test

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
)

// shape is a request without its ID: two requests of one shape ask for
// the same thing.
func shape(r allocator.Request) string {
	r.ID = ""
	return fmt.Sprintf("%d/%d/%d/%v/%v/%v/%v/%v", r.CPUs, r.GPUs, r.MemoryMiB,
		r.Devices, r.Amounts, r.Policy, r.Exclusive, r.FullPCPUs)
}

// noDevices reports whether devs asks for no device.
func noDevices(devs map[string]int) bool {
	for _, n := range devs {
		if n != 0 {
			return false
		}
	}
	return true
}

// reach is what one stream played against the engine went through.
type reach struct {
	// releasedCPUOnly: a pod of CPUs only (no GPU, no device) was admitted
	// and then released.
	releasedCPUOnly bool
	// refusedRepeated: a request the machine refused (a placement error,
	// not a malformed request or a duplicate ID) was asked for again, in
	// the same shape, and refused again.
	refusedRepeated bool
}

// playForReach plays a stream of Machine and Stream against a fresh state.
func playForReach(t *rapid.T) reach {
	m := allocatortest.Machine().Draw(t, "machine")
	s := allocator.MustNew(m, allocator.Options{})
	var got reach
	cpuOnly := map[string]bool{} // live CPU-only allocations by ID
	refused := map[string]bool{} // shapes refused so far
	for _, op := range allocatortest.Stream(m).Draw(t, "ops") {
		switch op.Kind {
		case allocatortest.OpAllocate:
			r := op.Request
			_, err := s.Allocate(&r)
			var pe *allocator.PlacementError
			switch {
			case err == nil:
				if r.GPUs == 0 && r.CPUs > 0 && noDevices(r.Devices) {
					cpuOnly[op.ID] = true
				}
			case errors.As(err, &pe):
				if refused[shape(r)] {
					got.refusedRepeated = true
				}
				refused[shape(r)] = true
			}
		case allocatortest.OpRelease:
			if s.Release(op.ID) == nil && cpuOnly[op.ID] {
				got.releasedCPUOnly = true
			}
			delete(cpuOnly, op.ID)
		}
	}
	return got
}

// TestDefaultGeneratorsReachTheEdgeCases: within rapid's default 100
// checks, Machine and Stream play a CPU-only pod that is admitted and
// released, and a refused request asked for again, each in at least a
// tenth of the checks. They do in about 40% and 30% (the counts are
// logged), so a run falls under a tenth with a chance of about one in
// 100,000; before Stream asked for the latest request again, a refused
// shape came back in 1-4 checks of 100.
func TestDefaultGeneratorsReachTheEdgeCases(t *testing.T) {
	var checks, released, repeated int
	rapid.Check(t, func(t *rapid.T) {
		got := playForReach(t)
		checks++
		if got.releasedCPUOnly {
			released++
		}
		if got.refusedRepeated {
			repeated++
		}
	})
	t.Logf("%d checks: a CPU-only pod admitted and released in %d, a refused shape asked for again in %d", checks, released, repeated)
	for _, c := range []struct {
		what string
		n    int
	}{{"a CPU-only pod admitted and released", released}, {"a refused shape asked for again", repeated}} {
		if c.n*10 < checks {
			t.Errorf("%s in %d of %d checks, under a tenth", c.what, c.n, checks)
		}
	}
}
