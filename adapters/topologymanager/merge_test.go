package topologymanager

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
)

// refMerge is the kubelet's merge written out the kubelet's way: flatten the
// providers' maps (resources in the order shuffle gives, standing for Go's
// random map order), filter for single-numa-node, walk the whole cross
// product, merge each permutation and keep the best by the kubelet's
// pairwise comparison, averaging distances in floating point as the kubelet
// does. dist is by node ID.
func refMerge(policy Policy, nodes []numa.NodeID, dist func(a, b int) int, closest bool,
	providers []map[string][]TopologyHint, shuffle *rand.Rand) (TopologyHint, bool) {
	if policy == PolicyNone {
		return AnyHint(false), true
	}
	var lists [][]TopologyHint
	for _, p := range providers {
		if len(p) == 0 {
			lists = append(lists, []TopologyHint{AnyHint(true)})
			continue
		}
		keys := make([]string, 0, len(p))
		for k := range p {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if shuffle != nil {
			shuffle.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		}
		for _, k := range keys {
			switch hs := p[k]; {
			case hs == nil:
				lists = append(lists, []TopologyHint{AnyHint(true)})
			case len(hs) == 0:
				lists = append(lists, []TopologyHint{AnyHint(false)})
			default:
				lists = append(lists, hs)
			}
		}
	}
	if shuffle != nil {
		shuffle.Shuffle(len(lists), func(i, j int) { lists[i], lists[j] = lists[j], lists[i] })
	}
	if policy == PolicySingleNUMANode {
		var filtered [][]TopologyHint
		for _, l := range lists {
			var f []TopologyHint
			for _, h := range l {
				if h.Any && h.Preferred {
					f = append(f, h)
				}
				if !h.Any && h.NUMANodeAffinity.Count() == 1 && h.Preferred {
					f = append(f, h)
				}
			}
			filtered = append(filtered, f)
		}
		lists = filtered
		closest = false
	}
	var def IDMask
	for _, id := range nodes {
		def |= 1 << uint(id)
	}

	// bestNonPreferredAffinityCount
	bnp := 0
	for _, l := range lists {
		var narrowest *TopologyHint
		for i := range l {
			if l[i].Any {
				continue
			}
			if narrowest == nil || l[i].NUMANodeAffinity.IsNarrowerThanByValue(narrowest.NUMANodeAffinity) {
				narrowest = &l[i]
			}
		}
		if narrowest != nil && narrowest.NUMANodeAffinity.Count() > bnp {
			bnp = narrowest.NUMANodeAffinity.Count()
		}
	}

	average := func(m IDMask) float64 {
		if m.Count() == 0 {
			return 0
		}
		var sum, count float64
		for _, a := range m.IDs() {
			for _, b := range m.IDs() {
				sum += float64(dist(int(a), int(b)))
				count++
			}
		}
		return sum / count
	}
	narrowest := func(a, b IDMask) IDMask {
		if a.IsNarrowerThanByValue(b) {
			return a
		}
		return b
	}
	closestOf := func(a, b IDMask) IDMask {
		if a.Count() != b.Count() {
			return narrowest(a, b)
		}
		da, db := average(a), average(b)
		if da == db {
			if a < b {
				return a
			}
			return b
		}
		if da < db {
			return a
		}
		return b
	}
	compareMasks := func(cur, cand *TopologyHint) *TopologyHint {
		if cand.NUMANodeAffinity == cur.NUMANodeAffinity {
			return cur
		}
		var best IDMask
		if closest {
			best = closestOf(cur.NUMANodeAffinity, cand.NUMANodeAffinity)
		} else {
			best = narrowest(cur.NUMANodeAffinity, cand.NUMANodeAffinity)
		}
		if best == cur.NUMANodeAffinity {
			return cur
		}
		return cand
	}
	compare := func(cur, cand *TopologyHint) *TopologyHint {
		cc := cand.NUMANodeAffinity.Count()
		switch {
		case cc == 0:
			return cur
		case cur == nil:
			return cand
		case !cur.Preferred && cand.Preferred:
			return cand
		case cur.Preferred && !cand.Preferred:
			return cur
		case cur.Preferred && cand.Preferred:
			return compareMasks(cur, cand)
		}
		cu := cur.NUMANodeAffinity.Count()
		switch {
		case cu > bnp:
			return compareMasks(cur, cand)
		case cu == bnp:
			if cc != bnp {
				return cur
			}
			return compareMasks(cur, cand)
		case cc > bnp:
			return cur
		case cc == bnp:
			return cand
		case cc > cu:
			return cand
		case cc < cu:
			return cur
		}
		return compareMasks(cur, cand)
	}

	var best *TopologyHint
	perm := make([]TopologyHint, len(lists))
	var walk func(i int)
	walk = func(i int) {
		if i == len(lists) {
			preferred := true
			var first *IDMask
			aff := def
			for j := range perm {
				h := &perm[j]
				if !h.Any {
					aff &= h.NUMANodeAffinity
					if first == nil {
						first = &h.NUMANodeAffinity
					} else if h.NUMANodeAffinity != *first {
						preferred = false
					}
				}
				if !h.Preferred {
					preferred = false
				}
			}
			merged := &TopologyHint{NUMANodeAffinity: aff, Preferred: preferred}
			best = compare(best, merged)
			return
		}
		for _, h := range lists[i] {
			perm[i] = h
			walk(i + 1)
		}
	}
	walk(0)
	if best == nil {
		best = &TopologyHint{NUMANodeAffinity: def}
	}
	out := *best
	if policy == PolicySingleNUMANode && out.NUMANodeAffinity == def {
		out = AnyHint(out.Preferred)
	}
	if policy == PolicyBestEffort {
		return out, true
	}
	return out, out.Preferred
}

// kubeletCases is testdata/merge_kubelet_cases.json.
type kubeletCases struct {
	NUMAInfo map[string]struct {
		Nodes     []numa.NodeID `json:"nodes"`
		Distances [][]int       `json:"distances"`
	} `json:"numaInfo"`
	Cases []struct {
		Suite         string                  `json:"suite"`
		Name          string                  `json:"name"`
		Policy        Policy                  `json:"policy"`
		NUMAInfo      string                  `json:"numaInfo"`
		PreferClosest bool                    `json:"preferClosestNUMANodes"`
		Providers     []map[string][]jsonHint `json:"providers"`
		Expected      jsonHint                `json:"expected"`
		Admit         bool                    `json:"admit"`
	} `json:"cases"`
}

type jsonHint struct {
	Affinity  *[]int `json:"affinity"`
	Preferred bool   `json:"preferred"`
}

func (j jsonHint) hint() TopologyHint {
	if j.Affinity == nil {
		return AnyHint(j.Preferred)
	}
	return Hint(MustIDMask(*j.Affinity...), j.Preferred)
}

func convertProviders(ps []map[string][]jsonHint) []map[string][]TopologyHint {
	out := make([]map[string][]TopologyHint, len(ps))
	for i, p := range ps {
		if p == nil {
			continue
		}
		out[i] = map[string][]TopologyHint{}
		for res, hs := range p {
			if hs == nil {
				out[i][res] = nil
				continue
			}
			l := make([]TopologyHint, len(hs))
			for k, h := range hs {
				l[k] = h.hint()
			}
			out[i][res] = l
		}
	}
	return out
}

// TestMergeKubeletTables runs the kubelet's own merge test tables.
func TestMergeKubeletTables(t *testing.T) {
	data, err := os.ReadFile("testdata/merge_kubelet_cases.json")
	require.NoError(t, err)
	var tc kubeletCases
	require.NoError(t, json.Unmarshal(data, &tc))
	require.NotEmpty(t, tc.Cases)
	for _, c := range tc.Cases {
		t.Run(c.Suite+"/"+c.Name, func(t *testing.T) {
			info := tc.NUMAInfo[c.NUMAInfo]
			dist, err := numa.NewDistances(info.Nodes, info.Distances)
			require.NoError(t, err)
			providers := convertProviders(c.Providers)
			want := c.Expected.hint()
			mg, err := NewMerger(c.Policy, info.Nodes, dist, PolicyOptions{PreferClosestNUMANodes: c.PreferClosest})
			require.NoError(t, err)
			for _, method := range []int{methodAuto, methodLayered, methodDense, methodBranch} {
				got, admit := mg.merge(providers, method)
				require.Truef(t, want.Equal(got), "method %d: got %v, want %v", method, got, want)
				require.Equal(t, c.Admit, admit, "method %d", method)
			}
			ref, refAdmit := refMerge(c.Policy, info.Nodes, func(a, b int) int { return info.Distances[a][b] },
				c.PreferClosest, providers, nil)
			require.Truef(t, want.Equal(ref), "reference: got %v, want %v", ref, want)
			require.Equal(t, c.Admit, refAdmit)
		})
	}
}

// TestCompareNonPreferred writes out the kubelet's TestCompareHintsNarrowest
// cases between two non-preferred hints (nodes 0-3, no distances): true when
// the candidate replaces the current best.
func TestCompareNonPreferred(t *testing.T) {
	mg, err := NewMerger(PolicyBestEffort, []numa.NodeID{0, 1, 2, 3}, numa.Distances{}, PolicyOptions{})
	require.NoError(t, err)
	cases := []struct {
		name               string
		b                  int
		current, candidate IDMask
		candidateWins      bool
	}{
		{"1.1", 1, MustIDMask(0, 1), MustIDMask(0, 1), false},
		{"1.2", 1, MustIDMask(1, 2), MustIDMask(0, 1), true},
		{"1.3", 1, MustIDMask(0, 1), MustIDMask(1, 2), false},
		{"2.1", 2, MustIDMask(0, 1), MustIDMask(0), false},
		{"2.2", 2, MustIDMask(0, 1), MustIDMask(0, 1), false},
		{"2.3", 2, MustIDMask(1, 2), MustIDMask(0, 1), true},
		{"2.4", 2, MustIDMask(0, 1), MustIDMask(1, 2), false},
		{"3a", 2, MustIDMask(0), MustIDMask(0, 1, 2), false},
		{"3b", 2, MustIDMask(0), MustIDMask(0, 1), true},
		{"3ca.1", 3, MustIDMask(0), MustIDMask(0, 1), true},
		{"3ca.2", 3, MustIDMask(0), MustIDMask(1, 2), true},
		{"3ca.3", 4, MustIDMask(0, 1), MustIDMask(1, 2, 3), true},
		{"3cb", 4, MustIDMask(1, 2, 3), MustIDMask(0, 1), false},
		{"3cc.1", 4, MustIDMask(0, 1, 2), MustIDMask(0, 1, 2), false},
		{"3cc.2", 4, MustIDMask(0, 1, 2), MustIDMask(1, 2, 3), false},
		{"3cc.3", 4, MustIDMask(1, 2, 3), MustIDMask(0, 1, 2), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mg.nonPreferredBefore(mg.compress(c.candidate), mg.compress(c.current), c.b)
			require.Equal(t, c.candidateWins, got)
		})
	}
}

