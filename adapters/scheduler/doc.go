// Package scheduler is the cluster side of numaplace: a concurrency-safe
// cache of nodes (each with its machine and an allocator.State) and of the
// pods placed on them, with the steps of a scheduling cycle in the shape of
// the Kubernetes scheduler framework: [Cache.Filter] with a reason per
// refusal, [Cache.Score] on a 0-100 scale, [Cache.Reserve] /
// [Cache.Unreserve], [Cache.PreBind] returning the annotations to write on
// the pod, and [Cache.ScheduleOne], which runs them over every node in
// parallel and explains a failure the way kube-scheduler does ("0/5000
// nodes are available: 3120 no NUMA node has 4 free GPUs now, 1880 fewer
// than 24 free CPUs now."), saying apart what the machine can never hold
// ("no NUMA node can hold 8 GPUs on this machine") from what is held now.
//
// Pods are kube.Pod values read by kube.ParsePod. A pod with a NUMA spec
// gets exclusive CPUs, whole GPUs and its memory request per NUMA node
// placed by the allocator under its policy, and only on nodes with the
// opt-in label (default ack.node.gpu.schedule=topology). Memory alignment
// is on by default; the node label numaplace.io/memory-alignment ("true" or
// "false", kube.LabelMemoryAlignment) or Config.DisableMemoryAlignment
// turns it off, and a machine that describes no memory cannot align it
// (docs/design.md, "Memory alignment"). A pod without one is accounted against
// the node's shared pool (the allocatable CPUs that no exclusive
// allocation holds) by its CPU request, and gets its aliyun.com/gpu GPUs,
// if any, from the allocator under policy None. An exclusive placement may
// not shrink the shared pool below what the node's pods without a NUMA spec
// request, nor below Config.MinSharedCPUs. These rules, and memory's, are
// one function of a node's totals that every path uses (Filter, Reserve,
// ScheduleOne, Preempt, the what-if and victims dry-runs); a pod's CPU
// request counts against the shared pool unless it holds exclusive CPUs.
//
// Nodes whose kubelet runs its own Topology Manager instead of numaplace's
// node agent (Node.KubeletPolicy) take no pod with a NUMA spec; for every
// other pod that gets exclusive CPUs (Guaranteed, whole CPUs) or GPUs, the
// cache predicts the kubelet's admission with the kubelet-compatible hints
// and merge of adapters/topologymanager, so that no pod is sent where the kubelet
// would refuse it with a TopologyAffinityError.
//
// [Cache.Preempt] is a PostFilter-style dry-run: the set of lower-priority
// pods whose removal makes a pod fit on one node, exactly under the pod's
// policy and the exclusivity and shared-pool rules, chosen in
// kube-scheduler's order (the lowest highest priority, then the fewest
// victims of it, then the fewest victims).
//
// A restarted scheduler rebuilds the exact state: [Cache.AddPod] of a bound
// pod claims what its numaplace.io/allocation annotation names.
//
// Locking: the node map, the pod map and every node have their own lock.
// Filter and Score take one node's read lock, so they run in parallel
// across nodes (and on one node) while Reserve holds one node's write lock
// for the few microseconds it takes to check the shared pool and allocate.
// Nodes in the same state (the same machine but for its name and GPU
// UUIDs, labels' effect, kubelet policy, totals and allocations) form a
// group, and a pod is judged once per group in a scheduling cycle: the
// other nodes of the group take that verdict without their lock. Any
// change of a node takes it out of its group at once.
//
// The common calls:
//
//	c, _ := scheduler.New(scheduler.Config{})
//	_ = c.AddNode(scheduler.Node{Name: "gpu-1", Labels: labels, Machine: m})
//	res, err := c.ScheduleOne(pod)      // reserved on res.Node
//	// write res.Annotations on the pod, bind it, then:
//	_ = c.AddPod(boundPod)              // or c.Unreserve(pod) if binding failed
package scheduler
