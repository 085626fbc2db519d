package numaplace

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/topology"
)

// cacheOfNodes returns a cache of count nodes of the preset, named by
// format and their index, with a node object for each.
func cacheOfNodes(t *testing.T, preset, format string, count int) (*scheduler.Cache, *topology.Machine, []*v1.Node) {
	t.Helper()
	c, err := scheduler.New(scheduler.Config{})
	require.NoError(t, err)
	m, err := topology.Preset(preset)
	require.NoError(t, err)
	objs := make([]*v1.Node, count)
	for i := range objs {
		name := fmt.Sprintf(format, i)
		require.NoError(t, c.AddNode(scheduler.Node{Name: name, Machine: m}))
		objs[i] = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	return c, m, objs
}

// TestNodeRefsFindTheNodeOfAnObject: the table answers each node object
// with the handle of its node, whatever the table's size (a table of eight
// slots for 40 nodes: most objects are looked up by name), for a new
// object of the same node, before the table is sized, and after the node
// leaves the cache and comes back; an unknown node is not found.
func TestNodeRefsFindTheNodeOfAnObject(t *testing.T) {
	c, m, objs := cacheOfNodes(t, "dgx-h100", "n-%02d", 40)
	check := func(t *testing.T, refs *nodeRefs, stage string) {
		t.Helper()
		for round := range 3 {
			for _, n := range objs {
				r, ok := refs.get(c, n)
				require.True(t, ok, "%s, round %d: %s", stage, round, n.Name)
				require.Equal(t, n.Name, r.Node(), "%s, round %d", stage, round)
				require.True(t, r.Current(), "%s, round %d: %s", stage, round, n.Name)
				want, err := c.Ref(n.Name)
				require.NoError(t, err)
				require.Equal(t, want, r, "%s, round %d: %s", stage, round, n.Name)
			}
		}
	}
	for _, sized := range []int{-1, 1, 40, 1000} {
		t.Run(fmt.Sprint("sized ", sized), func(t *testing.T) {
			refs := &nodeRefs{}
			if sized >= 0 {
				refs.size(sized)
			}
			check(t, refs, "first")
			// New objects of the same nodes (the informer's copies after an update).
			for i, n := range objs {
				objs[i] = n.DeepCopy()
			}
			check(t, refs, "new objects")
			// A node removed and added again: the old handle is not current,
			// the table finds the new record.
			require.NoError(t, c.RemoveNode("n-07"))
			_, ok := refs.get(c, objs[7])
			require.False(t, ok, "n-07 removed")
			require.NoError(t, c.AddNode(scheduler.Node{Name: "n-07", Machine: m}))
			check(t, refs, "added again")
			_, ok = refs.get(c, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "missing"}})
			require.False(t, ok)
		})
	}
	// Sizing only grows the table.
	refs := &nodeRefs{}
	refs.size(40)
	require.Len(t, refs.tab.Load().slots, 256)
	refs.size(10)
	require.Len(t, refs.tab.Load().slots, 256)
	refs.size(100)
	require.Len(t, refs.tab.Load().slots, 512)
}

// TestNodeRefsHitOnceSized: a table sized for the nodes finds nearly every
// node object again without a lookup by name (a direct-mapped table of
// twice the slots missed about a third), and a table filled with objects
// no longer looked up starts again rather than missing for ever.
func TestNodeRefsHitOnceSized(t *testing.T) {
	const nodes = 1000
	c, _, objs := cacheOfNodes(t, "dgx-a100", "gpu-%04d", nodes)
	refs := &nodeRefs{}
	refs.size(nodes)
	for _, n := range objs {
		_, ok := refs.get(c, n)
		require.True(t, ok)
	}
	first := refs.tab.Load().misses.Load()
	require.EqualValues(t, nodes, first, "the first round looks every node up by name")
	for range 5 {
		for _, n := range objs {
			_, ok := refs.get(c, n)
			require.True(t, ok)
		}
	}
	again := refs.tab.Load().misses.Load() - first
	require.Less(t, again, int64(5*nodes/100), "misses in five more rounds over the same objects (under 1%)")

	// Every node object replaced, ten times over: the table starts again
	// when its misses outnumber its slots, and then finds the current
	// objects.
	tab := refs.tab.Load()
	for range 10 {
		for i, n := range objs {
			objs[i] = n.DeepCopy()
			_, ok := refs.get(c, objs[i])
			require.True(t, ok)
		}
	}
	require.NotSame(t, tab, refs.tab.Load(), "the table started again")
	now := refs.tab.Load()
	for _, n := range objs {
		_, ok := refs.get(c, n)
		require.True(t, ok)
	}
	base := now.misses.Load()
	for _, n := range objs {
		_, ok := refs.get(c, n)
		require.True(t, ok)
	}
	require.Less(t, now.misses.Load()-base, int64(nodes/100), "misses over the current objects after the new start")
}

// TestNodeRefsConcurrent: Filter's goroutines share the table while nodes
// leave the cache and come back and their objects are replaced; every
// handle found is of the node asked for and, when the node is in the cache
// throughout, current (run with -race).
func TestNodeRefsConcurrent(t *testing.T) {
	const nodes = 64
	c, m, first := cacheOfNodes(t, "dgx-h100", "n-%02d", nodes)
	objs := make([]atomic.Pointer[v1.Node], nodes)
	for i, n := range first {
		objs[i].Store(n)
	}
	refs := &nodeRefs{}
	refs.size(nodes)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := (i*7 + g) % nodes
				n := objs[k].Load()
				r, ok := refs.get(c, n)
				if k%2 == 1 { // odd nodes never leave
					if !ok || r.Node() != n.Name {
						t.Errorf("node %s: handle of %q, found %v", n.Name, r.Node(), ok)
						return
					}
				} else if ok && r.Node() != n.Name {
					t.Errorf("node %s: handle of %q", n.Name, r.Node())
					return
				}
			}
		}()
	}
	for round := range 200 {
		k := (round * 2) % nodes // an even node leaves and comes back
		name := fmt.Sprintf("n-%02d", k)
		require.NoError(t, c.RemoveNode(name))
		require.NoError(t, c.AddNode(scheduler.Node{Name: name, Machine: m}))
		j := (round*5)%nodes | 1 // an odd node's object is replaced
		objs[j].Store(objs[j].Load().DeepCopy())
	}
	close(stop)
	wg.Wait()
	for i := range nodes {
		r, ok := refs.get(c, objs[i].Load())
		require.True(t, ok)
		require.True(t, r.Current())
	}
}
