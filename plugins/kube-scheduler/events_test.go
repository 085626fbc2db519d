package numaplace

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2/ktesting"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// world is the plugin's informer bookkeeping over stores the test fills
// itself, as informers would: each change goes into the store first, then
// the handler is told.
type world struct {
	*events
	nodeStore, podStore cache.Indexer
}

// lastRV is the last resource version store gave: one counter for every
// world, as the API server's resource versions only grow (a restarted
// plugin over the same stores, newWorld, must not see an object changed
// under a version it already recorded).
var lastRV atomic.Int64

// newTestEvents returns the bookkeeping of a plugin without informers.
func newTestEvents(t testing.TB) *world {
	t.Helper()
	return newWorld(t, cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{nodeNameIndex: indexByNodeName}))
}

// newWorld returns a fresh plugin (a restarted scheduler) over the stores.
func newWorld(t testing.TB, nodes, pods cache.Indexer) *world {
	t.Helper()
	require.NoError(t, RegisterMetrics())
	c, err := scheduler.New(scheduler.Config{})
	require.NoError(t, err)
	pl := &Plugin{cache: c, logger: ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(1)))}
	e := &events{pl: pl, nodes: corelisters.NewNodeLister(nodes), pods: pods, recs: map[string]*nodeRecord{},
		reserved: map[string]map[string]bool{}}
	e.marks = newMarker(context.Background(), pl, e.nodes)
	t.Cleanup(e.marks.stop)
	pl.ev = e
	return &world{events: e, nodeStore: nodes, podStore: pods}
}

// store puts an object (a copy with a new resource version) in its store.
func (w *world) store(s cache.Indexer, obj metav1.Object) {
	obj.SetResourceVersion(strconv.FormatInt(lastRV.Add(1), 10))
	if _, ok, _ := s.Get(obj); ok {
		_ = s.Update(obj)
	} else {
		_ = s.Add(obj)
	}
}

func (w *world) nodeChanged(n *v1.Node) {
	n = n.DeepCopy()
	w.store(w.nodeStore, n)
	w.nodeEvent(n)
}

func (w *world) nodeDeleted(n *v1.Node) {
	_ = w.nodeStore.Delete(n)
	w.nodeEvent(n)
}

func (w *world) podChanged(p *v1.Pod) {
	p = p.DeepCopy()
	w.store(w.podStore, p)
	w.podEvent(p)
}

func (w *world) podDeleted(p *v1.Pod) {
	_ = w.podStore.Delete(p)
	w.podEvent(p)
}

func testNode(t testing.TB, name, preset string, optIn bool) *v1.Node {
	t.Helper()
	m, err := topology.Preset(preset)
	require.NoError(t, err)
	return machineNode(t, name, m, optIn)
}

func machineNode(t testing.TB, name string, m *topology.Machine, optIn bool) *v1.Node {
	t.Helper()
	b, err := json.Marshal(m)
	require.NoError(t, err)
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{},
		Annotations: map[string]string{AnnotationTopology: string(b)}}}
	if optIn {
		n.Labels[kube.DefaultOptInLabel] = kube.DefaultOptInValue
	}
	return n
}

// boundPod is a pod bound to node asking for gpus aliyun.com/gpu and 2
// CPUs, without a NUMA spec; decision, if not "", is its
// numaplace.io/allocation.
func boundPod(name, node string, gpus int, decision string) *v1.Pod {
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), kube.ResourceAliyunGPU: *resource.NewQuantity(int64(gpus), resource.DecimalSI)}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}}}
	if decision != "" {
		p.Annotations[kube.AnnotationAllocation] = decision
	}
	return p
}

func heldGPUs(t *testing.T, c *scheduler.Cache, key string) []int {
	t.Helper()
	st, ok := c.Pod(key)
	require.True(t, ok, "pod %s not in the cache", key)
	require.NotNil(t, st.Allocation, "pod %s holds no allocation", key)
	return st.Allocation.GPUs
}

