package kubelet

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/adapters/kubelet/kubelettest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

func ids(from, to int, except ...int) []string {
	var out []string
	for i := from; i <= to; i++ {
		if !slices.Contains(except, i) {
			out = append(out, strconv.Itoa(i))
		}
	}
	return out
}

func TestGetPreferredAllocation(t *testing.T) {
	m16 := kubelettest.Machine16(t)
	a100 := preset(t, "dgx-a100")
	// Eight GPUs without switches (those of one NUMA node count as one
	// switch) or links; two of unknown NUMA node.
	plainB := topology.NewBuilder("plain").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 7)}).
		AddNode(topology.Node{ID: 1, Socket: 0, CPUs: numa.CPURange(8, 15)}).
		AddNode(topology.Node{ID: 2, Socket: 1, CPUs: numa.CPURange(16, 23)}).
		SetDistances([][]int{{10, 12, 30}, {12, 10, 30}, {30, 30, 10}})
	for g, node := range []numa.NodeID{0, 0, 1, 2, 2, 2, topology.UnknownNode, topology.UnknownNode} {
		plainB.AddGPU(topology.GPU{ID: g, NUMANode: node})
	}
	plain, err := plainB.Build()
	require.NoError(t, err)

	tests := []struct {
		name      string
		m         *topology.Machine
		available []string
		must      []string
		size      int
		want      []string
		switches  int
		links     int
	}{
		{"one switch", m16, ids(0, 15), nil, 4, ids(0, 3), 1, 32},
		{"a bridged pair", m16, ids(0, 15), nil, 2, ids(0, 1), 1, 12},
		{"best fit: the switch with two left", m16, ids(0, 15, 0, 1), nil, 2, ids(2, 3), 1, 12},
		{"best fit: a lone GPU before a pair", m16, ids(0, 15, 0, 1, 2), nil, 1, ids(3, 3), 1, 0},
		{"bridged pair over a lower index", m16, ids(0, 15, 0, 2), nil, 2, ids(4, 5), 1, 12},
		{"one node, two switches", m16, ids(0, 15), nil, 8, ids(0, 7), 2, 64},
		{"must-include on the other node", m16, ids(0, 15), []string{"9"}, 3, []string{"8", "9", "10"}, 1, 16},
		{"must-include across nodes", m16, ids(0, 15), []string{"0", "15"}, 2, []string{"0", "15"}, 2, 0},
		{"a whole node left free when possible", m16, ids(0, 15, 0, 4), nil, 6, ids(8, 13), 2, 44},
		{"both nodes", m16, ids(0, 15), nil, 12, ids(0, 11), 3, 96},
		{"everything", m16, ids(0, 15), nil, 16, ids(0, 15), 4, 128},
		{"UUIDs in, UUIDs out", m16, []string{"GPU-7", "GPU-8", "GPU-9", "GPU-3"}, nil, 2, []string{"GPU-8", "GPU-9"}, 1, 12},
		{"mixed spellings", m16, []string{"GPU-6", "7", "12"}, nil, 2, []string{"GPU-6", "7"}, 1, 12},
		{"dgx-a100: a pair under one switch", a100, ids(0, 7), nil, 2, ids(0, 1), 1, 12},
		{"dgx-a100: four on one socket", a100, ids(0, 7), nil, 4, ids(0, 3), 2, 72},
		{"dgx-a100: best fit takes the lone GPU", a100, ids(0, 7, 1), nil, 3, []string{"0", "2", "3"}, 2, 36},
		{"dgx-a100: same socket before lower index", a100, ids(0, 7, 1, 2, 3, 5, 7), nil, 2, []string{"4", "6"}, 2, 12},
		{"plain: one node", plain, ids(0, 7), nil, 3, ids(3, 5), 1, 0},
		{"plain: nearest nodes", plain, ids(0, 7, 3, 4, 5), nil, 3, ids(0, 2), 2, 0},
		{"plain: unknown NUMA last", plain, ids(0, 7), []string{"6"}, 2, ids(6, 7), 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPreferredAllocator(tt.m)
			pref, err := p.Prefer(tt.available, tt.must, tt.size)
			require.NoError(t, err)
			require.Equal(t, tt.want, pref.Devices, "%s", pref)
			require.Equal(t, tt.switches, pref.Switches, "%s", pref)
			require.Equal(t, tt.links, pref.NVLinks, "%s", pref)
			got, err := p.GetPreferredAllocation(tt.available, tt.must, tt.size)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestGetPreferredAllocationErrors(t *testing.T) {
	p := NewPreferredAllocator(kubelettest.Machine16(t))
	tests := []struct {
		name      string
		available []string
		must      []string
		size      int
		err       string
	}{
		{"unknown index", []string{"0", "16"}, nil, 1, `available device "16" is not a GPU of this machine`},
		{"unknown UUID", []string{"GPU-x"}, nil, 1, `available device "GPU-x" is not a GPU`},
		{"not a number", []string{"-1"}, nil, 1, `available device "-1" is not a GPU`},
		{"hexadecimal", []string{"0x1"}, nil, 1, `available device "0x1" is not a GPU`},
		{"blank", []string{" 1"}, nil, 1, `available device " 1" is not a GPU`},
		{"two signs", []string{"++1"}, nil, 1, `available device "++1" is not a GPU`},
		{"non-ASCII digit", []string{"١"}, nil, 1, `available device "١" is not a GPU`},
		{"listed twice in two spellings", []string{"1", "+01"}, nil, 1, `available lists GPU 1 twice ("1" and "+01")`},
		{"long ID cut", []string{strings.Repeat("x", 300)}, nil, 1, `available device "` + strings.Repeat("x", 64) + `"... (300 bytes) is not a GPU`},
		{"empty ID", []string{""}, nil, 1, `available device "" is not a GPU`},
		{"listed twice", []string{"1", "GPU-1"}, nil, 1, `available lists GPU 1 twice ("1" and "GPU-1")`},
		{"must not available", []string{"1", "2"}, []string{"3"}, 1, `must-include device "3" is not among the available devices`},
		{"must unknown", []string{"1", "2"}, []string{"x"}, 1, `must-include device "x" is not a GPU`},
		{"must twice", []string{"1", "2"}, []string{"1", "GPU-1"}, 2, "must-include lists GPU 1 twice"},
		{"size below must", []string{"1", "2", "3"}, []string{"1", "2"}, 1, "size 1 is below the 2 must-include devices"},
		{"size above available", []string{"1", "2"}, nil, 3, "size 3 is above the 2 available devices"},
		{"size zero", []string{"1", "2"}, nil, 0, "size 0: at least one device must be asked for"},
		{"negative size", []string{"1"}, nil, -1, "size -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p.GetPreferredAllocation(tt.available, tt.must, tt.size)
			require.ErrorIs(t, err, ErrDeviceRequest)
			require.ErrorContains(t, err, tt.err)
			require.Nil(t, got)
		})
	}
	// A machine without GPUs refuses every ID.
	m, err := topology.NewBuilder("cpu-only").AddNode(topology.Node{ID: 0, CPUs: numa.CPURange(0, 3)}).Build()
	require.NoError(t, err)
	_, err = NewPreferredAllocator(m).GetPreferredAllocation([]string{"0"}, nil, 1)
	require.ErrorIs(t, err, ErrDeviceRequest)
}

// dpKey is a selection's rank as the reference computes it: the criteria
// of devchoice.Rank for GPUs alone (no pairs).
type dpKey struct {
	nodes, unk, dist, switches, links, swLeft, nodeLeft int
}

// dpQuality is the reference computation of the criteria for a selection.
func dpQuality(m *topology.Machine, available, sel []int) dpKey {
	group := func(g topology.GPU) int {
		if i, ok := m.NodeIndex(g.NUMANode); ok {
			return i
		}
		return -1
	}
	swKey := func(g topology.GPU) string {
		if g.PCIeSwitch == "" { // one switch of their own per NUMA node
			return "\x00node" + strconv.Itoa(group(g))
		}
		return g.PCIeSwitch
	}
	var k dpKey
	groups, switches := map[int]bool{}, map[string]bool{}
	for _, id := range sel {
		g, _ := m.GPU(id)
		groups[group(g)] = true
		switches[swKey(g)] = true
	}
	k.nodes, k.switches = len(groups), len(switches)
	if groups[-1] {
		k.unk = 1
	}
	gl := slices.Sorted(func(yield func(int) bool) {
		for g := range groups {
			if !yield(g) {
				return
			}
		}
	})
	for a := range gl {
		for _, b := range gl[a+1:] {
			if gl[a] == -1 || b == -1 {
				k.dist += 1000
			} else {
				k.dist += m.Distances().At(gl[a], b)
			}
		}
	}
	for a := range sel {
		for _, b := range sel[a+1:] {
			k.links += m.NVLinkCount(sel[a], b)
		}
	}
	for _, id := range available {
		g, _ := m.GPU(id)
		if switches[swKey(g)] {
			k.swLeft++
		}
		if groups[group(g)] {
			k.nodeLeft++
		}
	}
	k.swLeft -= len(sel)
	k.nodeLeft -= len(sel)
	return k
}

// refCompare orders qualities as Prefer documents (written apart from
// dpKey.compare, so that a mistake there shows).
func refCompare(a, b dpKey) int {
	x := []int{a.nodes, a.unk, a.dist, a.switches, -a.links, a.swLeft, a.nodeLeft}
	y := []int{b.nodes, b.unk, b.dist, b.switches, -b.links, b.swLeft, b.nodeLeft}
	return slices.Compare(x, y)
}

// randomMachine draws a machine of 1-4 NUMA nodes (symmetric distances)
// and 1-10 GPUs, some of unknown node, some without a switch, switches
// inside one node, and NVLinks when links is set.
func randomMachine(t *rapid.T, links bool) *topology.Machine {
	nodes := rapid.IntRange(1, 4).Draw(t, "nodes")
	b := topology.NewBuilder("random")
	rows := make([][]int, nodes)
	for i := range rows {
		rows[i] = make([]int, nodes)
	}
	for i := range nodes {
		b.AddNode(topology.Node{ID: numa.NodeID(3 * i), Socket: i / 2, CPUs: numa.NewCPUSet(i)})
		rows[i][i] = 10
		for j := i + 1; j < nodes; j++ {
			d := rapid.IntRange(11, 40).Draw(t, "distance")
			rows[i][j], rows[j][i] = d, d
		}
	}
	b.SetDistances(rows)
	n := rapid.IntRange(1, 10).Draw(t, "gpus")
	for g := range n {
		node := rapid.IntRange(-1, nodes-1).Draw(t, "node")
		gpu := topology.GPU{ID: g, NUMANode: topology.UnknownNode}
		if node >= 0 {
			gpu.NUMANode = numa.NodeID(3 * node)
		}
		if s := rapid.IntRange(-1, 2).Draw(t, "switch"); s >= 0 {
			gpu.PCIeSwitch = fmt.Sprintf("n%ds%d", node, s)
		}
		b.AddGPU(gpu)
	}
	if links {
		for a := range n {
			for c := a + 1; c < n; c++ {
				if l := rapid.IntRange(0, 4).Draw(t, "links"); l > 0 {
					b.AddNVLink(a, c, l)
				}
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The choice is always valid, and its criteria 1-3 (NUMA nodes, distance,
// switches) are the optimum a search over every subset finds; without
// NVLinks, criteria 1-6 (everything) are.
func TestGetPreferredAllocationIsOptimal(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		links := rapid.Bool().Draw(rt, "withLinks")
		m := randomMachine(rt, links)
		var avail []int
		for g := range m.NumGPUs() {
			if rapid.IntRange(0, 3).Draw(rt, "taken") > 0 {
				avail = append(avail, g)
			}
		}
		if len(avail) == 0 {
			return
		}
		var must []int
		for _, g := range avail {
			if rapid.IntRange(0, 5).Draw(rt, "must") == 0 {
				must = append(must, g)
			}
		}
		size := rapid.IntRange(max(1, len(must)), len(avail)).Draw(rt, "size")
		toStr := func(xs []int) []string {
			out := make([]string, len(xs))
			for i, x := range xs {
				out[i] = strconv.Itoa(x)
			}
			return out
		}
		pref, err := NewPreferredAllocator(m).Prefer(toStr(avail), toStr(must), size)
		if err != nil {
			rt.Fatal(err)
		}
		got := pref.GPUs
		if len(got) != size || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != size {
			rt.Fatalf("got %v for size %d", got, size)
		}
		for _, g := range must {
			if !slices.Contains(got, g) {
				rt.Fatalf("got %v without must-include %d", got, g)
			}
		}
		for _, g := range got {
			if !slices.Contains(avail, g) {
				rt.Fatalf("got %v with %d, which is not available", got, g)
			}
		}
		gotKey := dpQuality(m, avail, got)
		if gotKey.links != pref.NVLinks || gotKey.switches != pref.Switches {
			rt.Fatalf("reported %s, computed %+v", pref, gotKey)
		}
		// Every subset of avail of the size that holds must.
		var best []int
		var bestKey dpKey
		for sub := range numa.FirstN(len(avail)).Subsets(size) {
			var sel []int
			for i := range sub.All() {
				sel = append(sel, avail[i])
			}
			ok := true
			for _, g := range must {
				ok = ok && slices.Contains(sel, g)
			}
			if !ok {
				continue
			}
			k := dpQuality(m, avail, sel)
			if !links {
				if best == nil || refCompare(k, bestKey) < 0 || refCompare(k, bestKey) == 0 && slices.Compare(sel, best) < 0 {
					best, bestKey = sel, k
				}
				continue
			}
			k.links, k.swLeft, k.nodeLeft = 0, 0, 0
			if best == nil || refCompare(k, bestKey) < 0 {
				best, bestKey = sel, k
			}
		}
		if !links {
			if !slices.Equal(got, best) {
				rt.Fatalf("got %v %+v, the best is %v %+v", got, gotKey, best, bestKey)
			}
			return
		}
		gotKey.links, gotKey.swLeft, gotKey.nodeLeft = 0, 0, 0
		if gotKey != bestKey {
			rt.Fatalf("got %v %+v, the best is %v %+v", got, gotKey, best, bestKey)
		}
	})
}

// The budgets keep a machine with many NUMA nodes holding GPUs (numa64:
// 64 nodes, 2 GPUs each) answering, with the fewest nodes.
func TestGetPreferredAllocationLargeMachine(t *testing.T) {
	m := preset(t, "numa64")
	p := NewPreferredAllocator(m)
	all := ids(0, m.NumGPUs()-1)
	for _, size := range []int{1, 2, 3, 17, 64, 128} {
		pref, err := p.Prefer(all, nil, size)
		require.NoError(t, err)
		require.Len(t, pref.Devices, size)
		require.Len(t, pref.NUMANodes, (size+1)/2, "%s", pref)
	}
	// Every other GPU taken: 33 GPUs need 33 nodes; the search is cut by
	// its budgets and still answers.
	var odd []string
	for g := 1; g < m.NumGPUs(); g += 2 {
		odd = append(odd, strconv.Itoa(g))
	}
	pref, err := p.Prefer(odd, []string{"63"}, 33)
	require.NoError(t, err)
	require.Len(t, pref.NUMANodes, 33)
	require.Contains(t, pref.Devices, "63")
}

func TestPreferenceString(t *testing.T) {
	p := NewPreferredAllocator(kubelettest.Machine16(t))
	pref, err := p.Prefer(ids(0, 15), nil, 2)
	require.NoError(t, err)
	require.Equal(t, "GPUs [0 1] on NUMA nodes [0], 1 PCIe switch, 12 NVLink links", pref.String())
	pref, err = p.Prefer(ids(0, 15), []string{"0", "15"}, 2)
	require.NoError(t, err)
	require.Equal(t, "GPUs [0 15] on NUMA nodes [0 1], 2 PCIe switches", pref.String())
}

// BenchmarkGetPreferredAllocation measures one answer at every size:
// dgx-a100/gpusN and devices16/gpusN ask for N of the GPUs with every GPU
// free (devices16 is kubelettest.Machine16: 2 NUMA nodes, 4 switches, NVLink bridges);
// dgx-a100/fragmented has GPU 2 taken and asks for 4; devices16/fragmented
// has 3 GPUs taken, one must-include and asks for 6 (the search crosses
// switches and compares NVLink choices); devices16-worst asks for 8 of the
// 16 GPUs of kubelettest.Machine16Worst, where the search budgets are reached, and
// devices16-worst-busy the same with GPU 15 taken.
func BenchmarkGetPreferredAllocation(b *testing.B) {
	type bcase struct {
		name      string
		m         *topology.Machine
		available []string
		must      []string
		size      int
	}
	a100, m16 := preset(b, "dgx-a100"), kubelettest.Machine16(b)
	var cases []bcase
	for _, size := range []int{1, 2, 4, 8} {
		cases = append(cases, bcase{"dgx-a100/gpus" + strconv.Itoa(size), a100, ids(0, 7), nil, size})
	}
	cases = append(cases, bcase{"dgx-a100/fragmented", a100, ids(0, 7, 2), nil, 4})
	for _, size := range []int{1, 2, 4, 8} {
		cases = append(cases, bcase{"devices16/gpus" + strconv.Itoa(size), m16, ids(0, 15), nil, size})
	}
	cases = append(cases, bcase{"devices16/fragmented", m16, ids(0, 15, 1, 6, 11), []string{"9"}, 6},
		bcase{"devices16-worst", kubelettest.Machine16Worst(b), ids(0, 15), nil, 8},
		bcase{"devices16-worst-busy", kubelettest.Machine16Worst(b), ids(0, 15, 15), nil, 8})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p := NewPreferredAllocator(c.m)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.GetPreferredAllocation(c.available, c.must, c.size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// GPU IDs read as the allocator reads them (allocator.CanonicalDeviceID):
// "+3", "03" and "0000000003" are GPU 3 in available and mustInclude, and
// the answer spells each GPU as available does.
func TestGetPreferredAllocationCanonicalIDs(t *testing.T) {
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	p := NewPreferredAllocator(m)
	for _, id := range []string{"3", "03", "+3", "+03", "0000000003", "+0000000003"} {
		got, err := p.GetPreferredAllocation([]string{id, "1"}, nil, 2)
		require.NoError(t, err, id)
		require.Equal(t, []string{"1", id}, got, id)
		got, err = p.GetPreferredAllocation([]string{"0", "1", "2", id}, []string{id}, 1)
		require.NoError(t, err, id)
		require.Equal(t, []string{id}, got, id)
		pref, err := p.Prefer([]string{id, "+1", "5"}, []string{"01"}, 2)
		require.NoError(t, err, id)
		require.Equal(t, []int{1, 3}, pref.GPUs, id)
	}
}

// Answers cut from one chunk are independent: each has a capacity of its
// own, so appending to one or writing it leaves the others as they were.
func TestGetPreferredAllocationAnswersIndependent(t *testing.T) {
	p := NewPreferredAllocator(kubelettest.Machine16(t))
	var answers [][]string
	for range 3 * answerChunk {
		got, err := p.GetPreferredAllocation(ids(0, 15), nil, 2)
		require.NoError(t, err)
		require.Equal(t, []string{"0", "1"}, got)
		require.Equal(t, 2, cap(got))
		answers = append(answers, got)
	}
	for i, a := range answers {
		a[0] = "x" + strconv.Itoa(i)
		_ = append(a, "y")
	}
	for i, a := range answers {
		require.Equal(t, []string{"x" + strconv.Itoa(i), "1"}, a)
	}
	big, err := p.GetPreferredAllocation(ids(0, 15), nil, 16)
	require.NoError(t, err)
	require.Len(t, big, 16)
}
