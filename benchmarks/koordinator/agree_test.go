package koordinator

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"k8s.io/klog/v2"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// TestMain silences klog: Koordinator's plugin logs every NUMA hint it
// tries and cannot allocate, thousands of lines per Filter.
func TestMain(m *testing.M) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}

var agreeN = flag.Int("agree.n", 40, "random pods per state in TestPeerKoordinatorAgrees")

// verdicts returns both sides' verdicts on one pod.
func (p *pair) verdicts(name string, cpus, gpus int, memMiB int64, pol policy.Policy, bind bool) (np, koord error) {
	r := allocator.Request{ID: name, CPUs: cpus, GPUs: gpus, MemoryMiB: memMiB, Policy: pol, Exclusive: policy.Required}
	np = p.state.Fit(&r)
	if _, s := p.koord.filter(koordPodBind(name, cpus, gpus, memMiB, pol, bind)); !s.IsSuccess() {
		koord = s.AsError()
	}
	return np, koord
}

// widthCap is r's width_cap on m (docs/design.md): the width of the span
// a Restricted r gets on the empty machine, 0 when it cannot fit there.
func widthCap(m *topology.Machine, r allocator.Request) int {
	r.ID, r.Policy = "width", policy.Restricted
	a, err := allocator.MustNew(m, allocator.Options{}).Allocate(&r)
	if err != nil {
		return 0
	}
	return a.DenseSpan.Count()
}

// restrictedDiffers reports whether r is a pod that numaplace's Restricted
// and the kubelet's restricted policy (which Koordinator's topology
// manager follows) judge differently by design (docs/design.md, "Restricted
// is the kubelet's restricted without its flaw"): some resource of r alone
// fits on fewer NUMA nodes than r as a whole, so that resource marks no
// hint of r's width preferred and the merge refuses, where numaplace
// widens the whole pod to its joint width_cap.
func restrictedDiffers(m *topology.Machine, r allocator.Request) bool {
	joint := widthCap(m, r)
	alone := []allocator.Request{{CPUs: r.CPUs}, {GPUs: r.GPUs}, {MemoryMiB: r.MemoryMiB}}
	for _, a := range alone {
		if a.CPUs+a.GPUs > 0 || a.MemoryMiB > 0 {
			if w := widthCap(m, a); w > 0 && w < joint {
				return true
			}
		}
	}
	return false
}

// TestPeerKoordinatorRestrictedDiffers shows the one designed difference:
// a pod whose resources alone would be narrower than the pod. An 8-GPU pod
// of 24 CPUs on the half-full dgx-a100 (nodes 0-3 without free CPUs; the
// GPUs are on nodes 1, 3, 5 and 7): numaplace admits it on its width_cap
// of 4 nodes, {1,3,5,7}, with the CPUs on 5 and 7; Koordinator refuses it
// (its CPU hints of 4 nodes are not preferred). The same on the empty
// dgx-h100 for 142 CPUs and 1 GPU (the CPUs need both nodes, the GPU one).
func TestPeerKoordinatorRestrictedDiffers(t *testing.T) {
	for _, c := range []struct {
		preset     string
		fill       int
		cpus, gpus int
	}{{"dgx-a100", 4, 24, 8}, {"dgx-h100", 0, 142, 1}} {
		m := machine(t, c.preset)
		r := allocator.Request{CPUs: c.cpus, GPUs: c.gpus, MemoryMiB: 64 << 10}
		if !restrictedDiffers(m, r) {
			t.Errorf("%s: %d CPUs and %d GPUs must be a pod whose resources alone are narrower", c.preset, c.cpus, c.gpus)
		}
		np, koord := newPair(t, m, c.fill).verdicts("wide", c.cpus, c.gpus, r.MemoryMiB, policy.Restricted, true)
		if np != nil || koord == nil {
			t.Errorf("%s: numaplace must admit (%v) and Koordinator refuse (%v)", c.preset, np, koord)
		}
	}
}

// TestPeerKoordinatorAgrees checks that both sides hold the machine in the
// same state and judge pods alike: every benchmark case fits on both, and
// on dgx-h100 empty and half full, random pods (1 to every CPU, 1 GiB to
// all the memory, half of them with 1 GPU to all of them, each policy,
// CPUs bound or not) fit on both or on neither, except Restricted pods of
// the designed difference (restrictedDiffers), which numaplace may admit
// where Koordinator refuses (never the other way). (dgx-a100 takes
// Koordinator 0.03-2.6 s per Filter, so only the benchmark cases run there.)
func TestPeerKoordinatorAgrees(t *testing.T) {
	for _, c := range filterCases(t) {
		p := newPair(t, machine(t, c.preset), c.fill)
		np, koord := p.verdicts("bench", c.cpus, c.gpus, c.memMiB, c.pol, c.bind)
		if np != nil || koord != nil {
			t.Errorf("%s: both sides must fit the benchmark pod: numaplace %v, Koordinator %v", c.name, np, koord)
		}
	}
	m := machine(t, "dgx-h100")
	var memMiB int64
	for _, n := range m.Nodes() {
		memMiB += n.MemoryMiB
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for fill := range 2 {
		p := newPair(t, m, fill)
		fits, differs := 0, 0
		for i := range *agreeN {
			cpus := 1 + rng.IntN(m.NumCPUs())
			mem := (1 + rng.Int64N(memMiB>>10)) << 10
			pol := []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort}[i%3]
			bind := i%2 == 0
			gpus := 0
			if i%4 >= 2 {
				gpus = 1 + rng.IntN(m.NumGPUs())
			}
			np, koord := p.verdicts(fmt.Sprintf("p%d", i), cpus, gpus, mem, pol, bind)
			if np == nil && koord != nil && pol == policy.Restricted &&
				restrictedDiffers(m, allocator.Request{CPUs: cpus, GPUs: gpus, MemoryMiB: mem}) {
				differs++
			} else if (np == nil) != (koord == nil) {
				t.Errorf("fill %d: %d CPUs, %d GPUs, %d MiB, %s, CPUs bound %v: numaplace %v, Koordinator %v", fill, cpus, gpus, mem, pol, bind, np, koord)
			}
			if np == nil {
				fits++
			}
		}
		if fits == 0 || fits == *agreeN {
			t.Errorf("fill %d: %d of %d random pods fit: the draw must have both fits and refusals", fill, fits, *agreeN)
		}
		t.Logf("fill %d: %d of %d random pods fit on numaplace; %d of them are Restricted pods Koordinator refuses by the designed difference", fill, fits, *agreeN, differs)
	}
}
