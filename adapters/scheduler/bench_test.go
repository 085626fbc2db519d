package scheduler_test

import (
	"fmt"
	"testing"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
)

// benchCluster returns a cache of n opted-in nodes, alternately dgx-h100
// and dgx-a100, each about half full: half of its GPUs held by
// SingleNUMANode pods of one GPU and 8-24 CPUs (the CPU count varies with
// the node, so that the nodes score differently), plus a pod without a
// NUMA spec of 4.5 CPUs in the shared pool. With distinct, that pod asks
// for 4.5 CPUs and i thousandths on node i, so that no two nodes are in the
// same state (the cache cannot judge a pod once for several nodes).
func benchCluster(b *testing.B, n int, distinct bool) *scheduler.Cache {
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
		web := "4500m"
		if distinct {
			web = fmt.Sprintf("%dm", 4500+i)
		}
		if err := c.Reserve(plainPod(fmt.Sprintf("web-%d", i), web, 0), name); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// BenchmarkScheduleOne schedules a text-generation pod (4 GPUs, 24 CPUs,
// SingleNUMANode) on half-full clusters of dgx-h100 and dgx-a100 nodes,
// every node filtered and scored (PercentageOfNodesToScore 100), and
// unreserves it so that every iteration sees the same cluster. Each
// iteration reads the pod afresh, as a scheduler does with each pod. The
// nodes fall in ten states (machine and fill), which the cache judges once
// each; distinct-nodes5000 gives every node a state of its own. The pod asks
// for the same in every iteration (as the replicas of a workload do), so
// the verdicts kept for its request class answer the nodes that did not
// change; the -fresh cases give each iteration's pod a memory request of its
// own (1 to 50,000 MiB), a request no pod asked for before, so that every
// state is judged: on distinct-nodes5000-fresh, every node. Besides the wall
// clock it reports the process's CPU time per op (cpu-ns/op, where the
// system gives it: the pod's construction in the -fresh cases included).
func BenchmarkScheduleOne(b *testing.B) {
	for _, bc := range []struct {
		n               int
		distinct, fresh bool
	}{{1000, false, false}, {5000, false, false}, {5000, true, false}, {5000, false, true}, {5000, true, true}} {
		name := fmt.Sprintf("nodes%d", bc.n)
		if bc.distinct {
			name = "distinct-" + name
		}
		if bc.fresh {
			name += "-fresh"
		}
		b.Run(name, func(b *testing.B) {
			c := benchCluster(b, bc.n, bc.distinct)
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
			cpu0, cpuOK := processCPU()
			i := 0
			for b.Loop() {
				if bc.fresh {
					b.StopTimer()
					i++
					mem := fmt.Sprintf("%dMi", i%50000+1)
					pod = numaPod("textgen", 24, 4, "SingleNUMANode")
					pod.Containers[0].Requests[kube.ResourceMemory] = mem
					pod.Containers[0].Limits[kube.ResourceMemory] = mem
					b.StartTimer()
				}
				if _, err := c.ScheduleOne(pod); err != nil {
					b.Fatal(err)
				}
				if err := c.Unreserve(pod); err != nil {
					b.Fatal(err)
				}
			}
			if cpu1, ok := processCPU(); ok && cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
			b.ReportMetric(float64(res.Feasible), "feasible-nodes")
		})
	}
}

// boundPods are the pods of a full dgx-h100 as a restarted scheduler reads
// them: 100 pods of 2 CPUs (one GPU for 8 of them), with their decisions
// written by ScheduleOne, and, when predicted > 0, that many of them
// without a decision (bound by another scheduler: predicted after the
// decisions).
func boundPods(b *testing.B, predicted int) []*kube.Pod {
	b.Helper()
	c := newCache(b, scheduler.Config{MinSharedCPUs: -1}, scheduler.Node{Name: "n", Labels: optIn, Machine: preset(b, "dgx-h100")})
	var out []*kube.Pod
	for i := range 100 {
		gpus := 0
		if i < 8 {
			gpus = 1
		}
		p := numaPod(fmt.Sprintf("p%03d", i), 2, gpus, "SingleNUMANode")
		res, err := c.ScheduleOne(p)
		if err != nil {
			b.Fatal(err)
		}
		ann := res.Annotations
		if i >= 100-predicted {
			ann = nil
		}
		out = append(out, bound(p, "n", ann))
	}
	return out
}

// BenchmarkSyncPods is a restarted scheduler reading a full node's 100
// bound pods at once (Cache.SyncPods: claimed one by one when every pod has
// its decision, one canonical rebuild when some have none), and the cost of
// one pod event on a node whose accounting depends on the order (a
// prediction on it: the node is rebuilt).
func BenchmarkSyncPods(b *testing.B) {
	m := preset(b, "dgx-h100")
	for _, predicted := range []int{0, 20} {
		pods := boundPods(b, predicted)
		b.Run(fmt.Sprintf("restart/predicted%d", predicted), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := newCache(b, scheduler.Config{MinSharedCPUs: -1}, scheduler.Node{Name: "n", Labels: optIn, Machine: m})
				if _, err := c.SyncPods("n", pods, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("event/predicted%d", predicted), func(b *testing.B) {
			c := newCache(b, scheduler.Config{MinSharedCPUs: -1}, scheduler.Node{Name: "n", Labels: optIn, Machine: m})
			if _, err := c.SyncPods("n", pods[1:], nil); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := c.AddPod(pods[0]); err != nil {
					b.Fatal(err)
				}
				if err := c.RemovePod(pods[0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
