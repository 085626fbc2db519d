package main

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeRebootWithStaleCheckpoint "reboots" the node: with the agent,
// the kubelet and containerd down, every pod sandbox and container is gone
// and containerd's runtime state is emptied, while the agent's checkpoint
// still lists the pods. The agent, started again, releases them (nothing
// is held for pods that no longer exist); the kubelet then starts the pods
// again, and they get their decisions.
func TestNodeRebootWithStaleCheckpoint(t *testing.T) {
	c := startKubeletCluster(t)
	e, client := c.e, c.client
	ctx := context.Background()
	for _, p := range []*corev1.Pod{ackGPUPod("numa-0"), oneGPUPlainPod("gpu-0")} {
		_, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	before := map[string]string{}
	for _, name := range []string{"numa-0", "gpu-0"} {
		before[name] = containerIDs(t, waitRunning(t, client, name))["main"]
	}
	c.checkNodeInvariants(t)
	c.stage("two pods running")

	// The node goes down: the agent first (its checkpoint keeps the pods),
	// then the kubelet; the pods' sandboxes and containers are gone and
	// containerd's runtime state (its state directory, a tmpfs on a real
	// node) is emptied.
	c.agent.stop(t)
	require.Len(t, c.checkpointPods(t), 2, "the agent's checkpoint lists the pods")
	c.kubelet.stop()
	out, err := e.crictl("rmp", "--all", "--force")
	require.NoError(t, err, "crictl rmp --all: %s", out)
	e.stopContainerd(syscall.SIGTERM)
	require.NoError(t, os.RemoveAll(filepath.Join(e.dir, "state")))
	c.stage("node down: no sandbox left, containerd's state emptied")

	// It comes back: containerd, then the agent, which finds no pod
	// running and releases the checkpoint's.
	e.runContainerd(t)
	out, err = e.crictl("pods", "-q")
	require.NoError(t, err)
	require.Empty(t, out, "no sandbox after the reboot")
	c.agent = e.startAgent(t, c.agentArgs...)
	require.Empty(t, c.checkpointPods(t), "the checkpoint after the agent's reconciliation")
	require.Contains(t, c.agent.log.String(), "removed pod: in the checkpoint but no longer running")
	require.Eventually(t, func() bool {
		return nrtAvailable(c.dyn, "node-0", "cpu") == "1" && nrtAvailable(c.dyn, "node-1", "cpu") == "1" &&
			nrtAvailable(c.dyn, "node-0", "aliyun.com/gpu") == "2" && nrtAvailable(c.dyn, "node-1", "aliyun.com/gpu") == "2"
	}, 60*time.Second, 200*time.Millisecond, "the NodeResourceTopology still holds the pods that no longer exist")
	c.stage("agent back: the stale pods released, the report full")

	// The kubelet starts the pods again (their API objects are still
	// there), with their decisions. A restarted kubelet admits pods before
	// the device plugin has registered again and may fail a GPU pod's
	// admission (UnexpectedAdmissionError, the kubelet's behaviour): such a
	// pod is created again, as its controller would.
	c.restartKubelet(t)
	for name, old := range before {
		var pod *corev1.Pod
		require.Eventually(t, func() bool {
			var err error
			pod, err = client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			if pod.Status.Phase == corev1.PodFailed {
				return true
			}
			ids := containerIDs(t, pod)
			return pod.Status.Phase == corev1.PodRunning && ids["main"] != "" && ids["main"] != old &&
				len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].Ready
		}, 90*time.Second, 200*time.Millisecond, "pod %s neither runs again nor failed: %s", name, describe(client, name))
		if pod.Status.Phase == corev1.PodFailed {
			t.Logf("pod %s after the reboot: %s %s: %s; created again", name, pod.Status.Phase, pod.Status.Reason, pod.Status.Message)
			deletePod(t, client, name, 0)
			again := ackGPUPod(name)
			if name == "gpu-0" {
				again = oneGPUPlainPod(name)
			}
			_, err := client.CoreV1().Pods("default").Create(ctx, again, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	checkPlacement(t, e, client, waitRunning(t, client, "numa-0"))
	waitRunning(t, client, "gpu-0")
	c.checkNodeInvariants(t)
	deletePod(t, client, "numa-0", 5)
	deletePod(t, client, "gpu-0", 5)
	c.checkNodeInvariants(t)
	require.Empty(t, c.checkpointPods(t))
	c.stage("kubelet back: the pods run again with their decisions, then go")
}
