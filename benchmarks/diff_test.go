package benchmarks

import (
	"flag"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"

	numaplacetm "github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/numa"
)

var (
	diffN     = flag.Int("diff.n", 100_000, "number of seeded random inputs of TestMergeDifferential (2-8 NUMA nodes)")
	diffLarge = flag.Int("diff.large", 10_000, "number of seeded random inputs of TestMergeDifferentialLarge (9-64 NUMA nodes)")
	diffSeed  = flag.Uint64("diff.seed", 1, "seed of TestMergeDifferential's inputs (input i is drawn from PCG(seed, i))")
)

// maxPermutations bounds the cross product of one random input, so that the
// kubelet's walk (which allocates for every permutation) stays cheap enough
// to run 100,000 inputs under seven configurations in the default test run.
const maxPermutations = 1024

// diffInput is one random input of the differential test: a machine of n
// NUMA nodes with IDs 0..n-1 and a SLIT, and the hint providers' maps.
type diffInput struct {
	n         int
	rows      [][]int
	providers []map[string][]numaplacetm.TopologyHint
}

// diffConfig is one kubelet configuration the inputs are merged under.
type diffConfig struct {
	policy  numaplacetm.Policy
	closest bool
}

func (c diffConfig) String() string {
	if c.closest {
		return string(c.policy) + "+prefer-closest-numa-nodes"
	}
	return string(c.policy)
}

// diffConfigs are the policies compared: the three the kubelet merges with,
// each with and without prefer-closest-numa-nodes (the kubelet ignores the
// option under single-numa-node; so must numaplace), and none.
var diffConfigs = []diffConfig{
	{numaplacetm.PolicyBestEffort, false}, {numaplacetm.PolicyBestEffort, true},
	{numaplacetm.PolicyRestricted, false}, {numaplacetm.PolicyRestricted, true},
	{numaplacetm.PolicySingleNUMANode, false}, {numaplacetm.PolicySingleNUMANode, true},
	{numaplacetm.PolicyNone, false},
}

// genDistances draws a valid SLIT for n nodes (10 on the diagonal, every
// remote distance at least 10, as numa.NewDistances requires): flat (every
// remote 20: every average ties), two sockets (12 within, 32 across),
// random symmetric or random asymmetric from a small palette (small, so
// that average distances tie often and the integer tie-break is reached).
func genDistances(r *rand.Rand, n int) [][]int {
	rows := make([][]int, n)
	for i := range rows {
		rows[i] = make([]int, n)
		rows[i][i] = 10
	}
	palette := []int{10, 11, 12, 16, 20, 21, 32}
	mode := r.IntN(4)
	half := (n + 1) / 2
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i == j {
				continue
			}
			switch mode {
			case 0:
				rows[i][j] = 20
			case 1:
				if (i < half) == (j < half) {
					rows[i][j] = 12
				} else {
					rows[i][j] = 32
				}
			case 2:
				if j > i {
					rows[i][j] = palette[r.IntN(len(palette))]
					rows[j][i] = rows[i][j]
				}
			case 3:
				rows[i][j] = palette[r.IntN(len(palette))]
			}
		}
	}
	return rows
}

// genInput draws one input. Providers: 1-4, each a nil map, an empty map, or
// 1-3 resources; a resource's list is nil, empty, or 1-8 hints (the cross
// product is capped at maxPermutations). A hint has no affinity (nil, 10%),
// an empty non-nil affinity (3%), or a mask: mostly from a small pool shared
// by the input (so that masks recur across lists and preferred merges
// happen), otherwise fresh; 10% of masks also hold node IDs beyond the
// machine (the kubelet's bitmask takes 0-63 and so does its merge). A list
// marks its hints preferred either as the kubelet's providers do (those of
// the fewest nodes) or at random.
func genInput(r *rand.Rand) diffInput { return genInputNodes(r, 2, 8) }