func TestEventsPodsBeforeTheirNode(t *testing.T) {
	e := newTestEvents(t)
	c := e.pl.cache
	// Pods bound to a node the cache does not know yet wait for it; the
	// one with a decision is claimed first, so the prediction for the
	// other cannot take its GPUs.
	e.podChanged(boundPod("a-predicted", "gpu-1", 2, ""))
	e.podChanged(boundPod("b-decided", "gpu-1", 2, `{"policy":"None","cpuset":"","gpus":[{"id":0},{"id":1}]}`))
	_, ok := c.Pod("default/a-predicted")
	require.False(t, ok)
	e.nodeChanged(testNode(t, "gpu-1", "dgx-h100", true))
	require.Equal(t, []int{0, 1}, heldGPUs(t, c, "default/b-decided"))
	require.NotContains(t, heldGPUs(t, c, "default/a-predicted"), 0)
	require.NotContains(t, heldGPUs(t, c, "default/a-predicted"), 1)
}

func TestEventsDecisionAfterAConflictingPrediction(t *testing.T) {
	e := newTestEvents(t)
	c := e.pl.cache
	e.nodeChanged(testNode(t, "gpu-1", "dgx-h100", true))
	e.podChanged(boundPod("a-predicted", "gpu-1", 2, ""))
	predicted := heldGPUs(t, c, "default/a-predicted")
	require.Len(t, predicted, 2)
	// A decision naming the predicted GPUs arrives: the decision wins, the
	// prediction moves.
	d := `{"policy":"None","cpuset":"","gpus":[{"id":` + strconv.Itoa(predicted[0]) + `},{"id":` + strconv.Itoa(predicted[1]) + `}]}`
	e.podChanged(boundPod("b-decided", "gpu-1", 2, d))
	require.Equal(t, predicted, heldGPUs(t, c, "default/b-decided"))
	moved := heldGPUs(t, c, "default/a-predicted")
	require.NotContains(t, moved, predicted[0])
	require.NotContains(t, moved, predicted[1])
}

func TestEventsPodLifecycle(t *testing.T) {
	e := newTestEvents(t)
	c := e.pl.cache
	e.nodeChanged(testNode(t, "gpu-1", "dgx-h100", true))
	p := boundPod("job", "gpu-1", 1, "")
	e.podChanged(p)
	_, ok := c.Pod("default/job")
	require.True(t, ok)
	// Updates are harmless.
	e.podChanged(p)
	require.Len(t, heldGPUs(t, c, "default/job"), 1)
	// A finished pod holds nothing.
	done := p.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	e.podChanged(done)
	_, ok = c.Pod("default/job")
	require.False(t, ok)
	// A deletion seen only as a tombstone.
	e.podChanged(p)
	_ = e.podStore.Delete(p)
	e.podEvent(cache.DeletedFinalStateUnknown{Key: "default/job", Obj: p})
	_, ok = c.Pod("default/job")
	require.False(t, ok)
	// Pending pods are not the informers' business, and a repeated
	// deletion is harmless.
	e.podChanged(boundPod("pending", "", 1, ""))
	_, ok = c.Pod("default/pending")
	require.False(t, ok)
	e.podDeleted(p)
	e.podEvent("not a pod")
}

