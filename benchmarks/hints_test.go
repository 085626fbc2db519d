package benchmarks

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"

	numaplacetm "github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
)

// describeProviders writes provider maps out canonically (resources
// sorted, hints in order, nil and empty lists and maps told apart).
func describeProviders(ps []map[string][]numaplacetm.TopologyHint) string {
	var b strings.Builder
	for i, p := range ps {
		switch {
		case p == nil:
			fmt.Fprintf(&b, "[%d] nil map\n", i)
			continue
		case len(p) == 0:
			fmt.Fprintf(&b, "[%d] empty map\n", i)
			continue
		}
		keys := make([]string, 0, len(p))
		for k := range p {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p[k] == nil {
				fmt.Fprintf(&b, "[%d] %s: nil list\n", i, k)
			} else {
				fmt.Fprintf(&b, "[%d] %s: %d hints %v\n", i, k, len(p[k]), p[k])
			}
		}
	}
	return b.String()
}

// noPreference reports whether a provider's map says "no preference for
// anything" to the kubelet's merge: a nil or empty map, or one whose every
// list is nil (each nil list, like an empty map, becomes one preferred
// "any" hint, which changes no merge).
func noPreference(p map[string][]numaplacetm.TopologyHint) bool {
	for _, l := range p {
		if l != nil {
			return false
		}
	}
	return true
}

// hintCase is one request on one machine state.
type hintCase struct {
	machine string
	state   string // description of the state
	st      *allocator.State
	r       *allocator.Request
}

// hintCases are the requests and states the hint comparison runs: GPU
// pods of every size, CPU-only pods, memory beyond one node, on empty
// machines and on machines with live allocations and an unhealthy GPU.
func hintCases(t *testing.T) []hintCase {
	t.Helper()
	requests := []allocator.Request{
		{CPUs: 2, MemoryMiB: 1 << 10},
		{CPUs: 24, GPUs: 1, MemoryMiB: 16 << 10},
		{CPUs: 24, GPUs: 2, MemoryMiB: 64 << 10},
		{CPUs: 24, GPUs: 4, MemoryMiB: 64 << 10},
		{CPUs: 16, GPUs: 3, MemoryMiB: 8 << 10},
		{CPUs: 96, GPUs: 8, MemoryMiB: 512 << 10},
		{CPUs: 100, MemoryMiB: 300 << 10},
		{CPUs: 40, GPUs: 6, MemoryMiB: 900 << 10},
	}
	var cases []hintCase
	// Every preset the kubelet starts on (at most 8 NUMA nodes).
	for _, name := range []string{"dgx-a100", "dgx-h100", "xeon-2s-snc2-8gpu", "epyc-2s-nps4", "small-1s"} {
		m := mustPreset(t, name)
		busy := allocator.MustNew(m, allocator.Options{})
		placed := 0
		for i, r := range []allocator.Request{
			{CPUs: 8, GPUs: 1, MemoryMiB: 32 << 10, Policy: policy.SingleNUMANode},
			{CPUs: 20, GPUs: 2, MemoryMiB: 100 << 10, Policy: policy.Restricted},
			{CPUs: 6, MemoryMiB: 4 << 10, Policy: policy.BestEffort},
		} {
			r.ID = fmt.Sprint("busy", i)
			if r.GPUs > m.NumGPUs() {
				r.GPUs = 0
			}
			if _, err := busy.Allocate(&r); err == nil {
				placed++
			}
		}
		require.NotZero(t, placed, name)
		if m.NumGPUs() > 0 {
			_, err := busy.SetDeviceHealth(allocator.GPUClass, fmt.Sprint(m.GPUs()[m.NumGPUs()-1].ID), false)
			require.NoError(t, err)
		}
		for _, r := range requests {
			for _, s := range []struct {
				name string
				st   *allocator.State
			}{{"empty", nil}, {"busy", busy}} {
				cases = append(cases, hintCase{name, s.name, s.st, &r})
			}
		}
	}
	return cases
}

