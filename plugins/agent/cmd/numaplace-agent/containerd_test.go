package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/internal/controlplane"
	"github.com/numaplace/numaplace/policy"
)

// The end-to-end test on a real containerd: containerd, its runc shim and
// ctr built from the Go module github.com/containerd/containerd/v2 and
// crictl from sigs.k8s.io/cri-tools (by ../../.ci-prepare into ../../bin,
// or NUMAPLACE_CONTAINERD_BIN), runc and a static busybox from the
// distribution. The test packs busybox as an OCI image archive, imports it
// with ctr, runs containerd with NRI on sockets of its own (host network,
// no CNI) and the agent in this process, and drives pods with crictl as
// the kubelet would.

// e2eImage is the image the test packs and imports (no registry).
const e2eImage = "localhost/numaplace-test/busybox:1"

// e2eMachine is the machine the agent is given: the host's two CPUs as
// two NUMA nodes of one CPU each (cpusets must name real CPUs for runc to
// apply them), each with two GPUs the host does not have: their device
// nodes are stand-ins (/dev/null's numbers) in a directory of the test.
const e2eMachine = `{"name":"e2e","numaNodes":[{"id":0,"socket":0,"cpus":"0","memoryMiB":1024},{"id":1,"socket":1,"cpus":"1","memoryMiB":1024}],
 "gpus":[{"id":0,"numaNode":0,"uuid":"GPU-e2e-0"},{"id":1,"numaNode":0,"uuid":"GPU-e2e-1"},
         {"id":2,"numaNode":1,"uuid":"GPU-e2e-2"},{"id":3,"numaNode":1,"uuid":"GPU-e2e-3"}]}`

// containerdBinaries returns the directory holding containerd,
// containerd-shim-runc-v2, ctr and crictl, or skips saying how to build
// them.
func containerdBinaries(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("NUMAPLACE_CONTAINERD_BIN")
	if dir == "" {
		dir = controlplane.RepoPath(t, "plugins", "agent", "bin")
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "crictl"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.Mode()&0o111 == 0 {
			t.Skipf("no real containerd: %s is not built; run plugins/agent/.ci-prepare (builds containerd %s and crictl "+
				"from the Go module proxy into plugins/agent/bin) or set NUMAPLACE_CONTAINERD_BIN", filepath.Join(dir, b), "v2.4.2")
		}
	}
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	return abs
}

// e2eEnv is a running containerd for one test.
type e2eEnv struct {
	dir, bin, sock, nriSock, log string
	runc                         string
}

// canRunContainers skips the test when this machine cannot run
// containers: not root, no runc, no static busybox, no overlayfs, no
// cgroup cpuset controller.
func canRunContainers(t *testing.T) (runc string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the real-containerd test needs root (containerd, runc, cgroups, mounts)")
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("the real-containerd test needs runc (apt-get install runc; .ci-prepare does it)")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("the real-containerd test needs a static busybox at /bin/busybox (apt-get install busybox-static; .ci-prepare does it)")
	}
	fsData, _ := os.ReadFile("/proc/filesystems")
	if !strings.Contains(string(fsData), "overlay") {
		t.Skip("the real-containerd test needs overlayfs (not in /proc/filesystems)")
	}
	if _, err := os.Stat("/sys/fs/cgroup/cpuset/cpuset.cpus"); err != nil {
		if _, err2 := os.Stat("/sys/fs/cgroup/cpuset.cpus.effective"); err2 != nil {
			t.Skip("the real-containerd test needs the cgroup cpuset controller")
		}
	}
	cpus, err := os.ReadFile("/sys/devices/system/cpu/online")
	require.NoError(t, err)
	if !strings.HasPrefix(strings.TrimSpace(string(cpus)), "0-") {
		t.Skipf("the real-containerd test describes CPUs 0 and 1; this machine's online CPUs are %s", cpus)
	}
	return runc
}

// hasCapability reports whether this process has capability bit cap.
func hasCapability(cap uint) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<cap) != 0
		}
	}
	return false
}

