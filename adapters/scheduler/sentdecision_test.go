package scheduler_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/topology"
)

// sentWorld is a cache with two nodes and the pods a test reserved on them,
// with the annotations PreBind returned for each.
type sentWorld struct {
	c    *scheduler.Cache
	pods []*kube.Pod
	node map[string]string
	ann  map[string]map[string]string
}

// newSentWorld reserves a mix of pods (SingleNUMANode, BestEffort, None,
// GPU pods without a spec, plain pods) on two dgx-a100 nodes and asks
// PreBind for each one's annotations.
func newSentWorld(t *testing.T) *sentWorld {
	t.Helper()
	w := &sentWorld{
		c: newCache(t, scheduler.Config{},
			scheduler.Node{Name: "n0", Labels: optIn, Machine: preset(t, "dgx-a100")},
			scheduler.Node{Name: "n1", Labels: optIn, Machine: preset(t, "dgx-a100")}),
		node: map[string]string{}, ann: map[string]map[string]string{},
	}
	for i := range 12 {
		var p *kube.Pod
		name := fmt.Sprintf("p%02d", i)
		switch i % 5 {
		case 0:
			p = numaPod(name, 4+i, i%2, "SingleNUMANode")
		case 1:
			p = numaPod(name, 8, 2, "BestEffort")
		case 2:
			p = numaPod(name, 3, 1, "None")
		case 3:
			p = plainPod(name, "2", 1)
		default:
			p = plainPod(name, "1500m", 0)
		}
		node := fmt.Sprintf("n%d", i%2)
		require.NoError(t, w.c.Reserve(p, node), name)
		ann, err := w.c.PreBind(p)
		require.NoError(t, err, name)
		w.pods = append(w.pods, p)
		w.node[p.Key()], w.ann[p.Key()] = node, ann
	}
	return w
}

// copyOf is another Machine object equal to the preset.
func copyOf(t *testing.T, name string) *topology.Machine {
	t.Helper()
	js, err := json.Marshal(preset(t, name))
	require.NoError(t, err)
	m, err := topology.ParseJSON(js)
	require.NoError(t, err)
	return m
}

// view is everything the cache answers about the world's pods and nodes.
func (w *sentWorld) view(t *testing.T) string {
	t.Helper()
	out := ""
	for _, p := range w.pods {
		st, ok := w.c.Pod(p.Key())
		out += fmt.Sprintf("%s %v %+v\n", p.Key(), ok, st)
		if st.Allocation != nil {
			out += fmt.Sprintf("  cpus %s gpus %v\n", st.Allocation.CPUs, st.Allocation.GPUs)
		}
	}
	for _, n := range []string{"n0", "n1"} {
		free, ok := w.c.Free(n)
		misfits, over, _ := w.c.Misfits(n)
		out += fmt.Sprintf("%s %v free %+v misfits %+v overcommit %v\n", n, ok, free, misfits, over)
	}
	// What the next pods are given.
	for i, p := range []*kube.Pod{numaPod("next-a", 6, 1, "SingleNUMANode"), numaPod("next-b", 10, 2, "BestEffort")} {
		node := fmt.Sprintf("n%d", i)
		s, err := w.c.Score(p, node)
		out += fmt.Sprintf("score %s %s %d %v\n", p.Key(), node, s, err)
	}
	return out
}

// bindAll gives the cache the world's pods bound with the annotations
// annOf returns, one by one (batch false) or each node's at once.
func (w *sentWorld) bindAll(t *testing.T, batch bool, annOf func(key string, ann map[string]string) map[string]string) {
	t.Helper()
	byNode := map[string][]*kube.Pod{}
	for _, p := range w.pods {
		q := bound(p, w.node[p.Key()], annOf(p.Key(), w.ann[p.Key()]))
		if !batch {
			errs, err := w.c.SyncPods(q.NodeName, []*kube.Pod{q}, nil)
			require.NoError(t, err)
			require.NoError(t, errs[0])
			continue
		}
		byNode[q.NodeName] = append(byNode[q.NodeName], q)
	}
	for node, ps := range byNode {
		errs, err := w.c.SyncPods(node, ps, nil)
		require.NoError(t, err)
		for _, e := range errs {
			require.NoError(t, e)
		}
	}
}

// reformatted is the decision annotation written differently (a space
// before it), which reads as the same decision: the cache must parse it,
// the general path.
func reformatted(_ string, ann map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range ann {
		if k == kube.AnnotationAllocation {
			v = " " + v
		}
		out[k] = v
	}
	return out
}

func exact(_ string, ann map[string]string) map[string]string { return ann }

