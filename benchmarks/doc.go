// Package benchmarks puts numaplace side by side with the kubelet's own
// code (k8s.io/kubernetes v1.37.2, imported as a library): it proves that
// numaplace's kubelet-compatible merge gives the kubelet's answers, and
// measures how much faster it is. It also puts numaplace's device plugin
// (adapters/kubelet) beside NVIDIA's go-gpuallocator (v0.6.0), the GPU
// chooser of NVIDIA's device plugin. It is a module of its own, so that the
// core module never depends on Kubernetes or NVIDIA's modules; everything
// is in its tests, plus the command cmd/ratios and the script run.sh.
//
// The tests:
//
//   - TestMergeDifferential: adapters/topologymanager's Merger against the
//     Topology Manager's best-effort, restricted and single-numa-node
//     policies (each with and without prefer-closest-numa-nodes) and none,
//     on 100,000 seeded random inputs of 2-8 NUMA nodes (-diff.n), and
//     TestMergeDifferentialLarge on 10,000 of 9-64 nodes (-diff.large).
//   - TestKubeletTableCases: every case of
//     adapters/topologymanager/testdata/merge_kubelet_cases.json through the
//     kubelet's policies.
//   - TestKubeletMapOrder: whether the kubelet's merge depends on Go's map
//     iteration order (it does not; the test says why).
//   - TestProviderHints: adapters/topologymanager's model of the device, CPU and
//     memory managers' hints against the kubelet's real managers, and the
//     admissions that follow.
//   - TestKubeletRefuses64Nodes: what the kubelet does with more than 8
//     NUMA nodes.
//   - TestPeerLinkTypes, TestPeerDevicesDrivePolicy: go-gpuallocator's
//     devices built by hand from a numaplace machine (no NVML) carry the
//     machine's PCIe switches, NUMA nodes, sockets and NVLink counts, and
//     each of them decides its best-effort policy's choice somewhere.
//   - TestPeerAgreement: how often numaplace and go-gpuallocator choose
//     the same GPUs (logged, with the first differences), and that where
//     they differ numaplace's answer ranks no worse on the criteria its
//     chooser finds exactly.
//
// The benchmarks, each side by side on the same input:
// BenchmarkMerge/{numaplace,kubelet}/numa{2,4,8}/providers{2,4} (and
// numaplace alone at numa64), BenchmarkAdmit/{numaplace,kubelet}/dgx-a100
// and BenchmarkAdmitMerge/{numaplace,kubelet}/dgx-a100{,-every-node};
// BenchmarkGetPreferredAllocation/{numaplace,gpuallocator}/CASE on the
// cases of adapters/kubelet's BenchmarkGetPreferredAllocation (dgx-a100 and
// a 16-GPU machine, 1/2/4/8 GPUs, fragmented, worst). run.sh runs them with
// the core module's hot-path benchmarks and prints the ratios:
//
//	benchmarks/run.sh
//
// See README.md for the results and how to read them.
package benchmarks
