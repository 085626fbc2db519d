package kubelet

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// On an idle node (every GPU available, none must-include) the answers
// GetPreferredAllocation keeps per size are the chooser's: the first and
// the later calls answer what Prefer (which always runs the chooser)
// answers, on the presets, machine16, machine16Worst and random machines,
// and a request that is not idle is not answered from them.
func TestGetPreferredAllocationIdleAnswers(t *testing.T) {
	ms, _ := preferredCases(t)
	for _, m := range ms {
		p := NewDevicePlugin(m)
		all := make([]string, m.NumGPUs())
		for i, g := range m.GPUs() {
			all[i] = strconv.Itoa(g.ID)
		}
		for size := 1; size <= len(all); size++ {
			want, err := p.Prefer(all, nil, size)
			require.NoError(t, err)
			for range 2 {
				got, err := p.GetPreferredAllocation(all, nil, size)
				require.NoError(t, err)
				require.Equal(t, want.Devices, got, "%s: %d of every GPU", m.Name(), size)
			}
			if size < len(all) {
				// The same GPUs but one, and one must-include: the chooser's.
				rest := all[1:]
				want, err := p.Prefer(rest, nil, size)
				require.NoError(t, err)
				got, err := p.GetPreferredAllocation(rest, nil, size)
				require.NoError(t, err)
				require.Equal(t, want.Devices, got, "%s: %d of all GPUs but the first", m.Name(), size)
				must := all[len(all)-1:]
				want, err = p.Prefer(all, must, size)
				require.NoError(t, err)
				got, err = p.GetPreferredAllocation(all, must, size)
				require.NoError(t, err)
				require.Equal(t, want.Devices, got, "%s: %d of every GPU with %v", m.Name(), size, must)
			}
		}
	}
}
