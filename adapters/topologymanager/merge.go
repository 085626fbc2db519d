package topologymanager

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/numaplace/numaplace/numa"
)

// Policy is a kubelet Topology Manager policy, spelled as in the
// kubelet's --topology-manager-policy flag.
type Policy string

// The kubelet's Topology Manager policies.
const (
	// PolicyNone admits every pod and merges nothing: the merged hint has no
	// NUMA affinity.
	PolicyNone Policy = "none"
	// PolicyBestEffort admits every pod and reports the best merged hint.
	PolicyBestEffort Policy = "best-effort"
	// PolicyRestricted admits a pod only when the best merged hint is
	// preferred.
	PolicyRestricted Policy = "restricted"
	// PolicySingleNUMANode keeps only preferred hints of one NUMA node (or of
	// no preference) and admits a pod only when they merge to a preferred
	// hint.
	PolicySingleNUMANode Policy = "single-numa-node"
)

// DefaultMaxAllowableNUMANodes is the kubelet's default limit on the number
// of NUMA nodes of a machine (its maxAllowableNUMANodes): above it the
// kubelet refuses to start its Topology Manager unless the policy option
// max-allowable-numa-nodes raises the limit.
const DefaultMaxAllowableNUMANodes = 8

// ErrHintConfig is the category of every error about the kubelet
// configuration or machine handed to this package: an unknown policy, a NUMA
// node ID outside 0-63 or listed twice, distances missing for
// prefer-closest-numa-nodes, a machine with more NUMA nodes than allowed.
var ErrHintConfig = errors.New("invalid kubelet topology manager configuration")

// PolicyOptions are the kubelet's Topology Manager policy options
// (--topology-manager-policy-options).
type PolicyOptions struct {
	// PreferClosestNUMANodes is the option prefer-closest-numa-nodes: among
	// merged hints of the same number of NUMA nodes, prefer the lowest
	// average distance. The kubelet ignores it under single-numa-node, and
	// so does Merge.
	PreferClosestNUMANodes bool
	// MaxAllowableNUMANodes is the option max-allowable-numa-nodes (0 means
	// DefaultMaxAllowableNUMANodes). The kubelet checks it when it starts,
	// not when it merges: Predict refuses a machine with more NUMA nodes,
	// Merge and NewMerger ignore it.
	MaxAllowableNUMANodes int
}

