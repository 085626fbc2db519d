package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/numaplace/numaplace/numa"
	"github.com/stretchr/testify/require"
)

const topologyJSON = `{"name":"t","numaNodes":[{"id":0,"socket":0,"cpus":"0-3"},{"id":1,"socket":1,"cpus":"4-7"}]}`

func noEnv(string) string { return "" }

// nodeEnv sets NODE_NAME, as the DaemonSet's downward API does.
func nodeEnv(k string) string { return map[string]string{"NODE_NAME": "gpu-1"}[k] }

// nriOnly turns the reporter and the device plugin off.
var nriOnly = []string{"--reporter=false", "--device-plugin=false"}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard, nodeEnv)
	require.NoError(t, err)
	require.Equal(t, "gpu-1", c.nodeName)
	require.True(t, c.nri && c.reporter && c.devicePlugin && c.gpuDeviceNodes)
	require.Equal(t, "/var/lib/kubelet/device-plugins", c.kubeletSocketDir)
	require.Equal(t, "aliyun.com/gpu", c.resourceName)
	require.Empty(t, c.kubeconfig)
	require.Equal(t, "/dev", c.devRoot)
	require.Equal(t, defaultCheckpoint, c.checkpoint)
	require.Equal(t, "/", c.sysfsRoot)
	require.Equal(t, defaultName, c.name)
	require.Equal(t, defaultIndex, c.index)
	require.Equal(t, api.DefaultSocketPath, c.socket)
	require.False(t, c.nameSet || c.indexSet)

	c, err = parseFlags([]string{"--preset", "dgx-h100", "--checkpoint", "/tmp/x.json", "--name", "np", "--index", "05",
		"--socket", "/run/nri.sock", "--log-level", "debug", "--node-name", "n2", "--kubeconfig", "/k", "--nri=false",
		"--kubelet-socket-dir", "/kl", "--resource-name", "example.com/gpu", "--report-interval", "3s"}, io.Discard, nodeEnv)
	require.NoError(t, err)
	require.Equal(t, "dgx-h100", c.preset)
	require.Equal(t, "/tmp/x.json", c.checkpoint)
	require.True(t, c.nameSet && c.indexSet)
	require.Equal(t, "05", c.index)
	require.Equal(t, "DEBUG", c.logLevel.String())
	require.Equal(t, "n2", c.nodeName)
	require.Equal(t, "/k", c.kubeconfig)
	require.False(t, c.nri)
	require.Equal(t, "/kl", c.kubeletSocketDir)
	require.Equal(t, "example.com/gpu", c.resourceName)
	require.Equal(t, "3s", c.reportInterval.String())
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--nope"}, "flag provided but not defined: -nope"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--topology", "m.json", "--preset", "dgx-h100"}, "--topology and --preset both name the machine"},
		{[]string{"--preset", "dgx-h200"}, `--preset "dgx-h200": unknown preset (known: dgx-a100`},
		{[]string{"--index", "7"}, `--index: invalid plugin index "7", must be 2 digits`},
		{[]string{"--index", "ab"}, "--index: invalid plugin index"},
		{[]string{"--name", "a b"}, "--name: invalid plugin name"},
		{[]string{"--name", ""}, "--name: invalid plugin name: name is empty"},
		{[]string{"--sysfs-root", ""}, "--sysfs-root is empty"},
		{[]string{"--log-level", "loud"}, `invalid value "loud" for flag -log-level`},
		{[]string{"--nri=false", "--reporter=false", "--device-plugin=false"}, "nothing to run"},
		{[]string{"--node-name", ""}, "the reporter needs the node's name"},
		{[]string{"--resource-name", "gpu"}, `--resource-name "gpu": not an extended resource name`},
		{[]string{"--resource-name", "kubernetes.io/gpu"}, "the kubernetes.io domain is reserved"},
		{[]string{"--report-interval", "0s"}, "--report-interval 0s: must be positive"},
		{[]string{"--health-interval", "-1s"}, "must not be negative"},
		{[]string{"--kubelet-socket-dir", ""}, "--kubelet-socket-dir is empty"},
		{[]string{"--dev-root", ""}, "--dev-root is empty"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			var stderr bytes.Buffer
			require.Equal(t, 2, run(context.Background(), tc.args, &stderr, nodeEnv))
			require.Contains(t, stderr.String(), tc.msg)
		})
	}
	var stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"-h"}, &stderr, noEnv))
	require.Contains(t, stderr.String(), "Usage: numaplace-agent")
}

func TestStubOptionsAndTheRuntimesEnvironment(t *testing.T) {
	c, err := parseFlags(nil, io.Discard, nodeEnv)
	require.NoError(t, err)
	opts, err := stubOptions(c, noEnv, nil)
	require.NoError(t, err)
	require.Len(t, opts, 4, "socket, logger, name, index")

	// Started by the runtime: its name and index are kept.
	env := func(k string) string {
		return map[string]string{api.PluginNameEnvVar: "numaplace", api.PluginIdxEnvVar: "20"}[k]
	}
	opts, err = stubOptions(c, env, nil)
	require.NoError(t, err)
	require.Len(t, opts, 2)

	c, err = parseFlags([]string{"--index", "30"}, io.Discard, nodeEnv)
	require.NoError(t, err)
	_, err = stubOptions(c, env, nil)
	require.ErrorContains(t, err, "--index 30 conflicts with NRI_PLUGIN_IDX=20")
	var stderr bytes.Buffer
	require.Equal(t, 2, run(context.Background(), []string{"--index", "30"}, &stderr, func(k string) string {
		if k == "NODE_NAME" {
			return "gpu-1"
		}
		return env(k)
	}))
}

