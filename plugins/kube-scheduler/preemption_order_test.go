package numaplace_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// testPreemptionOrder is the operator's mixed-priority trial: on n1 four
// low 1-GPU pods on NUMA node 0 and two middle 2-GPU pods on NUMA node 1; a
// high-priority SingleNUMANode 4-GPU pod evicts the four low pods (the
// lowest highest priority first, as kube-scheduler's DefaultPreemption
// ranks victims), not the two middle ones. Then, with n1 full, n2 holds low
// pods only, four 1-GPU pods on NUMA node 0 and one 4-GPU pod on NUMA node
// 1: a second high pod evicts the one 4-GPU pod (at one priority, the
// fewest victims: numaplace's NUMA-aware search), on n2 rather than the
// middle pods on n1.
func testPreemptionOrder(t *testing.T, c *cluster) {
	c.priorityClasses()
	c.kubelet()
	c.create(node(t, "n1", "dgx-h100", true, false))
	for i := range 4 {
		c.create(c.withPriority(decided(fmt.Sprintf("n1-low-%d", i), "n1", fmt.Sprintf("%d-%d", 2*i, 2*i+1), i), "low"))
	}
	c.create(
		c.withPriority(decided("n1-mid-0", "n1", "56-57", 4, 5), "middle"),
		c.withPriority(decided("n1-mid-1", "n1", "58-59", 6, 7), "middle"),
	)
	c.start(nil)
	c.create(c.withPriority(pod("urgent", "SingleNUMANode", 24, 4), "high"))
	got := c.waitBound("urgent")
	require.Equal(t, "n1", got.Spec.NodeName)
	require.Equal(t, []int{0, 1, 2, 3}, gpuIDs(decision(t, got)))
	require.Equal(t, []string{"n1-mid-0", "n1-mid-1", "urgent"}, c.podNames(), "the four low pods were evicted, not the two middle ones")

	c.create(node(t, "n2", "dgx-h100", true, false))
	for i := range 4 {
		c.create(c.withPriority(decided(fmt.Sprintf("n2-low-%d", i), "n2", fmt.Sprintf("%d-%d", 2*i, 2*i+1), i), "low"))
	}
	c.create(c.withPriority(decided("n2-low-wide", "n2", "56-59", 4, 5, 6, 7), "low"))
	c.create(c.withPriority(pod("urgent-2", "SingleNUMANode", 24, 4), "high"))
	got = c.waitBound("urgent-2")
	require.Equal(t, "n2", got.Spec.NodeName)
	require.Equal(t, []int{4, 5, 6, 7}, gpuIDs(decision(t, got)))
	require.Equal(t, []string{"n1-mid-0", "n1-mid-1", "n2-low-0", "n2-low-1", "n2-low-2", "n2-low-3", "urgent", "urgent-2"}, c.podNames(),
		"one victim, the 4-GPU low pod")
	c.requireNoDoubleHandout()
}

func TestPreemptionByKubernetesOrder(t *testing.T) { testPreemptionOrder(t, newFakeCluster(t)) }

func TestControlPlanePreemptionByKubernetesOrder(t *testing.T) {
	testPreemptionOrder(t, newControlPlaneCluster(t))
}