// Merger is the merge step of one kubelet Topology Manager policy on one
// machine: what the kubelet's policy objects (best-effort, restricted,
// single-numa-node, none) compute in their Merge method, without walking
// the cross product of the providers' hints. A Merger is immutable and safe
// for concurrent use.
//
// # What the kubelet computes
//
// The kubelet flattens the providers' hints into one list per resource: a
// provider whose map is empty (or nil) contributes the list [{any,
// preferred}], a resource whose list is nil [{any, preferred}], a resource
// whose list is empty [{any, not preferred}]. Under single-numa-node each
// list then keeps only its preferred hints of exactly one NUMA node or of no
// affinity. For every permutation (one hint per list) it forms a merged hint:
// its affinity is the machine's NUMA nodes AND every non-nil affinity, and it
// is preferred when every hint is preferred and all non-nil affinities are
// equal (bit for bit, nodes the machine does not have included). Merged hints
// with an empty affinity are dropped; among the others it keeps the best by
// this comparison (the first one found wins ties, which only equal
// affinities can produce):
//
//   - a preferred hint beats a non-preferred one;
//   - between preferred hints, the narrower affinity wins: fewer NUMA nodes,
//     then (with prefer-closest-numa-nodes) the lower average distance, then
//     the numerically smaller mask, that is the one whose highest node ID
//     where they differ is absent (the kubelet's comment speaks of "more
//     lower-numbered bits set"; the code compares the masks as integers:
//     {1,2} beats {0,3});
//   - between non-preferred hints, with B the largest over the lists of the
//     smallest number of NUMA nodes of a non-nil hint in the list (counted
//     on the raw mask: an empty mask counts 0, IDs the machine lacks count),
//     an affinity of exactly B nodes wins, then one of fewer than B nodes
//     (more nodes first), then one of more than B nodes; ties go to the
//     narrower affinity as above.
//
// When no permutation has a non-empty affinity the result is every NUMA node
// of the machine, not preferred. single-numa-node then reports an affinity
// equal to every NUMA node of the machine as no affinity (so on a one-node
// machine its answer never names the node). best-effort always admits;
// restricted and single-numa-node admit when the result is preferred; none
// returns no affinity, not preferred, and admits.
//
// # Map order does not matter
//
// The kubelet walks each provider's map in Go's random order, so the order
// of the per-resource lists, and of the permutations, changes from call to
// call. The result does not: the comparison above is a strict total order on
// (preferred, affinity) pairs (B and the distances are fixed before the walk
// starts), the set of merged hints does not depend on the order of the lists,
// and a merged hint's preferred flag does not depend on the order of its
// hints. The best element of a set under a total order is unique, and equal
// affinities give equal hints, so every walk returns the same hint. The
// property test of this package checks this against a walk of the cross
// product in shuffled orders.
//
// # How Merge finds it without the cross product
//
// A preferred merged hint needs every list to contribute a preferred hint
// whose raw affinity is one common mask R (or no affinity): the candidates
// are the masks R found among the preferred hints of every list that has no
// preferred "any" hint, plus "every node" when each list has a preferred
// "any" hint. One pass over the hints (intersecting candidate sets list by
// list) finds them: O(h·c) for h hints in total and c candidates (c is at
// most the length of the first list without a preferred "any" hint; big
// lists switch to a hash set).
//
// Only when no preferred candidate exists are non-preferred hints needed;
// their affinities are the intersections of one mask per list (masks are
// first compressed to the machine's n nodes and deduplicated per list). Merge
// finds the best of them in one of three ways, by a cost estimate:
//
//   - layered (n ≤ 12): the set of distinct reachable intersections, list by
//     list, deduplicated with a 2^n-bit bitmap, so that no layer holds more
//     than 2^n states: O(Σ_i |S_i|·|L_i|) with |S_i| ≤ min(Π_{j<i} |L_j|,
//     2^n), then one scan of the last layer;
//   - dense (n ≤ 16, long lists): superset-sum (zeta) transforms of the
//     state and list indicators, a product and a Möbius inversion give, for
//     every mask, the number of pairs whose intersection is exactly that
//     mask: O(n·2^n) per list whatever the lists' lengths (the hint
//     providers' full lists of 2^n - 1 masks);
//   - branch and bound (n > 12, short lists): depth first over the lists,
//     wide masks first, cutting every branch whose intersection already has
//     fewer nodes than the best found allows (an intersection only loses
//     nodes). The worst case is the product of the lists' lengths, as the
//     kubelet's, but a step is one AND and nothing is allocated; on random
//     64-node inputs it visits a small fraction of the product.
//
// For the kubelet's machines (n ≤ 8) a merge costs a few thousand word
// operations where the kubelet walks Π|L_i| permutations and allocates for
// each: 24 µs against the kubelet's 331,776 permutations for 4 providers of
// 24 hints on 8 nodes (BenchmarkMerge).
type Merger struct {
	policy   Policy
	closest  bool
	def      IDMask
	n        int
	full     uint64    // every compressed position
	identity bool      // node IDs are 0..n-1: compression is the identity
	bitOf    [64]uint8 // compressed position -> node ID
	posOf    [64]int8  // node ID -> compressed position, -1 when absent
	dist     []int     // n*n by compressed position, only with closest
}

