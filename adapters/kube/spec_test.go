package kube_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/policy"
)

const (
	specSNN        = `{"numaTopologyPolicy":"SingleNUMANode"}`
	specRestricted = `{"numaTopologyPolicy":"Restricted","singleNUMANodeExclusive":"Preferred"}`
)

// res is a resource list such as res("cpu", "24", "aliyun.com/gpu", "4").
func res(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// guaranteed is a container whose requests equal its limits.
func guaranteed(name string, kv ...string) kube.Container {
	return kube.Container{Name: name, Requests: res(kv...), Limits: res(kv...)}
}

// numaPod is a pod with the Alibaba spec key, cpuset-scheduler: required and
// the given containers.
func numaPod(spec string, cs ...kube.Container) *kube.Pod {
	return &kube.Pod{Namespace: "ns", Name: "p", Annotations: map[string]string{
		kube.AnnotationSpecAlibaba: spec, kube.AnnotationCPUSetScheduler: "required"}, Containers: cs}
}

// plainPod is a pod without a NUMA spec.
func plainPod(cs ...kube.Container) *kube.Pod {
	return &kube.Pod{Namespace: "ns", Name: "plain", Containers: cs}
}

func parseErr(p *kube.Pod) error {
	_, err := kube.ParsePod(p, kube.Config{})
	return err
}

// requirePodError checks that err is a *PodError about field whose message
// contains every want.
func requirePodError(t *testing.T, err error, field string, want ...string) *kube.PodError {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, kube.ErrInvalidPod)
	var pe *kube.PodError
	require.ErrorAs(t, err, &pe)
	require.Contains(t, pe.Field, field)
	require.NotEmpty(t, pe.Reason)
	for _, w := range want {
		require.Contains(t, err.Error(), w)
	}
	return pe
}

func TestParsePodSpecKeys(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		want policy.Spec
	}{
		{"alibaba key", map[string]string{kube.AnnotationSpecAlibaba: specSNN},
			policy.Spec{Policy: policy.SingleNUMANode}},
		{"koordinator key", map[string]string{kube.AnnotationSpecKoordinator: specRestricted},
			policy.Spec{Policy: policy.Restricted, Exclusive: policy.Preferred}},
		{"both keys equal", map[string]string{kube.AnnotationSpecAlibaba: specSNN,
			kube.AnnotationSpecKoordinator: `{"singleNUMANodeExclusive":"Required","numaTopologyPolicy":"SingleNUMANode"}`},
			policy.Spec{Policy: policy.SingleNUMANode}},
		{"empty policy is None", map[string]string{kube.AnnotationSpecKoordinator: `{"numaTopologyPolicy":""}`},
			policy.Spec{Policy: policy.None}},
		{"empty object is None/Required", map[string]string{kube.AnnotationSpecAlibaba: `{}`},
			policy.Spec{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := numaPod("", guaranteed("c", "cpu", "4"))
			p.Annotations = tt.ann
			p.Annotations[kube.AnnotationCPUSetScheduler] = "required"
			r, err := kube.ParsePod(p, kube.Config{})
			require.NoError(t, err)
			require.True(t, r.NUMA)
			require.Equal(t, tt.want, r.Spec)
			require.Equal(t, 4, r.CPUs)
			req := r.Request("ns/p")
			require.Equal(t, "ns/p", req.ID)
			require.Equal(t, 4, req.CPUs)
			require.Equal(t, tt.want.Policy, req.Policy)
			require.Equal(t, tt.want.Exclusive, req.Exclusive)
		})
	}

	t.Run("both keys different", func(t *testing.T) {
		p := numaPod(specSNN, guaranteed("c", "cpu", "4"))
		p.Annotations[kube.AnnotationSpecKoordinator] = specRestricted
		requirePodError(t, parseErr(p), kube.AnnotationSpecAlibaba,
			kube.AnnotationSpecAlibaba, kube.AnnotationSpecKoordinator, "differ", "SingleNUMANode", "Restricted")
	})
	t.Run("malformed spec", func(t *testing.T) {
		p := numaPod(`{"numaTopologyPolicy":"single"}`, guaranteed("c", "cpu", "4"))
		err := parseErr(p)
		requirePodError(t, err, kube.AnnotationSpecAlibaba, "invalid NUMA topology spec", `"single"`)
		require.Equal(t, 1, strings.Count(err.Error(), "NUMA topology spec"), "said once: %v", err)
		require.ErrorIs(t, err, policy.ErrInvalidSpec)
	})
	t.Run("malformed second key", func(t *testing.T) {
		p := numaPod(specSNN, guaranteed("c", "cpu", "4"))
		p.Annotations[kube.AnnotationSpecKoordinator] = `not json`
		requirePodError(t, parseErr(p), kube.AnnotationSpecKoordinator, "malformed")
	})
}

