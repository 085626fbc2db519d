package controlplane

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// StopTimeout is how long [Process.Stop] waits after SIGTERM before it
// kills the process (its whole process group when it has one of its own).
const StopTimeout = 20 * time.Second

// FreePort returns a loopback TCP port that nothing listens on now (the
// kernel's choice for 127.0.0.1:0, closed again). Another process may take
// it before the caller's program binds it; the window is short.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Process is a program a test started with [StartProcess].
type Process struct {
	// Name names the process in messages; Log is the path of its log
	// file (its standard output and error).
	Name, Log string
	// Cmd is the started command: Cmd.Process.Pid is its process ID, and
	// Cmd.ProcessState its exit status once Done is closed.
	Cmd *exec.Cmd

	done chan struct{}
	err  error // cmd.Wait's, once done is closed
	once sync.Once
}

// StartProcess starts cmd with its standard output and error appended to
// dir/name.log (so that a program started again under the same name keeps
// one log) and, unless cmd.SysProcAttr is set, in a process group of its
// own. At the end of the test it is stopped ([Process.Stop]) and, when the
// test failed, the end of its log is logged.
func StartProcess(t testing.TB, dir, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Name: name, Log: filepath.Join(dir, name+".log"), Cmd: cmd, done: make(chan struct{})}
	f, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = f, f
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		require.NoError(t, err, "starting %s", name)
	}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s's log (end):\n%s", name, p.Tail(5000))
		}
	})
	return p
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is what waiting for the process returned (nil for exit status 0);
// it is nil too while the process runs.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Stop stops the process and waits until it has exited: SIGTERM, then
// SIGKILL (to its process group when it has one of its own) after
// [StopTimeout]. It does nothing when the process has exited already, and
// is safe to call more than once.
func (p *Process) Stop() {
	p.once.Do(func() {
		if p.Exited() {
			return
		}
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(StopTimeout):
			if a := p.Cmd.SysProcAttr; a != nil && a.Setpgid {
				_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
			} else {
				_ = p.Cmd.Process.Kill()
			}
			<-p.done
		}
	})
}

// Tail returns at most the last n bytes of the process's log ("" when it
// cannot be read).
func (p *Process) Tail(n int) string {
	data, _ := os.ReadFile(p.Log)
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}