func TestEventsNodeLifecycle(t *testing.T) {
	e := newTestEvents(t)
	c := e.pl.cache
	n := testNode(t, "gpu-1", "dgx-h100", true)
	e.nodeChanged(n)
	e.podChanged(boundPod("job", "gpu-1", 2, ""))
	st, ok := c.Node("gpu-1")
	require.True(t, ok)
	require.True(t, st.OptedIn)
	m := st.Machine

	// The opt-in label goes: the machine is kept (not parsed again).
	n2 := n.DeepCopy()
	delete(n2.Labels, kube.DefaultOptInLabel)
	e.nodeChanged(n2)
	st, _ = c.Node("gpu-1")
	require.False(t, st.OptedIn)
	require.Same(t, m, st.Machine)

	// A malformed annotation is reported as malformed, once: the node
	// takes no NUMA pods until it is fixed.
	n3 := n.DeepCopy()
	n3.Annotations[AnnotationTopology] = `{"numaNodes":[]}`
	before := counterValue(t, topologyUpdates.WithLabelValues(UpdateMalformed))
	e.nodeChanged(n3)
	e.nodeChanged(n3)
	require.Equal(t, before+1, counterValue(t, topologyUpdates.WithLabelValues(UpdateMalformed)), "parsed once per change")
	_, ok = c.Node("gpu-1")
	require.False(t, ok)
	require.Contains(t, e.malformed("gpu-1"), "numaplace: topology annotation numaplace.io/topology is malformed: ")
	mk, _ := e.marks.wanted("gpu-1")
	require.NotNil(t, mk)
	require.Equal(t, MarkTopologyMalformed, mk.reason)

	// Fixed: back with its pods.
	e.nodeChanged(n)
	require.Len(t, heldGPUs(t, c, "default/job"), 2)
	require.Empty(t, e.malformed("gpu-1"))

	// A smaller machine takes effect at once; the pod stays accounted.
	e.nodeChanged(testNode(t, "gpu-1", "epyc-2s-nps4", true))
	st, _ = c.Node("gpu-1")
	require.NotSame(t, m, st.Machine)
	require.Equal(t, []string{"default/job"}, st.Pods)

	// The annotation goes: the node leaves the cache; it comes back with
	// its pods.
	n5 := n.DeepCopy()
	n5.Annotations = nil
	e.nodeChanged(n5)
	_, ok = c.Node("gpu-1")
	require.False(t, ok)
	_, ok = c.Pod("default/job")
	require.False(t, ok)
	e.nodeChanged(n)
	require.Len(t, heldGPUs(t, c, "default/job"), 2)

	// Deleted, also as a tombstone.
	_ = e.nodeStore.Delete(n)
	e.nodeEvent(cache.DeletedFinalStateUnknown{Key: "gpu-1", Obj: n})
	_, ok = c.Node("gpu-1")
	require.False(t, ok)
	e.nodeDeleted(n)
	e.nodeEvent("not a node")

	// A node whose first annotation is malformed is not added, and says so.
	e.nodeChanged(n3)
	_, ok = c.Node("gpu-1")
	require.False(t, ok)
	require.NotEmpty(t, e.malformed("gpu-1"))
}

// TestEventsTopologyChangeUnderLivePods is the case through the
// handlers: a node's machine loses GPU 7 while a pod holds GPUs 4-7. The
// new machine takes effect at once, the pod stays accounted on what still
// exists, the node is marked until the pod is gone, and a restarted plugin
// accounts the same (so no later pod gets that pod's CPUs).
func TestEventsTopologyChangeUnderLivePods(t *testing.T) {
	h100, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	spec := h100.Spec()
	spec.GPUs = slices.DeleteFunc(spec.GPUs, func(g topology.GPUSpec) bool { return *g.ID == 7 })
	spec.NVLinks = slices.DeleteFunc(spec.NVLinks, func(l []int) bool { return l[0] == 7 || l[1] == 7 })
	noGPU7, err := spec.Build()
	require.NoError(t, err)

	e := newTestEvents(t)
	e.nodeChanged(machineNode(t, "gpu-1", h100, true))
	holder := boundPod("holder", "gpu-1", 4, `{"policy":"SingleNUMANode","cpuset":"56-67,168-179","gpus":[{"id":4},{"id":5},{"id":6},{"id":7}]}`)
	e.podChanged(holder)
	misfits := counterValue(t, podMisfits.WithLabelValues(string(scheduler.MisfitLost)))
	e.nodeChanged(machineNode(t, "gpu-1", noGPU7, true))

	st, _ := e.pl.cache.Pod("default/holder")
	require.Equal(t, []int{4, 5, 6}, st.Allocation.GPUs)
	require.Equal(t, "56-67,168-179", st.Allocation.CPUs.String())
	require.Equal(t, scheduler.MisfitLost, st.Misfit)
	require.Equal(t, misfits+1, counterValue(t, podMisfits.WithLabelValues(string(scheduler.MisfitLost))))
	mk, _ := e.marks.wanted("gpu-1")
	require.NotNil(t, mk)
	require.Equal(t, MarkMisfit, mk.reason)
	require.Contains(t, mk.message, "default/holder (Lost): its decision names GPU 7 not on the machine")

	restarted := newWorld(t, e.nodeStore, e.podStore)
	restarted.syncNode("gpu-1")
	requireSameCache(t, e.pl.cache, restarted.pl.cache, "gpu-1")

	e.podDeleted(holder)
	mk, ok := e.marks.wanted("gpu-1")
	require.True(t, ok)
	require.Nil(t, mk, "unmarked once the pod is gone")
}