// startContainerd writes containerd's configuration and starts it; it is
// stopped, and its containers removed, at the end of the test.
func startContainerd(t *testing.T) *e2eEnv {
	t.Helper()
	runc := canRunContainers(t)
	bin := containerdBinaries(t)
	dir, err := os.MkdirTemp("/tmp", "np-ctd-") // short: unix socket paths
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e := &e2eEnv{dir: dir, bin: bin, sock: filepath.Join(dir, "containerd.sock"), nriSock: filepath.Join(dir, "nri.sock"),
		log: filepath.Join(dir, "containerd.log"), runc: runc}
	// Without CAP_SYS_RESOURCE, containerd may not lower a container's
	// oom_score_adj below its own.
	restrict := !hasCapability(unix.CAP_SYS_RESOURCE)
	cfg := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[plugins."io.containerd.nri.v1.nri"]
  disable = false
  disable_connections = false
  socket_path = %[4]q
  plugin_path = %[5]q
  plugin_config_path = %[6]q
  plugin_registration_timeout = "5s"
  plugin_request_timeout = "5s"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = %[7]t
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[8]q
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[9]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), e.sock, e.nriSock, filepath.Join(dir, "nri-plugins"),
		filepath.Join(dir, "nri-conf"), restrict, runc, e2eImage)
	conf := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(conf, []byte(cfg), 0o600))

	logFile, err := os.Create(e.log)
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "containerd"), "--config", conf)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH")) // the shim
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		// Remove what is left, then stop containerd (and its shims).
		if out, err := e.crictl("rmp", "--all", "--force"); err != nil {
			t.Logf("crictl rmp --all: %v: %s", err, out)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		_ = logFile.Close()
		_ = unix.Unmount(filepath.Join(dir, "state"), unix.MNT_DETACH)
		if t.Failed() {
			data, _ := os.ReadFile(e.log)
			t.Logf("containerd's log (end):\n%s", tail(data, 6000))
		}
	})
	require.Eventually(t, func() bool {
		_, err := e.crictl("version")
		return err == nil
	}, 60*time.Second, 100*time.Millisecond, "containerd did not answer on %s (log: %s)", e.sock, e.log)
	e.importImage(t)
	return e
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// crictl runs crictl against the test's containerd.
func (e *e2eEnv) crictl(args ...string) (string, error) {
	all := append([]string{"--runtime-endpoint", "unix://" + e.sock, "--image-endpoint", "unix://" + e.sock, "--timeout", "60s"}, args...)
	cmd := exec.Command(filepath.Join(e.bin, "crictl"), all...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return strings.TrimSpace(string(out) + "\n" + stderr.String()), err
	}
	return strings.TrimSpace(string(out)), nil
}

// importImage packs /bin/busybox as an OCI image archive and imports it
// with ctr into the CRI's namespace.
func (e *e2eEnv) importImage(t *testing.T) {
	t.Helper()
	archive := filepath.Join(e.dir, "busybox.tar")
	require.NoError(t, os.WriteFile(archive, ociArchive(t), 0o600))
	out, err := exec.Command(filepath.Join(e.bin, "ctr"), "--address", e.sock, "--namespace", "k8s.io",
		"images", "import", "--platform", "linux/"+runtime.GOARCH, archive).CombinedOutput()
	require.NoError(t, err, "ctr images import: %s", out)
	out2, err := e.crictl("images")
	require.NoError(t, err)
	require.Contains(t, out2, "localhost/numaplace-test/busybox", "the imported image is seen by the CRI: %s", out2)
}

// ociArchive returns an OCI image layout archive of one image: a layer
// with /bin/busybox and its applets as links, its configuration and
// manifest, and an index naming it e2eImage.
func ociArchive(t *testing.T) []byte {
	t.Helper()
	busybox, err := os.ReadFile("/bin/busybox")
	require.NoError(t, err)
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, d := range []string{"bin/", "dev/", "proc/", "sys/", "etc/", "tmp/", "var/", "run/"} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}))
	}
	require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(busybox))}))
	_, err = tw.Write(busybox)
	require.NoError(t, err)
	for _, applet := range []string{"sh", "sleep", "cat", "env", "stat", "ls", "grep", "true"} {
		require.NoError(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + applet, Linkname: "busybox", Mode: 0o777}))
	}
	require.NoError(t, tw.Close())

	blobs := map[string][]byte{}
	add := func(b []byte) (string, int) {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		blobs[d] = b
		return d, len(b)
	}
	layerDigest, layerSize := add(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=/bin"},
			// The sandbox's process: wait for the end.
			"Cmd": []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 1; done"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	require.NoError(t, err)
	configDigest, configSize := add(config)
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": configDigest, "size": configSize},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layerDigest, "size": layerSize}},
	})
	require.NoError(t, err)
	manifestDigest, manifestSize := add(manifest)
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
		"manifests": []any{map[string]any{"mediaType": "application/vnd.oci.image.manifest.v1+json",
			"digest": manifestDigest, "size": manifestSize,
			"platform":    map[string]string{"architecture": runtime.GOARCH, "os": "linux"},
			"annotations": map[string]string{"io.containerd.image.name": e2eImage, "org.opencontainers.image.ref.name": "1"}}},
	})
	require.NoError(t, err)

	var out bytes.Buffer
	aw := tar.NewWriter(&out)
	file := func(name string, b []byte) {
		require.NoError(t, aw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b))}))
		_, err := aw.Write(b)
		require.NoError(t, err)
	}
	file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	file("index.json", index)
	for _, d := range []string{layerDigest, configDigest, manifestDigest} {
		file("blobs/sha256/"+strings.TrimPrefix(d, "sha256:"), blobs[d])
	}
	require.NoError(t, aw.Close())
	return out.Bytes()
}

