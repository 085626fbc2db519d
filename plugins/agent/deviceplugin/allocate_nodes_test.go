package deviceplugin_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
)

// allocated is what Allocate answers for one container given ids: its
// NVIDIA_VISIBLE_DEVICES and the container paths of its device nodes.
func allocated(t *testing.T, p *deviceplugin.Plugin, ids ...string) (env string, nodes []string) {
	t.Helper()
	resp, err := p.Allocate(context.Background(), &api.AllocateRequest{ContainerRequests: []*api.ContainerAllocateRequest{{DevicesIds: ids}}})
	require.NoError(t, err)
	require.Len(t, resp.GetContainerResponses(), 1)
	c := resp.GetContainerResponses()[0]
	for _, d := range c.GetDevices() {
		require.Equal(t, d.GetContainerPath(), d.GetHostPath())
		require.Equal(t, "rw", d.GetPermissions())
		nodes = append(nodes, d.GetContainerPath())
	}
	return c.GetEnvs()["NVIDIA_VISIBLE_DEVICES"], nodes
}

// TestAllocateGivesTheDecidedNodes: with NoDeviceNodes (the NRI role on),
// Allocate still gives a container the device nodes of its GPUs, with the
// control nodes, when they are exactly its share of its pod's decision
// (whatever the kubelet's order) or its pod has no decision, so that a
// container containerd creates without NRI (the agent down) runs with its
// GPUs; it withholds them when the kubelet's GPUs differ from the share,
// when the pod's decision cannot be read, and when no pod is found.
func TestAllocateGivesTheDecidedNodes(t *testing.T) {
	malformed := gpuPodInfo("malformed", 4, nil, 1)
	malformed.Pod.Annotations[kube.AnnotationAllocation] = "{not a decision"
	pods := &fakePods{pods: []deviceplugin.PodInfo{
		gpuPodInfo("a", 0, []int{3}, 1),
		gpuPodInfo("b", 1, []int{1}, 1),
		gpuPodInfo("two", 2, []int{0, 1}, 2),
		gpuPodInfo("multi", 3, []int{0, 2}, 1, 0, 1),
		malformed,
		gpuPodInfo("plain", 5, nil, 1),
	}}
	kl := &fakeKubelet{}
	p, ev := decidedPlugin(t, pods, kl)

	// Its share: the nodes of its GPU and the control node.
	kl.admitting("a")
	require.Equal(t, []string{"3"}, prefer(t, p, 1, allGPUs...))
	env, nodes := allocated(t, p, "3")
	require.Equal(t, "3", env)
	require.Equal(t, []string{"/dev/nvidia3", "/dev/nvidiactl"}, nodes)
	kl.gave("a", "c0", "3")

	// Other GPUs than its share: the environment only, and the event.
	kl.admitting("b")
	env, nodes = allocated(t, p, "GPU-a0")
	require.Equal(t, "GPU-a0", env)
	require.Empty(t, nodes, "device nodes of a GPU that is not the container's share")
	kl.gave("b", "c0", "GPU-a0")
	require.Len(t, ev.events, 1)
	require.Equal(t, deviceplugin.ReasonGPUsDiffer, ev.events[0].Reason)

	// Its share of two, in another order than the decision's.
	kl.admitting("two")
	env, nodes = allocated(t, p, "GPU-a1", "GPU-a0")
	require.Equal(t, "GPU-a1,GPU-a0", env)
	require.Equal(t, []string{"/dev/nvidia1", "/dev/nvidia0", "/dev/nvidiactl"}, nodes)
	kl.gave("two", "c0", "GPU-a1", "GPU-a0")

	// Each container its share (c1 asks for none).
	kl.admitting("multi")
	_, nodes = allocated(t, p, "GPU-a0")
	require.Equal(t, []string{"/dev/nvidia0", "/dev/nvidiactl"}, nodes, "c0's share")
	kl.gave("multi", "c0", "GPU-a0")
	_, nodes = allocated(t, p, "GPU-a1")
	require.Empty(t, nodes, "c2 given GPU 1, its share is GPU 2")
	kl.gave("multi", "c2", "GPU-a1")

	// A decision that cannot be read: withheld (given a GPU no decision
	// reserves, a's, a has ended).
	pods.pods[0].Terminal = true
	kl.admitting("malformed")
	_, nodes = allocated(t, p, "3")
	require.Empty(t, nodes, "a pod whose decision cannot be read")
	kl.gave("malformed", "c0", "3")

	// A pod without a decision: the kubelet's GPUs are its own.
	for i := range pods.pods {
		if n := pods.pods[i].Pod.Name; n != "plain" {
			pods.pods[i].Terminal = true // gone: their GPUs are free again
		}
	}
	kl.admitting("plain")
	env, nodes = allocated(t, p, "GPU-b0")
	require.Equal(t, "GPU-b0", env)
	require.Equal(t, []string{"/dev/nvidia2", "/dev/nvidiactl"}, nodes)
	kl.gave("plain", "c0", "GPU-b0")

	// No pod found (every container has had its GPUs): withheld.
	_, nodes = allocated(t, p, "GPU-a0")
	require.Empty(t, nodes, "a container no pod is found for")

	require.Equal(t, deviceplugin.Counts{PreferDecision: 1, AllocDecision: 3, AllocDiffers: 2, AllocUndecided: 3}, p.Counts())
}

// TestAllocateWithholdsNodesOnAGuess: the device nodes are withheld when
// the pod is a guess, even when the GPUs are the guessed pod's share or
// the guessed pod has no decision: without the kubelet's pod-resources
// list, and when it lists several pods the kubelet may be admitting.
func TestAllocateWithholdsNodesOnAGuess(t *testing.T) {
	pods := &fakePods{pods: []deviceplugin.PodInfo{
		gpuPodInfo("a", 0, []int{3}, 1),
		gpuPodInfo("plain", 1, nil, 1),
	}}
	p, _ := decidedPlugin(t, pods, nil)
	require.Equal(t, []string{"3"}, prefer(t, p, 1, allGPUs...), "a, the oldest")
	env, nodes := allocated(t, p, "3")
	require.Equal(t, "3", env)
	require.Empty(t, nodes, "a's share, a guessed without the pod-resources API")
	_, nodes = allocated(t, p, "GPU-a0")
	require.Empty(t, nodes, "plain, guessed without the pod-resources API")
	require.Equal(t, deviceplugin.Counts{PreferDecision: 1, AllocDecision: 1, AllocUndecided: 1}, p.Counts())

	// The kubelet lists both, neither with devices: two candidates.
	kl := &fakeKubelet{}
	p, _ = decidedPlugin(t, &fakePods{pods: []deviceplugin.PodInfo{
		gpuPodInfo("a", 0, []int{3}, 1),
		gpuPodInfo("b", 0, []int{1}, 1),
	}}, kl)
	kl.admitting("a")
	kl.admitting("b")
	require.Equal(t, []string{"3"}, prefer(t, p, 1, allGPUs...), "a, first by name")
	_, nodes = allocated(t, p, "3")
	require.Empty(t, nodes, "a's share, but the kubelet may be admitting b")
	require.Equal(t, deviceplugin.Counts{PreferDecision: 1, AllocDecision: 1}, p.Counts())
}
