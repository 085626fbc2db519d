package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/topology"
)

func TestDemo(t *testing.T) {
	r := runArgs(t, "demo")
	require.Equal(t, exitOK, r.status, r.stderr)
	assert.Empty(t, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout,
		"numaplan demo on dgx-h100 (2 NUMA nodes, 2 sockets, 224 CPUs, 8 GPUs, 8 rdma)\n\n== 1. The machine ==\n\n"),
		r.stdout)
	m, err := topology.Preset(demoPreset)
	require.NoError(t, err)
	var pic bytes.Buffer
	require.NoError(t, m.Picture(&pic, nil))
	assert.True(t, strings.HasSuffix(r.stdout, pic.String()), "the demo ends with the machine's picture")
	assert.Equal(t, r.stdout, runArgs(t, "demo").stdout, "deterministic")
}

func TestPlayDemoSteps(t *testing.T) {
	m, err := topology.Preset("small-1s")
	require.NoError(t, err)
	var out bytes.Buffer
	steps := []demoStep{
		{title: "Mark", run: func(d *demo) error {
			d.marks.CPUs = map[int]rune{0: 'a', 8: 'a'}
			_, err := d.out.Write([]byte("marked CPU 0\n"))
			return err
		}},
		{title: "Show", run: (*demo).showMachine},
	}
	require.NoError(t, playDemo(&out, m, steps))
	s := out.String()
	assert.Contains(t, s, "\n== 1. Mark ==\n\nmarked CPU 0\n\n== 2. Show ==\n\nsmall-1s: ")
	assert.Contains(t, s, "    0-15 [aa][..][..][..][..][..][..][..]\n", "the marks of earlier steps show")
}
