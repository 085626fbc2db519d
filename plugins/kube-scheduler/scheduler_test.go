package numaplace_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/topology"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// reference is adapters/scheduler's Cache over the same nodes: what the
// plugin decides must be what the adapter decides.
type reference struct {
	t *testing.T
	c *scheduler.Cache
}

func newReference(t *testing.T, nodes ...*v1.Node) *reference {
	t.Helper()
	c, err := scheduler.New(scheduler.Config{})
	require.NoError(t, err)
	for _, n := range nodes {
		m, _, err := numaplace.MachineFromNode(n)
		require.NoError(t, err)
		require.NoError(t, c.AddNode(scheduler.Node{Name: n.Name, Labels: n.Labels, Machine: m}))
	}
	return &reference{t: t, c: c}
}

// bound records a pod the scheduler bound (on a node the reference knows).
func (r *reference) bound(p *v1.Pod) {
	r.t.Helper()
	if err := r.c.AddPod(numaplace.PodFromV1(p)); !errors.Is(err, scheduler.ErrUnknownNode) {
		require.NoError(r.t, err)
	}
}

// schedule is the adapter's ScheduleOne of a pending pod.
func (r *reference) schedule(p *v1.Pod) (scheduler.Result, error) {
	return r.c.ScheduleOne(numaplace.PodFromV1(p))
}

// gpuPod is a pod without a NUMA spec placed by another scheduler, holding
// the given GPUs by its decision (as examples/scheduler writes them).
func gpuPod(name, node string, gpus ...int) *v1.Pod {
	p := pod(name, "", 8, len(gpus))
	p.Spec.SchedulerName = v1.DefaultSchedulerName
	p.Spec.NodeName = node
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = fmt.Sprintf(`{"id":%d}`, g)
	}
	p.Annotations[kube.AnnotationAllocation] = fmt.Sprintf(`{"policy":"None","cpuset":"","gpus":[%s]}`, strings.Join(ids, ","))
	return p
}

func counter(t *testing.T, policy string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(numaplace.PlacementsTotal().WithLabelValues(policy))
	require.NoError(t, err)
	return v
}

// TestPoliciesBindToTheRightNodes runs kube-scheduler with the plugin over
// three GPU nodes (a DGX H100 whose GPUs are taken 2+2 by pods placed
// without NUMA awareness, a free DGX H100 described by a
// NodeResourceTopology report, a free DGX A100) and a node without a
// topology annotation, and sends one pod per policy, one after the other.
// Each lands where the policy allows, with the decision the adapter
// itself makes.
func TestPoliciesBindToTheRightNodes(t *testing.T) { testPolicies(t, newFakeCluster(t)) }

