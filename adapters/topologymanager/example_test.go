package topologymanager_test

import (
	"fmt"

	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// The GPU provider can only use node 1; the CPUs fit on either node: the
// policies agree on node 1.
func ExampleMerge() {
	cpu := map[string][]topologymanager.TopologyHint{"cpu": {
		topologymanager.Hint(topologymanager.MustIDMask(0), true), topologymanager.Hint(topologymanager.MustIDMask(1), true), topologymanager.Hint(topologymanager.MustIDMask(0, 1), false)}}
	gpu := map[string][]topologymanager.TopologyHint{"nvidia.com/gpu": {
		topologymanager.Hint(topologymanager.MustIDMask(1), true), topologymanager.Hint(topologymanager.MustIDMask(0, 1), false)}}
	h, admit, err := topologymanager.Merge(topologymanager.PolicySingleNUMANode, []numa.NodeID{0, 1}, numa.Distances{},
		[]map[string][]topologymanager.TopologyHint{cpu, gpu}, topologymanager.PolicyOptions{})
	fmt.Println(h, admit, err)
	// Output: {1 preferred} true <nil>
}

// A 4-GPU, 24-CPU pod on an empty DGX A100 (two GPUs per GPU node, 32 CPUs
// per node): the CPUs' narrowest width is one node, the GPUs' two, so no
// merged hint is preferred. best-effort admits it with the numerically
// smallest two-node intersection of GPU nodes, {1,3}; restricted and
// single-numa-node refuse it.
func ExamplePredict() {
	m, _ := topology.Preset("dgx-a100")
	pod := &allocator.Request{CPUs: 24, GPUs: 4}
	for _, p := range []topologymanager.Policy{topologymanager.PolicyBestEffort, topologymanager.PolicyRestricted, topologymanager.PolicySingleNUMANode} {
		h, admit, err := topologymanager.Predict(p, topologymanager.PredictOptions{}, m, nil, pod)
		fmt.Println(p, h, admit, err)
	}
	// Output:
	// best-effort {1,3 not preferred} true <nil>
	// restricted {1,3 not preferred} false <nil>
	// single-numa-node {any not preferred} false <nil>
}

// What the kubelet's managers take on an empty DGX A100 under best-effort
// once the merged hint is nodes 1 and 3: the device manager the four GPUs
// of those nodes (2 and 3 on node 1, 0 and 1 on node 3), the static CPU
// manager 12 whole cores of the hint's first node in the machine's order.
func ExampleKubeletAllocation() {
	m, _ := topology.Preset("dgx-a100")
	st := allocator.MustNew(m, allocator.Options{})
	pod := &allocator.Request{CPUs: 24, GPUs: 4}
	hint, admit, _ := topologymanager.Predict(topologymanager.PolicyBestEffort, topologymanager.PredictOptions{}, m, st, pod)
	a, err := topologymanager.KubeletAllocation(m, st, "pod", pod, hint)
	fmt.Println(hint, admit, err)
	fmt.Println(a.CPUs, a.GPUs)
	// Output:
	// {1,3 not preferred} true <nil>
	// 16-27,144-155 [0 1 2 3]
}
