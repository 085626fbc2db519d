package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// small is the configuration of the tests' runs: 20 nodes, 300 pods, every
// change checked.
var small = Config{Nodes: 20, Pods: 300, Seed: 1, Verify: true}

func TestSmallRunInvariants(t *testing.T) {
	rep, err := Run(small)
	require.NoError(t, err)
	require.Len(t, rep.Results, 3)
	assert.Equal(t, 160, rep.GPUs)
	assert.Equal(t, map[string]int{"dgx-h100": 10, "dgx-a100": 10}, rep.NodesByPreset)
	for _, r := range rep.Results {
		t.Run(r.Setup.Letter(), func(t *testing.T) {
			assert.Equal(t, 300, r.Arrivals)
			assert.Equal(t, r.Arrivals, r.Placed+r.Unschedulable+r.StillQueued, "every pod ends placed, unschedulable or queued")
			assert.Positive(t, r.Placed)
			assert.LessOrEqual(t, r.PodsRefused, r.AdmissionErrors)
			assert.LessOrEqual(t, r.PlacedAfterRefusal, r.PodsRefused)
			assert.LessOrEqual(t, r.CrossNUMA, r.Placed)
			require.Len(t, r.Series, DefaultSamples+1)
			assert.Zero(t, r.Series[0].Hours)
			assert.InDelta(t, rep.Trace.Hours, r.Series[len(r.Series)-1].Hours, 1e-9)
			for i, s := range r.Series {
				assert.GreaterOrEqual(t, s.GPUAllocation, 0.0)
				assert.LessOrEqual(t, s.GPUAllocation, 1.0)
				if i > 0 {
					prev := r.Series[i-1]
					assert.GreaterOrEqual(t, s.AdmissionErrors, prev.AdmissionErrors)
					assert.GreaterOrEqual(t, s.CrossNUMA, prev.CrossNUMA)
					assert.Greater(t, s.Hours, prev.Hours)
				}
			}
			last := r.Series[len(r.Series)-1]
			assert.Equal(t, r.AdmissionErrors, last.AdmissionErrors)
			assert.Equal(t, r.CrossNUMA, last.CrossNUMA)
			assert.Equal(t, r.StillQueued, last.Waiting)
			assert.GreaterOrEqual(t, r.GPUAllocationPeak, r.GPUAllocationMean)
			assert.LessOrEqual(t, r.LatencyP50, r.LatencyP99)
		})
	}
	a, b, c := rep.Results[0], rep.Results[1], rep.Results[2]
	// single-numa-node admits only one-node placements (Verify checked
	// every pod) and refuses at admission what totals let through.
	assert.Zero(t, a.MultiNUMA)
	assert.Zero(t, a.CrossNUMA)
	assert.Positive(t, a.AdmissionErrors)
	// best-effort admits everything whose totals fit, cross-NUMA or not.
	assert.Zero(t, b.AdmissionErrors)
	assert.Positive(t, b.CrossNUMA)
	// numaplace: the node always honours the scheduler's decision.
	assert.Zero(t, c.AdmissionErrors)
	// Only the policy that allows it falls back across NUMA nodes.
	for pol := range c.CrossNUMAByPolicy {
		assert.Equal(t, policy.BestEffort.String(), pol)
	}
	sum := 0
	for _, n := range b.CrossNUMAByPolicy {
		sum += n
	}
	assert.Equal(t, b.CrossNUMA, sum)
	assert.Less(t, c.CrossNUMA, b.CrossNUMA)
	assert.Greater(t, c.Placed, a.Placed)
}

// counts are the deterministic fields of a result.
func counts(r *Result) Result {
	c := *r
	c.LatencyP50, c.LatencyP99, c.Wall = 0, 0, 0
	c.latencies, c.refusedPods = nil, nil
	return c
}

func TestDeterministic(t *testing.T) {
	cfg := small
	cfg.Verify = false
	one, err := Run(cfg)
	require.NoError(t, err)
	two, err := Run(cfg)
	require.NoError(t, err)
	for i := range one.Results {
		assert.Equal(t, counts(one.Results[i]), counts(two.Results[i]), "setup %s", one.Results[i].Setup)
	}
	assert.Equal(t, one.Trace, two.Trace)
	// Without the latency columns, the tables are equal too.
	strip := func(s string) string {
		var out []string
		for line := range strings.Lines(s) {
			if i := strings.LastIndex(line, "| "); strings.HasPrefix(line, "| ") && i > 0 {
				line = line[:strings.LastIndex(line[:i], "| ")]
			}
			out = append(out, line)
		}
		return strings.Join(out, "")
	}
	assert.Equal(t, strip(one.Table()), strip(two.Table()))

	cfg.Seed = 2
	other, err := Run(cfg)
	require.NoError(t, err)
	assert.NotEqual(t, one.Trace, other.Trace, "another seed, another trace")
}

