package scheduler_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
)

// requireRefusal checks that err is a *FilterError of the given category
// whose first reason is reason and whose detail contains every detail.
func requireRefusal(t *testing.T, err error, category error, reason string, detail ...string) *scheduler.FilterError {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, scheduler.ErrUnschedulable)
	require.ErrorIs(t, err, category)
	var fe *scheduler.FilterError
	require.ErrorAs(t, err, &fe)
	require.NotEmpty(t, fe.Reasons)
	require.Equal(t, reason, fe.Reasons[0])
	for _, d := range detail {
		require.Contains(t, fe.Detail, d)
	}
	require.Contains(t, err.Error(), fe.Node)
	require.Contains(t, err.Error(), fe.Pod)
	return fe
}

func TestFilterRules(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	type setup func(t *testing.T, c *scheduler.Cache)
	reserve := func(p *kube.Pod) setup {
		return func(t *testing.T, c *scheduler.Cache) { require.NoError(t, c.Reserve(p, "gpu")) }
	}
	claimed := func(p *kube.Pod, decision string) setup {
		return func(t *testing.T, c *scheduler.Cache) {
			require.NoError(t, c.AddPod(bound(p, "gpu", map[string]string{kube.AnnotationAllocation: decision})))
		}
	}
	tests := []struct {
		name     string
		machine  string // default dgx-h100
		cfg      scheduler.Config
		labels   map[string]string
		before   []setup
		pod      *kube.Pod
		category error // nil: fits
		reason   string
		detail   []string
		never    bool // the refusal holds on the empty machine too
	}{
		{name: "NUMA pod fits", labels: optIn, pod: numaPod("a", 24, 4, "SingleNUMANode")},
		{name: "NUMA pod on a node without the label", labels: map[string]string{"x": "y"},
			pod: numaPod("a", 24, 4, "SingleNUMANode"), category: scheduler.ErrNotOptedIn,
			reason: "node(s) without the label ack.node.gpu.schedule=topology",
			detail: []string{"not labelled ack.node.gpu.schedule=topology"}, never: true},
		{name: "NUMA pod and a label of another value", labels: map[string]string{kube.DefaultOptInLabel: "other"},
			pod: numaPod("a", 4, 0, "Restricted"), category: scheduler.ErrNotOptedIn,
			reason: "node(s) without the label ack.node.gpu.schedule=topology", never: true},
		{name: "configured label", cfg: scheduler.Config{OptInLabel: "numa", OptInValue: "yes"},
			labels: map[string]string{"numa": "yes"}, pod: numaPod("a", 4, 0, "Restricted")},
		{name: "configured label missing", cfg: scheduler.Config{OptInLabel: "numa", OptInValue: "yes"},
			labels: optIn, pod: numaPod("a", 4, 0, "Restricted"), category: scheduler.ErrNotOptedIn,
			reason: "node(s) without the label numa=yes", never: true},
		{name: "more GPUs than a NUMA node has", labels: optIn, pod: numaPod("a", 24, 5, "SingleNUMANode"),
			category: allocator.ErrNoNUMAFit, reason: "no NUMA node can hold 5 GPUs on this machine",
			detail: []string{"no NUMA node of this machine can ever hold 5 GPUs and 24 CPUs (one node has at most 4 GPUs)", "even with nothing allocated"}, never: true},
		{name: "no NUMA node with 4 free GPUs now", labels: optIn,
			before: []setup{
				claimed(numaPod("x", 2, 2, "SingleNUMANode"), `{"policy":"SingleNUMANode","cpuset":"0-1","gpus":[{"id":0},{"id":1}]}`),
				claimed(numaPod("y", 2, 2, "SingleNUMANode"), `{"policy":"SingleNUMANode","cpuset":"56-57","gpus":[{"id":4},{"id":5}]}`)},
			pod: numaPod("a", 24, 4, "SingleNUMANode"), category: allocator.ErrNoNUMAFit,
			reason: "no NUMA node has 4 free GPUs now", detail: []string{"no NUMA node has 4 GPUs free"}},
		{name: "more CPUs than the machine has", labels: optIn, pod: numaPod("a", 300, 0, "None"),
			category: allocator.ErrInsufficient, reason: "the machine has fewer than 300 CPUs", detail: []string{"300 CPUs wanted"}, never: true},
		{name: "Restricted width inside a NUMA set", machine: "dgx-a100", labels: optIn,
			before: []setup{
				claimed(plainPod("x", "", 1), `{"policy":"None","cpuset":"","gpus":[{"id":0}]}`),
				claimed(plainPod("y", "", 1), `{"policy":"None","cpuset":"","gpus":[{"id":6}]}`)},
			pod: numaPod("a", 8, 4, "Restricted"), category: allocator.ErrNoNUMAFit,
			reason: "no set of 2 NUMA nodes inside one NUMA set has 4 free GPUs now",
			detail: []string{"width_cap 2"}},
		{name: "exclusivity", labels: optIn, before: []setup{reserve(numaPod("x", 2, 8, "Restricted"))},
			pod: numaPod("a", 2, 0, "SingleNUMANode"), category: allocator.ErrExclusivity,
			reason: "every NUMA node that fits is shared by multi-node allocations now (singleNUMANodeExclusive)"},
		{name: "shared pool of the plain pods", labels: optIn,
			before: []setup{reserve(plainPod("web", "200", 0))}, pod: numaPod("a", 30, 0, "SingleNUMANode"),
			category: scheduler.ErrSharedPool,
			reason:   "exclusive CPUs would starve the shared pool of the pods without a NUMA spec now",
			detail:   []string{"taking 30 CPUs exclusively would leave a shared pool of 194 CPUs", "request 200 CPUs"}},
		{name: "shared pool with a fraction", labels: optIn,
			before: []setup{reserve(plainPod("web", "199500m", 0))}, pod: numaPod("a", 25, 0, "SingleNUMANode"),
			category: scheduler.ErrSharedPool, reason: "exclusive CPUs would starve the shared pool of the pods without a NUMA spec now",
			detail: []string{"request 199.5 CPUs"}},
		{name: "shared pool just enough", labels: optIn,
			before: []setup{reserve(plainPod("web", "199500m", 0))}, pod: numaPod("a", 24, 0, "SingleNUMANode")},
		{name: "minimum shared pool", labels: optIn, pod: numaPod("a", 224, 0, "None"),
			category: scheduler.ErrSharedPool, reason: "the machine has too few CPUs to give 224 CPUs exclusively and keep a shared pool of 1 CPU",
			detail: []string{"a shared pool of 0 CPUs, below the minimum of 1 CPU"}, never: true},
		{name: "minimum shared pool now", labels: optIn, before: []setup{reserve(numaPod("x", 100, 0, "None"))},
			pod: numaPod("a", 124, 0, "None"), category: scheduler.ErrSharedPool,
			reason: "exclusive CPUs would leave a shared pool below the minimum of 1 CPU now",
			detail: []string{"a shared pool of 0 CPUs, below the minimum of 1 CPU"}},
		{name: "configured minimum", cfg: scheduler.Config{MinSharedCPUs: 8}, labels: optIn,
			pod: numaPod("a", 220, 0, "None"), category: scheduler.ErrSharedPool,
			reason: "the machine has too few CPUs to give 220 CPUs exclusively and keep a shared pool of 8 CPUs", never: true},
		{name: "no minimum", cfg: scheduler.Config{MinSharedCPUs: -1}, labels: optIn, pod: numaPod("a", 224, 0, "None")},
		{name: "GPU-only NUMA pod leaves the pool alone", cfg: scheduler.Config{MinSharedCPUs: -1}, labels: optIn,
			before: []setup{reserve(numaPod("x", 224, 0, "None"))}, pod: numaPod("a", 0, 1, "None")},
		{name: "plain pod fits anywhere", labels: nil, pod: plainPod("web", "500m", 0)},
		{name: "plain pod and the shared pool", labels: optIn,
			before: []setup{reserve(numaPod("x", 112, 0, "SingleNUMANode")), reserve(plainPod("w1", "100", 0))},
			pod:    plainPod("web", "12500m", 0), category: allocator.ErrInsufficient, reason: "fewer than 12.5 CPUs free in the shared pool now",
			detail: []string{"the shared CPU pool has 12 CPUs left, the pod requests 12.5"}},
		{name: "plain pod with GPUs", labels: nil, pod: plainPod("infer", "2", 8)},
		{name: "plain pod with too many GPUs", labels: nil,
			before: []setup{reserve(plainPod("x", "1", 7))}, pod: plainPod("infer", "2", 2),
			category: allocator.ErrInsufficient, reason: "fewer than 2 free GPUs now"},
		{name: "plain pod with more GPUs than the machine has", labels: nil, pod: plainPod("infer", "2", 9),
			category: allocator.ErrInsufficient, reason: "the machine has fewer than 9 GPUs", never: true},
		{name: "plain pod with more CPUs than the machine has", labels: nil, pod: plainPod("infer", "300", 0),
			category: allocator.ErrInsufficient, reason: "the machine has fewer than 300 allocatable CPUs", never: true},
		{name: "memory", labels: nil, pod: &kube.Pod{Namespace: "default", Name: "big", Containers: []kube.Container{
			{Name: "c", Requests: map[string]string{"memory": "3Ti"}}}},
			category: allocator.ErrInsufficient, reason: "the machine has less than 3145728 MiB of memory",
			detail: []string{"2097152 MiB of memory left unrequested, the pod requests 3145728 MiB"}, never: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := h100
			if tt.machine != "" {
				m = preset(t, tt.machine)
			}
			c := newCache(t, tt.cfg, scheduler.Node{Name: "gpu", Labels: tt.labels, Machine: m})
			for _, f := range tt.before {
				f(t, c)
			}
			err := c.Filter(tt.pod, "gpu")
			_, scoreErr := c.Score(tt.pod, "gpu")
			if tt.category == nil {
				require.NoError(t, err)
				require.NoError(t, scoreErr)
				require.NoError(t, c.Reserve(tt.pod, "gpu"))
				return
			}
			fe := requireRefusal(t, err, tt.category, tt.reason, tt.detail...)
			require.Equal(t, tt.never, fe.Never, "never-fit or not now")
			require.Equal(t, err.Error(), scoreErr.Error(), "Score refuses as Filter does")
			before, _ := c.Node("gpu")
			requireRefusal(t, c.Reserve(tt.pod, "gpu"), tt.category, tt.reason, tt.detail...)
			after, _ := c.Node("gpu")
			require.Equal(t, before, after, "a refused Reserve changes nothing")
		})
	}
}

