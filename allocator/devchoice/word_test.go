package devchoice_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// ChooseWord chooses exactly what Choose chooses for the same request of
// one class (Choose on its word path, then with general.On on its general
// path), on small and large random machines (with must-include devices,
// one device or many, budgets reached or not), and one Chooser serves
// every call in turn.
func TestChooseWordIsChoose(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := anyMachine(rt)
		x, devs, nodes, unknown, allowed := drawCase(rt, m)
		cl := 0
		if len(devs) > 1 && rapid.IntRange(0, 3).Draw(rt, "nicClass") == 0 {
			cl = 1
		}
		w, ok := drawWant(rt, devs[cl], cl, "want", allowed)
		if !ok {
			return
		}
		n := len(devs[cl])
		free, must := toSet(n, w.free), toSet(n, w.must)
		req := &devchoice.Request{Nodes: nodes, Unknown: unknown, Wants: []devchoice.Want{{Class: cl, Count: w.count, Free: free, Must: must}}}
		c := x.NewChooser()
		for i := range 2 {
			restore := general.Set(i == 1) // the word path's choice, then the general path's
			res, err := c.Choose(req)
			restore()
			if err != nil {
				rt.Fatal(err)
			}
			want := res.Devices(0)[0]
			got, err := c.ChooseWord(cl, w.count, free[0], must[0], nodes, unknown)
			if err != nil {
				rt.Fatal(err)
			}
			if got != want {
				rt.Fatalf("ChooseWord %#x, Choose %#x", got, want)
			}
		}
	})
}

// ChooseWord refuses what Choose refuses, with Choose's categories.
func TestChooseWordErrors(t *testing.T) {
	m, err := topology.Preset("dgx-a100")
	if err != nil {
		t.Fatal(err)
	}
	x, _ := devchoice.NewIndex(m)
	c := x.NewChooser()
	all := m.AllNodes()
	for _, tc := range []struct {
		name              string
		class, count      int
		free, must        uint64
		nodes             numa.Mask
		wantErr, wantErr2 error
	}{
		{"unknown class", 9, 1, 1, 0, all, devchoice.ErrRequest, nil},
		{"negative count", 0, -1, 1, 0, all, devchoice.ErrRequest, nil},
		{"must not free", 0, 1, 1, 2, all, devchoice.ErrRequest, nil},
		{"count below must", 0, 1, 3, 3, all, devchoice.ErrRequest, nil},
		{"too few", 0, 3, 3, 0, all, devchoice.ErrTooFew, nil},
		{"must not a device", 0, 2, 1 | 1<<20, 1 << 20, all, devchoice.ErrRequest, nil},
		{"must outside the nodes", 0, 1, 1, 1, 1, devchoice.ErrRequest, nil}, // GPU 0 is on node 3
	} {
		_, err := c.ChooseWord(tc.class, tc.count, tc.free, tc.must, tc.nodes, true)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.wantErr)
		}
	}
	got, err := c.ChooseWord(0, 0, 0xff, 0, all, true)
	if err != nil || got != 0 {
		t.Errorf("count 0: %#x, %v; want nothing chosen", got, err)
	}
}

// ChooseWord's direct decisions (a forced choice, one switch, whole
// groups) choose what Choose chooses: requests without must-include
// devices whose count is the free devices of one switch, of one NUMA node
// or of all the allowed ones, on random machines.
func TestChooseWordDirectIsChoose(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := anyMachine(rt)
		x, devs, nodes, unknown, allowed := drawCase(rt, m)
		gpus := devs[0]
		if len(gpus) == 0 || len(gpus) > 64 {
			return
		}
		var free []int
		bySwitch, byGroup := map[string]int{}, map[int]int{}
		total := 0
		for d, dev := range gpus {
			if rapid.IntRange(0, 4).Draw(rt, "taken") == 0 {
				continue
			}
			free = append(free, d)
			if allowed(dev.group) {
				bySwitch[fmt.Sprint(dev.group, dev.sw)]++
				byGroup[dev.group]++
				total++
			}
		}
		if total == 0 {
			return
		}
		counts := []int{total}
		for _, n := range bySwitch {
			counts = append(counts, n)
		}
		for _, n := range byGroup {
			counts = append(counts, n)
		}
		slices.Sort(counts)
		count := rapid.SampledFrom(counts).Draw(rt, "count")
		set := toSet(len(gpus), free)
		c := x.NewChooser()
		chooseBoth(rt, c, count, set, nil, nodes, unknown)
	})
}

