package numaplace_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/numaplace/numaplace/adapters/kube"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// TestPlainGPUPodDecision: a GPU pod without a NUMA spec gets a decision
// (policy None) that says neither "exclusive":"Required" (the rule does not
// bind it) nor "memoryMiB":{"N":0}.
func TestPlainGPUPodDecision(t *testing.T) {
	c := newFakeCluster(t)
	c.create(node(t, "gpu-0", "dgx-h100", true, false), pod("plain-gpu", "", 2, 1))
	c.start(nil)
	got := c.waitBound("plain-gpu")
	ann := got.Annotations[kube.AnnotationAllocation]
	require.NotContains(t, ann, `"exclusive"`)
	require.Contains(t, ann, `"memoryMiB":{}`)
	d := decision(t, got)
	require.Len(t, d.GPUs, 1)
	require.Empty(t, d.MemoryMiB)
}

// TestNvidiaGPURefusalNamesTheOption: a NUMA pod asking for nvidia.com/gpu
// is refused with a message that names the resource and the acceptNvidiaGPU
// option; with the option it is placed.
func TestNvidiaGPURefusalNamesTheOption(t *testing.T) {
	c := newFakeCluster(t)
	n := node(t, "gpu-0", "dgx-h100", true, false)
	n.Status.Capacity[kube.ResourceNvidiaGPU] = resource.MustParse("8")
	n.Status.Allocatable[kube.ResourceNvidiaGPU] = resource.MustParse("8")
	p := pod("nv", "SingleNUMANode", 8, 0)
	for _, l := range []v1.ResourceList{p.Spec.Containers[0].Resources.Requests, p.Spec.Containers[0].Resources.Limits} {
		l[kube.ResourceNvidiaGPU] = resource.MustParse("2")
	}
	c.create(n, p)
	first := c.start(nil)
	msg := c.waitUnschedulable("nv")
	require.Contains(t, msg, "asks for GPUs as nvidia.com/gpu: use aliyun.com/gpu instead, or set the option acceptNvidiaGPU: true")
	first.stop()
	c.start(&numaplace.Args{AcceptNvidiaGPU: true})
	got := c.waitBound("nv")
	require.Len(t, decision(t, got).GPUs, 2)
}

// TestNeverFitReasonNotHidden: on two full dgx-a100 nodes (two GPUs per
// NUMA node) a 4-GPU SingleNUMANode pod is refused by NodeResourcesFit
// first (Insufficient aliyun.com/gpu); the pod's message also says that no
// NUMA node of those machines can ever hold 4 GPUs.
func TestNeverFitReasonNotHidden(t *testing.T) {
	c := newFakeCluster(t)
	for _, n := range []string{"a1", "a2"} {
		c.create(node(t, n, "dgx-a100", true, false))
		c.create(decided(n+"-all", n, "0-7", 0, 1, 2, 3, 4, 5, 6, 7))
	}
	c.start(nil)
	c.create(pod("four", "SingleNUMANode", 8, 4))
	msg := c.waitUnschedulable("four")
	t.Logf("message: %s", msg)
	require.Contains(t, msg, "2 Insufficient aliyun.com/gpu")
	require.Contains(t, msg, "numaplace: 2 node(s) refused by other plugins can never hold the pod either: no NUMA node can hold 4 GPUs", msg)
}
