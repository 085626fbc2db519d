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
func (p *pair) verdicts(name string, cpus int, memMiB int64, pol policy.Policy, bind bool) (np, koord error) {
	r := allocator.Request{ID: name, CPUs: cpus, MemoryMiB: memMiB, Policy: pol, Exclusive: policy.Required}
	np = p.state.Fit(&r)
	if _, s := p.koord.filter(koordPodBind(name, cpus, memMiB, pol, bind)); !s.IsSuccess() {
		koord = s.AsError()
	}
	return np, koord
}

// TestPeerKoordinatorAgrees checks that both sides hold the machine in the
// same state and judge pods alike: every benchmark case fits on both, and
// on dgx-h100 empty and half full, random pods (1 to every CPU, 1 GiB to
// all the memory, each policy, CPUs bound or not) fit on both or on
// neither. (dgx-a100 takes
// Koordinator 0.2-0.4 s per Filter, so only the benchmark cases run there.)
func TestPeerKoordinatorAgrees(t *testing.T) {
	for _, c := range filterCases(t) {
		p := newPair(t, machine(t, c.preset), c.fill)
		np, koord := p.verdicts("bench", c.cpus, c.memMiB, c.pol, c.bind)
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
		fits := 0
		for i := range *agreeN {
			cpus := 1 + rng.IntN(m.NumCPUs())
			mem := (1 + rng.Int64N(memMiB>>10)) << 10
			pol := []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort}[i%3]
			bind := i%2 == 0
			np, koord := p.verdicts(fmt.Sprintf("p%d", i), cpus, mem, pol, bind)
			if (np == nil) != (koord == nil) {
				t.Errorf("fill %d: %d CPUs, %d MiB, %s, CPUs bound %v: numaplace %v, Koordinator %v", fill, cpus, mem, pol, bind, np, koord)
			}
			if np == nil {
				fits++
			}
		}
		if fits == 0 || fits == *agreeN {
			t.Errorf("fill %d: %d of %d random pods fit: the draw must have both fits and refusals", fill, fits, *agreeN)
		}
	}
}