func TestParsePodCPUSetScheduler(t *testing.T) {
	t.Run("absent", func(t *testing.T) {
		p := numaPod(specSNN, guaranteed("c", "cpu", "4"))
		delete(p.Annotations, kube.AnnotationCPUSetScheduler)
		requirePodError(t, parseErr(p), kube.AnnotationCPUSetScheduler, `cpuset-scheduler: "required"`)
	})
	t.Run("legacy true", func(t *testing.T) {
		p := numaPod(specSNN, guaranteed("c", "cpu", "4"))
		p.Annotations[kube.AnnotationCPUSetScheduler] = "true"
		requirePodError(t, parseErr(p), kube.AnnotationCPUSetScheduler, "legacy", "cannot be combined", `"required"`)
	})
	for _, v := range []string{"false", "Required", "", "yes"} {
		t.Run("other "+v, func(t *testing.T) {
			p := numaPod(specSNN, guaranteed("c", "cpu", "4"))
			p.Annotations[kube.AnnotationCPUSetScheduler] = v
			requirePodError(t, parseErr(p), kube.AnnotationCPUSetScheduler, "not supported", `"required"`)
		})
	}
	t.Run("required without a NUMA spec", func(t *testing.T) {
		p := plainPod(guaranteed("c", "cpu", "2"))
		p.Annotations = map[string]string{kube.AnnotationCPUSetScheduler: "required"}
		requirePodError(t, parseErr(p), kube.AnnotationCPUSetScheduler, "NUMA topology spec", "has none",
			kube.AnnotationSpecAlibaba, `{"numaTopologyPolicy":"None"}`)
	})
	t.Run("legacy true without a NUMA spec", func(t *testing.T) {
		p := plainPod(guaranteed("c", "cpu", "1500m"))
		p.Annotations = map[string]string{kube.AnnotationCPUSetScheduler: "true"}
		requirePodError(t, parseErr(p), kube.AnnotationCPUSetScheduler, "legacy", "does not implement", `"required"`)
	})
	t.Run("false without a NUMA spec", func(t *testing.T) {
		p := plainPod(guaranteed("c", "cpu", "1500m"))
		p.Annotations = map[string]string{kube.AnnotationCPUSetScheduler: "false"}
		r, err := kube.ParsePod(p, kube.Config{})
		require.NoError(t, err)
		require.False(t, r.NUMA)
		require.Equal(t, int64(1500), r.MilliCPU)
	})
}