// TestClosest writes out the kubelet's TestClosest cases (NUMAInfo.Closest).
func TestClosest(t *testing.T) {
	flat := func(n int) [][]int {
		rows := make([][]int, n)
		for i := range rows {
			rows[i] = slices.Repeat([]int{10}, n)
		}
		return rows
	}
	slit := [][]int{{10, 11, 12, 12}, {11, 10, 12, 12}, {12, 12, 10, 11}, {12, 12, 11, 10}}
	cases := []struct {
		name               string
		rows               [][]int
		current, candidate IDMask
		candidateWins      bool
	}{
		{"length differs, current narrower", flat(4), MustIDMask(0), MustIDMask(0, 2), false},
		{"same length and distance, current lower bits", flat(3), MustIDMask(0, 1), MustIDMask(0, 2), false},
		{"same length and distance, candidate lower bits", flat(4), MustIDMask(0, 3), MustIDMask(0, 2), true},
		{"candidate closer", slit, MustIDMask(0, 3), MustIDMask(0, 1), true},
		{"current closer", slit, MustIDMask(2, 3), MustIDMask(0, 3), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ids := make([]numa.NodeID, len(c.rows))
			for i := range ids {
				ids[i] = numa.NodeID(i)
			}
			dist, err := numa.NewDistances(ids, c.rows)
			require.NoError(t, err)
			mg, err := NewMerger(PolicyRestricted, ids, dist, PolicyOptions{PreferClosestNUMANodes: true})
			require.NoError(t, err)
			require.Equal(t, c.candidateWins, mg.narrower(mg.compress(c.candidate), mg.compress(c.current)))
		})
	}
}

