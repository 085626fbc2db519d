package kubelet

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
)

// trainClaim is a claim of GPUs 2,3 and NIC mlx5_1 (node 2 of
// smallMachine), reserved for pod default/train.
func trainClaim() ClaimHold {
	return ClaimHold{UID: "uid-claim-train", Namespace: "default", Name: "train-gpus",
		Pods: []ClaimConsumer{{Name: "train", UID: "uid-train"}},
		GPUs: []int{3, 2}, Devices: map[string][]string{"rdma": {"mlx5_1"}}}
}

func TestHoldClaim(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	require.NoError(t, n.HoldClaim(trainClaim()))
	got, ok := n.Claim("uid-claim-train")
	require.True(t, ok)
	require.Equal(t, []int{2, 3}, got.GPUs, "sorted")
	require.Equal(t, "default/train-gpus", got.Key())
	require.Equal(t, []ClaimHold{got}, n.ClaimsOfPod("uid-train"))
	require.Empty(t, n.ClaimsOfPod("uid-other"))
	require.Equal(t, map[int]string{2: "default/train-gpus", 3: "default/train-gpus"}, n.ClaimedGPUs())

	// Idempotent: the same claim again changes nothing; new pods are taken.
	require.NoError(t, n.HoldClaim(trainClaim()))
	more := trainClaim()
	more.Pods = append(more.Pods, ClaimConsumer{Name: "eval", UID: "uid-eval"})
	require.NoError(t, n.HoldClaim(more))
	require.Len(t, n.ClaimsOfPod("uid-eval"), 1)
	// Other devices under the same UID: refused.
	other := trainClaim()
	other.GPUs = []int{2}
	require.ErrorIs(t, n.HoldClaim(other), ErrClaimHeldDifferently)

	// Another claim of GPU 3: refused, naming the holder.
	var te *TopologyAffinityError
	err := n.HoldClaim(ClaimHold{UID: "uid-c2", Namespace: "team", Name: "c2", GPUs: []int{3, 1}})
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, ErrTopologyAffinity)
	require.Equal(t, "team/c2", te.Claim)
	require.Empty(t, te.Pod)
	require.Equal(t, []Conflict{{Resource: "gpu", Items: "GPU 3", Problem: "is held by ResourceClaim default/train-gpus",
		HeldByClaim: "default/train-gpus"}}, te.Conflicts)
	require.Contains(t, err.Error(), "GPU 3 is held by ResourceClaim default/train-gpus")
	_, ok = n.Claim("uid-c2")
	require.False(t, ok, "nothing held on refusal")

	// A decision naming a claimed GPU is refused with the claim named.
	_, err = n.Admit(gpuDecision(gpuPod("decided"), 2))
	require.ErrorAs(t, err, &te)
	require.Equal(t, []Conflict{{Resource: "gpu", Items: "GPU 2", Problem: "is held by ResourceClaim default/train-gpus",
		HeldByClaim: "default/train-gpus"}}, te.Conflicts)
	// A decision naming the claimed NIC too.
	d := kube.Decision{Policy: 0, NUMANodes: []int{}, GPUs: []kube.DecisionGPU{}, MemoryMiB: map[string]int64{},
		Devices: map[string][]string{"rdma": {"mlx5_1"}}}
	_, err = n.Admit(withDecision(gpuPod("nic"), d))
	require.ErrorAs(t, err, &te)
	require.Equal(t, `rdma device "mlx5_1" is held by ResourceClaim default/train-gpus`, te.Reason)

	// The kubelet giving a shared-pool pod a claimed GPU: refused.
	_, err = n.Admit(gpuPod("plain"))
	require.NoError(t, err)
	err = n.SetKubeletGPUs("default/plain", "main", []int{3})
	require.ErrorAs(t, err, &te)
	require.Equal(t, "GPU 3 is held by ResourceClaim default/train-gpus", te.Reason)

	// A pod the node places itself avoids the claimed GPUs: only 0 and 1
	// are left, so 2 GPUs fit and 3 do not.
	adm, err := n.Admit(numaPod("local", 1, 2, "Restricted"))
	require.NoError(t, err)
	require.Equal(t, []kube.DecisionGPU{{ID: 0, UUID: "GPU-0"}, {ID: 1, UUID: "GPU-1"}}, adm.GPUs)

	// Release: the GPUs are free again; a second release says unknown.
	require.NoError(t, n.ReleaseClaim("uid-claim-train"))
	require.ErrorIs(t, n.ReleaseClaim("uid-claim-train"), allocator.ErrUnknownID)
	require.Empty(t, n.Claims())
	require.NoError(t, n.SetKubeletGPUs("default/plain", "main", []int{3}))
}

