package numaplace

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/numaplace/numaplace/plugins/kube-scheduler/internal/trialpods"
)

// cyclePod is the i-th pod of the throughput trial's mix
// (trialpods.Mix, as cmd/numaplace-scheduler's TestThroughput draws it).
func cyclePod(i int, rng *rand.Rand) *v1.Pod {
	policy, cpus, gpus := trialpods.Mix(rng)
	name := fmt.Sprintf("pod-%05d", i)
	p := trialpods.Pod("default", name, policy, cpus, gpus)
	p.UID = types.UID("uid-" + name)
	return p
}

// BenchmarkCycle is NUMAPlace's share of kube-scheduler's work for one pod
// of the throughput trial (1,000 nodes, half dgx-h100, half dgx-a100;
// 2,000 pods of the trial's mix, then the cluster is emptied and filled
// again): PreFilter over every node (the catch-up included), Filter on
// feasibleNodes nodes from a rotating start (kube-scheduler's
// percentageOfNodesToScore finds 420 of 1,000), PreScore, Score on those that
// passed, Reserve on the best, the decision Bind posts, PostBind, and the
// informer handlers seeing the pod bound with it. The framework's own work
// (its plugins, metrics and API calls) is not in it: this is what the
// NUMAPlace profile adds per pod.
func BenchmarkCycle(b *testing.B) {
	const nodes, pods, feasibleNodes = 1000, 2000, 420
	e := newTestEvents(b)
	pl := e.pl
	pl.handle = nil
	pl.pathOnce.Do(func() { pl.path = writeByBind })
	protos := map[string]*v1.Node{"dgx-h100": testNode(b, "proto", "dgx-h100", true), "dgx-a100": testNode(b, "proto", "dgx-a100", true)}
	infos := make([]fwk.NodeInfo, nodes)
	index := map[string]int{}
	for i := range infos {
		preset := "dgx-h100"
		if i%2 == 1 {
			preset = "dgx-a100"
		}
		n := protos[preset].DeepCopy()
		n.Name = fmt.Sprintf("gpu-%04d", i)
		e.nodeChanged(n)
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		infos[i], index[n.Name] = ni, i
	}
	rng := rand.New(rand.NewPCG(25, 1))
	var bound []*v1.Pod
	start, scheduled, unschedulable := 0, 0, 0
	ctx := context.Background()
	refusals := map[string]int{}
	var resetCPU time.Duration
	cpu0, cpuOK := processCPU()
	b.ReportAllocs()
	for b.Loop() {
		if len(bound) == pods { // the cluster emptied (not counted)
			b.StopTimer()
			c0, _ := processCPU()
			for _, p := range bound {
				e.podDeleted(p)
				ni := framework.NewNodeInfo()
				ni.SetNode(infos[index[p.Spec.NodeName]].Node())
				infos[index[p.Spec.NodeName]] = ni
			}
			bound = bound[:0]
			c1, _ := processCPU()
			resetCPU += c1 - c0
			b.StartTimer()
		}
		p := cyclePod(len(bound), rng)
		state := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, state, p, infos); !st.IsSuccess() {
			b.Fatal(st.Message())
		}
		var feasible []fwk.NodeInfo
		for k := 0; k < nodes && len(feasible) < feasibleNodes; k++ {
			ni := infos[(start+k)%nodes]
			if st := pl.Filter(ctx, state, p, ni); st.IsSuccess() {
				feasible = append(feasible, ni)
			} else if refusals != nil && false {
				refusals[st.Message()]++
			}
		}
		start = (start + feasibleNodes) % nodes
		if len(feasible) == 0 {
			unschedulable++
			continue
		}
		best, bestScore := "", int64(-1)
		if st := pl.PreScore(ctx, state, p, feasible); st.IsSuccess() {
			for _, ni := range feasible {
				s, st := pl.Score(ctx, state, p, ni)
				if !st.IsSuccess() {
					b.Fatal(st.Message())
				}
				if s > bestScore {
					best, bestScore = ni.Node().Name, s
				}
			}
		} else {
			best = feasible[0].Node().Name
		}
		if st := pl.Reserve(ctx, state, p, best); !st.IsSuccess() {
			b.Fatal(st.Message())
		}
		// The framework's snapshot sees the pod assumed on the node.
		ni := framework.NewNodeInfo()
		ni.SetNode(infos[index[best]].Node())
		infos[index[best]] = ni
		ann, err := pl.decision(state, p, best)
		if err != nil {
			b.Fatal(err)
		}
		pl.PostBind(ctx, state, p, best)
		p = p.DeepCopy()
		p.Spec.NodeName = best
		for k, v := range ann {
			p.Annotations[k] = v
		}
		e.podChanged(p)
		bound = append(bound, p)
		scheduled++
	}
	for r, n := range refusals {
		b.Logf("%d refusals: %s", n, r)
	}
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0-resetCPU)/float64(b.N), "cpu-ns/op")
	}
	b.ReportMetric(float64(unschedulable)/float64(scheduled+unschedulable), "unschedulable/op")
}