// genInputNodes is genInput on a machine of lo-hi NUMA nodes (at most 64).
func genInputNodes(r *rand.Rand, lo, hi int) diffInput {
	n := lo + r.IntN(hi-lo+1)
	in := diffInput{n: n, rows: genDistances(r, n)}
	machine := uint64(1)<<uint(n) - 1 // all ones for n = 64
	randomMask := func() numaplacetm.IDMask {
		var m uint64
		for m == 0 {
			m = r.Uint64() & machine
			if r.IntN(3) == 0 { // bias towards narrow masks
				m &= r.Uint64()
			}
		}
		if n < 64 && r.IntN(10) == 0 {
			m |= 1 << uint(n+r.IntN(64-n))
		}
		return numaplacetm.IDMask(m)
	}
	pool := make([]numaplacetm.IDMask, 1+r.IntN(6))
	for i := range pool {
		pool[i] = randomMask()
	}
	if r.IntN(4) == 0 {
		pool = append(pool, numaplacetm.IDMask(machine))
	}

	type slot struct {
		p   int
		res string
	}
	var slots []slot
	providers := 1 + r.IntN(4)
	in.providers = make([]map[string][]numaplacetm.TopologyHint, providers)
	for p := range in.providers {
		switch r.IntN(20) {
		case 0:
			continue // nil map
		case 1:
			in.providers[p] = map[string][]numaplacetm.TopologyHint{}
			continue
		}
		in.providers[p] = map[string][]numaplacetm.TopologyHint{}
		for k := range 1 + r.IntN(3) {
			slots = append(slots, slot{p, fmt.Sprintf("resource%d", k)})
		}
	}
	lengths := make([]int, len(slots))
	for i := range lengths {
		switch r.IntN(12) {
		case 0:
			lengths[i] = -1 // nil list
		case 1:
			lengths[i] = 0 // empty list
		default:
			lengths[i] = 1 + r.IntN(8)
		}
	}
	for {
		product, longest := 1, 0
		for i, l := range lengths {
			product *= max(l, 1)
			if l > lengths[longest] {
				longest = i
			}
		}
		if product <= maxPermutations {
			break
		}
		lengths[longest]--
	}
	for i, s := range slots {
		if lengths[i] < 0 {
			in.providers[s.p][s.res] = nil
			continue
		}
		hs := make([]numaplacetm.TopologyHint, lengths[i])
		for k := range hs {
			switch x := r.IntN(100); {
			case x < 10:
				hs[k] = numaplacetm.AnyHint(false)
			case x < 13:
				hs[k] = numaplacetm.Hint(0, false)
			case x < 75:
				hs[k] = numaplacetm.Hint(pool[r.IntN(len(pool))], false)
			default:
				hs[k] = numaplacetm.Hint(randomMask(), false)
			}
		}
		if r.IntN(2) == 0 {
			least := 65
			for _, h := range hs {
				if !h.Any {
					least = min(least, h.NUMANodeAffinity.Count())
				}
			}
			for k := range hs {
				hs[k].Preferred = hs[k].Any || hs[k].NUMANodeAffinity.Count() == least
			}
		} else {
			for k := range hs {
				hs[k].Preferred = r.IntN(2) == 0
			}
		}
		in.providers[s.p][s.res] = hs
	}
	return in
}

// String writes the input out in a form that can be pasted into a test.
func (in diffInput) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "nodes 0-%d, distances %v\n", in.n-1, in.rows)
	for p, m := range in.providers {
		if m == nil {
			fmt.Fprintf(&b, "  provider %d: nil map\n", p)
			continue
		}
		if len(m) == 0 {
			fmt.Fprintf(&b, "  provider %d: empty map\n", p)
			continue
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			switch hs := m[k]; {
			case hs == nil:
				fmt.Fprintf(&b, "  provider %d %s: nil list\n", p, k)
			default:
				fmt.Fprintf(&b, "  provider %d %s: %v\n", p, k, hs)
			}
		}
	}
	return b.String()
}

// diffOutcome is a merge result in numaplace's terms.
type diffOutcome struct {
	hint  numaplacetm.TopologyHint
	admit bool
}

func (o diffOutcome) equal(p diffOutcome) bool { return o.hint.Equal(p.hint) && o.admit == p.admit }

func (o diffOutcome) String() string { return fmt.Sprintf("%v admit=%v", o.hint, o.admit) }

// mergeBoth merges one input under one configuration with numaplace and
// with the kubelet.
func mergeBoth(in diffInput, c diffConfig) (np, kl diffOutcome, err error) {
	ids := nodeIDs(in.n)
	dist, err := numa.NewDistances(ids, in.rows)
	if err != nil {
		return np, kl, err
	}
	mg, err := numaplacetm.NewMerger(c.policy, ids, dist, numaplacetm.PolicyOptions{PreferClosestNUMANodes: c.closest})
	if err != nil {
		return np, kl, err
	}
	np.hint, np.admit = mg.Merge(in.providers)
	pol, err := kubeletPolicy(c.policy, kubeletNUMAInfo(ids, in.rows), c.closest)
	if err != nil {
		return np, kl, err
	}
	h, admit := pol.Merge(quiet, toKubeletHints(in.providers))
	return np, diffOutcome{fromKubeletHint(h), admit}, nil
}

