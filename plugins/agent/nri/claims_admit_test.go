package nri_test

import (
	"errors"
	"log/slog"
	"maps"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	nri "github.com/numaplace/numaplace/plugins/agent/nri"
)

// ackSpec is the spec (as the pod lookup returns it) of the sandbox's
// pod: its NUMA spec annotations and a container c-main asking for cpus
// CPUs and gpus aliyun.com/gpu, and a container c-side asking for 1 CPU.
func ackSpec(sbAnnotations map[string]string, name string, cpus, gpus string) *kube.Pod {
	main := map[string]string{"cpu": cpus}
	if gpus != "" {
		main[kube.ResourceAliyunGPU] = gpus
	}
	side := map[string]string{"cpu": "1"}
	return &kube.Pod{Namespace: "default", Name: name, UID: "uid-" + name, Annotations: maps.Clone(sbAnnotations),
		Containers: []kube.Container{{Name: "c-main", Requests: main, Limits: maps.Clone(main)},
			{Name: "c-side", Requests: side, Limits: maps.Clone(side)}}}
}

// TestNUMAPodWithClaimGPUs: a pod with a NUMA spec and no decision whose
// ResourceClaims hold GPUs (prepared by the DRA role before its sandbox
// runs) is admitted with those GPUs serving its request, its CPUs on their
// NUMA node, never other GPUs; the container using the claim sees the
// claim's GPUs once, the other none. Without its spec it is refused for
// want of a decision, as before; when its policy cannot be met with the
// claimed GPUs it is refused naming the claim.
func TestNUMAPodWithClaimGPUs(t *testing.T) {
	root := devRoot(t, "nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl")
	m := machine(t)
	gpus, err := devices.New(m, root, nil)
	require.NoError(t, err)
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	ack := numaPod("sb-ack", "ack", "")
	split := numaPod("sb-split", "split", "")
	lookup := specs{"default/ack": ackSpec(ack.Annotations, "ack", "2", "2"),
		"default/split": ackSpec(split.Annotations, "split", "1", "2")}
	ev := &events{}
	p, err := nri.New(node, nri.Options{Logger: slog.New(slog.DiscardHandler), GPUs: gpus, Pods: lookup, Events: ev})
	require.NoError(t, err)
	t.Cleanup(p.Close)

	// GPUs 0 and 1 (node 0) are free and the engine's first pick; the
	// claim's are 2 and 3, on node 1.
	require.NoError(t, node.HoldClaim(kubelet.ClaimHold{UID: "c-ack", Namespace: "default", Name: "ack-gpu-xyz",
		Pods: []kubelet.ClaimConsumer{{Name: "ack", UID: "uid-ack"}}, GPUs: []int{2, 3}}))
	require.NoError(t, p.RunPodSandbox(ctx, ack))
	adm, ok := node.Get("default/ack")
	require.True(t, ok)
	require.Equal(t, []kube.DecisionGPU{{ID: 2, UUID: "GPU-b0"}, {ID: 3, UUID: "GPU-b1"}}, adm.GPUs)
	require.Equal(t, []string{"default/ack-gpu-xyz"}, adm.Claims)
	require.Equal(t, 3, adm.CPUs.Size())
	require.True(t, adm.CPUs.IsSubsetOf(numa.CPURange(8, 15)), "CPUs %s are not node 1's", adm.CPUs)

	main := withDevices(ctr("m1", ack, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b0,GPU-b1"), "/dev/nvidia2", "/dev/nvidia3", "/dev/nvidiactl")
	main.Name = "c-main"
	adj, _, err := p.CreateContainer(ctx, ack, main)
	require.NoError(t, err)
	cpus, mems := cpuset(adj)
	require.Equal(t, adm.CPUs.String(), cpus)
	require.Equal(t, "1", mems)
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-b0,GPU-b1"}, envOf(adj), "the claim's GPUs, each once")
	_, removed := deviceChanges(adj)
	require.ElementsMatch(t, []string{"/dev/nvidia0", "/dev/nvidia1"}, removed)
	side := ctr("s1", ack, "", "")
	side.Name = "c-side"
	adj, _, err = p.CreateContainer(ctx, ack, side)
	require.NoError(t, err)
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=void"}, envOf(adj), "a container using no claim gets no GPU")
	added, _ := deviceChanges(adj)
	require.Empty(t, added)

	// Removed: its CPUs are free, the claim keeps GPUs 2 and 3.
	require.NoError(t, p.RemovePodSandbox(ctx, ack))
	_, ok = node.Get("default/ack")
	require.False(t, ok)
	require.Equal(t, map[int]string{2: "default/ack-gpu-xyz", 3: "default/ack-gpu-xyz"}, node.ClaimedGPUs())

	// SingleNUMANode with claimed GPUs on two nodes: refused, the claim
	// named, recorded as an event.
	require.NoError(t, node.ReleaseClaim("c-ack"))
	require.NoError(t, node.HoldClaim(kubelet.ClaimHold{UID: "c-split", Namespace: "default", Name: "split-gpus",
		Pods: []kubelet.ClaimConsumer{{Name: "split", UID: "uid-split"}}, GPUs: []int{1, 2}}))
	err = p.RunPodSandbox(ctx, split)
	var re *nri.RefusedError
	require.ErrorAs(t, err, &re)
	require.Equal(t, nri.ReasonTopologyAffinityError, re.Reason)
	require.ErrorIs(t, err, kubelet.ErrTopologyAffinity)
	require.ErrorContains(t, err, "its GPUs come from ResourceClaim default/split-gpus (GPUs 1, 2, on NUMA nodes [0 1])")
	t.Logf("split: %v", err)

	// Not found by the lookup: refused for want of a decision, as before.
	lost := numaPod("sb-lost", "lost", "")
	require.NoError(t, node.HoldClaim(kubelet.ClaimHold{UID: "c-lost", Namespace: "default", Name: "lost-gpus",
		Pods: []kubelet.ClaimConsumer{{Name: "lost", UID: "uid-lost"}}, GPUs: []int{3}}))
	err = p.RunPodSandbox(ctx, lost)
	require.True(t, errors.Is(err, nri.ErrNoDecision), "%v", err)
	// A NUMA pod without claims and without a decision: refused as before,
	// even when its spec is known.
	lookup["default/noclaim"] = ackSpec(ack.Annotations, "noclaim", "1", "1")
	err = p.RunPodSandbox(ctx, numaPod("sb-noclaim", "noclaim", ""))
	require.True(t, errors.Is(err, nri.ErrNoDecision), "%v", err)
}
