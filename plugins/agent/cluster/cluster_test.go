package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/internal/controlplane"
	"github.com/numaplace/numaplace/plugins/agent/cluster"
	"github.com/numaplace/numaplace/plugins/agent/nri"
	"github.com/numaplace/numaplace/plugins/agent/reporter"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// objects reads the YAML documents of a deploy/ file.
func objects(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	return controlplane.ReadObjects(t, controlplane.RepoPath(t, "deploy", name))
}

// installCRD applies the NodeResourceTopology CRD and waits until it is
// served.
func installCRD(t *testing.T, cfg *rest.Config) {
	t.Helper()
	ctx := context.Background()
	a := controlplane.NewApplier(t, cfg)
	for _, obj := range objects(t, "crd-noderesourcetopologies.yaml") {
		require.NoError(t, a.Apply(ctx, obj, false))
	}
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := dyn.Resource(cluster.NRTResource).List(ctx, metav1.ListOptions{})
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the NodeResourceTopology CRD is not served")
}

// The manifests of deploy/ validate against a real API server: each
// object passes a server-side dry-run apply, then is applied.
func TestManifestsOnARealAPIServer(t *testing.T) {
	cp := controlplane.StartControlPlane(t)
	ctx := context.Background()
	installCRD(t, cp.Config)
	a := controlplane.NewApplier(t, cp.Config)
	files := []string{"crd-noderesourcetopologies.yaml", "agent.yaml", "scheduler.yaml"}
	count := 0
	for _, f := range files {
		objs := objects(t, f)
		require.NotEmpty(t, objs, f)
		// Namespaces first, for real: the objects in them cannot be tried
		// without.
		for _, obj := range objs {
			if obj.GetKind() == "Namespace" {
				require.NoError(t, a.Apply(ctx, obj, false), "%s: %s", f, obj.GetName())
			}
		}
		for _, obj := range objs {
			require.NoError(t, a.Apply(ctx, obj, true), "%s: server-side dry-run apply of %s %s", f, obj.GetKind(), obj.GetName())
		}
		for _, obj := range objs {
			require.NoError(t, a.Apply(ctx, obj, false), "%s: apply of %s %s", f, obj.GetKind(), obj.GetName())
			count++
		}
	}
	t.Logf("%d objects of %v validated and applied", count, files)

	// A wrong object is refused: the test would see a broken manifest.
	bad := objects(t, "agent.yaml")[len(objects(t, "agent.yaml"))-1].DeepCopy()
	require.Equal(t, "DaemonSet", bad.GetKind())
	require.NoError(t, unstructured.SetNestedField(bad.Object, "sometimes", "spec", "updateStrategy", "type"))
	require.Error(t, a.Apply(ctx, bad, true))

	// The scheduler's profile is plugins/kube-scheduler's, in-cluster.
	var cm *unstructured.Unstructured
	for _, obj := range objects(t, "scheduler.yaml") {
		if obj.GetKind() == "ConfigMap" {
			cm = obj
		}
	}
	require.NotNil(t, cm)
	embedded, _, _ := unstructured.NestedString(cm.Object, "data", "scheduler-config.yaml")
	var got, want map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(embedded), &got))
	data, err := os.ReadFile(controlplane.RepoPath(t, "plugins", "kube-scheduler", "deploy", "scheduler-config.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &want))
	require.Equal(t, "", got["clientConnection"].(map[string]any)["kubeconfig"])
	want["clientConnection"].(map[string]any)["kubeconfig"] = ""
	require.Equal(t, want, got, "deploy/scheduler.yaml's profile differs from plugins/kube-scheduler/deploy/scheduler-config.yaml")
}

// upstreamNRT is the NodeResourceTopology v1alpha2 object as the upstream
// API types (k8stopologyawareschedwg/noderesourcetopology-api) read it:
// the same JSON names, quantities as resource.Quantity.
type upstreamNRT struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	TopologyPolicies  []string `json:"topologyPolicies"`
	Zones             []struct {
		Name   string `json:"name"`
		Type   string `json:"type"`
		Parent string `json:"parent,omitempty"`
		Costs  []struct {
			Name  string `json:"name"`
			Value int64  `json:"value"`
		} `json:"costs,omitempty"`
		Attributes []upstreamAttribute `json:"attributes,omitempty"`
		Resources  []struct {
			Name        string            `json:"name"`
			Capacity    resource.Quantity `json:"capacity"`
			Allocatable resource.Quantity `json:"allocatable"`
			Available   resource.Quantity `json:"available"`
		} `json:"resources,omitempty"`
	} `json:"zones"`
	Attributes []upstreamAttribute `json:"attributes,omitempty"`
}

