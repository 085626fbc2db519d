package topology_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

func TestGPUMemoryJSON(t *testing.T) {
	in := `{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0-3"}],
		"gpus": [{"id": 0, "numaNode": 0, "memoryMiB": 81559}, {"id": 1, "numaNode": 0}]}`
	m, err := topology.ParseJSON([]byte(in))
	require.NoError(t, err)
	g0, _ := m.GPU(0)
	g1, _ := m.GPU(1)
	require.Equal(t, int64(81559), g0.MemoryMiB)
	require.Equal(t, int64(0), g1.MemoryMiB, "an absent memoryMiB is 0, unknown")

	var buf bytes.Buffer
	require.NoError(t, m.WriteJSON(&buf))
	require.Contains(t, buf.String(), `"memoryMiB": 81559`)
	require.Equal(t, 1, bytes.Count(buf.Bytes(), []byte(`"memoryMiB"`)), "an unknown memory is not written: %s", buf.String())
	back, err := topology.ParseJSON(buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, m.GPUs(), back.GPUs())

	_, err = topology.ParseJSON([]byte(`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0-3"}],
		"gpus": [{"id": 3, "numaNode": 0, "memoryMiB": -1}]}`))
	require.ErrorIs(t, err, topology.ErrInvalid)
	require.ErrorContains(t, err, "gpus[0] (id 3)")
	require.ErrorContains(t, err, "memoryMiB -1 is negative")

	_, err = topology.ParseJSON([]byte(`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0-3"}],
		"gpus": [{"id": 0, "numaNode": 0, "memoryMB": 4}]}`))
	require.ErrorContains(t, err, `unknown field "memoryMB" in gpus[0]; did you mean "memoryMiB"?`)
}

func TestGPUMemoryBuilder(t *testing.T) {
	_, err := topology.NewBuilder("x").AddNode(topology.Node{ID: 0, CPUs: numa.MustParseCPUSet("0-1")}).
		AddGPU(topology.GPU{ID: 0, MemoryMiB: -5}).Build()
	require.ErrorIs(t, err, topology.ErrInvalid)
	require.ErrorContains(t, err, "memoryMiB -5 is negative")
}

func TestPresetGPUMemory(t *testing.T) {
	for name, want := range map[string]int64{"dgx-h100": 81559, "dgx-a100": 40960, "numa64": 0, "small-1s": 0} {
		m, err := topology.Preset(name)
		require.NoError(t, err)
		for _, g := range m.GPUs() {
			require.Equal(t, want, g.MemoryMiB, "%s GPU %d", name, g.ID)
		}
	}
}
