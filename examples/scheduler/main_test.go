package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var b strings.Builder
	require.NoError(t, run(&b))
	out := b.String()
	for _, line := range []string{
		"  gpu-1: 2+2 GPUs free on NUMA nodes 0,1",
		"  gpu-3: 0+4 GPUs free on NUMA nodes 0,1",
		// Without the spec: by node totals onto split nodes, refused by the kubelet.
		"  textgen-0 -> gpu-1, GPUs [2 3 6 7] on NUMA node(s) [0 1]",
		"    kubelet alone (single-numa-node) on gpu-1: refused with TopologyAffinityError (best merged hint {any not preferred}): the pod would stay in AdmissionError",
		"  textgen-2 -> gpu-3, GPUs [4 5 6 7] on NUMA node(s) [1]",
		"  => 2 of 3 pods would be refused by a kubelet running single-numa-node",
		// With it: whole NUMA nodes, the decision written, the split nodes refused.
		"  textgen-numa-0 -> gpu-3, GPUs [4 5 6 7] on NUMA node(s) [1]",
		`    numaplace.io/allocation: {"policy":"SingleNUMANode","exclusive":"Required","cpuset":"56-67,168-179","numaNodes":[1],"gpus":[{"id":4},{"id":5},{"id":6},{"id":7}],"memoryMiB":{"1":0}}`,
		"    kubelet alone (single-numa-node) on gpu-3: admitted on NUMA node 1 (merged hint {1 preferred})",
		"    refused gpu-1: no NUMA node has 4 GPUs free now (at most 2 GPUs free there)",
		"  textgen-numa-1 -> gpu-4, GPUs [0 1 2 3] on NUMA node(s) [0]",
		"  textgen-numa-2 -> gpu-4, GPUs [4 5 6 7] on NUMA node(s) [1]",
		"  => 0 of 3 pods would be refused by a kubelet running single-numa-node",
	} {
		require.Contains(t, out, line+"\n")
	}
}
