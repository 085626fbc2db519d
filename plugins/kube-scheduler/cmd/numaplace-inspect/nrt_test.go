package main

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"

	"github.com/numaplace/numaplace/internal/controlplane"
	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// nrtObject is numaplace's NodeResourceTopology object of the machine for
// the node.
func nrtObject(t *testing.T, node string, m *topology.Machine) *unstructured.Unstructured {
	t.Helper()
	r, err := kube.NRTFromState(m, nil)
	require.NoError(t, err)
	r.Metadata.Name = node
	b, err := json.Marshal(r)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, json.Unmarshal(b, &u.Object))
	return u
}

// populateNRT adds a node whose machine is only in its NodeResourceTopology
// object (no annotation), with a 4-GPU pod bound on NUMA node 1.
func populateNRT(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	_, err := c.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nrt-only",
		Labels: map[string]string{kube.DefaultOptInLabel: kube.DefaultOptInValue}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CoreV1().Pods("default").Create(ctx, testPod("trainer", "nrt-only", "SingleNUMANode", 8, 4,
		`{"policy":"SingleNUMANode","cpuset":"56-63","gpus":[{"id":4},{"id":5},{"id":6},{"id":7}]}`), metav1.CreateOptions{})
	require.NoError(t, err)
}

func checkNRTPicture(t *testing.T, out string) {
	t.Helper()
	require.Contains(t, out, "node nrt-only: machine from NodeResourceTopology object nrt-only, takes NUMA-aware pods")
	require.Contains(t, out, "a = default/trainer: SingleNUMANode, 8 CPUs, 4 GPUs, NUMA nodes 1")
	require.Contains(t, out, "[a] GPU 4")
	require.Contains(t, out, "[.] GPU 0")
}

// TestInspectNRTOnlyNode: a node whose machine comes from its
// NodeResourceTopology object alone is inspected as the scheduler sees it
// (it said "numaplace places no NUMA-aware pod there" before).
func TestInspectNRTOnlyNode(t *testing.T) {
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	c := fake.NewClientset()
	populate(t, c)
	populateNRT(t, c)
	d := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{numaplace.NRTResource: "NodeResourceTopologyList"}, nrtObject(t, "nrt-only", m))
	client := func(string, string) (clients, error) { return clients{kube: c, dynamic: d}, nil }
	code, out, errOut := runWith(t, client, "nrt-only")
	require.Equal(t, 0, code, errOut)
	checkNRTPicture(t, out)
	// The annotated node reads as before; one without either still says so.
	code, out, errOut = runWith(t, client, "gpu-1")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "machine from topology annotation numaplace.io/topology")
	code, _, errOut = runWith(t, client, "plain")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "numaplace places no NUMA-aware pod there")
}

// TestInspectNRTOnlyNodeOnARealControlPlane: the same with the repository's
// NodeResourceTopology CRD installed on a real kube-apiserver, through a
// kubeconfig.
func TestInspectNRTOnlyNodeOnARealControlPlane(t *testing.T) {
	cfg := controlplane.Start(t)
	kubeconfig := controlplane.Kubeconfig(t, cfg)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	// Without the CRD: annotations only, and a clear answer.
	populate(t, c)
	populateNRT(t, c)
	code, _, errOut := runWith(t, newClient, "--kubeconfig", kubeconfig, "nrt-only")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "numaplace places no NUMA-aware pod there")

	data, err := os.ReadFile("../../../../deploy/crd-noderesourcetopologies.yaml")
	require.NoError(t, err)
	var crd apiextensionsv1.CustomResourceDefinition
	require.NoError(t, yaml.UnmarshalStrict(data, &crd))
	ext, err := apiextensions.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = ext.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{})
	require.NoError(t, err)
	d, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := d.Resource(numaplace.NRTResource).Create(ctx, nrtObject(t, "nrt-only", m), metav1.CreateOptions{})
		return err == nil, nil
	}), "creating the NodeResourceTopology object")
	code, out, errOut := runWith(t, newClient, "--kubeconfig", kubeconfig, "--pod", "default/fits", "nrt-only")
	require.Equal(t, 0, code, errOut)
	checkNRTPicture(t, out)
	require.Contains(t, out, "pod default/fits: node nrt-only takes it now")
	t.Logf("numaplace-inspect printed:\n%s", out)
}
