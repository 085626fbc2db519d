package scheduler_test

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

func withPriority(p *kube.Pod, prio int32) *kube.Pod {
	p.Priority = prio
	return p
}

func TestPreemptSmallestSet(t *testing.T) {
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "h1", Labels: optIn, Machine: preset(t, "dgx-h100")})
	// Eight single-GPU pods fill the GPUs; priorities 1..8.
	for i := 0; i < 8; i++ {
		p := withPriority(numaPod(fmt.Sprintf("small-%d", i), 4, 1, "SingleNUMANode"), int32(i+1))
		require.NoError(t, c.Reserve(p, "h1"))
	}
	big := withPriority(numaPod("big", 24, 4, "SingleNUMANode"), 100)
	require.Error(t, c.Filter(big, "h1"))
	pe, err := c.Preempt(big)
	require.NoError(t, err)
	require.Equal(t, "h1", pe.Node)
	require.Len(t, pe.Victims, 4, "four GPUs on one NUMA node")
	// The victims share one NUMA node; removing them makes the pod fit.
	for _, v := range pe.Victims {
		st, ok := c.Pod(v)
		require.True(t, ok)
		require.Equal(t, "h1", st.Node)
	}
	for _, v := range pe.Victims {
		p := &kube.Pod{Namespace: "default", Name: v[len("default/"):]}
		require.NoError(t, c.Unreserve(p))
	}
	require.NoError(t, c.Filter(big, "h1"))

	// Nothing of lower priority to evict: no preemption.
	low := withPriority(numaPod("low", 24, 4, "SingleNUMANode"), 0)
	_, err = c.Preempt(low)
	require.True(t, errors.Is(err, scheduler.ErrNoPreemption) || err == nil)
}

// TestPreemptByKubernetesOrder: victims are chosen as kube-scheduler's
// DefaultPreemption would rank them, not by their number: four low pods
// rather than two middle ones (the lowest highest priority); at one highest
// priority, the set with fewer victims of it (one middle and two low
// rather than two middle); and among nodes the lowest highest priority.
func TestPreemptByKubernetesOrder(t *testing.T) {
	in := withPriority(numaPod("in", 24, 4, "SingleNUMANode"), 1000)
	// NUMA node 0: GPUs 0-3, node 1: GPUs 4-7 (dgx-h100).
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "h1", Labels: optIn, Machine: preset(t, "dgx-h100")})
	for i := range 4 {
		require.NoError(t, c.Reserve(withPriority(numaPod(fmt.Sprintf("low-%d", i), 4, 1, "SingleNUMANode"), 100), "h1"))
	}
	for i := range 2 {
		require.NoError(t, c.Reserve(withPriority(numaPod(fmt.Sprintf("mid-%d", i), 4, 2, "SingleNUMANode"), 500), "h1"))
	}
	pe, err := c.PreemptOn(in, "h1")
	require.NoError(t, err)
	require.Equal(t, []string{"default/low-0", "default/low-1", "default/low-2", "default/low-3"}, pe.Victims)
	require.Equal(t, int32(100), pe.HighestPriority)

	c = newCache(t, scheduler.Config{}, scheduler.Node{Name: "h1", Labels: optIn, Machine: preset(t, "dgx-h100")})
	require.NoError(t, c.Reserve(withPriority(numaPod("a-mid-0", 4, 2, "SingleNUMANode"), 500), "h1"))
	require.NoError(t, c.Reserve(withPriority(numaPod("a-mid-1", 4, 2, "SingleNUMANode"), 500), "h1"))
	require.NoError(t, c.Reserve(withPriority(numaPod("b-mid", 4, 2, "SingleNUMANode"), 500), "h1"))
	require.NoError(t, c.Reserve(withPriority(numaPod("b-low-0", 4, 1, "SingleNUMANode"), 100), "h1"))
	require.NoError(t, c.Reserve(withPriority(numaPod("b-low-1", 4, 1, "SingleNUMANode"), 100), "h1"))
	pe, err = c.PreemptOn(in, "h1")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"default/b-mid", "default/b-low-0", "default/b-low-1"}, pe.Victims,
		"one victim of priority 500 rather than two")

	// Among nodes: h2's best is four victims of priority 300, h3's two of
	// 400: h2, the lower highest priority.
	c = newCache(t, scheduler.Config{},
		scheduler.Node{Name: "h2", Labels: optIn, Machine: preset(t, "dgx-h100")},
		scheduler.Node{Name: "h3", Labels: optIn, Machine: preset(t, "dgx-h100")})
	for i := range 4 {
		require.NoError(t, c.Reserve(withPriority(numaPod(fmt.Sprintf("h2-0-%d", i), 4, 1, "SingleNUMANode"), 300), "h2"))
	}
	for i := range 2 {
		require.NoError(t, c.Reserve(withPriority(numaPod(fmt.Sprintf("h3-0-%d", i), 4, 2, "SingleNUMANode"), 400), "h3"))
	}
	require.NoError(t, c.Reserve(withPriority(numaPod("h2-1", 4, 4, "SingleNUMANode"), 500), "h2"))
	require.NoError(t, c.Reserve(withPriority(numaPod("h3-1", 4, 4, "SingleNUMANode"), 900), "h3"))
	pe, err = c.Preempt(in)
	require.NoError(t, err)
	require.Equal(t, "h2", pe.Node, "%+v", pe)
	require.Len(t, pe.Victims, 4)
	require.Equal(t, int32(300), pe.HighestPriority)
}