func TestParsePodLegacyGPUTopology(t *testing.T) {
	p := numaPod(specSNN, guaranteed("c", "cpu", "4", kube.ResourceAliyunGPU, "1"))
	p.Annotations[kube.DefaultLegacyGPUTopologyAnnotation] = `{}`
	requirePodError(t, parseErr(p), kube.DefaultLegacyGPUTopologyAnnotation,
		"legacy standalone GPU topology-aware scheduling", kube.AnnotationSpecAlibaba)

	// A configured key replaces the default one.
	cfg := kube.Config{LegacyGPUTopologyAnnotations: []string{"example.com/gpu-topo"}}
	_, err := kube.ParsePod(p, cfg)
	require.NoError(t, err, "the default key is no longer a conflict")
	p.Annotations["example.com/gpu-topo"] = "x"
	_, err = kube.ParsePod(p, cfg)
	requirePodError(t, err, "example.com/gpu-topo", "cannot be combined")

	// Without a NUMA spec the legacy annotation is not a conflict.
	q := plainPod(guaranteed("c", kube.ResourceAliyunGPU, "1"))
	q.Annotations = map[string]string{kube.DefaultLegacyGPUTopologyAnnotation: `{}`}
	require.NoError(t, parseErr(q))
}

func TestParsePodCPURules(t *testing.T) {
	tests := []struct {
		name  string
		c     kube.Container
		field string
		want  []string
	}{
		{"non-whole CPUs", guaranteed("app", "cpu", "1500m"), `container "app" cpu request`,
			[]string{"1500m", "not a whole number of cores"}},
		{"non-whole decimal", guaranteed("app", "cpu", "2.5"), `container "app" cpu request`,
			[]string{"2.5", "whole"}},
		{"request differs from limit", kube.Container{Name: "app", Requests: res("cpu", "4"), Limits: res("cpu", "8")},
			`container "app" cpu`, []string{"request 4 differs from limit 8"}},
		{"missing limit", kube.Container{Name: "app", Requests: res("cpu", "4")},
			`container "app" cpu limit`, []string{"needs a CPU limit equal to the request 4"}},
		{"limit only, not whole", kube.Container{Name: "app", Limits: res("cpu", "500m")},
			`container "app" cpu request`, []string{"500m"}},
		{"bad quantity", guaranteed("app", "cpu", "four"), `container "app" cpu request`,
			[]string{"not a quantity", "four"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			requirePodError(t, parseErr(numaPod(specSNN, tt.c)), tt.field, tt.want...)
		})
	}

	t.Run("equal in another form", func(t *testing.T) {
		c := kube.Container{Name: "app", Requests: res("cpu", "4000m"), Limits: res("cpu", "4")}
		r, err := kube.ParsePod(numaPod(specSNN, c), kube.Config{})
		require.NoError(t, err)
		require.Equal(t, 4, r.CPUs)
	})
	t.Run("limit stands for a missing request", func(t *testing.T) {
		c := kube.Container{Name: "app", Limits: res("cpu", "6", kube.ResourceAliyunGPU, "2")}
		r, err := kube.ParsePod(numaPod(specSNN, c), kube.Config{})
		require.NoError(t, err)
		require.Equal(t, 6, r.CPUs)
		require.Equal(t, 2, r.GPUs)
	})
	t.Run("a GPU-only helper container asks for no CPUs", func(t *testing.T) {
		r, err := kube.ParsePod(numaPod(specSNN, guaranteed("app", "cpu", "4"),
			guaranteed("helper", kube.ResourceAliyunGPU, "1")), kube.Config{})
		require.NoError(t, err)
		require.Equal(t, 4, r.CPUs)
		require.Equal(t, 1, r.GPUs)
	})
	t.Run("nothing asked", func(t *testing.T) {
		requirePodError(t, parseErr(numaPod(specSNN, guaranteed("app", "memory", "1Gi"))),
			"containers", "no CPUs and no GPUs")
		requirePodError(t, parseErr(numaPod(specSNN)), "containers", "no CPUs and no GPUs")
	})
	t.Run("nothing asked beside ResourceClaims", func(t *testing.T) {
		p := numaPod(specSNN, guaranteed("app", "memory", "1Gi"))
		p.ResourceClaims = 1
		r, err := kube.ParsePod(p, kube.Config{})
		require.NoError(t, err)
		require.True(t, r.NUMA)
		require.Zero(t, r.CPUs)
		require.Zero(t, r.GPUs)
	})
	t.Run("without a NUMA spec anything goes", func(t *testing.T) {
		c := kube.Container{Name: "app", Requests: res("cpu", "250m", "memory", "512Mi"), Limits: res("cpu", "2")}
		r, err := kube.ParsePod(plainPod(c), kube.Config{})
		require.NoError(t, err)
		require.False(t, r.NUMA)
		require.Equal(t, int64(250), r.MilliCPU)
		require.Zero(t, r.CPUs)
		require.Equal(t, int64(512), r.MemoryMiB)
	})
	t.Run("a bad quantity fails without a NUMA spec too", func(t *testing.T) {
		requirePodError(t, parseErr(plainPod(guaranteed("app", "memory", "lots"))),
			`container "app" memory request`, "lots")
	})
}

