package kubelet

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var crashRounds = flag.Int("checkpoint-crashes", 40,
	"processes killed with SIGKILL while writing checkpoints in TestCheckpointCrashesLeaveNoLitter")

// Environment of the child process of TestCheckpointCrashesLeaveNoLitter.
const (
	crashChildEnv = "NUMAPLACE_CHECKPOINT_CRASH_CHILD" // "mid" or "loop"
	crashPathEnv  = "NUMAPLACE_CHECKPOINT_CRASH_PATH"
	crashRoundEnv = "NUMAPLACE_CHECKPOINT_CRASH_ROUND"
	crashLine     = "CRASH: "
)

// TestCheckpointCrashChild is the child process of
// TestCheckpointCrashesLeaveNoLitter (it does nothing in a normal run). It
// opens a node on the checkpoint, says how many leftovers Open removed,
// waits for "go" and then writes checkpoints until it is killed: in mode
// "mid" it stops inside its first write, after half of the temporary file
// is written; in mode "loop" it admits shared-pool pods (and removes old
// ones of its own) forever, saying each pod's name once its admission is
// written.
func TestCheckpointCrashChild(t *testing.T) {
	mode := os.Getenv(crashChildEnv)
	if mode == "" {
		t.Skip("the child process of TestCheckpointCrashesLeaveNoLitter")
	}
	say := func(format string, args ...any) { fmt.Printf(crashLine+format+"\n", args...) }
	n, err := Open(smallMachine(t), os.Getenv(crashPathEnv), NodeOptions{})
	if err != nil {
		say("error %s", strings.ReplaceAll(err.Error(), "\n", " "))
		return
	}
	say("opened %d", len(n.RemovedLeftovers()))
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "go\n" {
		say("error no go: %q %v", line, err)
		return
	}
	round := os.Getenv(crashRoundEnv)
	name := func(i int) string { return fmt.Sprintf("r%s-%d", round, i) }
	if mode == "mid" {
		n.write = func(path string, data []byte) error {
			return writeAtomic(path, data, func(tmp string) {
				say("mid %s", tmp)
				time.Sleep(time.Hour) // until killed
			})
		}
		_, err := n.Admit(sharedPod("mid-" + round))
		say("error the write returned: %v", err)
		return
	}
	for i := 0; ; i++ {
		if _, err := n.Admit(sharedPod(name(i))); err != nil {
			say("error %v", err)
			return
		}
		say("admitted default/%s", name(i))
		if i >= 40 {
			if err := n.Remove(sharedPod(name(i - 40))); err != nil {
				say("error %v", err)
				return
			}
		}
	}
}

// litter returns the names of the checkpoint's temporary files in dir.
func litter(t *testing.T, dir, path string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if isTempOf(e.Name(), tempPrefix(path)) {
			out = append(out, e.Name())
		}
	}
	return out
}

