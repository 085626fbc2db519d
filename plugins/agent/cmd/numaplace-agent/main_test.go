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
	"github.com/stretchr/testify/require"
)

const topologyJSON = `{"name":"t","numaNodes":[{"id":0,"socket":0,"cpus":"0-3"},{"id":1,"socket":1,"cpus":"4-7"}]}`

func noEnv(string) string { return "" }

func TestParseFlags(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, defaultCheckpoint, c.checkpoint)
	require.Equal(t, "/", c.sysfsRoot)
	require.Equal(t, defaultName, c.name)
	require.Equal(t, defaultIndex, c.index)
	require.Equal(t, api.DefaultSocketPath, c.socket)
	require.False(t, c.nameSet || c.indexSet)

	c, err = parseFlags([]string{"--preset", "dgx-h100", "--checkpoint", "/tmp/x.json", "--name", "np", "--index", "05",
		"--socket", "/run/nri.sock", "--log-level", "debug"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "dgx-h100", c.preset)
	require.Equal(t, "/tmp/x.json", c.checkpoint)
	require.True(t, c.nameSet && c.indexSet)
	require.Equal(t, "05", c.index)
	require.Equal(t, "DEBUG", c.logLevel.String())
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
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			var stderr bytes.Buffer
			require.Equal(t, 2, run(context.Background(), tc.args, &stderr, noEnv))
			require.Contains(t, stderr.String(), tc.msg)
		})
	}
	var stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"-h"}, &stderr, noEnv))
	require.Contains(t, stderr.String(), "Usage: numaplace-nri")
}

func TestStubOptionsAndTheRuntimesEnvironment(t *testing.T) {
	c, err := parseFlags(nil, io.Discard)
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

	c, err = parseFlags([]string{"--index", "30"}, io.Discard)
	require.NoError(t, err)
	_, err = stubOptions(c, env, nil)
	require.ErrorContains(t, err, "--index 30 conflicts with NRI_PLUGIN_IDX=20")
	var stderr bytes.Buffer
	require.Equal(t, 2, run(context.Background(), []string{"--index", "30"}, &stderr, env))
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
	_, err = loadMachine(config{sysfsRoot: dir})
	require.ErrorContains(t, err, "discovering the machine under "+dir)
}

func TestRunFailsClearly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.json")
	require.NoError(t, os.WriteFile(file, []byte(topologyJSON), 0o600))

	// An unusable machine.
	var stderr bytes.Buffer
	require.Equal(t, 1, run(context.Background(), []string{"--topology", filepath.Join(dir, "nope.json")}, &stderr, noEnv))
	require.Contains(t, stderr.String(), "cannot use the machine")

	// A corrupt checkpoint stops the start and is left alone.
	cp := filepath.Join(dir, "cp.json")
	require.NoError(t, os.WriteFile(cp, []byte("{"), 0o600))
	stderr.Reset()
	require.Equal(t, 1, run(context.Background(), []string{"--topology", file, "--checkpoint", cp}, &stderr, noEnv))
	require.Contains(t, stderr.String(), "unusable checkpoint")
	data, _ := os.ReadFile(cp)
	require.Equal(t, "{", string(data))

	// No runtime listening on the socket. The checkpoint's directory is
	// created.
	cp = filepath.Join(dir, "state", "cp.json")
	stderr.Reset()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Equal(t, 1, run(ctx, []string{"--topology", file, "--checkpoint", cp, "--socket", filepath.Join(dir, "none.sock")}, &stderr, noEnv))
	require.Contains(t, stderr.String(), "failed to connect to NRI service")
	require.FileExists(t, cp)
}
