package scheduler_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

// TestNodeLookupsFollowAddAndRemove: the lookups of Filter and Score (from
// a copy of the node list, made again after changes) see a node removed or
// added at once, before and after the copy is made again, and while other
// goroutines look nodes up and add and remove them.
func TestNodeLookupsFollowAddAndRemove(t *testing.T) {
	m := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "a", Labels: optIn, Machine: m})
	pod := numaPod("p", 4, 1, "SingleNUMANode")
	for round := range 3 {
		for range 200 * round { // none, then enough lookups to copy the list again
			require.NoError(t, c.Filter(pod, "a"))
		}
		b := fmt.Sprintf("b%d", round)
		require.ErrorIs(t, c.Filter(pod, b), scheduler.ErrUnknownNode)
		require.NoError(t, c.AddNode(scheduler.Node{Name: b, Labels: optIn, Machine: m}))
		require.NoError(t, c.Filter(pod, b), "a node just added")
		for range 200 * round { // the list copied again with b in it
			require.NoError(t, c.Filter(pod, b))
		}
		require.NoError(t, c.RemoveNode(b))
		require.ErrorIs(t, c.Filter(pod, b), scheduler.ErrUnknownNode, "a node just removed")
		_, err := c.Score(pod, b)
		require.ErrorIs(t, err, scheduler.ErrUnknownNode)
	}

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			name := fmt.Sprintf("churn-%d", g)
			for range 100 {
				if err := c.AddNode(scheduler.Node{Name: name, Labels: optIn, Machine: m}); err != nil {
					t.Error(err)
					return
				}
				if err := c.Filter(pod, name); err != nil {
					t.Errorf("%s just added: %v", name, err)
				}
				if err := c.RemoveNode(name); err != nil {
					t.Error(err)
					return
				}
				if err := c.Filter(pod, name); err == nil {
					t.Errorf("%s just removed: accepted", name)
				}
				if err := c.Filter(pod, "a"); err != nil {
					t.Errorf("a: %v", err)
				}
			}
		})
	}
	wg.Wait()
}
