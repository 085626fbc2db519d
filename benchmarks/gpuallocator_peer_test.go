//go:build cgo

package benchmarks

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-gpuallocator/gpuallocator"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/adapters/kubelet/kubelettest"
	"github.com/numaplace/numaplace/topology"
)

// The link type values written out in gpuallocator_test.go are the ones
// go-gpuallocator's own String method names as intended, and peerDevices
// gives every pair of GPUs the links numaplace knows of.
func TestPeerLinkTypes(t *testing.T) {
	name := func(v uint) string {
		var l gpuallocator.P2PLink
		setLinkType(&l.Type, v)
		return l.Type.String()
	}
	require.Equal(t, "P2PLinkCrossCPU", name(peerCrossCPU))
	require.Equal(t, "P2PLinkSameCPU", name(peerSameCPU))
	require.Equal(t, "P2PLinkHostBridge", name(peerHostBridge))
	require.Equal(t, "P2PLinkSingleSwitch", name(peerSingleSwitch))
	require.Equal(t, "SingleNVLINKLink", name(peerNVLink1))
	require.Equal(t, "TwelveNVLINKLinks", name(peerNVLink1+11))
	require.Equal(t, "EighteenNVLINKLinks", name(peerNVLink1+peerMaxNVLinks-1))

	links := func(d *gpuallocator.Device, to int) string {
		var s []string
		for _, l := range d.Links[to] {
			require.Equal(t, to, l.GPU.Index)
			s = append(s, l.Type.String())
		}
		return strings.Join(s, " ")
	}
	a100, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	devs := peerDevices(a100)
	require.Len(t, devs, 8)
	// GPUs 0 and 1: node 3, switch sw0; 2: node 1 (socket 0); 4: node 7
	// (socket 1). NV12 between every pair.
	require.Equal(t, "P2PLinkSingleSwitch TwelveNVLINKLinks", links(devs[0], 1))
	require.Equal(t, "P2PLinkSameCPU TwelveNVLINKLinks", links(devs[0], 2))
	require.Equal(t, "P2PLinkCrossCPU TwelveNVLINKLinks", links(devs[0], 4))
	require.Equal(t, "0000:07:00.0", devs[0].PCI.BusID)
	require.Equal(t, uint(3), *devs[0].CPUAffinity)
	m16 := peerDevices(kubelettest.Machine16(t))
	require.Equal(t, "P2PLinkSingleSwitch TwelveNVLINKLinks", links(m16[0], 1))
	require.Equal(t, "P2PLinkSingleSwitch TwoNVLINKLinks", links(m16[0], 2))
	require.Equal(t, "P2PLinkHostBridge", links(m16[0], 4))
	require.Equal(t, "P2PLinkCrossCPU", links(m16[0], 8))
	require.Equal(t, "GPU-5", m16[5].UUID)
	worst := peerDevices(kubelettest.Machine16Worst(t))
	// One GPU per node, one socket: same CPU; 1+(3*4)%5 = 3 links.
	require.Equal(t, "P2PLinkSameCPU ThreeNVLINKLinks", links(worst[3], 4))
	for _, ds := range [][]*gpuallocator.Device{devs, m16, worst} {
		for _, d := range ds {
			require.Len(t, d.Links, len(ds)-1, "GPU %d links to every other GPU", d.Index)
			for to, ls := range d.Links {
				require.Equal(t, links(d, to), links(ds[to], d.Index), "links %d-%d both ways", d.Index, to)
				require.NotEmpty(t, ls)
			}
		}
	}
}