func TestParsePodGPUs(t *testing.T) {
	t.Run("aliyun GPUs", func(t *testing.T) {
		r, err := kube.ParsePod(numaPod(specSNN, guaranteed("app", "cpu", "24", kube.ResourceAliyunGPU, "4")), kube.Config{})
		require.NoError(t, err)
		require.Equal(t, 24, r.CPUs)
		require.Equal(t, int64(24000), r.MilliCPU)
		require.Equal(t, 4, r.GPUs)
	})
	t.Run("nvidia refused with a NUMA spec", func(t *testing.T) {
		p := numaPod(specSNN, guaranteed("app", "cpu", "24", kube.ResourceNvidiaGPU, "4"))
		requirePodError(t, parseErr(p), kube.ResourceNvidiaGPU, "use "+kube.ResourceAliyunGPU+" instead, or set the option acceptNvidiaGPU: true")
	})
	t.Run("nvidia accepted when configured", func(t *testing.T) {
		p := numaPod(specSNN, guaranteed("app", "cpu", "24", kube.ResourceNvidiaGPU, "4"),
			guaranteed("side", kube.ResourceAliyunGPU, "1"))
		r, err := kube.ParsePod(p, kube.Config{AcceptNvidiaGPU: true})
		require.NoError(t, err)
		require.Equal(t, 5, r.GPUs)
	})
	t.Run("nvidia without a NUMA spec is not numaplace's", func(t *testing.T) {
		r, err := kube.ParsePod(plainPod(guaranteed("app", "cpu", "2", kube.ResourceNvidiaGPU, "1")), kube.Config{})
		require.NoError(t, err)
		require.Zero(t, r.GPUs)
	})
	t.Run("fractional GPUs", func(t *testing.T) {
		for _, v := range []string{"0.5", "500m"} {
			requirePodError(t, parseErr(numaPod(specSNN, guaranteed("app", "cpu", "4", kube.ResourceAliyunGPU, v))),
				kube.ResourceAliyunGPU, "GPUs are whole devices", v)
			requirePodError(t, parseErr(plainPod(guaranteed("app", kube.ResourceAliyunGPU, v))),
				kube.ResourceAliyunGPU, "whole")
		}
	})
}

