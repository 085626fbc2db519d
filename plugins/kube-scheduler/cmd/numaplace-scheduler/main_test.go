package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCommand(t *testing.T) {
	cmd := command()
	require.Equal(t, "numaplace-scheduler", cmd.Use)
	require.NotNil(t, cmd.Flags().Lookup("config"))
}

// The binary reads the example configuration, validates it and stops at
// the kubeconfig, which the test leaves missing.
func TestCommandReadsTheExampleConfig(t *testing.T) {
	data, err := os.ReadFile("../../deploy/scheduler-config.yaml")
	require.NoError(t, err)
	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(strings.ReplaceAll(string(data), "/etc/kubernetes/scheduler.conf", missing)), 0o600))

	cmd := command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"--config", cfg, "--secure-port", "0"})
	err = cmd.Execute()
	require.Error(t, err)
	require.Contains(t, err.Error(), missing)
}