type upstreamAttribute struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func attribute(attrs []upstreamAttribute, name string) string {
	for _, a := range attrs {
		if a.Name == name {
			return a.Value
		}
	}
	return ""
}

// reporterMachine has two NUMA nodes of four CPUs, 2 GiB and two GPUs each.
const reporterMachine = `{"name":"rep","numaNodes":[{"id":0,"socket":0,"cpus":"0-3","memoryMiB":2048},
  {"id":1,"socket":1,"cpus":"4-7","memoryMiB":2048}],"distances":[[10,21],[21,10]],"reservedCPUs":"0",
  "gpus":[{"id":0,"numaNode":0,"uuid":"GPU-r0"},{"id":1,"numaNode":0,"uuid":"GPU-r1"},{"id":2,"numaNode":1},{"id":3,"numaNode":1}]}`

func decisionPod(name, cpus string, node int, gpus ...int) *kube.Pod {
	d := kube.Decision{Policy: policy.SingleNUMANode, Exclusive: policy.Required, CPUSet: cpus, NUMANodes: []int{node}}
	for _, g := range gpus {
		d.GPUs = append(d.GPUs, kube.DecisionGPU{ID: g})
	}
	return &kube.Pod{Namespace: "ml", Name: name, UID: "uid-" + name, Annotations: map[string]string{kube.AnnotationAllocation: d.String()}}
}

// readNRT reads the node's NodeResourceTopology as upstream's types would.
func readNRT(t *testing.T, dyn dynamic.Interface, name string) (*upstreamNRT, []byte, error) {
	t.Helper()
	obj, err := dyn.Resource(cluster.NRTResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	data, err := obj.MarshalJSON()
	require.NoError(t, err)
	var r upstreamNRT
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), "the object as upstream's v1alpha2 types read it")
	return &r, data, nil
}

// available returns zone's available amount of res.
func available(r *upstreamNRT, zone, res string) string {
	for _, z := range r.Zones {
		if z.Name != zone {
			continue
		}
		for _, x := range z.Resources {
			if x.Name == res {
				return x.Available.String()
			}
		}
	}
	return "none"
}

