package kubelet

import (
	"maps"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
)

// withMem returns a copy of pod whose containers request (and are limited
// to) the given memory quantity.
func withMem(pod *kube.Pod, q string) *kube.Pod {
	p := *pod
	p.Containers = nil
	for _, c := range pod.Containers {
		c.Requests, c.Limits = maps.Clone(c.Requests), maps.Clone(c.Limits)
		c.Requests[kube.ResourceMemory], c.Limits[kube.ResourceMemory] = q, q
		p.Containers = append(p.Containers, c)
	}
	return &p
}

// A pod the node places itself reserves its memory per NUMA node with its
// CPUs and GPUs, cpuset.mems follows it, and the checkpoint keeps it; with
// alignment off the memory is left out.
func TestAdmitLocalMemory(t *testing.T) {
	m := smallMachine(t) // nodes 0 and 2, 1024 MiB each
	dir := t.TempDir()
	path := filepath.Join(dir, "cp.json")
	n, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	var nodes []numa.NodeID
	for i := range 2 {
		adm, err := n.Admit(withMem(numaPod("p"+strconv.Itoa(i), 1, 0, "SingleNUMANode"), "800Mi"))
		require.NoError(t, err)
		require.Equal(t, int64(800), adm.Allocation.MemoryMiB())
		require.Equal(t, adm.NUMANodes, adm.MemoryNodes)
		require.Equal(t, strconv.Itoa(int(adm.NUMANodes[0])), adm.Mems())
		nodes = append(nodes, adm.NUMANodes[0])
	}
	require.ElementsMatch(t, []numa.NodeID{0, 2}, nodes, "memory sends the second pod to the other node")
	third := withMem(numaPod("third", 1, 0, "SingleNUMANode"), "800Mi")
	_, err = n.Admit(third)
	var pe *allocator.PlacementError
	require.ErrorIs(t, err, ErrTopologyAffinity)
	require.ErrorAs(t, err, &pe)
	require.Contains(t, err.Error(), "MiB of memory")

	// Admitting again with the same request is the same admission.
	again, err := n.Admit(withMem(numaPod("p0", 1, 0, "SingleNUMANode"), "800Mi"))
	require.NoError(t, err)
	require.Equal(t, int64(800), again.Allocation.MemoryMiB())
	_, err = n.Admit(withMem(numaPod("p0", 1, 0, "SingleNUMANode"), "900Mi"))
	require.ErrorIs(t, err, ErrAdmittedDifferently)
	require.Contains(t, err.Error(), "800 MiB of memory")

	// The checkpoint keeps the memory; the report shows it used.
	n2, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	before, after := n.Admissions(), n2.Admissions()
	require.Len(t, after, len(before))
	for i := range before {
		require.Equal(t, before[i].Pod, after[i].Pod)
		require.True(t, before[i].CPUs.Equal(after[i].CPUs))
		require.Equal(t, before[i].Mems(), after[i].Mems())
		require.Equal(t, before[i].Allocation.Memory, after[i].Allocation.Memory)
	}
	r, err := n2.Report("node")
	require.NoError(t, err)
	for _, z := range r.Zones {
		res, ok := z.Resource(kube.ResourceMemory)
		require.True(t, ok)
		require.Equal(t, kube.NRTQuantity("224Mi"), res.Available, z.Name)
	}

	// With alignment off (as the node's label says), memory is left out.
	off, err := Open(m, filepath.Join(dir, "off.json"), NodeOptions{DisableMemoryAlignment: true})
	require.NoError(t, err)
	for i := range 3 {
		adm, err := off.Admit(withMem(numaPod("p"+strconv.Itoa(i), 1, 0, "SingleNUMANode"), "800Mi"))
		require.NoError(t, err)
		require.Zero(t, adm.Allocation.MemoryMiB())
		require.Equal(t, adm.NUMANodes, adm.MemoryNodes, "cpuset.mems is the span")
	}
}

// A decision's memory is claimed as written: cpuset.mems is the nodes of
// the memory, not the whole span; memory that is not free is a conflict
// naming the pods holding it; a decision reserving another amount than the
// pod requests is refused, one reserving none is the scheduler's choice.
func TestAdmitDecisionMemory(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	d := kube.Decision{CPUSet: "0,4", NUMANodes: []int{0, 2}, MemoryMiB: map[string]int64{"0": 600, "2": 0}}
	pod := withMem(numaPod("a", 2, 0, "Restricted"), "600Mi")
	adm, err := n.Admit(withDecision(pod, d))
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{0, 2}, adm.NUMANodes)
	require.Equal(t, []numa.NodeID{0}, adm.MemoryNodes)
	require.Equal(t, "0", adm.Mems())

	// 600 MiB more on node 0: only 424 are free.
	d2 := kube.Decision{CPUSet: "1", NUMANodes: []int{0}, MemoryMiB: map[string]int64{"0": 600}}
	_, err = n.Admit(withDecision(withMem(numaPod("b", 1, 0, "SingleNUMANode"), "600Mi"), d2))
	var tae *TopologyAffinityError
	require.ErrorAs(t, err, &tae)
	require.Equal(t, []Conflict{{Resource: "memory", Items: "600 MiB of memory on NUMA node 0",
		Problem: "is more than the 424 MiB free there of 1024 MiB; held by pods default/a (600 MiB)"}}, tae.Conflicts)

	// Another amount than the request.
	_, err = n.Admit(withDecision(withMem(numaPod("c", 1, 0, "SingleNUMANode"), "100Mi"),
		kube.Decision{CPUSet: "2", NUMANodes: []int{0}, MemoryMiB: map[string]int64{"0": 200}}))
	require.ErrorIs(t, err, kube.ErrInvalidDecision)
	require.Contains(t, err.Error(), "reserves 200 MiB of memory, the pod requests 100 MiB")

	// None reserved (alignment off where the scheduler decided): admitted,
	// cpuset.mems the span.
	adm, err = n.Admit(withDecision(withMem(numaPod("d", 1, 0, "SingleNUMANode"), "2Gi"),
		kube.Decision{CPUSet: "5", NUMANodes: []int{2}, MemoryMiB: map[string]int64{"2": 0}}))
	require.NoError(t, err)
	require.Equal(t, "2", adm.Mems())
	require.Zero(t, adm.Allocation.MemoryMiB())
}