func counterValue(t testing.TB, c metrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	require.NoError(t, err)
	return v
}

// requireSameCache checks that two plugins account a node alike.
func requireSameCache(t require.TestingT, want, got *scheduler.Cache, node string) {
	w, ok1 := want.Node(node)
	g, ok2 := got.Node(node)
	require.Equal(t, ok1, ok2, "node %s in one cache only", node)
	if !ok1 {
		return
	}
	require.True(t, w.SharedCPUs.Equal(g.SharedCPUs), "node %s shared CPUs %s, want %s", node, g.SharedCPUs, w.SharedCPUs)
	require.Equal(t, w.FreeGPUs, g.FreeGPUs, node)
	require.Equal(t, w.SharedRequestMilli, g.SharedRequestMilli, node)
	require.Equal(t, w.MemoryRequestMiB, g.MemoryRequestMiB, node)
	require.Equal(t, w.Pods, g.Pods, node)
	require.Equal(t, w.Misfits, g.Misfits, node)
	require.Equal(t, w.Overcommit, g.Overcommit, node)
	require.Equal(t, len(w.Allocations), len(g.Allocations), node)
	for i, a := range w.Allocations {
		b := g.Allocations[i]
		require.Equal(t, a.ID, b.ID, node)
		require.Equal(t, a.CPUs.String(), b.CPUs.String(), a.ID)
		require.Equal(t, a.GPUs, b.GPUs, a.ID)
		require.Equal(t, a.DenseSpan, b.DenseSpan, a.ID)
	}
}

// requireSoundCache checks that nothing is held twice on the node and that
// everything held is on its current machine.
func requireSoundCache(t require.TestingT, c *scheduler.Cache, node string) {
	st, ok := c.Node(node)
	if !ok {
		return
	}
	allocatable := st.Machine.CPUs().Difference(st.Machine.ReservedCPUs())
	var cpus numa.CPUSet
	gpus := map[int]string{}
	for _, a := range st.Allocations {
		require.True(t, a.CPUs.Intersection(cpus).IsEmpty(), "node %s: CPUs %s of %s held twice", node, a.CPUs.Intersection(cpus), a.ID)
		require.True(t, a.CPUs.IsSubsetOf(allocatable), "node %s: %s holds CPUs the machine does not hand out", node, a.ID)
		cpus.UnionWith(a.CPUs)
		for _, g := range a.GPUs {
			require.NotContains(t, gpus, g, "node %s: GPU %d of %s held by %s too", node, g, a.ID, gpus[g])
			_, ok := st.Machine.GPU(g)
			require.True(t, ok, "node %s: %s holds GPU %d the machine lacks", node, a.ID, g)
			gpus[g] = a.ID
		}
	}
}