// NewMerger returns the merge step of policy on a machine whose NUMA nodes
// have the given IDs (0-63, any order, each once; the kubelet's NUMAInfo.Nodes).
// distances is read only when opts.PreferClosestNUMANodes applies (not under
// single-numa-node or none); it must then hold every pair of the nodes.
// Errors wrap ErrHintConfig.
//
// Distances are taken by node ID. The kubelet reads each node's sysfs
// distance row, which lists the online nodes by position, and indexes it by
// node ID: on machines with sparse node IDs it reads the wrong column, or
// panics beyond the row's end. Merge gives the kubelet's answer wherever the
// kubelet reads the right column (node IDs 0..n-1).
func NewMerger(policy Policy, nodes []numa.NodeID, distances numa.Distances, opts PolicyOptions) (*Merger, error) {
	switch policy {
	case PolicyNone, PolicyBestEffort, PolicyRestricted, PolicySingleNUMANode:
	default:
		return nil, fmt.Errorf("%w: unknown topology manager policy %q (want none, best-effort, restricted or single-numa-node)",
			ErrHintConfig, string(policy))
	}
	m := &Merger{policy: policy}
	for i := range m.posOf {
		m.posOf[i] = -1
	}
	for _, id := range nodes {
		if id < 0 || id > 63 {
			return nil, fmt.Errorf("%w: NUMA node ID %d outside 0-63 (the kubelet's bitmask holds IDs 0-63)", ErrHintConfig, id)
		}
		if m.def.Contains(id) {
			return nil, fmt.Errorf("%w: NUMA node %d listed twice", ErrHintConfig, id)
		}
		m.def |= 1 << uint(id)
	}
	m.n = m.def.Count()
	if m.n == 64 {
		m.full = ^uint64(0)
	} else {
		m.full = 1<<uint(m.n) - 1
	}
	p := 0
	for d := uint64(m.def); d != 0; d &= d - 1 {
		b := bits.TrailingZeros64(d)
		m.bitOf[p] = uint8(b)
		m.posOf[b] = int8(p)
		p++
	}
	m.identity = uint64(m.def) == m.full
	m.closest = opts.PreferClosestNUMANodes && policy != PolicySingleNUMANode && policy != PolicyNone
	if m.closest {
		m.dist = make([]int, m.n*m.n)
		for i := 0; i < m.n; i++ {
			for j := 0; j < m.n; j++ {
				a, b := numa.NodeID(m.bitOf[i]), numa.NodeID(m.bitOf[j])
				d, ok := distances.Distance(a, b)
				if !ok {
					return nil, fmt.Errorf("%w: prefer-closest-numa-nodes needs the distance from node %d to node %d", ErrHintConfig, a, b)
				}
				m.dist[i*m.n+j] = d
			}
		}
	}
	return m, nil
}

// Policy returns the merger's policy.
func (m *Merger) Policy() Policy { return m.policy }

// DefaultAffinity returns every NUMA node of the machine (the kubelet's
// default affinity mask).
func (m *Merger) DefaultAffinity() IDMask { return m.def }

// Merge returns the merged hint and the admission verdict the kubelet's
// policy returns for these providers' hints (one map per hint provider,
// resource name to hints; see TopologyHint for nil and empty lists). The
// hints are only read. It allocates nothing with up to 16 resources, 256
// distinct masks in all and 32 distinct preferred candidates (the benchmarks'
// inputs, on 8 nodes as on 64), unless the layered method holds more than
// 256 states (machines of 9-12 nodes) or the dense method runs (long lists,
// such as the providers' lists of every mask): it takes two tables of 2^n
// words.
func (m *Merger) Merge(providersHints []map[string][]TopologyHint) (TopologyHint, bool) {
	return m.merge(providersHints, methodAuto)
}

// Merge is NewMerger followed by Merger.Merge, for one-off calls.
func Merge(policy Policy, nodes []numa.NodeID, distances numa.Distances,
	providersHints []map[string][]TopologyHint, opts PolicyOptions) (TopologyHint, bool, error) {
	mg, err := NewMerger(policy, nodes, distances, opts)
	if err != nil {
		return TopologyHint{}, false, err
	}
	h, ok := mg.Merge(providersHints)
	return h, ok, nil
}

// The algorithms of the non-preferred step, chosen by cost (methodAuto) or
// forced by tests.
const (
	methodAuto = iota
	methodLayered
	methodDense
	methodBranch
)

// denseMaxNodes bounds the dense method's tables (2^n words each).
const denseMaxNodes = 16

// The shared lists the kubelet synthesises for missing preferences.
var (
	anyPreferredList    = []TopologyHint{{Any: true, Preferred: true}}
	anyNotPreferredList = []TopologyHint{{Any: true}}
)

