package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// handPod is a pod bound by hand to the node (no scheduler) whose
// containers ask for the GPUs, with the decision dec ("" for none).
func handPod(name, dec string, gpus ...int) *corev1.Pod {
	pod := plainGPUPod(name, gpus)
	pod.Spec.SchedulerName, pod.Spec.NodeName = "", kubeletNode
	if dec != "" {
		pod.Annotations = map[string]string{"numaplace.io/allocation": dec}
	}
	return pod
}

// waitFailed waits until the kubelet has failed the pod with a message
// containing want, and returns the message.
func waitFailed(t *testing.T, client kubernetes.Interface, name, want string) string {
	t.Helper()
	var msg string
	require.Eventually(t, func() bool {
		pod, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || pod.Status.Phase != corev1.PodFailed {
			return false
		}
		msg = pod.Status.Reason + ": " + pod.Status.Message
		return strings.Contains(pod.Status.Message, want)
	}, 60*time.Second, 100*time.Millisecond, "pod %s was not failed with %q: %s", name, want, describe(client, name))
	return msg
}

// visibleGPUs returns, for every running container of the namespace's
// pods, the GPUs its NVIDIA_VISIBLE_DEVICES names, and fails when one GPU
// is in two containers.
func visibleGPUs(t *testing.T, e *kubeletEnv, client kubernetes.Interface) map[string]string {
	t.Helper()
	pods, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	seen := map[string]string{}
	for _, pod := range pods.Items {
		for _, st := range pod.Status.ContainerStatuses {
			if st.State.Running == nil {
				continue
			}
			v := e.envOf(t, strings.TrimPrefix(st.ContainerID, "containerd://"))["NVIDIA_VISIBLE_DEVICES"]
			if v == "" || v == "void" {
				continue
			}
			for _, u := range strings.Split(v, ",") {
				require.Empty(t, seen[u], "GPU %s is in %s and in %s/%s", u, seen[u], pod.Name, st.Name)
				seen[u] = pod.Name + "/" + st.Name
			}
		}
	}
	return seen
}

// TestGPUsOutsideDecisionsOnTheKubelet: pods that ask for aliyun.com/gpu
// without numaplace's scheduler (bound by nodeName) never share a GPU
// with a decision, in both orders of arrival and across a restart of the
// agent:
//
//   - a decision first: the kubelet is steered off the decided GPU, and
//     when it has no other choice the device plugin's Allocate refuses,
//     the holder named in the pod's status (the kubelet fails it);
//   - the kubelet's GPU first: after the agent restarts (its checkpoint
//     keeps the GPU the kubelet gave), a decision naming that GPU is
//     refused by the node, the pod and container holding it named, until
//     that pod is deleted; then the decided pod starts with its GPU.
func TestGPUsOutsideDecisionsOnTheKubelet(t *testing.T) {
	c := startKubeletClusterWith(t, kubeletClusterOptions{})
	e, client, stage := c.e, c.client, c.stage
	ctx := context.Background()
	gpus := fakeGPUs

	// A decision holding GPU 3 that the kubelet counts as free: its pod
	// asks for no aliyun.com/gpu (a decision written by hand), so the
	// kubelet has not allocated GPU 3 to anyone.
	_, err := client.CoreV1().Pods("default").Create(ctx, handPod("holder", handDecision(gpus, []int{3}), 0), metav1.CreateOptions{})
	require.NoError(t, err)
	waitAllRunning(t, client, []string{"holder"})
	stage("holder: GPU 3 decided, the kubelet's record empty")

	// A plain pod asking for 3 GPUs: steered off GPU 3.
	_, err = client.CoreV1().Pods("default").Create(ctx, handPod("steered", "", 3), metav1.CreateOptions{})
	require.NoError(t, err)
	waitAllRunning(t, client, []string{"steered"})
	listed := podResources(t, e)
	require.ElementsMatch(t, []string{gpus[0].uuid, gpus[1].uuid, gpus[2].uuid}, listed["steered"]["c0"],
		"the kubelet's GPUs of steered: all but the decided GPU 3")
	visibleGPUs(t, e, client)
	deletePod(t, client, "steered", 1)
	stage("steered: the kubelet given GPUs 0-2, not the decided 3")

	// A plain pod asking for all 4: the kubelet has to give it GPU 3;
	// Allocate refuses, naming the holder, and the kubelet fails the pod.
	_, err = client.CoreV1().Pods("default").Create(ctx, handPod("taker", "", 4), metav1.CreateOptions{})
	require.NoError(t, err)
	want := fmt.Sprintf("GPU 3 (%s) is held by pod default/holder (its numaplace decision)", gpus[3].uuid)
	msg := waitFailed(t, client, "taker", want)
	t.Logf("taker: %s", msg)
	waitEvent(t, client, "taker", "NUMAPlacementGPUHeld", want)
	visibleGPUs(t, e, client)
	stage("taker: refused by Allocate, the holder named")
	deletePod(t, client, "taker", 0)
	deletePod(t, client, "holder", 1)

	// The other order: a plain pod gets a GPU from the kubelet ...
	_, err = client.CoreV1().Pods("default").Create(ctx, handPod("early", "", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	waitAllRunning(t, client, []string{"early"})
	listed = podResources(t, e)
	require.Len(t, listed["early"]["c0"], 1)
	g := -1
	for i, fg := range gpus {
		if fg.uuid == listed["early"]["c0"][0] {
			g = i
		}
	}
	require.NotEqual(t, -1, g, "early's GPU %v", listed["early"]["c0"])
	stage(fmt.Sprintf("early: GPU %d from the kubelet", g))

	// ... the agent restarts (its checkpoint keeps early's GPU) ...
	c.agent.stop(t)
	c.agent = e.startAgent(t, c.agentArgs...)
	stage("agent restarted")

	// ... and a decision naming that GPU is refused, early named.
	_, err = client.CoreV1().Pods("default").Create(ctx, handPod("late", handDecision(gpus, []int{g}), 1), metav1.CreateOptions{})
	require.NoError(t, err)
	conflict := fmt.Sprintf("GPU %d is held by pod default/early (container c0, given by the kubelet outside numaplace's decisions)", g)
	waitEvent(t, client, "late", "FailedCreatePodSandBox", conflict)
	waitEvent(t, client, "late", "TopologyAffinityError", conflict)
	visibleGPUs(t, e, client)
	stage("late: refused by the node, early named")

	// Once early is gone, late starts with its decided GPU.
	deletePod(t, client, "early", 1)
	pods := waitAllRunning(t, client, []string{"late"})
	id := strings.TrimPrefix(pods["late"].Status.ContainerStatuses[0].ContainerID, "containerd://")
	require.Equal(t, gpus[g].uuid, e.envOf(t, id)["NVIDIA_VISIBLE_DEVICES"], "late's GPU")
	seen := visibleGPUs(t, e, client)
	require.Equal(t, map[string]string{gpus[g].uuid: "late/c0"}, seen)
	stage("early deleted: late runs with its decided GPU")
}