// TestEventsAccountingIsAFunctionOfTheObjects drives random sequences of
// node events (machines changing under live pods, malformed annotations,
// labels, deletions), pod events (bound with decisions that fit, name what
// the machine lacks or another pod holds; without decisions; plain;
// invalid; deleted, recreated, finished) and scheduler restarts through
// the plugin's handlers, delivering the notifications late, out of order
// and twice, and checks after every step that no CPU or GPU is held twice
// or off the node's machine, and at the end that the live accounting
// equals the one a fresh plugin rebuilds from the objects.
func TestEventsAccountingIsAFunctionOfTheObjects(t *testing.T) {
	machines := make([]string, 0, 4)
	for _, js := range []string{
		`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7"},{"id":1,"socket":0,"cpus":"8-15"}],"gpus":[{"id":0,"numaNode":0},{"id":1,"numaNode":0},{"id":2,"numaNode":1},{"id":3,"numaNode":1}]}`,
		`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7"},{"id":1,"socket":0,"cpus":"8-15"}],"gpus":[{"id":0,"numaNode":0},{"id":1,"numaNode":0},{"id":2,"numaNode":1}]}`,
		`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7"},{"id":1,"socket":0,"cpus":"8-11"}],"reservedCPUs":"0","gpus":[{"id":0,"numaNode":0},{"id":1,"numaNode":0},{"id":2,"numaNode":1},{"id":3,"numaNode":1}]}`,
		`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7"}],"gpus":[{"id":0,"numaNode":0},{"id":1,"numaNode":0}]}`,
		`{"numaNodes":[]}`, // malformed
	} {
		machines = append(machines, js)
	}
	nodeNames := []string{"n1", "n2"}
	rapid.Check(t, func(rt *rapid.T) {
		w := newTestEvents(t)
		// ResourceClaims allocated to GPUs of the nodes (draevents.go).
		claimStore := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{claimNodeIndex: indexClaimByNode})
		w.claims = claimStore
		claims := map[string]*resourceapi.ResourceClaim{}
		type note struct {
			node string // the node to sync (a notification names its object's node)
		}
		var pending []note
		nodes := map[string]*v1.Node{}
		pods := map[string]*v1.Pod{}
		deliver := func(i int) {
			n := pending[i]
			pending = slices.Delete(pending, i, i+1)
			w.syncNode(n.node)
		}
		notify := func(node string) {
			pending = append(pending, note{node: node})
			if rapid.Bool().Draw(rt, "twice") {
				pending = append(pending, note{node: node})
			}
		}
		next := 0
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 11).Draw(rt, "op") {
			case 0, 1: // a node with a machine (maybe malformed, maybe without the label)
				name := rapid.SampledFrom(nodeNames).Draw(rt, "node")
				js := rapid.SampledFrom(machines).Draw(rt, "machine")
				n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{},
					Annotations: map[string]string{AnnotationTopology: js}}}
				if rapid.Bool().Draw(rt, "optIn") {
					n.Labels[kube.DefaultOptInLabel] = kube.DefaultOptInValue
				}
				if v := rapid.SampledFrom([]string{"", "", "true", "false", "maybe"}).Draw(rt, "memory-alignment"); v != "" {
					n.Labels[kube.LabelMemoryAlignment] = v
				}
				nodes[name] = n
				w.store(w.nodeStore, n)
				notify(name)
			case 2: // a node deleted, or its annotation removed
				name := rapid.SampledFrom(nodeNames).Draw(rt, "node")
				if n, ok := nodes[name]; ok {
					if rapid.Bool().Draw(rt, "delete") {
						delete(nodes, name)
						_ = w.nodeStore.Delete(n)
					} else {
						n = n.DeepCopy()
						n.Annotations = nil
						nodes[name] = n
						w.store(w.nodeStore, n)
					}
					notify(name)
				}
			case 3, 4, 5: // a pod bound
				next++
				name := fmt.Sprintf("p%02d", next)
				node := rapid.SampledFrom(nodeNames).Draw(rt, "pod-node")
				var p *v1.Pod
				switch rapid.IntRange(0, 3).Draw(rt, "kind") {
				case 0: // a decision, maybe naming what is gone or held
					var cpus numa.CPUSet
					for _, c := range rapid.SliceOfNDistinct(rapid.IntRange(0, 15), 1, 4, rapid.ID[int]).Draw(rt, "cpus") {
						cpus.Add(c)
					}
					gpus := rapid.SliceOfNDistinct(rapid.IntRange(0, 3), 0, 2, rapid.ID[int]).Draw(rt, "gpus")
					slices.Sort(gpus)
					ids := make([]string, len(gpus))
					for i, g := range gpus {
						ids[i] = fmt.Sprintf(`{"id":%d}`, g)
					}
					p = numaPod(name, "None", cpus.Size(), len(gpus))
					p.Annotations[kube.AnnotationAllocation] = fmt.Sprintf(`{"policy":"None","cpuset":%q,"gpus":[%s]}`, cpus, strings.Join(ids, ","))
				case 1: // no decision
					p = numaPod(name, rapid.SampledFrom([]string{"SingleNUMANode", "BestEffort", "None"}).Draw(rt, "policy"),
						rapid.IntRange(1, 4).Draw(rt, "ncpu"), rapid.IntRange(0, 2).Draw(rt, "ngpu"))
				case 2: // plain
					p = numaPod(name, "", rapid.IntRange(1, 3).Draw(rt, "plain-cpu"), 0)
				default: // invalid
					p = numaPod(name, "Restricted", 2, 1)
					p.Annotations[kube.AnnotationCPUSetScheduler] = "maybe"
				}
				p.Spec.NodeName = node
				pods[name] = p
				w.store(w.podStore, p)
				notify(node)
			case 6: // a pod deleted, finished or changed
				if len(pods) == 0 {
					break
				}
				name := rapid.SampledFrom(slices.Sorted(maps.Keys(pods))).Draw(rt, "victim")
				p := pods[name]
				switch rapid.IntRange(0, 2).Draw(rt, "how") {
				case 0:
					delete(pods, name)
					_ = w.podStore.Delete(p)
				case 1:
					delete(pods, name)
					q := p.DeepCopy()
					q.Status.Phase = v1.PodFailed
					w.store(w.podStore, q)
				case 2:
					q := p.DeepCopy()
					delete(q.Annotations, kube.AnnotationAllocation)
					pods[name] = q
					w.store(w.podStore, q)
				}
				notify(p.Spec.NodeName)
			case 7: // a notification delivered, in any order
				if len(pending) > 0 {
					deliver(rapid.IntRange(0, len(pending)-1).Draw(rt, "which"))
				}
			case 10: // a claim allocated to GPUs of a node, reserved for a pod there or for none
				next++
				name := fmt.Sprintf("c%02d", next)
				node := rapid.SampledFrom(nodeNames).Draw(rt, "claim-node")
				rc := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
					Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
				for _, g := range rapid.SliceOfNDistinct(rapid.IntRange(0, 3), 1, 2, rapid.ID[int]).Draw(rt, "claim-gpus") {
					rc.Status.Allocation.Devices.Results = append(rc.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
						Request: "gpus", Driver: DRADriver, Pool: node, Device: fmt.Sprintf("gpu-%d", g)})
				}
				var here []string
				for _, k := range slices.Sorted(maps.Keys(pods)) {
					if pods[k].Spec.NodeName == node {
						here = append(here, k)
					}
				}
				if len(here) > 0 && rapid.Bool().Draw(rt, "reserved") {
					p := pods[rapid.SampledFrom(here).Draw(rt, "consumer")]
					rc.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
				}
				claims[name] = rc
				w.store(claimStore, rc)
				notify(node)
			case 11: // a claim deallocated or deleted
				if len(claims) == 0 {
					break
				}
				name := rapid.SampledFrom(slices.Sorted(maps.Keys(claims))).Draw(rt, "claim")
				rc := claims[name]
				delete(claims, name)
				node := rc.Status.Allocation.Devices.Results[0].Pool
				if rapid.Bool().Draw(rt, "delete-claim") {
					_ = claimStore.Delete(rc)
				} else {
					q := rc.DeepCopy()
					q.Status = resourceapi.ResourceClaimStatus{}
					w.store(claimStore, q)
				}
				notify(node)
			case 8: // a scheduler restart: a new plugin over the same stores
				w = newWorld(t, w.nodeStore, w.podStore)
				w.claims = claimStore
				pending = pending[:0]
				for _, name := range rapid.Permutation(nodeNames).Draw(rt, "restart-order") {
					w.syncNode(name)
				}
			case 9: // a scheduling cycle's catch-up on a node
				w.syncNode(rapid.SampledFrom(nodeNames).Draw(rt, "catch-up"))
			}
			for _, n := range nodeNames {
				requireSoundCache(rt, w.pl.cache, n)
			}
		}
		for len(pending) > 0 {
			deliver(rapid.IntRange(0, len(pending)-1).Draw(rt, "late"))
		}
		fresh := newWorld(t, w.nodeStore, w.podStore)
		fresh.claims = claimStore
		for _, name := range rapid.Permutation(nodeNames).Draw(rt, "fresh-order") {
			fresh.syncNode(name)
		}
		for _, n := range nodeNames {
			requireSameCache(rt, fresh.pl.cache, w.pl.cache, n)
			requireSoundCache(rt, w.pl.cache, n)
			require.Equal(rt, fresh.malformed(n), w.malformed(n))
			fm, fok := fresh.marks.wanted(n)
			lm, lok := w.marks.wanted(n)
			if fok || lok {
				require.Equal(rt, fm, lm, "node %s marked alike", n)
			}
		}
	})
}