// flatten is the kubelet's filterProvidersHints: one list per resource, in
// provider order and, within a provider, in map order (which does not change
// the result; see Merger).
func flatten(dst [][]TopologyHint, providersHints []map[string][]TopologyHint) [][]TopologyHint {
	for _, p := range providersHints {
		if len(p) == 0 {
			dst = append(dst, anyPreferredList)
			continue
		}
		for _, hs := range p {
			switch {
			case hs == nil:
				dst = append(dst, anyPreferredList)
			case len(hs) == 0:
				dst = append(dst, anyNotPreferredList)
			default:
				dst = append(dst, hs)
			}
		}
	}
	return dst
}

func (m *Merger) merge(providersHints []map[string][]TopologyHint, method int) (TopologyHint, bool) {
	if m.policy == PolicyNone {
		return TopologyHint{Any: true}, true
	}
	var listBuf [16][]TopologyHint
	lists := flatten(listBuf[:0], providersHints)
	x, preferred := m.best(lists, method)
	var h TopologyHint
	if x == 0 {
		h = TopologyHint{NUMANodeAffinity: m.def}
	} else {
		h = TopologyHint{NUMANodeAffinity: m.expand(x), Preferred: preferred}
	}
	if m.policy == PolicySingleNUMANode && h.NUMANodeAffinity == m.def {
		h = TopologyHint{Any: true, Preferred: h.Preferred}
	}
	if m.policy == PolicyBestEffort {
		return h, true
	}
	return h, h.Preferred
}

// keep reports whether the policy's hint filter keeps h (single-numa-node
// keeps preferred hints of one node or of no affinity).
func (m *Merger) keep(h *TopologyHint) bool {
	if m.policy != PolicySingleNUMANode {
		return true
	}
	return h.Preferred && (h.Any || h.NUMANodeAffinity.Count() == 1)
}

// best returns the compressed affinity of the best merged hint and whether
// it is preferred, or 0 when no permutation has a non-empty affinity.
func (m *Merger) best(lists [][]TopologyHint, method int) (uint64, bool) {
	// Under single-numa-node a list may lose every hint: the cross product
	// is then empty.
	for _, l := range lists {
		kept := false
		for i := range l {
			if m.keep(&l[i]) {
				kept = true
				break
			}
		}
		if !kept {
			return 0, false
		}
	}
	if x := m.bestPreferred(lists); x != 0 {
		return x, true
	}
	return m.bestNonPreferred(lists, m.maxOfMinCounts(lists), method), false
}

// maxOfMinCounts is the kubelet's bestNonPreferredAffinityCount: over the
// lists, the largest of the smallest raw count of a non-nil hint.
func (m *Merger) maxOfMinCounts(lists [][]TopologyHint) int {
	best := 0
	for _, l := range lists {
		least := -1
		for i := range l {
			h := &l[i]
			if h.Any || !m.keep(h) {
				continue
			}
			if c := h.NUMANodeAffinity.Count(); least < 0 || c < least {
				least = c
			}
		}
		best = max(best, least)
	}
	return best
}

// bestPreferred returns the compressed affinity of the best preferred merged
// hint, or 0 when there is none.
func (m *Merger) bestPreferred(lists [][]TopologyHint) uint64 {
	var candBuf [32]IDMask
	cand := candBuf[:0]
	restricted, allAny := false, true
	var set map[IDMask]struct{}
	for _, l := range lists {
		hasAny := false
		for i := range l {
			if h := &l[i]; h.Any && h.Preferred && m.keep(h) {
				hasAny = true
				break
			}
		}
		if !hasAny {
			allAny = false
		}
		switch {
		case !restricted && hasAny:
			// Every list so far has a preferred "any" hint: each preferred
			// mask of this list is a candidate.
			cand = m.appendPreferred(cand, l)
		case !restricted:
			cand = m.appendPreferred(cand[:0], l)
			restricted = true
		case !hasAny:
			// The candidates must be preferred masks of this list too.
			if len(cand)*len(l) > 1<<12 {
				if set == nil {
					set = make(map[IDMask]struct{}, len(l))
				} else {
					clear(set)
				}
				for i := range l {
					if h := &l[i]; h.Preferred && !h.Any && m.keep(h) {
						set[h.NUMANodeAffinity] = struct{}{}
					}
				}
				cand = slices.DeleteFunc(cand, func(c IDMask) bool { _, ok := set[c]; return !ok })
			} else {
				cand = slices.DeleteFunc(cand, func(c IDMask) bool { return !m.hasPreferred(l, c) })
			}
		}
	}
	var best uint64
	if allAny {
		best = m.full
	}
	for _, c := range cand {
		x := m.compress(c)
		if x != 0 && (best == 0 || m.narrower(x, best)) {
			best = x
		}
	}
	return best
}