func TestSetupsSubsetAndOrder(t *testing.T) {
	cfg := small
	cfg.Verify = false
	all, err := Run(cfg)
	require.NoError(t, err)
	cfg.Setups = []Setup{Numaplace, KubeletSingleNUMANode}
	some, err := Run(cfg)
	require.NoError(t, err)
	require.Len(t, some.Results, 2)
	assert.Equal(t, Numaplace, some.Results[0].Setup)
	assert.Equal(t, counts(all.Results[2]), counts(some.Results[0]), "a setup's result does not depend on the others")
	assert.Equal(t, counts(all.Results[0]), counts(some.Results[1]))
}

func TestTrace(t *testing.T) {
	cfg := Config{Pods: 20000, Seed: 7}
	trace, err := NewTrace(cfg, 1600)
	require.NoError(t, err)
	require.Len(t, trace, 20000)
	byGPUs := map[int]int{}
	noSpec := 0
	names := map[string]bool{}
	gpuSeconds := 0.0
	for i, p := range trace {
		require.False(t, names[p.Name], "names are unique")
		names[p.Name] = true
		if i > 0 {
			require.GreaterOrEqual(t, p.Arrival, trace[i-1].Arrival, "arrivals are in order")
		}
		require.Contains(t, []int{1, 2, 4, 8}, p.GPUs)
		require.Zero(t, p.CPUs%p.GPUs)
		require.GreaterOrEqual(t, p.CPUs/p.GPUs, 6)
		require.LessOrEqual(t, p.CPUs/p.GPUs, 24)
		require.Positive(t, p.Duration)
		byGPUs[p.GPUs]++
		switch {
		case !p.NUMASpec:
			noSpec++
			require.Equal(t, policy.None, p.Policy)
		case p.GPUs == 8:
			require.Contains(t, []policy.Policy{policy.Restricted, policy.BestEffort}, p.Policy)
		default:
			require.Contains(t, []policy.Policy{policy.SingleNUMANode, policy.Restricted, policy.BestEffort}, p.Policy)
		}
		gpuSeconds += float64(p.GPUs) * p.Duration
	}
	// The weights 40/25/25/10 and 15% without a spec, within sampling noise.
	for g, w := range map[int]float64{1: 0.40, 2: 0.25, 4: 0.25, 8: 0.10} {
		assert.InDelta(t, w, float64(byGPUs[g])/20000, 0.02, "%d GPUs", g)
	}
	assert.InDelta(t, 0.15, float64(noSpec)/20000, 0.02)
	// The offered load: GPU-seconds asked over GPU-seconds available.
	span := trace[len(trace)-1].Arrival
	assert.InDelta(t, DefaultLoad, gpuSeconds/(1600*span), 0.1)

	again, err := NewTrace(cfg, 1600)
	require.NoError(t, err)
	assert.Equal(t, trace, again)

	_, err = NewTrace(cfg, 0)
	assert.ErrorIs(t, err, ErrConfig)
}

func TestConfig(t *testing.T) {
	c, err := Config{}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, DefaultNodes, c.Nodes)
	assert.Equal(t, DefaultPods, c.Pods)
	assert.Equal(t, AllSetups, c.Setups)
	for _, bad := range []Config{
		{Nodes: -1}, {Pods: -5}, {Nodes: MaxNodes + 1}, {Load: -1}, {MeanDuration: 1},
		{Patience: -1}, {RetriesPerDeparture: -1}, {Samples: -1}, {PercentageOfNodesToScore: 101},
		{Parallelism: -1}, {Setups: []Setup{}}, {Setups: []Setup{'x'}}, {Setups: []Setup{Numaplace, Numaplace}},
	} {
		_, err := Run(bad)
		assert.ErrorIs(t, err, ErrConfig, "%+v", bad)
	}
}

