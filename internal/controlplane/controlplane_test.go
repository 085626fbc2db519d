package controlplane

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRepoRootIsTheRootModulesDirectory: from this package's directory
// (go test's working directory) RepoRoot walks up to the directory whose
// go.mod declares the root module, past this module's own go.mod, and
// NUMAPLACE_REPO overrides it.
func TestRepoRootIsTheRootModulesDirectory(t *testing.T) {
	root := RepoRoot(t)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "internal", "controlplane"), wd)
	require.True(t, declaresModule(filepath.Join(root, "go.mod"), RootModule))
	require.False(t, declaresModule(filepath.Join(wd, "go.mod"), RootModule), "this module's go.mod is not the root's")
	require.FileExists(t, RepoPath(t, "deploy", "agent.yaml"))

	other := t.TempDir()
	t.Setenv("NUMAPLACE_REPO", other)
	require.Equal(t, other, RepoRoot(t))
}

// TestProcessStopsAndKeepsItsLog: a started program's output is in its
// log, Stop ends it with SIGTERM and waits, a second Stop does nothing,
// and a program started again under the same name appends to the log.
func TestProcessStopsAndKeepsItsLog(t *testing.T) {
	dir := t.TempDir()
	script := `echo "run $0"; trap 'echo terminated; exit 3' TERM; while :; do sleep 0.05; done`
	p := StartProcess(t, dir, "sleeper", exec.Command("/bin/sh", "-c", script, "one"))
	require.Eventually(t, func() bool { return strings.Contains(p.Tail(100), "run one") }, 10*time.Second, 10*time.Millisecond)
	require.False(t, p.Exited())
	require.NoError(t, p.Err(), "no error while it runs")
	p.Stop()
	require.True(t, p.Exited())
	var exit *exec.ExitError
	require.ErrorAs(t, p.Err(), &exit)
	require.Equal(t, 3, exit.ExitCode(), "the trap's exit status: SIGTERM reached the program")
	p.Stop()

	q := StartProcess(t, dir, "sleeper", exec.Command("/bin/sh", "-c", script, "two"))
	require.Eventually(t, func() bool { return strings.Contains(q.Tail(1000), "run two") }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, p.Log, q.Log)
	require.Contains(t, q.Tail(1000), "run one\nterminated\nrun two")
	require.NotZero(t, FreePort(t))
}
