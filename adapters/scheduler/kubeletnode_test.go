package scheduler_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
)

// guaranteedPod is a pod without a NUMA spec of Guaranteed QoS with whole
// CPUs and nvidia.com/gpu, the shape the kubelet's static CPU manager and
// Topology Manager align.
func guaranteedPod(name string, cpus, gpus int) *kube.Pod {
	res := map[string]string{kube.ResourceCPU: strconv.Itoa(cpus), kube.ResourceMemory: "1Gi"}
	if gpus > 0 {
		res[kube.ResourceNvidiaGPU] = strconv.Itoa(gpus)
	}
	return &kube.Pod{Namespace: "default", Name: name, Containers: []kube.Container{{Name: "main", Requests: res, Limits: res}}}
}

func TestKubeletPolicyNodes(t *testing.T) {
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "snn", Machine: preset(t, "dgx-a100"), KubeletPolicy: topologymanager.PolicySingleNUMANode},
		scheduler.Node{Name: "be", Machine: preset(t, "dgx-a100"), KubeletPolicy: topologymanager.PolicyBestEffort})

	// 4 GPUs on a dgx-a100 (2 per GPU node): single-numa-node refuses,
	// best-effort admits on the GPU nodes {1,3}.
	big := guaranteedPod("big", 24, 4)
	err := c.Filter(big, "snn")
	require.ErrorIs(t, err, scheduler.ErrKubeletRefusal)
	require.Contains(t, err.Error(), "TopologyAffinityError")
	require.NoError(t, c.Filter(big, "be"))
	res, err := c.ScheduleOne(big)
	require.NoError(t, err)
	require.Equal(t, "be", res.Node, "never sent where the kubelet refuses it")
	require.Empty(t, res.Annotations, "the kubelet decides on its own node: no decision annotation")
	ps, ok := c.Pod(big.Key())
	require.True(t, ok)
	require.Equal(t, []int{0, 1, 2, 3}, ps.Allocation.GPUs, "the GPUs of the hint's nodes 1 and 3")
	require.Equal(t, []numa.NodeID{1, 3}, ps.Allocation.NUMANodes())

	// 2 GPUs fit one NUMA node: single-numa-node admits it there.
	small := guaranteedPod("small", 8, 2)
	require.NoError(t, c.Reserve(small, "snn"))
	st, _ := c.Node("snn")
	require.Equal(t, 6, st.FreeGPUs)
	require.Equal(t, st.AllocatableCPUs-8, st.SharedCPUs.Size(), "8 exclusive CPUs")
	ps, _ = c.Pod(small.Key())
	require.Len(t, ps.Allocation.NUMANodes(), 1)

	// A pod with a NUMA spec does not go to such nodes.
	err = c.Filter(numaPod("spec", 8, 1, "SingleNUMANode"), "snn")
	require.ErrorIs(t, err, scheduler.ErrNotOptedIn)
	require.Contains(t, err.Error(), "Topology Manager")

	// A burstable pod takes no exclusive CPUs and skips the prediction.
	require.NoError(t, c.Filter(plainPod("burst", "500m", 0), "snn"))

	// An unknown policy is refused.
	_, err = scheduler.New(scheduler.Config{})
	require.NoError(t, err)
	err = c.AddNode(scheduler.Node{Name: "bad", Machine: preset(t, "dgx-a100"), KubeletPolicy: "strict"})
	require.ErrorIs(t, err, scheduler.ErrInvalidNode)
}

// TestKubeletPolicyNodeNeverRefusedAtAdmission: everything the cache
// places on a single-numa-node kubelet node sits on one NUMA node, as the
// kubelet would have admitted it.
func TestKubeletPolicyNodeNeverRefusedAtAdmission(t *testing.T) {
	m := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Machine: m, KubeletPolicy: topologymanager.PolicySingleNUMANode})
	for i, shape := range [][2]int{{24, 4}, {16, 2}, {8, 1}, {24, 4}, {8, 1}, {4, 0}} {
		p := guaranteedPod("p"+strconv.Itoa(i), shape[0], shape[1])
		if c.Filter(p, "n") != nil {
			continue
		}
		require.NoError(t, c.Reserve(p, "n"))
		ps, ok := c.Pod(p.Key())
		require.True(t, ok)
		require.Equal(t, "n", ps.Node)
		require.Len(t, ps.Allocation.NUMANodes(), 1, "%s: single-numa-node admits one NUMA node", p.Name)
	}
}

// TestKubeletPolicyNodeTotals: on a node of the kubelet's own policy the
// cache's rules judge what the kubelet's managers give the pod, with the
// same words as elsewhere: the minimum shared pool is named as such, and
// the GPUs counted are every GPU resource the device manager serves.
func TestKubeletPolicyNodeTotals(t *testing.T) {
	m := preset(t, "dgx-a100") // 256 CPUs, 8 GPUs
	c := newCache(t, scheduler.Config{MinSharedCPUs: 250},
		scheduler.Node{Name: "be", Machine: m, KubeletPolicy: topologymanager.PolicyBestEffort})
	fe := requireRefusal(t, c.Filter(guaranteedPod("eight", 8, 0), "be"), scheduler.ErrSharedPool,
		"the machine has too few CPUs to give 8 CPUs exclusively and keep a shared pool of 250 CPUs",
		"taking 8 CPUs exclusively would leave a shared pool of 248 CPUs, below the minimum of 250 CPUs")
	require.True(t, fe.Never)
	require.NoError(t, c.Filter(guaranteedPod("six", 6, 0), "be"))

	c = newCache(t, scheduler.Config{}, scheduler.Node{Name: "be", Machine: m, KubeletPolicy: topologymanager.PolicyBestEffort})
	for i := range 7 {
		require.NoError(t, c.Reserve(guaranteedPod("g"+strconv.Itoa(i), 2, 1), "be"))
	}
	both := guaranteedPod("both", 2, 1)
	both.Containers[0].Requests[kube.ResourceAliyunGPU] = "1"
	both.Containers[0].Limits[kube.ResourceAliyunGPU] = "1"
	requireRefusal(t, c.Filter(both, "be"), allocator.ErrInsufficient, "fewer than 2 free GPUs now",
		"the node has fewer than 2 GPUs left")
}