// appendPreferred appends the distinct preferred non-nil masks of l kept by
// the policy.
func (m *Merger) appendPreferred(dst []IDMask, l []TopologyHint) []IDMask {
	start := len(dst)
	for i := range l {
		h := &l[i]
		if !h.Preferred || h.Any || !m.keep(h) {
			continue
		}
		if len(l) <= 64 {
			if !slices.Contains(dst[start:], h.NUMANodeAffinity) {
				dst = append(dst, h.NUMANodeAffinity)
			}
		} else {
			dst = append(dst, h.NUMANodeAffinity)
		}
	}
	if len(l) > 64 {
		slices.Sort(dst[start:])
		dst = append(dst[:start], slices.Compact(dst[start:])...)
	}
	return dst
}

// hasPreferred reports whether l has a kept preferred hint of raw mask c.
func (m *Merger) hasPreferred(l []TopologyHint, c IDMask) bool {
	for i := range l {
		if h := &l[i]; h.Preferred && !h.Any && h.NUMANodeAffinity == c && m.keep(h) {
			return true
		}
	}
	return false
}

// effective appends to dst the distinct non-empty compressed affinities of
// l's kept hints ("any" is every node).
func (m *Merger) effective(dst []uint64, l []TopologyHint) []uint64 {
	start := len(dst)
	for i := range l {
		h := &l[i]
		if !m.keep(h) {
			continue
		}
		x := m.full
		if !h.Any {
			x = m.compress(h.NUMANodeAffinity)
		}
		if x == 0 {
			continue
		}
		if len(l) <= 64 {
			if !slices.Contains(dst[start:], x) {
				dst = append(dst, x)
			}
		} else {
			dst = append(dst, x)
		}
	}
	if len(l) > 64 {
		slices.Sort(dst[start:])
		dst = append(dst[:start], slices.Compact(dst[start:])...)
	}
	return dst
}

// bestNonPreferred returns the best non-empty intersection of one affinity
// per list under the non-preferred order, or 0 when every intersection is
// empty.
func (m *Merger) bestNonPreferred(lists [][]TopologyHint, b int, method int) uint64 {
	if m.full == 0 {
		return 0
	}
	if len(lists) == 0 {
		return m.full
	}
	if method == methodAuto {
		method = m.chooseMethod(lists)
	}
	if method == methodDense && m.n <= denseMaxNodes {
		return m.dense(lists, b)
	}
	var flatBuf [256]uint64
	var offBuf [17]int
	flat, offs := flatBuf[:0], append(offBuf[:0], 0)
	for _, l := range lists {
		flat = m.effective(flat, l)
		if len(flat) == offs[len(offs)-1] {
			return 0
		}
		offs = append(offs, len(flat))
	}
	if method == methodLayered && m.n <= 12 {
		return m.layered(flat, offs, b)
	}
	return m.branchAndBound(flat, offs, b)
}

// chooseMethod picks the cheapest method by its cost estimate: layered
// (deduplicated states, up to 12 nodes) or dense (up to 16 nodes), and
// branch and bound on larger machines.
func (m *Merger) chooseMethod(lists [][]TopologyHint) int {
	if m.n > denseMaxNodes {
		return methodBranch
	}
	states := 1 << uint(m.n)
	dense := (3*m.n + 2) * states * len(lists)
	if m.n > 12 {
		product := 1
		for _, l := range lists {
			if product = product * len(l); product > dense {
				return methodDense
			}
		}
		return methodBranch
	}
	layered, reach := 0, 1
	for _, l := range lists {
		layered += reach * len(l)
		if layered > dense {
			return methodDense
		}
		reach = min(reach*len(l), states)
	}
	return methodLayered
}

