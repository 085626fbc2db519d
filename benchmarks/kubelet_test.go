package benchmarks

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager/bitmask"

	numaplacetm "github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/numa"
)

// quiet is the logger handed to the kubelet's code: its merge logs every
// provider without a preference at Info level, which would flood the test
// output and cost time the benchmarks should not measure.
var quiet = logr.Discard()

// toKubeletHints converts numaplace's provider maps to the kubelet's,
// keeping every distinction the kubelet makes: a nil map stays nil, a nil
// list stays nil, an empty list stays empty, an Any hint gets a nil
// NUMANodeAffinity and an empty non-Any hint an empty, non-nil bitmask.
func toKubeletHints(ps []map[string][]numaplacetm.TopologyHint) []map[string][]topologymanager.TopologyHint {
	out := make([]map[string][]topologymanager.TopologyHint, len(ps))
	for i, p := range ps {
		if p == nil {
			continue
		}
		out[i] = make(map[string][]topologymanager.TopologyHint, len(p))
		for res, hs := range p {
			if hs == nil {
				out[i][res] = nil
				continue
			}
			l := make([]topologymanager.TopologyHint, len(hs))
			for k, h := range hs {
				l[k] = toKubeletHint(h)
			}
			out[i][res] = l
		}
	}
	return out
}

// toKubeletHint converts one hint.
func toKubeletHint(h numaplacetm.TopologyHint) topologymanager.TopologyHint {
	if h.Any {
		return topologymanager.TopologyHint{Preferred: h.Preferred}
	}
	return topologymanager.TopologyHint{NUMANodeAffinity: toBitMask(h.NUMANodeAffinity), Preferred: h.Preferred}
}

// toBitMask converts an IDMask to the kubelet's bitmask (same bit layout:
// bit i is node ID i).
func toBitMask(m numaplacetm.IDMask) bitmask.BitMask {
	b := bitmask.NewEmptyBitMask()
	for w := uint64(m); w != 0; w &= w - 1 {
		if err := b.Add(bits.TrailingZeros64(w)); err != nil {
			panic(err) // i is 0-63 by construction
		}
	}
	return b
}

// fromKubeletHint converts a kubelet hint back: a nil affinity is Any.
func fromKubeletHint(h topologymanager.TopologyHint) numaplacetm.TopologyHint {
	if h.NUMANodeAffinity == nil {
		return numaplacetm.AnyHint(h.Preferred)
	}
	var m numaplacetm.IDMask
	for _, b := range h.NUMANodeAffinity.GetBits() {
		m |= 1 << uint(b)
	}
	return numaplacetm.Hint(m, h.Preferred)
}

// fromKubeletProviders converts the kubelet's provider maps to numaplace's.
func fromKubeletProviders(ps []map[string][]topologymanager.TopologyHint) []map[string][]numaplacetm.TopologyHint {
	out := make([]map[string][]numaplacetm.TopologyHint, len(ps))
	for i, p := range ps {
		if p == nil {
			continue
		}
		out[i] = make(map[string][]numaplacetm.TopologyHint, len(p))
		for res, hs := range p {
			if hs == nil {
				out[i][res] = nil
				continue
			}
			l := make([]numaplacetm.TopologyHint, len(hs))
			for k, h := range hs {
				l[k] = fromKubeletHint(h)
			}
			out[i][res] = l
		}
	}
	return out
}

// kubeletNUMAInfo is the kubelet's NUMAInfo for nodes with the given IDs and
// distances (rows positional in the order of ids, as numa.NewDistances
// takes them). The kubelet indexes each node's row by node ID, so the rows
// are only read right for IDs 0..n-1 in order, which is what every caller
// here passes.
func kubeletNUMAInfo(ids []numa.NodeID, rows [][]int) *topologymanager.NUMAInfo {
	info := &topologymanager.NUMAInfo{NUMADistances: topologymanager.NUMADistances{}}
	for i, id := range ids {
		info.Nodes = append(info.Nodes, int(id))
		var row []uint64
		if rows != nil {
			row = make([]uint64, len(rows[i]))
			for j, d := range rows[i] {
				row[j] = uint64(d)
			}
		}
		info.NUMADistances[int(id)] = row
	}
	return info
}

// kubeletPolicy builds the kubelet's Topology Manager policy object, as its
// NewManager does once it has read the machine.
func kubeletPolicy(policy numaplacetm.Policy, info *topologymanager.NUMAInfo, closest bool) (topologymanager.Policy, error) {
	opts := topologymanager.PolicyOptions{PreferClosestNUMA: closest, MaxAllowableNUMANodes: numaplacetm.DefaultMaxAllowableNUMANodes}
	switch policy {
	case numaplacetm.PolicyNone:
		return topologymanager.NewNonePolicy(), nil
	case numaplacetm.PolicyBestEffort:
		return topologymanager.NewBestEffortPolicy(info, opts), nil
	case numaplacetm.PolicyRestricted:
		return topologymanager.NewRestrictedPolicy(info, opts), nil
	case numaplacetm.PolicySingleNUMANode:
		return topologymanager.NewSingleNumaNodePolicy(info, opts), nil
	}
	return nil, fmt.Errorf("unknown policy %q", policy)
}

// mustKubeletPolicy is kubeletPolicy for tests and benchmarks.
func mustKubeletPolicy(tb testing.TB, policy numaplacetm.Policy, info *topologymanager.NUMAInfo, closest bool) topologymanager.Policy {
	tb.Helper()
	p, err := kubeletPolicy(policy, info, closest)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// nodeIDs returns the IDs 0..n-1.
func nodeIDs(n int) []numa.NodeID {
	ids := make([]numa.NodeID, n)
	for i := range ids {
		ids[i] = numa.NodeID(i)
	}
	return ids
}
