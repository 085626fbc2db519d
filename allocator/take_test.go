package allocator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// TestTakeIsZeroBetweenDecisions: the working memory a decision takes
// from its state's slot or the pool has take all zeros (done zeroes what choose wrote), and a
// decision's take is zero outside its chosen span, over allocations of
// every width and policy that reuse the memory one after the other; the
// CPUs' pickBits are likewise all zeros after each Allocate.
func TestTakeIsZeroBetweenDecisions(t *testing.T) {
	m, err := topology.Preset("numa64")
	require.NoError(t, err)
	s := MustNew(m, Options{})
	for i := 0; i < 200; i++ {
		r := &Request{ID: fmt.Sprint("p", i), CPUs: 1 + i*7%90, GPUs: i % 5, MemoryMiB: int64(i%3) << 12,
			Policy: policy.Policies[i%len(policy.Policies)]}
		sr := s.searcher(r, nil)
		sr.needMem()
		require.Equal(t, [maxKinds][64]int64{}, *sr.take, "the memory comes with take all zeros")
		if sr.decide(true) == nil {
			for j := range sr.take {
				for node, v := range sr.take[j] {
					if v != 0 {
						require.True(t, sr.plan.span.Contains(node), "take is 0 outside the span")
					}
				}
			}
		}
		sr.done()
		if _, err := s.Allocate(r); err == nil && i%3 == 0 {
			require.NoError(t, s.Release(r.ID))
		}
		require.Equal(t, make([]uint64, len(s.cpu.pickBits)), s.cpu.pickBits, "pickBits is all zeros outside a Take")
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
