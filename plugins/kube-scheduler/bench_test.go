package numaplace

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