// agentProc is the agent running in this process.
type agentProc struct {
	cancel context.CancelFunc
	done   chan int
	log    *lockedBuffer
}

// lockedBuffer is a buffer safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startAgent runs numaplace-agent (its run function, as main calls it)
// with args until stop, and waits until containerd has synchronised with
// it.
func (e *e2eEnv) startAgent(t *testing.T, args ...string) *agentProc {
	t.Helper()
	before, _ := os.ReadFile(e.log)
	ctx, cancel := context.WithCancel(context.Background())
	a := &agentProc{cancel: cancel, done: make(chan int, 1), log: &lockedBuffer{}}
	go func() {
		a.done <- run(ctx, append([]string{"--socket", e.nriSock, "--log-level", "debug"}, args...), a.log, noEnv)
	}()
	t.Cleanup(func() { a.stop(t) })
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(e.log)
		return strings.Count(string(data), "connected and synchronized") > strings.Count(string(before), "connected and synchronized")
	}, 30*time.Second, 20*time.Millisecond, "containerd did not synchronise with the agent; its log:\n%s", a.log)
	return a
}

// stop stops the agent (once) and checks that it exited cleanly.
func (a *agentProc) stop(t *testing.T) {
	t.Helper()
	if a.cancel == nil {
		return
	}
	a.cancel()
	a.cancel = nil
	select {
	case code := <-a.done:
		require.Equal(t, 0, code, "the agent's exit status; its log:\n%s", a.log)
	case <-time.After(30 * time.Second):
		t.Fatalf("the agent did not stop; its log:\n%s", a.log)
	}
	if t.Failed() {
		t.Logf("the agent's log:\n%s", a.log)
	}
}

// pod is a pod sandbox driven with crictl.
type pod struct {
	name, id string
	ctrs     map[string]string // container name -> ID
}

// runPod runs a pod sandbox with host network and the annotations; err
// is crictl's failure (with its output).
func (e *e2eEnv) runPod(t *testing.T, name string, annotations map[string]string) (*pod, error) {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{
		"metadata":      map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name, "attempt": 0},
		"annotations":   annotations,
		"log_directory": filepath.Join(e.dir, "logs", name),
		"linux":         map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}}},
	})
	require.NoError(t, err)
	path := filepath.Join(e.dir, "pod-"+name+".json")
	require.NoError(t, os.WriteFile(path, cfg, 0o600))
	out, err := e.crictl("runp", path)
	if err != nil {
		return nil, fmt.Errorf("crictl runp %s: %w: %s", name, err, out)
	}
	return &pod{name: name, id: lastLine(out), ctrs: map[string]string{}}, nil
}

// lastLine returns the last line of s (crictl prints IDs last).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// startContainer creates and starts a container that sleeps in the pod.
func (e *e2eEnv) startContainer(t *testing.T, p *pod, name string) string {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": name},
		"image":    map[string]any{"image": e2eImage},
		"command":  []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"},
		"log_path": name + ".log",
	})
	require.NoError(t, err)
	cpath := filepath.Join(e.dir, "ctr-"+p.name+"-"+name+".json")
	require.NoError(t, os.WriteFile(cpath, cfg, 0o600))
	out, err := e.crictl("create", p.id, cpath, filepath.Join(e.dir, "pod-"+p.name+".json"))
	require.NoError(t, err, "crictl create %s/%s: %s", p.name, name, out)
	id := lastLine(out)
	out, err = e.crictl("start", id)
	require.NoError(t, err, "crictl start %s/%s: %s", p.name, name, out)
	p.ctrs[name] = id
	return id
}

