package topologymanager

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
)

// TestPredictGraceLimit checks that Predict refuses Grace machines as the
// kubelet v1.37.2 does, counting every NUMA node (CPU-less ones included),
// and says why.
func TestPredictGraceLimit(t *testing.T) {
	r := &allocator.Request{CPUs: 8, GPUs: 1}
	gh200, tray := hintPreset(t, "gh200"), hintPreset(t, "gb200-tray")

	_, _, err := Predict(PolicySingleNUMANode, PredictOptions{}, gh200, nil, r)
	require.ErrorIs(t, err, ErrHintConfig)
	require.EqualError(t, err, "invalid kubelet topology manager configuration: the kubelet's Topology Manager does not start: "+
		"unsupported on machines with more than 8 NUMA Nodes (9 NUMA nodes (1 with CPUs, 1 of GPU memory, 7 placeholders); "+
		"the kubelet counts every NUMA node, CPU-less ones included; raise max-allowable-numa-nodes to at least 9)")

	// Raised to 9, the kubelet starts and admits the pod on node 0.
	h, ok, err := Predict(PolicySingleNUMANode, PredictOptions{PolicyOptions: PolicyOptions{MaxAllowableNUMANodes: 9}}, gh200, nil, r)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, Hint(MustIDMask(0), true), h)

	// The none policy has no limit.
	_, ok, err = Predict(PolicyNone, PredictOptions{}, gh200, nil, r)
	require.NoError(t, err)
	require.True(t, ok)

	_, _, err = Predict(PolicyRestricted, PredictOptions{}, tray, nil, r)
	require.ErrorContains(t, err, "unsupported on machines with more than 8 NUMA Nodes (34 NUMA nodes (2 with CPUs, 4 of GPU memory, 28 placeholders);")

	// Raised to 34, the kubelet starts and then never finishes listing the
	// subsets of 34 nodes.
	_, _, err = Predict(PolicyRestricted, PredictOptions{PolicyOptions: PolicyOptions{MaxAllowableNUMANodes: 34}}, tray, nil, r)
	require.ErrorIs(t, err, ErrHintConfig)
	require.ErrorContains(t, err, "34 NUMA nodes (2 with CPUs, 4 of GPU memory, 28 placeholders): the kubelet's hint providers "+
		"list every subset of them (2^34 - 1), which does not finish in practice (kubernetes/kubernetes#135541)")

	// The kubelet refuses a limit below 8.
	_, _, err = Predict(PolicyBestEffort, PredictOptions{PolicyOptions: PolicyOptions{MaxAllowableNUMANodes: 4}}, hintPreset(t, "dgx-h100"), nil, r)
	require.ErrorIs(t, err, ErrHintConfig)
	require.ErrorContains(t, err, `the minimum value of "max-allowable-numa-nodes" should not be less than 8`)
}
