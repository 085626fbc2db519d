package kubelet

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kubelet/kubelettest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

var updatePreferred = flag.Bool("update-preferred", false,
	"rewrite testdata/preferred_answers.txt from the current GetPreferredAllocation")

// largeGPUMachine is a machine of 4 NUMA nodes (two sockets) with gpus
// GPUs spread over them, eight per PCIe switch, and links NVLinks (each
// GPU g linked to g+1).
func largeGPUMachine(t testing.TB, gpus, links int) *topology.Machine {
	t.Helper()
	b := topology.NewBuilder(fmt.Sprintf("gpus%d", gpus))
	for n := range 4 {
		b.AddNode(topology.Node{ID: numa.NodeID(n), Socket: n / 2, CPUs: numa.CPURange(n*16, n*16+15), MemoryMiB: 1 << 20})
	}
	for g := range gpus {
		b.AddGPU(topology.GPU{ID: g, NUMANode: numa.NodeID(g * 4 / gpus), PCIeSwitch: "sw" + strconv.Itoa(g/8)})
	}
	for l := range links {
		b.AddNVLink(l, l+1, 4)
	}
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// allocatedBy returns the bytes f allocates (runtime.MemStats.TotalAlloc).
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// NewPreferredAllocator's memory grows linearly with the GPUs: 4,096 GPUs with
// one NVLink take at most 64 MB (an n×n table of links alone would take
// 64 MiB), and 30,000 GPUs (where such a table would take 3.6 GB) at most
// 30000/4096 times as much. The answers stay usable on them.
func TestNewDevicePluginMemoryIsLinear(t *testing.T) {
	for _, c := range []struct {
		gpus  int
		limit uint64
	}{{4096, 64 << 20}, {30_000, 30_000 * (64 << 20) / 4096}} {
		m := largeGPUMachine(t, c.gpus, 1)
		var p *PreferredAllocator
		bytes := allocatedBy(func() { p = NewPreferredAllocator(m) })
		t.Logf("NewPreferredAllocator on %d GPUs: %d bytes", c.gpus, bytes)
		require.LessOrEqual(t, bytes, c.limit, "%d GPUs", c.gpus)
		pref, err := p.Prefer(ids(0, c.gpus-1), []string{"0"}, 2)
		require.NoError(t, err)
		require.Equal(t, []int{0, 1}, pref.GPUs, "%s", pref) // the NVLinked pair
		require.Equal(t, 4, pref.NVLinks)
	}
}

// BenchmarkNewPreferredAllocator measures NewPreferredAllocator on 4,096 GPUs (one
// NVLink) and reports the bytes it allocates as MB/op.
func BenchmarkNewPreferredAllocator(b *testing.B) {
	m := largeGPUMachine(b, 4096, 1)
	b.Run("gpus4096", func(b *testing.B) {
		b.ReportAllocs()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		for b.Loop() {
			NewPreferredAllocator(m)
		}
		runtime.ReadMemStats(&ms1)
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N)/1e6, "MB/op")
	})
}

