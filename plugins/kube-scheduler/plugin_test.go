package numaplace

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"
)

// numaPod asks for cpus CPUs and gpus aliyun.com/gpu under the policy (""
// for no NUMA spec).
func numaPod(name, policy string, cpus, gpus int) *v1.Pod {
	res := v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(cpus), resource.DecimalSI)}
	if gpus > 0 {
		res[kube.ResourceAliyunGPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	ann := map[string]string{}
	if policy != "" {
		ann[kube.AnnotationCPUSetScheduler] = "required"
		ann[kube.AnnotationSpecAlibaba] = fmt.Sprintf(`{"numaTopologyPolicy":%q}`, policy)
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Annotations: ann},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}}}
}

func nodeInfo(n *v1.Node) fwk.NodeInfo {
	ni := framework.NewNodeInfo()
	ni.SetNode(n)
	return ni
}

func preFilter(t *testing.T, pl *Plugin, p *v1.Pod) fwk.CycleState {
	t.Helper()
	state := framework.NewCycleState()
	_, st := pl.PreFilter(context.Background(), state, p, nil)
	require.True(t, st.IsSuccess(), st.Message())
	return state
}

func TestPluginExtensionPoints(t *testing.T) {
	e := newTestEvents(t)
	pl := e.pl
	ctx := context.Background()
	gpu := testNode(t, "gpu-1", "dgx-h100", true)
	e.nodeChanged(gpu)
	plain := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}

	// A NUMA pod: refused by a node without topology, placed on the other.
	p := numaPod("a", "SingleNUMANode", 24, 4)
	state := preFilter(t, pl, p)
	st := pl.Filter(ctx, state, p, nodeInfo(plain))
	require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	require.Equal(t, []string{ReasonTextNoTopology}, st.Reasons())
	require.True(t, pl.Filter(ctx, state, p, nodeInfo(gpu)).IsSuccess())
	require.True(t, pl.PreScore(ctx, state, p, nil).IsSuccess())
	score, st := pl.Score(ctx, state, p, nodeInfo(gpu))
	require.True(t, st.IsSuccess())
	require.Greater(t, score, int64(0))
	score, st = pl.Score(ctx, state, p, nodeInfo(plain))
	require.True(t, st.IsSuccess())
	require.Zero(t, score)
	require.True(t, pl.Reserve(ctx, state, p, "gpu-1").IsSuccess())
	require.True(t, pl.Reserve(ctx, state, p, "gpu-1").IsSuccess(), "Reserve is idempotent")
	_, st = pl.PreBindPreFlight(ctx, state, p, "gpu-1")
	require.True(t, st.IsSuccess())

	// Two more 4-GPU pods: the second finds no NUMA node left at Reserve
	// (as when the node changed after Filter).
	q := numaPod("b", "SingleNUMANode", 24, 4)
	qs := preFilter(t, pl, q)
	require.True(t, pl.Reserve(ctx, qs, q, "gpu-1").IsSuccess())
	r := numaPod("c", "SingleNUMANode", 24, 4)
	rs := preFilter(t, pl, r)
	st = pl.Reserve(ctx, rs, r, "gpu-1")
	require.Equal(t, fwk.Unschedulable, st.Code())
	require.NotEmpty(t, st.Reasons())
	st = pl.Filter(ctx, rs, r, nodeInfo(gpu))
	require.Equal(t, fwk.Unschedulable, st.Code(), "not now: preemption may help")
	require.Equal(t, []string{"numaplace: fewer than 4 free GPUs now"}, st.Reasons())

	// More GPUs than a NUMA node can hold: never, preemption would not help.
	huge := numaPod("huge", "SingleNUMANode", 8, 5)
	hs := preFilter(t, pl, huge)
	st = pl.Filter(ctx, hs, huge, nodeInfo(gpu))
	require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	require.Equal(t, []string{"numaplace: no NUMA node can hold 5 GPUs on this machine"}, st.Reasons())

	// Unreserve gives back, and is harmless to repeat.
	pl.Unreserve(ctx, qs, q, "gpu-1")
	pl.Unreserve(ctx, qs, q, "gpu-1")
	pl.Unreserve(ctx, nil, r, "gpu-1")
	require.True(t, pl.Filter(ctx, rs, r, nodeInfo(gpu)).IsSuccess())

	// A pod without a NUMA spec or GPUs: any node, no scoring, nothing to
	// write.
	w := numaPod("web", "", 2, 0)
	ws := preFilter(t, pl, w)
	require.True(t, pl.Filter(ctx, ws, w, nodeInfo(plain)).IsSuccess())
	require.True(t, pl.Reserve(ctx, ws, w, "plain").IsSuccess())
	require.True(t, pl.PreScore(ctx, ws, w, nil).IsSkip())
	_, st = pl.PreBindPreFlight(ctx, ws, w, "plain")
	require.True(t, st.IsSkip())

	// Extension points without PreFilter's state read the pod themselves.
	require.True(t, pl.Filter(ctx, framework.NewCycleState(), w, nodeInfo(gpu)).IsSuccess())
	bad := numaPod("bad", "Restricted", 2, 1)
	delete(bad.Annotations, kube.AnnotationCPUSetScheduler)
	require.True(t, pl.Filter(ctx, framework.NewCycleState(), bad, nodeInfo(gpu)).IsError())
	_, st = pl.PreFilter(ctx, framework.NewCycleState(), bad, nil)
	require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	require.Contains(t, st.Message(), kube.AnnotationCPUSetScheduler)
	require.True(t, strings.HasPrefix(st.Message(), Prefix), st.Message())

	// A node with a malformed topology annotation says so.
	broken := testNode(t, "broken", "dgx-h100", true)
	broken.Annotations[AnnotationTopology] = `{"numaNodes":[{"id":0}]}`
	e.nodeChanged(broken)
	st = pl.Filter(ctx, state, p, nodeInfo(broken))
	require.Equal(t, fwk.UnschedulableAndUnresolvable, st.Code())
	require.Len(t, st.Reasons(), 1)
	require.True(t, strings.HasPrefix(st.Reasons()[0], "numaplace: topology annotation numaplace.io/topology is malformed: "), st.Reasons()[0])
	require.True(t, pl.Filter(ctx, ws, w, nodeInfo(broken)).IsSuccess(), "pods without a NUMA spec are the other plugins' business")
	require.True(t, pl.Filter(ctx, state, p, framework.NewNodeInfo()).IsError(), "a NodeInfo without a node")
}

