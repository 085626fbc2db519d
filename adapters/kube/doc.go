// Package kube holds the few Kubernetes shapes the numaplace adapters need,
// as plain Go types (no Kubernetes module is imported): pods with their
// containers' requests and limits as quantity strings, the pod-level NUMA
// annotations and their validation, the decision annotation
// (numaplace.io/allocation) that the scheduler side writes and the node
// side reads (strictly: see ParseDecision), with the CPUs, GPUs, devices
// and memory per NUMA node ID, and the node label that turns memory
// alignment off per node (LabelMemoryAlignment, MemoryAligned).
//
// The common calls:
//
//	req, err := kube.ParsePod(pod, kube.Config{})  // validates every rule of docs/design.md
//	d := kube.NewDecision(machine, allocation)     // what the scheduler writes
//	a, err := d.Allocation(machine, pod.Key())     // what the node side claims
package kube