// TestProviderHints compares numaplace's ProviderHints (its model of the
// kubelet's device, CPU and memory managers' hints) with the hints the
// kubelet's own managers give for the same pod on the same machine state,
// list for list and hint for hint, order included; then the admission that
// follows: numaplace's Predict against the kubelet's merge of its own hints
// under best-effort, restricted and single-numa-node (the same hint; the
// same verdict wherever Predict admits, since Predict also refuses what the
// managers' allocation would refuse), and numaplace's Merge of the
// kubelet's hints against the kubelet's merge (identical).
//
// This test found that the kubelet v1.37's device manager lists only the
// sets of the NUMA nodes that hold devices of the resource (kubernetes
// pull request 138244), where numaplace's emulation listed the sets of every
// node, as earlier kubelets do: on dgx-a100 (GPUs on nodes 1, 3, 5, 7) 11
// GPU hints against 176 for 4 GPUs, and a best-effort merge of {1,3}
// against {0,1} for a 4-GPU, 24-CPU pod. The emulation (then in
// adapters/kubelet, now adapters/topologymanager) follows v1.37 since
// commit 4252a27.
func TestProviderHints(t *testing.T) {
	cases := hintCases(t)
	nodes := map[string]*kubeletNode{}
	for _, c := range cases {
		name := fmt.Sprintf("%s/%s/%dcpu-%dgpu-%dMiB", c.machine, c.state, c.r.CPUs, c.r.GPUs, c.r.MemoryMiB)
		t.Run(name, func(t *testing.T) {
			m := mustPreset(t, c.machine)
			kn := nodes[c.machine+"/"+c.state]
			if kn == nil {
				kn = newKubeletNode(t, m, c.st)
				nodes[c.machine+"/"+c.state] = kn
			}
			opts := numaplacetm.PredictOptions{StaticMemoryManager: true}
			np, err := numaplacetm.ProviderHints(m, c.st, c.r, opts)
			require.NoError(t, err)
			kh := kn.providers(guaranteedPod(c.r))
			kl := fromKubeletProviders(kh)
			require.Len(t, kl, 3)

			// On a machine without GPUs the kubelet's device manager does
			// not know the resource and leaves it out (an empty map) where
			// numaplace gives it a nil list; and numaplace gives a nil map
			// where the kubelet gives an empty one. Both are "no
			// preference" to the merge.
			for i, what := range []string{"device", "cpu", "memory"} {
				if noPreference(np[i]) && noPreference(kl[i]) {
					continue
				}
				require.Equal(t, describeProviders(kl[i:i+1]), describeProviders(np[i:i+1]), "%s manager", what)
			}

			ids := m.NodeIDs()
			info := kubeletNUMAInfo(ids, m.Distances().Rows())
			for _, p := range []numaplacetm.Policy{numaplacetm.PolicyBestEffort, numaplacetm.PolicyRestricted, numaplacetm.PolicySingleNUMANode} {
				pol := mustKubeletPolicy(t, p, info, false)
				kmerge := kubeletRound(t, pol, kh)
				h, admit, err := numaplacetm.Merge(p, ids, m.Distances(), kl, numaplacetm.PolicyOptions{})
				require.NoError(t, err)
				require.Truef(t, diffOutcome{h, admit}.equal(kmerge), "%s: numaplace Merge %v, kubelet %v", p, diffOutcome{h, admit}, kmerge)
				ph, padmit, err := numaplacetm.Predict(p, opts, m, c.st, c.r)
				require.NoError(t, err)
				require.Truef(t, ph.Equal(kmerge.hint), "%s: Predict %v, kubelet %v", p, ph, kmerge)
				require.Falsef(t, padmit && !kmerge.admit, "%s: Predict admits, the kubelet's policy refuses (%v)", p, kmerge)
			}
		})
	}
}

// kubeletHintCounts returns the number of hints in each of the kubelet
// providers' lists, for the benchmarks' documentation.
func kubeletHintCounts(ps []map[string][]topologymanager.TopologyHint) map[string]int {
	out := map[string]int{}
	for _, p := range ps {
		for k, l := range p {
			out[k] = len(l)
		}
	}
	return out
}
