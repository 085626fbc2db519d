// Package benchmarks puts numaplace side by side with the kubelet's own
// code (k8s.io/kubernetes v1.37.2, imported as a library): it proves that
// numaplace's kubelet-compatible merge gives the kubelet's answers. It is
// a module of its own, so that the core module never depends on
// Kubernetes; everything is in its tests:
//
//   - TestMergeDifferential: adapters/kubelet's Merger against the
//     Topology Manager's best-effort, restricted and single-numa-node
//     policies (each with and without prefer-closest-numa-nodes) and none,
//     on 100,000 seeded random inputs of 2-8 NUMA nodes (-diff.n), and
//     TestMergeDifferentialLarge on 10,000 of 9-64 nodes (-diff.large).
//   - TestKubeletTableCases: every case of
//     adapters/kubelet/testdata/merge_kubelet_cases.json through the
//     kubelet's policies.
//   - TestKubeletMapOrder: whether the kubelet's merge depends on Go's map
//     iteration order (it does not; the test says why).
//   - TestProviderHints: adapters/kubelet's model of the device, CPU and
//     memory managers' hints against the kubelet's real managers, and the
//     admissions that follow (one known difference, documented there).
package benchmarks
