package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"

	"github.com/numaplace/numaplace/internal/controlplane"
	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

func testPod(name, node, policy string, cpus, gpus int, decision string) *v1.Pod {
	res := v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(cpus), resource.DecimalSI)}
	if gpus > 0 {
		res[kube.ResourceAliyunGPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	ann := map[string]string{}
	if policy != "" {
		ann[kube.AnnotationSpecAlibaba] = fmt.Sprintf(`{"numaTopologyPolicy":%q}`, policy)
		ann[kube.AnnotationCPUSetScheduler] = "required"
	}
	if decision != "" {
		ann[kube.AnnotationAllocation] = decision
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: ann},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "registry.example/app:1",
			Resources: v1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()}}}}}
}

// populate creates a DGX H100 node holding a 4-GPU NUMA pod on NUMA node 0
// and a plain pod, a node without topology, and two pending pods.
func populate(t *testing.T, c kubernetes.Interface) *topology.Machine {
	t.Helper()
	ctx := context.Background()
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	js, err := json.Marshal(m)
	require.NoError(t, err)
	for _, n := range []*v1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{kube.DefaultOptInLabel: kube.DefaultOptInValue},
			Annotations: map[string]string{numaplace.AnnotationTopology: string(js)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
	} {
		_, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, p := range []*v1.Pod{
		testPod("textgen", "gpu-1", "SingleNUMANode", 12, 4, `{"policy":"SingleNUMANode","cpuset":"0-11","gpus":[{"id":0},{"id":1},{"id":2},{"id":3}]}`),
		testPod("web", "gpu-1", "", 2, 0, ""),
		testPod("too-wide", "", "SingleNUMANode", 8, 5, ""),
		testPod("fits", "", "SingleNUMANode", 8, 4, ""),
	} {
		_, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return m
}

func runWith(t *testing.T, client func(string, string) (clients, error), args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut, client)
	return code, out.String(), errOut.String()
}

func checkPicture(t *testing.T, m *topology.Machine, out string) {
	t.Helper()
	require.Contains(t, out, "node gpu-1: machine from topology annotation numaplace.io/topology, takes NUMA-aware pods")
	require.Contains(t, out, "a = default/textgen: SingleNUMANode, 12 CPUs, 4 GPUs, NUMA nodes 0")
	require.Contains(t, out, "[a] GPU 0")
	require.Contains(t, out, "[.] GPU 4")
	// The free amounts per NUMA node, counted from the machine here.
	reserved := m.ReservedCPUs()
	for i := range m.NumNodes() {
		cpus := m.NodeCPUs(i).Difference(reserved).Size()
		gpus := 0
		for _, g := range m.GPUs() {
			if int(g.NUMANode) == int(m.NodeID(i)) {
				gpus++
			}
		}
		if i == 0 {
			cpus, gpus = cpus-12, gpus-4
		}
		require.Contains(t, out, fmt.Sprintf("  NUMA node %d: %d CPUs, %d GPUs, ", m.NodeID(i), cpus, gpus))
	}
	require.Contains(t, out, "2 CPUs requested by the pods without a NUMA spec")
}

func TestInspectFake(t *testing.T) {
	c := fake.NewClientset()
	m := populate(t, c)
	client := func(string, string) (clients, error) { return clients{kube: c}, nil }

	code, out, errOut := runWith(t, client, "gpu-1")
	require.Equal(t, 0, code, errOut)
	checkPicture(t, m, out)

	code, out, _ = runWith(t, client, "--pod", "default/too-wide", "gpu-1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "pod default/too-wide: node gpu-1 refuses it whatever is released (the machine cannot hold it): "+
		"numaplace: no NUMA node can hold 5 GPUs on this machine")
	code, out, _ = runWith(t, client, "--pod", "fits", "gpu-1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "pod default/fits: node gpu-1 takes it now")
	code, out, _ = runWith(t, client, "--pod", "textgen", "gpu-1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "pod default/textgen is bound to node gpu-1")

	code, _, errOut = runWith(t, client, "plain")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "has no numaplace topology annotation")
	code, _, errOut = runWith(t, client, "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "reading node nope")
	code, _, _ = runWith(t, client)
	require.Equal(t, 2, code)
	code, _, errOut = runWith(t, client, "--pod", "a/b/c", "gpu-1")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "is not NAMESPACE/NAME")
	code, _, _ = runWith(t, client, "--nope", "gpu-1")
	require.Equal(t, 2, code)
}

// TestInspectOnARealControlPlane runs the command with a real kubeconfig
// against a real kube-apiserver and etcd (skipped, saying why, when
// ../../.ci-prepare has not built them).
func TestInspectOnARealControlPlane(t *testing.T) {
	cfg := controlplane.Start(t)
	kubeconfig := controlplane.Kubeconfig(t, cfg)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	m := populate(t, c)
	code, out, errOut := runWith(t, newClient, "--kubeconfig", kubeconfig, "--pod", "default/too-wide", "gpu-1")
	require.Equal(t, 0, code, errOut)
	checkPicture(t, m, out)
	require.Contains(t, out, "numaplace: no NUMA node can hold 5 GPUs on this machine")
	t.Logf("numaplace-inspect printed:\n%s", out)
}
