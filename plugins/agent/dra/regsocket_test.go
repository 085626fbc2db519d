package dra

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// staleSocket leaves a Unix socket at path, as a process killed with
// SIGKILL leaves its own.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, l.Close())
}

// shortDir is a new directory with a short path (t.TempDir's, named after
// the test, can be too long for a Unix socket).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rs")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func TestRegistrarSocket(t *testing.T) {
	const driver = "gpu.numaplace.io"
	named := regexp.MustCompile(`^` + regexp.QuoteMeta(driver) + `-reg-[0-9a-f]{8}\.sock$`)
	list := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}

	t.Run("stale sockets of the driver removed, a new name each run", func(t *testing.T) {
		dir := shortDir(t)
		others := []string{"other.example.com-reg.sock", "other.example.com-reg-0a1b2c3d.sock", driver + ".sock", "x" + driver + "-reg.sock"}
		for _, n := range others {
			staleSocket(t, filepath.Join(dir, n))
		}
		seen := map[string]bool{}
		for run := range 20 {
			if run == 0 {
				staleSocket(t, filepath.Join(dir, driver+"-reg.sock"))
			}
			got, err := registrarSocket(dir, driver)
			require.NoError(t, err)
			require.Regexp(t, named, got)
			require.False(t, seen[got], "run %d reuses %s", run, got)
			seen[got] = true
			require.ElementsMatch(t, others, list(dir), "run %d: only the other drivers' sockets are left", run)
			staleSocket(t, filepath.Join(dir, got)) // the run is killed
		}
	})

	t.Run("a file that is not a socket", func(t *testing.T) {
		dir := shortDir(t)
		name := driver + "-reg-00000000.sock"
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600))
		_, err := registrarSocket(dir, driver)
		require.ErrorContains(t, err, name+", which is not a socket")
		require.Equal(t, []string{name}, list(dir), "a file the driver did not make was removed")
	})

	t.Run("a long path", func(t *testing.T) {
		dir := shortDir(t)
		long := strings.Repeat("d", unixPathMax-len(dir)-len("/-reg-.sock")-5)
		got, err := registrarSocket(dir, long)
		require.NoError(t, err)
		require.Len(t, filepath.Join(dir, got), unixPathMax, "the id shortened to fit")
		staleSocket(t, filepath.Join(dir, got))
		_, err = registrarSocket(dir, long+"dd")
		require.ErrorContains(t, err, "leave no room for a socket name")
	})

	t.Run("no directory", func(t *testing.T) {
		_, err := registrarSocket(filepath.Join(shortDir(t), "none"), driver)
		require.ErrorContains(t, err, "read the kubelet registration directory")
	})
}