func TestFilterBadInput(t *testing.T) {
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "gpu", Labels: optIn, Machine: preset(t, "dgx-h100")})
	bad := numaPod("a", 4, 0, "SingleNUMANode")
	delete(bad.Annotations, kube.AnnotationCPUSetScheduler)
	for name, f := range map[string]func(*kube.Pod) error{
		"Filter":  func(p *kube.Pod) error { return c.Filter(p, "gpu") },
		"Score":   func(p *kube.Pod) error { _, err := c.Score(p, "gpu"); return err },
		"Reserve": func(p *kube.Pod) error { return c.Reserve(p, "gpu") },
		"ScheduleOne": func(p *kube.Pod) error {
			_, err := c.ScheduleOne(p)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := f(bad)
			var pe *kube.PodError
			require.ErrorAs(t, err, &pe)
			require.Contains(t, err.Error(), "cpuset-scheduler")
			require.ErrorIs(t, f(nil), kube.ErrInvalidPod)
		})
	}
	require.ErrorIs(t, c.Filter(numaPod("a", 4, 0, "SingleNUMANode"), "nope"), scheduler.ErrUnknownNode)
	_, err := c.Score(numaPod("a", 4, 0, "SingleNUMANode"), "nope")
	require.ErrorIs(t, err, scheduler.ErrUnknownNode)
	require.ErrorIs(t, c.Reserve(numaPod("a", 4, 0, "SingleNUMANode"), "nope"), scheduler.ErrUnknownNode)
	// A nvidia.com/gpu NUMA pod is refused unless configured.
	nv := numaPod("nv", 4, 0, "SingleNUMANode")
	nv.Containers[0].Limits["nvidia.com/gpu"] = "1"
	nv.Containers[0].Requests["nvidia.com/gpu"] = "1"
	require.ErrorIs(t, c.Filter(nv, "gpu"), kube.ErrInvalidPod)
	c2 := newCache(t, scheduler.Config{Pods: kube.Config{AcceptNvidiaGPU: true}},
		scheduler.Node{Name: "gpu", Labels: optIn, Machine: preset(t, "dgx-h100")})
	require.NoError(t, c2.Filter(nv, "gpu"))
}

