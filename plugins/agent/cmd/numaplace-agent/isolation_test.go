package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// oneGPUPlainPod is a pod without a NUMA spec that asks numaplace-scheduler
// for one aliyun.com/gpu and a tenth of a CPU (the shared pool's).
func oneGPUPlainPod(name string) *corev1.Pod {
	pod := ackGPUPod(name)
	pod.Annotations = nil
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
		"aliyun.com/gpu": resource.MustParse("1")}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: res, Limits: res}
	return pod
}

// TestGPUPodWithoutSpecStaysOnTheSharedPool: a GPU pod without a NUMA
// spec, placed by numaplace-scheduler (a None decision with an empty
// cpuset), beside a SingleNUMANode pod's exclusive CPU, runs on the
// shared pool only, with its decision's GPU, and follows the pool when the
// exclusive pod leaves.
func TestGPUPodWithoutSpecStaysOnTheSharedPool(t *testing.T) {
	c := startKubeletCluster(t)
	e, client := c.e, c.client
	ctx := context.Background()

	_, err := client.CoreV1().Pods("default").Create(ctx, ackGPUPod("exclusive"), metav1.CreateOptions{})
	require.NoError(t, err)
	pod := waitRunning(t, client, "exclusive")
	d := checkPlacement(t, e, client, pod)
	c.stage("exclusive pod running with its decision")

	_, err = client.CoreV1().Pods("default").Create(ctx, oneGPUPlainPod("plain"), metav1.CreateOptions{})
	require.NoError(t, err)
	pod = waitRunning(t, client, "plain")
	pd, err := kube.ParseDecision(pod.Annotations[kube.AnnotationAllocation])
	require.NoError(t, err, "plain's decision")
	require.Equal(t, policy.None, pd.Policy, "plain's decision: %+v", pd)
	require.Empty(t, pd.CPUSet, "plain's decision holds no CPUs")
	require.Len(t, pd.GPUs, 1, "plain's decision")
	exclusive, err := numa.ParseCPUSet(d.CPUSet)
	require.NoError(t, err)
	pool := numa.NewCPUSet(0, 1).Difference(exclusive).String()

	ctr := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	cpus := e.status(t, ctr, "Cpus_allowed_list")
	t.Logf("pod plain: decision %s; in its container: Cpus_allowed_list %s (the exclusive pod holds %s), NVIDIA_VISIBLE_DEVICES=%s",
		pod.Annotations[kube.AnnotationAllocation], cpus, d.CPUSet, e.envOf(t, ctr)["NVIDIA_VISIBLE_DEVICES"])
	require.Equal(t, pool, cpus, "plain runs on the shared pool, not on the exclusive pod's CPU %s", d.CPUSet)
	require.Equal(t, pd.GPUs[0].UUID, e.envOf(t, ctr)["NVIDIA_VISIBLE_DEVICES"], "plain's GPU is its decision's")
	require.Contains(t, podLog(t, client, "plain"), "Cpus_allowed_list:\t"+pool+"\n", "plain's CPUs when it started")
	c.checkNodeInvariants(t)
	c.stage("plain: the shared pool beside the exclusive pod's CPU")

	// The exclusive pod leaves: plain gets every CPU, as the shared pool.
	deletePod(t, client, "exclusive", 5)
	e.waitCPUs(t, ctr, "0-1", "the shared pool after the exclusive pod left")
	c.checkNodeInvariants(t)
	c.stage("plain follows the shared pool")
	deletePod(t, client, "plain", 5)
	c.checkNodeInvariants(t)
}