// mismatch reports whether numaplace and the kubelet disagree on the input
// under c.
func mismatch(in diffInput, c diffConfig) bool {
	np, kl, err := mergeBoth(in, c)
	return err != nil || !np.equal(kl)
}

// shrink removes providers, resources and hints from a mismatching input
// for as long as it still mismatches, to report a small case.
func shrink(in diffInput, c diffConfig) diffInput {
	clone := func(in diffInput) diffInput {
		out := in
		out.providers = make([]map[string][]numaplacetm.TopologyHint, len(in.providers))
		for p, m := range in.providers {
			if m == nil {
				continue
			}
			out.providers[p] = map[string][]numaplacetm.TopologyHint{}
			for k, hs := range m {
				if hs == nil {
					out.providers[p][k] = nil
				} else {
					out.providers[p][k] = slices.Clone(hs)
				}
			}
		}
		return out
	}
	for changed := true; changed; {
		changed = false
		for p := 0; p < len(in.providers) && len(in.providers) > 1; p++ {
			try := clone(in)
			try.providers = slices.Delete(try.providers, p, p+1)
			if mismatch(try, c) {
				in, changed = try, true
				p--
			}
		}
		for p := range in.providers {
			keys := make([]string, 0, len(in.providers[p]))
			for k := range in.providers[p] {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				try := clone(in)
				delete(try.providers[p], k)
				if mismatch(try, c) {
					in, changed = try, true
					continue
				}
				for i := 0; i < len(in.providers[p][k]); i++ {
					try := clone(in)
					try.providers[p][k] = slices.Delete(try.providers[p][k], i, i+1)
					if mismatch(try, c) {
						in, changed = try, true
						i--
					}
				}
			}
		}
	}
	return in
}

// diffStats counts what the inputs covered and how they merged.
type diffStats struct {
	inputs, nilMaps, emptyMaps, nilLists, emptyLists, anyHints, emptyMasks, outsideMasks int
	permutations                                                                         int
	// per configuration: admitted, preferred result, "any" result, result
	// on a strict subset of the machine.
	admitted, preferred, anyResult, narrowed [8]int
	// inputs where prefer-closest-numa-nodes changed best-effort's result
	closestChanged int
}

func (s *diffStats) add(o *diffStats) {
	s.inputs += o.inputs
	s.nilMaps += o.nilMaps
	s.emptyMaps += o.emptyMaps
	s.nilLists += o.nilLists
	s.emptyLists += o.emptyLists
	s.anyHints += o.anyHints
	s.emptyMasks += o.emptyMasks
	s.outsideMasks += o.outsideMasks
	s.permutations += o.permutations
	s.closestChanged += o.closestChanged
	for i := range s.admitted {
		s.admitted[i] += o.admitted[i]
		s.preferred[i] += o.preferred[i]
		s.anyResult[i] += o.anyResult[i]
		s.narrowed[i] += o.narrowed[i]
	}
}

func (s *diffStats) count(in diffInput) {
	s.inputs++
	product := 1
	for _, m := range in.providers {
		switch {
		case m == nil:
			s.nilMaps++
		case len(m) == 0:
			s.emptyMaps++
		}
		for _, hs := range m {
			switch {
			case hs == nil:
				s.nilLists++
			case len(hs) == 0:
				s.emptyLists++
			}
			product *= max(len(hs), 1)
			for _, h := range hs {
				switch {
				case h.Any:
					s.anyHints++
				case h.NUMANodeAffinity == 0:
					s.emptyMasks++
				case uint64(h.NUMANodeAffinity)>>uint(in.n) != 0:
					s.outsideMasks++
				}
			}
		}
	}
	s.permutations += product
}

// TestMergeDifferential merges seeded random inputs with numaplace's
// numaplacetm.Merger and with the kubelet's own Topology Manager policies
// (k8s.io/kubernetes v1.37.2, pkg/kubelet/cm/topologymanager) under
// best-effort, restricted and single-numa-node, each with and without
// prefer-closest-numa-nodes, and none, and requires identical results: the
// merged hint's affinity (nil or the same node IDs) and preferred flag, and
// the admission verdict.
//
// The machines have 2-8 NUMA nodes with IDs 0..n-1: with sparse IDs and
// prefer-closest-numa-nodes the kubelet indexes each node's distance row
// (positional in sysfs) by node ID and reads the wrong column or panics, a
// kubelet bug numaplace does not reproduce (see numaplacetm.NewMerger).
//
// Map order: the kubelet walks each provider's map in Go's random order;
// TestKubeletMapOrder shows that its result does not depend on it, so the
// comparison here is not flaky. Input i is drawn from PCG(-diff.seed, i), so
// a failure names the seed and index that reproduce it; the failing input
// is shrunk (providers, resources and hints removed while it still
// mismatches) before it is reported. -diff.n sets the number of inputs
// (default 100,000: under a minute on 2 cores).
func TestMergeDifferential(t *testing.T) {
	runDifferential(t, *diffN, 2, 8)
}

