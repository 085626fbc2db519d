package numaplace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// decided is a pod bound to node by someone earlier, holding what the
// decision names (cpus, GPU IDs) under policy SingleNUMANode.
func decided(name, node, cpus string, gpus ...int) *v1.Pod {
	set, err := numa.ParseCPUSet(cpus)
	if err != nil {
		panic(err)
	}
	p := pod(name, "SingleNUMANode", set.Size(), len(gpus))
	p.Spec.NodeName = node
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = fmt.Sprintf(`{"id":%d}`, g)
	}
	p.Annotations[kube.AnnotationAllocation] = fmt.Sprintf(`{"policy":"SingleNUMANode","cpuset":%q,"gpus":[%s]}`, cpus, strings.Join(ids, ","))
	return p
}

func (c *cluster) deletePod(name string) {
	c.t.Helper()
	err := c.client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	require.NoError(c.t, err)
}

// setNodeAnnotation sets (or, with value "", removes) an annotation of the
// node with a merge patch.
func (c *cluster) setNodeAnnotation(node, key, value string) {
	c.t.Helper()
	var v any = value
	if value == "" {
		v = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	require.NoError(c.t, err)
	_, err = c.client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(c.t, err)
}

// waitBoundWithin waits until the pod is bound (at most waitTimeout: a
// pod left to kube-scheduler's 5-minute flush of unschedulable pods fails)
// and logs how long it took since start.
func (c *cluster) waitBoundWithin(name string, start time.Time) *v1.Pod {
	c.t.Helper()
	p := c.waitBound(name)
	c.t.Logf("pod %s bound to %s %s after the event", name, p.Spec.NodeName, time.Since(start).Round(time.Millisecond))
	return p
}

// nodeCondition waits until the node's NUMAPlaceMisfit condition has the
// status (and the reason, if not "") and returns it.
func (c *cluster) nodeCondition(node string, status v1.ConditionStatus, reason string) v1.NodeCondition {
	c.t.Helper()
	var last *v1.NodeCondition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == numaplace.ConditionMisfit {
				last = &n.Status.Conditions[i]
				return last.Status == status && (reason == "" || last.Reason == reason), nil
			}
		}
		return false, nil
	})
	require.NoError(c.t, err, "node %s condition %s: want %s %s, last %+v", node, numaplace.ConditionMisfit, status, reason, last)
	return *last
}

// nodeEvents waits until the node has an Event with the reason and returns
// the notes of those Events.
func (c *cluster) nodeEvents(node, reason string) []string {
	c.t.Helper()
	var notes []string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		evs, err := c.client.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		notes = notes[:0]
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Node" && e.Regarding.Name == node && e.Reason == reason {
				notes = append(notes, e.Note)
			}
		}
		return len(notes) > 0, nil
	})
	require.NoError(c.t, err, "no Event %s on node %s", reason, node)
	return notes
}

// gauge reads a metric of kube-scheduler's registry with the given labels.
func gauge(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

func waitGauge(t *testing.T, name string, labels map[string]string, want float64) {
	t.Helper()
	var got float64
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		v, ok := gauge(t, name, labels)
		got = v
		return ok && v == want, nil
	})
	require.NoError(t, err, "%s%v is %v, want %v", name, labels, got, want)
}

// TestNoStallsAfterDeletionsAndJoins: pods waiting for resources bind in
// seconds once a blocking pod is deleted (whether kube-scheduler's
// NodeResourcesFit or the plugin refused them) or a node joins with a
// topology (or gets its annotation later), not at the five-minute flush of
// unschedulable pods.
func TestNoStallsAfterDeletionsAndJoins(t *testing.T) { testNoStalls(t, newFakeCluster(t)) }

