package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGuaranteed(t *testing.T) {
	res := func(cpu, mem string) map[string]string {
		return map[string]string{ResourceCPU: cpu, ResourceMemory: mem}
	}
	for _, c := range []struct {
		name string
		pod  Pod
		want bool
	}{
		{"limits only", Pod{Containers: []Container{{Name: "a", Limits: res("2", "1Gi")}}}, true},
		{"equal requests", Pod{Containers: []Container{{Name: "a", Requests: res("2000m", "1024Mi"), Limits: res("2", "1Gi")}}}, true},
		{"cpu request below limit", Pod{Containers: []Container{{Name: "a", Requests: res("1", "1Gi"), Limits: res("2", "1Gi")}}}, false},
		{"no memory limit", Pod{Containers: []Container{{Name: "a", Limits: map[string]string{ResourceCPU: "2"}}}}, false},
		{"an init container without limits", Pod{Containers: []Container{{Name: "a", Limits: res("2", "1Gi")}},
			InitContainers: []InitContainer{{Container: Container{Name: "i", Requests: res("1", "1Gi")}}}}, false},
		{"no containers", Pod{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.pod
			p.Namespace, p.Name = "ns", "p"
			req, err := ParsePod(&p, Config{})
			require.NoError(t, err)
			require.Equal(t, c.want, req.Guaranteed)
		})
	}
	// Without a NUMA spec, nvidia.com/gpu is counted apart.
	p := Pod{Namespace: "ns", Name: "g", Containers: []Container{{Name: "a", Limits: map[string]string{ResourceNvidiaGPU: "2"}}}}
	req, err := ParsePod(&p, Config{})
	require.NoError(t, err)
	require.Equal(t, 0, req.GPUs)
	require.Equal(t, 2, req.NvidiaGPUs)
}
