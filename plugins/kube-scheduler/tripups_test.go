package numaplace_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
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
