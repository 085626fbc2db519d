package allocator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// TestFitsOneNodeAgreesWithDecide checks that Fit's shortcut
// (State.fitsOneNode) admits exactly the requests that the decision
// proper admits with a one-node span inside the nodes the rule allows (or
// with nothing to place on known nodes), on states that random
// allocations of every policy and exclusivity have filled in part (a GPU
// of unknown NUMA node and device classes included), for requests of
// every policy, invalid ones and ones for other device classes included.
func TestFitsOneNodeAgreesWithDecide(t *testing.T) {
	for _, m := range withUnknownGPU(t, "dgx-a100", "dgx-h100", "small-1s", "numa64", "xeon-2s-snc2-8gpu") {
		rapid.Check(t, func(rt *rapid.T) {
			s := MustNew(m, Options{})
			r := fillAndDraw(rt, s)
			fast := s.fitsOneNode(r)
			sr := s.searcher(r, nil)
			err := sr.decide(false)
			soft := r.Policy == policy.BestEffort || r.Policy == policy.None
			allowed := policy.AllowedPool(1, m.AllNodes(), s.singleMask, s.sharedMask)
			direct := len(r.Devices) == 0
			want := direct && err == nil &&
				(sr.freeP.Nothing() || sr.plan.width == 1 && (soft || sr.found.IsSubsetOf(allowed)))
			sr.done()
			require.Equal(rt, want, fast, "request %s: decide says %v", r, err)
			if fast {
				require.NoError(rt, s.Fit(r))
			}
		})
	}
}

// fillAndDraw fills s in part with random allocations of every policy and
// exclusivity and draws a request of every policy (invalid ones and ones
// for other device classes included).
func fillAndDraw(rt *rapid.T, s *State) *Request {
	m := s.Machine()
	draw := func(label string) *Request {
		r := &Request{
			ID:        label,
			CPUs:      rapid.IntRange(-1, 64).Draw(rt, label+"-cpus"),
			GPUs:      rapid.IntRange(0, 4).Draw(rt, label+"-gpus"),
			MemoryMiB: rapid.Int64Range(0, 1<<19).Draw(rt, label+"-mem"),
			FullPCPUs: rapid.Bool().Draw(rt, label+"-fullPCPUs"),
			Policy:    policy.Policy(rapid.IntRange(0, 3).Draw(rt, label+"-policy")),
			Exclusive: policy.Exclusivity(rapid.IntRange(0, 1).Draw(rt, label+"-exclusive")),
		}
		if rapid.IntRange(0, 5).Draw(rt, label+"-devices") == 0 {
			r.Devices = map[string]int{"rdma": rapid.IntRange(0, 2).Draw(rt, label+"-rdma")}
		}
		return r
	}
	for i := range rapid.IntRange(0, 14).Draw(rt, "fills") {
		r := draw(fmt.Sprint("fill-", i))
		if r.FullPCPUs && r.CPUs > 0 {
			r.CPUs -= r.CPUs % m.ThreadsPerCore()
		}
		_, _ = s.Allocate(r) // refusals leave the state as it was
	}
	return draw("r")
}

// TestOneNodeScoreAgreesWithScore checks that Score's shortcut
// (State.oneNodeScore, taken when State.fitsOneNode admits) gives the
// score of the decision proper, under both scoring strategies, on the
// states and requests of TestFitsOneNodeAgreesWithDecide.
func TestOneNodeScoreAgreesWithScore(t *testing.T) {
	for _, m := range withUnknownGPU(t, "dgx-a100", "dgx-h100", "small-1s", "numa64", "xeon-2s-snc2-8gpu") {
		rapid.Check(t, func(rt *rapid.T) {
			scoring := Scoring(rapid.IntRange(0, 1).Draw(rt, "scoring"))
			s := MustNew(m, Options{Scoring: scoring})
			r := fillAndDraw(rt, s)
			if !s.fitsOneNode(r) {
				return
			}
			want, err := s.searchScore(r)
			require.NoError(rt, err, "request %s", r)
			require.Equal(rt, want, s.oneNodeScore(r), "request %s, scoring %v", r, scoring)
		})
	}
}

// withUnknownGPU returns unknownGPUMachine and the presets named.
func withUnknownGPU(t *testing.T, presets ...string) []*topology.Machine {
	machines := []*topology.Machine{unknownGPUMachine(t)}
	for _, preset := range presets {
		m, err := topology.Preset(preset)
		require.NoError(t, err)
		machines = append(machines, m)
	}
	return machines
}