func TestHoldClaimRefusals(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	var te *TopologyAffinityError

	// A GPU a pod's decision holds: the pod is named.
	_, err := n.Admit(gpuDecision(gpuPod("decided"), 1))
	require.NoError(t, err)
	err = n.HoldClaim(ClaimHold{UID: "u1", Namespace: "ns", Name: "c", GPUs: []int{1}})
	require.ErrorAs(t, err, &te)
	require.Equal(t, []Conflict{{Resource: "gpu", Items: "GPU 1", Problem: "is held by pod default/decided",
		HeldBy: "default/decided"}}, te.Conflicts)

	// A GPU the kubelet gave a shared-pool pod (the device plugin): named.
	_, err = n.Admit(gpuPod("plain"))
	require.NoError(t, err)
	require.NoError(t, n.SetKubeletGPUs("default/plain", "main", []int{0}))
	err = n.HoldClaim(ClaimHold{UID: "u1", Namespace: "ns", Name: "c", GPUs: []int{0}})
	require.ErrorAs(t, err, &te)
	require.Equal(t, "GPU 0 is held by pod default/plain (container main, given by the kubelet outside numaplace's decisions)", te.Reason)
	require.Equal(t, "default/plain", te.Conflicts[0].HeldBy)

	// An unhealthy GPU.
	_, err = n.SetDeviceHealth("gpu", "3", false)
	require.NoError(t, err)
	err = n.HoldClaim(ClaimHold{UID: "u1", Namespace: "ns", Name: "c", GPUs: []int{3}})
	require.ErrorAs(t, err, &te)
	require.Equal(t, "GPU 3 is unhealthy", te.Reason)

	// Bad holds.
	require.ErrorIs(t, n.HoldClaim(ClaimHold{UID: "u1", Namespace: "ns", Name: "c", GPUs: []int{9}}), allocator.ErrUnknownDevice)
	require.ErrorIs(t, n.HoldClaim(ClaimHold{UID: "u1", Namespace: "ns", Name: "c", Devices: map[string][]string{"rdma": {"mlx5_9"}}}), allocator.ErrUnknownDevice)
	require.ErrorContains(t, n.HoldClaim(ClaimHold{UID: "a/b", Namespace: "ns", Name: "c"}), "UID")
	require.ErrorContains(t, n.HoldClaim(ClaimHold{UID: "u1", Name: "c"}), "namespace and name are required")
	require.Empty(t, n.Claims())

	// A claimed GPU that turns unhealthy stays held; health changes do not
	// report the claim as an affected pod.
	require.NoError(t, n.HoldClaim(ClaimHold{UID: "u2", Namespace: "ns", Name: "ok", GPUs: []int{2}}))
	affected, err := n.SetDeviceHealth("gpu", "2", false)
	require.NoError(t, err)
	require.Empty(t, affected)
	_, ok := n.Claim("u2")
	require.True(t, ok)
}

func TestHoldClaimCheckpointFailureUndoes(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	n.write = func(string, []byte) error { return errors.New("disk full") }
	require.ErrorContains(t, n.HoldClaim(trainClaim()), "disk full")
	require.Empty(t, n.Claims())
	require.Empty(t, n.ClaimedGPUs())
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)

	n.write = writeFileAtomic
	require.NoError(t, n.HoldClaim(trainClaim()))
	n.write = func(string, []byte) error { return errors.New("disk full") }
	require.ErrorContains(t, n.ReleaseClaim("uid-claim-train"), "disk full")
	_, ok := n.Claim("uid-claim-train")
	require.True(t, ok, "the release is undone")
	err = n.HoldClaim(ClaimHold{UID: "x", Namespace: "ns", Name: "x", GPUs: []int{2}})
	require.ErrorIs(t, err, ErrTopologyAffinity, "the GPUs are held again")
}

