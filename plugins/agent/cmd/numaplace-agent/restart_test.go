package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The harness's restarts of the node's components: containerd in the
// node's mount namespace (held by a process of its own, so that containerd
// can go and come back while the kubelet and the containers stay), and
// the agent as a process of its own (so that it can be killed with
// SIGKILL).

// containerdProc is a run of the node's containerd.
type containerdProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// runContainerd starts containerd in the node's mount namespace with its
// configuration, its output appended to its log, and waits until it
// answers.
func (e *kubeletEnv) runContainerd(t *testing.T) {
	t.Helper()
	cmd := exec.Command(e.nsenter, "--target", strconv.Itoa(e.pid), "--mount", "--",
		filepath.Join(e.bin, "containerd"), "--config", e.containerdConf)
	cmd.Env = append(os.Environ(), "PATH="+e.bin+":"+os.Getenv("PATH")) // the shim
	cmd.Stdout, cmd.Stderr = e.containerdLog, e.containerdLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	p := &containerdProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	e.containerd = p
	require.Eventually(t, func() bool {
		_, err := e.crictl("version")
		return err == nil
	}, 60*time.Second, 100*time.Millisecond, "containerd did not answer on %s (log: %s)", e.sock, e.log)
}

// stopContainerd stops the running containerd with sig (SIGKILL of its
// process group after 20 s) and waits for it. The containers keep running
// under their shims (their own process groups).
func (e *kubeletEnv) stopContainerd(sig syscall.Signal) {
	p := e.containerd
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	e.containerd = nil
}

// restartContainerd stops containerd (SIGTERM, as systemctl restart does)
// and starts it again with its state, waiting until it answers and an NRI
// plugin (the agent, reconnecting) has synchronised with it again.
func (e *kubeletEnv) restartContainerd(t *testing.T) {
	t.Helper()
	before, _ := os.ReadFile(e.log)
	e.stopContainerd(syscall.SIGTERM)
	e.runContainerd(t)
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(e.log)
		return strings.Count(string(data), "connected and synchronized") > strings.Count(string(before), "connected and synchronized")
	}, 90*time.Second, 50*time.Millisecond, "no NRI plugin synchronised with the restarted containerd")
}
