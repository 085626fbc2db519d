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

// TestKubeconfigIgnoredWithConfig: with --config, kube-scheduler takes the
// kubeconfig from the file and ignores --kubeconfig; the command says so,
// and its doc comment suggests no command line that combines them.
func TestKubeconfigIgnoredWithConfig(t *testing.T) {
	data, err := os.ReadFile("../../deploy/scheduler-config.yaml")
	require.NoError(t, err)
	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(strings.ReplaceAll(string(data), "/etc/kubernetes/scheduler.conf", missing)), 0o600))
	flagKubeconfig := filepath.Join(t.TempDir(), "flag-kubeconfig")

	code, out := runMain(t, "--config", cfg, "--kubeconfig", flagKubeconfig, "--secure-port", "0")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "numaplace-scheduler: --kubeconfig is ignored because --config is given: set clientConnection.kubeconfig in "+cfg)
	require.Contains(t, out, missing, "the file's kubeconfig is the one used")

	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "//\tnumaplace-scheduler ") && strings.Contains(line, "--config") {
			for _, ig := range ignoredWithConfig {
				for _, f := range strings.Fields(line) {
					name, _, _ := strings.Cut(f, "=")
					require.NotEqual(t, "--"+ig.flag, name, "the doc comment suggests a flag --config ignores: %s", line)
				}
			}
		}
	}
}
