package benchmarks

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// describeProviders writes provider maps out canonically (resources
// sorted, hints in order, nil and empty lists and maps told apart).
func describeProviders(ps []map[string][]kubelet.TopologyHint) string {
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
func noPreference(p map[string][]kubelet.TopologyHint) bool {
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
	for _, name := range []string{"dgx-a100", "dgx-h100", "xeon-2s-snc2-8gpu", "epyc-2s-nps4", "small-1s", "xeon-max-snc4"} {
		m := mustPreset(t, name)
		if m.NumNodes() > kubelet.DefaultMaxAllowableNUMANodes {
			continue
		}
		busy := allocator.New(m, allocator.Options{})
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

// deviceNodeHints is what the kubelet v1.37's device manager computes: the
// hints of DeviceHints over only the NUMA nodes that hold at least one
// device of the resource (generateDeviceTopologyHints narrows its masks to
// deviceNUMANodes, "so that machines with many device-less NUMA nodes do
// not enumerate 2^n subsets").
func deviceNodeHints(m *topology.Machine, st *allocator.State, request int) []kubelet.TopologyHint {
	held := map[int]bool{}
	if st != nil {
		snap := st.Snapshot()
		for _, a := range snap.Allocations {
			for _, g := range a.GPUs {
				held[g] = true
			}
		}
		for _, id := range snap.Unhealthy[allocator.GPUClass] {
			var g int
			fmt.Sscan(id, &g)
			held[g] = true
		}
	}
	perNode := map[numa.NodeID]*kubelet.NodeAmount{}
	unplaced := 0
	for _, g := range m.GPUs() {
		if g.NUMANode < 0 {
			if !held[g.ID] {
				unplaced++
			}
			continue
		}
		a := perNode[g.NUMANode]
		if a == nil {
			a = &kubelet.NodeAmount{Node: g.NUMANode}
			perNode[g.NUMANode] = a
		}
		a.Total++
		if !held[g.ID] {
			a.Available++
		}
	}
	var nodes []kubelet.NodeAmount
	for _, a := range perNode {
		nodes = append(nodes, *a)
	}
	return kubelet.DeviceHints(nodes, unplaced, request)
}

// TestProviderHints compares numaplace's ProviderHints (the hints its
// model of the kubelet's device, CPU and memory managers gives) with the
// hints the kubelet's own managers give for the same pod on the same
// machine state, list for list and hint for hint (order included), and the
// admission that follows (numaplace's Predict against the kubelet's merge
// of its own hints, best-effort and restricted); numaplace's Merge of the
// kubelet's hints must equal the kubelet's merge in every case.
//
// Known difference (k8s.io/kubernetes v1.37.2): the kubelet's device
// manager lists only the sets of NUMA nodes that hold devices of the
// resource, while numaplace's DeviceHints lists the sets of every NUMA
// node. Where every node holds a GPU (dgx-h100, xeon-2s-snc2-8gpu) the
// lists are equal; on dgx-a100 (GPUs on nodes 1, 3, 5 and 7 only) they are
// not: 11 hints against 176 for 4 GPUs, and the best-effort merge of a
// 4-GPU, 24-CPU pod is {1,3} (all four GPUs local) in the kubelet and
// {0,1} in numaplace's Predict. The test requires that every difference is
// exactly this one (the kubelet's list equals DeviceHints over the nodes
// that hold GPUs) and reports the cases; adapters/kubelet has to adopt the
// narrowing to model kubelets of v1.37.
func TestProviderHints(t *testing.T) {
	var diffs []string
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
			opts := kubelet.PredictOptions{StaticMemoryManager: true}
			np, err := kubelet.ProviderHints(m, c.st, c.r, opts)
			require.NoError(t, err)
			kh := kn.providers(guaranteedPod(c.r))
			kl := fromKubeletProviders(kh)
			require.Len(t, kl, 3)

			// CPU and memory managers: identical. (numaplace gives a nil
			// map where the kubelet gives an empty one: both mean "no
			// preference".)
			for i, what := range []string{"", "cpu", "memory"} {
				if i == 0 {
					continue
				}
				if noPreference(np[i]) && noPreference(kl[i]) {
					continue
				}
				require.Equal(t, describeProviders(kl[i:i+1]), describeProviders(np[i:i+1]), "%s manager", what)
			}
			// Device manager: identical, or the known difference. On a
			// machine without GPUs the kubelet does not know the resource
			// and leaves it out (an empty map) where numaplace gives it a
			// nil list: both are "no preference".
			deviceDiff := false
			if !(noPreference(np[0]) && noPreference(kl[0])) && describeProviders(kl[:1]) != describeProviders(np[:1]) {
				narrowed := map[string][]kubelet.TopologyHint{kubelet.DefaultGPUResource: deviceNodeHints(m, c.st, c.r.GPUs)}
				require.Equal(t, describeProviders(kl[:1]), describeProviders([]map[string][]kubelet.TopologyHint{narrowed}),
					"device manager: a difference other than the device-node narrowing")
				deviceDiff = true
			}

			ids := m.NodeIDs()
			info := kubeletNUMAInfo(ids, m.Distances().Rows())
			for _, p := range []kubelet.TopologyPolicy{kubelet.PolicyBestEffort, kubelet.PolicyRestricted, kubelet.PolicySingleNUMANode} {
				pol := mustKubeletPolicy(t, p, info, false)
				kmerge := kubeletRound(t, pol, kh)
				// numaplace's Merge on the kubelet's own hints: identical.
				h, admit, err := kubelet.Merge(p, ids, m.Distances(), kl, kubelet.TopologyOptions{})
				require.NoError(t, err)
				require.Truef(t, diffOutcome{h, admit}.equal(kmerge), "%s: numaplace Merge %v, kubelet %v", p, diffOutcome{h, admit}, kmerge)
				// numaplace's Predict (its own hints; it also refuses what
				// the managers' allocation would refuse, so compare the
				// hint, and admission only where Predict admits).
				ph, padmit, err := kubelet.Predict(p, opts, m, c.st, c.r)
				require.NoError(t, err)
				if !ph.Equal(kmerge.hint) || padmit && !kmerge.admit {
					require.True(t, deviceDiff, "%s: Predict %v admit=%v, kubelet %v, with identical hints", p, ph, padmit, kmerge)
					diffs = append(diffs, fmt.Sprintf("%s %s: kubelet %v, Predict %v admit=%v", name, p, kmerge, ph, padmit))
				}
			}
			if deviceDiff {
				diffs = append(diffs, fmt.Sprintf("%s: device hints: kubelet %d, numaplace %d",
					name, len(kl[0][kubelet.DefaultGPUResource]), len(np[0][kubelet.DefaultGPUResource])))
			}
		})
	}
	t.Logf("%d cases; known differences (device manager narrowed to device-bearing NUMA nodes):\n%s",
		len(cases), strings.Join(diffs, "\n"))
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
