package numaplace

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/numaplace/numaplace/topology"
)

// TestPreBindAfterMachineChange: a node's machine changes between Reserve
// and PreBind so that the pod's reservation no longer holds (the new
// machine has no GPUs): the binding cycle fails (the pod is tried again),
// it never binds the pod without its decision, whether the change comes
// before PreBindPreFlight or between it and PreBind.
func TestPreBindAfterMachineChange(t *testing.T) {
	h100, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	spec := h100.Spec()
	spec.GPUs, spec.Devices = nil, nil
	noGPUs, err := spec.Build()
	require.NoError(t, err)
	ctx := context.Background()
	for _, beforePreFlight := range []bool{true, false} {
		e := newTestEvents(t)
		pl := e.pl
		e.nodeChanged(machineNode(t, "gpu-1", h100, true))
		p := numaPod("a", "SingleNUMANode", 8, 2)
		state := preFilter(t, pl, p)
		require.True(t, pl.Reserve(ctx, state, p, "gpu-1").IsSuccess())
		if beforePreFlight {
			e.nodeChanged(machineNode(t, "gpu-1", noGPUs, true))
		}
		_, st := pl.PreBindPreFlight(ctx, state, p, "gpu-1")
		require.False(t, st.IsSkip(), "PreBindPreFlight skips PreBind of a pod whose reservation is gone")
		if !beforePreFlight {
			e.nodeChanged(machineNode(t, "gpu-1", noGPUs, true))
		}
		st = pl.PreBind(ctx, state, p, "gpu-1")
		require.Equal(t, fwk.Error, st.Code(), "PreBind of a pod whose reservation is gone: %v", st)
	}
}