// TestMergeCorners pins behaviours of the kubelet that are easy to get wrong.
func TestMergeCorners(t *testing.T) {
	four := []numa.NodeID{0, 1, 2, 3}
	merge := func(policy Policy, nodes []numa.NodeID, ps ...map[string][]TopologyHint) (TopologyHint, bool) {
		t.Helper()
		h, ok, err := Merge(policy, nodes, numa.Distances{}, ps, PolicyOptions{})
		require.NoError(t, err)
		return h, ok
	}
	t.Run("numeric tie-break, not lowest index", func(t *testing.T) {
		// {1,2} = 6 is below {0,3} = 9: the kubelet picks {1,2}.
		h, ok := merge(PolicyRestricted, four,
			map[string][]TopologyHint{"a": {Hint(MustIDMask(0, 3), true), Hint(MustIDMask(1, 2), true)}})
		require.True(t, ok)
		require.Equal(t, Hint(MustIDMask(1, 2), true), h)
	})
	t.Run("preferred needs equal raw masks, bits outside the machine included", func(t *testing.T) {
		// {0,5} and {0} both merge to {0} on nodes 0-3, but differ raw.
		h, ok := merge(PolicyRestricted, four,
			map[string][]TopologyHint{"a": {Hint(MustIDMask(0, 5), true)}},
			map[string][]TopologyHint{"b": {Hint(MustIDMask(0), true)}})
		require.False(t, ok)
		require.Equal(t, Hint(MustIDMask(0), false), h)
		h, ok = merge(PolicyRestricted, four,
			map[string][]TopologyHint{"a": {Hint(MustIDMask(0, 5), true)}},
			map[string][]TopologyHint{"b": {Hint(MustIDMask(0, 5), true)}})
		require.True(t, ok)
		require.Equal(t, Hint(MustIDMask(0), true), h)
	})
	t.Run("single-numa-node hides a one-node machine's node", func(t *testing.T) {
		h, ok := merge(PolicySingleNUMANode, []numa.NodeID{0},
			map[string][]TopologyHint{"a": {Hint(MustIDMask(0), true)}})
		require.True(t, ok)
		require.Equal(t, AnyHint(true), h)
	})
	t.Run("empty mask counts 0 for bestNonPreferredAffinityCount", func(t *testing.T) {
		// Without the empty hint B would be 3 (list a's narrowest) and {0,1,2}
		// would win; with it list a counts 0, B = 1 (list b's narrowest) and
		// the one-node intersection {0} wins.
		h, _ := merge(PolicyBestEffort, four,
			map[string][]TopologyHint{"a": {Hint(0, false), Hint(MustIDMask(0, 1, 2), false)}},
			map[string][]TopologyHint{"b": {Hint(MustIDMask(0), false), Hint(MustIDMask(0, 1, 2, 3), false)}})
		require.Equal(t, Hint(MustIDMask(0), false), h)
		h, _ = merge(PolicyBestEffort, four,
			map[string][]TopologyHint{"a": {Hint(MustIDMask(0, 1, 2), false)}},
			map[string][]TopologyHint{"b": {Hint(MustIDMask(0), false), Hint(MustIDMask(0, 1, 2, 3), false)}})
		require.Equal(t, Hint(MustIDMask(0, 1, 2), false), h)
	})
	t.Run("sparse IDs", func(t *testing.T) {
		nodes := []numa.NodeID{0, 1, 2, 33}
		h, ok := merge(PolicyRestricted, nodes,
			map[string][]TopologyHint{"a": {Hint(MustIDMask(33), true), Hint(MustIDMask(2, 33), false)}},
			map[string][]TopologyHint{"b": {Hint(MustIDMask(33), true)}})
		require.True(t, ok)
		require.Equal(t, Hint(MustIDMask(33), true), h)
		h, _ = merge(PolicyBestEffort, nodes, map[string][]TopologyHint{"a": {}})
		require.Equal(t, Hint(MustIDMask(0, 1, 2, 33), false), h)
	})
	t.Run("none", func(t *testing.T) {
		h, ok := merge(PolicyNone, four, map[string][]TopologyHint{"a": {}})
		require.True(t, ok)
		require.Equal(t, AnyHint(false), h)
	})
	t.Run("64 nodes", func(t *testing.T) {
		nodes := make([]numa.NodeID, 64)
		for i := range nodes {
			nodes[i] = numa.NodeID(i)
		}
		a := []TopologyHint{Hint(MustIDMask(63), true), Hint(MustIDMask(62, 63), false), Hint(^IDMask(0), false)}
		h, ok := merge(PolicyRestricted, nodes, map[string][]TopologyHint{"a": a},
			map[string][]TopologyHint{"b": {Hint(MustIDMask(40, 62), true)}})
		// No common preferred mask; B = 2 (list b), and {40,62} = b ∩ all
		// nodes has 2 nodes, where {62} = b ∩ {62,63} has 1.
		require.False(t, ok)
		require.Equal(t, Hint(MustIDMask(40, 62), false), h)
	})
}

