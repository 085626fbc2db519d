// Package kubelettest supports tests and benchmarks of the device plugin
// helper (adapters/kubelet): the 16-GPU machines of its
// BenchmarkGetPreferredAllocation, the same for the core module's
// benchmark and the benchmarks module's comparison with NVIDIA's
// go-gpuallocator.
//
//	m := kubelettest.Machine16(t)
//	p := kubelet.NewPreferredAllocator(m)
package kubelettest
