package allocator

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

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
