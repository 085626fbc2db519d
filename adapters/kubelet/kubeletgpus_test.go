package kubelet

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
)

// gpuDecision is a None decision with the GPUs and no CPUs, as
// numaplace-scheduler writes for a pod asking aliyun.com/gpu without a
// NUMA spec.
func gpuDecision(pod *kube.Pod, ids ...int) *kube.Pod {
	d := kube.Decision{Policy: 0, CPUSet: "", NUMANodes: []int{}, GPUs: []kube.DecisionGPU{}, MemoryMiB: map[string]int64{}}
	for _, id := range ids {
		d.GPUs = append(d.GPUs, kube.DecisionGPU{ID: id, UUID: "GPU-" + string(rune('0'+id))})
	}
	return withDecision(pod, d)
}

func gpuPod(name string) *kube.Pod {
	p := sharedPod(name)
	p.Containers[0].Limits[kube.ResourceAliyunGPU] = "1"
	return p
}

func TestKubeletGPUsAgainstDecisions(t *testing.T) {
	m := smallMachine(t)
	for _, order := range []string{"decision first", "kubelet first"} {
		t.Run(order, func(t *testing.T) {
			n, path := openTemp(t, m)
			decided := gpuDecision(gpuPod("decided"), 2)
			plain := gpuPod("plain")
			_, err := n.Admit(plain)
			require.NoError(t, err)
			var te *TopologyAffinityError
			if order == "decision first" {
				_, err = n.Admit(decided)
				require.NoError(t, err)
				// The kubelet gave the plain pod the decided GPU: refused,
				// the holder named; nothing recorded.
				err = n.SetKubeletGPUs("default/plain", "main", []int{2})
				require.ErrorAs(t, err, &te)
				require.ErrorIs(t, err, ErrTopologyAffinity)
				require.Equal(t, []Conflict{{Resource: "gpu", Items: "GPU 2",
					Problem: "is held by pod default/decided (its numaplace allocation)", HeldBy: "default/decided"}}, te.Conflicts)
				adm, _ := n.Get("default/plain")
				require.Nil(t, adm.KubeletGPUs)
				// Another GPU is fine.
				require.NoError(t, n.SetKubeletGPUs("default/plain", "main", []int{3}))
				return
			}
			require.NoError(t, n.SetKubeletGPUs("default/plain", "main", []int{2}))
			adm, _ := n.Get("default/plain")
			require.Equal(t, map[string][]int{"main": {2}}, adm.KubeletGPUs)
			// A decision naming the GPU the kubelet gave the plain pod is
			// refused, naming it, and again after a restart from the
			// checkpoint.
			_, err = n.Admit(decided)
			require.ErrorAs(t, err, &te)
			require.Equal(t, "GPU 2 is held by pod default/plain (container main, given by the kubelet outside numaplace's decisions)", te.Reason)
			require.Equal(t, "default/plain", te.Conflicts[0].HeldBy)
			n2, err := Open(m, path, NodeOptions{})
			require.NoError(t, err)
			adm, _ = n2.Get("default/plain")
			require.Equal(t, map[string][]int{"main": {2}}, adm.KubeletGPUs)
			_, err = n2.Admit(decided)
			require.ErrorAs(t, err, &te)
			require.Equal(t, "default/plain", te.Conflicts[0].HeldBy)
			// A node placement does not take it either.
			_, err = n2.Admit(numaPod("local", 1, 2, "SingleNUMANode"))
			require.ErrorAs(t, err, &te)
			require.Equal(t, "default/plain", te.Conflicts[0].HeldBy, te.Reason)
			// Released with the pod: the decision is admitted.
			require.NoError(t, n2.Remove(plain))
			_, err = n2.Admit(decided)
			require.NoError(t, err)
		})
	}
}

