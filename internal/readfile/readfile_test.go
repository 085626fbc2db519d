package readfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRegular: regular files are read up to the bound; FIFOs, devices and
// directories are refused at once, and a longer file is refused after the
// bound.
func TestRegular(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Regular(ok, 5); err != nil || string(b) != "12345" {
		t.Fatalf("Regular(5 bytes, max 5) = %q, %v", b, err)
	}
	if _, err := Regular(ok, 4); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), ok) {
		t.Fatalf("Regular(5 bytes, max 4) = %v, want ErrTooLarge naming the path", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, zero, dir} {
		done := make(chan error, 1)
		go func() { _, err := Regular(p, 1<<20); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) {
				t.Errorf("Regular(%s) = %v, want ErrNotRegular naming it", p, err)
			}
		case <-time.After(10 * time.Second): // a hang, not a speed bound
			t.Fatalf("Regular(%s) hangs", p)
		}
	}
	if _, err := Regular(filepath.Join(dir, "missing"), 1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Bounded(strings.NewReader(strings.Repeat("x", 11)), "stdin", 10); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Bounded: %v", err)
	}
}