func testPolicies(t *testing.T, c *cluster) {
	nodes := []*v1.Node{
		node(t, "h100-frag", "dgx-h100", true, false),
		node(t, "h100-free", "dgx-h100", true, true),
		node(t, "a100", "dgx-a100", true, false),
		node(t, "cpu-plain", "epyc-2s-nps4", true, false),
	}
	delete(nodes[3].Annotations, numaplace.AnnotationTopology)
	for _, n := range nodes {
		c.create(n)
	}
	ref := newReference(t, nodes[:3]...)
	for _, p := range []*v1.Pod{gpuPod("infer-a", "h100-frag", 0, 1), gpuPod("infer-b", "h100-frag", 4, 5)} {
		c.create(p)
		ref.bound(p)
	}
	before := map[string]float64{}
	for _, pol := range []string{"SingleNUMANode", "Restricted", "BestEffort", "None", numaplace.PolicyShared} {
		before[pol] = counter(t, pol)
	}
	c.start(nil)

	steps := []struct {
		pod  *v1.Pod
		node string // "" for any
		// check looks at the decision (nil: the pod holds no allocation).
		check func(t *testing.T, d *kube.Decision)
	}{
		{pod("textgen-a", "SingleNUMANode", 24, 4), "h100-free", func(t *testing.T, d *kube.Decision) {
			// Only the free H100 has a NUMA node with 4 free GPUs (the A100 has 2 per node).
			require.Len(t, d.NUMANodes, 1)
			require.Equal(t, d.NUMANodes, gpuNUMANodes(t, "dgx-h100", gpuIDs(*d)))
			require.Equal(t, d.NUMANodes, cpuNUMANodes(t, "dgx-h100", d.CPUSet))
		}},
		{pod("train-8", "Restricted", 16, 8), "a100", func(t *testing.T, d *kube.Decision) {
			// 8 free GPUs only on the A100, whose GPUs sit on NUMA nodes 1, 3, 5, 7.
			require.Equal(t, []int{1, 3, 5, 7}, d.NUMANodes)
			require.Len(t, d.GPUs, 8)
			require.Equal(t, d.NUMANodes, cpuNUMANodes(t, "dgx-a100", d.CPUSet))
		}},
		{pod("finetune-b", "BestEffort", 8, 4), "h100-free", func(t *testing.T, d *kube.Decision) {
			// The free H100's other NUMA node holds it whole (aligned); the
			// fragmented H100 would need both of its nodes.
			require.Len(t, d.NUMANodes, 1)
			require.Equal(t, d.NUMANodes, gpuNUMANodes(t, "dgx-h100", gpuIDs(*d)))
		}},
		{pod("batch-c", "None", 4, 2), "h100-frag", func(t *testing.T, d *kube.Decision) {
			require.Subset(t, []int{2, 3, 6, 7}, gpuIDs(*d))
			require.Len(t, d.GPUs, 2)
		}},
		{pod("web", "", 2, 0), "", func(t *testing.T, d *kube.Decision) {
			require.Nil(t, d, "a pod without a NUMA spec and GPUs holds no allocation")
		}},
		{pod("gpu-nospec", "", 2, 2), "h100-frag", func(t *testing.T, d *kube.Decision) {
			require.Equal(t, "None", d.Policy.String())
			require.Subset(t, []int{2, 3, 6, 7}, gpuIDs(*d))
		}},
	}
	firstNode := 0
	for _, s := range steps {
		c.create(s.pod)
		got := c.waitBound(s.pod.Name)
		if s.node != "" {
			require.Equal(t, s.node, got.Spec.NodeName, "pod %s", s.pod.Name)
		}
		var d *kube.Decision
		if _, ok := got.Annotations[kube.AnnotationAllocation]; ok {
			dd := decision(t, got)
			d = &dd
		}
		s.check(t, d)
		if s.pod.Name == "textgen-a" {
			firstNode = d.NUMANodes[0]
		}
		if s.pod.Name == "finetune-b" {
			require.NotEqual(t, firstNode, d.NUMANodes[0], "BestEffort pod on the NUMA node of the SingleNUMANode pod")
		}
		if d != nil {
			// The adapter, asked the same question, gives the same answer.
			res, err := ref.schedule(s.pod)
			require.NoError(t, err)
			require.Equal(t, got.Spec.NodeName, res.Node, "pod %s", s.pod.Name)
			require.Equal(t, res.Annotations[kube.AnnotationAllocation], got.Annotations[kube.AnnotationAllocation], "pod %s", s.pod.Name)
		}
		ref.bound(got)
		c.requireNoDoubleHandout()
	}
	// PostBind counts a placement just after the binding: wait for it.
	for pol, n := range map[string]float64{"SingleNUMANode": 1, "Restricted": 1, "BestEffort": 1, "None": 1, numaplace.PolicyShared: 2} {
		err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, waitTimeout, true,
			func(context.Context) (bool, error) { return counter(t, pol) >= before[pol]+n, nil })
		require.NoError(t, err, "numaplace_placements_total{policy=%q} is %v, want %v", pol, counter(t, pol), before[pol]+n)
		require.Equal(t, before[pol]+n, counter(t, pol), "numaplace_placements_total{policy=%q}", pol)
	}
}