func TestSetKubeletGPUsRefusals(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	require.ErrorIs(t, n.SetKubeletGPUs("default/none", "main", []int{0}), allocator.ErrUnknownID)
	_, err := n.Admit(gpuDecision(gpuPod("decided"), 1))
	require.NoError(t, err)
	require.ErrorIs(t, n.SetKubeletGPUs("default/decided", "main", []int{1}), ErrNotShared)
	_, err = n.Admit(gpuPod("a"))
	require.NoError(t, err)
	_, err = n.Admit(gpuPod("b"))
	require.NoError(t, err)
	require.ErrorIs(t, n.SetKubeletGPUs("default/a", "main", []int{9}), allocator.ErrUnknownDevice)
	require.NoError(t, n.SetKubeletGPUs("default/a", "main", []int{0}))
	require.NoError(t, n.SetKubeletGPUs("default/a", "main", []int{0}), "the same GPUs again")
	require.NoError(t, n.SetKubeletGPUs("default/a", "init", []int{0}), "another container of the same pod (an init container's GPUs reused)")
	err = n.SetKubeletGPUs("default/b", "main", []int{0, 3})
	var te *TopologyAffinityError
	require.True(t, errors.As(err, &te), "%v", err)
	require.Equal(t, "GPU 0 is held by pod default/a (container init, given by the kubelet outside numaplace's decisions)", te.Reason)
}

func TestKubeletGPUsCheckpointFailureUndoes(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	_, err := n.Admit(gpuPod("a"))
	require.NoError(t, err)
	n.write = func(string, []byte) error { return errors.New("disk full") }
	require.ErrorContains(t, n.SetKubeletGPUs("default/a", "main", []int{0}), "disk full")
	adm, _ := n.Get("default/a")
	require.Nil(t, adm.KubeletGPUs)
}

// TestKubeletGPUsInTheCheckpoint: the kubelet's GPUs of a shared-pool pod
// are written under kubeletGPUs and read back; a file that records them
// for an exclusive pod, names a GPU the machine lacks, or gives one a
// decision holds is refused, naming the problem.
func TestKubeletGPUsInTheCheckpoint(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	_, err := n.Admit(gpuDecision(gpuPod("decided"), 1))
	require.NoError(t, err)
	_, err = n.Admit(gpuPod("plain"))
	require.NoError(t, err)
	require.NoError(t, n.SetKubeletGPUs("default/plain", "main", []int{3, 2}))
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	d := dataOf(t, file)
	pods := d["pods"].([]any)
	plain := pods[1].(map[string]any)
	require.Equal(t, "default/plain", plain["pod"])
	require.Equal(t, map[string]any{"main": []any{2.0, 3.0}}, plain["kubeletGPUs"])

	for _, tc := range []struct {
		name, problem string
		edit          func(pods []any)
	}{
		{"an exclusive pod", "pods[0] (default/decided): kubelet GPUs recorded for a pod with exclusive resources",
			func(pods []any) { pods[0].(map[string]any)["kubeletGPUs"] = map[string]any{"main": []any{0}} }},
		{"an unknown GPU", `pods[1] (default/plain): kubeletGPUs of container "main": GPU 9 is not a GPU of this machine`,
			func(pods []any) { pods[1].(map[string]any)["kubeletGPUs"] = map[string]any{"main": []any{9}} }},
		{"a decision's GPU", "GPU 1 is recorded as given by the kubelet to pod default/plain and held by pod default/decided's allocation",
			func(pods []any) { pods[1].(map[string]any)["kubeletGPUs"] = map[string]any{"main": []any{1}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dataOf(t, file)
			tc.edit(d["pods"].([]any))
			p := filepath.Join(t.TempDir(), "checkpoint.json")
			require.NoError(t, os.WriteFile(p, resign(t, CheckpointVersion, mustJSON(t, d)), 0o600))
			_, err := Open(m, p, NodeOptions{})
			var ce *CheckpointError
			require.ErrorAs(t, err, &ce)
			require.Contains(t, ce.Problem, tc.problem)
		})
	}
}
