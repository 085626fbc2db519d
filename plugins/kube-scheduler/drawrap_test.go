package numaplace

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// TestDRAPreScoreSkips: the DRA plugin's Score runs only for pods with
// ResourceClaims that NUMAPlace does not allocate; for the others the
// framework is told to skip it (DynamicResources' Score is 0 for them on
// every node).
func TestDRAPreScoreSkips(t *testing.T) {
	pl := &DRA{}
	ctx := context.Background()
	plain := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main"}}}}
	claimed := plain.DeepCopy()
	claimed.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: new("gpus")}}

	st := pl.PreScore(ctx, framework.NewCycleState(), plain, nil)
	require.Equal(t, fwk.Skip, st.Code(), "a pod without claims: %v", st)
	require.Nil(t, pl.PreScore(ctx, framework.NewCycleState(), claimed, nil), "a pod with another driver's claims is DynamicResources' to score")

	state := framework.NewCycleState()
	state.Write(stateKey, &podState{dra: &draPod{}})
	st = pl.PreScore(ctx, state, claimed, nil)
	require.Equal(t, fwk.Skip, st.Code(), "a pod whose claims NUMAPlace allocates: %v", st)
}
