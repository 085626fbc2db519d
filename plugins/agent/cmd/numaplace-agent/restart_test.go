package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// restartKubelet stops the kubelet (SIGTERM, as systemctl restart does)
// and runs it again with the same arguments, waiting until it has renewed
// the node's lease.
func (c *kubeletCluster) restartKubelet(t *testing.T) {
	t.Helper()
	c.kubelet.stop()
	c.kubeletRuns++
	since := time.Now()
	c.kubelet = startHostProcess(t, c.e.dir, fmt.Sprintf("kubelet-%d", c.kubeletRuns), exec.Command(c.e.nsenter, c.e.kubeletArgs...))
	require.Eventually(t, func() bool {
		l, err := c.client.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), kubeletNode, metav1.GetOptions{})
		return err == nil && !c.kubelet.exited() && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since)
	}, 90*time.Second, 200*time.Millisecond, "the restarted kubelet does not renew the node's lease (log: %s)", c.kubelet.log)
}

// buildAgent builds numaplace-agent (this package: go test's working
// directory) into dir.
func buildAgent(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(dir, "numaplace-agent")
	cmd := exec.Command(goBin, "build", "-o", out, ".")
	msg, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build numaplace-agent: %s", msg)
	return out
}

// startAgentProcess runs numaplace-agent as a process of its own (built
// once per test) with the cluster's agentArgs, and waits until containerd
// has synchronised with it. The agent the cluster started in the test's
// process must be stopped first.
func (c *kubeletCluster) startAgentProcess(t *testing.T) *hostProcess {
	t.Helper()
	if c.agentBin == "" {
		c.agentBin = buildAgent(t, c.e.dir)
	}
	before, _ := os.ReadFile(c.e.log)
	c.agentRuns++
	p := startHostProcess(t, c.e.dir, fmt.Sprintf("numaplace-agent-%d", c.agentRuns), exec.Command(c.agentBin,
		append([]string{"--socket", c.e.nriSock, "--log-level", "debug"}, c.agentArgs...)...))
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(c.e.log)
		return strings.Count(string(data), "connected and synchronized") > strings.Count(string(before), "connected and synchronized") ||
			p.exited()
	}, 60*time.Second, 20*time.Millisecond, "containerd did not synchronise with the agent (log: %s)", p.log)
	require.False(t, p.exited(), "the agent exited (log: %s)", p.log)
	return p
}

// kill9 kills the process with SIGKILL (no cleanup of its own) and waits
// for it.
func (p *hostProcess) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}