func TestNewMergerErrors(t *testing.T) {
	_, err := NewMerger("strict", []numa.NodeID{0}, numa.Distances{}, PolicyOptions{})
	require.ErrorIs(t, err, ErrHintConfig)
	_, err = NewMerger(PolicyBestEffort, []numa.NodeID{64}, numa.Distances{}, PolicyOptions{})
	require.ErrorIs(t, err, ErrHintConfig)
	_, err = NewMerger(PolicyBestEffort, []numa.NodeID{1, 1}, numa.Distances{}, PolicyOptions{})
	require.ErrorIs(t, err, ErrHintConfig)
	_, err = NewMerger(PolicyBestEffort, []numa.NodeID{0, 1}, numa.Distances{}, PolicyOptions{PreferClosestNUMANodes: true})
	require.ErrorIs(t, err, ErrHintConfig)
	// single-numa-node ignores prefer-closest-numa-nodes, so needs no distances.
	_, err = NewMerger(PolicySingleNUMANode, []numa.NodeID{0, 1}, numa.Distances{}, PolicyOptions{PreferClosestNUMANodes: true})
	require.NoError(t, err)
}

// genCase draws a small merge input: 1-4 NUMA nodes (IDs among 0-7, so
// sometimes sparse), a distance table with ties and asymmetry, 0-3 providers
// with nil and empty maps, nil and empty lists, "any" hints, empty masks and
// IDs the machine lacks.
type mergeCase struct {
	policy    Policy
	closest   bool
	nodes     []numa.NodeID
	rows      [][]int
	providers []map[string][]TopologyHint
}