// removePod stops and removes the pod sandbox.
func (e *e2eEnv) removePod(t *testing.T, p *pod) {
	t.Helper()
	out, err := e.crictl("stopp", p.id)
	require.NoError(t, err, "crictl stopp %s: %s", p.name, out)
	out, err = e.crictl("rmp", p.id)
	require.NoError(t, err, "crictl rmp %s: %s", p.name, out)
}

// exec runs a command in the container and returns its output.
func (e *e2eEnv) exec(t *testing.T, ctr string, cmd ...string) string {
	t.Helper()
	out, err := e.crictl(append([]string{"exec", ctr}, cmd...)...)
	require.NoError(t, err, "crictl exec %s %v: %s", ctr, cmd, out)
	return out
}

// status returns a field of the container's /proc/self/status as a new
// process in it sees it, such as "Cpus_allowed_list".
func (e *e2eEnv) status(t *testing.T, ctr, field string) string {
	t.Helper()
	for line := range strings.Lines(e.exec(t, ctr, "cat", "/proc/self/status")) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in the container's /proc/self/status", field)
	return ""
}

// waitCPUs waits until the container's processes may run on cpus.
func (e *e2eEnv) waitCPUs(t *testing.T, ctr, cpus, why string) {
	t.Helper()
	var last string
	require.Eventually(t, func() bool {
		last = e.status(t, ctr, "Cpus_allowed_list")
		return last == cpus
	}, 30*time.Second, 50*time.Millisecond, "%s: the container's CPUs are %q, want %q", why, last, cpus)
}

// envOf returns the container's environment as NAME -> value.
func (e *e2eEnv) envOf(t *testing.T, ctr string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for line := range strings.Lines(e.exec(t, ctr, "env")) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			out[k] = v
		}
	}
	return out
}

// decisionPod returns the annotations of a pod with a NUMA spec and a
// decision.
func decisionPod(cpus string, nodes []int, gpus ...int) map[string]string {
	d := kube.Decision{Policy: policy.SingleNUMANode, Exclusive: policy.Required, CPUSet: cpus, NUMANodes: nodes,
		GPUs: []kube.DecisionGPU{}, MemoryMiB: map[string]int64{}}
	for _, g := range gpus {
		d.GPUs = append(d.GPUs, kube.DecisionGPU{ID: g, UUID: "GPU-e2e-" + strconv.Itoa(g)})
	}
	return map[string]string{
		kube.AnnotationSpecAlibaba:     `{"numaTopologyPolicy":"SingleNUMANode"}`,
		kube.AnnotationCPUSetScheduler: "required",
		kube.AnnotationAllocation:      d.String(),
	}
}

// e2eAgentArgs writes e2eMachine and stand-in device nodes of its GPUs
// (and nvidiactl, nvidia-uvm) into the environment's directory and returns
// the agent's arguments for them (its checkpoint under state/, no
// reporter, no device health checks) and the checkpoint's path.
func (e *e2eEnv) e2eAgentArgs(t *testing.T) ([]string, string) {
	t.Helper()
	devRoot := filepath.Join(e.dir, "dev")
	require.NoError(t, os.MkdirAll(devRoot, 0o755))
	for _, n := range []string{"nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl", "nvidia-uvm"} {
		require.NoError(t, unix.Mknod(filepath.Join(devRoot, n), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))), "mknod %s", n)
	}
	machineFile := filepath.Join(e.dir, "machine.json")
	require.NoError(t, os.WriteFile(machineFile, []byte(e2eMachine), 0o600))
	checkpoint := filepath.Join(e.dir, "state", "numaplace", "checkpoint.json")
	args := []string{"--topology", machineFile, "--checkpoint", checkpoint, "--dev-root", devRoot,
		"--reporter=false", "--kubelet-socket-dir", filepath.Join(e.dir, "kubelet"), "--health-interval", "0"}
	return args, checkpoint
}