func TestNormalizeScore(t *testing.T) {
	pl := &Plugin{}
	scores := fwk.NodeScoreList{{Name: "a", Score: 0}, {Name: "b", Score: 50}, {Name: "c", Score: 100}, {Name: "d", Score: 140}, {Name: "e", Score: -3}}
	require.True(t, pl.NormalizeScore(context.Background(), nil, nil, scores).IsSuccess())
	require.Equal(t, []int64{0, fwk.MaxNodeScore / 2, fwk.MaxNodeScore, fwk.MaxNodeScore, 0},
		[]int64{scores[0].Score, scores[1].Score, scores[2].Score, scores[3].Score, scores[4].Score})
}

func TestQueueingHints(t *testing.T) {
	e := newTestEvents(t)
	pl := e.pl
	logger := klog.Background()
	p := numaPod("pending", "SingleNUMANode", 8, 1)
	n := testNode(t, "gpu-1", "dgx-h100", false)
	plain := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
	hint := func(h fwk.QueueingHint, err error) fwk.QueueingHint {
		t.Helper()
		require.NoError(t, err)
		return h
	}
	require.Equal(t, fwk.Queue, hint(pl.isSchedulableAfterNodeChange(logger, p, nil, n)))
	require.Equal(t, fwk.QueueSkip, hint(pl.isSchedulableAfterNodeChange(logger, p, nil, plain)))
	labelled := n.DeepCopy()
	labelled.Labels[kube.DefaultOptInLabel] = kube.DefaultOptInValue
	require.Equal(t, fwk.Queue, hint(pl.isSchedulableAfterNodeChange(logger, p, n, labelled)))
	other := labelled.DeepCopy()
	other.Labels["unrelated"] = "x"
	require.Equal(t, fwk.QueueSkip, hint(pl.isSchedulableAfterNodeChange(logger, p, labelled, other)))
	unaligned := labelled.DeepCopy()
	unaligned.Labels[kube.LabelMemoryAlignment] = "false"
	require.Equal(t, fwk.Queue, hint(pl.isSchedulableAfterNodeChange(logger, p, labelled, unaligned)))

	// A node whose machine comes from a NodeResourceTopology object.
	objs := cache.NewStore(cache.MetaNamespaceKeyFunc)
	e.nrt = storeNRT{objs}
	bareOld := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nrt-node", Labels: map[string]string{}}}
	bareNew := bareOld.DeepCopy()
	bareNew.Labels[kube.DefaultOptInLabel] = kube.DefaultOptInValue
	require.Equal(t, fwk.QueueSkip, hint(pl.isSchedulableAfterNodeChange(logger, p, bareOld, bareNew)), "no object yet")
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	require.NoError(t, objs.Add(nrtObject(t, "nrt-node", m, time.Now(), false)))
	require.Equal(t, fwk.Queue, hint(pl.isSchedulableAfterNodeChange(logger, p, bareOld, bareNew)))

	bound := numaPod("bound", "SingleNUMANode", 8, 1)
	bound.Spec.NodeName = "gpu-1"
	require.Equal(t, fwk.Queue, hint(pl.isSchedulableAfterPodDelete(logger, p, bound, nil)))
	require.Equal(t, fwk.QueueSkip, hint(pl.isSchedulableAfterPodDelete(logger, p, p, nil)))

	redecided := bound.DeepCopy()
	redecided.Annotations[kube.AnnotationAllocation] = `{"policy":"None","cpuset":"1"}`
	require.Equal(t, fwk.Queue, hint(pl.isSchedulableAfterAssignedPodUpdate(logger, p, bound, redecided)))
	finished := bound.DeepCopy()
	finished.Status.Phase = v1.PodSucceeded
	require.Equal(t, fwk.Queue, hint(pl.isSchedulableAfterAssignedPodUpdate(logger, p, bound, finished)))
	shrunk := bound.DeepCopy()
	shrunk.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("4")
	require.Equal(t, fwk.Queue, hint(pl.isSchedulableAfterAssignedPodUpdate(logger, p, bound, shrunk)))
	relabelled := bound.DeepCopy()
	relabelled.Labels = map[string]string{"x": "y"}
	require.Equal(t, fwk.QueueSkip, hint(pl.isSchedulableAfterAssignedPodUpdate(logger, p, bound, relabelled)))

	fixed := p.DeepCopy()
	fixed.Annotations[kube.AnnotationCPUSetScheduler] = "true"
	require.Equal(t, fwk.Queue, hint(pl.isSchedulableAfterTargetPodUpdate(logger, p, p, fixed)))
	require.Equal(t, fwk.QueueSkip, hint(pl.isSchedulableAfterTargetPodUpdate(logger, p, p, p.DeepCopy())))

	_, err = pl.isSchedulableAfterNodeChange(logger, p, nil, p)
	require.Error(t, err)
}

func TestAnnotationPatch(t *testing.T) {
	b, err := annotationPatch("u-1", map[string]string{kube.AnnotationAllocation: `{"policy":"None"}`})
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, map[string]any{"metadata": map[string]any{"uid": "u-1",
		"annotations": map[string]any{kube.AnnotationAllocation: `{"policy":"None"}`}}}, got)
}
