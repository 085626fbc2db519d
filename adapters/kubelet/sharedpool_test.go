package kubelet

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// A decision without CPUs (a GPU pod without a NUMA spec placed by the
// scheduler) runs on the shared pool: an exclusive admission may not empty
// the pool while it runs, and it is refused when the pool is empty.
func TestDecisionWithoutCPUsKeepsTheSharedPool(t *testing.T) {
	m, err := topology.NewBuilder("one-gpu").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3)}).
		AddGPU(topology.GPU{ID: 0, NUMANode: 0}).AddGPU(topology.GPU{ID: 1, NUMANode: 0}).Build()
	require.NoError(t, err)
	n, _ := openTemp(t, m)
	gpuOnly := func(name string, gpu int) *kube.Pod {
		return withDecision(sharedPod(name), kube.Decision{Policy: policy.None, Exclusive: policy.Required,
			NUMANodes: []int{0}, GPUs: []kube.DecisionGPU{{ID: gpu}}, MemoryMiB: map[string]int64{"0": 0}})
	}
	adm, err := n.Admit(gpuOnly("g", 0))
	require.NoError(t, err)
	require.Equal(t, FromDecision, adm.Source)
	require.True(t, adm.CPUs.IsEmpty())

	_, err = n.Admit(numaPod("a", 3, 0, "SingleNUMANode"))
	require.NoError(t, err)
	_, err = n.Admit(numaPod("b", 1, 0, "SingleNUMANode"))
	var tae *TopologyAffinityError
	require.ErrorAs(t, err, &tae)
	require.Contains(t, err.Error(), "the shared pool would be left without CPUs while 1 shared-pool pods run")
	require.Equal(t, 1, n.SharedPool().Size())

	require.NoError(t, n.Remove(gpuOnly("g", 0)))
	_, err = n.Admit(numaPod("b", 1, 0, "SingleNUMANode"))
	require.NoError(t, err, "nothing runs on the shared pool: every CPU may be exclusive")
	_, err = n.Admit(gpuOnly("h", 1))
	require.ErrorAs(t, err, &tae)
	require.Contains(t, err.Error(), "the shared pool has no CPUs for a decision without CPUs")
	_, ok := n.Get("default/h")
	require.False(t, ok)
	require.Len(t, n.Admissions(), 2)
}