func testNoStalls(t *testing.T, c *cluster) {
	c.create(node(t, "h100-1", "dgx-h100", true, false))
	// Every GPU held: NodeResourcesFit refuses a GPU pod.
	c.create(decided("full-0", "h100-1", "0-3", 0, 1, 2, 3), decided("full-1", "h100-1", "56-59", 4, 5, 6, 7))
	c.start(nil)

	c.create(pod("waits-for-totals", "SingleNUMANode", 8, 4))
	msg := c.waitUnschedulable("waits-for-totals")
	require.Contains(t, msg, "Insufficient aliyun.com/gpu", "NodeResourcesFit refuses it: %s", msg)
	start := time.Now()
	c.deletePod("full-1")
	got := c.waitBoundWithin("waits-for-totals", start)
	require.Equal(t, []int{4, 5, 6, 7}, gpuIDs(decision(t, got)))

	// Two GPUs held on each NUMA node: 4 free, but no NUMA node has 3, so
	// only the plugin refuses a 3-GPU pod.
	c.deletePod("full-0")
	c.deletePod("waits-for-totals")
	c.create(decided("half-0", "h100-1", "0-1", 0, 1), decided("half-1", "h100-1", "56-57", 4, 5))
	c.create(pod("waits-for-numa", "SingleNUMANode", 8, 3))
	msg = c.waitUnschedulable("waits-for-numa")
	require.Contains(t, msg, "numaplace: no NUMA node has 3 free GPUs now", msg)
	start = time.Now()
	c.deletePod("half-0")
	got = c.waitBoundWithin("waits-for-numa", start)
	require.Len(t, gpuIDs(decision(t, got)), 3)

	// A node joins with its topology: the pod waiting for it binds.
	c.create(pod("waits-for-a-node", "Restricted", 16, 8))
	msg = c.waitUnschedulable("waits-for-a-node")
	require.Contains(t, msg, "0/1 nodes are available", msg)
	start = time.Now()
	c.create(node(t, "h100-2", "dgx-h100", true, false))
	got = c.waitBoundWithin("waits-for-a-node", start)
	require.Equal(t, "h100-2", got.Spec.NodeName)

	// A node joins without its topology, and the node agent publishes it
	// later: the pod binds once the annotation is there.
	c.create(pod("waits-for-a-topology", "Restricted", 16, 8))
	c.waitUnschedulable("waits-for-a-topology")
	bare := node(t, "h100-3", "dgx-h100", true, false)
	js := bare.Annotations[numaplace.AnnotationTopology]
	delete(bare.Annotations, numaplace.AnnotationTopology)
	c.create(bare)
	seen := c.waitFor("waits-for-a-topology", "the summary with the new node", func(p *v1.Pod) bool {
		cond := podScheduled(p)
		return cond != nil && strings.Contains(cond.Message, "0/3 nodes are available")
	})
	require.Contains(t, podScheduled(seen).Message, numaplace.ReasonTextNoTopology)
	start = time.Now()
	c.setNodeAnnotation("h100-3", numaplace.AnnotationTopology, js)
	got = c.waitBoundWithin("waits-for-a-topology", start)
	require.Equal(t, "h100-3", got.Spec.NodeName)
	c.requireNoDoubleHandout()
}

// priorityClasses creates low (100), middle (500), upper (900), high
// (1000) and top (2000) PriorityClasses on a real API server; on the fake
// clientset pods get their priority directly.
func (c *cluster) priorityClasses() {
	c.t.Helper()
	for name, v := range priorities {
		_, err := c.client.SchedulingV1().PriorityClasses().Create(context.Background(),
			&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: v}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(c.t, err)
		}
	}
}

var priorities = map[string]int32{"low": 100, "middle": 500, "upper": 900, "high": 1000, "top": 2000}

// withPriority sets the pod's PriorityClass (and, on the fake clientset,
// which runs no admission, its priority).
func (c *cluster) withPriority(p *v1.Pod, class string) *v1.Pod {
	p.Spec.PriorityClassName = class
	if c.fake {
		p.Spec.Priority = ptr.To(priorities[class])
	}
	return p
}

// kubelet finishes the deletion of bound pods, as the node's kubelet would
// (there is none): a pod deleted gracefully is removed within 50 ms. On the
// fake clientset it also turns graceful deletion on (see cluster.graceful),
// so that victims are terminating for a while, as on a real API server.
func (c *cluster) kubelet() {
	t := c.t
	if c.graceful != nil {
		c.graceful.Store(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil {
					_ = c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				}
			}
			return false, nil
		})
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

