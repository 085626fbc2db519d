package allocatortest_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// twoNodes has NUMA nodes 3 and 7 (one socket) of 4 CPUs each, one GPU on
// node 3 and 1024 MiB each; CPU 7 is reserved.
func twoNodes(t *testing.T) *topology.Machine {
	t.Helper()
	b := topology.NewBuilder("two")
	b.AddNode(topology.Node{ID: 3, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 1024})
	b.AddNode(topology.Node{ID: 7, Socket: 0, CPUs: numa.CPURange(4, 7), MemoryMiB: 1024})
	b.AddGPU(topology.GPU{ID: 0, NUMANode: 3})
	b.SetReservedCPUs(numa.NewCPUSet(7))
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

// TestCheckResizeFindsWhatIsWrong: wrong refusals and wrong grants of a
// resize are named.
func TestCheckResizeFindsWhatIsWrong(t *testing.T) {
	m := twoNodes(t)
	g := allocator.Allocation{ID: "g", Policy: policy.SingleNUMANode, CPUs: numa.NewCPUSet(0, 1), GPUs: []int{0},
		DenseSpan: numa.MaskOf(0)}
	md := model(t, m, g)

	// Growing to 4 on node 3 is admissible; to 5 it is not (one node).
	v := md.DecideResize("g", 4)
	require.True(t, v.Admissible, v.Reason)
	assert.True(t, v.Grow)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0)}, v.DenseSpans)
	v = md.DecideResize("g", 5)
	assert.False(t, v.Admissible)
	assert.Equal(t, []error{allocator.ErrNoNUMAFit}, v.Refusals, v.Reason)

	err := md.CheckResize("g", 4, allocator.Allocation{}, errors.New("no"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused though admissible (completeness)")

	wide := g.Clone()
	wide.CPUs = numa.NewCPUSet(0, 1, 2, 4, 5)
	wide.DenseSpan = numa.MaskOf(0, 1)
	err = md.CheckResize("g", 5, wide, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "granted though not admissible (soundness)")

	err = md.CheckResize("g", 5, allocator.Allocation{}, allocator.ErrExclusivity)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "wrong category")
	err = md.CheckResize("g", 5, allocator.Allocation{}, allocator.ErrNoNUMAFit)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a *allocator.PlacementError")

	// A grant that drops CPUs, takes the reserved one, moves the GPU.
	bad := g.Clone()
	bad.CPUs = numa.NewCPUSet(0, 2, 3, 7)
	bad.GPUs = nil
	bad.DenseSpan = numa.MaskOf(0, 1)
	err = md.CheckResize("g", 4, bad, nil)
	require.Error(t, err)
	for _, want := range []string{"growing dropped CPUs 1", "CPU 7 was not free", "moved", "span {3,7} is not legal"} {
		assert.Contains(t, err.Error(), want)
	}

	// Shrinking keeps a subset; the same size changes nothing.
	shrunk := g.Clone()
	shrunk.CPUs = numa.NewCPUSet(2)
	err = md.CheckResize("g", 1, shrunk, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "shrinking added CPUs 2")
	assert.NoError(t, md.CheckResize("g", 2, g, nil))
	assert.Error(t, md.CheckResize("g", 2, shrunk, nil))

	// Unknown ID and invalid sizes.
	assert.Equal(t, []error{allocator.ErrUnknownID}, md.DecideResize("zz", 1).Refusals)
	assert.NoError(t, md.CheckResize("zz", 1, allocator.Allocation{}, allocator.ErrUnknownID))
	assert.NoError(t, md.CheckResize("g", -1, allocator.Allocation{}, allocator.ErrInvalidRequest))

	// The model's own resize.
	next, grown, err := md.Resize("g", 3)
	require.NoError(t, err)
	assert.Equal(t, "0-2", grown.CPUs.String())
	assert.Equal(t, int64(1), next.Free(0, false)["cpu"])
}