// TestEventsReservationOfAPodDeletedBeforeItWasSeenBound: a pod the plugin
// reserved is bound and deleted before the plugin sees it bound; no
// Unreserve comes after a successful binding, so the sync drops the
// reservation (it would hold the pod's GPUs forever).
func TestEventsReservationOfAPodDeletedBeforeItWasSeenBound(t *testing.T) {
	e := newTestEvents(t)
	pl := e.pl
	e.nodeChanged(testNode(t, "gpu-1", "dgx-h100", true))
	p := numaPod("quick", "SingleNUMANode", 8, 4)
	e.podChanged(p) // pending
	state := preFilter(t, pl, p)
	require.True(t, pl.Reserve(context.Background(), state, p, "gpu-1").IsSuccess())
	e.syncNode("gpu-1")
	_, ok := pl.cache.Pod("default/quick")
	require.True(t, ok, "a pod being scheduled keeps its reservation")

	// Bound and deleted: the store never showed it bound to the plugin.
	_ = e.podStore.Delete(p)
	gone := p.DeepCopy()
	gone.Spec.NodeName = "gpu-1"
	e.podEvent(gone)
	_, ok = pl.cache.Pod("default/quick")
	require.False(t, ok, "the reservation of a deleted pod is dropped")
	st, _ := pl.cache.Node("gpu-1")
	require.Equal(t, 8, st.FreeGPUs)
}

