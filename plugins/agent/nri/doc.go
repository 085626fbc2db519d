// Package nri is numaplace's node agent as a containerd NRI plugin (Node
// Resource Interface, github.com/containerd/nri): it applies the
// scheduler's numaplace.io/allocation decisions to the containers of a
// node, with the node-side adapter (adapters/kubelet) keeping the
// allocation state and its checkpoint.
//
// A [Plugin] wraps a kubelet.Node and implements the NRI stub's handler
// interfaces:
//
//   - Synchronize (the pods and containers that exist when the plugin
//     connects) reconciles the checkpoint with them: stopped sandboxes
//     the runtime still lists are skipped, running pods the checkpoint does
//     not know are admitted (by their decision, or to the shared pool),
//     checkpointed pods that no longer run are removed, and containers
//     whose cpuset is not what they should have are updated. The
//     sandboxes found there are watched: a pod whose sandbox process is
//     gone is removed (the runtime may never send its StopPodSandbox; see
//     [Options].ProcRoot and [Options].CheckInterval).
//   - RunPodSandbox and CreateContainer admit the pod by its decision
//     (kubelet.Node.Admit, idempotent for the pod's further containers);
//     CreateContainer returns an adjustment that sets cpuset.cpus,
//     cpuset.mems (only nodes with memory, [Options].MemoryNodes) and, for a
//     pod with exclusive resources, NVIDIA_VISIBLE_DEVICES and the device
//     nodes of its GPUs (those of the other GPUs removed, [Options].GPUs).
//     Every container that holds no exclusive CPUs (a pod without a NUMA
//     spec, a decision without CPUs) runs on the shared pool. A decision
//     that conflicts with what the node holds is refused
//     with an error naming the conflict, logged and recorded as an [Event].
//   - StopPodSandbox and RemovePodSandbox remove the pod (a repeated
//     removal is harmless).
//   - UpdatePodSandbox and UpdateContainer (an in-place resize) resize a
//     pod with exclusive resources by its containers' new CPU limits under
//     its policy (kubelet.Node.Resize), or refuse naming why (memory,
//     fractions, CPUs the node cannot give); the new decision goes to
//     [Options].OnResize, which writes it on the pod. A container restarted
//     with other limits (resizePolicy RestartContainer) is resized the
//     same way at CreateContainer.
//   - When the shared pool changes (an exclusive pod arrives or leaves),
//     the cpusets of the containers on the shared pool are updated: in the response of
//     the next CreateContainer or StopContainer, and at once through
//     [Updater] (the stub's unsolicited UpdateContainers), so that shared
//     pods never run on exclusive CPUs. containerd reports success for an
//     update it drops or applies only to the spec (a container whose
//     CreateContainer is in flight, or that is being started), so a
//     container gets no update before PostStartContainer, which sends it
//     its cpuset when the one it was created with is no longer its own.
//   - Every change of the node's state is told to [Options].OnChange (the
//     reporter's Notify), which must not block.
//
// The common calls (see cmd/numaplace-agent for the whole program):
//
//	node, err := kubelet.Open(machine, "/var/lib/numaplace/nri-checkpoint.json", kubelet.NodeOptions{})
//	p, err := nri.New(node, nri.Options{})
//	s, err := stub.New(p, stub.WithPluginName("numaplace"), stub.WithPluginIdx("10"))
//	p.SetUpdater(s)
//	err = s.Run(ctx)
//	p.Close()
package nri
