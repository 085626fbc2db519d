package kubelet

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// decidedClaimPod is pod default/<name> (UID uid-<name>) with a NUMA spec
// asking for cpus CPUs and gpus GPUs, and the decision naming cpuset, the
// GPUs and the span, as numaplace-scheduler writes it for a pod whose
// claims it allocated.
func decidedClaimPod(name string, cpus, gpus int, pol, cpuset string, span []int, gpuIDs []int, rdma ...string) *kube.Pod {
	p, err := policy.ParsePolicy(pol)
	if err != nil {
		panic(err)
	}
	d := kube.Decision{Policy: p, Exclusive: policy.Required, CPUSet: cpuset, NUMANodes: span}
	for _, g := range gpuIDs {
		d.GPUs = append(d.GPUs, kube.DecisionGPU{ID: g})
	}
	if len(rdma) > 0 {
		d.Devices = map[string][]string{"rdma": rdma}
	}
	pod := withDecision(numaPod(name, cpus, gpus, pol), d)
	pod.UID = "uid-" + name
	return pod
}

// A decision that names the GPUs (and NIC) the pod's own claims hold is
// admitted: the claims keep holding them, the pod's CPUs are claimed as
// written, and a restart from the checkpoint keeps it so.
func TestAdmitDecisionNamingOwnClaims(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	c := ackClaim("aligned-gpus", "aligned", 2, 3)
	require.NoError(t, n.HoldClaim(c))
	nic := ClaimHold{UID: "uid-claim-nic", Namespace: "default", Name: "aligned-nic",
		Pods: []ClaimConsumer{{Name: "aligned", UID: "uid-aligned"}}, Devices: map[string][]string{"rdma": {"mlx5_1"}}}
	require.NoError(t, n.HoldClaim(nic))

	pod := decidedClaimPod("aligned", 2, 0, "SingleNUMANode", "4-5", []int{2}, []int{2, 3}, "mlx5_1")
	adm, err := n.Admit(pod)
	require.NoError(t, err)
	require.Equal(t, FromDecision, adm.Source)
	require.Equal(t, []kube.DecisionGPU{{ID: 2, UUID: "GPU-2"}, {ID: 3, UUID: "GPU-3"}}, adm.GPUs)
	require.Equal(t, []string{"default/aligned-gpus"}, adm.Claims)
	require.Equal(t, "4-5", adm.CPUs.String())
	require.Equal(t, []numa.NodeID{2}, adm.NUMANodes)
	require.Empty(t, adm.Allocation.GPUs, "the claims hold the GPUs, not the pod's allocation")
	require.Empty(t, adm.Allocation.Devices["rdma"], "the claim holds the NIC")
	require.Equal(t, map[int]string{2: "default/aligned-gpus", 3: "default/aligned-gpus"}, n.ClaimedGPUs())

	// The same pod again: the same admission.
	again, err := n.Admit(pod)
	require.NoError(t, err)
	require.Equal(t, adm, again)

	// Restart: the checkpoint keeps the claims' GPUs with the pod.
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"claimGPUs": [`)
	re, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	got, ok := re.Get("default/aligned")
	require.True(t, ok)
	require.Equal(t, adm, got)
	readmitted, err := re.Admit(pod)
	require.NoError(t, err)
	require.Equal(t, adm, readmitted)

	// Removing the pod frees its CPUs; the claims keep their devices.
	require.NoError(t, re.Remove(pod))
	require.Equal(t, m.CPUs().Difference(m.ReservedCPUs()), re.s.FreeCPUs())
	require.Equal(t, map[int]string{2: "default/aligned-gpus", 3: "default/aligned-gpus"}, re.ClaimedGPUs())
}

// A decision whose pod asks for its GPUs as aliyun.com/gpu (the extended
// resource DRA serves through a claim) counts the claims' GPUs for the
// request; Restricted spans both NUMA nodes of its claimed GPUs.
func TestAdmitDecisionNamingOwnClaimsCounts(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	require.NoError(t, n.HoldClaim(ackClaim("wide", "wide", 1, 2)))
	adm, err := n.Admit(decidedClaimPod("wide", 2, 2, "Restricted", "0,4", []int{0, 2}, []int{1, 2}))
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{0, 2}, adm.NUMANodes)
	require.Equal(t, []kube.DecisionGPU{{ID: 1, UUID: "GPU-1"}, {ID: 2, UUID: "GPU-2"}}, adm.GPUs)
}

// What the node refuses when a decision and the pod's own claims do not
// agree; nothing is admitted on refusal.
func TestAdmitDecisionNamingOwnClaimsRefused(t *testing.T) {
	m := smallMachine(t)
	for _, tc := range []struct {
		name string
		pod  *kube.Pod
		want string
	}{
		{"a claimed GPU left out", decidedClaimPod("p", 1, 0, "SingleNUMANode", "4", []int{2}, []int{2}, "mlx5_1"),
			"the pod's claims hold GPU 3 (ResourceClaim default/gpus), which the decision does not name"},
		{"a claimed NIC alone named", decidedClaimPod("p", 1, 0, "SingleNUMANode", "4", []int{2}, nil, "mlx5_1"),
			"the pod's claims hold GPU 2 (ResourceClaim default/gpus), GPU 3 (ResourceClaim default/gpus), which the decision does not name"},
		{"a claimed NIC left out", decidedClaimPod("p", 1, 0, "SingleNUMANode", "4", []int{2}, []int{2, 3}),
			`rdma device "mlx5_1" (ResourceClaim default/nic), which the decision does not name`},
		{"GPUs from claims and not", decidedClaimPod("p", 1, 0, "Restricted", "0", []int{0, 2}, []int{0, 2, 3}, "mlx5_1"),
			"it names GPUs 2, 3, which the pod's ResourceClaims default/gpus hold, and GPUs 0, which they do not"},
		{"another count than the request", decidedClaimPod("p", 1, 3, "SingleNUMANode", "4", []int{2}, []int{2, 3}, "mlx5_1"),
			"it gives 1 CPUs and 2 GPUs, the pod requests 1 CPUs and 3 GPUs"},
		{"a span without the claimed GPUs' node", decidedClaimPod("p", 1, 0, "SingleNUMANode", "0", []int{0}, []int{2, 3}, "mlx5_1"),
			"it names NUMA nodes [0], but its CPUs, GPUs and memory lie on [0 2]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, _ := openTemp(t, m)
			require.NoError(t, n.HoldClaim(ackClaim("gpus", "p", 2, 3)))
			require.NoError(t, n.HoldClaim(ClaimHold{UID: "uid-claim-nic", Namespace: "default", Name: "nic",
				Pods: []ClaimConsumer{{Name: "p", UID: "uid-p"}}, Devices: map[string][]string{"rdma": {"mlx5_1"}}}))
			_, err := n.Admit(tc.pod)
			require.ErrorIs(t, err, kube.ErrInvalidDecision)
			require.False(t, errors.Is(err, ErrTopologyAffinity))
			require.ErrorContains(t, err, tc.want)
			require.Empty(t, n.Admissions())
			require.Equal(t, m.CPUs().Difference(m.ReservedCPUs()), n.s.FreeCPUs())
		})
	}
	// Another pod's claim is still a conflict: its GPUs are not this pod's.
	n, _ := openTemp(t, m)
	require.NoError(t, n.HoldClaim(ackClaim("theirs", "other", 2, 3)))
	_, err := n.Admit(decidedClaimPod("p", 1, 0, "SingleNUMANode", "4", []int{2}, []int{2, 3}))
	var te *TopologyAffinityError
	require.ErrorAs(t, err, &te)
	require.Contains(t, err.Error(), "held by ResourceClaim default/theirs")
}
