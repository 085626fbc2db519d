// Package topologymanagertest supports tests and benchmarks of the
// kubelet Topology Manager emulation (adapters/topologymanager):
// [BenchmarkHints] draws the fixed-seed hint lists of docs/design.md's
// merge comparison, the same for the core module's BenchmarkMerge and the
// benchmarks module's side-by-side runs against the kubelet's code.
//
//	hints := topologymanagertest.BenchmarkHints(1, 8, 4, 24) // 8 NUMA nodes, 4 providers of 24 hints
//	merged, admit := merger.Merge(hints)
package topologymanagertest