func TestReporterOnARealAPIServer(t *testing.T) {
	cp := controlplane.StartControlPlane(t)
	ctx := context.Background()
	installCRD(t, cp.Config)
	client, err := kubernetes.NewForConfig(cp.Config)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cp.Config)
	require.NoError(t, err)
	kn, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	m, err := topology.ParseJSON([]byte(reporterMachine))
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	w, err := cluster.NewWriter(cp.Config)
	require.NoError(t, err)
	rep, err := reporter.New(node, w, reporter.Options{NodeName: "gpu-1", Interval: 50 * time.Millisecond,
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rep.Run(runCtx) }()
	defer func() {
		cancel()
		require.NoError(t, <-done, "the reporter's Run at its end")
	}()

	// The first report: as upstream's types read it.
	var r *upstreamNRT
	require.Eventually(t, func() bool {
		r, _, err = readNRT(t, dyn, "gpu-1")
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "no NodeResourceTopology gpu-1: %v", err)
	require.Equal(t, "topology.node.k8s.io/v1alpha2", r.APIVersion)
	require.Equal(t, "NodeResourceTopology", r.Kind)
	require.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "gpu-1", UID: kn.UID}}, r.OwnerReferences)
	require.Equal(t, "none", attribute(r.Attributes, "topologyManagerPolicy"))
	require.Equal(t, "pod", attribute(r.Attributes, "topologyManagerScope"))
	var empty kube.PodFingerprint
	require.Equal(t, empty.Sign(), attribute(r.Attributes, "nodeTopologyPodsFingerprint"))
	require.Equal(t, "exclude-terminal", attribute(r.Attributes, "nodeTopologyPodsFingerprintMethod"))
	require.Len(t, r.Zones, 2)
	z := r.Zones[0]
	require.Equal(t, "node-0", z.Name)
	require.Equal(t, "Node", z.Type)
	require.Len(t, z.Costs, 2)
	require.Equal(t, int64(21), z.Costs[1].Value)
	got := map[string][3]string{}
	for _, res := range z.Resources {
		got[res.Name] = [3]string{res.Capacity.String(), res.Allocatable.String(), res.Available.String()}
	}
	require.Equal(t, map[string][3]string{"cpu": {"4", "3", "3"}, "aliyun.com/gpu": {"2", "2", "2"}, "memory": {"2Gi", "2Gi", "2Gi"}}, got)

	// The annotation holds the machine; the report gives it back too.
	kn, err = client.CoreV1().Nodes().Get(ctx, "gpu-1", metav1.GetOptions{})
	require.NoError(t, err)
	annotated, err := topology.ParseJSON([]byte(kn.Annotations[kube.AnnotationTopology]))
	require.NoError(t, err)
	require.Equal(t, m.GPUs(), annotated.GPUs())
	require.True(t, m.CPUs().Equal(annotated.CPUs()))
	_, data, err := readNRT(t, dyn, "gpu-1")
	require.NoError(t, err)
	parsed, err := kube.ParseNRT(data)
	require.NoError(t, err)
	back, err := kube.MachineFromNRT(parsed)
	require.NoError(t, err)
	require.Equal(t, m.GPUs(), back.GPUs())
	require.True(t, m.ReservedCPUs().Equal(back.ReservedCPUs()))

	// An admission: the report follows.
	_, err = node.Admit(decisionPod("a", "4-5", 1, 2))
	require.NoError(t, err)
	rep.Notify()
	var fp kube.PodFingerprint
	fp.Add("ml", "a")
	require.Eventually(t, func() bool {
		r, _, err = readNRT(t, dyn, "gpu-1")
		return err == nil && attribute(r.Attributes, "nodeTopologyPodsFingerprint") == fp.Sign()
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, "2", available(r, "node-1", "cpu"))
	require.Equal(t, "1", available(r, "node-1", "aliyun.com/gpu"))

	// The API server goes away; admissions go on and never wait for it;
	// the reporter retries and catches up when it is back.
	cp.StopAPIServer()
	// The admission and the notification finish while the API server is
	// down (it comes back only after them): had either waited for it, they
	// would not finish before the deadline, whatever the machine's speed.
	admitted := make(chan error, 1)
	go func() {
		_, err := node.Admit(decisionPod("b", "1-2", 0, 0, 1))
		rep.Notify()
		admitted <- err
	}()
	select {
	case err := <-admitted:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the admission waited for the API server")
	}
	require.Eventually(t, func() bool { return rep.Stats().Failures > 0 }, 30*time.Second, 20*time.Millisecond)
	cp.StartAPIServer()
	fp.Add("ml", "b")
	require.Eventually(t, func() bool {
		r, _, err = readNRT(t, dyn, "gpu-1")
		return err == nil && attribute(r.Attributes, "nodeTopologyPodsFingerprint") == fp.Sign()
	}, 60*time.Second, 50*time.Millisecond, "the report after the API server came back: %v", err)
	require.Equal(t, "1", available(r, "node-0", "cpu"))
	require.Equal(t, "0", available(r, "node-0", "aliyun.com/gpu"))
	require.Empty(t, rep.Stats().LastError)
}

