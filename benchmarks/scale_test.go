package benchmarks

import (
	"fmt"
	"testing"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	"github.com/stretchr/testify/require"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"

	numaplacetm "github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/adapters/topologymanager/topologymanagertest"
	"github.com/numaplace/numaplace/numa"
)

// cadvisorNodes returns n NUMA nodes with IDs 0..n-1 as cAdvisor reports
// them (no CPUs: the Topology Manager only counts the nodes).
func cadvisorNodes(n int) []cadvisorapi.Node {
	nodes := make([]cadvisorapi.Node, n)
	for i := range nodes {
		nodes[i].Id = i
		nodes[i].Distances = make([]uint64, n)
		for j := range nodes[i].Distances {
			nodes[i].Distances[j] = 20
		}
		nodes[i].Distances[i] = 10
	}
	return nodes
}

// TestKubeletRefuses64Nodes pins what the kubelet does with a machine of
// more than 8 NUMA nodes, and that numaplace merges there.
//
// The kubelet's Topology Manager constructor (topologymanager.NewManager,
// which the kubelet calls at start) refuses it with every policy but none:
// "unsupported on machines with more than 8 NUMA Nodes" (the kubelet then
// fails to start). It does not cap: the policy option
// max-allowable-numa-nodes raises the limit (with a warning that the value
// is above the recommended one), and then the constructor accepts 64 nodes,
// but the hint providers still enumerate every set of nodes (2^64 - 1 for
// 64 nodes). Node IDs above 63 cannot be held at all: the kubelet's bitmask
// refuses them.
//
// numaplace's Merger takes 64 nodes and merges docs/design.md's benchmark
// input on them (BenchmarkMerge/numaplace/numa64/...); its answer is the
// kubelet's policy code's answer, run here by building the policy object
// directly, which the kubelet itself never does on such a machine.
func TestKubeletRefuses64Nodes(t *testing.T) {
	for _, p := range []string{topologymanager.PolicyBestEffort, topologymanager.PolicyRestricted, topologymanager.PolicySingleNumaNode} {
		_, err := topologymanager.NewManager(quiet, cadvisorNodes(8), p, topologymanager.ContainerTopologyScope, nil)
		require.NoError(t, err, "%s accepts 8 nodes", p)
		for _, n := range []int{9, 64} {
			_, err := topologymanager.NewManager(quiet, cadvisorNodes(n), p, topologymanager.ContainerTopologyScope, nil)
			require.ErrorContains(t, err, "unsupported on machines with more than 8 NUMA Nodes", "%s, %d nodes", p, n)
		}
		_, err = topologymanager.NewManager(quiet, cadvisorNodes(64), p, topologymanager.ContainerTopologyScope,
			map[string]string{topologymanager.MaxAllowableNUMANodes: "64"})
		require.NoError(t, err, "%s with max-allowable-numa-nodes=64", p)
	}
	_, err := topologymanager.NewManager(quiet, cadvisorNodes(64), topologymanager.PolicyNone, topologymanager.ContainerTopologyScope, nil)
	require.NoError(t, err, "none does not look at the machine")
	_, err = bitmask.NewBitMask(64)
	require.Error(t, err, "the kubelet's bitmask holds IDs 0-63")

	ids := nodeIDs(64)
	for _, providers := range []int{2, 4} {
		hints := topologymanagertest.BenchmarkHints(benchSeed, 64, providers, benchMaxHints)
		for _, policy := range []numaplacetm.Policy{numaplacetm.PolicyBestEffort, numaplacetm.PolicyRestricted, numaplacetm.PolicySingleNUMANode} {
			t.Run(fmt.Sprintf("%s/providers%d", policy, providers), func(t *testing.T) {
				h, admit, err := numaplacetm.Merge(policy, ids, numa.Distances{}, hints, numaplacetm.PolicyOptions{})
				require.NoError(t, err)
				pol := mustKubeletPolicy(t, policy, kubeletNUMAInfo(ids, nil), false)
				want := kubeletRound(t, pol, toKubeletHints(hints))
				require.Truef(t, want.equal(diffOutcome{h, admit}), "numaplace %v, kubelet's policy code %v", diffOutcome{h, admit}, want)
			})
		}
	}
}