func TestConfigErrors(t *testing.T) {
	for name, cfg := range map[string]scheduler.Config{
		"value without label": {OptInValue: "x"},
		"percentage":          {PercentageOfNodesToScore: 101},
		"negative percentage": {PercentageOfNodesToScore: -1},
		"parallelism":         {Parallelism: -2},
		"resources":           {Allocator: allocator.Options{Resources: []allocator.Resource{nil}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := scheduler.New(cfg)
			require.ErrorIs(t, err, scheduler.ErrConfig)
		})
	}
	c := newCache(t, scheduler.Config{})
	cfg := c.Config()
	require.Equal(t, kube.DefaultOptInLabel, cfg.OptInLabel)
	require.Equal(t, 1, cfg.MinSharedCPUs)
	require.Equal(t, 100, cfg.PercentageOfNodesToScore)
	require.Positive(t, cfg.Parallelism)
}

func TestScore(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	for _, scoring := range []allocator.Scoring{allocator.MostAllocated, allocator.LeastAllocated} {
		c := newCache(t, scheduler.Config{Allocator: allocator.Options{Scoring: scoring}},
			scheduler.Node{Name: "empty", Labels: optIn, Machine: h100},
			scheduler.Node{Name: "busy", Labels: optIn, Machine: h100})
		require.NoError(t, c.Reserve(numaPod("x", 56, 2, "SingleNUMANode"), "busy"))
		require.NoError(t, c.Reserve(plainPod("w", "64", 0), "busy"))
		for _, pod := range []*kube.Pod{numaPod("a", 24, 2, "SingleNUMANode"), plainPod("b", "8", 0), plainPod("g", "1", 1)} {
			e, err := c.Score(pod, "empty")
			require.NoError(t, err)
			b, err := c.Score(pod, "busy")
			require.NoError(t, err)
			require.True(t, e >= 0 && e <= 100 && b >= 0 && b <= 100, "scores %d %d", e, b)
			if scoring == allocator.MostAllocated {
				require.Greater(t, b, e, "%s: the fuller node first", pod.Name)
			} else {
				require.Greater(t, e, b, "%s: the emptier node first", pod.Name)
			}
		}
	}

	// The allocator's alignment: a BestEffort pod that fits one NUMA node
	// on one machine and needs two on the other.
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "a", Labels: optIn, Machine: h100},
		scheduler.Node{Name: "b", Labels: optIn, Machine: h100})
	for name, d := range map[string]string{
		"y": `{"policy":"SingleNUMANode","cpuset":"0-1","gpus":[{"id":0},{"id":1}]}`,
		"z": `{"policy":"SingleNUMANode","cpuset":"56-57","gpus":[{"id":4},{"id":5}]}`,
	} {
		require.NoError(t, c.AddPod(bound(numaPod(name, 2, 2, "SingleNUMANode"), "b",
			map[string]string{kube.AnnotationAllocation: d})))
	}
	pod := numaPod("be", 4, 4, "BestEffort")
	sa, err := c.Score(pod, "a")
	require.NoError(t, err)
	sb, err := c.Score(pod, "b")
	require.NoError(t, err)
	require.GreaterOrEqual(t, sa, 50)
	require.Less(t, sb, 50)
}

func TestFilterErrorUnwrap(t *testing.T) {
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "gpu", Labels: optIn, Machine: preset(t, "dgx-h100")})
	err := c.Filter(numaPod("a", 4, 5, "SingleNUMANode"), "gpu")
	var pe *allocator.PlacementError
	require.True(t, errors.As(err, &pe), "the allocator's PlacementError is reachable")
	require.Equal(t, 1, pe.Width)
}
