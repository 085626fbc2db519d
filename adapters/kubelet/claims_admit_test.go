package kubelet

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/numa"
)

// ackClaim is a claim of the GPUs reserved for pod default/<pod> (UID
// uid-<pod>), as the DRA driver holds it once the kubelet prepared it.
func ackClaim(name, pod string, gpus ...int) ClaimHold {
	return ClaimHold{UID: "uid-claim-" + name, Namespace: "default", Name: name,
		Pods: []ClaimConsumer{{Name: pod, UID: "uid-" + pod}}, GPUs: gpus}
}

// A NUMA pod without a decision whose claims hold GPUs gets those GPUs
// for its request and its CPUs beside them, never other GPUs.
func TestAdmitWithClaimGPUsAligned(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	require.NoError(t, n.HoldClaim(ackClaim("ack-gpus", "ack", 2, 3)))
	adm, err := n.Admit(numaPod("ack", 2, 2, "SingleNUMANode"))
	require.NoError(t, err)
	// GPUs 0 and 1 are free and would be the engine's first pick; the
	// claim's are on node 2, so the CPUs are there too.
	require.Equal(t, []kube.DecisionGPU{{ID: 2, UUID: "GPU-2"}, {ID: 3, UUID: "GPU-3"}}, adm.GPUs)
	require.Equal(t, []string{"default/ack-gpus"}, adm.Claims)
	require.True(t, adm.CPUs.IsSubsetOf(numa.CPURange(4, 6)), "CPUs %s are not node 2's free ones", adm.CPUs)
	require.Equal(t, 2, adm.CPUs.Size())
	require.Equal(t, []numa.NodeID{2}, adm.NUMANodes)
	require.Empty(t, adm.Allocation.GPUs, "the claim holds the GPUs, not the pod's allocation")
	require.Equal(t, "GPU-2,GPU-3", adm.VisibleDevices(), "each claimed GPU named once")
	require.Equal(t, map[int]string{2: "default/ack-gpus", 3: "default/ack-gpus"}, n.ClaimedGPUs())
	// Admitting it again is the same admission.
	again, err := n.Admit(numaPod("ack", 2, 2, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, adm, again)
	got, ok := n.Get("default/ack")
	require.True(t, ok)
	require.Equal(t, adm, got)

	// A pod asking for no GPUs, with a claim of GPU 0: GPU 0 is its own.
	require.NoError(t, n.HoldClaim(ackClaim("own", "own", 0)))
	own, err := n.Admit(numaPod("own", 1, 0, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, []kube.DecisionGPU{{ID: 0, UUID: "GPU-0"}}, own.GPUs)
	require.True(t, own.CPUs.IsSubsetOf(numa.CPURange(0, 3)), "CPUs %s", own.CPUs)

	// A claim reserved for another pod does not count: this pod is placed
	// as before, on the GPU left (1).
	other, err := n.Admit(numaPod("other", 1, 1, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, []kube.DecisionGPU{{ID: 1, UUID: "GPU-1"}}, other.GPUs)
	require.Empty(t, other.Claims)
	require.Equal(t, []int{1}, other.Allocation.GPUs)
}

// Restricted and BestEffort place the CPUs as they would with the claimed
// GPUs fixed: claimed GPUs on both nodes give a span of both.
func TestAdmitWithClaimGPUsRestricted(t *testing.T) {
	for _, pol := range []string{"Restricted", "BestEffort"} {
		t.Run(pol, func(t *testing.T) {
			m := smallMachine(t)
			n, _ := openTemp(t, m)
			require.NoError(t, n.HoldClaim(ackClaim("split", "ack", 1, 2)))
			adm, err := n.Admit(numaPod("ack", 2, 2, pol))
			require.NoError(t, err)
			require.Equal(t, []kube.DecisionGPU{{ID: 1, UUID: "GPU-1"}, {ID: 2, UUID: "GPU-2"}}, adm.GPUs)
			require.Equal(t, []numa.NodeID{0, 2}, adm.NUMANodes)
			require.Equal(t, 2, adm.CPUs.Size())
			require.Empty(t, adm.Allocation.GPUs)
		})
	}
}

func TestAdmitWithClaimGPUsRefused(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	var te *TopologyAffinityError

	// SingleNUMANode with claimed GPUs on two NUMA nodes: no placement.
	require.NoError(t, n.HoldClaim(ackClaim("split", "ack", 1, 2)))
	_, err := n.Admit(numaPod("ack", 1, 2, "SingleNUMANode"))
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, ErrTopologyAffinity)
	require.Equal(t, "default/ack", te.Pod)
	require.Contains(t, te.Reason, "its GPUs come from ResourceClaim default/split (GPUs 1, 2, on NUMA nodes [0 2])")
	require.Contains(t, te.Reason, "SingleNUMANode policy cannot place its 1 CPUs")
	require.Equal(t, []Conflict{{Resource: "gpu", Items: "GPUs 1, 2", Problem: "are held by ResourceClaim default/split",
		HeldByClaim: "default/split"}}, te.Conflicts)
	t.Logf("refused: %v", err)
	_, ok := n.Get("default/ack")
	require.False(t, ok, "nothing admitted on refusal")
	require.Equal(t, m.CPUs().Difference(m.ReservedCPUs()), n.s.FreeCPUs())

	// More CPUs than the claimed GPUs' node has free (node 2: 4-6, 7 is
	// reserved), though node 0 has 4.
	require.NoError(t, n.HoldClaim(ackClaim("node2", "big", 3)))
	_, err = n.Admit(numaPod("big", 4, 1, "SingleNUMANode"))
	require.ErrorAs(t, err, &te)
	require.Contains(t, te.Reason, "ResourceClaim default/node2 (GPUs 3, on NUMA nodes [2])")

	// A request for another number of GPUs than the claims hold.
	require.NoError(t, n.ReleaseClaim("uid-claim-split"))
	require.NoError(t, n.HoldClaim(ackClaim("two", "one", 0, 2)))
	_, err = n.Admit(numaPod("one", 1, 1, "Restricted"))
	require.ErrorIs(t, err, kube.ErrInvalidPod)
	require.False(t, errors.Is(err, ErrTopologyAffinity))
	require.ErrorContains(t, err, "it requests 1 GPUs, and its ResourceClaim default/two hold 2 (GPUs 0, 2)")
	require.Empty(t, n.Admissions())
}

// The admission survives a restart from the checkpoint; removing the pod
// frees its CPUs and memory, not its claim's GPUs.
func TestAdmitWithClaimGPUsCheckpointAndRemove(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	require.NoError(t, n.HoldClaim(ackClaim("ack-gpus", "ack", 2, 3)))
	adm, err := n.Admit(numaPod("ack", 2, 2, "SingleNUMANode"))
	require.NoError(t, err)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"claimGPUs": [`)
	require.Contains(t, string(raw), `"default/ack-gpus"`)

	again, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	got, ok := again.Get("default/ack")
	require.True(t, ok)
	require.Equal(t, adm, got)
	require.Equal(t, n.Claims(), again.Claims())
	readmitted, err := again.Admit(numaPod("ack", 2, 2, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, adm, readmitted)
	// Asked again for other amounts: refused as a different admission.
	_, err = again.Admit(numaPod("ack", 3, 2, "SingleNUMANode"))
	require.ErrorIs(t, err, ErrAdmittedDifferently)

	require.NoError(t, again.Remove(numaPod("ack", 2, 2, "SingleNUMANode")))
	require.Equal(t, m.CPUs().Difference(m.ReservedCPUs()), again.s.FreeCPUs(), "the pod's CPUs are free")
	require.Equal(t, map[int]string{2: "default/ack-gpus", 3: "default/ack-gpus"}, again.ClaimedGPUs(), "the claim keeps its GPUs")
	// A pod the node places gets the GPUs left, not the claim's.
	p, err := again.Admit(numaPod("next", 1, 2, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, p.Allocation.GPUs)
	require.NoError(t, again.ReleaseClaim("uid-claim-ack-gpus"))
	require.Empty(t, again.ClaimedGPUs())
}

// A checkpoint whose claim-placed pod is malformed is refused, naming it.
func TestCheckpointClaimGPUsChecked(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	require.NoError(t, n.HoldClaim(ackClaim("ack-gpus", "ack", 2, 3)))
	_, err := n.Admit(numaPod("ack", 2, 2, "SingleNUMANode"))
	require.NoError(t, err)
	other, err := n.Admit(numaPod("other", 1, 1, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, []int{0}, other.Allocation.GPUs)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	for name, edit := range map[string]func(p map[string]any){
		"GPU 9 is not a GPU of this machine": func(p map[string]any) { p["claimGPUs"] = []any{9} },
		"recorded together":                  func(p map[string]any) { delete(p, "claims") },
		"GPU 0 is recorded as pod default/ack's from its claims and held by pod default/other's allocation": func(p map[string]any) {
			p["claimGPUs"] = []any{0}
		},
	} {
		bad := editCheckpointPod(t, raw, "default/ack", edit)
		p := filepath.Join(t.TempDir(), "checkpoint.json")
		require.NoError(t, os.WriteFile(p, bad, 0o644))
		_, err := Open(m, p, NodeOptions{})
		var ce *CheckpointError
		require.ErrorAs(t, err, &ce, name)
		require.Contains(t, ce.Problem, name)
	}
}

// editCheckpointPod returns the checkpoint file with the pod's entry
// changed by edit, signed again.
func editCheckpointPod(t *testing.T, file []byte, key string, edit func(map[string]any)) []byte {
	t.Helper()
	d := dataOf(t, file)
	for _, p := range d["pods"].([]any) {
		if p := p.(map[string]any); p["pod"] == key {
			edit(p)
		}
	}
	data, err := json.Marshal(d)
	require.NoError(t, err)
	return resign(t, CheckpointVersion, data)
}