// ChooseWord's decision over several whole groups chooses what Choose
// (the search) chooses: requests without must-include devices for the
// free devices of the k largest allowed groups (k >= 2), on random
// machines where many sets of groups tie; the decision itself is run
// alone too, and must decide a good share of them.
func TestChooseWordWholeGroupsIsChoose(t *testing.T) {
	runs, decided := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		m := anyMachine(rt)
		x, devs, nodes, unknown, allowed := drawCase(rt, m)
		gpus := devs[0]
		if len(gpus) == 0 || len(gpus) > 64 {
			return
		}
		free, byGroup := drawFreeByGroup(rt, gpus, allowed)
		var counts []int
		for _, in := range byGroup {
			counts = append(counts, len(in))
		}
		if len(counts) < 2 {
			return
		}
		slices.Sort(counts)
		slices.Reverse(counts)
		k := rapid.IntRange(2, len(counts)).Draw(rt, "groups")
		count := 0
		for _, n := range counts[:k] {
			count += n
		}
		if rapid.IntRange(0, 4).Draw(rt, "off") == 0 { // now and then not a sum of whole groups
			count = rapid.IntRange(1, count).Draw(rt, "count")
		}
		set := toSet(len(gpus), free)
		c := x.NewChooser()
		want := chooseBoth(rt, c, count, set, nil, nodes, unknown)
		runs++
		if count >= 2 {
			if got, ok := devchoice.WholeGroupsWord(c, count, set[0], nodes, unknown); ok {
				decided++
				if got != want {
					rt.Fatalf("count %d: the whole-groups decision %#x, Choose %#x", count, got, want)
				}
			}
		}
	})
	t.Logf("decided %d of %d", decided, runs)
	if runs >= 50 && decided < runs/10 {
		t.Errorf("the whole-groups decision decided %d of %d requests, want at least a tenth", decided, runs)
	}
}

// ChooseWord's one-forced-group decision chooses what Choose (the search)
// chooses: requests whose must-include devices lie in one group, for a
// count up to that group's free devices (often all of its switches), on
// random machines; the decision itself is run alone too, and must decide
// a good share of them.
func TestChooseWordForcedGroupIsChoose(t *testing.T) {
	runs, decided := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		m := anyMachine(rt)
		x, devs, nodes, unknown, allowed := drawCase(rt, m)
		gpus := devs[0]
		if len(gpus) == 0 || len(gpus) > 64 {
			return
		}
		free, byGroup := drawFreeByGroup(rt, gpus, allowed)
		var groups []int
		for g := range byGroup {
			groups = append(groups, g)
		}
		if len(groups) == 0 {
			return
		}
		slices.Sort(groups)
		in := byGroup[rapid.SampledFrom(groups).Draw(rt, "group")]
		var must []int
		for _, d := range in {
			if rapid.IntRange(0, 3).Draw(rt, "must") == 0 {
				must = append(must, d)
			}
		}
		if len(must) == 0 {
			must = append(must, rapid.SampledFrom(in).Draw(rt, "one"))
		}
		count := len(in)
		if rapid.IntRange(0, 2).Draw(rt, "fewer") > 0 {
			count = rapid.IntRange(len(must), len(in)).Draw(rt, "count")
		}
		set, mset := toSet(len(gpus), free), toSet(len(gpus), must)
		c := x.NewChooser()
		want := chooseBoth(rt, c, count, set, mset, nodes, unknown)
		runs++
		if got, ok := devchoice.ForcedGroupWord(c, count, set[0], mset[0], nodes, unknown); ok {
			decided++
			if got != want {
				rt.Fatalf("count %d, must %v: the forced-group decision %#x, Choose %#x", count, must, got, want)
			}
		}
	})
	t.Logf("decided %d of %d", decided, runs)
	if runs >= 50 && decided < runs/10 {
		t.Errorf("the forced-group decision decided %d of %d requests, want at least a tenth", decided, runs)
	}
}

// chooseBoth runs Choose on its general path (general.On) and ChooseWord
// on its fast paths with c on one request of count GPUs (must may be nil),
// fails when they differ and returns the choice.
func chooseBoth(rt *rapid.T, c *devchoice.Chooser, count int, free, must devchoice.Set, nodes numa.Mask, unknown bool) uint64 {
	req := &devchoice.Request{Nodes: nodes, Unknown: unknown, Wants: []devchoice.Want{{Class: 0, Count: count, Free: free, Must: must}}}
	restore := general.Set(true) // the general path's choice
	res, err := c.Choose(req)
	restore()
	if err != nil {
		rt.Fatal(err)
	}
	want := res.Devices(0)[0]
	var m uint64
	if must != nil {
		m = must[0]
	}
	got, err := c.ChooseWord(0, count, free[0], m, nodes, unknown)
	if err != nil {
		rt.Fatal(err)
	}
	if got != want {
		rt.Fatalf("count %d, must %#x: ChooseWord %#x, Choose %#x", count, m, got, want)
	}
	return want
}

// drawFreeByGroup draws the free GPUs (about four in five) and lists
// those of the allowed groups by group.
func drawFreeByGroup(rt *rapid.T, gpus []refDev, allowed func(int) bool) (free []int, byGroup map[int][]int) {
	byGroup = map[int][]int{}
	for d, dev := range gpus {
		if rapid.IntRange(0, 4).Draw(rt, "taken") == 0 {
			continue
		}
		free = append(free, d)
		if allowed(dev.group) {
			byGroup[dev.group] = append(byGroup[dev.group], d)
		}
	}
	return free, byGroup
}
