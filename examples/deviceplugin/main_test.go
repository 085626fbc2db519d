package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out))
	got := out.String()
	for _, want := range []string{
		"size 2: [0 1]\n  why: one NUMA node (3), one PCIe switch, 12 NVLink links among them",
		"size 4: [0 1 2 3]\n  why: 2 NUMA nodes [1 3], the fewest that hold them, on one socket, 2 PCIe switches",
		"size 8: [0 1 2 3 4 5 6 7]",
		// With GPUs 0 and 5 taken, a single GPU goes to the lone GPU 1 and
		// the pairs stay whole.
		"size 1: [1]\n  why: one NUMA node (3), one PCIe switch\n  left free: sw1 [2 3], sw2 [4], sw3 [6 7]",
		"size 2: [2 3]",
		"size 8: refused: invalid preferred allocation request: size 8 is above the 6 available devices",
		"must include GPU 6: available [1 2 3 4 6 7]\nsize 2: [6 7]",
	} {
		require.True(t, strings.Contains(got, want), "missing %q in:\n%s", want, got)
	}
}
