// Package kubelet is numaplace's node-side reference adapter: what a node
// agent beside the kubelet (or inside it, or a containerd NRI plugin) needs
// so that a pod the scheduler placed is never refused at admission. The
// emulation of the kubelet's own Topology Manager (for nodes that still run
// it) is the package adapters/topologymanager.
//
// The node agent is a [Node], opened on one machine with a checkpoint file.
// [Node.Admit] admits a pod: with the scheduler's numaplace.io/allocation
// decision it claims exactly those CPUs, GPUs, devices and memory per NUMA
// node, and refuses with a *[TopologyAffinityError] (the kubelet's wording,
// unwrapping to [ErrTopologyAffinity]) that names every conflict, such as
// which CPUs are held by which pod; without a decision it places the pod by
// its own policy (aligned with the GPUs of the pod's ResourceClaims when
// [Node.HoldClaim] holds claims with GPUs for it: those GPUs serve its GPU
// request); a pod without a NUMA spec runs on the shared pool.
// [Node.Remove] releases. [Node.SetKubeletGPUs] records the GPUs the
// kubelet gave a container of a shared-pool pod (one outside numaplace's
// decisions), refusing one a decision holds and making the node refuse
// decisions that name them, so that no GPU is in two containers. Every change is written to the checkpoint before
// it returns (a temporary file, fsync, rename, fsync of the directory;
// versioned and checksummed, see [CheckpointVersion]), and [Open] restores
// it at start, refusing a corrupt or inconsistent file with a
// *[CheckpointError] rather than dropping it, after removing the temporary
// files that writes interrupted by a crash left beside it. [Apply] writes
// an admission into a container's cgroup v2 cpuset.cpus and cpuset.mems
// (the NUMA nodes of the pod's reserved memory, or its span when it
// reserves none: Admission.MemoryNodes) and returns its
// NVIDIA_VISIBLE_DEVICES entry.
// [PreferredAllocator.GetPreferredAllocation] answers the device plugin API's
// question (which GPUs of those available) with the one device chooser
// the allocator also uses (allocator/devchoice; its order is stated on
// devchoice.Rank). [Node.Report]
// publishes the node's NodeResourceTopology for the scheduler.
//
// The common calls:
//
//	node, err := kubelet.Open(machine, "/var/lib/numaplace/checkpoint.json", kubelet.NodeOptions{})
//	if err != nil { ... }                 // a checkpoint that cannot be used stops the start
//	adm, err := node.Admit(pod)           // *TopologyAffinityError when the node cannot honour it
//	env, err := kubelet.Apply("/sys/fs/cgroup", containerCgroup, &adm)
//	err = node.Remove(pod)
//	ids, err := node.GetPreferredAllocation(available, mustInclude, 4)
package kubelet
