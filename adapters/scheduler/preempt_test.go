package scheduler_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
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
// pod fit once removed, and no smaller set of lower-priority pods does.
func TestPreemptIsExact(t *testing.T) {
	m := preset(t, "dgx-h100")
	rapid.Check(t, func(t *rapid.T) {
		pols := []string{"SingleNUMANode", "Restricted", "BestEffort"}
		var pods []*kube.Pod
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
				require.NoError(t, c.Reserve(p, "n"))
			}
			for i, p := range pods {
				if skip[i] {
					require.NoError(t, c.Unreserve(p))
				}
			}
			return c
		}
		c := fresh()
		// Memory (1 TiB per NUMA node) binds as often as CPUs and GPUs.
		mems := []string{"", "", "256Gi", "512Gi", "768Gi"}
		n := rapid.IntRange(1, 7).Draw(t, "pods")
		for i := 0; i < n; i++ {
			p := withPriority(numaPod(fmt.Sprintf("p%d", i),
				rapid.IntRange(1, 60).Draw(t, "cpus"), rapid.IntRange(0, 4).Draw(t, "gpus"),
				rapid.SampledFrom(pols).Draw(t, "pol")), int32(rapid.IntRange(0, 9).Draw(t, "prio")))
			if q := rapid.SampledFrom(mems).Draw(t, "mem"); q != "" {
				p = withMemory(p, q, q)
			}
			if c.Reserve(p, "n") == nil {
				pods = append(pods, p)
			}
		}
		in := withPriority(numaPod("in", rapid.IntRange(1, 100).Draw(t, "incpus"), rapid.IntRange(0, 8).Draw(t, "ingpus"),
			rapid.SampledFrom(pols).Draw(t, "inpol")), int32(rapid.IntRange(1, 10).Draw(t, "inprio")))
		if q := rapid.SampledFrom(mems).Draw(t, "inmem"); q != "" {
			in = withMemory(in, q, q)
		}
		pe, err := c.PreemptOn(in, "n")
		// Brute force: the smallest set of lower-priority pods whose removal
		// makes Filter pass.
		best := -1
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
			if !ok {
				continue
			}
			if build(skip).Filter(in, "n") == nil {
				if k := len(skip); best < 0 || k < best {
					best = k
				}
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
		require.Len(t, pe.Victims, best)
		skip := map[int]bool{}
		for _, v := range pe.Victims {
			for i, p := range pods {
				if p.Key() == v {
					skip[i] = true
				}
			}
		}
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