// The constructed devices drive go-gpuallocator's best-effort policy: each
// kind of link (PCIe switch, socket, NVLink count) decides a choice that
// the same devices without links decide otherwise, so the benchmark does
// not measure a policy that sees nothing.
func TestPeerDevicesDrivePolicy(t *testing.T) {
	a100, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	m16 := kubelettest.Machine16(t)
	policy := gpuallocator.NewBestEffortPolicy()
	for _, c := range []struct {
		why       string
		m         *topology.Machine
		available []string
		size      int
		want      []int
	}{
		{"dgx-a100: 2 GPUs of 8 are a pair under one switch, NVLinked", a100, gpuIDs(0, 7), 2, []int{0, 1}},
		{"dgx-a100: the switch decides", a100, []string{"0", "2", "3"}, 2, []int{2, 3}},
		{"dgx-a100: the socket decides", a100, []string{"0", "4", "6"}, 2, []int{4, 6}},
		{"dgx-a100: 4 GPUs of 8 are two switches of one socket", a100, gpuIDs(0, 7), 4, []int{0, 1, 2, 3}},
		{"devices16: the NVLink count decides (12 against 2)", m16, []string{"0", "2", "3"}, 2, []int{2, 3}},
		{"devices16: the NUMA node decides", m16, []string{"0", "8", "12"}, 2, []int{8, 12}},
	} {
		peer := newPeerSide(c.m)
		avail := peer.list(t, c.available)
		got := indices(policy.Allocate(avail, nil, c.size))
		require.Equal(t, c.want, got, c.why)
		checkAnswer(t, c.why, got, prefCase{available: c.available, size: c.size})
		// Without links every set scores 0 and the policy takes the first
		// partition's first set: the lowest indices.
		var bare []*gpuallocator.Device
		for _, d := range avail {
			bare = append(bare, &gpuallocator.Device{Index: d.Index, Links: map[int][]gpuallocator.P2PLink{}})
		}
		if !slices.Equal(got, indices(bare[:c.size])) {
			require.NotEqual(t, got, indices(policy.Allocate(bare, nil, c.size)), c.why)
		}
	}
	// Must-include GPUs are kept: 2 GPUs with GPU 2 on dgx-a100 are 2 and
	// its switch mate 3.
	peer := newPeerSide(a100)
	require.Equal(t, []int{2, 3}, indices(policy.Allocate(peer.list(t, gpuIDs(0, 7)), peer.list(t, []string{"2"}), 2)))
}

// peerKey is the prefix of numaplace's preference order (devchoice.Rank)
// that its chooser finds exactly below its budgets: NUMA nodes, unknown
// node, SLIT distance over the pairs of nodes, PCIe switches; then the
// NVLink count, which it finds greedily among many combinations.
type peerKey struct {
	nodes, unknown, distance, switches int
	nvlinks                            int
}

// keyOf ranks the GPU set ids on m as numaplace's device plugin ranks it.
func keyOf(t *testing.T, m *topology.Machine, p *kubelet.PreferredAllocator, ids []int) peerKey {
	var s []string
	for _, id := range ids {
		s = append(s, strconv.Itoa(id))
	}
	pref, err := p.Prefer(s, nil, len(s))
	require.NoError(t, err)
	k := peerKey{nodes: len(pref.NUMANodes), switches: pref.Switches, nvlinks: pref.NVLinks}
	if pref.UnknownNUMA > 0 {
		k.nodes, k.unknown = k.nodes+1, 1
	}
	for i, a := range pref.NUMANodes {
		for _, b := range pref.NUMANodes[i+1:] {
			d, _ := m.Distances().Distance(a, b)
			k.distance += d
		}
	}
	return k
}

// comparePrefix compares the exact prefix (nodes, unknown, distance,
// switches) of two keys.
func comparePrefix(a, b peerKey) int {
	return cmp.Or(cmp.Compare(a.nodes, b.nodes), cmp.Compare(a.unknown, b.unknown),
		cmp.Compare(a.distance, b.distance), cmp.Compare(a.switches, b.switches))
}