func (c mergeCase) String() string {
	return fmt.Sprintf("%s closest=%v nodes=%v rows=%v providers=%v", c.policy, c.closest, c.nodes, c.rows, c.providers)
}

func genMergeCase(t *rapid.T) mergeCase {
	return genMergeCaseOn(t, func(t *rapid.T) []int {
		// rapid favours small draws: pick the sizes explicitly so that 1-4
		// nodes and 1-3 providers come about equally often.
		ids := rapid.Permutation([]int{0, 1, 2, 3, 4, 5, 6, 7}).Draw(t, "idOrder")[:rapid.IntRange(1, 4).Draw(t, "nodes")]
		if rapid.Bool().Draw(t, "denseIDs") {
			ids = []int{0, 1, 2, 3}[:len(ids)]
		}
		return ids
	})
}

// genLargeMergeCase draws 5-20 NUMA nodes with IDs among 0-63.
func genLargeMergeCase(t *rapid.T) mergeCase {
	return genMergeCaseOn(t, func(t *rapid.T) []int {
		all := make([]int, 64)
		for i := range all {
			all[i] = i
		}
		return rapid.Permutation(all).Draw(t, "idOrder")[:rapid.IntRange(5, 20).Draw(t, "nodes")]
	})
}

func genMergeCaseOn(t *rapid.T, drawIDs func(*rapid.T) []int) mergeCase {
	var c mergeCase
	c.policy = rapid.SampledFrom([]Policy{PolicyNone, PolicyBestEffort, PolicyRestricted, PolicySingleNUMANode}).Draw(t, "policy")
	c.closest = rapid.Bool().Draw(t, "closest")
	ids := slices.Clone(drawIDs(t))
	slices.Sort(ids)
	for _, id := range ids {
		c.nodes = append(c.nodes, numa.NodeID(id))
	}
	c.rows = make([][]int, len(ids))
	for i := range c.rows {
		c.rows[i] = make([]int, len(ids))
		for j := range c.rows[i] {
			if i == j {
				c.rows[i][j] = 10
			} else {
				c.rows[i][j] = rapid.SampledFrom([]int{10, 11, 12, 20, 21}).Draw(t, "d")
			}
		}
	}
	mask := rapid.Custom(func(t *rapid.T) IDMask {
		var m IDMask
		for _, id := range ids {
			if rapid.Bool().Draw(t, "in") {
				m |= 1 << uint(id)
			}
		}
		if rapid.IntRange(0, 9).Draw(t, "stray") == 0 {
			for id := 9; ; id++ { // a node the machine does not have
				if !slices.Contains(ids, id) {
					m |= 1 << uint(id)
					break
				}
			}
		}
		return m
	})
	hint := rapid.Custom(func(t *rapid.T) TopologyHint {
		pref := rapid.Bool().Draw(t, "preferred")
		if rapid.IntRange(0, 7).Draw(t, "any") == 0 {
			return AnyHint(pref)
		}
		return Hint(mask.Draw(t, "mask"), pref)
	})
	nProviders := rapid.IntRange(1, 3).Draw(t, "providers")
	if rapid.IntRange(0, 19).Draw(t, "noProviders") == 0 {
		nProviders = 0
	}
	for p := 0; p < nProviders; p++ {
		switch rapid.IntRange(0, 9).Draw(t, "providerKind") {
		case 0:
			c.providers = append(c.providers, nil)
		case 1:
			c.providers = append(c.providers, map[string][]TopologyHint{})
		default:
			m := map[string][]TopologyHint{}
			for r := rapid.IntRange(1, 2).Draw(t, "resources"); r > 0; r-- {
				name := fmt.Sprintf("p%dr%d", p, r)
				switch rapid.IntRange(0, 9).Draw(t, "listKind") {
				case 0:
					m[name] = nil
				case 1:
					m[name] = []TopologyHint{}
				default:
					m[name] = rapid.SliceOfN(hint, 1, 6).Draw(t, "hints")
				}
			}
			c.providers = append(c.providers, m)
		}
	}
	return c
}

