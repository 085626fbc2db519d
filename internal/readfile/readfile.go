package readfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// The categories of the errors of [Regular]; errors.Is matches them.
var (
	// ErrNotRegular is a path that is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is a file longer than the bound.
	ErrTooLarge = errors.New("file too large")
)

// Regular returns the content of the regular file at path, of at most max
// bytes. A path that is not a regular file (after following links) is an
// error wrapping [ErrNotRegular] that says what it is; a longer file is an
// error wrapping [ErrTooLarge], at once when its size says so, else once
// max+1 bytes have been read. Errors are
// *fs.PathError naming the path; one that does not exist wraps
// fs.ErrNotExist.
func Regular(path string, max int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO without a writer would block otherwise;
	// it has no effect on regular files.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, Kind(info.Mode()))}
	}
	// A regular file's size is known before reading (files of /proc and
	// /sys say 0 or a page and are read to their end below).
	if info.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: longer than %d bytes", ErrTooLarge, max)}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: longer than %d bytes", ErrTooLarge, max)}
	}
	return data, nil
}

// Bounded reads r to its end, of at most max bytes: more is an error
// wrapping [ErrTooLarge] naming what, once max+1 bytes have been read.
func Bounded(r io.Reader, what string, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: %w: longer than %d bytes", what, ErrTooLarge, max)
	}
	return data, nil
}

// Kind names the type of a file that is not regular, such as "a named
// pipe" or "a symbolic link" (for an unexpected type, its mode).
func Kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "mode " + m.String()
}
