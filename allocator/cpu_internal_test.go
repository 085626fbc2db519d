package allocator

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// TestLowestBits checks lowestBits against its definition, the n lowest
// set bits of w taken one by one, for every n it is called with (0 < n <
// OnesCount64(w)), on words of every density.
func TestLowestBits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := rapid.Uint64().Draw(t, "w")
		if rapid.Bool().Draw(t, "dense") {
			w |= rapid.Uint64().Draw(t, "more")
		}
		if bits.OnesCount64(w) < 2 {
			return
		}
		n := rapid.IntRange(1, bits.OnesCount64(w)-1).Draw(t, "n")
		var want uint64
		for x, k := w, 0; k < n; k, x = k+1, x&(x-1) {
			want |= x & -x
		}
		if got := lowestBits(w, n); got != want {
			t.Fatalf("lowestBits(%#x, %d) = %#x, want %#x", w, n, got, want)
		}
	})
}

// TestLoadSingleAgreesWithRuns: on every node whose planes are single
// (planeLayout.single), loadPlanes' shortcut gives the planes and the whole
// free cores the run-by-run load gives, on random free sets of the presets
// and of random machines (randomCPUMachine).
func TestLoadSingleAgreesWithRuns(t *testing.T) {
	singles := 0
	for k, m := range cpuTestMachines(t) {
		c := newCPUs(m)
		rng := rand.New(rand.NewPCG(uint64(k), 3))
		for trial := 0; trial < 20; trial++ {
			randomFree(c, rng, 3)
			for node := range c.layout {
				l := &c.layout[node]
				if !l.single {
					continue
				}
				singles++
				nw := c.loadPlanes(node)
				got := slices.Clone(c.planes[:(c.tpc+1)*nw])
				l.single = false
				c.loadPlanes(node)
				l.single = true
				if want := c.planes[:(c.tpc+1)*nw]; !slices.Equal(got, want) {
					t.Fatalf("%s node %d: loadSingle %x, the runs %x", m.Name(), node, got, want)
				}
			}
		}
	}
	if singles == 0 {
		t.Fatal("no node has single planes")
	}
}

// cpuTestMachines returns the presets and 500 random machines
// (randomCPUMachine).
func cpuTestMachines(t *testing.T) []*topology.Machine {
	var machines []*topology.Machine
	for _, name := range topology.PresetNames() {
		m, err := topology.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		machines = append(machines, m)
	}
	for seed := range 500 {
		machines = append(machines, randomCPUMachine(t, rand.New(rand.NewPCG(uint64(seed), 9))))
	}
	return machines
}

// randomFree sets c's free set to its allocatable CPUs less about one in
// oneIn of them, drawn from rng (its counters are left as they are).
func randomFree(c *CPUs, rng *rand.Rand, oneIn int) {
	c.free = c.alloc.Clone()
	for cpu := range c.alloc.All() {
		if rng.IntN(oneIn) == 0 {
			c.free.Remove(cpu)
		}
	}
}

// TestPickSingleAgreesWithPick: on every node whose planes are single,
// pick's shortcut (pickSingle) picks the CPUs and leaves the counters the
// general passes do, and recountNode's shortcut sets the counters the
// plane-by-plane count does, for random free sets of the machines of
// cpuTestMachines and random amounts, CPUs or whole cores.
func TestPickSingleAgreesWithPick(t *testing.T) {
	singles := 0
	for k, m := range cpuTestMachines(t) {
		c := newCPUs(m)
		rng := rand.New(rand.NewPCG(uint64(k), 5))
		for trial := 0; trial < 20; trial++ {
			randomFree(c, rng, 1+trial%4)
			c.recount(c.alloc)
			for node := range c.layout {
				l := &c.layout[node]
				if !l.single {
					continue
				}
				singles++
				wholeOnly := rng.IntN(3) == 0
				want := rng.IntN(int(c.nodeFree[node]) + 2)
				if wholeOnly {
					want = rng.IntN(int(c.wholeFree[node])+1) * c.tpc
				}
				nodeFree, wholeFree := c.nodeFree[node], c.wholeFree[node]
				run := func(single bool) (numa.CPUSet, int64, int64) {
					c.nodeFree[node], c.wholeFree[node] = nodeFree, wholeFree
					l.single = single
					c.pick(node, want, wholeOnly)
					l.single = true
					return c.picked(), c.nodeFree[node], c.wholeFree[node]
				}
				gotSet, gotFree, gotWhole := run(true)
				wantSet, wantFree, wantWhole := run(false)
				if !gotSet.Equal(wantSet) || gotFree != wantFree || gotWhole != wantWhole {
					t.Fatalf("%s node %d want %d whole %v: pickSingle %s (%d, %d), pick %s (%d, %d)", m.Name(), node, want, wholeOnly,
						gotSet, gotFree, gotWhole, wantSet, wantFree, wantWhole)
				}
				c.recountNode(node)
				gotFree, gotWhole = c.nodeFree[node], c.wholeFree[node]
				l.single = false
				c.recountNode(node)
				l.single = true
				if gotFree != c.nodeFree[node] || gotWhole != c.wholeFree[node] {
					t.Fatalf("%s node %d: recountNode's shortcut (%d, %d), the planes (%d, %d)", m.Name(), node,
						gotFree, gotWhole, c.nodeFree[node], c.wholeFree[node])
				}
			}
		}
	}
	if singles == 0 {
		t.Fatal("no node has single planes")
	}
}

// randomCPUMachine builds a machine of 1-4 NUMA nodes of 0-40 cores of 1-4
// threads (a node's last core sometimes shorter), CPU numbers in order,
// by core or shuffled, sometimes with reserved CPUs.
func randomCPUMachine(t *testing.T, rng *rand.Rand) *topology.Machine {
	tpc, nodes := 1+rng.IntN(4), 1+rng.IntN(4)
	cores := make([]int, nodes)
	sizes := [][]int{}
	total := 0
	for i := range cores {
		cores[i] = rng.IntN(41)
		var sz []int
		for k := 0; k < cores[i]; k++ {
			n := tpc
			if k == cores[i]-1 && rng.IntN(3) == 0 {
				n = 1 + rng.IntN(tpc)
			}
			sz = append(sz, n)
			total += n
		}
		sizes = append(sizes, sz)
	}
	perm := make([]int, total)
	for i := range perm {
		perm[i] = i
	}
	switch rng.IntN(3) {
	case 0: // threads of a node's cores first, then their siblings
		perm = perm[:0]
		base := 0
		for _, sz := range sizes {
			off := 0
			for th := 0; th < tpc; th++ {
				off = 0
				for _, n := range sz {
					if th < n {
						perm = append(perm, base+off+th)
					}
					off += n
				}
			}
			base += off
		}
	case 1:
		rng.Shuffle(total, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	}
	b := topology.NewBuilder("cpus")
	next := 0
	for i, sz := range sizes {
		var set numa.CPUSet
		for _, n := range sz {
			var core numa.CPUSet
			for range n {
				core.Add(perm[next])
				set.Add(perm[next])
				next++
			}
			b.AddCore(core)
		}
		b.AddNode(topology.Node{ID: numa.NodeID(i), Socket: topology.UnknownSocket, CPUs: set, MemoryMiB: 1024})
	}
	if total > 0 && rng.IntN(3) == 0 {
		var res numa.CPUSet
		for range 1 + rng.IntN(3) {
			res.Add(rng.IntN(total))
		}
		b.SetReservedCPUs(res)
	}
	m, err := b.Build()
	if err != nil {
		t.Fatalf("randomCPUMachine: %v", err)
	}
	return m
}
