package benchmarks

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"

	numaplacetm "github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/numa"
)

var (
	orderN      = flag.Int("order.n", 2_000, "number of tie-heavy inputs of TestKubeletMapOrder")
	orderRepeat = flag.Int("order.repeat", 32, "kubelet merges per input and configuration on the same maps in TestKubeletMapOrder")
)

// genTieInput draws an input built to make the kubelet's walk order matter
// if anything can: one provider with 2-3 resources (the lists whose order
// is Go's random map order), sometimes a second provider; every mask of the
// input has the same number of nodes (so merged hints tie on width) and the
// distances are flat or two symmetric sockets (so they tie on average
// distance too), masks recur across lists and within a list with both
// preferred flags (so one affinity is reached by many permutations, some
// preferred and some not), and a few hints have no affinity or an empty one.
func genTieInput(r *rand.Rand) diffInput {
	n := 2 + r.IntN(7)
	in := diffInput{n: n, rows: genDistances(r, n)}
	if len(in.rows) > 0 && r.IntN(2) == 0 {
		for i := range in.rows { // flat: every average distance ties
			for j := range in.rows[i] {
				if i != j {
					in.rows[i][j] = 20
				}
			}
		}
	} else {
		half := (n + 1) / 2
		for i := range in.rows { // symmetric sockets
			for j := range in.rows[i] {
				switch {
				case i == j:
				case (i < half) == (j < half):
					in.rows[i][j] = 12
				default:
					in.rows[i][j] = 32
				}
			}
		}
	}
	width := 1 + r.IntN(n)
	var all []numaplacetm.IDMask
	for m := uint64(1); m < 1<<uint(n); m++ {
		if popcount(m) == width {
			all = append(all, numaplacetm.IDMask(m))
		}
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	pool := all[:min(len(all), 1+r.IntN(4))]
	list := func() []numaplacetm.TopologyHint {
		hs := make([]numaplacetm.TopologyHint, 1+r.IntN(5))
		for k := range hs {
			switch x := r.IntN(20); {
			case x == 0:
				hs[k] = numaplacetm.AnyHint(r.IntN(2) == 0)
			case x == 1:
				hs[k] = numaplacetm.Hint(0, r.IntN(2) == 0)
			default:
				hs[k] = numaplacetm.Hint(pool[r.IntN(len(pool))], r.IntN(3) != 0)
			}
		}
		return hs
	}
	first := map[string][]numaplacetm.TopologyHint{}
	for k := range 2 + r.IntN(2) {
		first[fmt.Sprintf("resource%d", k)] = list()
	}
	in.providers = []map[string][]numaplacetm.TopologyHint{first}
	if r.IntN(2) == 0 {
		in.providers = append(in.providers, map[string][]numaplacetm.TopologyHint{"other": list()})
	}
	return in
}

func popcount(m uint64) int {
	c := 0
	for ; m != 0; m &= m - 1 {
		c++
	}
	return c
}

// resourceOrders returns the input's providers rewritten so that every
// resource is a provider of its own, in every order of the resources of the
// first provider: the kubelet flattens providers in slice order and each
// provider's resources in map order, so these are exactly the list orders
// Go's map iteration can produce, made deterministic. With reverse, every
// list is also reversed.
func resourceOrders(in diffInput, reverse bool) [][]map[string][]numaplacetm.TopologyHint {
	keys := make([]string, 0, len(in.providers[0]))
	for k := range in.providers[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out [][]map[string][]numaplacetm.TopologyHint
	var permute func(k int)
	permute = func(k int) {
		if k == len(keys) {
			var ps []map[string][]numaplacetm.TopologyHint
			for _, key := range keys {
				l := slices.Clone(in.providers[0][key])
				if reverse {
					slices.Reverse(l)
				}
				ps = append(ps, map[string][]numaplacetm.TopologyHint{key: l})
			}
			for _, p := range in.providers[1:] {
				q := map[string][]numaplacetm.TopologyHint{}
				for key, l := range p {
					l = slices.Clone(l)
					if reverse {
						slices.Reverse(l)
					}
					q[key] = l
				}
				ps = append(ps, q)
			}
			out = append(out, ps)
			return
		}
		for i := k; i < len(keys); i++ {
			keys[k], keys[i] = keys[i], keys[k]
			permute(k + 1)
			keys[k], keys[i] = keys[i], keys[k]
		}
	}
	permute(0)
	return out
}

// TestKubeletMapOrder is the investigation of whether the kubelet's merge
// depends on Go's map iteration order (it walks each provider's map with
// range, so the order of a provider's resources, and with it the order in
// which permutations are met, changes from call to call; its comparison
// keeps the first of two hints with equal affinities).
//
// For -order.n tie-heavy inputs (genTieInput) and every configuration of
// the differential test, it runs the kubelet's policy -order.repeat times on
// the very same maps, and once for every order of the first provider's
// resources, each with the hint lists as given and reversed (as separate
// one-resource providers, which the kubelet flattens in slice order), and
// requires a single outcome, equal to numaplace's.
//
// Result (k8s.io/kubernetes v1.37.2): no input gave two outcomes. The
// reason is in the kubelet's code: its comparison is a strict order on
// (preferred, affinity) pairs: preferred first; then fewer nodes (or, for
// non-preferred hints, the tiers around bestNonPreferredAffinityCount), the
// average distance with prefer-closest-numa-nodes, then the mask as an
// integer; so two merged hints tie only when their affinities are equal,
// and then they are the same hint (a preferred and a non-preferred hint of
// one affinity do not tie: the preferred one wins whichever comes first).
// bestNonPreferredAffinityCount is a maximum of minimums and the preferred
// flag of a permutation is "all preferred and all affinities equal": neither
// depends on order. The test also checks that Go does shuffle a 3-key map's
// iteration order, so the repeated runs did see different orders.
func TestKubeletMapOrder(t *testing.T) {
	// Go shuffles the iteration order of small maps: count the orders seen.
	m := map[string]int{"resource0": 0, "resource1": 1, "resource2": 2}
	orders := map[string]bool{}
	for range 256 {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		orders[strings.Join(ks, ",")] = true
	}
	require.Greater(t, len(orders), 1, "Go's map iteration order never changed: the repeated merges prove nothing")
	t.Logf("a 3-key map was ranged in %d different orders over 256 loops", len(orders))

	runs, tiesSeen := 0, 0
	for i := range *orderN {
		in := genTieInput(rand.New(rand.NewPCG(42, uint64(i))))
		ids := nodeIDs(in.n)
		dist, err := numa.NewDistances(ids, in.rows)
		require.NoError(t, err)
		info := kubeletNUMAInfo(ids, in.rows)
		variants := append(resourceOrders(in, false), resourceOrders(in, true)...)
		for _, c := range diffConfigs {
			mg, err := numaplacetm.NewMerger(c.policy, ids, dist, numaplacetm.PolicyOptions{PreferClosestNUMANodes: c.closest})
			require.NoError(t, err)
			h, admit := mg.Merge(in.providers)
			want := diffOutcome{h, admit}
			pol := mustKubeletPolicy(t, c.policy, info, c.closest)
			seen := map[string]bool{}
			check := func(ps []map[string][]topologymanager.TopologyHint, how string) {
				got := kubeletRound(t, pol, ps)
				runs++
				seen[got.String()] = true
				if !got.equal(want) {
					t.Fatalf("input %d %v, %s: kubelet %v, numaplace %v\n%v", i, c, how, got, want, in)
				}
			}
			kh := toKubeletHints(in.providers)
			for r := range *orderRepeat {
				check(kh, fmt.Sprintf("repeat %d", r))
			}
			for v, ps := range variants {
				check(toKubeletHints(ps), fmt.Sprintf("order %d", v))
			}
			if len(seen) != 1 {
				t.Fatalf("input %d %v: %d outcomes %v", i, c, len(seen), seen)
			}
			if equalCandidates(in, c) {
				tiesSeen++
			}
		}
	}
	t.Logf("%d inputs x %d configurations: %d kubelet merges, one outcome each; %d (input, configuration) pairs "+
		"had several permutations merging to the winning affinity", *orderN, len(diffConfigs), runs, tiesSeen)
}

// equalCandidates reports whether more than one permutation of the input
// merges to the affinity of the best merged hint (so that "the first one
// found wins" was actually exercised), by walking the cross product.
func equalCandidates(in diffInput, c diffConfig) bool {
	ids := nodeIDs(in.n)
	dist, _ := numa.NewDistances(ids, in.rows)
	mg, _ := numaplacetm.NewMerger(c.policy, ids, dist, numaplacetm.PolicyOptions{PreferClosestNUMANodes: c.closest})
	best, _ := mg.Merge(in.providers)
	if best.Any || c.policy == numaplacetm.PolicyNone {
		return false
	}
	var lists [][]numaplacetm.TopologyHint
	for _, p := range in.providers {
		for _, l := range p {
			if len(l) == 0 {
				l = []numaplacetm.TopologyHint{numaplacetm.AnyHint(l == nil)}
			}
			if c.policy == numaplacetm.PolicySingleNUMANode {
				l = slices.DeleteFunc(slices.Clone(l), func(h numaplacetm.TopologyHint) bool {
					return !h.Preferred || !h.Any && h.NUMANodeAffinity.Count() != 1
				})
			}
			lists = append(lists, l)
		}
	}
	machine := mg.DefaultAffinity()
	count := 0
	var walk func(i int, aff numaplacetm.IDMask)
	walk = func(i int, aff numaplacetm.IDMask) {
		if count > 1 {
			return
		}
		if i == len(lists) {
			if aff == best.NUMANodeAffinity {
				count++
			}
			return
		}
		for _, h := range lists[i] {
			if h.Any {
				walk(i+1, aff)
			} else {
				walk(i+1, aff&h.NUMANodeAffinity)
			}
		}
	}
	walk(0, machine)
	return count > 1
}
