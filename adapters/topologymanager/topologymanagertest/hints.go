package topologymanagertest

import (
	"fmt"
	"math/bits"

	"github.com/numaplace/numaplace/adapters/topologymanager"
)

// BenchmarkHints returns the hint maps of the merge benchmarks
// (BenchmarkMerge/{numaplace,kubelet}/numaN/providersP), the same for every
// caller and Go version: providers maps, map i holding one resource named
// "resource<i>" with maxHints hints. Each hint's affinity is a non-empty
// random set of the NUMA node IDs 0..numaNodes-1 (repeats allowed), drawn
// with SplitMix64 seeded by seed; a hint is preferred when its affinity has
// as few nodes as the narrowest affinity of its list, as the kubelet's
// providers mark them. numaNodes must be 1-64 and maxHints at least 1, else
// BenchmarkHints panics.
func BenchmarkHints(seed int64, numaNodes, providers, maxHints int) []map[string][]topologymanager.TopologyHint {
	if numaNodes < 1 || numaNodes > 64 || maxHints < 1 || providers < 0 {
		panic(fmt.Sprintf("topologymanagertest.BenchmarkHints: bad sizes numaNodes=%d providers=%d maxHints=%d", numaNodes, providers, maxHints))
	}
	all := ^uint64(0)
	if numaNodes < 64 {
		all = 1<<uint(numaNodes) - 1
	}
	state := uint64(seed)
	next := func() uint64 { // SplitMix64
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		return z ^ (z >> 31)
	}
	out := make([]map[string][]topologymanager.TopologyHint, providers)
	for p := range out {
		hints := make([]topologymanager.TopologyHint, maxHints)
		least := 64
		for i := range hints {
			var m uint64
			for m == 0 {
				m = next() & all
			}
			hints[i].NUMANodeAffinity = topologymanager.IDMask(m)
			least = min(least, bits.OnesCount64(m))
		}
		for i := range hints {
			hints[i].Preferred = hints[i].NUMANodeAffinity.Count() == least
		}
		out[p] = map[string][]topologymanager.TopologyHint{fmt.Sprintf("resource%d", p): hints}
	}
	return out
}
