package benchmarks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	numaplacetm "github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/numa"
)

// casesFile is the kubelet's merge test tables written out as data by the
// core module (adapters/topologymanager/testdata), read here from the repository.
var casesFile = filepath.Join("..", "adapters", "topologymanager", "testdata", "merge_kubelet_cases.json")

type kubeletCases struct {
	NUMAInfo map[string]struct {
		Nodes     []numa.NodeID `json:"nodes"`
		Distances [][]int       `json:"distances"`
	} `json:"numaInfo"`
	Cases []struct {
		Suite         string                  `json:"suite"`
		Name          string                  `json:"name"`
		Policy        numaplacetm.Policy      `json:"policy"`
		NUMAInfo      string                  `json:"numaInfo"`
		PreferClosest bool                    `json:"preferClosestNUMANodes"`
		Providers     []map[string][]jsonHint `json:"providers"`
		Expected      jsonHint                `json:"expected"`
		Admit         bool                    `json:"admit"`
	} `json:"cases"`
}

// jsonHint is a hint of the data file: a null affinity is the kubelet's nil
// NUMANodeAffinity, [] an empty one.
type jsonHint struct {
	Affinity  *[]int `json:"affinity"`
	Preferred bool   `json:"preferred"`
}

func (j jsonHint) hint() numaplacetm.TopologyHint {
	if j.Affinity == nil {
		return numaplacetm.AnyHint(j.Preferred)
	}
	return numaplacetm.Hint(numaplacetm.MustIDMask(*j.Affinity...), j.Preferred)
}

func jsonProviders(ps []map[string][]jsonHint) []map[string][]numaplacetm.TopologyHint {
	out := make([]map[string][]numaplacetm.TopologyHint, len(ps))
	for i, p := range ps {
		if p == nil {
			continue
		}
		out[i] = map[string][]numaplacetm.TopologyHint{}
		for res, hs := range p {
			if hs == nil {
				out[i][res] = nil
				continue
			}
			l := make([]numaplacetm.TopologyHint, len(hs))
			for k, h := range hs {
				l[k] = h.hint()
			}
			out[i][res] = l
		}
	}
	return out
}

// TestKubeletTableCases runs every case of the core module's
// merge_kubelet_cases.json through the kubelet's own policies (and through
// numaplace's Merge): the data file must be what the kubelet does, hint and
// admission verdict, since the core module's tests take it as the truth.
// The distance rows of the file are indexed by node ID, as the kubelet's
// NUMADistances; its machines have node IDs 0..n-1, so they are also the
// positional rows numa.NewDistances takes.
func TestKubeletTableCases(t *testing.T) {
	data, err := os.ReadFile(casesFile)
	require.NoError(t, err)
	var tc kubeletCases
	require.NoError(t, json.Unmarshal(data, &tc))
	require.NotEmpty(t, tc.Cases)
	perPolicy := map[numaplacetm.Policy]int{}
	for _, c := range tc.Cases {
		t.Run(c.Suite+"/"+c.Name, func(t *testing.T) {
			info, ok := tc.NUMAInfo[c.NUMAInfo]
			require.True(t, ok, "unknown numaInfo %q", c.NUMAInfo)
			for i, id := range info.Nodes {
				require.Equal(t, numa.NodeID(i), id, "the file's machines have node IDs 0..n-1")
			}
			providers := jsonProviders(c.Providers)
			want := diffOutcome{c.Expected.hint(), c.Admit}

			pol := mustKubeletPolicy(t, c.Policy, kubeletNUMAInfo(info.Nodes, info.Distances), c.PreferClosest)
			for r := range 8 { // the kubelet walks maps in random order
				got := kubeletRound(t, pol, toKubeletHints(providers))
				require.Truef(t, got.equal(want), "kubelet (run %d): got %v, the file says %v", r, got, want)
			}

			dist, err := numa.NewDistances(info.Nodes, info.Distances)
			require.NoError(t, err)
			h, admit, err := numaplacetm.Merge(c.Policy, info.Nodes, dist, providers,
				numaplacetm.PolicyOptions{PreferClosestNUMANodes: c.PreferClosest})
			require.NoError(t, err)
			got := diffOutcome{h, admit}
			require.Truef(t, got.equal(want), "numaplace: got %v, the file says %v", got, want)
		})
		perPolicy[c.Policy]++
	}
	t.Logf("%d cases through the kubelet and numaplace: %v", len(tc.Cases), perPolicy)
}