func TestParsePodEffectiveRequest(t *testing.T) {
	ic := func(name string, sidecar bool, kv ...string) kube.InitContainer {
		return kube.InitContainer{Container: guaranteed(name, kv...), RestartPolicyAlways: sidecar}
	}
	tests := []struct {
		name      string
		init      []kube.InitContainer
		app       []kube.Container
		cpus, gpu int
		memMiB    int64
	}{
		{"app containers add up", nil,
			[]kube.Container{guaranteed("a", "cpu", "4", "memory", "1Gi"), guaranteed("b", "cpu", "2", "memory", "512Mi")},
			6, 0, 1536},
		{"a large init container wins", []kube.InitContainer{ic("i", false, "cpu", "10", kube.ResourceAliyunGPU, "2")},
			[]kube.Container{guaranteed("a", "cpu", "4", kube.ResourceAliyunGPU, "1")}, 10, 2, 0},
		{"init containers take the largest, not the sum",
			[]kube.InitContainer{ic("i1", false, "cpu", "3"), ic("i2", false, "cpu", "5")},
			[]kube.Container{guaranteed("a", "cpu", "4")}, 5, 0, 0},
		{"sidecars add to the app sum",
			[]kube.InitContainer{ic("proxy", true, "cpu", "2")},
			[]kube.Container{guaranteed("a", "cpu", "4")}, 6, 0, 0},
		{"an init container after a sidecar runs beside it",
			[]kube.InitContainer{ic("proxy", true, "cpu", "2"), ic("warm", false, "cpu", "7")},
			[]kube.Container{guaranteed("a", "cpu", "4")}, 9, 0, 0},
		{"an init container before a sidecar does not",
			[]kube.InitContainer{ic("warm", false, "cpu", "7"), ic("proxy", true, "cpu", "2")},
			[]kube.Container{guaranteed("a", "cpu", "4")}, 7, 0, 0},
		{"per resource maximum",
			[]kube.InitContainer{ic("i", false, "cpu", "1", kube.ResourceAliyunGPU, "8")},
			[]kube.Container{guaranteed("a", "cpu", "16", kube.ResourceAliyunGPU, "1")}, 16, 8, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := numaPod(specSNN, tt.app...)
			p.InitContainers = tt.init
			r, err := kube.ParsePod(p, kube.Config{})
			require.NoError(t, err)
			require.Equal(t, tt.cpus, r.CPUs)
			require.Equal(t, int64(tt.cpus)*1000, r.MilliCPU)
			require.Equal(t, tt.gpu, r.GPUs)
			require.Equal(t, tt.memMiB, r.MemoryMiB)

			// Without the spec the same amounts are read.
			q := plainPod(tt.app...)
			q.InitContainers = tt.init
			r2, err := kube.ParsePod(q, kube.Config{})
			require.NoError(t, err)
			require.Equal(t, r.MilliCPU, r2.MilliCPU)
			require.Equal(t, tt.gpu, r2.GPUs)
		})
	}
	t.Run("init containers follow the CPU rules", func(t *testing.T) {
		p := numaPod(specSNN, guaranteed("a", "cpu", "4"))
		p.InitContainers = []kube.InitContainer{{Container: kube.Container{Name: "i", Requests: res("cpu", "1")}}}
		requirePodError(t, parseErr(p), `container "i" cpu limit`)
	})
}

func TestParsePodWithoutSpecOrPod(t *testing.T) {
	r, err := kube.ParsePod(&kube.Pod{Name: "empty"}, kube.Config{})
	require.NoError(t, err)
	require.Equal(t, kube.PodRequest{}, r)

	_, err = kube.ParsePod(nil, kube.Config{})
	requirePodError(t, err, "pod", "nil")
}

func TestPodErrorMessage(t *testing.T) {
	err := parseErr(numaPod(specSNN, guaranteed("app", "cpu", "1500m")))
	require.Equal(t, `invalid pod ns/p: container "app" cpu request: 1500m is not a whole number of cores; a pod with a NUMA topology spec gets whole CPUs`,
		err.Error())
}

func TestOptedIn(t *testing.T) {
	require.True(t, kube.OptedIn(map[string]string{kube.DefaultOptInLabel: kube.DefaultOptInValue}, "", ""))
	require.False(t, kube.OptedIn(map[string]string{kube.DefaultOptInLabel: "other"}, "", ""))
	require.False(t, kube.OptedIn(nil, "", ""))
	require.True(t, kube.OptedIn(map[string]string{"x": "y"}, "x", "y"))
	require.False(t, kube.OptedIn(map[string]string{"x": "z"}, "x", "y"))
	require.True(t, kube.OptedIn(map[string]string{"x": ""}, "x", ""))
}

func TestPodKey(t *testing.T) {
	require.Equal(t, "ns/p", (&kube.Pod{Namespace: "ns", Name: "p"}).Key())
}