func TestPreemptNeverOnHigherPriority(t *testing.T) {
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "h1", Labels: optIn, Machine: preset(t, "dgx-h100")})
	for i := 0; i < 8; i++ {
		require.NoError(t, c.Reserve(withPriority(numaPod(fmt.Sprintf("p%d", i), 2, 1, "SingleNUMANode"), 50), "h1"))
	}
	_, err := c.Preempt(withPriority(numaPod("x", 2, 1, "SingleNUMANode"), 50))
	require.ErrorIs(t, err, scheduler.ErrNoPreemption, "equal priority is not preempted")
}

// TestPreemptIsExact: on random small nodes, the victims returned make the
// pod fit once removed, and, by brute force, no set of lower-priority pods
// that does comes before them in kube-scheduler's order among the sets
// PreemptOn searches: those whose highest priority is the lowest level at
// which removing every candidate up to it makes the pod fit (fitting is not
// monotone in removals: TestPreemptLevelRule). When no level does, the
// answer is ErrNoPreemption.
// The nodes hold NUMA pods, shared-pool pods and possibly a pod without a
// NUMA spec bound with a decision naming CPUs (it holds them exclusively),
// so that the shared-pool and memory rules bind as often as the
// allocator's.
func TestPreemptIsExact(t *testing.T) {
	m := preset(t, "dgx-h100")
	rapid.Check(t, func(t *rapid.T) {
		pols := []string{"SingleNUMANode", "Restricted", "BestEffort"}
		var pods []*kube.Pod
		isBound := map[*kube.Pod]bool{}
		place := func(c *scheduler.Cache, p *kube.Pod) error {
			if isBound[p] {
				return c.AddPod(p)
			}
			return c.Reserve(p, "n")
		}
		fresh := func() *scheduler.Cache {
			c, err := scheduler.New(scheduler.Config{})
			require.NoError(t, err)
			require.NoError(t, c.AddNode(scheduler.Node{Name: "n", Labels: optIn, Machine: m}))
			return c
		}
		// build replays the placements (deterministic), then removes the
		// skipped pods: the node as it would be after evicting them.
		build := func(skip map[int]bool) *scheduler.Cache {
			c := fresh()
			for _, p := range pods {
				require.NoError(t, place(c, p))
			}
			for i, p := range pods {
				if skip[i] {
					require.NoError(t, c.RemovePod(p))
				}
			}
			return c
		}
		c := fresh()
		// Memory (1 TiB per NUMA node) binds as often as CPUs and GPUs.
		mems := []string{"", "", "256Gi", "512Gi", "768Gi"}
		if k := rapid.IntRange(0, 40).Draw(t, "exclusive"); k > 0 {
			// First on the empty node, so that its CPUs are free.
			res := map[string]string{kube.ResourceCPU: strconv.Itoa(k)}
			p := &kube.Pod{Namespace: "default", Name: "x", Priority: int32(rapid.IntRange(0, 9).Draw(t, "xprio")),
				Containers: []kube.Container{{Name: "main", Requests: res, Limits: res}}}
			p = bound(p, "n", map[string]string{kube.AnnotationAllocation: fmt.Sprintf(
				`{"policy":"None","exclusive":"Required","cpuset":"0-%d","numaNodes":[0]}`, k-1)})
			isBound[p] = true
			require.NoError(t, place(c, p))
			pods = append(pods, p)
		}
		n := rapid.IntRange(1, 7).Draw(t, "pods")
		for i := 0; i < n; i++ {
			var p *kube.Pod
			if rapid.IntRange(0, 3).Draw(t, "kind") == 0 {
				p = withPriority(plainPod(fmt.Sprintf("p%d", i), strconv.Itoa(rapid.IntRange(1, 150).Draw(t, "plaincpus")),
					rapid.IntRange(0, 2).Draw(t, "plaingpus")), int32(rapid.IntRange(0, 9).Draw(t, "prio")))
			} else {
				p = withPriority(numaPod(fmt.Sprintf("p%d", i),
					rapid.IntRange(1, 60).Draw(t, "cpus"), rapid.IntRange(0, 4).Draw(t, "gpus"),
					rapid.SampledFrom(pols).Draw(t, "pol")), int32(rapid.IntRange(0, 9).Draw(t, "prio")))
			}
			if q := rapid.SampledFrom(mems).Draw(t, "mem"); q != "" {
				p = withMemory(p, q, q)
			}
			if place(c, p) == nil {
				pods = append(pods, p)
			}
		}
		in := withPriority(numaPod("in", rapid.IntRange(1, 100).Draw(t, "incpus"), rapid.IntRange(0, 8).Draw(t, "ingpus"),
			rapid.SampledFrom(pols).Draw(t, "inpol")), int32(rapid.IntRange(1, 10).Draw(t, "inprio")))
		if q := rapid.SampledFrom(mems).Draw(t, "inmem"); q != "" {
			in = withMemory(in, q, q)
		}
		// The replay is the node itself (decisions depend on their inputs
		// only; a refused placement changes nothing).
		want, _ := c.Node("n")
		got, _ := build(nil).Node("n")
		require.Equal(t, want, got, "the node replayed")
		pe, err := c.PreemptOn(in, "n")
		// Brute force: the set of lower-priority pods whose removal makes
		// Filter pass that comes first in kube-scheduler's order (the
		// lowest highest priority, the fewest victims of it, the fewest
		// victims, the lowest priority sum) among those whose highest
		// priority is the level PreemptOn searches.
		type rank struct{ top, atTop, n, sum int }
		less := func(a, b rank) bool {
			return cmp.Or(cmp.Compare(a.top, b.top), cmp.Compare(a.atTop, b.atTop), cmp.Compare(a.n, b.n), cmp.Compare(a.sum, b.sum)) < 0
		}
		rankOf := func(skip map[int]bool) rank {
			r := rank{top: -1}
			for i := range skip {
				prio := int(pods[i].Priority)
				switch {
				case prio > r.top:
					r.top, r.atTop = prio, 1
				case prio == r.top:
					r.atTop++
				}
				r.n++
				r.sum += prio
			}
			return r
		}
		// fits[mask]: the pod fits once the pods of mask are removed (masks
		// of lower-priority pods only).
		fits := map[int]bool{}
		for mask := 1; mask < 1<<len(pods); mask++ {
			skip := map[int]bool{}
			ok := true
			for i := range pods {
				if mask&(1<<i) != 0 {
					skip[i] = true
					if pods[i].Priority >= in.Priority {
						ok = false
					}
				}
			}
			if ok {
				fits[mask] = build(skip).Filter(in, "n") == nil
			}
		}
		// The level: the lowest priority p below the pod's at which
		// removing every pod of priority p or lower makes the pod fit.
		level := -1
		for p := 0; p < int(in.Priority) && level < 0; p++ {
			mask := 0
			for i, q := range pods {
				if int(q.Priority) <= p {
					mask |= 1 << i
				}
			}
			if mask != 0 && fits[mask] {
				level = p
			}
		}
		best := -1
		var bestRank rank
		for mask, ok := range fits {
			if !ok {
				continue
			}
			skip := map[int]bool{}
			for i := range pods {
				if mask&(1<<i) != 0 {
					skip[i] = true
				}
			}
			if r := rankOf(skip); r.top == level && (best < 0 || less(r, bestRank)) {
				best, bestRank = len(skip), r
			}
		}
		if c.Filter(in, "n") == nil {
			require.Error(t, err, "no preemption when the pod fits")
			return
		}
		if best < 0 {
			require.ErrorIs(t, err, scheduler.ErrNoPreemption)
			return
		}
		require.NoError(t, err, "brute force found %d victims", best)
		skip := map[int]bool{}
		for _, v := range pe.Victims {
			for i, p := range pods {
				if p.Key() == v {
					skip[i] = true
				}
			}
		}
		require.Equal(t, bestRank, rankOf(skip), "victims %v", pe.Victims)
		require.Equal(t, int32(bestRank.top), pe.HighestPriority)
		require.NoError(t, build(skip).Filter(in, "n"), "the victims make it fit")
	})
}