// TestUnschedulablePodGetsTheReasonSummary checks the PodScheduled
// condition of pods no node takes: the nodes counted by the adapter's
// reasons, and an invalid pod's parser message.
func TestUnschedulablePodGetsTheReasonSummary(t *testing.T) { testUnschedulable(t, newFakeCluster(t)) }

func testUnschedulable(t *testing.T, c *cluster) {
	nodes := []*v1.Node{
		node(t, "h100-1", "dgx-h100", true, false),
		node(t, "h100-2", "dgx-h100", true, false),
		node(t, "a100", "dgx-a100", true, false),
		node(t, "h100-unlabelled", "dgx-h100", false, false),
	}
	for _, n := range nodes {
		c.create(n)
	}
	ref := newReference(t, nodes...)
	noFit, notOptedIn := refusals(t, "SingleNUMANode", numaplace.ReasonNoNUMAFit), refusals(t, "SingleNUMANode", numaplace.ReasonNotOptedIn)
	invalid := refusals(t, numaplace.PolicyInvalid, numaplace.ReasonInvalidPod)
	filtered := filterCount(t, "SingleNUMANode")
	c.start(nil)

	big := pod("eight-on-one", "SingleNUMANode", 8, 8)
	c.create(big)
	msg := c.waitUnschedulable(big.Name)
	require.GreaterOrEqual(t, refusals(t, "SingleNUMANode", numaplace.ReasonNoNUMAFit), noFit+3)
	require.GreaterOrEqual(t, refusals(t, "SingleNUMANode", numaplace.ReasonNotOptedIn), notOptedIn+1)
	require.Greater(t, filterCount(t, "SingleNUMANode"), filtered, "the first Filter of a cycle is timed")
	_, err := ref.schedule(big)
	var fe *scheduler.FitError
	require.True(t, errors.As(err, &fe), "the adapter places the pod: %v", err)
	require.Contains(t, msg, "0/4 nodes are available")
	require.Len(t, fe.Reasons, 2)
	for _, r := range fe.Reasons {
		require.Contains(t, msg, fmt.Sprintf("%d numaplace: %s", r.Nodes, r.Reason))
	}
	require.Contains(t, msg, "3 numaplace: no NUMA node can hold 8 GPUs on this machine")
	require.Contains(t, msg, "1 numaplace: node(s) without the label ack.node.gpu.schedule=topology")
	require.Contains(t, msg, "4 Preemption is not helpful for scheduling", "never-fit refusals are unresolvable")

	bad := pod("no-cpuset-scheduler", "Restricted", 4, 1)
	delete(bad.Annotations, kube.AnnotationCPUSetScheduler)
	c.create(bad)
	msg = c.waitUnschedulable(bad.Name)
	_, perr := kube.ParsePod(numaplace.PodFromV1(bad), kube.Config{})
	require.Error(t, perr)
	require.Contains(t, msg, perr.Error())
	require.Contains(t, msg, `cpuset-scheduler: "required"`)
	require.GreaterOrEqual(t, refusals(t, numaplace.PolicyInvalid, numaplace.ReasonInvalidPod), invalid+1)
	// The metrics this test's pods touched (a labelled counter is exposed
	// once it has a series: no pod is placed here, so the placements
	// counter is checked where pods are).
	requireExposed(t, "numaplace_refusals_total", "numaplace_filter_duration_seconds")
}

func refusals(t *testing.T, policy, reason string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(numaplace.RefusalsTotal().WithLabelValues(policy, reason))
	require.NoError(t, err)
	return v
}

func filterCount(t *testing.T, policy string) uint64 {
	t.Helper()
	n, err := testutil.GetHistogramMetricCount(numaplace.FilterDuration().WithLabelValues(policy))
	require.NoError(t, err)
	return n
}

// requireExposed checks that kube-scheduler's registry (what it serves on
// /metrics) has the metrics.
func requireExposed(t *testing.T, names ...string) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
	}
	for _, n := range names {
		require.True(t, have[n], "metric %s is not in the legacy registry", n)
	}
}

