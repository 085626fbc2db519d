package dra_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/plugins/agent/dra"
	"github.com/numaplace/numaplace/topology"
)

// TestNUMANodeOnGrace: on GH200 and GB200 machines every GPU's
// resource.kubernetes.io/numaNode is the Grace node its CPUs are on, in the
// scalar and the list form, never its own memory node or a placeholder
// (which hold nothing a pod is given), whatever the PCI numa_node said.
func TestNUMANodeOnGrace(t *testing.T) {
	for _, tc := range []struct {
		preset string
		// want is each GPU's numaNode in order of GPU ID.
		want []int64
	}{
		{"gh200", []int64{0}},
		{"gb200-tray", []int64{0, 0, 1, 1}},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			m, err := topology.Preset(tc.preset)
			require.NoError(t, err)
			for _, list := range []bool{false, true} {
				res, err := dra.BuildResources(dra.Inventory{Machine: m, Pool: "p", ListAttributes: list}, nil)
				require.NoError(t, err)
				var got []int64
				for _, s := range res.Pools["p"].Slices {
					for _, d := range s.Devices {
						if *d.Attributes[dra.AttrType].StringValue != dra.TypeGPU {
							continue
						}
						a := d.Attributes[dra.AttrNUMANode]
						if list {
							require.Len(t, a.IntValues, 1, "%s: no other node of the socket has CPUs or plain memory", d.Name)
							got = append(got, a.IntValues[0])
						} else {
							require.NotNil(t, a.IntValue, d.Name)
							got = append(got, *a.IntValue)
						}
					}
				}
				require.Equal(t, tc.want, got, "list form %v", list)
			}
			// The memory node of GPU 0 itself maps to the Grace node.
			if mem, ok := m.GPUMemoryNode(0); ok {
				v, ok := dra.NUMANodeValue(m, mem, true)
				require.True(t, ok)
				require.Equal(t, tc.want[:1], v)
			}
		})
	}
}