func TestLoadMachine(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.json")
	require.NoError(t, os.WriteFile(file, []byte(topologyJSON), 0o600))
	m, err := loadMachine(config{topology: file})
	require.NoError(t, err)
	require.Equal(t, 2, m.NumNodes())

	m, err = loadMachine(config{preset: "dgx-a100"})
	require.NoError(t, err)
	require.Equal(t, "dgx-a100", m.Name())

	_, err = loadMachine(config{topology: filepath.Join(dir, "missing.json")})
	require.ErrorContains(t, err, "--topology")
	require.NoError(t, os.WriteFile(file, []byte(`{"numaNodes":[{"id":0}]}`), 0o600))
	_, err = loadMachine(config{topology: file})
	require.ErrorContains(t, err, "--topology "+file)
	_, err = loadMachine(config{topology: "/dev/zero"})
	require.ErrorContains(t, err, "--topology /dev/zero: not a regular file")
	_, err = loadMachine(config{sysfsRoot: dir})
	require.ErrorContains(t, err, "discovering the machine under "+dir)
}

func TestRunFailsClearly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.json")
	require.NoError(t, os.WriteFile(file, []byte(topologyJSON), 0o600))

	// An unusable machine.
	var stderr bytes.Buffer
	require.Equal(t, 1, run(context.Background(), append([]string{"--topology", filepath.Join(dir, "nope.json")}, nriOnly...), &stderr, noEnv))
	require.Contains(t, stderr.String(), "cannot use the machine")

	// A corrupt checkpoint, without the NRI role (nothing would rebuild
	// the state from the running pods), stops the start and is left alone.
	cp := filepath.Join(dir, "cp.json")
	require.NoError(t, os.WriteFile(cp, []byte("{"), 0o600))
	stderr.Reset()
	require.Equal(t, 1, run(context.Background(), []string{"--topology", file, "--checkpoint", cp, "--nri=false", "--reporter=false",
		"--kubelet-socket-dir", dir}, &stderr, noEnv))
	require.Contains(t, stderr.String(), "unusable checkpoint")
	data, _ := os.ReadFile(cp)
	require.Equal(t, "{", string(data))
	// With it, the file is set aside, said at level ERROR with both
	// names, and the agent goes on with a fresh checkpoint (here to fail
	// at the missing runtime).
	stderr.Reset()
	require.Equal(t, 1, run(context.Background(), append([]string{"--topology", file, "--checkpoint", cp,
		"--socket", filepath.Join(dir, "none.sock")}, nriOnly...), &stderr, noEnv))
	require.Contains(t, stderr.String(), `level=ERROR msg="the checkpoint cannot be used: it is kept aside for inspection`)
	require.Contains(t, stderr.String(), "checkpoint="+cp+" keptAs="+cp+".corrupt-")
	require.Contains(t, stderr.String(), "not a valid checkpoint (truncated or corrupted JSON)")
	require.Contains(t, stderr.String(), "failed to connect to NRI service")
	aside, err := filepath.Glob(cp + ".corrupt-*")
	require.NoError(t, err)
	require.Len(t, aside, 1)
	data, _ = os.ReadFile(aside[0])
	require.Equal(t, "{", string(data), "the file set aside")
	data, _ = os.ReadFile(cp)
	require.Contains(t, string(data), `"pods": []`, "a fresh checkpoint")

	// No runtime listening on the socket. The checkpoint's directory is
	// created.
	cp = filepath.Join(dir, "state", "cp.json")
	stderr.Reset()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Equal(t, 1, run(ctx, append([]string{"--topology", file, "--checkpoint", cp, "--socket", filepath.Join(dir, "none.sock")}, nriOnly...), &stderr, noEnv))
	require.Contains(t, stderr.String(), "failed to connect to NRI service")
	require.FileExists(t, cp)

	// The reporter outside a cluster, without a kubeconfig.
	stderr.Reset()
	require.Equal(t, 1, run(ctx, []string{"--topology", file, "--checkpoint", "", "--device-plugin=false", "--nri=false"}, &stderr, nodeEnv))
	require.Contains(t, stderr.String(), "cannot build the Kubernetes client")
	require.Contains(t, stderr.String(), "not in a cluster")
	stderr.Reset()
	require.Equal(t, 1, run(ctx, []string{"--topology", file, "--checkpoint", "", "--kubeconfig", filepath.Join(dir, "none")}, &stderr, nodeEnv))
	require.Contains(t, stderr.String(), "--kubeconfig "+filepath.Join(dir, "none"))
}

func TestMemoryNodes(t *testing.T) {
	dir := t.TempDir()
	ids, err := memoryNodes(dir)
	require.NoError(t, err)
	require.Nil(t, ids, "no has_memory: every node")
	p := filepath.Join(dir, hasMemory)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte("0,2-3\n"), 0o600))
	ids, err = memoryNodes(dir)
	require.NoError(t, err)
	require.Equal(t, []numa.NodeID{0, 2, 3}, ids)
	require.NoError(t, os.WriteFile(p, []byte("x\n"), 0o600))
	_, err = memoryNodes(dir)
	require.ErrorContains(t, err, p)
}