// TestSentDecisionFastPathAgrees: the binding of a reservation whose pod
// carries exactly the decision PreBind returned (recorded without parsing
// it) leaves the cache answering as when the same decision comes written
// differently (parsed and compared, the general path), alone or in a batch
// of the node's pods, and after a change of the node's machine that claims
// the bound decisions again (which reads the ones left unparsed).
func TestSentDecisionFastPathAgrees(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			fast, slow := newSentWorld(t), newSentWorld(t)
			require.Equal(t, slow.ann, fast.ann, "the two worlds are alike")
			_, err := kube.ParseDecision(" " + fast.ann["default/p00"][kube.AnnotationAllocation])
			require.NoError(t, err, "a space before the decision reads as the same decision")
			fast.bindAll(t, batch, exact)
			slow.bindAll(t, false, reformatted)
			require.Equal(t, slow.view(t), fast.view(t))
			// A restarted cache reads the same bound pods (parsing every
			// decision) into the same state.
			restarted := &sentWorld{c: newCache(t, scheduler.Config{},
				scheduler.Node{Name: "n0", Labels: optIn, Machine: preset(t, "dgx-a100")},
				scheduler.Node{Name: "n1", Labels: optIn, Machine: preset(t, "dgx-a100")}),
				pods: fast.pods, node: fast.node, ann: fast.ann}
			restarted.bindAll(t, true, exact)
			require.Equal(t, restarted.view(t), fast.view(t))
			// The same bound pods again (informer resyncs): nothing changes.
			fast.bindAll(t, batch, exact)
			slow.bindAll(t, false, reformatted)
			require.Equal(t, slow.view(t), fast.view(t))
			require.Equal(t, restarted.view(t), fast.view(t))
			for _, p := range fast.pods {
				st, ok := fast.c.Pod(p.Key())
				require.True(t, ok)
				require.True(t, st.Bound, p.Key())
			}
			// A new machine (the same preset, another object): every
			// bound decision is claimed again.
			for _, w := range []*sentWorld{fast, slow} {
				require.NoError(t, w.c.UpdateNode(scheduler.Node{Name: "n0", Labels: optIn, Machine: copyOf(t, "dgx-a100")}))
			}
			require.Equal(t, slow.view(t), fast.view(t))
			// A smaller machine: some decisions are lost, alike.
			for _, w := range []*sentWorld{fast, slow} {
				require.NoError(t, w.c.UpdateNode(scheduler.Node{Name: "n1", Labels: optIn, Machine: copyOf(t, "xeon-2s-snc2-8gpu")}))
			}
			require.Equal(t, slow.view(t), fast.view(t))
		})
	}
}

// TestSentDecisionOtherAnnotation: a pod bound with a decision other than
// the one PreBind returned for its reservation is recorded by what its
// annotation says (the general path), not as the reservation's binding;
// a pod whose annotation cannot be read is recorded without a decision, as
// a misfit.
func TestSentDecisionOtherAnnotation(t *testing.T) {
	w := newSentWorld(t)
	// p00 and p05 are SingleNUMANode pods on n0; p00 is bound with
	// p05's decision, once p05 has given its reservation up.
	p00, p05 := w.pods[0], w.pods[5]
	require.Equal(t, "n0", w.node[p00.Key()])
	require.Equal(t, "n1", w.node[p05.Key()])
	p10 := w.pods[10]
	require.Equal(t, "n0", w.node[p10.Key()])
	other := w.ann[p10.Key()][kube.AnnotationAllocation]
	mine := w.ann[p00.Key()][kube.AnnotationAllocation]
	require.NotEqual(t, mine, other)
	require.NoError(t, w.c.Unreserve(p10))
	errs, err := w.c.SyncPods("n0", []*kube.Pod{bound(p00, "n0", map[string]string{kube.AnnotationAllocation: other})}, nil)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	st, ok := w.c.Pod(p00.Key())
	require.True(t, ok)
	require.True(t, st.Bound)
	d, err := kube.ParseDecision(other)
	require.NoError(t, err)
	require.Equal(t, d.CPUSet, st.Allocation.CPUs.String(), "the annotation's decision, not the reservation's")
	want := make([]int, len(d.GPUs))
	for i, g := range d.GPUs {
		want[i] = g.ID
	}
	if len(want) == 0 {
		want = nil
	}
	require.Equal(t, want, st.Allocation.GPUs)

	// The same pod bound with a decision that cannot be read.
	p02 := w.pods[2]
	require.Equal(t, "n0", w.node[p02.Key()])
	errs, err = w.c.SyncPods("n0", []*kube.Pod{bound(p02, "n0", map[string]string{kube.AnnotationAllocation: w.ann[p02.Key()][kube.AnnotationAllocation] + "x"})}, nil)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	st, ok = w.c.Pod(p02.Key())
	require.True(t, ok)
	require.True(t, st.Bound)
	require.Equal(t, scheduler.MisfitInvalid, st.Misfit)
	require.Contains(t, st.MisfitReason, "its decision cannot be read")
}

// TestSentDecisionAfterRebuild: a reservation placed again by a rebuild of
// its node (a new machine) is not taken for bound by the decision sent
// before: the pod bound with that older decision is recorded by parsing it.
func TestSentDecisionAfterRebuild(t *testing.T) {
	fast, slow := newSentWorld(t), newSentWorld(t)
	for _, w := range []*sentWorld{fast, slow} {
		require.NoError(t, w.c.UpdateNode(scheduler.Node{Name: "n0", Labels: optIn, Machine: copyOf(t, "dgx-a100")}))
		require.NoError(t, w.c.UpdateNode(scheduler.Node{Name: "n1", Labels: optIn, Machine: copyOf(t, "dgx-h100")}))
	}
	fast.bindAll(t, false, exact)
	slow.bindAll(t, false, reformatted)
	require.Equal(t, slow.view(t), fast.view(t))
}
