package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/numaplace/numaplace/adapters/kube"
	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
	"github.com/numaplace/numaplace/plugins/kube-scheduler/internal/draslices"
	"github.com/numaplace/numaplace/topology"
)

// TestThroughputDRA is TestThroughput for pods whose GPUs come from
// ResourceClaims (throughput-dra.sh runs it): on a real kube-apiserver and
// etcd, N fake nodes (half dgx-h100, half dgx-a100, with their topology
// annotation and the opt-in label, no aliyun.com/gpu) each with the
// ResourceSlice numaplace-agent's DRA driver publishes for the machine
// (gpu.numaplace.io: its GPUs and RDMA NICs with the driver's attributes),
// deploy/dra.yaml's DeviceClasses, and M pods (fixed seed; a quarter each
// SingleNUMANode with 1-2 GPUs, Restricted with 2 or 4, BestEffort with 1,
// and no NUMA spec with 1-2), each with its own ResourceClaim for that many
// gpu.numaplace.io devices, created with the pod (no controller manager:
// the claims are the pods' own, as a template would make them). The
// scheduler runs once with deploy/scheduler-config.yaml's profile
// (NUMAPlace decides the claims) and once with kube-scheduler's defaults
// (DynamicResources allocates them, first fit), same binary, same client
// QPS and burst, rounds alternating which goes first. Each run logs the
// pods bound per second, the writes per pod by kind (the claims' writes are
// "PUT resourceclaims" and "PUT resourceclaims/status") and CPU seconds.
// It fails when a run leaves a pod unbound or a claim of a bound pod
// unallocated, or, in the NUMAPlace runs, when a pod with a NUMA spec has
// no decision or its claim names other GPUs than the decision. It runs
// only when NUMAPLACE_THROUGHPUT_DRA is set; NUMAPLACE_THROUGHPUT_NODES
// (1000), NUMAPLACE_THROUGHPUT_PODS (1000), NUMAPLACE_THROUGHPUT_RATES
// ("500/1000") and NUMAPLACE_THROUGHPUT_ROUNDS (2) change the trial.
func TestThroughputDRA(t *testing.T) {
	if os.Getenv("NUMAPLACE_THROUGHPUT_DRA") == "" {
		t.Skip("the DRA throughput trial runs only with NUMAPLACE_THROUGHPUT_DRA=1 (see throughput-dra.sh)")
	}
	nNodes, nPods := envInt(t, "NUMAPLACE_THROUGHPUT_NODES", 1000), envInt(t, "NUMAPLACE_THROUGHPUT_PODS", 1000)
	base, rates, cfg, client, kubeconfig := startTrial(t, "500/1000")
	ctx := t.Context()

	for _, c := range draClasses(t) {
		_, err := client.ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	start := time.Now()
	parallel(t, nNodes, func(i int) error {
		preset := "dgx-h100"
		if i%2 == 1 {
			preset = "dgx-a100"
		}
		name := fmt.Sprintf("gpu-%04d", i)
		n := benchNode(t, name, preset)
		delete(n.Status.Capacity, kube.ResourceAliyunGPU)
		delete(n.Status.Allocatable, kube.ResourceAliyunGPU)
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return err
		}
		m, err := topology.Preset(preset)
		if err != nil {
			return err
		}
		for _, s := range draslices.Published(numaplace.DRADriver, name, m) {
			if _, err := client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("%d nodes and their ResourceSlices created in %s", nNodes, time.Since(start).Round(time.Millisecond))

	rounds := envInt(t, "NUMAPLACE_THROUGHPUT_ROUNDS", 2)
	sideBySide(t, rates, rounds, nPods, "DRA pods",
		func() string {
			return fmt.Sprintf("\nDRA throughput: %d nodes (half dgx-h100, half dgx-a100, GPUs as gpu.numaplace.io devices), %d pods with a GPU claim each, "+
				"%d CPUs, %d rounds (median pods/s), at %s\n", nNodes, nPods, runtime.NumCPU(), rounds, time.Now().UTC().Format(time.RFC3339))
		},
		func(profile string, r rate) runResult {
			return runThroughputDRA(t, client, cfg, kubeconfig, base, profile, r, nPods)
		})
}

// draClasses reads deploy/dra.yaml's DeviceClasses.
func draClasses(t *testing.T) []*resourceapi.DeviceClass {
	t.Helper()
	b, err := os.ReadFile("../../../../deploy/dra.yaml")
	require.NoError(t, err)
	var out []*resourceapi.DeviceClass
	for _, doc := range strings.Split(string(b), "\n---") {
		var c resourceapi.DeviceClass
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &c))
		if c.Kind == "DeviceClass" {
			out = append(out, &c)
		}
	}
	require.NotEmpty(t, out, "deploy/dra.yaml has no DeviceClass")
	return out
}

// draPod is one pod of the DRA trial's mix and its ResourceClaim (see
// TestThroughputDRA).
func draPod(name string, rng *rand.Rand) (*v1.Pod, *resourceapi.ResourceClaim) {
	var policy string
	var cpus, gpus int
	switch rng.IntN(4) {
	case 0:
		policy, cpus, gpus = "SingleNUMANode", 4+rng.IntN(12), 1+rng.IntN(2)
	case 1:
		policy, cpus, gpus = "Restricted", 8, 2+2*rng.IntN(2)
	case 2:
		policy, cpus, gpus = "BestEffort", 4, 1
	default:
		cpus, gpus = 1+rng.IntN(4), 1+rng.IntN(2)
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: name + "-gpus"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpus",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: numaplace.ClassGPU,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(gpus)}}}}}}
	res := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		v1.ResourceMemory: resource.MustParse("1Gi"),
	}
	ann := map[string]string{}
	if policy != "" {
		ann[kube.AnnotationSpecAlibaba] = fmt.Sprintf(`{"numaTopologyPolicy":%q}`, policy)
		ann[kube.AnnotationCPUSetScheduler] = "required"
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: name, Annotations: ann},
		Spec: v1.PodSpec{SchedulerName: "numaplace-scheduler",
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim.Name)}},
			Containers: []v1.Container{{Name: "main", Image: "registry.example/app:1",
				Resources: v1.ResourceRequirements{Requests: res, Limits: res.DeepCopy(), Claims: []v1.ResourceClaim{{Name: "gpus"}}}}}},
	}
	return pod, claim
}

