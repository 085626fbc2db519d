package numaplace

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// TestCycleMemoIsPerStateAndPod: Filter and Score find the pod PreFilter
// read through the plugin's memo of the last cycle only for that cycle's
// CycleState and pod; another cycle's state (an earlier pod's, a clone a
// preemption dry-run uses) is read from the state itself, so each call
// judges its own pod.
func TestCycleMemoIsPerStateAndPod(t *testing.T) {
	e := newTestEvents(t)
	pl := e.pl
	ctx := context.Background()
	n := testNode(t, "gpu-1", "dgx-h100", true)
	e.nodeChanged(n)
	small := numaPod("small", "SingleNUMANode", 4, 1)
	huge := numaPod("huge", "SingleNUMANode", 4, 8) // 8 GPUs on one NUMA node: never
	sSmall := preFilter(t, pl, small)
	require.True(t, pl.Filter(ctx, sSmall, small, nodeInfo(n)).IsSuccess())
	sHuge := preFilter(t, pl, huge) // the memo is huge's cycle now
	require.False(t, pl.Filter(ctx, sHuge, huge, nodeInfo(n)).IsSuccess())
	require.True(t, pl.Filter(ctx, sSmall, small, nodeInfo(n)).IsSuccess(), "small's own state, not the last cycle's")
	clone := sSmall.Clone()
	require.True(t, pl.Filter(ctx, clone, small, nodeInfo(n)).IsSuccess(), "a clone of small's state")
	score, st := pl.Score(ctx, sSmall, small, nodeInfo(n))
	require.True(t, st.IsSuccess())
	require.Positive(t, score)
	// The same pod object under another cycle's state reads that state
	// (a new cycle for the pod writes its own).
	require.False(t, pl.Filter(ctx, sHuge, small, nodeInfo(n)).IsSuccess(), "huge's state says huge")
}

// clientHandle is a framework handle offering only a clientset (all the
// marker uses).
type clientHandle struct {
	fwk.Handle
	cs kubernetes.Interface
}

func (h clientHandle) ClientSet() kubernetes.Interface { return h.cs }

// TestMarkerSkipsOnlyWhatItSaw: the marker skips checking a node's
// condition again only while the node is at the resourceVersion it found
// the same mark at; a node changed since (its condition removed, say) or a
// different mark is checked and written as before.
func TestMarkerSkipsOnlyWhatItSaw(t *testing.T) {
	client := fake.NewClientset()
	var patches atomic.Int32
	client.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		patches.Add(1)
		return true, nil, nil
	})
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	put := func(rv string, conds ...v1.NodeCondition) {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv}, Status: v1.NodeStatus{Conditions: conds}}
		require.NoError(t, nodes.Update(n))
	}
	put("5")
	pl := &Plugin{handle: clientHandle{cs: client}, logger: klog.Background()}
	m := newMarker(context.Background(), pl, corelisters.NewNodeLister(nodes))
	t.Cleanup(m.stop)
	seenAt := func(rv string) func() bool {
		return func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.seen["n"].rv == rv
		}
	}
	m.update("n", "5", nil) // never marked, nothing to say: seen at 5
	require.Eventually(t, seenAt("5"), 5*time.Second, time.Millisecond)
	mk := &mark{reason: MarkMisfit, message: "numaplace: p (Lost): GPU 7"}
	m.update("n", "5", mk) // a new mark: written
	require.Eventually(t, func() bool { return patches.Load() == 1 }, 5*time.Second, time.Millisecond)
	cond := v1.NodeCondition{Type: ConditionMisfit, Status: v1.ConditionTrue, Reason: mk.reason, Message: mk.message}
	put("6", cond) // the informer's copy with the condition
	m.update("n", "6", &mark{reason: mk.reason, message: mk.message})
	require.Eventually(t, seenAt("6"), 5*time.Second, time.Millisecond)
	require.EqualValues(t, 1, patches.Load())

	// The same mark at the same version: not checked again. (The store's
	// copy without the condition at the same version cannot happen; it
	// shows that the check was skipped.)
	put("6")
	m.update("n", "6", &mark{reason: mk.reason, message: mk.message})
	time.Sleep(200 * time.Millisecond)
	require.EqualValues(t, 1, patches.Load(), "skipped")
	// The node changed (its condition removed): checked and written.
	put("7")
	m.update("n", "7", &mark{reason: mk.reason, message: mk.message})
	require.Eventually(t, func() bool { return patches.Load() == 2 }, 5*time.Second, time.Millisecond)
	// Another mark at a version seen: written.
	put("8", cond)
	m.update("n", "8", &mark{reason: mk.reason, message: mk.message})
	require.Eventually(t, seenAt("8"), 5*time.Second, time.Millisecond)
	m.update("n", "8", nil)
	require.Eventually(t, func() bool { return patches.Load() == 3 }, 5*time.Second, time.Millisecond)
}
