package numaplace

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/topology"
)

// newTestEvents returns the informer bookkeeping of a plugin without
// informers: the tests call the handlers themselves.
func newTestEvents(t testing.TB) *events {
	t.Helper()
	c, err := scheduler.New(scheduler.Config{})
	require.NoError(t, err)
	pl := &Plugin{cache: c, logger: ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(1)))}
	e := &events{pl: pl, nodes: map[string]*nodeRecord{}, bound: map[string]map[string]*v1.Pod{}}
	pl.ev = e
	return e
}

func testNode(t testing.TB, name, preset string, optIn bool) *v1.Node {
	t.Helper()
	m, err := topology.Preset(preset)
	require.NoError(t, err)
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
	e.podChanged(p.DeepCopy())
	require.Len(t, heldGPUs(t, c, "default/job"), 1)
	// A finished pod holds nothing.
	done := p.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	e.podChanged(done)
	_, ok = c.Pod("default/job")
	require.False(t, ok)
	require.Empty(t, e.bound)
	// A deletion seen only as a tombstone.
	e.podChanged(p)
	e.podDeleted(cache.DeletedFinalStateUnknown{Key: "default/job", Obj: p})
	_, ok = c.Pod("default/job")
	require.False(t, ok)
	// Pending pods are not the informers' business, and a repeated
	// deletion is harmless.
	e.podChanged(boundPod("pending", "", 1, ""))
	_, ok = c.Pod("default/pending")
	require.False(t, ok)
	e.podDeleted(p)
	e.podDeleted("not a pod")
	e.podChanged(42)
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

	// An unusable annotation keeps the old machine, takes the labels.
	n3 := n.DeepCopy()
	n3.Annotations[AnnotationTopology] = `{"numaNodes":[]}`
	e.nodeChanged(n3)
	st, _ = c.Node("gpu-1")
	require.True(t, st.OptedIn)
	require.Same(t, m, st.Machine)
	require.Equal(t, []string{"default/job"}, st.Pods)

	// A machine that cannot hold the placed pods is refused.
	n4 := testNode(t, "gpu-1", "epyc-2s-nps4", true)
	e.nodeChanged(n4)
	st, _ = c.Node("gpu-1")
	require.Same(t, m, st.Machine)

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
	e.nodeDeleted(cache.DeletedFinalStateUnknown{Key: "gpu-1", Obj: n})
	_, ok = c.Node("gpu-1")
	require.False(t, ok)
	e.nodeDeleted(n)
	e.nodeDeleted("not a node")
	e.nodeChanged(42)

	// A node whose first annotation is unusable is not added.
	e.nodeChanged(n3)
	_, ok = c.Node("gpu-1")
	require.False(t, ok)
}
