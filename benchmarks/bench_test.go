package benchmarks

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"

	numaplacetm "github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/adapters/topologymanager/topologymanagertest"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// benchHints is docs/design.md's merge benchmark input: at most 24 hints per
// provider, drawn with seed 1 (the same as the core module's
// adapters/topologymanager BenchmarkMerge).
const (
	benchSeed     = 1
	benchMaxHints = 24
)

// BenchmarkMerge is docs/design.md's side-by-side merge comparison,
// BenchmarkMerge/{numaplace,kubelet}/numa{2,4,8}/providers{2,4}: the
// best-effort policy (the kubelet walks the whole cross product for it, as
// for restricted) on NUMA nodes 0..n-1 with the default distances, merging
// topologymanagertest.BenchmarkHints(1, n, providers, 24) on both sides. The hints are
// converted to the kubelet's types once, outside the timed loop, and each
// side's result is checked against the other's before timing.
//
// numa64 runs numaplace only: the kubelet refuses machines of more than 8
// NUMA nodes (TestKubeletRefuses64Nodes), and its walk would be the same
// 24^p permutations as at 8 nodes anyway; what explodes at 64 nodes is its
// hint providers' 2^64 masks.
//
// The kubelet's side needs about 70 ms per merge at numa2-8/providers4
// (24^4 = 331,776 permutations, each allocating three times), so a run of
// the default -benchtime makes only some tens of iterations; -benchtime 1x
// is enough for a quick look.
func BenchmarkMerge(b *testing.B) {
	for _, n := range []int{2, 4, 8, 64} {
		for _, p := range []int{2, 4} {
			ids := nodeIDs(n)
			hints := topologymanagertest.BenchmarkHints(benchSeed, n, p, benchMaxHints)
			mg, err := numaplacetm.NewMerger(numaplacetm.PolicyBestEffort, ids, numa.Distances{}, numaplacetm.PolicyOptions{})
			if err != nil {
				b.Fatal(err)
			}
			h, admit := mg.Merge(hints)
			want := diffOutcome{h, admit}
			b.Run(fmt.Sprintf("numaplace/numa%d/providers%d", n, p), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					mg.Merge(hints)
				}
			})
			if n > numaplacetm.DefaultMaxAllowableNUMANodes {
				continue
			}
			b.Run(fmt.Sprintf("kubelet/numa%d/providers%d", n, p), func(b *testing.B) {
				kh := toKubeletHints(hints)
				pol := mustKubeletPolicy(b, numaplacetm.PolicyBestEffort, kubeletNUMAInfo(ids, nil), false)
				if got := kubeletRound(b, pol, kh); !got.equal(want) {
					b.Fatalf("kubelet %v, numaplace %v", got, want)
				}
				b.ReportAllocs()
				for b.Loop() {
					pol.Merge(quiet, kh)
				}
			})
		}
	}
}

// admitRequest is docs/design.md's admission benchmark pod: 4 GPUs, 24 CPUs
// and 64 GiB of memory.
var admitRequest = allocator.Request{CPUs: 24, GPUs: 4, MemoryMiB: 64 << 10}

// admitOptions is the node of the admission benchmark: Topology Manager
// best-effort, static CPU manager, static memory manager.
var admitOptions = numaplacetm.PredictOptions{StaticMemoryManager: true}

// BenchmarkAdmit is docs/design.md's side-by-side admission: a 4-GPU, 24-CPU,
// 64 GiB pod on an empty dgx-a100 under best-effort with the static CPU and
// memory managers, hints and merge.
//
//   - numaplace/dgx-a100: numaplacetm.Predict (ProviderHints, then Merge).
//   - kubelet/dgx-a100: the kubelet's own hint providers (device manager,
//     static CPU manager policy, static memory manager policy, set up once
//     as a running kubelet has them; see kubeletNode) generate the pod's
//     hints, and the kubelet's best-effort policy merges them.
//
// Both sides generate the same hints (TestProviderHints): 11 GPU hints
// (the sets of the GPU nodes 1, 3, 5 and 7 holding 4 GPUs), 255 CPU and 255
// memory hints, 715,275 permutations for the kubelet's walk; both answer
// {1,3}, not preferred, admitted (checked before timing).
func BenchmarkAdmit(b *testing.B) {
	m := mustPreset(b, "dgx-a100")
	r := admitRequest
	h, admit, err := numaplacetm.Predict(numaplacetm.PolicyBestEffort, admitOptions, m, nil, &r)
	if err != nil {
		b.Fatal(err)
	}
	want := diffOutcome{h, admit}
	b.Run("numaplace/dgx-a100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := numaplacetm.Predict(numaplacetm.PolicyBestEffort, admitOptions, m, nil, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kubelet/dgx-a100", func(b *testing.B) {
		kn := newKubeletNode(b, m, nil)
		pod := guaranteedPod(&r)
		pol := mustKubeletPolicy(b, numaplacetm.PolicyBestEffort, kubeletNUMAInfo(m.NodeIDs(), m.Distances().Rows()), false)
		if got := kubeletRound(b, pol, kn.providers(pod)); !got.equal(want) {
			b.Fatalf("kubelet %v, numaplace %v", got, want)
		}
		b.Logf("kubelet hints per resource: %v", kubeletHintCounts(kn.providers(pod)))
		b.ReportAllocs()
		for b.Loop() {
			pol.Merge(quiet, kn.providers(pod))
		}
	})
}

