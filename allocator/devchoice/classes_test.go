package devchoice_test

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/topology"
)

// threeClassMachine draws a machine of 1-3 NUMA nodes (randomNodes) with
// up to 4 GPUs, 1-8 RDMA NICs and 1-6 NVMe drives (more than the GPUs,
// often), placed as randomNodes places them, and NVLinks between some
// GPUs.
func threeClassMachine(t *rapid.T) *topology.Machine {
	b, place := randomNodes(t, "three-classes", 3)
	gpus := rapid.IntRange(0, 4).Draw(t, "gpus")
	for g := range gpus {
		node, sw := place("gpu")
		b.AddGPU(topology.GPU{ID: g, NUMANode: node, PCIeSwitch: sw})
	}
	for a := range gpus {
		for c := a + 1; c < gpus; c++ {
			if l := rapid.IntRange(0, 3).Draw(t, "links"); l > 0 {
				b.AddNVLink(a, c, l)
			}
		}
	}
	for _, class := range []struct {
		name string
		most int
	}{{"rdma", 8}, {"nvme", 6}} {
		for d := range rapid.IntRange(1, class.most).Draw(t, class.name) {
			node, sw := place(class.name)
			b.AddDevice(topology.Device{ID: fmt.Sprintf("%s%d", class.name, d), Class: class.name, NUMANode: node, PCIeSwitch: sw})
		}
	}
	m, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEveryClassOrderAgainstBruteForce asks for any subset of a machine's
// classes in class order, so that a class other than the GPUs leads the
// pairing whenever no GPU is asked for (such a request once panicked:
// TestOtherClassFirst). The choice holds each count and the must-include
// devices, only free devices on allowed nodes, reports the rank the
// reference computes for it, and is best on the criteria the search is
// exact on for any request: the NUMA nodes, the unknown node and the
// distance. Each machine gets 30 requests.
func TestEveryClassOrderAgainstBruteForce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		m := threeClassMachine(rt)
		for range 30 { // requests per machine
			x, devs, nodes, unknown, allowed := drawCase(rt, m)
			var wants []refWant
			for cl := range devs {
				// GPUs one time in three, the other classes two in three.
				w, ok := drawWant(rt, devs[cl], cl, fmt.Sprint("class", cl), allowed)
				if ok && len(w.must) == 0 && rapid.Bool().Draw(rt, "withMust") {
					// A must-include device in one want of two, not one in seven.
					w.must = []int{rapid.SampledFrom(w.free).Draw(rt, "must")}
					if !allowed(devs[cl][w.must[0]].group) {
						w.must = nil
					}
				}
				if ask := rapid.IntRange(0, 2).Draw(rt, "asked"); ok && (ask == 0) == (cl == 0) {
					wants = append(wants, w)
				}
			}
			if len(wants) == 0 {
				continue
			}
			got, gotRank := chooseChecked(rt, x, m, devs, wants, nodes, unknown, allowed)
			best, bestRank := refBest(m, devs, wants, allowed)
			nodeLevel := func(r devchoice.Rank) devchoice.Rank {
				return devchoice.Rank{Nodes: r.Nodes, Unknown: r.Unknown, Distance: r.Distance}
			}
			if nodeLevel(gotRank) != nodeLevel(bestRank) {
				rt.Fatalf("got %v %+v, the best is %v %+v", got, gotRank, best, bestRank)
			}
		}
	})
}