func (c *cluster) podNames() []string {
	c.t.Helper()
	pods, err := c.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(c.t, err)
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestPreemptionEvictsTheFewestOnTheRightNode: a high-priority NUMA pod
// preempts the lower-priority pods that make it fit in kube-scheduler's
// order (the lowest highest priority first), on the node where they have
// the lowest priority, and nothing when no eviction would help.
func TestPreemptionEvictsTheFewestOnTheRightNode(t *testing.T) {
	testPreemption(t, newFakeCluster(t))
}

func testPreemption(t *testing.T, c *cluster) {
	c.priorityClasses()
	c.kubelet()
	c.create(node(t, "h1", "dgx-h100", true, false), node(t, "h2", "dgx-h100", true, false))
	// h1: two low 2-GPU pods on NUMA node 0, a middle 4-GPU pod on NUMA
	// node 1: evicting the 4-GPU pod alone would make room, but by
	// kube-scheduler's order the two low pods go (the lowest highest
	// priority first).
	// h2: an upper-priority 4-GPU pod on each NUMA node: one eviction would
	// do too, but of a higher priority, so h1 is the node to preempt on.
	c.create(
		c.withPriority(decided("h1-a", "h1", "0-1", 0, 1), "low"),
		c.withPriority(decided("h1-b", "h1", "2-3", 2, 3), "low"),
		c.withPriority(decided("h1-c", "h1", "56-59", 4, 5, 6, 7), "middle"),
		c.withPriority(decided("h2-a", "h2", "0-3", 0, 1, 2, 3), "upper"),
		c.withPriority(decided("h2-b", "h2", "56-59", 4, 5, 6, 7), "upper"),
	)
	c.start(nil)

	c.create(c.withPriority(pod("urgent", "SingleNUMANode", 24, 4), "high"))
	got := c.waitBound("urgent")
	require.Equal(t, "h1", got.Spec.NodeName)
	require.Equal(t, []int{0, 1, 2, 3}, gpuIDs(decision(t, got)))
	require.Equal(t, []string{"h1-c", "h2-a", "h2-b", "urgent"}, c.podNames(), "the two low pods were evicted, not the middle one")
	c.requireNoDoubleHandout()

	// No eviction helps: more GPUs than a NUMA node has.
	c.create(c.withPriority(pod("too-wide", "SingleNUMANode", 8, 5), "top"))
	msg := c.waitUnschedulable("too-wide")
	require.Contains(t, msg, "preemption: 0/2 nodes are available: 2 numaplace: no NUMA node can hold 5 GPUs on this machine", msg)
	// No eviction helps: the 8 GPUs a Restricted pod needs are held, on
	// every node, partly by pods of a priority not lower than its own.
	c.create(c.withPriority(pod("whole-node", "Restricted", 16, 8), "upper"))
	c.waitUnschedulable("whole-node")
	// Nor for a pod of the lowest priority.
	c.create(c.withPriority(pod("humble", "SingleNUMANode", 4, 2), "low"))
	c.waitUnschedulable("humble")
	time.Sleep(2 * time.Second) // give a wrong preemption the time to show
	require.Equal(t, []string{"h1-c", "h2-a", "h2-b", "humble", "too-wide", "urgent", "whole-node"}, c.podNames(),
		"nothing else was evicted")
	for _, name := range []string{"too-wide", "whole-node", "humble"} {
		require.Empty(t, c.get(name).Status.NominatedNodeName, name)
	}
}

// TestTopologyChangeUnderLivePods is the case: a node's machine
// loses GPU 7 while a pod holds GPUs 4-7. The new machine takes effect at
// once (no pod is placed on GPU 7), the pod stays accounted on what exists
// (no later pod gets its GPUs or CPUs, before or after a scheduler
// restart), and the node is marked (condition, Event, metric) until the pod
// is gone.
func TestTopologyChangeUnderLivePods(t *testing.T) { testTopologyChange(t, newFakeCluster(t)) }

func testTopologyChange(t *testing.T, c *cluster) {
	h100, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	spec := h100.Spec()
	spec.GPUs = slices.DeleteFunc(spec.GPUs, func(g topology.GPUSpec) bool { return *g.ID == 7 })
	spec.NVLinks = slices.DeleteFunc(spec.NVLinks, func(l []int) bool { return l[0] == 7 || l[1] == 7 })
	noGPU7, err := spec.Build()
	require.NoError(t, err)
	js, err := json.Marshal(noGPU7)
	require.NoError(t, err)

	c.create(node(t, "gpu-1", "dgx-h100", true, false))
	holder := decided("holder", "gpu-1", "56-67,168-179", 4, 5, 6, 7)
	c.create(holder)
	first := c.start(nil)
	lost, _ := gauge(t, "numaplace_pod_misfits_total", map[string]string{"kind": "Lost"})
	waitGauge(t, "numaplace_numa_free_gpus", map[string]string{"node": "gpu-1", "numa_node": "1"}, 0)
	waitGauge(t, "numaplace_numa_free_gpus", map[string]string{"node": "gpu-1", "numa_node": "0"}, 4)

	c.setNodeAnnotation("gpu-1", numaplace.AnnotationTopology, string(js))
	cond := c.nodeCondition("gpu-1", v1.ConditionTrue, numaplace.MarkMisfit)
	require.Contains(t, cond.Message, "default/holder (Lost)")
	require.Contains(t, cond.Message, "GPU 7 not on the machine")
	notes := c.nodeEvents("gpu-1", numaplace.EventPodMisfit)
	require.Contains(t, notes[0], "numaplace: pod default/holder")
	waitGauge(t, "numaplace_nodes", map[string]string{"state": numaplace.NodeMisfit}, 1)
	waitGauge(t, "numaplace_misfit_pods", map[string]string{"kind": "Lost"}, 1)
	waitGauge(t, "numaplace_pod_misfits_total", map[string]string{"kind": "Lost"}, lost+1)
	st, ok := first.plugin.Cache().Pod("default/holder")
	require.True(t, ok)
	require.Equal(t, []int{4, 5, 6}, st.Allocation.GPUs)

	// The new machine at once: the next 4-GPU pod takes NUMA node 0; a
	// 3-GPU pod finds no NUMA node (GPU 7 is gone, 4-6 are held).
	c.create(pod("next", "SingleNUMANode", 24, 4))
	got := c.waitBound("next")
	require.Equal(t, []int{0, 1, 2, 3}, gpuIDs(decision(t, got)))
	third := pod("third", "SingleNUMANode", 8, 3)
	c.create(third)
	c.waitUnschedulable("third") // NodeResourcesFit refuses first: the pods request 8 GPUs
	var fe *scheduler.FilterError
	require.ErrorAs(t, first.plugin.Cache().Filter(numaplace.PodFromV1(third), "gpu-1"), &fe)
	require.Equal(t, []string{"fewer than 3 free GPUs now"}, fe.Reasons, "GPU 7 is not counted, 4-6 are held")
	c.requireNoDoubleHandout()

	// A restart reads the same state: the holder is accounted on what
	// exists, the third pod still waits, and a CPU-only pod gets none of
	// the holder's CPUs.
	first.stop()
	second := c.start(nil)
	st, ok = second.plugin.Cache().Pod("default/holder")
	require.True(t, ok, "the holder is accounted after the restart")
	require.Equal(t, []int{4, 5, 6}, st.Allocation.GPUs)
	require.Equal(t, "56-67,168-179", st.Allocation.CPUs.String())
	c.create(pod("cpus", "None", 150, 0))
	got = c.waitBound("cpus")
	cpus, err := numa.ParseCPUSet(decision(t, got).CPUSet)
	require.NoError(t, err)
	require.Equal(t, 150, cpus.Size())
	require.True(t, cpus.Intersection(st.Allocation.CPUs).IsEmpty(), "CPUs %s of the holder handed out again", cpus.Intersection(st.Allocation.CPUs))
	require.Empty(t, c.get("third").Spec.NodeName)
	c.requireNoDoubleHandout()
	c.deletePod("cpus") // its span crosses both NUMA nodes, which exclusivity would keep from the third pod

	// Once the holder is gone the node is whole and unmarked, and the
	// waiting pod binds on what is left of NUMA node 1.
	start := time.Now()
	c.deletePod("holder")
	got = c.waitBoundWithin("third", start)
	require.Equal(t, []int{4, 5, 6}, gpuIDs(decision(t, got)))
	c.nodeCondition("gpu-1", v1.ConditionFalse, numaplace.MarkAllFit)
	waitGauge(t, "numaplace_nodes", map[string]string{"state": numaplace.NodeMisfit}, 0)
	c.requireNoDoubleHandout()
}

// TestMalformedNodesAreReportedAsMalformed: a node whose topology
// annotation cannot be read refuses NUMA pods saying so (not as a node
// without one), gets an Event, a condition and the metrics, is read once
// per change of the annotation, and takes pods once it is fixed; a bound
// pod that cannot be read is accounted by its decision and reported.
func TestMalformedNodesAreReportedAsMalformed(t *testing.T) { testMalformed(t, newFakeCluster(t)) }

func testMalformed(t *testing.T, c *cluster) {
	bad := node(t, "bad", "dgx-h100", true, false)
	good := bad.Annotations[numaplace.AnnotationTopology]
	bad.Annotations[numaplace.AnnotationTopology] = `{"numaNodes":[{"id":0,"cpus":"0-3"}],"gpus":[{"id":0,"numaNode":9}]}`
	c.create(bad)
	c.create(node(t, "ok", "dgx-a100", true, false))
	invalid := decided("invalid", "ok", "1-2", 0)
	invalid.Annotations[kube.AnnotationCPUSetScheduler] = "sometimes"
	c.create(invalid)
	malformed, _ := gauge(t, "numaplace_topology_updates_total", map[string]string{"result": numaplace.UpdateMalformed})
	c.start(nil)

	c.create(pod("numa", "SingleNUMANode", 8, 4))
	msg := c.waitUnschedulable("numa")
	require.Contains(t, msg, "numaplace: topology annotation numaplace.io/topology is malformed: ", msg)
	require.NotContains(t, msg, numaplace.ReasonTextNoTopology)
	notes := c.nodeEvents("bad", numaplace.EventTopologyMalformed)
	require.Contains(t, notes[0], "numaplace: topology annotation numaplace.io/topology is malformed")
	c.nodeCondition("bad", v1.ConditionTrue, numaplace.MarkTopologyMalformed)
	waitGauge(t, "numaplace_nodes", map[string]string{"state": numaplace.NodeMalformed}, 1)
	waitGauge(t, "numaplace_topology_updates_total", map[string]string{"result": numaplace.UpdateMalformed}, malformed+1)

	// Updates that leave the annotation alone do not read it again.
	n, err := c.client.CoreV1().Nodes().Get(context.Background(), "bad", metav1.GetOptions{})
	require.NoError(t, err)
	n.Labels["touched"] = "yes"
	_, err = c.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
	time.Sleep(500 * time.Millisecond)
	v, _ := gauge(t, "numaplace_topology_updates_total", map[string]string{"result": numaplace.UpdateMalformed})
	require.Equal(t, malformed+1, v, "the same annotation is read once")

	// The invalid bound pod is accounted by its decision, and reported.
	notes = c.nodeEvents("ok", numaplace.EventPodMisfit)
	require.Contains(t, notes[0], "default/invalid")
	cond := c.nodeCondition("ok", v1.ConditionTrue, numaplace.MarkMisfit)
	require.Contains(t, cond.Message, "default/invalid (Invalid)")

	// Fixed: the waiting pod binds there (the A100 has 2 GPUs per NUMA
	// node, the H100 4).
	start := time.Now()
	c.setNodeAnnotation("bad", numaplace.AnnotationTopology, good)
	got := c.waitBoundWithin("numa", start)
	require.Equal(t, "bad", got.Spec.NodeName)
	c.nodeCondition("bad", v1.ConditionFalse, numaplace.MarkAllFit)
}