func TestOnRealContainerdWithNRI(t *testing.T) {
	start := time.Now()
	e := startContainerd(t)
	t.Logf("containerd up, image imported: %s", time.Since(start).Round(time.Millisecond))

	args, checkpoint := e.e2eAgentArgs(t)
	agent := e.startAgent(t, args...)

	// A pod without a NUMA spec runs on the shared pool: both CPUs.
	web, err := e.runPod(t, "web", nil)
	require.NoError(t, err)
	w := e.startContainer(t, web, "main")
	require.Equal(t, "0-1", e.status(t, w, "Cpus_allowed_list"))
	_, hasGPUs := e.envOf(t, w)["NVIDIA_VISIBLE_DEVICES"]
	require.False(t, hasGPUs, "a shared-pool container's environment is left alone")

	// An exclusive pod on NUMA node 1 with GPU 2: its container gets
	// exactly CPU 1, GPU 2 in its environment and GPU 2's device node (and
	// the control nodes), no other GPU's. The shared pod moves off CPU 1.
	x, err := e.runPod(t, "x", decisionPod("1", []int{1}, 2))
	require.NoError(t, err)
	xc := e.startContainer(t, x, "main")
	require.Equal(t, "1", e.status(t, xc, "Cpus_allowed_list"))
	require.Equal(t, "GPU-e2e-2", e.envOf(t, xc)["NVIDIA_VISIBLE_DEVICES"])
	require.Equal(t, "1:3 character special file", e.exec(t, xc, "stat", "-c", "%t:%T %F", "/dev/nvidia2"))
	require.Equal(t, "1:3 character special file", e.exec(t, xc, "stat", "-c", "%t:%T %F", "/dev/nvidiactl"))
	for _, other := range []string{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia3"} {
		out, err := e.crictl("exec", xc, "stat", other)
		require.Error(t, err, "%s is in the container: %s", other, out)
	}
	// The host has memory on node 0 only: node 1's pod keeps the
	// runtime's memory nodes.
	require.Equal(t, "0", e.status(t, xc, "Mems_allowed_list"))
	e.waitCPUs(t, w, "0", "the shared pod after the exclusive pod arrived")

	// A conflicting pod (CPU 1 and GPU 2 are x's) is refused, the conflict
	// named.
	_, err = e.runPod(t, "y", decisionPod("1", []int{1}, 2, 3))
	require.Error(t, err)
	require.ErrorContains(t, err, "CPU 1 is held by pod default/x")
	require.ErrorContains(t, err, "GPU 2 is held by pod default/x")

	// An exclusive pod on node 0 with GPUs 0 and 1 would leave the shared
	// pool empty while web runs: refused too.
	_, err = e.runPod(t, "z", decisionPod("0", []int{0}, 0, 1))
	require.ErrorContains(t, err, "the shared pool would be left without CPUs while 1 shared-pool pods run")

	// The exclusive pod leaves: the shared pod gets CPU 1 back.
	e.removePod(t, x)
	e.waitCPUs(t, w, "0-1", "the shared pod after the exclusive pod left")

	// The agent restarts. Meanwhile an exclusive pod it admitted goes
	// (x2) and one it never saw starts (x3).
	x2, err := e.runPod(t, "x2", decisionPod("1", []int{1}, 3))
	require.NoError(t, err)
	x2c := e.startContainer(t, x2, "main")
	require.Equal(t, "1", e.status(t, x2c, "Cpus_allowed_list"))
	e.waitCPUs(t, w, "0", "the shared pod after x2 arrived")
	agent.stop(t)
	cp, err := os.ReadFile(checkpoint)
	require.NoError(t, err)
	require.Contains(t, string(cp), `"pod": "default/x2"`)

	e.removePod(t, x2)
	x3, err := e.runPod(t, "x3", decisionPod("1", []int{1}, 2))
	require.NoError(t, err)
	x3c := e.startContainer(t, x3, "main")
	require.Equal(t, "0-1", e.status(t, x3c, "Cpus_allowed_list"), "no agent: containerd applied nothing")

	agent = e.startAgent(t, args...)
	e.waitCPUs(t, x3c, "1", "the pod that started while the agent was away, after the agent came back")
	e.waitCPUs(t, w, "0", "the shared pod after the agent came back")
	cp, err = os.ReadFile(checkpoint)
	require.NoError(t, err)
	require.NotContains(t, string(cp), `"pod": "default/x2"`, "the pod that went while the agent was away is released")
	require.Contains(t, string(cp), `"pod": "default/x3"`)
	require.Contains(t, string(cp), `"pod": "default/web"`)
	require.Contains(t, agent.log.String(), "synchronize: removed pod: in the checkpoint but no longer running")

	// GPU 3 is free again (x2 released it): a pod naming it runs.
	e.removePod(t, x3)
	e.waitCPUs(t, w, "0-1", "the shared pod after x3 left")
	x4, err := e.runPod(t, "x4", decisionPod("1", []int{1}, 3))
	require.NoError(t, err)
	x4c := e.startContainer(t, x4, "main")
	require.Equal(t, "GPU-e2e-3", e.envOf(t, x4c)["NVIDIA_VISIBLE_DEVICES"])
	t.Logf("the end-to-end run took %s", time.Since(start).Round(time.Millisecond))
}
