package numaplace

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/numaplace/numaplace/adapters/kube"
)

// BenchmarkFilter is the plugin's Filter for one pod and one empty node
// (what kube-scheduler runs for every node of every pod): the CycleState
// read, Cache.Filter (which parses the pod again on every call) and the
// latency histogram.
func BenchmarkFilter(b *testing.B) {
	for _, preset := range []string{"dgx-h100", "dgx-a100"} {
		for _, pol := range []string{"SingleNUMANode", "Restricted", "BestEffort", "None"} {
			b.Run(preset+"/"+pol, func(b *testing.B) {
				e := newTestEvents(b)
				pl := e.pl
				n := testNode(b, "gpu-1", preset, true)
				e.nodeChanged(n)
				ni := framework.NewNodeInfo()
				ni.SetNode(n)
				res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("24"), kube.ResourceAliyunGPU: resource.MustParse("2")}
				p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", Annotations: map[string]string{
					kube.AnnotationCPUSetScheduler: "required",
					kube.AnnotationSpecAlibaba:     fmt.Sprintf(`{"numaTopologyPolicy":%q}`, pol)}},
					Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}}}
				state := framework.NewCycleState()
				_, st := pl.PreFilter(context.Background(), state, p, nil)
				require.True(b, st.IsSuccess(), st.Message())
				b.ReportAllocs()
				for b.Loop() {
					if st := pl.Filter(context.Background(), state, p, ni); !st.IsSuccess() {
						b.Fatal(st.Message())
					}
				}
			})
		}
	}
}

// BenchmarkPreFilter is the plugin's PreFilter over a snapshot of n nodes
// that have not changed since the last cycle (the common case): the catch-up
// that compares every NodeInfo's generation with the one last synced, and
// the pod's parse.
func BenchmarkPreFilter(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes%d", n), func(b *testing.B) {
			e := newTestEvents(b)
			pl := e.pl
			proto := testNode(b, "proto", "dgx-h100", true)
			nodes := make([]fwk.NodeInfo, n)
			for i := range nodes {
				nd := proto.DeepCopy()
				nd.Name = fmt.Sprintf("gpu-%d", i)
				e.nodeChanged(nd)
				ni := framework.NewNodeInfo()
				ni.SetNode(nd)
				nodes[i] = ni
			}
			res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("24"), kube.ResourceAliyunGPU: resource.MustParse("2")}
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", Annotations: map[string]string{
				kube.AnnotationCPUSetScheduler: "required",
				kube.AnnotationSpecAlibaba:     `{"numaTopologyPolicy":"SingleNUMANode"}`}},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}}}
			_, st := pl.PreFilter(context.Background(), framework.NewCycleState(), p, nodes) // the first cycle syncs them all
			require.True(b, st.IsSuccess(), st.Message())
			b.ReportAllocs()
			for b.Loop() {
				if _, st := pl.PreFilter(context.Background(), framework.NewCycleState(), p, nodes); !st.IsSuccess() {
					b.Fatal(st.Message())
				}
			}
		})
	}
}
