package numaplace_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numaplace/numaplace/topology"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// testRestartKeepsMarks: a node whose machine lacks GPU 7 holds a pod whose
// decision names GPUs 4-7 (a misfit). The scheduler marks the node and
// emits one NUMAPlacePodMisfit Event; a restarted scheduler finds the same
// misfit and keeps the condition as it is (its lastTransitionTime too: the
// status does not change) and emits no Event again for the same pod.
func testRestartKeepsMarks(t *testing.T, c *cluster) {
	h100, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	spec := h100.Spec()
	spec.GPUs = slices.DeleteFunc(spec.GPUs, func(g topology.GPUSpec) bool { return *g.ID == 7 })
	spec.NVLinks = slices.DeleteFunc(spec.NVLinks, func(l []int) bool { return l[0] == 7 || l[1] == 7 })
	noGPU7, err := spec.Build()
	require.NoError(t, err)
	js, err := json.Marshal(noGPU7)
	require.NoError(t, err)
	n := node(t, "gpu-1", "dgx-h100", true, false)
	n.Annotations[numaplace.AnnotationTopology] = string(js)
	c.create(n, decided("holder", "gpu-1", "56-67,168-179", 4, 5, 6, 7))

	first := c.start(nil)
	cond := c.nodeCondition("gpu-1", v1.ConditionTrue, numaplace.MarkMisfit)
	require.Len(t, c.nodeEvents("gpu-1", numaplace.EventPodMisfit), 1)
	time.Sleep(1100 * time.Millisecond) // the condition's times have a resolution of a second
	first.stop()

	c.start(nil)
	time.Sleep(2 * time.Second) // give a rewrite or a second Event the time to show
	again := c.nodeCondition("gpu-1", v1.ConditionTrue, numaplace.MarkMisfit)
	require.Equal(t, cond.Message, again.Message)
	require.True(t, cond.LastTransitionTime.Equal(&again.LastTransitionTime),
		"lastTransitionTime %s became %s without a change of status", cond.LastTransitionTime, again.LastTransitionTime)
	require.Len(t, c.nodeEvents("gpu-1", numaplace.EventPodMisfit), 1, "the misfit Event was emitted again")
	n, err = c.client.CoreV1().Nodes().Get(context.Background(), "gpu-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, n.Status.Conditions, 1)
}

func TestRestartKeepsMarks(t *testing.T) { testRestartKeepsMarks(t, newFakeCluster(t)) }

func TestControlPlaneRestartKeepsMarks(t *testing.T) {
	testRestartKeepsMarks(t, newControlPlaneCluster(t))
}