// BenchmarkPreempt: a dgx-a100 with 30 live pods of mixed priorities and
// shapes, and a high-priority 2-GPU pod that needs evictions.
func BenchmarkPreempt(b *testing.B) {
	m := preset(b, "dgx-a100")
	c := newCache(b, scheduler.Config{}, scheduler.Node{Name: "a", Labels: optIn, Machine: m})
	rng := rand.New(rand.NewPCG(1, 2))
	live := 0
	for i := 0; live < 30 && i < 1000; i++ {
		var p *kube.Pod
		if i < 8 {
			p = numaPod(fmt.Sprintf("gpu-%d", i), 4+rng.IntN(8), 1, "SingleNUMANode")
		} else {
			p = numaPod(fmt.Sprintf("cpu-%d", i), 2+rng.IntN(6), 0, "SingleNUMANode")
		}
		p.Priority = int32(rng.IntN(10))
		if c.Reserve(p, "a") == nil {
			live++
		}
	}
	if live < 30 {
		b.Fatalf("only %d pods placed", live)
	}
	in := withPriority(numaPod("in", 16, 2, "SingleNUMANode"), 100)
	pe, err := c.PreemptOn(in, "a")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.PreemptOn(in, "a"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(pe.Victims)), "victims")
}

// TestWhatIf: the dry-run of a preemption sees the node without the
// victims tried and with the nominated pods, exactly as Filter would, and
// Victims finds the fewest among the candidates given.
func TestWhatIf(t *testing.T) {
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "h1", Labels: optIn, Machine: preset(t, "dgx-h100")})
	dec := func(cpus string, gpus ...int) map[string]string {
		ids := make([]string, len(gpus))
		for i, g := range gpus {
			ids[i] = fmt.Sprintf(`{"id":%d}`, g)
		}
		return map[string]string{kube.AnnotationAllocation: fmt.Sprintf(`{"policy":"SingleNUMANode","cpuset":%q,"gpus":[%s]}`, cpus, strings.Join(ids, ","))}
	}
	// Two 2-GPU pods on NUMA node 0, one 4-GPU pod on NUMA node 1.
	require.NoError(t, c.AddPod(bound(numaPod("a", 2, 2, "SingleNUMANode"), "h1", dec("2-3", 0, 1))))
	require.NoError(t, c.AddPod(bound(numaPod("b", 2, 2, "SingleNUMANode"), "h1", dec("4-5", 2, 3))))
	require.NoError(t, c.AddPod(bound(numaPod("c", 4, 4, "SingleNUMANode"), "h1", dec("56-59", 4, 5, 6, 7))))
	big, err := c.Prepare(withPriority(numaPod("big", 8, 4, "SingleNUMANode"), 10))
	require.NoError(t, err)
	requireRefusal(t, big.Filter("h1"), allocator.ErrInsufficient, "fewer than 4 free GPUs now")

	for _, tt := range []struct {
		removed []string
		fits    bool
	}{
		{nil, false},
		{[]string{"default/a"}, false},
		{[]string{"default/a", "default/b"}, true},
		{[]string{"default/c"}, true},
		{[]string{"default/a", "default/b", "default/c", "default/unknown"}, true},
	} {
		err := big.FilterWhatIf("h1", scheduler.WhatIf{Removed: tt.removed})
		require.Equal(t, tt.fits, err == nil, "without %v: %v", tt.removed, err)
	}
	before, _ := c.Node("h1")
	require.Len(t, before.Pods, 3, "a dry-run changes nothing")

	pe, err := big.Victims("h1", []string{"default/a", "default/b", "default/c"})
	require.NoError(t, err)
	require.Equal(t, []string{"default/c"}, pe.Victims, "one pod rather than two")
	pe, err = big.Victims("h1", []string{"default/a", "default/b"})
	require.NoError(t, err)
	require.Equal(t, []string{"default/a", "default/b"}, pe.Victims, "only among the candidates")
	_, err = big.Victims("h1", []string{"default/a"})
	require.ErrorIs(t, err, scheduler.ErrNoPreemption)

	// A nominated 4-GPU pod takes NUMA node 1 once c is gone: then a and b
	// must go.
	nominated, err := c.Prepare(withPriority(numaPod("nominated", 8, 4, "SingleNUMANode"), 20))
	require.NoError(t, err)
	added := []*scheduler.PreparedPod{nominated}
	require.Error(t, big.FilterWhatIf("h1", scheduler.WhatIf{Removed: []string{"default/c"}, Added: added}))
	require.NoError(t, big.FilterWhatIf("h1", scheduler.WhatIf{Removed: []string{"default/a", "default/b", "default/c"}, Added: added}))

	// A pod no eviction helps: more GPUs than a NUMA node has.
	huge, err := c.Prepare(withPriority(numaPod("huge", 8, 5, "SingleNUMANode"), 10))
	require.NoError(t, err)
	_, err = huge.Victims("h1", []string{"default/a", "default/b", "default/c"})
	require.ErrorIs(t, err, scheduler.ErrNoPreemption)
	var fe *scheduler.FilterError
	require.ErrorAs(t, huge.FilterWhatIf("h1", scheduler.WhatIf{Removed: []string{"default/a", "default/b", "default/c"}}), &fe)
	require.True(t, fe.Never)
}

