package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/numaplace/numaplace/adapters/kube"
)

// In-place resize (Kubernetes 1.35 GA) on the real kubelet, containerd and
// numaplace-scheduler: a NUMA pod's CPUs resized with the resize
// subresource, as kubectl patch --subresource resize does. The machine is
// startKubeletCluster's: the host's CPUs 0 and 1 as NUMA nodes 0 and 1 of
// one CPU each, no reserved CPU (the kubelet's allocatable is both CPUs).
// So a SingleNUMANode pod of 1 CPU can never grow (its node has no second
// CPU): the refusal. A BestEffort pod of 1 CPU grows to 2 across both nodes
// (BestEffort spans width_free nodes): the resize applied, which empties
// the shared pool, allowed because no shared-pool pod runs then (the node's
// rule, as at admission; numaplace-scheduler's minimum shared pool of 1 CPU
// binds its placements, not the node's resizes); it then shrinks back.

// numaCPUPod is a Guaranteed pod of one container with a NUMA spec under
// pol, cpus CPUs and 64 MiB, for numaplace-scheduler, host network.
func numaCPUPod(name, pol string, cpus int) *corev1.Pod {
	res := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse("64Mi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{
			"cpuset-scheduler": "required",
			"scheduling.alibabacloud.com/numa-topology-spec": fmt.Sprintf(`{"numaTopologyPolicy":%q}`, pol),
		}},
		Spec: corev1.PodSpec{
			SchedulerName:                 "numaplace-scheduler",
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: new(int64(5)),
			Containers: []corev1.Container{{Name: "main", Image: e2eImage, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"/bin/sh", "-c", podScript},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}},
		},
	}
}

// resizePod patches the pod's container resources through the resize
// subresource (kubectl patch pod NAME --subresource resize -p ...).
func resizePod(client kubernetes.Interface, name string, res corev1.ResourceList) error {
	q := map[string]string{}
	for k, v := range res {
		q[string(k)] = v.String()
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": "main", "resources": map[string]any{"requests": q, "limits": q}}}}})
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Pods("default").Patch(context.Background(), name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "resize")
	return err
}

// resizeCondition returns the pod's resize condition of type typ, nil when
// it has none.
func resizeCondition(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// waitResizeError waits until the pod's PodResizeInProgress condition has
// reason Error and a message containing every one of want, and returns the
// message.
func waitResizeError(t *testing.T, client kubernetes.Interface, name string, want ...string) string {
	t.Helper()
	var msg string
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := resizeCondition(p, corev1.PodResizeInProgress)
		if c == nil || c.Reason != corev1.PodReasonError {
			return false
		}
		msg = c.Message
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return false
			}
		}
		return true
	}, 60*time.Second, 200*time.Millisecond, "pod %s has no PodResizeInProgress condition with reason Error naming %q: %s",
		name, want, describe(client, name))
	return msg
}

// waitResized waits until the kubelet reports the pod's container running
// with cpus CPUs (its status' resources) and no resize pending or in
// progress, and returns the pod.
func waitResized(t *testing.T, client kubernetes.Interface, name string, cpus int64) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Resources == nil {
			return false
		}
		got := p.Status.ContainerStatuses[0].Resources.Limits[corev1.ResourceCPU]
		pod = p
		return got.Value() == cpus && resizeCondition(p, corev1.PodResizeInProgress) == nil &&
			resizeCondition(p, corev1.PodResizePending) == nil
	}, 60*time.Second, 200*time.Millisecond, "pod %s was not resized to %d CPUs: %s", name, cpus, describe(client, name))
	return pod
}

