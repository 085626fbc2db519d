package nri_test

import (
	"log/slog"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	nri "github.com/numaplace/numaplace/plugins/agent/nri"
)

// withDevices returns the container with device nodes at the given paths,
// as the runtime's CDI injection leaves them before NRI sees it.
func withDevices(c *api.Container, paths ...string) *api.Container {
	for _, p := range paths {
		c.Linux.Devices = append(c.Linux.Devices, &api.LinuxDevice{Path: p, Type: "c", Major: 1, Minor: 3})
	}
	return c
}

// TestContainersWithClaims: the GPUs of a pod's ResourceClaims (given by
// the DRA role's CDI spec) stay in its containers: a shared-pool pod's is
// not taken for the kubelet's (which a claimed GPU would be refused as),
// and a pod with a decision keeps them beside the decision's cpuset.
func TestContainersWithClaims(t *testing.T) {
	root := devRoot(t, "nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl")
	m := machine(t)
	gpus, err := devices.New(m, root, nil)
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	p, err := nri.New(node, nri.Options{Logger: slog.New(slog.DiscardHandler), GPUs: gpus})
	require.NoError(t, err)
	t.Cleanup(p.Close)

	// A shared-pool pod whose claim holds GPU 2.
	require.NoError(t, node.HoldClaim(kubelet.ClaimHold{UID: "c1", Namespace: "default", Name: "gpu-claim",
		Pods: []kubelet.ClaimConsumer{{Name: "dra", UID: "uid-dra"}}, GPUs: []int{2}}))
	sb := sharedPod("sb-dra", "dra")
	c := withDevices(ctr("d1", sb, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b0"), "/dev/nvidia2", "/dev/nvidiactl")
	adj, _, err := p.CreateContainer(ctx, sb, c)
	require.NoError(t, err, "a claimed GPU named by the CDI spec is not the kubelet's")
	require.Empty(t, envOf(adj), "the environment CDI set stays")
	_, removed := deviceChanges(adj)
	require.Empty(t, removed)
	adm, _ := node.Get("default/dra")
	require.Nil(t, adm.KubeletGPUs, "nothing recorded as the kubelet's")

	// A second pod of the claim's namespace (a claim shared by several
	// pods: the kubelet prepares it once, for the first) keeps it too.
	second := sharedPod("sb-second", "second")
	_, _, err = p.CreateContainer(ctx, second,
		withDevices(ctr("s1", second, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b0"), "/dev/nvidia2", "/dev/nvidiactl"))
	require.NoError(t, err)
	// A shared-pool pod of another namespace naming the claimed GPU (as
	// the device plugin would name its GPUs) is refused, the claim named.
	other := sharedPod("sb-x", "x")
	other.Namespace = "elsewhere"
	_, _, err = p.CreateContainer(ctx, other, ctr("x1", other, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b0"))
	require.ErrorContains(t, err, "GPU 2 is held by ResourceClaim default/gpu-claim")

	// A pod with a decision (CPUs 0-3, GPU 0) and a claim of GPU 3: the
	// decision's cpuset, both GPUs visible, the claim's node not removed.
	require.NoError(t, node.HoldClaim(kubelet.ClaimHold{UID: "c2", Namespace: "default", Name: "train-claim",
		Pods: []kubelet.ClaimConsumer{{Name: "train", UID: "uid-train"}}, GPUs: []int{3}}))
	train := numaPod("sb-train", "train", decision("0-3", []int{0}, 0))
	adj, _, err = p.CreateContainer(ctx, train,
		withDevices(ctr("t1", train, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b1"), "/dev/nvidia3", "/dev/nvidiactl"))
	require.NoError(t, err)
	cpus, _ := cpuset(adj)
	require.Equal(t, "0-3", cpus)
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-a0,GPU-b1"}, envOf(adj))
	added, removed := deviceChanges(adj)
	require.Contains(t, added, "/dev/nvidia0")
	require.Equal(t, []string{"/dev/nvidia1"}, removed, "the claims' GPUs of its namespace (2 and its own 3) stay")

	// A pod with a decision without GPUs (CPUs only) and a claim: the
	// environment CDI set stays (not "void").
	require.NoError(t, node.HoldClaim(kubelet.ClaimHold{UID: "c3", Namespace: "default", Name: "cpu-pod-claim",
		Pods: []kubelet.ClaimConsumer{{Name: "cpus", UID: "uid-cpus"}}, GPUs: []int{1}}))
	cpuPod := numaPod("sb-cpus", "cpus", decision("8-9", []int{1}))
	adj, _, err = p.CreateContainer(ctx, cpuPod,
		withDevices(ctr("p1", cpuPod, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-a1"), "/dev/nvidia1", "/dev/nvidiactl"))
	require.NoError(t, err)
	cpus, _ = cpuset(adj)
	require.Equal(t, "8-9", cpus)
	require.Empty(t, envOf(adj))
	_, removed = deviceChanges(adj)
	require.Equal(t, []string{"/dev/nvidia0"}, removed, "GPUs 1-3 are claims' of its namespace")
}
