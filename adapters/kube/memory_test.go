package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// A NUMA pod's allocator request carries its memory request (the effective
// one: a limit stands for a missing request, init containers bound it);
// RequestWithoutMemory leaves it out.
func TestPodRequestMemory(t *testing.T) {
	p := numaPod(specSNN,
		kube.Container{Name: "a", Requests: res("cpu", "4", "memory", "2Gi"), Limits: res("cpu", "4", "memory", "4Gi")},
		kube.Container{Name: "b", Requests: res("cpu", "2"), Limits: res("cpu", "2", "memory", "1Gi")})
	p.InitContainers = []kube.InitContainer{{Container: guaranteed("init", "cpu", "1", "memory", "8Gi")}}
	r, err := kube.ParsePod(p, kube.Config{})
	require.NoError(t, err)
	require.Equal(t, int64(8<<10), r.MemoryMiB, "the init container's 8 GiB bound the app containers' 3")
	require.Equal(t, allocator.Request{ID: "ns/p", CPUs: 6, MemoryMiB: 8 << 10, Policy: policy.SingleNUMANode}, r.Request("ns/p"))
	require.Equal(t, allocator.Request{ID: "ns/p", CPUs: 6, Policy: policy.SingleNUMANode}, r.RequestWithoutMemory("ns/p"))

	none, err := kube.ParsePod(numaPod(specSNN, guaranteed("a", "cpu", "2")), kube.Config{})
	require.NoError(t, err)
	require.Zero(t, none.Request("x").MemoryMiB)
}

func TestMemoryAligned(t *testing.T) {
	for _, tt := range []struct {
		labels map[string]string
		def    bool
		want   bool
	}{
		{nil, true, true},
		{nil, false, false},
		{map[string]string{kube.LabelMemoryAlignment: "false"}, true, false},
		{map[string]string{kube.LabelMemoryAlignment: "true"}, false, true},
		{map[string]string{"other": "false"}, true, true},
	} {
		got, err := kube.MemoryAligned(tt.labels, tt.def)
		require.NoError(t, err)
		require.Equal(t, tt.want, got, "%v default %v", tt.labels, tt.def)
	}
	for _, v := range []string{"", "False", "TRUE", "off", "0", " true"} {
		_, err := kube.MemoryAligned(map[string]string{kube.LabelMemoryAlignment: v}, true)
		require.Error(t, err, v)
		require.Contains(t, err.Error(), kube.LabelMemoryAlignment+"=")
		require.Contains(t, err.Error(), `want "true"`)
	}

	described, err := topology.NewBuilder("m").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3)}).
		AddNode(topology.Node{ID: 1, Socket: 0, MemoryMiB: 1024}).Build()
	require.NoError(t, err)
	require.True(t, kube.MachineAlignsMemory(described), "one node with memory is enough")
	unknown, err := topology.NewBuilder("m").AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3)}).Build()
	require.NoError(t, err)
	require.False(t, kube.MachineAlignsMemory(unknown))
}
