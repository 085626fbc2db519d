package kubelet

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/internal/readfile"
)

// fixAsideClock makes the names of files set aside use the time at.
func fixAsideClock(t *testing.T, at time.Time) {
	t.Helper()
	old := asideNow
	asideNow = func() time.Time { return at }
	t.Cleanup(func() { asideNow = old })
}

// dirNames returns the names in dir, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

var setAsideOpts = NodeOptions{SetAsideUnusableCheckpoint: true}

// TestOpenSetsAsideUnusableCheckpoint: with SetAsideUnusableCheckpoint,
// every checkpoint that Open refuses for its content (the same files as
// TestOpenRefusesBadCheckpoint) is renamed to checkpoint.json.corrupt-<UTC
// time> with its bytes unchanged, the node starts empty and writes an empty
// checkpoint, and SetAside names the new file and the problem.
func TestOpenSetsAsideUnusableCheckpoint(t *testing.T) {
	_, _, tests := badCheckpoints(t)
	at := time.Date(2026, 12, 6, 2, 25, 12, 0, time.FixedZone("CET", 3600))
	fixAsideClock(t, at)
	m := smallMachine(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "checkpoint.json")
			require.NoError(t, os.WriteFile(path, tt.file, 0o600))

			n, err := Open(m, path, setAsideOpts)
			require.NoError(t, err)
			require.Empty(t, n.Admissions())
			aside := n.SetAside()
			require.NotNil(t, aside)
			want := filepath.Join(dir, "checkpoint.json.corrupt-20261206T012512Z") // UTC
			require.Equal(t, want, aside.Path)
			require.Equal(t, path, aside.Err.Path)
			require.ErrorIs(t, aside.Err, ErrCheckpoint)
			require.Contains(t, aside.Err.Error(), tt.problem)
			if tt.cause != nil {
				require.ErrorIs(t, aside.Err, tt.cause)
			}
			kept, err := os.ReadFile(want)
			require.NoError(t, err)
			require.Equal(t, tt.file, kept, "the file set aside is the bad file, byte for byte")
			require.Equal(t, []string{"checkpoint.json", "checkpoint.json.corrupt-20261206T012512Z"}, dirNames(t, dir))

			// The node works, and its checkpoint is a fresh one that a
			// plain Open uses.
			_, err = n.Admit(numaPod("a", 2, 1, "SingleNUMANode"))
			require.NoError(t, err)
			again, err := Open(m, path, NodeOptions{})
			require.NoError(t, err)
			require.Len(t, again.Admissions(), 1)
			require.Nil(t, again.SetAside())
		})
	}
}

// TestOpenSetsAsideATooLargeFile: a regular file longer than any checkpoint
// is set aside too (it is read no further than the bound).
func TestOpenSetsAsideATooLargeFile(t *testing.T) {
	fixAsideClock(t, time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	path := filepath.Join(dir, "cp.json")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxCheckpointBytes+1)) // sparse: no disk used
	require.NoError(t, f.Close())
	n, err := Open(smallMachine(t), path, setAsideOpts)
	require.NoError(t, err)
	require.NotNil(t, n.SetAside())
	require.ErrorIs(t, n.SetAside().Err, readfile.ErrTooLarge)
	info, err := os.Stat(path + ".corrupt-20261206T020000Z")
	require.NoError(t, err)
	require.EqualValues(t, MaxCheckpointBytes+1, info.Size())
}