// TestRestartRebuildsStateFromAnnotations stops the scheduler after three
// placements, deletes one pod while it is down, and starts a new scheduler
// over the same API server: it reads the state back from the bound pods'
// decisions (nothing lost, nothing held twice) and keeps placing.
func TestRestartRebuildsStateFromAnnotations(t *testing.T) { testRestart(t, newFakeCluster(t)) }

func testRestart(t *testing.T, c *cluster) {
	c.create(node(t, "h100-1", "dgx-h100", true, false), node(t, "h100-2", "dgx-h100", true, false))
	first := c.start(nil)
	decisions := map[string]string{}
	for _, name := range []string{"p1", "p2", "p3"} {
		c.create(pod(name, "SingleNUMANode", 24, 4))
		p := c.waitBound(name)
		decisions[name] = p.Annotations[kube.AnnotationAllocation]
	}
	c.requireNoDoubleHandout()
	requireExposed(t, "numaplace_placements_total") // pods were placed
	first.stop()

	freed := c.get("p2")
	require.NoError(t, c.client.CoreV1().Pods("default").Delete(t.Context(), "p2", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	delete(decisions, "p2")

	second := c.start(nil)
	// The new scheduler's cache holds exactly the surviving decisions.
	for _, name := range []string{"p1", "p3"} {
		st, ok := second.plugin.Cache().Pod("default/" + name)
		require.True(t, ok, "pod %s is not in the restarted cache", name)
		require.True(t, st.Bound)
		p := c.get(name)
		require.Equal(t, p.Spec.NodeName, st.Node)
		m, err := topology.Preset("dgx-h100")
		require.NoError(t, err)
		require.Equal(t, decisions[name], kube.NewDecision(m, st.Allocation).String())
	}
	_, ok := second.plugin.Cache().Pod("default/p2")
	require.False(t, ok)

	// Two NUMA nodes are free: p2's and the one nobody had; p4 and p5 take
	// them, p6 finds none.
	for _, name := range []string{"p4", "p5"} {
		c.create(pod(name, "SingleNUMANode", 24, 4))
		c.waitBound(name)
		c.requireNoDoubleHandout()
	}
	p4 := decision(t, c.get("p4"))
	p5 := decision(t, c.get("p5"))
	freedDecision := decision(t, freed)
	taken := []string{c.get("p4").Spec.NodeName + "/" + itoa(p4.NUMANodes[0]), c.get("p5").Spec.NodeName + "/" + itoa(p5.NUMANodes[0])}
	require.Contains(t, taken, freed.Spec.NodeName+"/"+itoa(freedDecision.NUMANodes[0]), "p2's NUMA node was not reused")

	c.create(pod("p6", "SingleNUMANode", 24, 4))
	msg := c.waitUnschedulable("p6")
	require.Contains(t, msg, "0/2 nodes are available")
	c.requireNoDoubleHandout()
}

// TestKoordinatorAnnotations: with koordinatorAnnotations, PreBind also
// writes Koordinator's annotations.
func TestKoordinatorAnnotations(t *testing.T) { testKoordinator(t, newFakeCluster(t)) }

func testKoordinator(t *testing.T, c *cluster) {
	n := node(t, "h100", "dgx-h100", true, false)
	c.create(n)
	c.start(&numaplace.Args{KoordinatorAnnotations: true})
	c.create(pod("koord", "SingleNUMANode", 8, 2))
	p := c.waitBound("koord")
	d := decision(t, p)
	m, _, err := numaplace.MachineFromNode(n)
	require.NoError(t, err)
	want, err := d.KoordinatorAnnotations(m)
	require.NoError(t, err)
	for k, v := range want {
		require.Equal(t, v, p.Annotations[k], "annotation %s", k)
	}
	require.Contains(t, p.Annotations, kube.AnnotationKoordDeviceAllocated)
}