// cgroupCPU returns the CFS quota and period (cgroup v1 cpu.cfs_quota_us
// and cpu.cfs_period_us, or v2 cpu.max) of the container's cgroup and of
// its pod's, read by the host from the kernel: the limits as applied, not
// as recorded.
func cgroupCPU(t *testing.T, e *kubeletEnv, ctr string) (container, pod string) {
	t.Helper()
	out, err := e.crictl("inspect", ctr)
	require.NoError(t, err, out)
	var info struct {
		Info struct {
			RuntimeSpec struct {
				Linux struct {
					CgroupsPath string `json:"cgroupsPath"`
				} `json:"linux"`
			} `json:"runtimeSpec"`
		} `json:"info"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &info))
	path := info.Info.RuntimeSpec.Linux.CgroupsPath
	require.NotEmpty(t, path, "the container's cgroups path")
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	// The cgroup v1 cpu controller's hierarchy, else the v2 one (a hybrid
	// host mounts both; v1's cpu is then the one in use).
	v1, v2 := "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+3 >= len(fields) {
			continue
		}
		switch mnt, fstype, opts := fields[4], fields[sep+1], strings.Split(fields[sep+3], ","); {
		case fstype == "cgroup" && slices.Contains(opts, "cpu"):
			v1 = mnt
		case fstype == "cgroup2":
			v2 = mnt
		}
	}
	require.NoError(t, sc.Err())
	read := func(dir string) string {
		if v1 == "" {
			data, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
			require.NoError(t, err)
			return strings.TrimSpace(string(data))
		}
		q, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
		require.NoError(t, err)
		p, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
		require.NoError(t, err)
		return strings.TrimSpace(string(q)) + " " + strings.TrimSpace(string(p))
	}
	root := cmp.Or(v1, v2)
	require.NotEmpty(t, root, "no cpu cgroup controller mounted")
	dir := filepath.Join(root, path)
	return read(dir), read(filepath.Dir(dir))
}

// checkCPUs checks the container of the running pod: its cpuset is its
// decision's, which has cpus CPUs, and its CFS quota (and its pod's) is
// cpus CPUs over 100 ms.
func checkCPUs(t *testing.T, e *kubeletEnv, pod *corev1.Pod, cpus int) kube.Decision {
	t.Helper()
	d, err := kube.ParseDecision(pod.Annotations[kube.AnnotationAllocation])
	require.NoError(t, err, "pod %s's decision", pod.Name)
	set, err := parseCPUs(d.CPUSet)
	require.NoError(t, err)
	require.Equal(t, cpus, set, "pod %s's decision %s", pod.Name, d.CPUSet)
	ctr := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	require.Equal(t, d.CPUSet, e.status(t, ctr, "Cpus_allowed_list"), "pod %s's cpuset", pod.Name)
	c, p := cgroupCPU(t, e, ctr)
	want := fmt.Sprintf("%d 100000", cpus*100000)
	require.Equal(t, want, c, "pod %s's container's CFS quota and period", pod.Name)
	require.Equal(t, want, p, "pod %s's pod cgroup's CFS quota and period", pod.Name)
	t.Logf("pod %s: decision %s; its container: Cpus_allowed_list %s, CFS quota/period %s (pod cgroup %s)",
		pod.Name, pod.Annotations[kube.AnnotationAllocation], e.status(t, ctr, "Cpus_allowed_list"), c, p)
	return d
}

// parseCPUs returns the size of a Linux CPU list.
func parseCPUs(s string) (int, error) {
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		var lo, hi int
		if _, err := fmt.Sscanf(part, "%d-%d", &lo, &hi); err == nil {
			n += hi - lo + 1
			continue
		}
		if _, err := fmt.Sscanf(part, "%d", &lo); err != nil {
			return 0, fmt.Errorf("CPU list %q: %w", s, err)
		}
		n++
	}
	return n, nil
}

func TestResizeThroughTheKubelet(t *testing.T) {
	c := startKubeletCluster(t)
	e, client, dyn, agent, stage := c.e, c.client, c.dyn, c.agent, c.stage
	ctx := context.Background()
	cpus := func(n int64) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(n, resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse("64Mi")}
	}

	// Refused: a SingleNUMANode pod of 1 CPU asks for 2; its NUMA node has
	// one. The kubelet shows the node's reason in the pod's resize status;
	// the container keeps its cpuset and its CFS quota, its pod cgroup its
	// quota, the pod its decision.
	_, err := client.CoreV1().Pods("default").Create(ctx, numaCPUPod("snn", "SingleNUMANode", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	pod := waitRunning(t, client, "snn")
	before := checkCPUs(t, e, pod, 1)
	stage("snn running with its decision's CPU")
	require.NoError(t, resizePod(client, "snn", cpus(2)))
	node := fmt.Sprintf("NUMA node %d", before.NUMANodes[0])
	msg := waitResizeError(t, client, "snn", "in-place resize refused: pod default/snn from 1 to 2 CPUs: under its SingleNUMANode policy", node)
	t.Logf("snn's PodResizeInProgress condition: reason Error, message %q", msg)
	waitEvent(t, client, "snn", "NUMAResizeRefused", "pod default/snn from 1 to 2 CPUs")
	stage("snn: resize to 2 CPUs refused, the reason in its resize status")
	pod, err = client.CoreV1().Pods("default").Get(ctx, "snn", metav1.GetOptions{})
	require.NoError(t, err)
	after := checkCPUs(t, e, pod, 1)
	require.Equal(t, before, after, "the refused resize changed the decision")
	got := pod.Status.ContainerStatuses[0].Resources.Limits[corev1.ResourceCPU]
	require.Equal(t, int64(1), got.Value(), "the kubelet reports the container's CPU limit as still 1")
	// Back to what it has: the kubelet's condition goes.
	require.NoError(t, resizePod(client, "snn", cpus(1)))
	waitResized(t, client, "snn", 1)
	deletePod(t, client, "snn", 5)
	stage("snn: back to 1 CPU, deleted")

	// Applied: a BestEffort pod of 1 CPU grows to 2 (both NUMA nodes) and
	// shrinks back; its cpuset, its CFS quota, its decision, the node's
	// report and numaplace-scheduler's accounting follow.
	_, err = client.CoreV1().Pods("default").Create(ctx, numaCPUPod("be", "BestEffort", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	pod = waitRunning(t, client, "be")
	first := checkCPUs(t, e, pod, 1)
	stage("be running with its decision's CPU")
	require.NoError(t, resizePod(client, "be", cpus(2)))
	waitResized(t, client, "be", 2)
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "be", metav1.GetOptions{})
		if err != nil {
			return false
		}
		d, err := kube.ParseDecision(p.Annotations[kube.AnnotationAllocation])
		return err == nil && d.CPUSet == "0-1"
	}, 30*time.Second, 100*time.Millisecond, "be's decision was not updated to CPUs 0-1: %s", describe(client, "be"))
	pod, err = client.CoreV1().Pods("default").Get(ctx, "be", metav1.GetOptions{})
	require.NoError(t, err)
	grown := checkCPUs(t, e, pod, 2)
	require.Equal(t, []int{0, 1}, grown.NUMANodes)
	require.Equal(t, "BestEffort", grown.Policy.String())
	total := int64(0)
	for k, v := range grown.MemoryMiB {
		total += v
		require.Equal(t, first.MemoryMiB[k], v, "be's memory stays where it was reserved: %v, first %v", grown.MemoryMiB, first.MemoryMiB)
	}
	require.Equal(t, int64(64), total, "be's memory: %v", grown.MemoryMiB)
	require.Eventually(t, func() bool {
		return nrtAvailable(dyn, "node-0", "cpu") == "0" && nrtAvailable(dyn, "node-1", "cpu") == "0"
	}, 30*time.Second, 100*time.Millisecond, "the NodeResourceTopology does not count be's 2 CPUs")
	waitEvent(t, client, "be", "NUMAPlacementResized", "resized in place from 1 to 2 CPUs")
	require.Contains(t, agent.log.String(), "wrote the decision of a pod resized in place")
	stage("be: grown to 2 CPUs, its decision and the report updated")

	// The new decision reaches the pod even when it was lost: with the
	// pod's annotation put back to its first decision while the agent is
	// down, the restarted agent (its checkpoint holds 2 CPUs, its sandbox
	// was created with 1) writes it again.
	agent.stop(t)
	stale, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		kube.AnnotationAllocation: first.String()}}})
	require.NoError(t, err)
	_, err = client.CoreV1().Pods("default").Patch(ctx, "be", types.MergePatchType, stale, metav1.PatchOptions{})
	require.NoError(t, err)
	agent = e.startAgent(t, c.agentArgs...)
	c.agent = agent
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "be", metav1.GetOptions{})
		return err == nil && p.Annotations[kube.AnnotationAllocation] == grown.String()
	}, 30*time.Second, 100*time.Millisecond, "the restarted agent did not write be's decision again; its log:\n%s", agent.log)
	require.Contains(t, agent.log.String(), "the pod was resized in place; its decision is written again")
	stage("be: its lost decision written again by the restarted agent")

	// A pod without a NUMA spec waits while be holds both CPUs (the default
	// NodeResourcesFit refuses it first: be requests both) and is placed
	// once be is back to 1 CPU: numaplace-scheduler, which refuses a pod
	// whose CPU request does not fit in the shared pool, then accounts be's
	// shrunk decision (the cache's own test, adapters/scheduler's
	// TestInPlaceResizeOfABoundPod, shows the grown one accounted too).
	plain := numaCPUPod("plain", "", 1)
	plain.Annotations = nil
	plain.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}
	_, err = client.CoreV1().Pods("default").Create(ctx, plain, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "plain", metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := resizeCondition(p, corev1.PodScheduled)
		return c != nil && c.Status == corev1.ConditionFalse
	}, 30*time.Second, 100*time.Millisecond, "plain is not pending: %s", describe(client, "plain"))
	p, err := client.CoreV1().Pods("default").Get(ctx, "plain", metav1.GetOptions{})
	require.NoError(t, err)
	t.Logf("plain, while be holds both CPUs: %s", resizeCondition(p, corev1.PodScheduled).Message)
	stage("plain pending while be holds both CPUs")

	require.NoError(t, resizePod(client, "be", cpus(1)))
	waitResized(t, client, "be", 1)
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "be", metav1.GetOptions{})
		if err != nil {
			return false
		}
		d, err := kube.ParseDecision(p.Annotations[kube.AnnotationAllocation])
		return err == nil && d.CPUSet == first.CPUSet
	}, 30*time.Second, 100*time.Millisecond, "be's decision was not updated back to CPU %s: %s", first.CPUSet, describe(client, "be"))
	pod, err = client.CoreV1().Pods("default").Get(ctx, "be", metav1.GetOptions{})
	require.NoError(t, err)
	shrunk := checkCPUs(t, e, pod, 1)
	require.Equal(t, first.NUMANodes, shrunk.NUMANodes)
	stage("be: back to 1 CPU, its first one")
	p = waitRunning(t, client, "plain")
	pctr := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	other := map[string]string{"0": "1", "1": "0"}[first.CPUSet]
	require.Equal(t, other, e.status(t, pctr, "Cpus_allowed_list"), "plain runs on the shared pool, be's other CPU")
	deletePod(t, client, "plain", 0)
	stage("plain scheduled and running on the shared pool")

	// Memory is refused with the reason; a GPU change the API server
	// refuses itself.
	more := cpus(1)
	more[corev1.ResourceMemory] = resource.MustParse("128Mi")
	require.NoError(t, resizePod(client, "be", more))
	msg = waitResizeError(t, client, "be", "pod default/be", "its memory limit cannot change in place (from 67108864 to 134217728 bytes)")
	t.Logf("be's PodResizeInProgress condition: reason Error, message %q", msg)
	pod, err = client.CoreV1().Pods("default").Get(ctx, "be", metav1.GetOptions{})
	require.NoError(t, err)
	checkCPUs(t, e, pod, 1)
	gpu := cpus(1)
	gpu["aliyun.com/gpu"] = resource.MustParse("1")
	err = resizePod(client, "be", gpu)
	require.ErrorContains(t, err, "only cpu and memory resources are mutable")
	t.Logf("a GPU resize: %v", err)
	deletePod(t, client, "be", 5)
	stage("be: memory resize refused, GPU resize refused by the API server")

	// A container whose CPU resizePolicy is RestartContainer: the kubelet
	// restarts it with its new limit, and the agent resizes the pod at its
	// creation.
	rc := numaCPUPod("rc", "BestEffort", 1)
	rc.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU,
		RestartPolicy: corev1.RestartContainer}}
	_, err = client.CoreV1().Pods("default").Create(ctx, rc, metav1.CreateOptions{})
	require.NoError(t, err)
	pod = waitRunning(t, client, "rc")
	checkCPUs(t, e, pod, 1)
	require.NoError(t, resizePod(client, "rc", cpus(2)))
	waitResized(t, client, "rc", 2)
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "rc", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready {
			return false
		}
		d, err := kube.ParseDecision(p.Annotations[kube.AnnotationAllocation])
		pod = p
		return err == nil && d.CPUSet == "0-1"
	}, 60*time.Second, 200*time.Millisecond, "rc was not restarted with CPUs 0-1: %s", describe(client, "rc"))
	require.Equal(t, int32(1), pod.Status.ContainerStatuses[0].RestartCount, "rc's container was restarted to resize it")
	checkCPUs(t, e, pod, 2)
	deletePod(t, client, "rc", 5)
	stage("rc: restarted with 2 CPUs, its decision updated")
}
