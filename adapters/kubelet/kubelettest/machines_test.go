package kubelettest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kubelet/kubelettest"
)

func TestMachines(t *testing.T) {
	m := kubelettest.Machine16(t)
	require.Equal(t, 2, m.NumNodes())
	require.Equal(t, 16, m.NumGPUs())
	g, ok := m.GPU(9)
	require.True(t, ok)
	require.Equal(t, "sw2", g.PCIeSwitch)
	require.Equal(t, "GPU-9", g.UUID)
	w := kubelettest.Machine16Worst(t)
	require.Equal(t, 16, w.NumNodes())
	require.Equal(t, 16, w.NumGPUs())
}
