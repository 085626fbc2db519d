package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podResourceGPUs lists the kubelet's pod-resources API (List on its
// pod-resources socket) and returns the aliyun.com/gpu device IDs of each
// pod's containers as "namespace/name/container" -> IDs, sorted.
func (c *kubeletCluster) podResourceGPUs(t *testing.T) map[string][]string {
	t.Helper()
	resp := listPodResources(t, c.e)
	out := map[string][]string{}
	for _, p := range resp {
		for _, ctr := range p.GetContainers() {
			for _, d := range ctr.GetDevices() {
				if d.GetResourceName() == "aliyun.com/gpu" {
					key := p.GetNamespace() + "/" + p.GetName() + "/" + ctr.GetName()
					out[key] = append(out[key], d.GetDeviceIds()...)
				}
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// TestKubeletRestartWithPodsRunning restarts the kubelet with pods
// running: the agent's device plugin registers again (the node offers its
// four GPUs), the pods keep their containers, the pod-resources API names
// the same GPUs as before, and a pod started after the restart gets its
// decision.
func TestKubeletRestartWithPodsRunning(t *testing.T) {
	c := startKubeletCluster(t)
	e, client := c.e, c.client
	ctx := context.Background()
	for _, p := range []*corev1.Pod{ackGPUPod("numa-0"), oneGPUPlainPod("gpu-0")} {
		_, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	before := map[string]map[string]string{}
	for _, name := range []string{"numa-0", "gpu-0"} {
		before[name] = containerIDs(t, waitRunning(t, client, name))
	}
	c.checkNodeInvariants(t)
	gpus := c.podResourceGPUs(t)
	require.Len(t, gpus, 2, "pod-resources: %v", gpus)
	t.Logf("pod-resources before the kubelet's restart: %v", gpus)
	c.stage("two pods running")

	registered := func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, kubeletNode, metav1.GetOptions{})
		g := n.Status.Allocatable["aliyun.com/gpu"]
		return err == nil && g.Value() == 4
	}
	c.restartKubelet(t)
	require.Eventually(t, registered, 90*time.Second, 200*time.Millisecond,
		"the restarted kubelet does not offer the agent's 4 GPUs; the agent's log:\n%s", c.agent.log)
	require.Contains(t, c.agent.log.String(), "registered with the kubelet")
	c.stage("kubelet restarted, the device plugin registered again")
	for name, ids := range before {
		pod := waitRunning(t, client, name)
		require.Equal(t, ids, containerIDs(t, pod), "pod %s's containers after the kubelet's restart", name)
	}
	var after map[string][]string
	require.Eventually(t, func() bool {
		after = c.podResourceGPUs(t)
		return len(after) == len(gpus)
	}, 60*time.Second, 200*time.Millisecond, "pod-resources after the kubelet's restart: %v", after)
	require.Equal(t, gpus, after, "pod-resources after the kubelet's restart")
	c.checkNodeInvariants(t)

	// A pod started after the restart gets its decision; the node's only
	// exclusive CPU is numa-0's until it goes.
	deletePod(t, client, "numa-0", 5)
	_, err := client.CoreV1().Pods("default").Create(ctx, ackGPUPod("numa-1"), metav1.CreateOptions{})
	require.NoError(t, err)
	checkPlacement(t, e, client, waitRunning(t, client, "numa-1"))
	c.checkNodeInvariants(t)
	deletePod(t, client, "numa-1", 5)
	deletePod(t, client, "gpu-0", 5)
	c.checkNodeInvariants(t)
	require.Empty(t, c.checkpointPods(t))
	c.stage("after the kubelet's restart, pods come and go with their decisions")
}
