// Package sim is the cluster simulation of numaplan simulate: a seeded,
// deterministic, event-driven replay of one GPU workload trace through
// three setups, to count what NUMA-blind scheduling costs and what
// numaplace removes.
//
// Cluster: N nodes, node i a dgx-h100 (2 NUMA nodes of 112 CPUs and 4
// GPUs) when i is even and a dgx-a100 (8 NUMA nodes of 32 CPUs, GPUs in
// pairs on 4 of them) when odd, named node-00000, node-00001, ...; every
// node carries numaplace's opt-in label.
//
// Trace (NewTrace, math/rand/v2 PCG seeded by Config.Seed): pods of 1, 2, 4
// and 8 GPUs (40, 25, 25 and 10%) with 6 to 24 whole CPUs per GPU
// (uniform); 15% carry no NUMA spec; the others ask for SingleNUMANode
// (65%), Restricted (20%) or BestEffort (15%), except 8-GPU pods, which no
// NUMA node of either machine holds: Restricted (70%) or BestEffort.
// Arrivals are a Poisson process whose rate offers Config.Load times the
// cluster's GPUs (GPU-hours per hour); run times are lognormal (sigma 1)
// with mean Config.MeanDuration and start when a pod is placed.
//
// Setups:
//
//   - a: a NUMA-blind scheduler and the kubelet's single-numa-node policy.
//     The scheduler is kube-scheduler's NodeResourcesFit: a node fits when
//     its free CPUs and free GPUs cover the pod; among the feasible nodes
//     it takes the highest MostAllocated score (integer percent of CPUs
//     and of GPUs in use after the placement, averaged; ties to the lowest
//     node index), searching like kube-scheduler with
//     percentageOfNodesToScore (Config.PercentageOfNodesToScore, adaptive
//     by default: at least 100 nodes, all of them below 100 nodes). The
//     node's kubelet decides with adapters/topologymanager.Predict (the
//     kubelet-compatible CPU and device manager hints and Topology Manager
//     merge, proven identical to the kubelet's by the differential test)
//     on the node's actual state. A refused pod is an AdmissionError.
//     Kubelet emulation rule for an admitted pod: its GPUs are the free
//     GPUs of the merged hint's NUMA nodes, ascending ID, then (only
//     best-effort can need it) free GPUs elsewhere; its CPUs are the free
//     CPUs of the hint's nodes, whole free cores first (nodes and cores
//     ascending) then single threads, then CPUs elsewhere the same way; a
//     hint without affinity means every node. The choice is claimed in
//     the node's allocator.State, which is the state the next Predict
//     reads. Every pod gets exclusive CPUs (Guaranteed pods, static CPU
//     manager); the pods' NUMA specs mean nothing to this setup.
//   - b: the same scheduler and the kubelet's best-effort policy: every
//     pod whose totals fit is admitted, aligned to the merged hint as far
//     as it goes.
//   - c: numaplace: adapters/scheduler's Cache.ScheduleOne (with the same
//     percentage of nodes to score), the decision annotation from PreBind
//     written on the pod and the pod bound (Cache.AddPod), then the node's
//     adapters/kubelet.Node (in memory) admits it by the decision. Pods
//     with a NUMA spec get their policy; pods without one run on the
//     node's shared CPU pool with GPUs placed under policy None. A refusal
//     at admission would be an AdmissionError (there are none).
//
// Queue rules, the same for every setup:
//
//   - An arriving pod gets one scheduling cycle at once. If no node is
//     feasible, or its node refuses it at admission, it waits.
//   - A departure from node X releases the pod's resources and then runs
//     scheduling cycles for waiting pods: the candidates are the waiting
//     pods whose request fits X's free totals and the setup's own filter
//     on X (the queueing hint: only X gained resources); the oldest
//     candidate goes first; each cycle is a full cycle over the cluster
//     (which may choose another node); at most
//     Config.RetriesPerDeparture cycles per departure; a pod whose cycle
//     fails (refused at admission) is not tried again in that departure,
//     nor is another pod of the same shape (GPUs, CPUs, spec and policy:
//     every filter treats them alike).
//   - A pod placed from the queue starts running then. A pod still waiting
//     Config.Patience after its arrival gives up and counts as
//     unschedulable. A refused pod is therefore retried at departures, as
//     a Deployment recreates a pod that failed admission, until it is
//     placed or gives up.
//   - Shortcut, exact: a shape for which a cycle found no feasible node is
//     marked infeasible, and arrivals of that shape wait without a cycle
//     until a departure from a node that the shape fits clears the mark
//     (placements only take resources away, so no other event can make a
//     node feasible). Such arrivals are not timed.
//   - The run ends at the last arrival: every pod is then placed,
//     unschedulable or still queued.
//
// Metrics per setup (Result): pods placed; AdmissionErrors (refusals at
// admission, and the pods refused at least once); cross-NUMA placements:
// placed pods with a NUMA spec whose span is wider than the request's
// width_cap on the machine (docs/design.md: the fewest NUMA nodes whose
// capacity covers the request, inside one NUMA set when one can hold it),
// or whose CPUs sit on NUMA nodes without any of its GPUs although the
// NUMA nodes of its GPUs have the CPUs for the whole request; unschedulable
// and still-queued pods; the GPU allocation (GPUs held by running pods
// over all GPUs) sampled at Config.Samples+1 evenly spaced times, with its
// mean over the second half of the run and its peak; the mean wait; and
// the wall time of every scheduling cycle (p50 and p99; a report, never a
// test assertion).
//
// Everything except the latencies and wall times is the same for the same
// Config. With Config.Verify, every placement and release is followed by a
// check of the node: no CPU or GPU held twice, every held resource
// exists, the scheduler's and the node agent's records agree, and under
// single-numa-node every pod sits on one NUMA node.
//
// The common call:
//
//	rep, err := sim.Run(sim.Config{Nodes: 200, Pods: 5000, Seed: 1})
//	fmt.Print(rep.Table())
//	err = rep.WriteFiles(dir) // summary.md, series.csv and the plots
package sim
