package topologymanager

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
)

func TestKubeletAllocation(t *testing.T) {
	m := hintPreset(t, "dgx-a100")
	st := allocator.MustNew(m, allocator.Options{})
	r := &allocator.Request{CPUs: 24, GPUs: 4}
	hint, admit, err := Predict(PolicyBestEffort, PredictOptions{}, m, st, r)
	require.NoError(t, err)
	require.True(t, admit)
	a, err := KubeletAllocation(m, st, "p", r, hint)
	require.NoError(t, err)
	require.Equal(t, []int{0, 1, 2, 3}, a.GPUs, "the GPUs of nodes 1 and 3, the hint's")
	require.Equal(t, 24, a.CPUs.Size())
	for cpu := range a.CPUs.All() {
		i, _ := m.CPUNode(cpu)
		require.Contains(t, []numa.NodeID{1, 3}, m.NodeID(i), "CPUs on the hint's nodes")
	}
	got, err := st.Claim(a)
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{1, 3}, got.NUMANodes())

	// A hint without affinity takes from every node; too much is an error.
	a, err = KubeletAllocation(m, st, "q", &allocator.Request{CPUs: 2}, AnyHint(false))
	require.NoError(t, err)
	require.Equal(t, 2, a.CPUs.Size())
	_, err = KubeletAllocation(m, st, "r", &allocator.Request{GPUs: 5}, AnyHint(false))
	require.ErrorIs(t, err, allocator.ErrInsufficient)
	_, err = KubeletAllocation(m, nil, "r", r, AnyHint(false))
	require.ErrorIs(t, err, ErrHintConfig)
}
