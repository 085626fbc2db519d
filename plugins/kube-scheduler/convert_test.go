package numaplace_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

func TestPodFromV1(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	prio := int32(1000)
	res := func(kv ...string) v1.ResourceList {
		l := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "textgen", UID: "u-1",
			Labels: map[string]string{"app": "textgen"},
			Annotations: map[string]string{
				kube.AnnotationSpecKoordinator: `{"numaTopologyPolicy":"SingleNUMANode"}`,
				kube.AnnotationCPUSetScheduler: "required",
			}},
		Spec: v1.PodSpec{
			NodeName: "gpu-1",
			Priority: &prio,
			InitContainers: []v1.Container{
				{Name: "fetch", Resources: v1.ResourceRequirements{Requests: res("cpu", "8", "memory", "2Gi"), Limits: res("cpu", "8")}},
				{Name: "proxy", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: res("cpu", "2"), Limits: res("cpu", "2")}},
			},
			Containers: []v1.Container{
				{Name: "main", Resources: v1.ResourceRequirements{
					Requests: res("cpu", "22", "memory", "64Gi", "aliyun.com/gpu", "4"),
					Limits:   res("cpu", "22", "aliyun.com/gpu", "4")}},
				{Name: "sidecar-like", Resources: v1.ResourceRequirements{Requests: res("cpu", "500m"), Limits: res("cpu", "500m")}},
			},
		},
	}
	kp := numaplace.PodFromV1(p)
	require.Equal(t, "ml/textgen", kp.Key())
	require.Equal(t, "u-1", kp.UID)
	require.Equal(t, "gpu-1", kp.NodeName)
	require.Equal(t, int32(1000), kp.Priority)
	require.Equal(t, p.Labels, kp.Labels)
	require.Equal(t, p.Annotations, kp.Annotations)
	require.Len(t, kp.InitContainers, 2)
	require.False(t, kp.InitContainers[0].RestartPolicyAlways)
	require.True(t, kp.InitContainers[1].RestartPolicyAlways)
	require.Equal(t, map[string]string{"cpu": "8", "memory": "2Gi"}, kp.InitContainers[0].Requests)
	require.Equal(t, map[string]string{"cpu": "22", "memory": "64Gi", "aliyun.com/gpu": "4"}, kp.Containers[0].Requests)
	require.Equal(t, map[string]string{"cpu": "500m"}, kp.Containers[1].Limits)

	// The sidecar adds to the app containers; the 500m container makes the
	// CPU request fractional, which a NUMA pod may not have.
	_, err := kube.ParsePod(kp, kube.Config{})
	require.ErrorIs(t, err, kube.ErrInvalidPod)
	require.ErrorContains(t, err, `container "sidecar-like"`)
	p.Spec.Containers = p.Spec.Containers[:1]
	req, err := kube.ParsePod(numaplace.PodFromV1(p), kube.Config{})
	require.NoError(t, err)
	require.Equal(t, 24, req.CPUs, "22 + the 2-CPU sidecar, above the 8-CPU init container's 8 + 2")
	require.Equal(t, 4, req.GPUs)
	require.Equal(t, int64(64<<10), req.MemoryMiB)

	require.Nil(t, numaplace.PodFromV1(nil))
}

func TestMachineFromNode(t *testing.T) {
	h100, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	js, err := json.Marshal(h100)
	require.NoError(t, err)
	report, err := kube.NRTFromState(h100, nil)
	require.NoError(t, err)
	nrt, err := json.Marshal(report)
	require.NoError(t, err)
	koord := kube.KoordinatorCPUTopology(h100)
	spec := func(m *topology.Machine) string {
		s := m.Spec()
		s.Name = ""
		b, err := json.Marshal(s)
		require.NoError(t, err)
		return string(b)
	}
	nodeWith := func(ann map[string]string, gpus string) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Annotations: ann}}
		if gpus != "" {
			n.Status.Allocatable = v1.ResourceList{kube.ResourceAliyunGPU: resource.MustParse(gpus)}
		}
		return n
	}
	t.Run("topology", func(t *testing.T) {
		m, key, err := numaplace.MachineFromNode(nodeWith(map[string]string{numaplace.AnnotationTopology: string(js)}, ""))
		require.NoError(t, err)
		require.Equal(t, numaplace.AnnotationTopology, key)
		require.Equal(t, spec(h100), spec(m))
	})
	t.Run("node resource topology", func(t *testing.T) {
		m, key, err := numaplace.MachineFromNode(nodeWith(map[string]string{numaplace.AnnotationNRT: string(nrt)}, ""))
		require.NoError(t, err)
		require.Equal(t, numaplace.AnnotationNRT, key)
		require.Equal(t, spec(h100), spec(m))
	})
	t.Run("koordinator", func(t *testing.T) {
		m, key, err := numaplace.MachineFromNode(nodeWith(map[string]string{numaplace.AnnotationKoordCPUTopology: koord}, "8"))
		require.NoError(t, err)
		require.Equal(t, numaplace.AnnotationKoordCPUTopology, key)
		require.Equal(t, h100.NumCPUs(), m.NumCPUs())
		require.Equal(t, 2, m.NumNodes())
		require.Equal(t, 8, m.NumGPUs())
		for _, g := range m.GPUs() {
			require.Equal(t, topology.UnknownNode, g.NUMANode)
		}
	})
	t.Run("precedence", func(t *testing.T) {
		small, err := topology.Preset("small-1s")
		require.NoError(t, err)
		sj, err := json.Marshal(small)
		require.NoError(t, err)
		m, key, err := numaplace.MachineFromNode(nodeWith(map[string]string{
			numaplace.AnnotationTopology: string(sj), numaplace.AnnotationNRT: string(nrt), numaplace.AnnotationKoordCPUTopology: koord}, ""))
		require.NoError(t, err)
		require.Equal(t, numaplace.AnnotationTopology, key)
		require.Equal(t, spec(small), spec(m))
	})
	t.Run("none", func(t *testing.T) {
		_, _, err := numaplace.MachineFromNode(nodeWith(nil, "8"))
		require.ErrorIs(t, err, numaplace.ErrNoTopology)
		require.ErrorContains(t, err, "gpu-1")
	})
	t.Run("unusable", func(t *testing.T) {
		for key, value := range map[string]string{
			numaplace.AnnotationTopology:         `{"numaNodes":[]}`,
			numaplace.AnnotationNRT:              `{"zones":[{"name":"node-x","type":"Node"}]}`,
			numaplace.AnnotationKoordCPUTopology: `{"detail":[]}`,
		} {
			_, got, err := numaplace.MachineFromNode(nodeWith(map[string]string{key: value}, ""))
			require.Error(t, err, key)
			require.Equal(t, key, got)
			require.ErrorContains(t, err, "node gpu-1: annotation "+key)
		}
	})
}