// everyNodeGPUHints returns the GPU hints a kubelet before v1.37 gives for
// the request on an empty machine: its device manager went through the
// sets of every NUMA node of the machine (bitmask.IterateBitMasks, the
// kubelet's own order), GPUs or not, keeping those with enough GPUs,
// preferred at the narrowest width.
func everyNodeGPUHints(m *topology.Machine, request int) []numaplacetm.TopologyHint {
	gpus := map[int]int{}
	for _, g := range m.GPUs() {
		gpus[int(g.NUMANode)]++
	}
	var ids []int
	for _, id := range m.NodeIDs() {
		ids = append(ids, int(id))
	}
	var hints []numaplacetm.TopologyHint
	least := len(ids)
	bitmask.IterateBitMasks(ids, func(mask bitmask.BitMask) {
		n := 0
		for _, id := range mask.GetBits() {
			n += gpus[id]
		}
		if n < request {
			return
		}
		least = min(least, mask.Count())
		hints = append(hints, fromKubeletHint(topologymanager.TopologyHint{NUMANodeAffinity: mask}))
	})
	for i := range hints {
		hints[i].Preferred = hints[i].NUMANodeAffinity.Count() == least
	}
	return hints
}

// BenchmarkAdmitMerge times the merge step alone of the admission above,
// the same hints given to numaplace's Merger and to the kubelet's
// best-effort policy (each answer checked against the other before timing):
//
//   - dgx-a100: the hints of BenchmarkAdmit (11 GPU, 255 CPU and 255 memory
//     hints; 715,275 permutations for the kubelet).
//   - dgx-a100-every-node: the GPU hints of kubelets before v1.37, over
//     every set of the 8 nodes (176 GPU hints, so 11,444,400
//     permutations), the case docs/design.md describes; the kubelet takes
//     seconds per merge, and the default -benchtime runs it once.
func BenchmarkAdmitMerge(b *testing.B) {
	m := mustPreset(b, "dgx-a100")
	r := admitRequest
	hints, err := numaplacetm.ProviderHints(m, nil, &r, admitOptions)
	if err != nil {
		b.Fatal(err)
	}
	every := slices.Clone(hints)
	every[0] = map[string][]numaplacetm.TopologyHint{numaplacetm.DefaultGPUResource: everyNodeGPUHints(m, r.GPUs)}
	mg, err := numaplacetm.NewMerger(numaplacetm.PolicyBestEffort, m.NodeIDs(), m.Distances(), numaplacetm.PolicyOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		hints []map[string][]numaplacetm.TopologyHint
	}{{"dgx-a100", hints}, {"dgx-a100-every-node", every}} {
		h, admit := mg.Merge(c.hints)
		want := diffOutcome{h, admit}
		b.Run("numaplace/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				mg.Merge(c.hints)
			}
		})
		b.Run("kubelet/"+c.name, func(b *testing.B) {
			kh := toKubeletHints(c.hints)
			pol := mustKubeletPolicy(b, numaplacetm.PolicyBestEffort, kubeletNUMAInfo(m.NodeIDs(), m.Distances().Rows()), false)
			if got := kubeletRound(b, pol, kh); !got.equal(want) {
				b.Fatalf("kubelet %v, numaplace %v", got, want)
			}
			b.ReportAllocs()
			for b.Loop() {
				pol.Merge(quiet, kh)
			}
		})
	}
}