// preferredCases returns the machines and the answers to the requests of
// testdata/preferred_answers.txt: the presets with GPUs, kubelettest.Machine16,
// kubelettest.Machine16Worst and random machines with NVLinks, each with random
// requests (fixed seeds).
func preferredCases(t testing.TB) ([]*topology.Machine, []string) {
	machines := []*topology.Machine{preset(t, "dgx-h100"), preset(t, "dgx-a100"),
		preset(t, "xeon-2s-snc2-8gpu"), preset(t, "numa64"), kubelettest.Machine16(t), kubelettest.Machine16Worst(t)}
	rng := rand.New(rand.NewPCG(11, 6))
	for k := range 6 {
		b := topology.NewBuilder("random" + strconv.Itoa(k))
		nodes := 1 + rng.IntN(4)
		for n := range nodes {
			b.AddNode(topology.Node{ID: numa.NodeID(n), Socket: n / 2, CPUs: numa.NewCPUSet(n)})
		}
		gpus := 4 + rng.IntN(13)
		for g := range gpus {
			node := numa.NodeID(rng.IntN(nodes))
			if rng.IntN(8) == 0 {
				node = topology.UnknownNode
			}
			b.AddGPU(topology.GPU{ID: g, NUMANode: node, PCIeSwitch: "sw" + strconv.Itoa(rng.IntN(gpus/2+1))})
			for c := g + 1; c < gpus; c++ {
				if rng.IntN(3) == 0 {
					b.AddNVLink(g, c, 1+rng.IntN(12))
				}
			}
		}
		m, err := b.Build()
		require.NoError(t, err)
		machines = append(machines, m)
	}
	var lines []string
	for _, m := range machines {
		p := NewPreferredAllocator(m)
		n := m.NumGPUs()
		for range 40 {
			perm := rng.Perm(n)
			avail := perm[:1+rng.IntN(n)]
			must := avail[:rng.IntN(min(3, len(avail))+1)]
			size := len(must) + rng.IntN(len(avail)-len(must)+1)
			if size == 0 {
				size = 1
			}
			a, ms := make([]string, len(avail)), make([]string, len(must))
			for i, g := range avail {
				a[i] = strconv.Itoa(m.GPUs()[g].ID)
			}
			copy(ms, a[:len(must)])
			pref, err := p.Prefer(a, ms, size)
			require.NoError(t, err)
			lines = append(lines, fmt.Sprintf("%s avail=%s must=%s size=%d -> %s", m.Name(),
				strings.Join(a, ","), strings.Join(ms, ","), size, strings.Join(pref.Devices, ",")))
		}
	}
	return machines, lines
}

// The answers of GetPreferredAllocation on realistic machines are never
// worse than those recorded in testdata/preferred_answers.txt by the
// version that kept n×n tables of NVLinks (before it was made linear in
// memory and moved onto allocator/devchoice): each answer is a valid
// choice (size devices of available, every must-include one among them)
// whose reference rank (dpQuality, the criteria of devchoice.Rank) is at
// least as good as the recorded answer's, and on an equal rank its IDs are
// no higher (the tie rule: the lowest indices). -update-preferred rewrites
// the file with today's answers.
func TestGetPreferredAllocationAnswersNoWorse(t *testing.T) {
	ms, got := preferredCases(t)
	const file = "testdata/preferred_answers.txt"
	if *updatePreferred {
		require.NoError(t, os.WriteFile(file, []byte(strings.Join(got, "\n")+"\n"), 0o644))
	}
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		want = append(want, sc.Text())
	}
	require.NoError(t, sc.Err())
	require.Equal(t, len(want), len(got))
	machines := map[string]*topology.Machine{}
	for _, m := range ms {
		machines[m.Name()] = m
	}
	list := func(s string) []int {
		var out []int
		for _, x := range strings.Split(s, ",") {
			if x != "" {
				v, err := strconv.Atoi(x)
				require.NoError(t, err)
				out = append(out, v)
			}
		}
		return out
	}
	better := 0
	for i := range want {
		wq, wa, _ := strings.Cut(want[i], " -> ")
		gq, ga, _ := strings.Cut(got[i], " -> ")
		require.Equal(t, wq, gq, "line %d: the same question", i+1)
		f := strings.Fields(gq)
		m := machines[f[0]]
		require.NotNil(t, m, "line %d", i+1)
		avail, must := list(strings.TrimPrefix(f[1], "avail=")), list(strings.TrimPrefix(f[2], "must="))
		size, err := strconv.Atoi(strings.TrimPrefix(f[3], "size="))
		require.NoError(t, err)
		old, nw := list(wa), list(ga)
		require.Len(t, nw, size, "line %d", i+1)
		for _, g := range nw {
			require.Contains(t, avail, g, "line %d", i+1)
		}
		for _, g := range must {
			require.Contains(t, nw, g, "line %d", i+1)
		}
		c := refCompare(dpQuality(m, avail, nw), dpQuality(m, avail, old))
		require.LessOrEqual(t, c, 0, "line %d: %v ranks below the recorded %v", i+1, nw, old)
		if c == 0 {
			require.LessOrEqual(t, slices.Compare(nw, old), 0, "line %d: %v ties with the recorded %v on higher IDs", i+1, nw, old)
		}
		if c < 0 || !slices.Equal(nw, old) {
			better++
		}
	}
	t.Logf("%d of %d answers changed, each ranking at least as well as before", better, len(want))
}