// TestEventsInvalidLabel: a node whose labels the cache refuses (a
// memory-alignment label that is neither "true" nor "false") is reported
// as such and takes no NUMA pods, once per label value; fixed, it comes
// back with its pods.
func TestEventsInvalidLabel(t *testing.T) {
	e := newTestEvents(t)
	c := e.pl.cache
	n := testNode(t, "gpu-1", "dgx-h100", true)
	e.nodeChanged(n)
	e.podChanged(boundPod("job", "gpu-1", 2, ""))
	bad := n.DeepCopy()
	bad.Labels[kube.LabelMemoryAlignment] = "maybe"
	before := counterValue(t, topologyUpdates.WithLabelValues(UpdateMalformed))
	e.nodeChanged(bad)
	e.nodeChanged(bad)
	require.Equal(t, before+1, counterValue(t, topologyUpdates.WithLabelValues(UpdateMalformed)), "reported once")
	_, ok := c.Node("gpu-1")
	require.False(t, ok)
	require.Contains(t, e.malformed("gpu-1"), "numaplace: invalid node gpu-1: label numaplace.io/memory-alignment=\"maybe\"")
	mk, _ := e.marks.wanted("gpu-1")
	require.NotNil(t, mk)
	require.Equal(t, MarkNodeInvalid, mk.reason)

	e.nodeChanged(n)
	require.Len(t, heldGPUs(t, c, "default/job"), 2)
	require.Empty(t, e.malformed("gpu-1"))
	mk, ok = e.marks.wanted("gpu-1")
	require.True(t, ok)
	require.Nil(t, mk)
}
