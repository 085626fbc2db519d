package allocator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// TestDecisionsIgnoreLeftovers: a decision starts from state it sets
// itself. Before each decision the working memory it will take from the
// pool and the CPUs' pickBits are filled with garbage; the decision's
// take is still zero outside its chosen span (its split inside), and
// Allocate gives what a clone of the state, whose memory holds no
// garbage, gives, over allocations of every width and policy.
func TestDecisionsIgnoreLeftovers(t *testing.T) {
	m, err := topology.Preset("numa64")
	require.NoError(t, err)
	s := MustNew(m, Options{})
	poison := func() {
		mem := searchMems.Get()
		for j := range mem.take {
			for i := range mem.take[j] {
				mem.take[j][i], mem.amt[j][i] = 7, 7
			}
		}
		searchMems.Put(mem)
		for i := range s.cpu.pickBits {
			s.cpu.pickBits[i] = ^uint64(0)
		}
	}
	for i := 0; i < 200; i++ {
		r := &Request{ID: fmt.Sprint("p", i), CPUs: 1 + i*7%90, GPUs: i % 5, MemoryMiB: int64(i%3) << 12,
			Policy: policy.Policies[i%len(policy.Policies)]}
		poison()
		sr := s.searcher(r, nil)
		if sr.decide(true) == nil {
			for j := 0; j < sr.k; j++ {
				for node, v := range sr.take[j][:s.n] {
					if v != 0 {
						require.True(t, sr.plan.span.Contains(node), "take is 0 outside the span")
					}
				}
			}
		}
		sr.done()
		c := s.Clone()
		want, wantErr := c.Allocate(r)
		poison()
		got, err := s.Allocate(r)
		require.Equal(t, wantErr, err)
		require.Equal(t, want.CPUs, got.CPUs, "request %d", i)
		require.Equal(t, want.GPUs, got.GPUs, "request %d", i)
		require.Equal(t, want.Memory, got.Memory, "request %d", i)
		if err == nil && i%3 == 0 {
			require.NoError(t, s.Release(r.ID))
		}
	}
}

// TestGPUTakeAgreesWithJointTake checks Devices.Take's path for a request
// without Devices (its GPUs chosen at once, deviceJoint.takeOne) against
// the joint record of every class (deviceJoint.record, which takes once
// the last demanded class has recorded): the same GPUs, recorded alike,
// and the same device counters after, on states that random allocations
// (device classes and a GPU of unknown NUMA node included) have filled in
// part, for requests of every policy.
func TestGPUTakeAgreesWithJointTake(t *testing.T) {
	for _, m := range withUnknownGPU(t, "dgx-a100", "dgx-h100", "numa64", "xeon-2s-snc2-8gpu") {
		rapid.Check(t, func(rt *rapid.T) {
			s := MustNew(m, Options{})
			r := fillAndDraw(rt, s)
			r.Devices = nil
			c := s.Clone()
			got, err := s.Allocate(r)

			sr := c.searcher(r, nil)
			defer sr.done()
			require.Equal(rt, err, sr.decide(true))
			if err != nil {
				return
			}
			want := &Allocation{}
			for j := 0; j < sr.k; j++ {
				if d, ok := c.res[sr.kinds[j]].(*Devices); ok {
					d.joint.record(d, r, sr.take[j][:c.n], sr.unplaced[j], want)
				} else {
					c.res[sr.kinds[j]].Take(r, sr.take[j][:c.n], sr.unplaced[j], want)
				}
			}
			require.Equal(rt, want.GPUs, got.GPUs)
			require.Equal(rt, want.Devices, got.Devices)
			require.Equal(rt, c.gpu.freeSet, s.gpu.freeSet)
			require.Equal(rt, c.gpu.nodeFree, s.gpu.nodeFree)
			require.Equal(rt, c.gpu.groupFree, s.gpu.groupFree)
			require.Equal(rt, c.gpu.unFree, s.gpu.unFree)
			require.Equal(rt, c.gpu.dev, s.gpu.dev)
		})
	}
}
