package devchoice

import (
	"cmp"
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// withOrder runs f with o as the order of preference, then restores the
// declared one.
func withOrder(o [numCriteria]criterion, f func()) {
	old := order
	setOrder(o)
	defer setOrder(old)
	f()
}

// The packed key orders ranks (of equal Unpaired and NVLinks, fields
// within keyBits) and single devices as compareRanks and then the lower
// index do, and keyTerms orders packed keys with NVLinks as
// compareRanks does, under the declared order and any permutation of it.
func TestPackedKeyIsCompare(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		perm := rapid.Permutation(order[:]).Draw(rt, "order")
		drawRank := func(label string) (Rank, int) {
			f := func(k criterion) int {
				return rapid.IntRange(0, 1<<keyBits[k]-1).Draw(rt, label+"-"+string(rune('0'+k)))
			}
			r := Rank{Nodes: f(critNodes), Unknown: f(critUnknown), Distance: f(critDistance), Switches: f(critSwitches),
				SwitchLeft: f(critSwitchLeft), NodeLeft: f(critNodeLeft), NVLinks: 5, Unpaired: 1}
			return r, rapid.IntRange(0, 63).Draw(rt, label+"-index")
		}
		a, da := drawRank("a")
		b, db := drawRank("b")
		if rapid.Bool().Draw(rt, "near") { // ranks that differ in one criterion only
			b, db = a, da
			switch rapid.IntRange(0, 2).Draw(rt, "which") {
			case 0:
				b.SwitchLeft = (a.SwitchLeft + 1) % 128
			case 1:
				b.Distance ^= 1
			default:
				db = (da + 1) % 64
			}
		}
		var o [numCriteria]criterion
		copy(o[:], perm)
		withOrder(o, func() {
			want := cmp.Or(compareRanks(&a, &b), cmpFirst(int32(da), int32(db)))
			if got := cmp.Compare(packedKey(&a, da), packedKey(&b, db)); got != want {
				rt.Fatalf("order %v: packed keys compare %d, ranks %d (%+v %d, %+v %d)", o, got, want, a, da, b, db)
			}
			// With NVLinks too: keyTerms.
			a.NVLinks, b.NVLinks = rapid.IntRange(0, 3).Draw(rt, "aLinks"), rapid.IntRange(0, 3).Draw(rt, "bLinks")
			want = compareRanks(&a, &b)
			if got := cmp.Compare(keyTerms(packedKey(&a, 0), a.NVLinks, packedKey(&b, 0), b.NVLinks)); got != want {
				rt.Fatalf("order %v: keyTerms compare %d, ranks %d (%+v, %+v)", o, got, want, a, b)
			}
		})
	})
}

// swapMachine has two NUMA nodes: node 0 with switches a (GPUs 0, 3) and
// b (GPUs 6, 9), node 2 with switch c (GPUs 12, 15, 18); no NVLinks.
func swapMachine(t *testing.T) *topology.Machine {
	b := topology.NewBuilder("swap")
	b.AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.NewCPUSet(0)})
	b.AddNode(topology.Node{ID: 2, Socket: 1, CPUs: numa.NewCPUSet(1)})
	b.SetDistances([][]int{{10, 20}, {20, 10}})
	for i, sw := range []string{"a", "a", "b", "b", "c", "c", "c"} {
		node := numa.NodeID(0)
		if sw == "c" {
			node = 2
		}
		b.AddGPU(topology.GPU{ID: 3 * i, NUMANode: node, PCIeSwitch: sw})
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Swapping two criteria of order (SwitchLeft and NodeLeft) changes the
// choice of the fast paths (ChooseWord's direct decisions and one-device
// key, Choose's word path) and of the general path alike: with every GPU
// free, one GPU is GPU 0 (its switch leaves 1, the fewest) and becomes
// GPU 12 (its node leaves 2, the fewest); two GPUs are switch a's (it
// leaves none) and become two of switch c (its node leaves 1).
func TestSwappedCriteriaChangeEveryPath(t *testing.T) {
	x, err := NewIndex(swapMachine(t))
	if err != nil {
		t.Fatal(err)
	}
	c := x.NewChooser()
	free := uint64(1)<<7 - 1
	choose := func(count int, gen bool) uint64 {
		defer general.Set(gen)()
		req := Request{Nodes: x.nodeMask, Unknown: true, Wants: []Want{{Class: 0, Count: count, Free: Set{free}}}}
		res, err := c.Choose(&req)
		if err != nil {
			t.Fatal(err)
		}
		viaChoose := res.Devices(0)[0]
		w, err := c.ChooseWord(0, count, free, 0, x.nodeMask, true)
		if err != nil {
			t.Fatal(err)
		}
		if w != viaChoose {
			t.Fatalf("count %d, general %v: ChooseWord %#b, Choose %#b", count, gen, w, viaChoose)
		}
		return w
	}
	swapped := order
	swapped[6], swapped[7] = swapped[7], swapped[6]
	for _, tc := range []struct {
		count              int
		declared, swap     uint64
		highDecl, highSwap uint64 // the tie-break of the highest indices (tie_high.go)
	}{
		{1, 1 << 0, 1 << 4, 1 << 3, 1 << 6},
		{2, 1<<0 | 1<<1, 1<<4 | 1<<5, 1<<2 | 1<<3, 1<<5 | 1<<6},
	} {
		if !lowFirst {
			tc.declared, tc.swap = tc.highDecl, tc.highSwap
		}
		for _, gen := range []bool{false, true} {
			if got := choose(tc.count, gen); got != tc.declared {
				t.Errorf("count %d, general %v, declared order: %#b, want %#b", tc.count, gen, got, tc.declared)
			}
			withOrder(swapped, func() {
				if got := choose(tc.count, gen); got != tc.swap {
					t.Errorf("count %d, general %v, SwitchLeft and NodeLeft swapped: %#b, want %#b", tc.count, gen, got, tc.swap)
				}
			})
		}
	}
}

// compareRanks is the lexicographic comparison of the criteria in order
// (NVLinks more is better), under the declared order and any permutation.
func TestCompareFollowsOrder(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		perm := rapid.Permutation(order[:]).Draw(rt, "order")
		field := rapid.IntRange(0, 3) // few values: many ties
		draw := func(label string) Rank {
			return Rank{field.Draw(rt, label+"n"), field.Draw(rt, label+"u"), field.Draw(rt, label+"d"), field.Draw(rt, label+"p"),
				field.Draw(rt, label+"s"), field.Draw(rt, label+"l"), field.Draw(rt, label+"sl"), field.Draw(rt, label+"nl")}
		}
		a, b := draw("a"), draw("b")
		var o [numCriteria]criterion
		copy(o[:], perm)
		if rapid.Bool().Draw(rt, "declared") {
			o = order // (Rank's field order: compareRanks's shortcut)
		}
		withOrder(o, func() {
			want := 0
			for _, k := range o {
				x := []int{a.Nodes, a.Unknown, a.Distance, a.Unpaired, a.Switches, -a.NVLinks, a.SwitchLeft, a.NodeLeft}[k]
				y := []int{b.Nodes, b.Unknown, b.Distance, b.Unpaired, b.Switches, -b.NVLinks, b.SwitchLeft, b.NodeLeft}[k]
				if want = cmp.Compare(x, y); want != 0 {
					break
				}
			}
			if got := compareRanks(&a, &b); got != want {
				rt.Fatalf("order %v: compareRanks(%+v, %+v) = %d, want %d", o, a, b, got, want)
			}
		})
	})
}
