// Package reporter publishes a node's machine and NUMA resources for the
// scheduler: the numaplace.io/topology Node annotation (the machine in
// numaplace's topology JSON) and the node's NodeResourceTopology object
// (topology.node.k8s.io/v1alpha2: one zone per NUMA node with the
// capacity, allocatable and available cpu, memory and GPUs, the distances
// as costs, the Topology Manager policy and scope, and the fingerprint of
// the pods it accounts for).
//
// A [Reporter] writes through a [Writer] (cluster.Writer on a real API
// server) from its own goroutine: [Reporter.Notify] marks the state
// changed and returns at once, so admissions never wait on the API
// server; writes are at most one per Interval (1 s by default) and carry
// the state as it is when they start, failures are retried with
// exponential backoff, and everything is written again every Resync.
//
// The common calls:
//
//	r, err := reporter.New(node, writer, reporter.Options{NodeName: "gpu-1"})
//	go r.Run(ctx)
//	r.Notify() // after each admission, removal or health change
package reporter
