package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDRAFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard, nodeEnv)
	require.NoError(t, err)
	require.False(t, c.dra, "off by default")
	require.Equal(t, "gpu.numaplace.io", c.draDriverName)
	require.Equal(t, "/var/lib/kubelet/plugins", c.kubeletPluginsDir)
	require.Equal(t, "/var/lib/kubelet/plugins_registry", c.kubeletRegistry)
	require.Equal(t, "/var/run/cdi", c.cdiRoot)
	require.False(t, c.draListAttributes)
	require.Nil(t, c.draGPUs)

	c, err = parseFlags([]string{"--dra", "--device-plugin=false", "--dra-driver-name", "gpu.example.com",
		"--kubelet-plugins-dir", "/p", "--kubelet-registry-dir", "/r", "--cdi-root", "/c", "--dra-list-attributes"}, io.Discard, nodeEnv)
	require.NoError(t, err)
	require.True(t, c.dra && c.draListAttributes)
	require.Equal(t, "gpu.example.com", c.draDriverName)
	require.Equal(t, []string{"/p", "/r", "/c"}, []string{c.kubeletPluginsDir, c.kubeletRegistry, c.cdiRoot})

	// Both roles, the GPUs split.
	c, err = parseFlags([]string{"--dra", "--dra-gpus", "4-7"}, io.Discard, nodeEnv)
	require.NoError(t, err)
	require.True(t, c.dra && c.devicePlugin)
	require.Equal(t, []int{4, 5, 6, 7}, c.draGPUs)
	// NICs only: the device plugin keeps every GPU.
	c, err = parseFlags([]string{"--dra", "--dra-gpus", ""}, io.Discard, nodeEnv)
	require.NoError(t, err)
	require.Equal(t, []int{}, c.draGPUs)
	// The DRA role alone is something to run.
	_, err = parseFlags([]string{"--dra", "--nri=false", "--reporter=false", "--device-plugin=false"}, io.Discard, nodeEnv)
	require.NoError(t, err)
}

func TestDRABadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--dra"}, "--dra and --device-plugin would both serve the node's GPUs: turn the device plugin off (--device-plugin=false) or say which GPUs the DRA driver serves with --dra-gpus LIST"},
		{[]string{"--dra-gpus", "0-1"}, "--dra-gpus is given but --dra is not on"},
		{[]string{"--dra", "--dra-gpus", "x"}, `--dra-gpus "x": not a list of GPU indices`},
		{[]string{"--dra", "--device-plugin=false", "--dra-driver-name", "GPU_Example"}, `--dra-driver-name "GPU_Example"`},
		{[]string{"--dra", "--device-plugin=false", "--cdi-root", ""}, "must not be empty with --dra"},
		{[]string{"--dra", "--device-plugin=false", "--reporter=false", "--node-name", ""}, "the DRA driver needs the node's name"},
	} {
		t.Run(tc.args[len(tc.args)-1], func(t *testing.T) {
			var stderr bytes.Buffer
			require.Equal(t, 2, run(context.Background(), tc.args, &stderr, nodeEnv))
			require.Contains(t, stderr.String(), tc.msg)
		})
	}
	// A GPU the machine does not have: exit 2, said.
	dir := t.TempDir()
	file := filepath.Join(dir, "m.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-3"}],"gpus":[{"id":0,"numaNode":0}]}`), 0o600))
	var stderr bytes.Buffer
	require.Equal(t, 2, run(context.Background(), []string{"--topology", file, "--checkpoint", "", "--dra", "--dra-gpus", "0,3"}, &stderr, nodeEnv))
	require.Contains(t, stderr.String(), "--dra-gpus: GPU 3 is not a GPU of this machine (it has 1)")
}