// TestResizeRuleBindsWhatChanges: the exclusivity rule binds the nodes a
// resize adds, or all of them when the span changes kind; the nodes it
// keeps in a span of the same kind are never held against it.
func TestResizeRuleBindsWhatChanges(t *testing.T) {
	m := twoNodes(t)
	r := allocator.Allocation{ID: "r", Policy: policy.Restricted, CPUs: numa.NewCPUSet(0), DenseSpan: numa.MaskOf(0)}
	x := allocator.Allocation{ID: "x", Policy: policy.SingleNUMANode, CPUs: numa.NewCPUSet(1), DenseSpan: numa.MaskOf(0)}
	md := model(t, m, r, x)
	// 6 CPUs need both nodes (width_cap 2): node 3 is single (x), so the
	// span going from one node to two is refused by the rule.
	v := md.DecideResize("r", 6)
	assert.False(t, v.Admissible)
	assert.Equal(t, []error{allocator.ErrExclusivity}, v.Refusals, v.Reason)
	// Under Preferred, or once x is gone, it grows.
	r.Exclusive = policy.Preferred
	assert.True(t, model(t, m, r, x).DecideResize("r", 6).Admissible)
	r.Exclusive = policy.Required
	assert.True(t, model(t, m, r).DecideResize("r", 6).Admissible)

	// A None pod over both nodes makes them shared; r keeps growing on its
	// node (same kind of span).
	wide := allocator.Allocation{ID: "w", Policy: policy.None, CPUs: numa.NewCPUSet(2, 4), DenseSpan: numa.MaskOf(0, 1)}
	v = model(t, m, r, wide).DecideResize("r", 2)
	assert.True(t, v.Admissible, v.Reason)
	assert.Equal(t, []numa.Mask{numa.MaskOf(0)}, v.DenseSpans)
}

// TestCheckClaimFindsWhatIsWrong: a claim is judged by what it names.
func TestCheckClaimFindsWhatIsWrong(t *testing.T) {
	m := twoNodes(t)
	held := allocator.Allocation{ID: "h", CPUs: numa.NewCPUSet(0), Memory: []allocator.NodeMemory{{Node: 3, MiB: 1000}},
		DenseSpan: numa.MaskOf(0)}
	md := model(t, m, held)

	ok := allocator.Allocation{ID: "c", CPUs: numa.NewCPUSet(4, 1), GPUs: []int{0}, DenseSpan: numa.MaskOf(5),
		Memory: []allocator.NodeMemory{{Node: 7, MiB: 10}, {Node: 3, MiB: 0}}}
	next, want, err := md.Claim(ok)
	require.NoError(t, err)
	assert.Equal(t, numa.MaskOf(0, 1), want.DenseSpan, "recomputed, the 0 MiB entry in no span")
	assert.Equal(t, []allocator.NodeMemory{{Node: 3, MiB: 0}, {Node: 7, MiB: 10}}, want.Memory)
	assert.True(t, next.IsLive("c"))
	assert.NoError(t, md.CheckClaim(ok, want, nil))
	err = md.CheckClaim(ok, allocator.Allocation{}, allocator.ErrConflict)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refused though the model accepts it")
	wrong := want.Clone()
	wrong.GPUs = nil
	assert.Error(t, md.CheckClaim(ok, wrong, nil))

	tests := []struct {
		name string
		a    allocator.Allocation
		err  error
		want string
	}{
		{"held CPU", allocator.Allocation{ID: "c", CPUs: numa.NewCPUSet(0)}, allocator.ErrConflict, `CPU 0 was not free: "h" holds it`},
		{"reserved CPU", allocator.Allocation{ID: "c", CPUs: numa.NewCPUSet(7)}, allocator.ErrConflict, "CPU 7 is reserved"},
		{"unknown GPU", allocator.Allocation{ID: "c", GPUs: []int{4}}, allocator.ErrConflict, "GPU 4 does not exist"},
		{"GPU twice", allocator.Allocation{ID: "c", GPUs: []int{0, 0}}, allocator.ErrConflict, "GPU 0 is named twice"},
		{"memory", allocator.Allocation{ID: "c", Memory: []allocator.NodeMemory{{Node: 3, MiB: 25}}}, allocator.ErrConflict,
			"25 MiB on NUMA node 3"},
		{"class", allocator.Allocation{ID: "c", Devices: map[string][]string{"rdma": {"x"}}}, allocator.ErrConflict,
			"no rdma devices"},
		{"live ID", allocator.Allocation{ID: "h"}, allocator.ErrDuplicateID, `ID "h" is live`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.NoError(t, md.CheckClaim(tt.a, allocator.Allocation{}, tt.err))
			err := md.CheckClaim(tt.a, tt.a, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			_, _, err = md.Claim(tt.a)
			assert.ErrorIs(t, err, tt.err)
		})
	}
	// A NUMA node ID the machine lacks: a *NodeError naming it.
	gone := allocator.Allocation{ID: "c", Memory: []allocator.NodeMemory{{Node: 5, MiB: 1}}}
	err = md.CheckClaim(gone, allocator.Allocation{}, allocator.ErrConflict)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NodeError")
	assert.NoError(t, md.CheckClaim(gone, allocator.Allocation{}, &allocator.NodeError{Node: 5}))
	assert.Error(t, md.CheckClaim(gone, allocator.Allocation{}, &allocator.NodeError{Node: 6}))
}