// TestMergeDifferentialLarge is TestMergeDifferential on machines of 9-64
// NUMA nodes (IDs 0..n-1), -diff.large inputs (default 10,000), drawn from
// PCG(-diff.seed, 1<<32 + i). The kubelet refuses such machines at start
// (TestKubeletRefuses64Nodes) unless max-allowable-numa-nodes is raised,
// but its policies' merge code runs on them unchanged (its walk costs the
// product of the lists' lengths whatever the number of nodes); they are
// where numaplace's merge changes method for its non-preferred step
// (above 12 nodes it chooses between its dense method and branch and bound
// by cost, above 16 it always takes branch and bound), so they are checked
// against the kubelet's code too.
func TestMergeDifferentialLarge(t *testing.T) {
	runDifferential(t, *diffLarge, 9, 64)
}

// runDifferential runs count inputs of lo-hi nodes over all configurations
// on GOMAXPROCS workers, and reports mismatches and what was covered.
func runDifferential(t *testing.T, count, lo, hi int) {
	stream := uint64(0)
	if lo > 8 {
		stream = 1 << 32
	}
	workers := runtime.GOMAXPROCS(0)
	var (
		mu       sync.Mutex
		total    diffStats
		failures []string
		wg       sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st diffStats
			var local []string
			for i := w; i < count; i += workers {
				if len(local) >= 3 {
					break
				}
				in := genInputNodes(rand.New(rand.NewPCG(*diffSeed, stream+uint64(i))), lo, hi)
				st.count(in)
				outcomes := make([]diffOutcome, len(diffConfigs))
				for ci, c := range diffConfigs {
					np, kl, err := mergeBoth(in, c)
					if err != nil {
						local = append(local, fmt.Sprintf("input %d (seed %d) %v: %v\n%v", i, *diffSeed, c, err, in))
						break
					}
					if !np.equal(kl) {
						small := shrink(in, c)
						snp, skl, _ := mergeBoth(small, c)
						local = append(local, fmt.Sprintf("input %d (seed %d) %v: numaplace %v, kubelet %v\n%v"+
							"shrunk: numaplace %v, kubelet %v\n%v", i, *diffSeed, c, np, kl, in, snp, skl, small))
						break
					}
					outcomes[ci] = np
					if np.admit {
						st.admitted[ci]++
					}
					switch {
					case np.hint.Any:
						st.anyResult[ci]++
					case bits.OnesCount64(uint64(np.hint.NUMANodeAffinity)) < in.n:
						st.narrowed[ci]++
					}
					if np.hint.Preferred {
						st.preferred[ci]++
					}
				}
				if !outcomes[0].equal(outcomes[1]) {
					st.closestChanged++
				}
			}
			mu.Lock()
			total.add(&st)
			failures = append(failures, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d inputs of %d-%d NUMA nodes (seed %d), %d permutations in all: %d nil provider maps, %d empty maps, "+
		"%d nil lists, %d empty lists, %d nil-affinity hints, %d empty masks, %d masks with IDs beyond the machine",
		total.inputs, lo, hi, *diffSeed, total.permutations, total.nilMaps, total.emptyMaps, total.nilLists,
		total.emptyLists, total.anyHints, total.emptyMasks, total.outsideMasks)
	t.Logf("prefer-closest-numa-nodes changed best-effort's result on %d inputs", total.closestChanged)
	for ci, c := range diffConfigs {
		t.Logf("%-45s admitted %6d, preferred %6d, no affinity %6d, narrower than the machine %6d",
			c, total.admitted[ci], total.preferred[ci], total.anyResult[ci], total.narrowed[ci])
	}
}

// TestGenInputDeterministic guards the reproducibility the differential
// test's failure messages rely on: the same seed and index give the same
// input.
func TestGenInputDeterministic(t *testing.T) {
	for i := range uint64(50) {
		a := genInput(rand.New(rand.NewPCG(7, i)))
		b := genInput(rand.New(rand.NewPCG(7, i)))
		require.Equal(t, a.String(), b.String())
	}
}

// kubeletRound runs the kubelet's policy on the input and returns its
// result.
func kubeletRound(tb testing.TB, pol topologymanager.Policy, providers []map[string][]topologymanager.TopologyHint) diffOutcome {
	tb.Helper()
	h, admit := pol.Merge(quiet, providers)
	return diffOutcome{fromKubeletHint(h), admit}
}