// TestMergeMatchesCrossProduct compares Merge (both algorithms) with the
// kubelet's walk of the cross product, in two random orders of the lists.
func TestMergeMatchesCrossProduct(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genMergeCase(t)
		dist, err := numa.NewDistances(c.nodes, c.rows)
		require.NoError(t, err)
		byID := func(a, b int) int { d, _ := dist.Distance(numa.NodeID(a), numa.NodeID(b)); return d }
		seed := rapid.Uint64().Draw(t, "seed")
		want, wantAdmit := refMerge(c.policy, c.nodes, byID, c.closest, c.providers, rand.New(rand.NewPCG(seed, 1)))
		again, againAdmit := refMerge(c.policy, c.nodes, byID, c.closest, c.providers, rand.New(rand.NewPCG(seed, 2)))
		require.Equal(t, want, again, "the kubelet's walk depends on map order: %v", c)
		require.Equal(t, wantAdmit, againAdmit)
		mg, err := NewMerger(c.policy, c.nodes, dist, PolicyOptions{PreferClosestNUMANodes: c.closest})
		require.NoError(t, err)
		for _, method := range []int{methodAuto, methodLayered, methodDense, methodBranch} {
			got, admit := mg.merge(c.providers, method)
			require.Truef(t, want.Equal(got), "method %d: got %v, want %v for %v", method, got, want, c)
			require.Equal(t, wantAdmit, admit, "method %d for %v", method, c)
		}
	})
}

// TestMergeLargeMachines is TestMergeMatchesCrossProduct on 5-20 nodes with
// sparse IDs up to 63, where branch and bound and the dense tables run.
func TestMergeLargeMachines(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genLargeMergeCase(t)
		dist, err := numa.NewDistances(c.nodes, c.rows)
		require.NoError(t, err)
		byID := func(a, b int) int { d, _ := dist.Distance(numa.NodeID(a), numa.NodeID(b)); return d }
		want, wantAdmit := refMerge(c.policy, c.nodes, byID, c.closest, c.providers, nil)
		mg, err := NewMerger(c.policy, c.nodes, dist, PolicyOptions{PreferClosestNUMANodes: c.closest})
		require.NoError(t, err)
		for _, method := range []int{methodAuto, methodLayered, methodDense, methodBranch} {
			got, admit := mg.merge(c.providers, method)
			require.Truef(t, want.Equal(got), "method %d: got %v, want %v for %v", method, got, want, c)
			require.Equal(t, wantAdmit, admit, "method %d for %v", method, c)
		}
	})
}