// deleteClaims deletes the trial's ResourceClaims: their finalizer
// (written with the allocation; no controller manager runs to remove it
// once the pods are gone) is dropped first.
func deleteClaims(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	l, err := client.ResourceV1().ResourceClaims(benchNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	parallel(t, len(l.Items), func(i int) error {
		c := &l.Items[i]
		if len(c.Finalizers) > 0 {
			c.Finalizers = nil
			if _, err := client.ResourceV1().ResourceClaims(benchNamespace).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		return client.ResourceV1().ResourceClaims(benchNamespace).Delete(ctx, c.Name, metav1.DeleteOptions{})
	})
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := client.ResourceV1().ResourceClaims(benchNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	}))
}

// runThroughputDRA deletes the pods and claims of the previous run, posts
// nPods pods with their claims, runs the scheduler with the profile until
// every pod is bound, and measures and checks.
func runThroughputDRA(t *testing.T, client kubernetes.Interface, cfg *rest.Config, kubeconfig string, base map[string]any, profile string, r rate, nPods int) runResult {
	t.Helper()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(24, 6))
	pods := make([]*v1.Pod, nPods)
	claims := make([]*resourceapi.ResourceClaim, nPods)
	for i := range pods {
		pods[i], claims[i] = draPod(fmt.Sprintf("pod-%05d", i), rng)
	}
	res := trialRun(t, client, cfg, kubeconfig, base, profile, r, nPods, func() { deleteClaims(t, client) }, func(i int) error {
		if _, err := client.ResourceV1().ResourceClaims(benchNamespace).Create(ctx, claims[i], metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := client.CoreV1().Pods(benchNamespace).Create(ctx, pods[i], metav1.CreateOptions{})
		return err
	})

	cl, err := client.ResourceV1().ResourceClaims(benchNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	byName := map[string]*resourceapi.ResourceClaim{}
	for i := range cl.Items {
		byName[cl.Items[i].Name] = &cl.Items[i]
	}
	l, err := client.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range l.Items {
		c := byName[p.Name+"-gpus"]
		require.NotNil(t, c, "pod %s: no claim", p.Name)
		require.NotNil(t, c.Status.Allocation, "pod %s bound to %s with its claim unallocated", p.Name, p.Spec.NodeName)
		if profile != "numaplace" || p.Annotations[kube.AnnotationSpecAlibaba] == "" {
			continue
		}
		js := p.Annotations[kube.AnnotationAllocation]
		require.NotEmpty(t, js, "pod %s bound to %s without its decision", p.Name, p.Spec.NodeName)
		dec, err := kube.ParseDecision(js)
		require.NoError(t, err)
		var want, got []string
		for _, g := range dec.GPUs {
			want = append(want, "gpu-"+strconv.Itoa(g.ID))
		}
		for _, x := range c.Status.Allocation.Devices.Results {
			got = append(got, x.Device)
		}
		slices.Sort(want)
		slices.Sort(got)
		require.Equal(t, want, got, "pod %s on %s: the claim's devices are not the decision's GPUs", p.Name, p.Spec.NodeName)
	}
	return res
}
