package kubelet

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/numaplace/numaplace/allocator"
)

// AsideSuffix is what a checkpoint file set aside is named after: the
// checkpoint's path, this suffix, and the UTC time it was set aside at in
// [AsideTimeFormat] (then "-2", "-3", ... when a file of that name exists
// already), such as /var/lib/numaplace/checkpoint.json.corrupt-20261206T022512Z.
const AsideSuffix = ".corrupt-"

// AsideTimeFormat is the time layout of the names of checkpoint files set
// aside (see [AsideSuffix]): UTC to the second, without colons.
const AsideTimeFormat = "20060102T150405Z"

// maxAsideNames bounds the names tried for one file set aside (the same
// second's name and its "-2" ... suffixes).
const maxAsideNames = 1000

// SetAsideCheckpoint is a checkpoint file that [Open] could not use and,
// as NodeOptions.SetAsideUnusableCheckpoint asks, moved aside before it
// started empty.
type SetAsideCheckpoint struct {
	// Path is where the file is now (see [AsideSuffix]); it is never
	// overwritten or removed by this package.
	Path string
	// Err says why the file could not be used: it names the checkpoint's
	// own path and the problem, such as "checksum mismatch".
	Err *CheckpointError
}

// SetAside returns the checkpoint file Open found unusable and set aside,
// or nil when it set none aside (the file was used, was missing, or
// NodeOptions.SetAsideUnusableCheckpoint is off).
func (n *Node) SetAside() *SetAsideCheckpoint {
	if n == nil || n.aside == nil {
		return nil
	}
	c := *n.aside
	return &c
}

// asideNow is the clock of the names of files set aside; tests replace it.
var asideNow = time.Now

// linkFile makes a second name for a file and renameFile renames one;
// tests replace them to act as a file system without hard links or one
// that refuses the rename.
var (
	linkFile   = os.Link
	renameFile = os.Rename
)

// setAside moves the checkpoint file at path to a new name of its own
// (path + AsideSuffix + the time, see AsideSuffix), never replacing an
// existing file, and makes the move durable (the directory's fsync). It
// returns the new name. The file is given its new name by a hard link
// (which fails rather than replace a file) and its old name removed; where
// the file system has no hard links it is renamed to a name that does not
// exist. On error the file keeps its name, unless the error says it has
// both.
func setAside(path string) (string, error) {
	base := path + AsideSuffix + asideNow().UTC().Format(AsideTimeFormat)
	for i := 1; i <= maxAsideNames; i++ {
		dst := base
		if i > 1 {
			dst = fmt.Sprintf("%s-%d", base, i)
		}
		err := linkFile(path, dst)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			// No hard links here (EPERM, ENOTSUP, EXDEV...): rename to a
			// name that is free. One Node at a time uses the checkpoint,
			// so nothing else makes this name between the check and the
			// rename.
			if _, serr := os.Lstat(dst); serr == nil {
				continue
			} else if !errors.Is(serr, fs.ErrNotExist) {
				return "", fmt.Errorf("set the file aside as %s: %w", dst, serr)
			}
			if rerr := renameFile(path, dst); rerr != nil {
				return "", fmt.Errorf("set the file aside as %s: link: %w; rename: %w", dst, err, rerr)
			}
		} else if rerr := os.Remove(path); rerr != nil {
			return dst, fmt.Errorf("set the file aside as %s: it is there, but its old name cannot be removed: %w", dst, rerr)
		}
		if err := syncDir(filepath.Dir(path)); err != nil {
			return dst, fmt.Errorf("set the file aside as %s: %w", dst, err)
		}
		return dst, nil
	}
	return "", fmt.Errorf("set the file aside: %s and its %d numbered variants exist already", base, maxAsideNames-1)
}

// syncDir fsyncs the directory dir, so that the names created and removed
// in it last through a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory to fsync it: %w", err)
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return d.Close()
}

// openAside is Open's handling of a checkpoint that restore refused
// (err): with NodeOptions.SetAsideUnusableCheckpoint and a file whose
// content is unusable, the file is set aside and the node starts empty in
// a fresh state (restore may have claimed part of the file before it found
// the problem); otherwise, or when the file cannot be set aside, it returns
// the error that stops the start.
func (n *Node) openAside(err error) error {
	var ce *CheckpointError
	if !n.opts.SetAsideUnusableCheckpoint || !errors.As(err, &ce) || !ce.unusable {
		return err
	}
	dst, aerr := setAside(n.path)
	if aerr != nil {
		return &CheckpointError{Path: n.path, Problem: ce.Problem + "; and it cannot be set aside", Err: errors.Join(ce.Err, aerr)}
	}
	s, serr := allocator.New(n.m, n.opts.Allocator)
	if serr != nil {
		return fmt.Errorf("kubelet.Open: %w", serr)
	}
	n.s = s
	n.pods = map[string]podRecord{} // restore sets them only on success: for clarity
	n.aside = &SetAsideCheckpoint{Path: dst, Err: ce}
	return nil
}