// The agent's rights, as deploy/agent.yaml grants them, tried with a
// service-account token bound to an agent pod on node gpu-1: it writes
// gpu-1's annotation and report and events, and nothing of gpu-2's.
func TestAgentRightsOnARealAPIServer(t *testing.T) {
	cp := controlplane.StartControlPlane(t)
	ctx := context.Background()
	installCRD(t, cp.Config)
	a := controlplane.NewApplier(t, cp.Config)
	for _, f := range []string{"agent.yaml"} {
		for _, obj := range objects(t, f) {
			require.NoError(t, a.Apply(ctx, obj, false), "%s %s", obj.GetKind(), obj.GetName())
		}
	}
	admin, err := kubernetes.NewForConfig(cp.Config)
	require.NoError(t, err)
	for _, n := range []string{"gpu-1", "gpu-2"} {
		_, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"l": "v"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pod, err := admin.CoreV1().Pods("numaplace-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "numaplace-agent-x"},
		Spec: corev1.PodSpec{NodeName: "gpu-1", ServiceAccountName: "numaplace-agent",
			Containers: []corev1.Container{{Name: "agent", Image: "numaplace/numaplace-agent:dev"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := admin.CoreV1().ServiceAccounts("numaplace-system").CreateToken(ctx, "numaplace-agent", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1",
			Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	agentCfg := rest.CopyConfig(cp.Config)
	agentCfg.BearerToken = tr.Status.Token

	// The admission policy takes effect once the API server has loaded it.
	agent, err := kubernetes.NewForConfig(agentCfg)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := agent.CoreV1().Nodes().Patch(ctx, "gpu-2", types.MergePatchType, []byte(`{"metadata":{"annotations":{"x":"y"}}}`), metav1.PatchOptions{})
		return err != nil
	}, 30*time.Second, 100*time.Millisecond, "the agent's service account may patch another node")

	// Its own node: allowed.
	w, err := cluster.NewWriter(agentCfg)
	require.NoError(t, err)
	m, err := topology.ParseJSON([]byte(reporterMachine))
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	rep, err := reporter.New(node, w, reporter.Options{NodeName: "gpu-1"})
	require.NoError(t, err)
	ann, err := rep.Annotations()
	require.NoError(t, err)
	uid, err := w.Annotate(ctx, "gpu-1", ann)
	require.NoError(t, err)
	require.NotEmpty(t, uid)
	nrt, err := rep.Report()
	require.NoError(t, err)
	require.NoError(t, w.ApplyNRT(ctx, nrt))
	require.NoError(t, w.ApplyNRT(ctx, nrt), "and again (an update)")
	_, err = agent.CoreV1().Events("default").Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"}, Reason: "TopologyAffinityError",
		Message: "m", Type: "Warning"}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Another node: refused, by the admission policy.
	_, err = w.Annotate(ctx, "gpu-2", ann)
	require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "annotating another node: %v", err)
	require.ErrorContains(t, err, "numaplace-agent may write only its own node's objects")
	other := *nrt
	other.Metadata.Name, other.Metadata.OwnerReferences = "gpu-2", nil
	err = w.ApplyNRT(ctx, &other)
	require.ErrorContains(t, err, "numaplace-agent may write only its own node's objects")

	// Its own node's labels and spec: refused.
	_, err = agent.CoreV1().Nodes().Patch(ctx, "gpu-1", types.MergePatchType, []byte(`{"metadata":{"labels":{"l":"w"}}}`), metav1.PatchOptions{})
	require.ErrorContains(t, err, "may not change a Node's labels")
	_, err = agent.CoreV1().Nodes().Patch(ctx, "gpu-1", types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	require.ErrorContains(t, err, "may not change a Node's spec")

	// The pods bound to its node: read, as the agent's informer does.
	pods, err := agent.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=gpu-1"})
	require.NoError(t, err, "listing the pods bound to its node")
	require.Len(t, pods.Items, 1)
	require.Equal(t, pod.Name, pods.Items[0].Name)
	informer, err := cluster.NewPodInformer(agentCfg, "gpu-1")
	require.NoError(t, err)
	infos, err := informer.Pods(ctx, true)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.Equal(t, "numaplace-system/numaplace-agent-x", infos[0].Pod.Key())
	got, ok := informer.Pod(ctx, "numaplace-system", pod.Name, string(pod.UID))
	require.True(t, ok)
	require.Equal(t, "agent", got.Containers[0].Name)
	_, err = agent.CoreV1().Pods("numaplace-system").Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err, "reading a pod")

	// A pod of its own node resized in place: its decision annotation, and
	// nothing else of it, nor of another node's pods.
	// (After the list above, which expects the agent's pod alone.)
	checkPodRights(t, admin, agentCfg)

	// What RBAC does not grant at all: creating or deleting pods, their logs.
	_, err = agent.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "creating a pod: %v", err)
	err = agent.CoreV1().Pods("numaplace-system").Delete(ctx, pod.Name, metav1.DeleteOptions{})
	require.True(t, apierrors.IsForbidden(err), "deleting a pod: %v", err)
	err = agent.CoreV1().Pods("numaplace-system").GetLogs(pod.Name, &corev1.PodLogOptions{}).Do(ctx).Error()
	require.True(t, apierrors.IsForbidden(err), "reading a pod's log: %v", err)
	err = agent.CoreV1().Nodes().Delete(ctx, "gpu-1", metav1.DeleteOptions{})
	require.True(t, apierrors.IsForbidden(err), "deleting its node: %v", err)
	_, err = agent.CoreV1().Nodes().Get(ctx, "gpu-1", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "reading nodes: %v", err)
	require.True(t, strings.Contains(err.Error(), "numaplace-agent"), err.Error())
}

// checkPodRights checks what the agent's service account (agentCfg, bound
// to node gpu-1) may write of pods: the decision annotation of a pod on
// gpu-1, through cluster.Decisions, and nothing else.
func checkPodRights(t *testing.T, admin kubernetes.Interface, agentCfg *rest.Config) {
	t.Helper()
	ctx := context.Background()
	agent, err := kubernetes.NewForConfig(agentCfg)
	require.NoError(t, err)
	pods := map[string]*corev1.Pod{}
	for name, node := range map[string]string{"resized": "gpu-1", "elsewhere": "gpu-2"} {
		p, err := admin.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name},
				Annotations: map[string]string{kube.AnnotationAllocation: `{"policy":"SingleNUMANode","cpuset":"0"}`, "keep": "me"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		pods[name] = p
	}
	// The policy takes effect once the API server has loaded it.
	require.Eventually(t, func() bool {
		_, err := agent.CoreV1().Pods("default").Patch(ctx, "elsewhere", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"numaplace.io/allocation":"x"}}}`), metav1.PatchOptions{})
		return err != nil
	}, 30*time.Second, 100*time.Millisecond, "the agent's service account may patch a pod of another node")

	dec, err := cluster.NewDecisions(agentCfg, nil)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- dec.Run(runCtx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	const grown = `{"policy":"SingleNUMANode","exclusive":"Required","cpuset":"0-1","numaNodes":[0],"gpus":[],"memoryMiB":{"0":0}}`
	dec.Write(nri.Resized{Namespace: "default", Name: "resized", UID: string(pods["resized"].UID), Decision: grown})
	require.Eventually(t, func() bool {
		p, err := admin.CoreV1().Pods("default").Get(ctx, "resized", metav1.GetOptions{})
		return err == nil && p.Annotations[kube.AnnotationAllocation] == grown && len(dec.Pending()) == 0
	}, 30*time.Second, 100*time.Millisecond, "the agent did not write the resized pod's decision")
	p, err := admin.CoreV1().Pods("default").Get(ctx, "resized", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "me", p.Annotations["keep"], "the other annotations stay")

	// A decision for a pod recreated under the same name (another UID) is
	// dropped, not written.
	dec.Write(nri.Resized{Namespace: "default", Name: "resized", UID: "not-its-uid", Decision: "stale"})
	require.Eventually(t, func() bool { return len(dec.Pending()) == 0 }, 30*time.Second, 100*time.Millisecond)
	p, err = admin.CoreV1().Pods("default").Get(ctx, "resized", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, grown, p.Annotations[kube.AnnotationAllocation])

	// Refused: another node's pod, another annotation, a label, the spec.
	for _, c := range []struct{ pod, patch, want string }{
		{"elsewhere", `{"metadata":{"annotations":{"numaplace.io/allocation":"x"}}}`,
			"numaplace-agent may write only the pods of its own node, not pod default/elsewhere"},
		{"resized", `{"metadata":{"annotations":{"keep":"changed"}}}`, "numaplace-agent may change only a pod's numaplace.io/allocation annotation"},
		{"resized", `{"metadata":{"annotations":{"added":"x"}}}`, "numaplace-agent may change only a pod's numaplace.io/allocation annotation"},
		{"resized", `{"metadata":{"annotations":{"keep":null}}}`, "numaplace-agent may change only a pod's numaplace.io/allocation annotation"},
		{"resized", `{"metadata":{"labels":{"app":"other"}}}`, "numaplace-agent may change only a pod's numaplace.io/allocation annotation"},
		{"resized", `{"metadata":{"finalizers":["x/y"]}}`, "numaplace-agent may change only a pod's numaplace.io/allocation annotation"},
		{"resized", `{"spec":{"activeDeadlineSeconds":5}}`, "numaplace-agent may change only a pod's numaplace.io/allocation annotation"},
	} {
		_, err := agent.CoreV1().Pods("default").Patch(ctx, c.pod, types.MergePatchType, []byte(c.patch), metav1.PatchOptions{})
		require.True(t, apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "%s %s: %v", c.pod, c.patch, err)
		require.ErrorContains(t, err, c.want, "%s %s", c.pod, c.patch)
	}
	err = agent.CoreV1().Pods("default").Delete(ctx, "resized", metav1.DeleteOptions{})
	require.True(t, apierrors.IsForbidden(err), "deleting a pod: %v", err)
	_, err = agent.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.True(t, apierrors.IsForbidden(err), "writing a pod's status: %v", err)
}