// TestPreemptSharedPoolOfExclusivePlainPod: a pod without a NUMA spec
// whose decision names CPUs holds them exclusively, and its CPU request is
// not charged to the shared pool; evicting it gives back its CPUs, not its
// request. The preemption search judges the shared pool by the same rule
// as Filter: here only evicting the 5-CPU shared-pool pod makes room.
func TestPreemptSharedPoolOfExclusivePlainPod(t *testing.T) {
	m, err := topology.NewBuilder("eight").AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 7)}).Build()
	require.NoError(t, err)
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Labels: optIn, Machine: m})
	guaranteed := map[string]string{kube.ResourceCPU: "2"}
	a := &kube.Pod{Namespace: "default", Name: "a", Priority: 1,
		Containers: []kube.Container{{Name: "main", Requests: guaranteed, Limits: guaranteed}}}
	require.NoError(t, c.AddPod(bound(a, "n", map[string]string{
		kube.AnnotationAllocation: `{"policy":"None","exclusive":"Required","cpuset":"0-1","numaNodes":[0]}`})))
	require.NoError(t, c.AddPod(bound(withPriority(plainPod("b", "5", 0), 2), "n", nil)))
	st, _ := c.Node("n")
	require.Equal(t, int64(5000), st.SharedRequestMilli, "a's request is not the shared pool's")
	require.Equal(t, 6, st.SharedCPUs.Size())

	x := withPriority(numaPod("x", 4, 0, "SingleNUMANode"), 10)
	requireRefusal(t, c.Filter(x, "n"), scheduler.ErrSharedPool, "exclusive CPUs would starve the shared pool of the pods without a NUMA spec now")
	pp, err := c.Prepare(x)
	require.NoError(t, err)
	require.Error(t, pp.FilterWhatIf("n", scheduler.WhatIf{Removed: []string{"default/a"}}), "8 CPUs, 4 taken: 4 left for 5 requested")
	require.NoError(t, pp.FilterWhatIf("n", scheduler.WhatIf{Removed: []string{"default/b"}}))

	pe, err := c.PreemptOn(x, "n")
	require.NoError(t, err)
	require.Equal(t, []string{"default/b"}, pe.Victims)
	pe, err = pp.Victims("n", []string{"default/a", "default/b"})
	require.NoError(t, err)
	require.Equal(t, []string{"default/b"}, pe.Victims)
	require.NoError(t, c.RemovePod(bound(withPriority(plainPod("b", "5", 0), 2), "n", nil)))
	require.NoError(t, c.Filter(x, "n"))
}

