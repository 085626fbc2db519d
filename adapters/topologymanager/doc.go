// Package topologymanager emulates the kubelet's Topology Manager for nodes
// that run it instead of numaplace's node agent: the topology hints the
// kubelet's CPU, device and memory managers give for a pod, the merge of
// its policies, and what its managers then take.
//
// The hints ([TopologyHint], over node-ID masks [IDMask], the kubelet's
// bitmask.BitMask) are those the kubelet's static CPU manager, device
// manager and static memory manager would give ([CPUHints],
// [DeviceHints], [MemoryHints]; [ProviderHints] for a request on a machine
// in an allocator state). [Merge] (or a reusable [Merger]) returns exactly
// what the Topology Manager's none, best-effort, restricted and
// single-numa-node policies return, with and without
// prefer-closest-numa-nodes, without walking the cross product of the
// providers' hints as the kubelet does (the benchmarks module checks it
// against the kubelet's own code). [Predict] combines the two: the merged
// hint a node would reach for a pod and whether it admits it;
// [KubeletAllocation] is what the managers would then hold, as an
// allocation for allocator.State.Claim. The scheduler adapter uses them for
// nodes of Node.KubeletPolicy, and the cluster simulation for its kubelet
// baselines.
//
// The common calls:
//
//	hint, admit, err := topologymanager.Predict(topologymanager.PolicySingleNUMANode,
//		topologymanager.PredictOptions{}, machine, state, &allocator.Request{CPUs: 24, GPUs: 4})
//	if err == nil && admit {
//		a, err := topologymanager.KubeletAllocation(machine, state, "pod", req, hint)
//		...                                // state.Claim(a)
//	}
//	merged, admit, err := topologymanager.Merge(topologymanager.PolicyRestricted, nodeIDs, distances,
//		providersHints, topologymanager.PolicyOptions{})
package topologymanager