// Real crashes: a child process (this test binary again) is killed with
// SIGKILL while it writes checkpoints, half the time exactly in the middle
// of writing the temporary file, half the time after a random number of
// completed admissions. Every interrupted write that leaves a temporary file
// behind has it removed by the next Open (the next child's, which reports
// how many it removed), so after any number of crashes the directory holds
// only the checkpoint, and the last admission each child reported written
// is in it while the one interrupted in the middle is not. Temporary files
// of other files in the same directory and look-alikes are not touched.
func TestCheckpointCrashesLeaveNoLitter(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("in the child process")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	rng := rand.New(rand.NewPCG(11, 8))

	var leftBehind []string // temporary files the last crash left
	var last string         // the last pod a "loop" child reported admitted
	var removed, midLitter int
	for round := range *crashRounds {
		mode := "loop"
		if round%2 == 0 {
			mode = "mid"
		}
		cmd := exec.Command(exe, "-test.run=^TestCheckpointCrashChild$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+mode, crashPathEnv+"="+path,
			crashRoundEnv+"="+strconv.Itoa(round))
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(stdout)
		next := func() string {
			for lines.Scan() {
				if s, ok := strings.CutPrefix(lines.Text(), crashLine); ok {
					require.False(t, strings.HasPrefix(s, "error"), "round %d (%s): the child says %s", round, mode, s)
					return s
				}
			}
			require.Fail(t, "the child ended", "round %d (%s): %v", round, mode, lines.Err())
			return ""
		}

		// The child's Open removed what the previous crash left, and only that.
		require.Equal(t, fmt.Sprintf("opened %d", len(leftBehind)), next(), "round %d", round)
		require.Empty(t, litter(t, dir, path), "round %d: Open left temporary files", round)
		removed += len(leftBehind)
		_, err = io.WriteString(stdin, "go\n")
		require.NoError(t, err)
		if mode == "mid" {
			tmp, ok := strings.CutPrefix(next(), "mid ")
			require.True(t, ok)
			_, err := os.Stat(tmp)
			require.NoError(t, err, "the temporary file exists while it is written")
		} else {
			for range 1 + rng.IntN(12) {
				last, _ = strings.CutPrefix(next(), "admitted ")
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		err = cmd.Wait()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "round %d: %v", round, err)
		require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "round %d: %v", round, err)

		leftBehind = litter(t, dir, path)
		if mode == "mid" {
			require.Len(t, leftBehind, 1, "round %d: a write killed in its middle leaves its temporary file", round)
			midLitter++
		}
	}
	require.Equal(t, (*crashRounds+1)/2, midLitter)

	// Other files' temporary files and look-alikes stay.
	foreign := []string{
		".checkpoint.json.bak.tmp-123", // another checkpoint's temporary file
		".other.json.tmp-4567",         // another file's
		".checkpoint.json.tmp-",        // no digits
		".checkpoint.json.tmp-12x",     // not only digits
		"checkpoint.json.tmp-99",       // no leading dot
		".Checkpoint.json.tmp-5",       // another name (case)
	}
	for _, name := range foreign {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".checkpoint.json.tmp-77"), 0o755)) // not a regular file
	n, err := Open(smallMachine(t), path, NodeOptions{})
	require.NoError(t, err, "the checkpoint is usable after %d crashes", *crashRounds)
	var want []string
	for _, name := range leftBehind {
		want = append(want, filepath.Join(dir, name))
	}
	require.Equal(t, want, n.RemovedLeftovers())
	removed += len(leftBehind)
	t.Logf("%d crashes, %d of them in the middle of a write; Open removed %d temporary files", *crashRounds, midLitter, removed)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	wantNames := append([]string{"checkpoint.json", ".checkpoint.json.tmp-77"}, foreign...)
	slices.Sort(wantNames)
	require.Equal(t, wantNames, names, "only the checkpoint and the files that are not its temporary files")

	// What the children reported written survived; the interrupted
	// admissions did not.
	if last != "" {
		_, ok := n.Get(last)
		require.True(t, ok, "%s was admitted and written before the crash", last)
	}
	for _, a := range n.Admissions() {
		require.False(t, strings.HasPrefix(a.Pod, "default/mid-"), "%s was interrupted in the middle of its write", a.Pod)
	}
}

// A leftover that cannot be removed stops the start with an error naming it
// (every leftover is tried, and the checkpoint is left as it is); a
// directory that cannot be read is an error too.
func TestOpenReportsLeftoverRemovalErrors(t *testing.T) {
	m := smallMachine(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "cp.json")
	n, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	_, err = n.Admit(sharedPod("a"))
	require.NoError(t, err)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, name := range []string{".cp.json.tmp-1", ".cp.json.tmp-2", ".cp.json.tmp-3"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("{"), 0o600))
	}
	stuck := filepath.Join(dir, ".cp.json.tmp-2")
	orig := removeFile
	t.Cleanup(func() { removeFile = orig })
	removeFile = func(p string) error {
		if p == stuck {
			return &os.PathError{Op: "remove", Path: p, Err: syscall.EPERM}
		}
		return orig(p)
	}
	_, err = Open(m, path, NodeOptions{})
	var ce *CheckpointError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, ErrCheckpoint)
	require.ErrorIs(t, err, syscall.EPERM)
	require.Equal(t, path, ce.Path)
	require.Contains(t, err.Error(), stuck)
	require.Contains(t, err.Error(), "temporary files of interrupted writes cannot be removed")
	require.Equal(t, []string{".cp.json.tmp-2", "cp.json"}, sortedNames(t, dir), "the others were removed")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after, "the checkpoint is left as it is")

	removeFile = orig
	n, err = Open(m, path, NodeOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{stuck}, n.RemovedLeftovers())
	_, ok := n.Get("default/a")
	require.True(t, ok)

	// A directory that cannot be read (a file where the directory should
	// be cannot be listed).
	notDir := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(notDir, nil, 0o600))
	_, err = Open(m, filepath.Join(notDir, "cp.json"), NodeOptions{})
	require.ErrorAs(t, err, &ce)
	require.Contains(t, err.Error(), "read directory "+notDir)
}

func sortedNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

func TestIsTempOf(t *testing.T) {
	p := tempPrefix("/var/lib/numaplace/cp.json")
	require.Equal(t, ".cp.json.tmp-", p)
	for name, want := range map[string]bool{
		".cp.json.tmp-0": true, ".cp.json.tmp-4294967295": true,
		".cp.json.tmp-": false, ".cp.json.tmp-1a": false, ".cp.json.tmp--1": false, "cp.json.tmp-1": false,
		".cp.json.bak.tmp-1": false, ".cp.json.tmp-1.tmp-2": false, "cp.json": false, ".cp.json.tmp-１": false,
	} {
		require.Equal(t, want, isTempOf(name, p), name)
	}
}
