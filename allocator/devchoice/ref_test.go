package devchoice_test

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// refDev is a device as the reference sees it, read from the machine
// itself (not from the Index).
type refDev struct {
	group  int    // dense NUMA node, or -1 for unknown
	sw     string // switch key: the switch name, or one key per NUMA node for devices without one
	gpuID  int    // GPUs only
	isGPU  bool
	global int // position among all devices (for NVLink look-ups of GPUs: the GPU ID)
}

// refClasses returns the devices of every class of m by dense index, in
// the order the Index documents: GPUs by ascending ID, then the other
// classes by ascending name, each in the order of m.Devices.
func refClasses(m *topology.Machine) (names []string, devs [][]refDev) {
	node := func(id numa.NodeID) int {
		if id == topology.UnknownNode {
			return -1
		}
		i, ok := m.NodeIndex(id)
		if !ok {
			return -1
		}
		return i
	}
	names = append(names, "gpu")
	devs = append(devs, nil)
	for _, g := range m.GPUs() {
		sw := g.PCIeSwitch
		if sw == "" {
			sw = "\x00node" + strconv.Itoa(node(g.NUMANode))
		}
		devs[0] = append(devs[0], refDev{group: node(g.NUMANode), sw: sw, gpuID: g.ID, isGPU: true})
	}
	for i, d := range m.Devices() {
		if names[len(names)-1] != d.Class || len(names) == 1 {
			names = append(names, d.Class)
			devs = append(devs, nil)
		}
		sw := d.PCIeSwitch
		if sw == "" {
			sw = "\x00node" + strconv.Itoa(node(d.NUMANode))
		}
		devs[len(devs)-1] = append(devs[len(devs)-1], refDev{group: node(d.NUMANode), sw: sw, global: i})
	}
	return names, devs
}

// refWant is a want by dense indices.
type refWant struct {
	class int
	count int
	free  []int
	must  []int
}

// refRank computes the rank of a selection (sel[k]: dense indices of want
// k) from its definition in Rank's doc comment.
func refRank(m *topology.Machine, devs [][]refDev, wants []refWant, allowed func(g int) bool, sel [][]int) devchoice.Rank {
	var r devchoice.Rank
	groups := map[int]bool{}
	switches := map[string]bool{}
	first := map[string]int{}
	per := map[string][]int{}
	total := 0
	for k, w := range wants {
		for _, d := range sel[k] {
			x := devs[w.class][d]
			groups[x.group] = true
			switches[x.sw] = true
			if k == 0 {
				first[x.sw]++
			} else {
				if per[x.sw] == nil {
					per[x.sw] = make([]int, len(wants))
				}
				per[x.sw][k]++
			}
		}
		total += len(sel[k])
	}
	r.Nodes = len(groups)
	if groups[-1] {
		r.Unknown = 1
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
				r.Distance += 1000
			} else {
				r.Distance += m.Distances().At(gl[a], b)
			}
		}
	}
	for k := 1; k < len(wants); k++ {
		pairs := 0
		for sw, p := range first {
			if per[sw] != nil {
				pairs += min(p, per[sw][k])
			}
		}
		r.Unpaired += len(sel[k]) - pairs
	}
	r.Switches = len(switches)
	if len(wants) > 0 && wants[0].class == 0 {
		for a := range sel[0] {
			for _, b := range sel[0][a+1:] {
				r.NVLinks += m.NVLinkCount(devs[0][sel[0][a]].gpuID, devs[0][b].gpuID)
			}
		}
	}
	for _, w := range wants {
		for _, d := range w.free {
			x := devs[w.class][d]
			if !allowed(x.group) {
				continue
			}
			if groups[x.group] && switches[x.sw] {
				r.SwitchLeft++
			}
			if groups[x.group] {
				r.NodeLeft++
			}
		}
	}
	r.SwitchLeft -= total
	r.NodeLeft -= total
	return r
}

