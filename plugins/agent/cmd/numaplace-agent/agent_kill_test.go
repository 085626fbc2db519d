package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numaplace/numaplace/adapters/kube"
)

// cpuPod is a SingleNUMANode pod with one CPU and no GPU.
func cpuPod(name string) *corev1.Pod {
	pod := ackGPUPod(name)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: res, Limits: res}
	return pod
}

// TestAgentKilledDuringBurst kills the agent (a process of its own) with
// SIGKILL while GPU pods start in a burst, just after the first is bound;
// a CPU-only NUMA pod is created while it is away, and the agent comes back
// a minute later. Then the node keeps its invariants: the CPU-only pod has
// its decision's cpuset (Synchronize corrects it), and no GPU pod runs
// without its decision's GPUs (the kubelet cannot allocate aliyun.com/gpu
// while the agent's device plugin is gone: such a pod waits or fails
// admission).
func TestAgentKilledDuringBurst(t *testing.T) {
	c := startKubeletCluster(t)
	e, client := c.e, c.client
	ctx := context.Background()
	c.agent.stop(t)
	agent := c.startAgentProcess(t)
	offers := func(n int64) func() bool {
		return func() bool {
			node, err := client.CoreV1().Nodes().Get(ctx, kubeletNode, metav1.GetOptions{})
			g := node.Status.Allocatable["aliyun.com/gpu"]
			return err == nil && g.Value() == n
		}
	}
	require.Eventually(t, offers(4), 60*time.Second, 100*time.Millisecond, "the agent process's device plugin")
	c.stage("the agent runs as a process of its own")

	// A burst of GPU pods; the agent is killed once the first is bound.
	burst := []string{"burst-0", "burst-1", "burst-2", "burst-3"}
	for _, name := range burst {
		_, err := client.CoreV1().Pods("default").Create(ctx, oneGPUPlainPod(name), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, burst[0], metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != ""
	}, 60*time.Second, 5*time.Millisecond, "burst-0 is not bound")
	agent.kill9()
	killed := time.Now()
	c.stage("agent killed with SIGKILL after burst-0's binding")

	// While it is away, a CPU-only NUMA pod starts (the kubelet needs no
	// device plugin for it, containerd no NRI plugin).
	_, err := client.CoreV1().Pods("default").Create(ctx, cpuPod("cpu-0"), metav1.CreateOptions{})
	require.NoError(t, err)
	pod := waitRunning(t, client, "cpu-0")
	ctr := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	t.Logf("cpu-0 started without the agent: decision %s, Cpus_allowed_list %s", pod.Annotations[kube.AnnotationAllocation],
		e.status(t, ctr, "Cpus_allowed_list"))
	for _, name := range burst {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		t.Logf("%s without the agent: phase %s %s, node %q", name, p.Status.Phase, p.Status.Reason, p.Spec.NodeName)
	}
	c.stage("cpu-0 running without the agent")
	if d := time.Minute - time.Since(killed); d > 0 {
		time.Sleep(d)
	}

	// The agent comes back a minute later.
	c.startAgentProcess(t)
	require.Eventually(t, offers(4), 60*time.Second, 100*time.Millisecond, "the restarted agent's device plugin")
	c.stage("agent back")
	d, err := kube.ParseDecision(pod.Annotations[kube.AnnotationAllocation])
	require.NoError(t, err)
	e.waitCPUs(t, ctr, d.CPUSet, "cpu-0 after the agent's return")
	// A burst pod whose container the kubelet created after its Allocate
	// while the agent was away runs without NRI: with the kubelet's
	// NVIDIA_VISIBLE_DEVICES but no GPU device node. The agent says so (an
	// event on the pod); such a pod is restarted (deleted here), as the
	// event asks.
	for _, name := range burst {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		t.Logf("%s after the agent's return: phase %s %s", name, p.Status.Phase, p.Status.Reason)
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		if ids := containerIDs(t, p); ids["main"] != "" {
			nodes := e.exec(t, ids["main"], "ls", "/dev")
			dec, err := kube.ParseDecision(p.Annotations[kube.AnnotationAllocation])
			require.NoError(t, err)
			if minor := fakeGPUByID(t, dec.GPUs[0].ID).minor; !slices.Contains(strings.Fields(nodes), "nvidia"+strconv.Itoa(minor)) {
				msg := waitEvent(t, client, name, "NUMAPlacementGPUsNotApplied", "restart the pod")
				t.Logf("%s started without the agent: %s", name, msg)
				deletePod(t, client, name, 5)
			}
		}
	}
	c.checkNodeInvariants(t)
	c.stage("after the agent's return, the node's invariants hold")
	for _, name := range append(burst, "cpu-0") {
		if _, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err == nil {
			deletePod(t, client, name, 5)
		}
	}
	c.checkNodeInvariants(t)
	require.Empty(t, c.checkpointPods(t))
}
