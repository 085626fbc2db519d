package numaplace_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// installNRTCRD installs the NodeResourceTopology CRD (v1alpha2,
// cluster-scoped; the schema keeps every field) and waits until it is
// served.
func (c *cluster) installNRTCRD() dynamic.Interface {
	t := c.t
	t.Helper()
	ext, err := apiextensions.NewForConfig(c.config)
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{
		// k8s.io groups need an approval annotation; the upstream CRD has this one.
		ObjectMeta: metav1.ObjectMeta{Name: "noderesourcetopologies.topology.node.k8s.io",
			Annotations: map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/1870"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "topology.node.k8s.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "noderesourcetopologies", Singular: "noderesourcetopology",
				Kind: "NodeResourceTopology", ListKind: "NodeResourceTopologyList", ShortNames: []string{"node-res-topo"}},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha2", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{})
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(c.config)
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(numaplace.NRTResource).List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "the NodeResourceTopology CRD is not served")
	return dyn
}

// publishNRT creates or replaces the node's NodeResourceTopology object for
// the machine; zonesOnly leaves numaplace's attributes out, as NFD's
// topology-updater writes it.
func (c *cluster) publishNRT(dyn dynamic.Interface, node string, m *topology.Machine, zonesOnly bool) {
	t := c.t
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
	ctx := context.Background()
	old, err := dyn.Resource(numaplace.NRTResource).Get(ctx, node, metav1.GetOptions{})
	if err == nil {
		u.SetResourceVersion(old.GetResourceVersion())
		_, err = dyn.Resource(numaplace.NRTResource).Update(ctx, u, metav1.UpdateOptions{})
	} else {
		_, err = dyn.Resource(numaplace.NRTResource).Create(ctx, u, metav1.CreateOptions{})
	}
	require.NoError(t, err)
}

// waitSource waits until the plugin reads the node's machine from the
// source (the numaplace_nodes_by_source gauge counts it) and returns the
// machine.
func waitMachine(t *testing.T, r *running, node string, want func(*topology.Machine) bool) *topology.Machine {
	t.Helper()
	var got *topology.Machine
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		st, ok := r.plugin.Cache().Node(node)
		if !ok {
			return false, nil
		}
		got = st.Machine
		return want(st.Machine), nil
	})
	require.NoError(t, err, "node %s: the plugin's machine is %v", node, got)
	return got
}

// TestControlPlaneNodeResourceTopology: with the CRD installed, the plugin
// reads nodes' machines from NodeResourceTopology objects beside the
// annotation: numaplace's own (exact), NFD's without numaplace attributes
// (rebuilt from the zones); a pod waiting for a node's topology binds once
// the object is published; with an annotation and an object, the newer
// wins, and the metrics say which.
func TestControlPlaneNodeResourceTopology(t *testing.T) {
	c := newControlPlaneCluster(t)
	dyn := c.installNRTCRD()
	h100, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	a100, err := topology.Preset("dgx-a100")
	require.NoError(t, err)
	bare := func(name, preset string) *v1.Node {
		n := node(t, name, preset, true, false)
		delete(n.Annotations, numaplace.AnnotationTopology)
		return n
	}
	c.create(bare("exact", "dgx-h100"))
	r := c.start(nil)

	c.create(pod("waits", "SingleNUMANode", 24, 4))
	msg := c.waitUnschedulable("waits")
	require.Contains(t, msg, numaplace.ReasonTextNoTopology)
	start := time.Now()
	c.publishNRT(dyn, "exact", h100, false)
	got := c.waitBoundWithin("waits", start)
	require.Equal(t, "exact", got.Spec.NodeName)
	m := waitMachine(t, r, "exact", func(m *topology.Machine) bool { return m != nil })
	require.Equal(t, h100.Spec(), m.Spec(), "numaplace's own object is exact")
	waitGauge(t, "numaplace_nodes_by_source", map[string]string{"source": numaplace.SourceNRT}, 1)

	// NFD's object: the machine rebuilt from its zones.
	c.create(bare("nfd", "dgx-a100"))
	c.publishNRT(dyn, "nfd", a100, true)
	m = waitMachine(t, r, "nfd", func(m *topology.Machine) bool { return m != nil })
	require.Equal(t, a100.NumCPUs(), m.NumCPUs())
	require.Equal(t, a100.NumGPUs(), m.NumGPUs())
	require.Equal(t, a100.NumNodes(), m.NumNodes())
	waitGauge(t, "numaplace_nodes_by_source", map[string]string{"source": numaplace.SourceNRTZones}, 1)
	c.create(pod("on-zones", "Restricted", 16, 8))
	got = c.waitBound("on-zones")
	require.Equal(t, "nfd", got.Spec.NodeName)

	// A node whose machine comes from its object gets the opt-in label
	// later: the pod waiting for it binds.
	unlabelled := bare("unlabelled", "dgx-h100")
	delete(unlabelled.Labels, kube.DefaultOptInLabel)
	c.create(unlabelled)
	c.publishNRT(dyn, "unlabelled", h100, false)
	waitMachine(t, r, "unlabelled", func(m *topology.Machine) bool { return m != nil })
	c.create(pod("needs-label", "Restricted", 16, 8))
	msg = c.waitUnschedulable("needs-label")
	require.Contains(t, msg, "node(s) without the label ack.node.gpu.schedule=topology", msg)
	start = time.Now()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{kube.DefaultOptInLabel: kube.DefaultOptInValue}}})
	require.NoError(t, err)
	_, err = c.client.CoreV1().Nodes().Patch(context.Background(), "unlabelled", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	got = c.waitBoundWithin("needs-label", start)
	require.Equal(t, "unlabelled", got.Spec.NodeName)

	// Both: the newer of the annotation and the object is used (the API
	// server records times to the second).
	c.create(node(t, "both", "dgx-a100", true, false))
	waitMachine(t, r, "both", func(m *topology.Machine) bool { return m.NumCPUs() == a100.NumCPUs() })
	time.Sleep(1100 * time.Millisecond)
	c.publishNRT(dyn, "both", h100, false)
	waitMachine(t, r, "both", func(m *topology.Machine) bool { return m.NumCPUs() == h100.NumCPUs() })
	waitGauge(t, "numaplace_nodes_by_source", map[string]string{"source": numaplace.SourceNRT}, 3)
	time.Sleep(1100 * time.Millisecond)
	js, err := json.Marshal(a100)
	require.NoError(t, err)
	c.setNodeAnnotation("both", numaplace.AnnotationTopology, "")
	c.setNodeAnnotation("both", numaplace.AnnotationTopology, string(js))
	waitMachine(t, r, "both", func(m *topology.Machine) bool { return m.NumCPUs() == a100.NumCPUs() })
	waitGauge(t, "numaplace_nodes_by_source", map[string]string{"source": numaplace.SourceTopology}, 1)
	waitGauge(t, "numaplace_nodes_by_source", map[string]string{"source": numaplace.SourceNRT}, 2)
	c.requireNoDoubleHandout()
}