// refCompare orders ranks as Rank's doc comment states (written apart from
// Rank.Compare, so that a mistake there shows).
func refCompare(a, b devchoice.Rank) int {
	x := []int{a.Nodes, a.Unknown, a.Distance, a.Unpaired, a.Switches, -a.NVLinks, a.SwitchLeft, a.NodeLeft}
	y := []int{b.Nodes, b.Unknown, b.Distance, b.Unpaired, b.Switches, -b.NVLinks, b.SwitchLeft, b.NodeLeft}
	return slices.Compare(x, y)
}

// refTie is the tie-break between two ascending lists of one size (Rank's
// doc): the lowest indices compared lexicographically, or the highest from
// the end under the build tag numaplace_hightie (devchoice.LowFirst false).
func refTie(x, y []int) int {
	if devchoice.LowFirst {
		return slices.Compare(x, y)
	}
	for i := len(x) - 1; i >= 0; i-- {
		if x[i] != y[i] {
			return cmp.Compare(y[i], x[i])
		}
	}
	return 0
}

// refBest returns the best selection by brute force over every
// combination (nil when none).
func refBest(m *topology.Machine, devs [][]refDev, wants []refWant, allowed func(int) bool) ([][]int, devchoice.Rank) {
	options := make([][][]int, len(wants))
	for k, w := range wants {
		var pool []int
		for _, d := range w.free {
			if allowed(devs[w.class][d].group) && !slices.Contains(w.must, d) {
				pool = append(pool, d)
			}
		}
		rest := w.count - len(w.must)
		for sub := range numa.FirstN(len(pool)).Subsets(rest) {
			sel := slices.Clone(w.must)
			for i := range sub.All() {
				sel = append(sel, pool[i])
			}
			slices.Sort(sel)
			options[k] = append(options[k], sel)
		}
		if rest == 0 {
			options[k] = [][]int{slices.Sorted(slices.Values(w.must))}
		}
	}
	var best [][]int
	var bestRank devchoice.Rank
	cur := make([][]int, len(wants))
	var rec func(k int)
	rec = func(k int) {
		if k == len(wants) {
			r := refRank(m, devs, wants, allowed, cur)
			c := refCompare(r, bestRank)
			if c == 0 {
				for j := range cur {
					if c = refTie(cur[j], best[j]); c != 0 {
						break
					}
				}
			}
			if best == nil || c < 0 {
				best, bestRank = slices.Clone(cur), r
			}
			return
		}
		for _, o := range options[k] {
			cur[k] = o
			rec(k + 1)
		}
	}
	rec(0)
	return best, bestRank
}

