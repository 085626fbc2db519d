package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMain runs main instead of the tests when the test binary is started
// by runMain: kube-scheduler's command sets process-wide state (logging)
// that cannot be set twice in one process.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("NUMAPLACE_SCHEDULER_ARGS"); ok {
		os.Args = append([]string{"numaplace-scheduler"}, strings.Split(args, "\n")...)
		main()
		return
	}
	os.Exit(m.Run())
}

// runMain runs the program with the arguments and returns its exit code
// and output.
func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "NUMAPLACE_SCHEDULER_ARGS="+strings.Join(args, "\n"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		require.True(t, ok, "running the program: %v", err)
		return exit.ExitCode(), string(out)
	}
	return 0, string(out)
}

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

	code, out := runMain(t, "--config", cfg, "--secure-port", "0")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, missing)

	// kube-scheduler validates the file before anything starts.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte(strings.ReplaceAll(string(data), "schedulerName: numaplace-scheduler", "schedulerName: \"\"")), 0o600))
	code, out = runMain(t, "--config", bad, "--secure-port", "0")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "schedulerName")
}