// layered keeps the distinct reachable intersections after each list (at
// most 2^n ≤ 4096 of them, deduplicated with a bitmap) and scans the last
// layer's distinct masks for the best.
func (m *Merger) layered(flat []uint64, offs []int, b int) uint64 {
	var stateBuf, nextBuf [256]uint64
	var seen [64]uint64 // one bit per compressed mask of up to 12 nodes
	states := append(stateBuf[:0], m.full)
	next := nextBuf[:0]
	for li := 1; li < len(offs); li++ {
		eff := flat[offs[li-1]:offs[li]]
		next = next[:0]
		for _, s := range states {
			for _, e := range eff {
				x := s & e
				if x == 0 || seen[x>>6]&(1<<(x&63)) != 0 {
					continue
				}
				seen[x>>6] |= 1 << (x & 63)
				next = append(next, x)
			}
		}
		for _, x := range next {
			seen[x>>6] = 0
		}
		if len(next) == 0 {
			return 0
		}
		states, next = next, states
	}
	var best uint64
	for _, x := range states {
		if best == 0 || m.nonPreferredBefore(x, best, b) {
			best = x
		}
	}
	return best
}

// branchAndBound searches the intersections depth first, masks with more
// nodes first, and cuts a branch when every intersection below it has fewer
// nodes than the best found allows: an intersection only loses nodes, and
// once the best has b nodes (or, below b, c nodes) nothing with fewer can
// beat it. Its worst case is the product of the lists' lengths, as the
// kubelet's walk, but each step is one AND and nothing is allocated.
func (m *Merger) branchAndBound(flat []uint64, offs []int, b int) uint64 {
	// Masks with more nodes first, so that good incumbents come early.
	for li := 1; li < len(offs); li++ {
		slices.SortFunc(flat[offs[li-1]:offs[li]], func(x, y uint64) int {
			return bits.OnesCount64(y) - bits.OnesCount64(x)
		})
	}
	bb := bnb{m: m, flat: flat, offs: offs, b: b}
	bb.search(1, m.full)
	return bb.best
}

type bnb struct {
	m    *Merger
	flat []uint64
	offs []int
	b    int
	best uint64
	// floor: intersections with fewer nodes cannot beat best (-1: no bound).
	floor int
}

func (bb *bnb) search(li int, s uint64) {
	if li == len(bb.offs) {
		if bb.best == 0 || bb.m.nonPreferredBefore(s, bb.best, bb.b) {
			bb.best = s
			switch c := bits.OnesCount64(s); {
			case c <= bb.b:
				bb.floor = c
			default:
				bb.floor = 0
			}
		}
		return
	}
	for _, e := range bb.flat[bb.offs[li-1]:bb.offs[li]] {
		x := s & e
		if x == 0 {
			continue
		}
		c := bits.OnesCount64(x)
		if bb.best != 0 && c < bb.floor {
			continue
		}
		if bb.best != 0 && c == bb.floor && c > 0 {
			// Only x itself can still matter: keep it if every remaining
			// list has a superset of it.
			if bb.keepsAll(li+1, x) {
				bb.search(len(bb.offs), x)
			}
			continue
		}
		bb.search(li+1, x)
	}
}