// randomMachine draws a machine of 1-4 NUMA nodes with 0-8 GPUs and 0-6
// RDMA NICs, some of unknown node, some without a switch, switches shared
// by GPUs and NICs (and now and then across nodes), and NVLinks when
// links is set.
func randomMachine(t *rapid.T, links bool) *topology.Machine {
	b, place := randomNodes(t, "random", 4)
	n := rapid.IntRange(0, 8).Draw(t, "gpus")
	for g := range n {
		node, sw := place("gpu")
		b.AddGPU(topology.GPU{ID: 3 * g, NUMANode: node, PCIeSwitch: sw})
	}
	for d := range rapid.IntRange(0, 6).Draw(t, "nics") {
		node, sw := place("nic")
		b.AddDevice(topology.Device{ID: fmt.Sprintf("mlx5_%d", d), Class: "rdma", NUMANode: node, PCIeSwitch: sw})
	}
	if links {
		for a := range n {
			for c := a + 1; c < n; c++ {
				if l := rapid.IntRange(0, 4).Draw(t, "links"); l > 0 {
					b.AddNVLink(3*a, 3*c, l)
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

// randomNodes starts a machine of 1 to most NUMA nodes (IDs 0, 2, 4...,
// two nodes a socket) with random SLIT distances, and returns it with
// place, which draws a device's node (or the unknown node) and switch
// (none, one of three of its node, or now and then a name on several
// nodes), the draws labelled by label.
func randomNodes(t *rapid.T, name string, most int) (*topology.Builder, func(label string) (numa.NodeID, string)) {
	nodes := rapid.IntRange(1, most).Draw(t, "nodes")
	b := topology.NewBuilder(name)
	rows := make([][]int, nodes)
	for i := range rows {
		rows[i] = make([]int, nodes)
	}
	for i := range nodes {
		b.AddNode(topology.Node{ID: numa.NodeID(2 * i), Socket: i / 2, CPUs: numa.NewCPUSet(i)})
		rows[i][i] = 10
		for j := i + 1; j < nodes; j++ {
			d := rapid.IntRange(11, 40).Draw(t, "distance")
			rows[i][j], rows[j][i] = d, d
		}
	}
	b.SetDistances(rows)
	place := func(label string) (numa.NodeID, string) {
		node := rapid.IntRange(-1, nodes-1).Draw(t, label+"Node")
		id := topology.UnknownNode
		if node >= 0 {
			id = numa.NodeID(2 * node)
		}
		sw := ""
		if s := rapid.IntRange(-1, 2).Draw(t, label+"Switch"); s >= 0 {
			sw = fmt.Sprintf("n%ds%d", node, s)
			if rapid.IntRange(0, 9).Draw(t, label+"Shared") == 0 {
				sw = fmt.Sprintf("x%d", s) // a switch name on several nodes
			}
		}
		return id, sw
	}
	return b, place
}

// drawWant draws a want of class cl: free devices, must-include devices
// among them and a count, or ok false when the class has no free device.
func drawWant(t *rapid.T, devs []refDev, cl int, label string, allowed func(int) bool) (refWant, bool) {
	w := refWant{class: cl}
	for d := range devs {
		if rapid.IntRange(0, 3).Draw(t, label+"Taken") > 0 {
			w.free = append(w.free, d)
		}
	}
	var usable []int
	for _, d := range w.free {
		if allowed(devs[d].group) {
			usable = append(usable, d)
		}
	}
	if len(usable) == 0 {
		return w, false
	}
	for _, d := range usable {
		if rapid.IntRange(0, 6).Draw(t, label+"Must") == 0 {
			w.must = append(w.must, d)
		}
	}
	w.count = rapid.IntRange(max(1, len(w.must)), len(usable)).Draw(t, label+"Count")
	return w, true
}

func toSet(n int, xs []int) devchoice.Set {
	s := devchoice.NewSet(n)
	for _, x := range xs {
		s.Add(x)
	}
	return s
}

// anyMachine draws a machine of bigMachine, flatLinkedMachine or
// randomMachine (with or without NVLinks).
func anyMachine(t *rapid.T) *topology.Machine {
	switch rapid.IntRange(0, 3).Draw(t, "kind") {
	case 0:
		return bigMachine(t)
	case 1, 2:
		return flatLinkedMachine(t)
	}
	return randomMachine(t, rapid.Bool().Draw(t, "withLinks"))
}

// drawCase makes m's index and reference devices and draws the nodes a
// request may use (node 0 always) and whether devices of unknown node
// may be used; allowed reports whether a device of group g may be chosen.
func drawCase(t *rapid.T, m *topology.Machine) (x *devchoice.Index, devs [][]refDev, nodes numa.Mask, unknown bool, allowed func(g int) bool) {
	x, err := devchoice.NewIndex(m)
	if err != nil {
		t.Fatal(err)
	}
	_, devs = refClasses(m)
	nodes = numa.Mask(rapid.Uint64Range(0, uint64(m.AllNodes())).Draw(t, "allowed")) | numa.Mask(1)
	unknown = rapid.Bool().Draw(t, "unknown")
	allowed = func(g int) bool {
		if g < 0 {
			return unknown
		}
		return nodes.Contains(g)
	}
	return x, devs, nodes, unknown, allowed
}

// check runs the chooser on a random case and compares it with the
// reference; exact says which criteria must be optimal.
func TestChooseAgainstBruteForce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		links := rapid.Bool().Draw(rt, "withLinks")
		m := randomMachine(rt, links)
		x, devs, nodes, unknown, allowed := drawCase(rt, m)
		var wants []refWant
		gpu, okG := drawWant(rt, devs[0], 0, "gpu", allowed)
		if okG && rapid.IntRange(0, 4).Draw(rt, "withGPUs") > 0 {
			wants = append(wants, gpu)
		}
		if len(devs) > 1 {
			nic, okN := drawWant(rt, devs[1], 1, "nic", allowed)
			if okN && rapid.Bool().Draw(rt, "withNICs") {
				wants = append(wants, nic)
			}
		}
		if len(wants) == 0 {
			return
		}
		got, gotRank := chooseChecked(rt, x, m, devs, wants, nodes, unknown, allowed)
		best, bestRank := refBest(m, devs, wants, allowed)
		// The criteria the search is exact on.
		cut := func(r devchoice.Rank) devchoice.Rank {
			switch {
			case len(wants) == 1 && !links:
				return r
			case len(wants) == 1:
				return devchoice.Rank{Nodes: r.Nodes, Unknown: r.Unknown, Distance: r.Distance, Unpaired: r.Unpaired, Switches: r.Switches}
			default:
				return devchoice.Rank{Nodes: r.Nodes, Unknown: r.Unknown, Distance: r.Distance, Unpaired: r.Unpaired, Switches: r.Switches}
			}
		}
		if cut(gotRank) != cut(bestRank) {
			rt.Fatalf("got %v %+v, the best is %v %+v", got, gotRank, best, bestRank)
		}
		if len(wants) == 1 && !links && !slices.Equal(got[0], best[0]) {
			rt.Fatalf("got %v %+v, the best (lowest indices) is %v %+v", got, gotRank, best, bestRank)
		}
	})
}

// chooseChecked asks x's chooser for wants on the allowed nodes and checks
// the choice: each want's count, only free devices on allowed nodes, every
// must-include device, and the rank the reference computes for it, which
// it returns with the chosen devices.
func chooseChecked(rt *rapid.T, x *devchoice.Index, m *topology.Machine, devs [][]refDev, wants []refWant, nodes numa.Mask, unknown bool, allowed func(int) bool) ([][]int, devchoice.Rank) {
	req := &devchoice.Request{Nodes: nodes, Unknown: unknown}
	for _, w := range wants {
		n := len(devs[w.class])
		req.Wants = append(req.Wants, devchoice.Want{Class: w.class, Count: w.count, Free: toSet(n, w.free), Must: toSet(n, w.must)})
	}
	res, err := x.NewChooser().Choose(req)
	if err != nil {
		rt.Fatal(err)
	}
	got := make([][]int, len(wants))
	for k, w := range wants {
		got[k] = res.Devices(k).AppendTo(nil)
		if len(got[k]) != w.count {
			rt.Fatalf("want %d: %v for count %d", k, got[k], w.count)
		}
		for _, d := range got[k] {
			if !slices.Contains(w.free, d) || !allowed(devs[w.class][d].group) {
				rt.Fatalf("want %d: %v holds %d, not free on an allowed node", k, got[k], d)
			}
		}
		for _, d := range w.must {
			if !slices.Contains(got[k], d) {
				rt.Fatalf("want %d: %v without must-include %d", k, got[k], d)
			}
		}
	}
	gotRank := refRank(m, devs, wants, allowed, got)
	if gotRank != res.Rank {
		rt.Fatalf("reported %+v, the reference computes %+v for %v", res.Rank, gotRank, got)
	}
	return got, gotRank
}

// bigMachine draws a machine of 1-16 NUMA nodes (random distances) with
// up to 64 GPUs spread over them, switches of random sizes (and now and
// then one on two nodes) and random NVLinks, where the budgets of the
// search can be reached.
func bigMachine(t *rapid.T) *topology.Machine {
	nodes := rapid.IntRange(1, 16).Draw(t, "nodes")
	flat := rapid.Bool().Draw(t, "flat") // every distance 20: many ties
	b := topology.NewBuilder("big")
	rows := make([][]int, nodes)
	for i := range rows {
		rows[i] = make([]int, nodes)
	}
	for i := range nodes {
		b.AddNode(topology.Node{ID: numa.NodeID(i), Socket: i / 4, CPUs: numa.NewCPUSet(i)})
		rows[i][i] = 10
		for j := i + 1; j < nodes; j++ {
			d := 20
			if !flat {
				d = rapid.SampledFrom([]int{12, 20, 21, 32}).Draw(t, "distance")
			}
			rows[i][j], rows[j][i] = d, d
		}
	}
	b.SetDistances(rows)
	n := rapid.IntRange(1, 64).Draw(t, "gpus")
	if flat {
		n = rapid.IntRange(1, 2*nodes).Draw(t, "gpus")
	}
	for g := range n {
		node := rapid.IntRange(-1, nodes-1).Draw(t, "node")
		id := topology.UnknownNode
		if node >= 0 {
			id = numa.NodeID(node)
		}
		sw := fmt.Sprintf("n%ds%d", node, rapid.IntRange(0, 3).Draw(t, "switch"))
		if rapid.IntRange(0, 19).Draw(t, "shared") == 0 {
			sw = "x"
		}
		b.AddGPU(topology.GPU{ID: g, NUMANode: id, PCIeSwitch: sw})
	}
	if rapid.Bool().Draw(t, "links") {
		for a := range n {
			for c := a + 1; c < n; c++ {
				if l := rapid.IntRange(0, 8).Draw(t, "nvlink"); l > 4 {
					b.AddNVLink(a, c, l-4)
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

// flatLinkedMachine draws a machine like machine16Worst of the device
// plugin's tests: 4-20 NUMA nodes at equal distance, each with one or two
// GPUs under no switch, and NVLinks of 1-5 links between most pairs, so
// that many sets of nodes tie and the search budgets are reached.
func flatLinkedMachine(t *rapid.T) *topology.Machine {
	nodes := rapid.IntRange(4, 20).Draw(t, "nodes")
	b := topology.NewBuilder("flat")
	for i := range nodes {
		b.AddNode(topology.Node{ID: numa.NodeID(i), Socket: 0, CPUs: numa.NewCPUSet(i)})
	}
	n := 0
	for i := range nodes {
		for range rapid.IntRange(1, 2).Draw(t, "perNode") {
			b.AddGPU(topology.GPU{ID: n, NUMANode: numa.NodeID(i)})
			n++
		}
	}
	for a := range n {
		for c := a + 1; c < n; c++ {
			if l := rapid.IntRange(0, 5).Draw(t, "nvlink"); l > 0 {
				b.AddNVLink(a, c, l)
			}
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The word path (one class of at most 64 devices) chooses exactly what
// the general path chooses, on small and large random machines.
func TestWordPathIsTheGeneralPath(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := anyMachine(rt)
		x, devs, nodes, unknown, allowed := drawCase(rt, m)
		w, ok := drawWant(rt, devs[0], 0, "gpu", allowed)
		if !ok {
			return
		}
		n := len(devs[0])
		req := &devchoice.Request{Nodes: nodes, Unknown: unknown, Wants: []devchoice.Want{{Class: 0, Count: w.count, Free: toSet(n, w.free), Must: toSet(n, w.must)}}}
		wc := x.NewChooser()
		word, err := wc.Choose(req)
		if err != nil {
			rt.Fatal(err)
		}
		restore := general.Set(true)
		gen, err := x.NewChooser().Choose(req)
		restore()
		if err != nil {
			rt.Fatal(err)
		}
		if !word.Devices(0).Equal(gen.Devices(0)) || word.Rank != gen.Rank || word.NUMA != gen.NUMA || word.UnknownNUMA != gen.UnknownNUMA {
			rt.Fatalf("word path %v %+v, general path %v %+v", word.Devices(0).AppendTo(nil), word.Rank, gen.Devices(0).AppendTo(nil), gen.Rank)
		}
	})
}
