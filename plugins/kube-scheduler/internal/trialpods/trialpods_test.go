package trialpods

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/numaplace/numaplace/adapters/kube"
)

func TestPod(t *testing.T) {
	p := Pod("team", "a", "Restricted", 8, 2)
	require.Equal(t, "team/a", p.Namespace+"/"+p.Name)
	require.Equal(t, SchedulerName, p.Spec.SchedulerName)
	require.Equal(t, `{"numaTopologyPolicy":"Restricted"}`, p.Annotations[kube.AnnotationSpecAlibaba])
	require.Equal(t, "required", p.Annotations[kube.AnnotationCPUSetScheduler])
	req := p.Spec.Containers[0].Resources.Requests
	require.Equal(t, int64(8), req.Cpu().Value())
	require.Equal(t, int64(1<<30), req.Memory().Value())
	gpus := req[kube.ResourceAliyunGPU]
	require.Equal(t, int64(2), gpus.Value())
	require.Equal(t, req, p.Spec.Containers[0].Resources.Limits)

	plain := Pod("default", "b", "", 1, 0)
	require.Empty(t, plain.Annotations)
	_, hasGPU := plain.Spec.Containers[0].Resources.Requests[kube.ResourceAliyunGPU]
	require.False(t, hasGPU)
	require.Equal(t, v1.ResourceList(plain.Spec.Containers[0].Resources.Requests), plain.Spec.Containers[0].Resources.Limits)
}

// TestMix: every shape of the mix comes, each about a sixth of the time,
// within its documented ranges, and a seed gives the same pods again.
func TestMix(t *testing.T) {
	const n = 6000
	rng := rand.New(rand.NewPCG(1, 2))
	count := map[string]int{}
	type shape struct {
		policy     string
		cpus, gpus int
	}
	var first []shape
	for i := range n {
		policy, cpus, gpus := Mix(rng)
		if i < 50 {
			first = append(first, shape{policy, cpus, gpus})
		}
		key := policy
		switch policy {
		case "SingleNUMANode":
			require.True(t, cpus >= 4 && cpus <= 15 && gpus <= 1, "%s %d %d", policy, cpus, gpus)
		case "Restricted":
			require.True(t, cpus == 8 && (gpus == 0 || gpus == 2), "%s %d %d", policy, cpus, gpus)
		case "BestEffort":
			require.True(t, cpus == 4 && gpus == 1, "%s %d %d", policy, cpus, gpus)
		case "None":
			require.True(t, cpus >= 2 && cpus <= 7 && gpus <= 1, "%s %d %d", policy, cpus, gpus)
		case "":
			require.True(t, cpus >= 1 && cpus <= 4 && gpus <= 1, "no spec %d %d", cpus, gpus)
			key = "no spec"
		default:
			t.Fatalf("policy %q", policy)
		}
		count[key]++
	}
	for _, k := range []string{"SingleNUMANode", "Restricted", "BestEffort", "None"} {
		require.InDelta(t, n/6, count[k], n/30, "%s: %d of %d", k, count[k], n)
	}
	require.InDelta(t, n/3, count["no spec"], n/30, "no spec: %d of %d", count["no spec"], n)
	again := rand.New(rand.NewPCG(1, 2))
	for i, s := range first {
		policy, cpus, gpus := Mix(again)
		require.Equal(t, s, shape{policy, cpus, gpus}, "pod %d with the same seed", i)
	}
}