// keepsAll reports whether every list from li on has a mask containing x.
func (bb *bnb) keepsAll(li int, x uint64) bool {
	for ; li < len(bb.offs); li++ {
		found := false
		for _, e := range bb.flat[bb.offs[li-1]:bb.offs[li]] {
			if e&x == x {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// dense computes the reachable intersections with superset-sum transforms:
// for each list, the number of (state, mask) pairs whose intersection is
// exactly x is the Möbius inversion of (#states ⊇ x)·(#masks ⊇ x).
func (m *Merger) dense(lists [][]TopologyHint, b int) uint64 {
	size := 1 << uint(m.n)
	cur := make([]int64, size)
	f := make([]int64, size)
	cur[m.full] = 1
	for _, l := range lists {
		clear(f)
		some := false
		for i := range l {
			h := &l[i]
			if !m.keep(h) {
				continue
			}
			x := m.full
			if !h.Any {
				x = m.compress(h.NUMANodeAffinity)
			}
			if x != 0 {
				f[x] = 1
				some = true
			}
		}
		if !some {
			return 0
		}
		supersetSums(f, m.n)
		supersetSums(cur, m.n)
		for x := range cur {
			cur[x] *= f[x]
		}
		mobius(cur, m.n)
		reached := false
		for x := 1; x < size; x++ {
			if cur[x] > 0 {
				cur[x] = 1
				reached = true
			} else {
				cur[x] = 0
			}
		}
		cur[0] = 0
		if !reached {
			return 0
		}
	}
	var best uint64
	for x := 1; x < size; x++ {
		if cur[x] != 0 && (best == 0 || m.nonPreferredBefore(uint64(x), best, b)) {
			best = uint64(x)
		}
	}
	return best
}

// supersetSums replaces a[x] by the sum of a[y] over the supersets y of x.
func supersetSums(a []int64, n int) {
	for j := 0; j < n; j++ {
		bit := 1 << uint(j)
		for x := range a {
			if x&bit == 0 {
				a[x] += a[x|bit]
			}
		}
	}
}

// mobius inverts supersetSums.
func mobius(a []int64, n int) {
	for j := 0; j < n; j++ {
		bit := 1 << uint(j)
		for x := range a {
			if x&bit == 0 {
				a[x] -= a[x|bit]
			}
		}
	}
}

// narrower is the kubelet's comparison of two different affinities
// (compressed): Narrowest (fewer nodes, then the smaller integer) or, with
// prefer-closest-numa-nodes, Closest (fewer nodes, then the lower average
// distance, then the smaller integer). Compression keeps the integer order.
// The average over the same number of nodes compares as the sum over ordered
// pairs, diagonal included, which is what the kubelet averages; the float
// division cannot merge two different integer sums (they are far below
// 2^52).
func (m *Merger) narrower(x, y uint64) bool {
	cx, cy := bits.OnesCount64(x), bits.OnesCount64(y)
	if cx != cy {
		return cx < cy
	}
	if m.closest {
		if sx, sy := m.distanceSum(x), m.distanceSum(y); sx != sy {
			return sx < sy
		}
	}
	return x < y
}

// nonPreferredBefore reports whether non-preferred affinity x beats y (x !=
// y) in the kubelet's comparison with bestNonPreferredAffinityCount b: b
// nodes first, then fewer than b (more first), then more than b; ties by
// narrower.
func (m *Merger) nonPreferredBefore(x, y uint64, b int) bool {
	if x == y {
		return false
	}
	cx, cy := bits.OnesCount64(x), bits.OnesCount64(y)
	tx, ty := tier(cx, b), tier(cy, b)
	if tx != ty {
		return tx < ty
	}
	if tx == 1 && cx != cy {
		return cx > cy
	}
	return m.narrower(x, y)
}

func tier(c, b int) int {
	switch {
	case c == b:
		return 0
	case c < b:
		return 1
	default:
		return 2
	}
}

// distanceSum sums the distances over the ordered pairs of x's nodes,
// each node with itself included.
func (m *Merger) distanceSum(x uint64) int {
	s := 0
	for a := x; a != 0; a &= a - 1 {
		row := m.dist[bits.TrailingZeros64(a)*m.n:]
		for c := x; c != 0; c &= c - 1 {
			s += row[bits.TrailingZeros64(c)]
		}
	}
	return s
}

// compress maps the machine's nodes of r to consecutive positions.
func (m *Merger) compress(r IDMask) uint64 {
	if m.identity {
		return uint64(r & m.def)
	}
	var x uint64
	for w := uint64(r & m.def); w != 0; w &= w - 1 {
		x |= 1 << uint(m.posOf[bits.TrailingZeros64(w)])
	}
	return x
}

// expand is the inverse of compress.
func (m *Merger) expand(x uint64) IDMask {
	if m.identity {
		return IDMask(x)
	}
	var r IDMask
	for ; x != 0; x &= x - 1 {
		r |= 1 << uint(m.bitOf[bits.TrailingZeros64(x)])
	}
	return r
}
