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
	out := r.stdout
	assert.True(t, strings.HasPrefix(out,
		"numaplan demo on dgx-h100 (2 NUMA nodes, 2 sockets, 224 CPUs, 8 GPUs, 8 rdma)\n"), out)
	// The decisions of the scenario in docs/design.md.
	for _, want := range []string{
		"textgen-1   SingleNUMANode/Required, 4 GPUs + 24 CPUs -> NUMA nodes [0], GPUs [0 1 2 3], CPUs 0-11,112-123\n",
		"textgen-2   SingleNUMANode/Required, 4 GPUs + 24 CPUs -> NUMA nodes [1], GPUs [4 5 6 7], CPUs 56-67,168-179\n",
		"textgen-3   SingleNUMANode/Required, 4 GPUs + 24 CPUs -> refused: ",
		"textgen-1   released\ntextgen-2   released\n",
		"train-8gpu  Restricted/Required, 8 GPUs + 16 CPUs -> NUMA nodes [0 1], GPUs [0 1 2 3 4 5 6 7], CPUs 0-3,56-59,112-115,168-171\n",
		"The kubelet's restricted policy refuses this pod",
		"infer-2gpu  SingleNUMANode/Required, 2 GPUs + 8 CPUs -> NUMA nodes [0], GPUs [0 1], CPUs 0-3,112-115\n",
		"batch-6gpu  BestEffort/Required, 6 GPUs + 12 CPUs -> NUMA nodes [0 1], GPUs [2 3 4 5 6 7], CPUs 4-5,56-59,116-117,168-171\n",
	} {
		assert.Contains(t, out, want)
	}
	// The picture at the end marks the two live pods.
	assert.Contains(t, out, "== 7. The machine ==\n\ndgx-h100: ")
	assert.Contains(t, out, "a = batch-6gpu: BestEffort")
	assert.Contains(t, out, "b = infer-2gpu: SingleNUMANode")
	assert.Contains(t, out, "    0-19,112-131    [bb][bb][bb][bb][aa][aa][..]")
	assert.Contains(t, out, "[b] GPU 0")
	assert.Contains(t, out, "[a] GPU 7")
	assert.Equal(t, out, runArgs(t, "demo").stdout, "deterministic")
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

func TestDemoScenarioOffScript(t *testing.T) {
	m, err := topology.Preset("small-1s") // no room for the demo's pods
	require.NoError(t, err)
	var out bytes.Buffer
	err = playDemo(&out, m, demoScenario())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "textgen-1 was refused")
}