// TestOpenSetAsideNeverOverwrites: a file set aside in the same second as
// an earlier one (or beside any file of that name) gets the next free
// "-N" name; the earlier files are untouched. This holds on a file system
// without hard links too.
func TestOpenSetAsideNeverOverwrites(t *testing.T) {
	for _, links := range []bool{true, false} {
		t.Run(fmt.Sprintf("hard links %v", links), func(t *testing.T) {
			if !links {
				old := linkFile
				linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
				t.Cleanup(func() { linkFile = old })
			}
			fixAsideClock(t, time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC))
			m := smallMachine(t)
			dir := t.TempDir()
			path := filepath.Join(dir, "cp.json")
			base := path + ".corrupt-20261206T020000Z"
			require.NoError(t, os.WriteFile(base, []byte("first"), 0o600))
			require.NoError(t, os.WriteFile(base+"-2", []byte("second"), 0o600))
			require.NoError(t, os.WriteFile(path, []byte("third"), 0o600))
			n, err := Open(m, path, setAsideOpts)
			require.NoError(t, err)
			require.Equal(t, base+"-3", n.SetAside().Path)
			for name, want := range map[string]string{base: "first", base + "-2": "second", base + "-3": "third"} {
				got, err := os.ReadFile(name)
				require.NoError(t, err)
				require.Equal(t, want, string(got), name)
			}
			require.Len(t, dirNames(t, dir), 4)
		})
	}
}

// TestOpenStillRefuses: what is not a file of unusable content still stops
// the start, with the option on, and nothing is moved: a path that is not a
// regular file (a directory, a FIFO), a file that cannot be read (no read
// permission; not testable as root, who reads it anyway), and a bad file
// that cannot be set aside.
func TestOpenStillRefuses(t *testing.T) {
	m := smallMachine(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o700))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, p := range []string{sub, fifo} {
		n, err := Open(m, p, setAsideOpts)
		require.Nil(t, n, p)
		require.ErrorIs(t, err, readfile.ErrNotRegular, p)
		require.Contains(t, err.Error(), "cannot be read")
	}
	require.Equal(t, []string{"fifo", "sub"}, dirNames(t, dir), "nothing set aside")

	if os.Geteuid() != 0 {
		d := t.TempDir()
		p := filepath.Join(d, "cp.json")
		require.NoError(t, os.WriteFile(p, []byte("{"), 0o000))
		n, err := Open(m, p, setAsideOpts)
		require.Nil(t, n)
		require.ErrorIs(t, err, os.ErrPermission)
		require.Equal(t, []string{"cp.json"}, dirNames(t, d))
	}

	// The file cannot be set aside: the start stops with both reasons, and
	// the file keeps its name.
	oldLink, oldRename := linkFile, renameFile
	linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	renameFile = func(string, string) error { return &os.LinkError{Op: "rename", Err: syscall.EROFS} }
	t.Cleanup(func() { linkFile, renameFile = oldLink, oldRename })
	d := t.TempDir()
	p := filepath.Join(d, "cp.json")
	require.NoError(t, os.WriteFile(p, []byte("{"), 0o600))
	n, err := Open(m, p, setAsideOpts)
	require.Nil(t, n)
	var ce *CheckpointError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, p, ce.Path)
	require.Contains(t, err.Error(), "not a valid checkpoint")
	require.Contains(t, err.Error(), "cannot be set aside")
	require.ErrorIs(t, err, syscall.EROFS)
	require.Equal(t, []string{"cp.json"}, dirNames(t, d))
}

// TestSetAsideNilWhenNothingWasSetAside: a good file, a missing file, and
// (without the option) a bad file that stops the start set nothing aside.
func TestSetAsideNilWhenNothingWasSetAside(t *testing.T) {
	m := smallMachine(t)
	good := writtenCheckpoint(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "cp.json")
	n, err := Open(m, path, setAsideOpts)
	require.NoError(t, err)
	require.Nil(t, n.SetAside(), "missing")
	require.NoError(t, os.WriteFile(path, good, 0o600))
	n, err = Open(m, path, setAsideOpts)
	require.NoError(t, err)
	require.Nil(t, n.SetAside(), "good")
	require.Len(t, n.Admissions(), 3)
	require.NoError(t, os.WriteFile(path, good[:10], 0o600))
	_, err = Open(m, path, NodeOptions{})
	require.ErrorIs(t, err, ErrCheckpoint)
	require.True(t, slices.Equal([]string{"cp.json"}, dirNames(t, dir)))
	var nilNode *Node
	require.Nil(t, nilNode.SetAside())
}