// TestPeerAgreement compares numaplace's and go-gpuallocator's answers on
// the benchmark's cases and on seeded random requests (free GPUs, must
// include, size) on dgx-a100, xeon-2s-snc2-8gpu, kubelettest.Machine16 and
// kubelettest.Machine16Worst, and logs how often they choose the same GPUs and the
// first differences. It requires both answers to be answers, and where
// they differ, numaplace's answer to rank no worse than the peer's on the
// criteria its chooser finds exactly (NUMA nodes, distance, PCIe switches):
// the peer's answer is an independent candidate for numaplace's search.
// The two policies want different things (go-gpuallocator maximizes the
// score of a whole partition of the free GPUs into sets of the size, a sum
// of pair scores where one NVLink outweighs any PCIe level), so differing
// answers are expected and not failures.
//
// On the 16-GPU machines at most 10 GPUs are free in the random requests
// (the peer walks every partition of the free GPUs); the benchmark cases
// devices16/gpus2 and devices16/gpus4 (2-2.6 million partitions, seconds
// for the peer) run only without -short.
func TestPeerAgreement(t *testing.T) {
	policy := gpuallocator.NewBestEffortPolicy()
	// Per group of requests: how many, the same answer, and the
	// differences by where they differ: numaplace's answer better on the
	// exact criteria (fewer nodes, nearer, fewer switches); equal there
	// and the peer's with more NVLink links; equal there and numaplace's
	// with more; equal in both (best fit or the lowest indices decided).
	type tally struct{ total, same, better, peerLinks, moreLinks, tie int }
	tallies := map[string]*tally{}
	var groups, diffs, nvMore []string
	shown := map[string]int{}
	compare := func(group, name string, c prefCase, p *kubelet.PreferredAllocator, peer peerSide) {
		tl := tallies[group]
		if tl == nil {
			tl = &tally{}
			tallies[group] = tl
			groups = append(groups, group)
		}
		got, err := p.GetPreferredAllocation(c.available, c.must, c.size)
		require.NoError(t, err, name)
		np := atoiAll(t, got)
		checkAnswer(t, "numaplace "+name, np, c)
		pg := indices(policy.Allocate(peer.list(t, c.available), peer.list(t, c.must), c.size))
		checkAnswer(t, "gpuallocator "+name, pg, c)
		tl.total++
		if group == "benchmark cases" {
			t.Logf("%s: numaplace %v, go-gpuallocator %v", name, np, pg)
		}
		if slices.Equal(np, pg) {
			tl.same++
			return
		}
		nk, pk := keyOf(t, c.m, p, np), keyOf(t, c.m, p, pg)
		require.LessOrEqual(t, comparePrefix(nk, pk), 0,
			"%s: numaplace %v %+v ranks below go-gpuallocator's %v %+v", name, np, nk, pg, pk)
		line := fmt.Sprintf("%s (%d of %v, must %v): numaplace %v %+v, go-gpuallocator %v %+v",
			name, c.size, c.available, c.must, np, nk, pg, pk)
		switch {
		case comparePrefix(nk, pk) < 0:
			tl.better++
		case pk.nvlinks > nk.nvlinks:
			tl.peerLinks++
			nvMore = append(nvMore, line)
		case pk.nvlinks < nk.nvlinks:
			tl.moreLinks++
		default:
			tl.tie++
		}
		if shown[c.m.Name()] < 4 {
			shown[c.m.Name()]++
			diffs = append(diffs, line)
		}
	}
	for _, c := range prefCases(t) {
		if testing.Short() && (c.name == "devices16/gpus2" || c.name == "devices16/gpus4") {
			continue
		}
		compare("benchmark cases", c.name, c, kubelet.NewPreferredAllocator(c.m), newPeerSide(c.m))
	}

	a100, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	xeon, err := topology.Preset("xeon-2s-snc2-8gpu")
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 12))
	for _, m := range []*topology.Machine{a100, xeon, kubelettest.Machine16(t), kubelettest.Machine16Worst(t)} {
		p, peer := kubelet.NewPreferredAllocator(m), newPeerSide(m)
		n := m.NumGPUs()
		for i := range 200 {
			free := rng.Perm(n)[:1+rng.IntN(min(n, 10))]
			slices.Sort(free)
			size := 1 + rng.IntN(len(free))
			var must []int
			for _, j := range rng.Perm(len(free))[:rng.IntN(min(size, 2)+1)] {
				must = append(must, free[j])
			}
			c := prefCase{m: m, size: size}
			for _, g := range free {
				c.available = append(c.available, strconv.Itoa(g))
			}
			for _, g := range must {
				c.must = append(c.must, strconv.Itoa(g))
			}
			compare(m.Name()+" random", fmt.Sprintf("%s/random%d", m.Name(), i), c, p, peer)
		}
	}
	for _, g := range groups {
		tl := tallies[g]
		t.Logf("%s: the same GPUs in %d of %d; of the %d differences, numaplace's fewer nodes, nearer or fewer switches %d, "+
			"go-gpuallocator's more NVLink links %d, numaplace's more NVLink links %d, equal in both %d",
			g, tl.same, tl.total, tl.total-tl.same, tl.better, tl.peerLinks, tl.moreLinks, tl.tie)
	}
	t.Log("go-gpuallocator's answer with more NVLink links at equal nodes, distance and switches:")
	for _, d := range nvMore {
		t.Log(d)
	}
	t.Log("the first differences (at most 4 per machine):")
	for _, d := range diffs {
		t.Log(d)
	}
}
