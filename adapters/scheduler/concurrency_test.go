package scheduler_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/numa"
)

// requireConsistent checks every node of the cache: no CPU or GPU is held
// by two allocations, the shared pool is exactly the allocatable CPUs no
// allocation holds, the free GPU count matches, the shared pool covers the
// requests of the pods without a NUMA spec, and the pods recorded are the
// ones expected (by node, when want is not nil).
func requireConsistent(t *testing.T, c *scheduler.Cache, want map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	for _, name := range c.Nodes() {
		st, ok := c.Node(name)
		require.True(t, ok)
		m := st.Machine
		var held numa.CPUSet
		gpus := map[int]string{}
		for _, a := range st.Allocations {
			require.False(t, held.Intersects(a.CPUs), "node %s: CPUs %s of %s held twice", name, held.Intersection(a.CPUs), a.ID)
			held.UnionWith(a.CPUs)
			for _, g := range a.GPUs {
				other, dup := gpus[g]
				require.False(t, dup, "node %s: GPU %d held by %s and %s", name, g, other, a.ID)
				gpus[g] = a.ID
			}
		}
		allocatable := m.CPUs().Difference(m.ReservedCPUs())
		require.True(t, held.Union(st.SharedCPUs).Equal(allocatable), "node %s: held and shared CPUs are not the allocatable ones", name)
		require.False(t, held.Intersects(st.SharedCPUs))
		require.Equal(t, m.NumGPUs()-len(gpus), st.FreeGPUs, name)
		require.LessOrEqual(t, st.SharedRequestMilli, int64(st.SharedCPUs.Size())*1000, "node %s: shared pool overcommitted", name)
		for _, key := range st.Pods {
			require.False(t, seen[key], "pod %s on two nodes", key)
			seen[key] = true
			ps, ok := c.Pod(key)
			require.True(t, ok)
			require.Equal(t, name, ps.Node)
			if want != nil {
				require.Equal(t, want[key], name, "pod %s", key)
			}
		}
	}
	if want != nil {
		require.Len(t, seen, len(want))
	}
}

// TestConcurrentScheduleOne hammers ScheduleOne from several goroutines
// with a seeded mix of pods; every success is where the cache says, and no
// CPU or GPU is handed out twice across the cluster.
func TestConcurrentScheduleOne(t *testing.T) {
	nodes := clusterNodes(t)
	for i := range 10 {
		nodes = append(nodes, scheduler.Node{Name: fmt.Sprintf("x-%d", i), Labels: optIn, Machine: preset(t, "dgx-h100")})
	}
	c := newCache(t, scheduler.Config{Parallelism: 3}, nodes...)
	const workers, perWorker = 6, 40
	var mu sync.Mutex
	placed := map[string]string{}
	var failed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range perWorker {
				pod := mixedPod(rng, fmt.Sprintf("w%d-%02d", w, i))
				res, err := c.ScheduleOne(pod)
				if err != nil {
					if !errors.Is(err, scheduler.ErrUnschedulable) {
						t.Errorf("%s: %v", pod.Key(), err)
					}
					failed.Add(1)
					continue
				}
				mu.Lock()
				placed[pod.Key()] = res.Node
				mu.Unlock()
				// Bind some, and give a few back, as a scheduler does.
				switch i % 5 {
				case 0:
					if err := c.Unreserve(pod); err != nil {
						t.Errorf("unreserve %s: %v", pod.Key(), err)
					}
					mu.Lock()
					delete(placed, pod.Key())
					mu.Unlock()
				case 1, 2:
					if err := c.AddPod(bound(pod, res.Node, res.Annotations)); err != nil {
						t.Errorf("bind %s: %v", pod.Key(), err)
					}
				}
			}
		})
	}
	wg.Wait()
	require.Positive(t, failed.Load(), "the cluster fills up")
	require.Greater(t, len(placed), 50)
	requireConsistent(t, c, placed)
}

// TestConcurrentFilterReserve runs Filter and Score on every node while
// other goroutines reserve, unreserve, bind and remove pods, flip a node's
// label and replace its machine.
func TestConcurrentFilterReserve(t *testing.T) {
	nodes := clusterNodes(t)
	c := newCache(t, scheduler.Config{}, nodes...)
	stop := make(chan struct{})
	var readers, writers sync.WaitGroup
	probes := []*kube.Pod{numaPod("probe-a", 24, 4, "SingleNUMANode"), numaPod("probe-b", 16, 6, "Restricted"),
		plainPod("probe-c", "3", 1), numaPod("probe-d", 2, 0, "BestEffort")}
	for r := range 3 {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := probes[(i+r)%len(probes)]
				for _, n := range nodes {
					err := c.Filter(p, n.Name)
					if err != nil && !errors.Is(err, scheduler.ErrUnschedulable) {
						t.Errorf("filter: %v", err)
					}
					if s, err := c.Score(p, n.Name); err == nil && (s < 0 || s > 100) {
						t.Errorf("score %d", s)
					}
				}
			}
		})
	}
	for w := range 4 {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for i := range 150 {
				pod := mixedPod(rng, fmt.Sprintf("w%d-%03d", w, i))
				n := nodes[rng.IntN(len(nodes))].Name
				if err := c.Reserve(pod, n); err != nil {
					if !errors.Is(err, scheduler.ErrUnschedulable) {
						t.Errorf("reserve: %v", err)
					}
					continue
				}
				switch rng.IntN(4) {
				case 0:
					_ = c.Unreserve(pod)
					if err := c.Unreserve(pod); err == nil {
						t.Errorf("a second Unreserve of %s said nothing", pod.Key())
					}
				case 1:
					ann, err := c.PreBind(pod)
					if err != nil {
						t.Errorf("prebind: %v", err)
						continue
					}
					if err := c.AddPod(bound(pod, n, ann)); err != nil {
						t.Errorf("bind: %v", err)
					}
				case 2:
					_ = c.RemovePod(pod)
				}
			}
		})
	}
	r, err := kube.NRTFromState(nodes[2].Machine, nil)
	require.NoError(t, err)
	same, err := kube.MachineFromNRT(r)
	require.NoError(t, err)
	writers.Go(func() {
		h := nodes[2]
		for i := range 50 {
			h.Labels = nil
			if i%2 == 0 {
				h.Labels = optIn
			}
			if i%4 < 2 {
				h.Machine = same
			} else {
				h.Machine = nodes[2].Machine
			}
			if err := c.UpdateNode(h); err != nil {
				t.Errorf("update: %v", err)
			}
		}
	})
	writers.Wait()
	close(stop)
	readers.Wait()
	requireConsistent(t, c, nil)
}
