package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerIDs returns the pod's container IDs by container name.
func containerIDs(t *testing.T, pod *corev1.Pod) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range pod.Status.ContainerStatuses {
		out[s.Name] = strings.TrimPrefix(s.ContainerID, "containerd://")
	}
	return out
}

// TestContainerdRestartWithPodsRunning restarts containerd with pods
// running: the agent reconnects and resynchronises, the pods that ran
// before the restart are released when they end later (containerd sends
// no StopPodSandbox for them), and a sandbox stopped but not yet removed
// when containerd restarts is not admitted again.
func TestContainerdRestartWithPodsRunning(t *testing.T) {
	c := startKubeletCluster(t)
	e, client := c.e, c.client
	ctx := context.Background()

	// A SingleNUMANode pod, a GPU pod without a NUMA spec and a pod
	// without GPUs, all through numaplace-scheduler.
	web := oneGPUPlainPod("web-0")
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
	web.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: res, Limits: res}
	for _, p := range []*corev1.Pod{ackGPUPod("numa-0"), oneGPUPlainPod("gpu-0"), web} {
		_, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	before := map[string]map[string]string{}
	for _, name := range []string{"numa-0", "gpu-0", "web-0"} {
		before[name] = containerIDs(t, waitRunning(t, client, name))
	}
	c.checkNodeInvariants(t)
	c.stage("three pods running, the node's invariants hold")

	// (1) containerd restarts: the containers go on, the agent reconnects
	// and resynchronises.
	e.restartContainerd(t)
	require.Contains(t, c.agent.log.String(), "connected to the runtime again")
	c.stage("containerd restarted, the agent reconnected")
	for name, ids := range before {
		pod := waitRunning(t, client, name)
		require.Equal(t, ids, containerIDs(t, pod), "pod %s's containers after containerd's restart", name)
		require.Zero(t, pod.Status.ContainerStatuses[0].RestartCount, "pod %s", name)
	}
	c.checkNodeInvariants(t)
	c.stage("after the restart, the node's invariants hold")

	// A pod that ran before the restart ends: its CPU and GPU are given
	// back (in the checkpoint and the report), and a new NUMA pod, which
	// needs the node's only CPU for exclusive use, gets it.
	deletePod(t, client, "numa-0", 5)
	c.checkNodeInvariants(t)
	c.stage("numa-0 (from before the restart) deleted and released")
	_, err := client.CoreV1().Pods("default").Create(ctx, ackGPUPod("numa-1"), metav1.CreateOptions{})
	require.NoError(t, err)
	checkPlacement(t, e, client, waitRunning(t, client, "numa-1"))
	c.checkNodeInvariants(t)
	deletePod(t, client, "numa-1", 5)
	c.checkNodeInvariants(t)
	c.stage("numa-1 ran with its decision and was released")

	// (2) A sandbox stopped but not yet removed when containerd restarts:
	// with the kubelet away (so that it neither starts the pod again nor
	// removes the sandbox), numa-2's sandbox is stopped; the agent releases
	// it at its StopPodSandbox and does not admit it again when the
	// restarted containerd lists it at the new Synchronize. The kubelet,
	// back, starts the pod again in a new sandbox, with its decision.
	// (A CPU-only pod: a restarted kubelet admits a pod that has no running
	// sandbox before the device plugin has registered again, and fails a
	// GPU pod's admission, UnexpectedAdmissionError.)
	_, err = client.CoreV1().Pods("default").Create(ctx, cpuPod("numa-2"), metav1.CreateOptions{})
	require.NoError(t, err)
	waitRunning(t, client, "numa-2")
	c.checkNodeInvariants(t)
	c.kubelet.stop()
	sandbox, err := e.crictl("pods", "--name", "numa-2", "--state", "ready", "-q")
	require.NoError(t, err)
	require.NotEmpty(t, sandbox)
	out, err := e.crictl("stopp", sandbox)
	require.NoError(t, err, "crictl stopp: %s", out)
	out, err = e.crictl("pods", "--name", "numa-2", "--state", "notready", "-q")
	require.NoError(t, err)
	require.Equal(t, sandbox, out, "the stopped sandbox is still there")
	c.checkNodeInvariants(t)
	e.restartContainerd(t)
	require.Contains(t, c.agent.log.String(), "skipping a pod sandbox that no longer runs")
	c.checkNodeInvariants(t)
	c.stage("a stopped sandbox listed at the resynchronisation is not admitted")
	c.restartKubelet(t)
	pod := waitRunning(t, client, "numa-2")
	require.NotEqual(t, sandbox, pod.Status.ContainerStatuses[0].ContainerID, "numa-2 runs again")
	c.checkNodeInvariants(t)
	deletePod(t, client, "numa-2", 5)
	c.stage("numa-2 started again by the kubelet with its decision")

	// The pods from before the first restart end too: nothing is held.
	deletePod(t, client, "gpu-0", 5)
	deletePod(t, client, "web-0", 5)
	c.checkNodeInvariants(t)
	require.Empty(t, c.checkpointPods(t), "the checkpoint once every pod is gone")
	c.stage("every pod gone, nothing held")
}