func TestDecodeArgs(t *testing.T) {
	a, err := numaplace.DecodeArgs(nil)
	require.NoError(t, err)
	require.Equal(t, numaplace.Args{}, a)
	cfg, err := a.Config()
	require.NoError(t, err)
	require.Equal(t, allocator.MostAllocated, cfg.Allocator.Scoring)

	a, err = numaplace.DecodeArgs(&runtime.Unknown{Raw: []byte(`{"optInLabel":"gpu","optInValue":"numa","acceptNvidiaGPU":true,
		"koordinatorAnnotations":true,"scoringStrategy":"LeastAllocated","minSharedCPUs":-1}`), ContentType: runtime.ContentTypeJSON})
	require.NoError(t, err)
	require.Equal(t, numaplace.Args{OptInLabel: "gpu", OptInValue: "numa", AcceptNvidiaGPU: true, KoordinatorAnnotations: true,
		ScoringStrategy: numaplace.LeastAllocated, MinSharedCPUs: -1}, a)
	cfg, err = a.Config()
	require.NoError(t, err)
	require.Equal(t, allocator.LeastAllocated, cfg.Allocator.Scoring)
	require.True(t, cfg.Pods.AcceptNvidiaGPU)
	require.True(t, cfg.KoordinatorAnnotations)

	a, err = numaplace.DecodeArgs(&runtime.Unknown{Raw: []byte("scoringStrategy: MostAllocated\nminSharedCPUs: 2\n"), ContentType: runtime.ContentTypeYAML})
	require.NoError(t, err)
	require.Equal(t, numaplace.Args{ScoringStrategy: numaplace.MostAllocated, MinSharedCPUs: 2}, a)

	a, err = numaplace.DecodeArgs(&numaplace.Args{KoordinatorAnnotations: true})
	require.NoError(t, err)
	require.True(t, a.KoordinatorAnnotations)

	for name, obj := range map[string]runtime.Object{
		"unknown field":    &runtime.Unknown{Raw: []byte(`{"scoringStrategy":"MostAllocated","minSharedCPU":1}`)},
		"unknown strategy": &runtime.Unknown{Raw: []byte(`{"scoringStrategy":"Spread"}`)},
		"value no label":   &runtime.Unknown{Raw: []byte(`{"optInValue":"x"}`)},
		"yaml typo":        &runtime.Unknown{Raw: []byte("scoringStrategi: MostAllocated\n"), ContentType: runtime.ContentTypeYAML},
		"bad json":         &runtime.Unknown{Raw: []byte(`{"minSharedCPUs":"one"}`)},
		"trailing data":    &runtime.Unknown{Raw: []byte(`{} {}`)},
		"content type":     &runtime.Unknown{Raw: []byte(`x`), ContentType: "application/vnd.kubernetes.protobuf"},
		"wrong type":       &v1.Pod{},
	} {
		_, err := numaplace.DecodeArgs(obj)
		require.ErrorIs(t, err, numaplace.ErrArgs, name)
	}
}

// The example configuration's args reach the plugin as kube-scheduler's
// loader hands them over, and decode to what the file says.
func TestExampleConfigArgs(t *testing.T) {
	cfg, err := options.LoadConfigFromFile(klog.Background(), "deploy/scheduler-config.yaml")
	require.NoError(t, err)
	require.NoError(t, validation.ValidateKubeSchedulerConfiguration(cfg))
	require.Equal(t, "numaplace-scheduler", cfg.LeaderElection.ResourceName, "the default scheduler's lease")
	var found bool
	for _, pc := range cfg.Profiles[0].PluginConfig {
		if pc.Name != numaplace.Name {
			continue
		}
		found = true
		a, err := numaplace.DecodeArgs(pc.Args)
		require.NoError(t, err)
		require.Equal(t, numaplace.Args{OptInLabel: kube.DefaultOptInLabel, OptInValue: kube.DefaultOptInValue,
			ScoringStrategy: numaplace.MostAllocated, MinSharedCPUs: 1}, a)
	}
	require.True(t, found, "no pluginConfig for %s", numaplace.Name)
}
