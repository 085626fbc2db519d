package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
)

// benchPod is a typical 4-GPU training pod as the scheduler plugin hands it
// to ParsePod (quantities as Kubernetes writes them back): the ACK NUMA
// spec and cpuset-scheduler: required, labels and annotations of a job
// controller, an init container that fetches the data set, a log-shipping
// sidecar (restartPolicy: Always) and two app containers with CPU, memory
// and aliyun.com/gpu requests and limits.
func benchPod() *kube.Pod {
	return &kube.Pod{
		Namespace: "llm-training",
		Name:      "llama-ft-worker-3",
		UID:       "6f1c2d7e-3b8a-4e51-9f0c-2a7d5e8b1c94",
		Labels: map[string]string{
			"app.kubernetes.io/name":              "llama-ft",
			"app.kubernetes.io/part-of":           "llm-training",
			"training.kubeflow.org/job-name":      "llama-ft",
			"training.kubeflow.org/replica-type":  "worker",
			"training.kubeflow.org/replica-index": "3",
			"pod-template-hash":                   "7d9f8c6b5",
		},
		Annotations: map[string]string{
			kube.AnnotationSpecAlibaba:                `{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Required"}`,
			kube.AnnotationCPUSetScheduler:            "required",
			"kubectl.kubernetes.io/default-container": "trainer",
			"prometheus.io/scrape":                    "true",
			"prometheus.io/port":                      "9400",
		},
		Priority: 1000,
		InitContainers: []kube.InitContainer{
			{Container: kube.Container{Name: "fetch-dataset",
				Requests: map[string]string{kube.ResourceCPU: "2", kube.ResourceMemory: "4Gi"},
				Limits:   map[string]string{kube.ResourceCPU: "2", kube.ResourceMemory: "4Gi"}}},
			{Container: kube.Container{Name: "log-shipper",
				Requests: map[string]string{kube.ResourceCPU: "1", kube.ResourceMemory: "512Mi"},
				Limits:   map[string]string{kube.ResourceCPU: "1", kube.ResourceMemory: "512Mi"}},
				RestartPolicyAlways: true},
		},
		Containers: []kube.Container{
			{Name: "trainer",
				Requests: map[string]string{kube.ResourceCPU: "40", kube.ResourceMemory: "320Gi", kube.ResourceAliyunGPU: "4"},
				Limits:   map[string]string{kube.ResourceCPU: "40", kube.ResourceMemory: "320Gi", kube.ResourceAliyunGPU: "4"}},
			{Name: "metrics-exporter",
				Requests: map[string]string{kube.ResourceCPU: "1", kube.ResourceMemory: "256Mi"},
				Limits:   map[string]string{kube.ResourceCPU: "1", kube.ResourceMemory: "256Mi"}},
		},
	}
}

// userFormsPod is benchPod with the quantities written as people write
// them: requests and limits in different forms of the same amount.
func userFormsPod() *kube.Pod {
	p := benchPod()
	for i, c := range p.Containers {
		c.Requests = map[string]string{}
		for k, v := range c.Limits {
			c.Requests[k] = v
		}
		p.Containers[i] = c
	}
	p.InitContainers[0].Requests[kube.ResourceCPU] = "2000m"
	p.InitContainers[0].Requests[kube.ResourceMemory] = "4096Mi"
	p.InitContainers[1].Requests[kube.ResourceMemory] = "0.5Gi"
	p.Containers[0].Requests[kube.ResourceCPU] = "40000m"
	p.Containers[0].Requests[kube.ResourceMemory] = "343597383680"
	p.Containers[0].Limits[kube.ResourceAliyunGPU] = "4.0"
	p.Containers[1].Requests[kube.ResourceCPU] = "+1"
	p.Containers[1].Limits[kube.ResourceMemory] = "268435456"
	return p
}

// TestParsePodAllocs: a typical pod is read without allocating, however its
// quantities are written.
func TestParsePodAllocs(t *testing.T) {
	for name, p := range map[string]*kube.Pod{"typical": benchPod(), "user forms": userFormsPod()} {
		want, err := kube.ParsePod(benchPod(), kube.Config{})
		require.NoError(t, err)
		got, err := kube.ParsePod(p, kube.Config{})
		require.NoError(t, err)
		require.Equal(t, want, got, name)
		if n := testing.AllocsPerRun(100, func() { _, _ = kube.ParsePod(p, kube.Config{}) }); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

// BenchmarkParsePod reads a typical 4-GPU pod (see benchPod), what the
// scheduler adapter does on every Filter of a pod it has not prepared.
func BenchmarkParsePod(b *testing.B) {
	p := benchPod()
	r, err := kube.ParsePod(p, kube.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if !r.NUMA || r.CPUs != 42 || r.GPUs != 4 || r.MemoryMiB != 320<<10+768 || !r.Guaranteed {
		b.Fatalf("unexpected request %+v", r)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kube.ParsePod(p, kube.Config{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParsePodUserForms is BenchmarkParsePod with the quantities of
// userFormsPod (requests and limits written differently).
func BenchmarkParsePodUserForms(b *testing.B) {
	p := userFormsPod()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kube.ParsePod(p, kube.Config{}); err != nil {
			b.Fatal(err)
		}
	}
}