// TestClaimsInTheCheckpoint: claims are written under "claims" and read
// back by a new node (an agent restart), which keeps refusing their GPUs.
func TestClaimsInTheCheckpoint(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	require.NoError(t, n.HoldClaim(trainClaim()))
	require.NoError(t, n.HoldClaim(ClaimHold{UID: "uid-a", Namespace: "a", Name: "first", GPUs: []int{0}}))
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(file), `"version": 2,`)
	d := dataOf(t, file)
	require.Equal(t, []any{
		map[string]any{"uid": "uid-a", "namespace": "a", "name": "first", "gpus": []any{0.0}},
		map[string]any{"uid": "uid-claim-train", "namespace": "default", "name": "train-gpus",
			"pods": []any{map[string]any{"name": "train", "uid": "uid-train"}}, "gpus": []any{2.0, 3.0},
			"devices": map[string]any{"rdma": []any{"mlx5_1"}}},
	}, d["claims"])

	again, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	require.Equal(t, n.Claims(), again.Claims())
	var te *TopologyAffinityError
	_, err = again.Admit(gpuDecision(gpuPod("decided"), 0))
	require.ErrorAs(t, err, &te)
	require.Equal(t, "GPU 0 is held by ResourceClaim a/first", te.Reason)
}

// TestClaimsCheckpointVersions: a version-1 file (before claims) is read;
// one with claims is refused, as are claims that name what the machine
// lacks, overlap, or overlap a pod's GPUs.
func TestClaimsCheckpointVersions(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	_, err := n.Admit(gpuDecision(gpuPod("decided"), 1))
	require.NoError(t, err)
	_, err = n.Admit(gpuPod("plain"))
	require.NoError(t, err)
	require.NoError(t, n.SetKubeletGPUs("default/plain", "main", []int{0}))
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	var f checkpointFile
	require.NoError(t, json.Unmarshal(file, &f))

	// Version 1 as this package wrote it before claims: the same data.
	p := filepath.Join(t.TempDir(), "v1.json")
	require.NoError(t, os.WriteFile(p, resign(t, 1, f.Data), 0o600))
	old, err := Open(m, p, NodeOptions{})
	require.NoError(t, err)
	require.Equal(t, summary(n.Admissions()), summary(old.Admissions()))
	require.NoError(t, old.HoldClaim(trainClaim()))
	rewritten, err := os.ReadFile(p)
	require.NoError(t, err)
	require.True(t, bytes.Contains(rewritten, []byte(`"version": 2,`)), "rewritten as version 2 at the next change")

	claim := func(c map[string]any) []byte {
		d := dataOf(t, file)
		d["claims"] = []any{c}
		return mustJSON(t, d)
	}
	good := map[string]any{"uid": "u", "namespace": "ns", "name": "c", "gpus": []any{2}}
	for _, tc := range []struct {
		name    string
		file    []byte
		problem string
	}{
		{"claims in version 1", resign(t, 1, claim(good)), "claims in a version-1 checkpoint"},
		{"unknown GPU", resign(t, 2, claim(map[string]any{"uid": "u", "namespace": "ns", "name": "c", "gpus": []any{7}})),
			"claims[0] (ns/c): GPU 7 is not a GPU of this machine"},
		{"unknown NIC", resign(t, 2, claim(map[string]any{"uid": "u", "namespace": "ns", "name": "c", "devices": map[string]any{"rdma": []any{"mlx5_7"}}})),
			`claims[0] (ns/c): "rdma" device "mlx5_7" is not a device of this machine`},
		{"no UID", resign(t, 2, claim(map[string]any{"namespace": "ns", "name": "c"})), "claims[0] (ns/c): no usable UID"},
		{"unknown field", resign(t, 2, claim(map[string]any{"uid": "u", "namespace": "ns", "name": "c", "gpu": []any{2}})), "malformed data"},
		{"a decision's GPU", resign(t, 2, claim(map[string]any{"uid": "u", "namespace": "ns", "name": "c", "gpus": []any{1}})),
			"inconsistent with this machine"},
		{"a kubelet GPU", resign(t, 2, claim(map[string]any{"uid": "u", "namespace": "ns", "name": "c", "gpus": []any{0}})),
			"GPU 0 is recorded as given by the kubelet to pod default/plain and held by ResourceClaim ns/c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "checkpoint.json")
			require.NoError(t, os.WriteFile(p, tc.file, 0o600))
			_, err := Open(m, p, NodeOptions{})
			var ce *CheckpointError
			require.ErrorAs(t, err, &ce)
			require.Contains(t, ce.Problem, tc.problem)
		})
	}
	// The good claim itself is read.
	p = filepath.Join(t.TempDir(), "good.json")
	require.NoError(t, os.WriteFile(p, resign(t, 2, claim(good)), 0o600))
	ok, err := Open(m, p, NodeOptions{})
	require.NoError(t, err)
	require.Equal(t, []int{2}, ok.Claims()[0].GPUs)
}
