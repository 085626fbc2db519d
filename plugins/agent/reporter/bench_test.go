package reporter_test

import (
	"strconv"
	"testing"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/reporter"
	"github.com/numaplace/numaplace/topology"
)

// BenchmarkReport measures what one write of the reporter computes: the
// node's report (zones, attributes, the pod fingerprint) on a loaded
// machine, here a DGX H100 with 8 exclusive 1-GPU pods and 100 shared-pool
// pods.
func BenchmarkReport(b *testing.B) {
	for _, preset := range []string{"dgx-h100", "numa64"} {
		b.Run(preset, func(b *testing.B) {
			m, err := topology.Preset(preset)
			if err != nil {
				b.Fatal(err)
			}
			node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			for i := range min(8, m.NumGPUs()) {
				p := &kube.Pod{Namespace: "ml", Name: "x" + strconv.Itoa(i), Annotations: map[string]string{
					kube.AnnotationSpecAlibaba: `{"numaTopologyPolicy":"SingleNUMANode"}`, kube.AnnotationCPUSetScheduler: "required"},
					Containers: []kube.Container{{Name: "c", Requests: map[string]string{"cpu": "2", kube.ResourceAliyunGPU: "1"},
						Limits: map[string]string{"cpu": "2", kube.ResourceAliyunGPU: "1"}}}}
				if _, err := node.Admit(p); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 100 {
				if _, err := node.Admit(sharedPod("web-" + strconv.Itoa(i))); err != nil {
					b.Fatal(err)
				}
			}
			r, err := reporter.New(node, &fakeWriter{}, reporter.Options{NodeName: "n1"})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Report(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