// TestPreemptLevelRule: fitting is not monotone in removals (removing a
// multi-node allocation can turn the NUMA nodes it shared single, and a
// multi-node pod may not use those), so a set of victims below a priority
// level can make the pod fit while removing every candidate up to the
// level does not. PreemptOn, like DefaultPreemption (which first removes
// every lower-priority pod), searches a level only when removing every
// candidate up to it makes the pod fit: such sets are not its answer.
func TestPreemptLevelRule(t *testing.T) {
	newNode := func(pods ...*kube.Pod) *scheduler.Cache {
		c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Labels: optIn, Machine: preset(t, "dgx-h100")})
		for _, p := range pods {
			require.NoError(t, c.Reserve(p, "n"))
		}
		return c
	}
	// 1 TiB per NUMA node: a and b take 768 GiB on one NUMA node each, the
	// best-effort c 512 GiB over both.
	a := withMemory(withPriority(numaPod("a", 1, 0, "SingleNUMANode"), 1), "768Gi", "768Gi")
	b := withMemory(withPriority(numaPod("b", 1, 0, "SingleNUMANode"), 0), "768Gi", "768Gi")
	c := withMemory(withPriority(numaPod("c", 1, 0, "BestEffort"), 0), "512Gi", "512Gi")
	cache := newNode(a, b, c)
	st, _ := cache.Node("n")
	require.Len(t, st.Allocations, 3)
	require.Len(t, st.Allocations[2].NUMANodes(), 2, "c spans both NUMA nodes: %v", st.Allocations[2])
	// Five GPUs need both NUMA nodes.
	in := withMemory(withPriority(numaPod("in", 1, 5, "Restricted"), 1), "256Gi", "256Gi")
	pp, err := cache.Prepare(in)
	require.NoError(t, err)
	require.Error(t, pp.Filter("n"))
	require.NoError(t, pp.FilterWhatIf("n", scheduler.WhatIf{Removed: []string{"default/b"}}), "b's NUMA node is free for the span")
	require.Error(t, pp.FilterWhatIf("n", scheduler.WhatIf{Removed: []string{"default/b", "default/c"}}),
		"without c both NUMA nodes are single-NUMA-node ones")
	_, err = cache.PreemptOn(in, "n")
	require.ErrorIs(t, err, scheduler.ErrNoPreemption)
	_, err = pp.Victims("n", []string{"default/b", "default/c"})
	require.ErrorIs(t, err, scheduler.ErrNoPreemption)
	pe, err := pp.Victims("n", []string{"default/b"})
	require.NoError(t, err)
	require.Equal(t, []string{"default/b"}, pe.Victims, "among b alone, b is the answer")
}
