package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/topology"
)

func TestPresets(t *testing.T) {
	r := runArgs(t, "presets")
	require.Equal(t, exitOK, r.status)
	assert.Empty(t, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	names := topology.PresetNames()
	require.Len(t, lines, len(names))
	for i, name := range names {
		assert.Equal(t, name, strings.Fields(lines[i])[0], "line %d", i)
	}
	assert.Contains(t, lines[1], "dgx-h100 ")
	assert.True(t, strings.HasSuffix(lines[1], "  2 NUMA nodes, 2 sockets, 224 CPUs, 8 GPUs, 8 rdma"), lines[1])
	assert.Contains(t, r.stdout, "small-1s           1 NUMA node, 1 socket, 16 CPUs, 1 GPU\n")
	assert.Contains(t, r.stdout, "numa64             64 NUMA nodes, 8 sockets, 1024 CPUs, 128 GPUs\n")
	// Summaries start in one column.
	col := strings.Index(lines[0], "8 NUMA")
	for _, l := range lines {
		assert.Regexp(t, `^\d`, l[col:], "aligned: %q", l)
	}
}
