package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(&out, t.TempDir()))
	got := out.String()
	for _, want := range []string{
		"no checkpoint at $TMP/numaplace/checkpoint.json: starting empty",
		`numaplace.io/allocation: {"policy":"SingleNUMANode","exclusive":"Required","cpuset":"16-23,144-151","numaNodes":[1],"gpus":[{"id":2},{"id":3}]`,
		"admitted ml/train (decision, SingleNUMANode): cpuset 16-23,144-151, NUMA nodes 1, GPUs 2,3",
		"admitted ml/infer (local, BestEffort): cpuset 48-51,176-179, NUMA nodes 3, GPUs 0",
		"admitted ml/web (shared, None): cpuset 0-15,24-47,52-143,152-175,180-255 (232 CPUs), NUMA nodes 0-7, GPUs none",
		"refused: Resources cannot be allocated with Topology locality: pod ml/stale: CPUs 16-23,144-151 are held by pod ml/train",
		"  conflict: GPU 2 is held by pod ml/train",
		"format version 2, checksum sha256:",
		"restored ml/train (decision): cpus 16-23,144-151 mems 1 gpus 2,3",
		"unhealthy: map[gpu:[7]]",
		"same as before the restart: true",
		"ml/train: cpuset.cpus=16-23,144-151 cpuset.mems=1 env NVIDIA_VISIBLE_DEVICES=2,3",
		"ml/web: cpuset.cpus=0-15,24-47,52-143,152-175,180-255 cpuset.mems=0-7 env NVIDIA_VISIBLE_DEVICES=void",
		"removed ml/infer; shared pool now 240 CPUs",
		"again: unknown allocation ID: pod ml/infer is not admitted on this node",
		"refused: unusable checkpoint $TMP/corrupt.json: checksum mismatch",
		"the file is left as it was: true",
	} {
		require.True(t, strings.Contains(got, want), "missing %q in:\n%s", want, got)
	}
}