func TestParseSetups(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []Setup
		err  string
	}{
		{in: "a,b,c", want: AllSetups},
		{in: "c", want: []Setup{Numaplace}},
		{in: " c , a ", want: []Setup{Numaplace, KubeletSingleNUMANode}},
		{in: "", err: `unknown setup ""`},
		{in: "a,d", err: `unknown setup "d"`},
		{in: "a,a", err: `setup "a" given twice`},
		{in: "ab", err: `unknown setup "ab"`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSetups(tt.in)
			if tt.err != "" {
				assert.ErrorIs(t, err, ErrConfig)
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	assert.Equal(t, "c: numaplace", Numaplace.String())
	assert.Equal(t, "a", KubeletSingleNUMANode.Letter())
}

func TestNumFeasibleToFind(t *testing.T) {
	for _, tt := range []struct{ nodes, pct, want int }{
		{20, 0, 20}, {99, 0, 99}, {200, 0, 100}, {1000, 0, 420}, {5000, 0, 500}, {10000, 0, 500},
		{100000, 0, 5000}, {10000, 100, 10000}, {10000, 1, 100}, {10000, 30, 3000},
	} {
		assert.Equal(t, tt.want, numFeasibleToFind(tt.nodes, tt.pct), "%d nodes, %d%%", tt.nodes, tt.pct)
	}
}

func TestWidthCapAndCrossNUMA(t *testing.T) {
	cl, err := newCluster(2)
	require.NoError(t, err)
	h100, a100 := cl.infos[0], cl.infos[1]
	require.Equal(t, "dgx-h100", h100.m.Name())
	require.Equal(t, "dgx-a100", a100.m.Name())
	for _, tt := range []struct {
		mi         *machineInfo
		cpus, gpus int
		want       int
	}{
		{h100, 24, 4, 1}, {h100, 96, 4, 1}, {h100, 16, 8, 2}, {h100, 192, 8, 2},
		{a100, 24, 1, 1}, {a100, 32, 2, 1}, {a100, 48, 2, 2}, {a100, 40, 4, 2},
		{a100, 96, 4, 3}, {a100, 16, 8, 4}, {a100, 192, 8, 6}, {a100, 300, 8, 0},
	} {
		assert.Equal(t, tt.want, tt.mi.widthCap(tt.cpus, tt.gpus), "%s: %d CPUs %d GPUs", tt.mi.m.Name(), tt.cpus, tt.gpus)
	}
	cpus := func(s string) numa.CPUSet { return numa.MustParseCPUSet(s) }
	for _, tt := range []struct {
		name  string
		mi    *machineInfo
		cpus  string
		gpus  []int
		cross bool
	}{
		{"h100 aligned on node 0", h100, "0-7", []int{0, 1}, false},
		{"h100 CPUs on the other node", h100, "56-63", []int{0, 1}, true},
		{"h100 GPUs split", h100, "0-7", []int{3, 4}, true},
		{"h100 8 GPUs on both nodes", h100, "0-3,56-59", []int{0, 1, 2, 3, 4, 5, 6, 7}, false},
		// a100: GPUs 0,1 on node 3 (CPUs 48-63), 2,3 on node 1 (16-31).
		{"a100 aligned", a100, "48-55", []int{0, 1}, false},
		{"a100 CPUs on a GPU-less node", a100, "0-7", []int{0, 1}, true},
		{"a100 4 GPUs, CPUs with them", a100, "16-23,48-55", []int{0, 1, 2, 3}, false},
		// 96 CPUs cannot sit with 4 GPUs on their 2 nodes: a third node
		// is the narrowest the hardware allows.
		{"a100 4 GPUs, 96 CPUs on 3 nodes", a100, "0-31,128-143,144-159,48-63,176-191", []int{0, 1, 2, 3}, false},
		// GPUs 4,5 are on node 7 (CPUs 112-127): two nodes, the width_cap,
		// though on two sockets; the count is what the definition reads.
		{"a100 4 GPUs over sockets", a100, "48-55,112-119", []int{0, 1, 4, 5}, false},
		{"a100 4 GPUs over 3 nodes", a100, "48-55,16-23", []int{0, 2, 6, 7}, true},
	} {
		s := tt.mi.shapeOf(cpus(tt.cpus), tt.gpus)
		assert.Equal(t, tt.cross, tt.mi.crossNUMA(s), tt.name)
	}
}

func TestKubeletEmulation(t *testing.T) {
	cl, err := newCluster(1) // one dgx-h100
	require.NoError(t, err)
	mk := func(pol topologymanager.Policy) (*blindSetup, *engine) {
		e := newEngine(Config{Samples: 1}, KubeletSingleNUMANode, nil, cl, nil)
		b := newBlindSetup(pol, cl, e, 0)
		e.run = b
		return b, e
	}
	// Two GPUs held on each NUMA node: 4 free GPUs in total, 2 per node.
	fill := func(b *blindSetup, e *engine) {
		for i, g := range [][]int{{0, 1}, {4, 5}} {
			a := allocator.Allocation{ID: []string{"x", "y"}[i], CPUs: numa.NewCPUSet(g[0]*14, g[0]*14+1), GPUs: g}
			_, err := b.states[0].Claim(a)
			require.NoError(t, err)
			b.gpuHeld[0] |= gpuMask(g)
			e.usedCPUs[0] += 2
			e.usedGPUs[0] += 2
		}
	}
	pod := &PodSpec{Name: "p", GPUs: 4, CPUs: 24}

	b, e := mk(topologymanager.PolicySingleNUMANode)
	fill(b, e)
	r, err := b.attempt(pod)
	require.NoError(t, err)
	assert.Equal(t, refused, r.outcome, "single-numa-node refuses 4 GPUs split 2+2")
	_, held := b.states[0].Get("p")
	assert.False(t, held, "a refused pod holds nothing")

	b, e = mk(topologymanager.PolicyBestEffort)
	fill(b, e)
	r, err = b.attempt(pod)
	require.NoError(t, err)
	require.Equal(t, placed, r.outcome)
	a, ok := b.states[0].Get("p")
	require.True(t, ok)
	assert.Equal(t, []int{2, 3, 6, 7}, a.GPUs)
	assert.Equal(t, 24, a.CPUs.Size())
	assert.True(t, a.CPUs.IsSubsetOf(cl.infos[0].m.CPUs()))
	assert.Equal(t, 2, r.shape.span().Count())
	assert.True(t, cl.infos[0].crossNUMA(r.shape))
	require.NoError(t, b.verify(0, map[string]*PodSpec{"p": pod, "x": {GPUs: 2, CPUs: 2}, "y": {GPUs: 2, CPUs: 2}}))
	require.NoError(t, b.release(pod, 0))
	assert.Equal(t, gpuMask([]int{0, 1, 4, 5}), b.gpuHeld[0])

	// On an empty node, single-numa-node aligns the pod on one node with
	// whole cores first.
	b, _ = mk(topologymanager.PolicySingleNUMANode)
	r, err = b.attempt(pod)
	require.NoError(t, err)
	require.Equal(t, placed, r.outcome)
	a, _ = b.states[0].Get("p")
	assert.Equal(t, []int{0, 1, 2, 3}, a.GPUs)
	assert.Equal(t, "0-11,112-123", a.CPUs.String())
}

func TestWriteFiles(t *testing.T) {
	cfg := small
	cfg.Verify = false
	var progress bytes.Buffer
	cfg.Progress = &progress
	rep, err := Run(cfg)
	require.NoError(t, err)
	for _, s := range AllSetups {
		assert.Contains(t, progress.String(), "simulate: "+s.String()+": done, 300/300 pods arrived")
	}
	dir := t.TempDir()
	require.NoError(t, rep.WriteFiles(dir))
	summary, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	require.NoError(t, err)
	assert.Contains(t, string(summary), rep.Table())
	assert.Contains(t, string(summary), "Cluster: 20 nodes (10 dgx-a100, 10 dgx-h100), 160 GPUs")
	series, err := os.ReadFile(filepath.Join(dir, SeriesFile))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(series)), "\n")
	assert.Len(t, lines, 1+3*(DefaultSamples+1))
	assert.Equal(t, "setup,hours,gpu_allocation,admission_errors,cross_numa,waiting", lines[0])
	for _, base := range []string{GPUPlotBase, EventsPlotBase} {
		png, err := os.ReadFile(filepath.Join(dir, base+".png"))
		require.NoError(t, err)
		assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), base)
		svg, err := os.ReadFile(filepath.Join(dir, base+".svg"))
		require.NoError(t, err)
		assert.True(t, bytes.HasPrefix(svg, []byte("<?xml")), base)
		assert.True(t, bytes.Contains(svg, []byte("c: ")), "%s names the setups", base)
	}
	// A folder that does not exist is an error naming the file.
	err = rep.WriteFiles(filepath.Join(dir, "missing"))
	assert.ErrorContains(t, err, filepath.Join(dir, "missing", SummaryFile))
}

func TestTable(t *testing.T) {
	rep := &Report{Results: []*Result{{Setup: KubeletBestEffort, Placed: 10, CrossNUMA: 3, AdmissionErrors: 2,
		PodsRefused: 1, GPUAllocationMean: 0.9, GPUAllocationPeak: 0.95, LatencyP50: 1500, LatencyP99: 2500000}}}
	lines := strings.Split(rep.Table(), "\n")
	require.Len(t, lines, 4) // header, rule, the row, and the final newline
	assert.Equal(t, "| b: NUMA-blind + kubelet best-effort | 10 | 2 (1) | 3 | 0 | 0 | 90.0%, 95.0% | 0.0 min | 1.5 µs / 2.50 ms |", lines[2])
}
