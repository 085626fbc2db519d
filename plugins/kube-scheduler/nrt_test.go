package numaplace

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"
)

// storeNRT is an nrtStore over a plain store.
type storeNRT struct{ s cache.Store }

func (n storeNRT) get(name string) (*unstructured.Unstructured, bool) {
	o, ok, err := n.s.GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	u, ok := o.(*unstructured.Unstructured)
	return u, ok
}

// nrtObject is the machine's NodeResourceTopology object for the node,
// written at the given time (managed fields); zonesOnly drops numaplace's
// attributes, as NFD's topology-updater writes it.
func nrtObject(t *testing.T, node string, m *topology.Machine, written time.Time, zonesOnly bool) *unstructured.Unstructured {
	t.Helper()
	r, err := kube.NRTFromState(m, nil)
	require.NoError(t, err)
	r.Metadata.Name = node
	if zonesOnly {
		r.Attributes = nil
		for i := range r.Zones {
			r.Zones[i].Attributes = nil
		}
	}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, json.Unmarshal(b, &u.Object))
	u.SetName(node)
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "writer", Operation: metav1.ManagedFieldsOperationUpdate,
		Time: &metav1.Time{Time: written}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:zones":{}}`)}}})
	return u
}

// annotatedAt records on the node's managed fields that its topology
// annotation was written at the time.
func annotatedAt(n *metav1.ObjectMeta, written time.Time) {
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "agent", Operation: metav1.ManagedFieldsOperationUpdate,
		Time: &metav1.Time{Time: written}, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:numaplace.io/topology":{}}}}`)}}}
}

func TestNRTSources(t *testing.T) {
	e := newTestEvents(t)
	objs := cache.NewStore(cache.MetaNamespaceKeyFunc)
	e.nrt = storeNRT{objs}
	h100, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	a100, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	// A node without an annotation and numaplace's own object: exact.
	n := testNode(t, "gpu-1", "dgx-h100", true)
	delete(n.Annotations, AnnotationTopology)
	e.nodeChanged(n)
	_, ok := e.pl.cache.Node("gpu-1")
	require.False(t, ok)
	require.NoError(t, objs.Add(nrtObject(t, "gpu-1", h100, t0, false)))
	e.nrtChanged("gpu-1")
	st, ok := e.pl.cache.Node("gpu-1")
	require.True(t, ok)
	require.Equal(t, h100.Spec(), st.Machine.Spec(), "numaplace's own object describes the machine exactly")
	require.Equal(t, SourceNRT, e.recs["gpu-1"].source)

	// Only the available amounts change: the machine is not read again.
	u := nrtObject(t, "gpu-1", h100, t0.Add(time.Minute), false)
	zones := u.Object["zones"].([]any)
	zones[0].(map[string]any)["resources"].([]any)[0].(map[string]any)["available"] = "7"
	require.NoError(t, objs.Update(u))
	e.nrtChanged("gpu-1")
	st2, _ := e.pl.cache.Node("gpu-1")
	require.Same(t, st.Machine, st2.Machine)

	// Another attribute changes (a pod fingerprint): the same machine.
	u = nrtObject(t, "gpu-1", h100, t0.Add(90*time.Second), false)
	attrs := u.Object["attributes"].([]any)
	u.Object["attributes"] = append(attrs, map[string]any{"name": "nodeTopologyPodsFingerprint", "value": "pfp0v001abc"})
	require.NoError(t, objs.Update(u))
	e.nrtChanged("gpu-1")
	st2, _ = e.pl.cache.Node("gpu-1")
	require.Same(t, st.Machine, st2.Machine)

	// An NFD object: the machine rebuilt from the zones.
	require.NoError(t, objs.Update(nrtObject(t, "gpu-1", a100, t0.Add(2*time.Minute), true)))
	e.nrtChanged("gpu-1")
	st, _ = e.pl.cache.Node("gpu-1")
	require.Equal(t, SourceNRTZones, e.recs["gpu-1"].source)
	require.Equal(t, a100.NumCPUs(), st.Machine.NumCPUs())
	require.Equal(t, a100.NumGPUs(), st.Machine.NumGPUs())
	require.Equal(t, a100.NumNodes(), st.Machine.NumNodes())

	// An annotation written later wins; an object written later again wins.
	withAnn := testNode(t, "gpu-1", "dgx-h100", true)
	annotatedAt(&withAnn.ObjectMeta, t0.Add(3*time.Minute))
	e.nodeChanged(withAnn)
	require.Equal(t, SourceTopology, e.recs["gpu-1"].source)
	require.NoError(t, objs.Update(nrtObject(t, "gpu-1", a100, t0.Add(4*time.Minute), true)))
	e.nrtChanged("gpu-1")
	require.Equal(t, SourceNRTZones, e.recs["gpu-1"].source)
	// On a tie, or when the times are unknown, the annotation.
	annotatedAt(&withAnn.ObjectMeta, t0.Add(4*time.Minute))
	e.nodeChanged(withAnn)
	require.Equal(t, SourceTopology, e.recs["gpu-1"].source)

	// A malformed object that is the node's only source is reported.
	e.nodeChanged(n)
	bad := nrtObject(t, "gpu-1", h100, t0.Add(5*time.Minute), false)
	bad.Object["zones"] = []any{map[string]any{"name": "node-0", "type": "Node", "resources": []any{map[string]any{"name": "cpu", "capacity": "x"}}}}
	require.NoError(t, objs.Update(bad))
	e.nrtChanged("gpu-1")
	_, ok = e.pl.cache.Node("gpu-1")
	require.False(t, ok)
	require.Contains(t, e.malformed("gpu-1"), "numaplace: NodeResourceTopology object gpu-1 is malformed: ")

	// Deleted: the node has no source left.
	require.NoError(t, objs.Delete(bad))
	e.nrtChanged("gpu-1")
	_, ok = e.recs["gpu-1"]
	require.False(t, ok)
}
