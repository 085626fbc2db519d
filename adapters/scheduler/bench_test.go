package scheduler_test

import (
	"fmt"
	"testing"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

// benchCluster returns a cache of n opted-in nodes, alternately dgx-h100
// and dgx-a100, each about half full: half of its GPUs held by
// SingleNUMANode pods of one GPU and 8-24 CPUs (the CPU count varies with
// the node, so that the nodes score differently), plus a pod without a
// NUMA spec of 4.5 CPUs in the shared pool.
func benchCluster(b *testing.B, n int) *scheduler.Cache {
	b.Helper()
	c := newCache(b, scheduler.Config{})
	h100, a100 := preset(b, "dgx-h100"), preset(b, "dgx-a100")
	for i := range n {
		m := h100
		if i%2 == 1 {
			m = a100
		}
		name := fmt.Sprintf("node-%05d", i)
		if err := c.AddNode(scheduler.Node{Name: name, Labels: optIn, Machine: m}); err != nil {
			b.Fatal(err)
		}
		for g := range m.NumGPUs() / 2 {
			p := numaPod(fmt.Sprintf("fill-%d-%d", i, g), 8+4*((i/2+g)%5), 1, "SingleNUMANode")
			if err := c.Reserve(p, name); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Reserve(plainPod(fmt.Sprintf("web-%d", i), "4500m", 0), name); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// BenchmarkScheduleOne schedules a text-generation pod (4 GPUs, 24 CPUs,
// SingleNUMANode) on half-full clusters of dgx-h100 and dgx-a100 nodes,
// every node filtered and scored (PercentageOfNodesToScore 100), and
// unreserves it so that every iteration sees the same cluster.
func BenchmarkScheduleOne(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes%d", n), func(b *testing.B) {
			c := benchCluster(b, n)
			pod := numaPod("textgen", 24, 4, "SingleNUMANode")
			res, err := c.ScheduleOne(pod)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Unreserve(pod); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.ScheduleOne(pod); err != nil {
					b.Fatal(err)
				}
				if err := c.Unreserve(pod); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Feasible), "feasible-nodes")
		})
	}
}
