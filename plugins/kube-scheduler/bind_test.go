package numaplace

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/numaplace/numaplace/topology"
)

// TestBindAfterMachineChange: a node's machine changes between Reserve and
// Bind so that the pod's reservation no longer holds: Bind fails before it
// posts anything (the pod is tried again, never bound without its
// decision), and PreBindPreFlight skips, since Bind carries the decision.
func TestBindAfterMachineChange(t *testing.T) {
	h100, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	spec := h100.Spec()
	spec.GPUs, spec.Devices = nil, nil
	noGPUs, err := spec.Build()
	require.NoError(t, err)
	ctx := context.Background()
	e := newTestEvents(t)
	pl := e.pl
	pl.pathOnce.Do(func() { pl.path = writeByBind }) // no framework handle here: the handle is never reached
	e.nodeChanged(machineNode(t, "gpu-1", h100, true))
	p := numaPod("a", "SingleNUMANode", 8, 2)
	state := preFilter(t, pl, p)
	require.True(t, pl.Reserve(ctx, state, p, "gpu-1").IsSuccess())
	_, st := pl.PreBindPreFlight(ctx, state, p, "gpu-1")
	require.True(t, st.IsSkip(), "PreBindPreFlight when NUMAPlace binds: %v", st)
	require.True(t, pl.PreBind(ctx, state, p, "gpu-1").IsSuccess())
	e.nodeChanged(machineNode(t, "gpu-1", noGPUs, true))
	st = pl.Bind(ctx, state, p, "gpu-1")
	require.Equal(t, fwk.Error, st.Code(), "Bind of a pod whose reservation is gone: %v", st)
}
