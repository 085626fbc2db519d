package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/internal/controlplane"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/plugins/agent/cluster"
)

// The walk-through of docs/deploy.md as a test, with every component real
// and started here: etcd and kube-apiserver (internal/controlplane), the
// manifests of deploy/ applied to it, containerd with NRI (its defaults,
// in a mount namespace of its own whose /dev has stand-in GPU device
// nodes), the kubelet built from k8s.io/kubernetes (../../.ci-prepare),
// numaplace-agent as the docs run it on a host (its token bound to the
// node, its machine discovered from a fake sysfs tree with four GPUs,
// fakeSysfs) and numaplace-scheduler with the repository's profile (its
// service account's token). Pods with the ACK annotations and
// aliyun.com/gpu go through the API server, the scheduler and the
// kubelet; what they got is read from inside their containers.

// kubeletNode is the node's name (the kubelet's --hostname-override): it
// resolves to this machine everywhere, so the API server reaches the
// kubelet for logs.
const kubeletNode = "localhost"

// kubeletBinary returns the kubelet built by .ci-prepare, or skips saying
// how to build it.
func kubeletBinary(t *testing.T, bin string) string {
	t.Helper()
	p := filepath.Join(bin, "kubelet")
	if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
		t.Skipf("no real kubelet: %s is not built; run plugins/agent/.ci-prepare (builds k8s.io/kubernetes v1.37.2's "+
			"cmd/kubelet from the Go module proxy into plugins/agent/bin) or set NUMAPLACE_CONTAINERD_BIN", p)
	}
	return p
}

// freeTCPPort returns a loopback port nothing listens on now
// (controlplane.FreePort).
func freeTCPPort(t *testing.T) int {
	t.Helper()
	return controlplane.FreePort(t)
}

// hostProcess is a binary the test started (controlplane.Process), its
// output in a log file; name, log, cmd and done are the Process's Name,
// Log, Cmd and Done().
type hostProcess struct {
	p         *controlplane.Process
	name, log string
	cmd       *exec.Cmd
	done      <-chan struct{}
}

// startHostProcess starts the command with its output in dir/name.log, in
// a process group of its own; it is stopped (SIGTERM, then SIGKILL of its
// process group after controlplane.StopTimeout) at the end of the test,
// and the end of its log shown if the test failed.
func startHostProcess(t *testing.T, dir, name string, cmd *exec.Cmd) *hostProcess {
	t.Helper()
	p := controlplane.StartProcess(t, dir, name, cmd)
	return &hostProcess{p: p, name: p.Name, log: p.Log, cmd: p.Cmd, done: p.Done()}
}

// stop stops the process (controlplane.Process.Stop).
func (p *hostProcess) stop() { p.p.Stop() }

// exited reports whether the process has exited.
func (p *hostProcess) exited() bool { return p.p.Exited() }

// kubeletEnv is the node's containerd, as the other end-to-end test's,
// with the process whose mount namespace the kubelet joins.
type kubeletEnv struct {
	*e2eEnv
	// pid is the process that holds the node's mount namespace, which
	// containerd and the kubelet join: /proc/pid/root is the node as the
	// runtime and the kubelet see it.
	pid int
	// containerdConf is containerd's configuration file, containerdLog
	// its log (every run of it appends), containerd the running one.
	containerdConf string
	containerdLog  *os.File
	containerd     *containerdProc
	// kubeletArgs are nsenter's arguments that run the kubelet (set by
	// startKubelet; kubeletCluster.restartKubelet runs it again).
	kubeletArgs []string
	// nsenter and kubeletDir: the tool that runs the kubelet in that
	// namespace, and the directory that is /var/lib/kubelet there.
	nsenter, kubeletDir string
	// kubeletPort is the kubelet's HTTPS port (its API: logs, exec,
	// configz) on 127.0.0.1.
	kubeletPort int
	// cdiDir is containerd's CDI spec directory, "" when CDI is off
	// (nodeContainerdOptions.cdi).
	cdiDir string
}

// standInGPUs are the device nodes containerd's /dev gets when the host
// has none: the device nodes of fakeGPUs (minors 0-3) and two control
// nodes, with /dev/null's numbers.
var standInGPUs = []string{"nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidia4", "nvidia5", "nvidia6", "nvidia7", "nvidiactl", "nvidia-uvm"}

// nodeTools returns unshare and nsenter (util-linux), or skips.
func nodeTools(t *testing.T) (unshare, nsenter string) {
	t.Helper()
	var paths []string
	for _, name := range []string{"unshare", "nsenter"} {
		path, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("the kubelet end-to-end test needs %s (util-linux): containerd and the kubelet run in a mount namespace of their own", name)
		}
		paths = append(paths, path)
	}
	return paths[0], paths[1]
}

// startNodeContainerd starts containerd as a node runs it for the
// kubelet: NRI as containerd 2.x has it by default (only its socket moved
// into the test's directory), overlayfs, the imported image as the
// sandbox image, restrict_oom_score_adj where this process lacks
// CAP_SYS_RESOURCE. It runs in a mount namespace of its own (host mounts
// still propagate in), which the kubelet joins, where
//
//   - /dev is an overlay of the host's with the stand-in GPU nodes the host
//     lacks, so that the device nodes of the kubelet's device-plugin
//     allocation exist for the runtime while the host's /dev is left alone;
//   - /var/lib/kubelet is a directory of the test: the kubelet's
//     device-plugin directory is always /var/lib/kubelet/device-plugins
//     (whatever its --root-dir), and another kubelet on this host must
//     keep its own. When the host has no /var/lib/kubelet, an empty one is
//     made to mount on and removed at the end.
func startNodeContainerd(t *testing.T) *kubeletEnv {
	t.Helper()
	return startNodeContainerdWith(t, nodeContainerdOptions{})
}

// nodeContainerdOptions change what startNodeContainerdWith starts; the
// zero value is startNodeContainerd's.
type nodeContainerdOptions struct {
	// cdi turns CDI on in containerd with one spec directory, cdi/ in the
	// test's directory (kubeletEnv.cdiDir).
	cdi bool
	// devices are more stand-in device nodes for the namespace's /dev
	// (paths under it, such as infiniband/uverbs0), with /dev/null's
	// numbers as the stand-in GPUs'.
	devices []string
}

// startNodeContainerdWith is startNodeContainerd with options.
func startNodeContainerdWith(t *testing.T, o nodeContainerdOptions) *kubeletEnv {
	t.Helper()
	runc := canRunContainers(t)
	bin := containerdBinaries(t)
	unshare, nsenter := nodeTools(t)
	dir, err := os.MkdirTemp("/tmp", "np-kl-") // short: unix socket paths
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	e := &e2eEnv{dir: dir, bin: bin, sock: filepath.Join(dir, "containerd.sock"), nriSock: filepath.Join(dir, "nri.sock"),
		log: filepath.Join(dir, "containerd.log"), runc: runc}
	cfg := fmt.Sprintf(`version = 3
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = "%[3]s.ttrpc"
[plugins.'io.containerd.nri.v1.nri']
  socket_path = %q
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = %t
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), e.sock, e.nriSock, !hasCapability(unix.CAP_SYS_RESOURCE), e2eImage)
	var cdiDir string
	if o.cdi {
		cdiDir = filepath.Join(dir, "cdi")
		require.NoError(t, os.Mkdir(cdiDir, 0o755))
		cfg = strings.Replace(cfg, "[plugins.'io.containerd.cri.v1.runtime']\n",
			fmt.Sprintf("[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = true\n  cdi_spec_dirs = [%q]\n", cdiDir), 1)
	}
	conf := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(conf, []byte(cfg), 0o600))
	kubeletDir := filepath.Join(dir, "var-lib-kubelet")
	for _, d := range []string{"dev-upper", "dev-work", "var-lib-kubelet"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, d), 0o755))
	}
	const mountPoint = "/var/lib/kubelet"
	if _, err := os.Stat(mountPoint); os.IsNotExist(err) {
		require.NoError(t, os.MkdirAll(mountPoint, 0o700))
		t.Cleanup(func() { _ = unix.Rmdir(mountPoint) }) // after containerd's cleanup: the mount is gone
	}
	// The namespace is held by a process of its own (it sleeps), so that
	// containerd can be restarted in it (kubeletEnv.restartContainerd).
	ready := filepath.Join(dir, "namespace-ready")
	script := `set -e
mount -t overlay overlay -o "lowerdir=/dev,upperdir=$1,workdir=$2" /dev
mount --bind "$3" ` + mountPoint + `
for n in ` + strings.Join(append(slices.Clone(standInGPUs), o.devices...), " ") + `; do [ -e "/dev/$n" ] || { mkdir -p "$(dirname "/dev/$n")"; mknod -m 666 "/dev/$n" c 1 3; }; done
touch "$4"
exec sleep 2147483647`
	holder := startHostProcess(t, dir, "namespace", exec.Command(unshare, "--mount", "--propagation", "slave", "/bin/sh", "-c", script, "sh",
		filepath.Join(dir, "dev-upper"), filepath.Join(dir, "dev-work"), kubeletDir, ready))
	require.Eventually(t, func() bool {
		_, err := os.Stat(ready)
		return err == nil || holder.exited()
	}, 30*time.Second, 20*time.Millisecond, "the node's mount namespace was not set up")
	require.False(t, holder.exited(), "the node's mount namespace could not be set up: %s", holder.log)
	logFile, err := os.Create(e.log)
	require.NoError(t, err)
	ke := &kubeletEnv{e2eEnv: e, pid: holder.cmd.Process.Pid, nsenter: nsenter, kubeletDir: kubeletDir,
		containerdConf: conf, containerdLog: logFile, cdiDir: cdiDir}
	ke.runContainerd(t)
	t.Cleanup(func() {
		if out, err := e.crictl("rmp", "--all", "--force"); err != nil {
			t.Logf("crictl rmp --all: %v: %s", err, out)
		}
		ke.stopContainerd(syscall.SIGTERM)
		_ = logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(e.log)
			t.Logf("containerd's log (end):\n%s", tail(data, 5000))
		}
	})
	e.importImage(t)
	return ke
}

// kubeletSysctls are the kernel settings the kubelet sets at start
// (protectKernelDefaults false); the test puts them back.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// restoreSysctls puts back, at the end of the test, the kernel settings
// the kubelet changes.
func restoreSysctls(t *testing.T) {
	t.Helper()
	saved := map[string]string{}
	for _, k := range kubeletSysctls {
		if v, err := os.ReadFile("/proc/sys/" + k); err == nil {
			saved[k] = strings.TrimSpace(string(v))
		}
	}
	t.Cleanup(func() {
		for k, v := range saved {
			now, _ := os.ReadFile("/proc/sys/" + k)
			if strings.TrimSpace(string(now)) != v {
				if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
					t.Logf("cannot restore %s to %s: %v", k, v, err)
				}
			}
		}
	})
}

// cgroupRoot makes the kubelet's cgroup root, a cgroup of its own in every
// hierarchy (so that the kubelet's kubepods tree is not any other
// kubelet's), and removes the tree at the end of the test.
func cgroupRoot(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	require.NoError(t, err)
	defer f.Close()
	var made []string
	t.Cleanup(func() {
		for _, d := range made {
			removeCgroupTree(t, d)
		}
	})
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options ... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		if fs := fields[sep+1]; fs != "cgroup" && fs != "cgroup2" {
			continue
		}
		d := filepath.Join(fields[4], name)
		if err := os.Mkdir(d, 0o755); err != nil {
			if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
				t.Skipf("the kubelet end-to-end test cannot make the kubelet's cgroup root %s (the kubelet needs to write the cgroup file systems): %v", d, err)
			}
			require.NoError(t, err, "making the kubelet's cgroup root")
		}
		made = append(made, d)
		// A cgroup v1 cpuset starts empty: give it its parent's.
		for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(fields[4], file)); err == nil && strings.Contains(fields[len(fields)-1], "cpuset") {
				require.NoError(t, os.WriteFile(filepath.Join(d, file), v, 0o644))
			}
		}
	}
	require.NoError(t, sc.Err())
	if len(made) == 0 {
		t.Skip("the kubelet end-to-end test needs the cgroup file systems: none is mounted")
	}
	return "/" + name
}

// removeCgroupTree removes a cgroup and its children, deepest first.
func removeCgroupTree(t *testing.T, d string) {
	entries, _ := os.ReadDir(d)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroupTree(t, filepath.Join(d, e.Name()))
		}
	}
	if err := unix.Rmdir(d); err != nil && !os.IsNotExist(err) {
		t.Logf("cannot remove cgroup %s: %v", d, err)
	}
}

// startKubelet runs the kubelet in the node's mount namespace against its
// containerd with the settings docs/deploy.md asks for (CPU, Topology and
// memory managers with policy none), cgroupfs, no swap check, cgroup v1
// allowed, its ports and cgroups (under cgroupRoot) of its own, and the
// admin's kubeconfig; it returns the kubelet's device-plugin directory
// as this process sees it once the Node is registered.
func startKubelet(t *testing.T, e *kubeletEnv, cgroupRoot, kubeconfig string, client kubernetes.Interface) (*hostProcess, string) {
	t.Helper()
	kubelet := kubeletBinary(t, e.bin)
	restoreSysctls(t)
	e.kubeletPort = freeTCPPort(t)
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: %q
failSwapOn: false
failCgroupV1: false
cpuManagerPolicy: none
topologyManagerPolicy: none
memoryManagerPolicy: None
containerRuntimeEndpoint: unix://%s
port: %d
healthzPort: 0
readOnlyPort: 0
podLogsDir: %q
volumePluginDir: %q
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
evictionHard: {memory.available: 1Mi, nodefs.available: 1%%, imagefs.available: 1%%}
imageGCHighThresholdPercent: 100
# The GPUs advertised within a second, not the default 10.
nodeStatusUpdateFrequency: 1s
`, cgroupRoot, e.sock, e.kubeletPort, filepath.Join(e.dir, "pod-logs"), filepath.Join(e.dir, "volume-plugins"))
	conf := filepath.Join(e.dir, "kubelet-config.yaml")
	require.NoError(t, os.WriteFile(conf, []byte(cfg), 0o600))
	e.kubeletArgs = []string{"--target", strconv.Itoa(e.pid), "--mount", "--",
		kubelet, "--config", conf, "--kubeconfig", kubeconfig, "--hostname-override", kubeletNode, "--v", "2"}
	p := startHostProcess(t, e.dir, "kubelet", exec.Command(e.nsenter, e.kubeletArgs...))
	t.Cleanup(func() { removeContainerLogLinks(e.dir) })
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().Nodes().Get(context.Background(), kubeletNode, metav1.GetOptions{})
		return err == nil && !p.exited()
	}, 60*time.Second, 100*time.Millisecond, "the kubelet did not register Node %s (log: %s)", kubeletNode, p.log)
	return p, filepath.Join(e.kubeletDir, "device-plugins")
}

// removeContainerLogLinks removes the links the kubelet made in
// /var/log/containers to logs under dir.
func removeContainerLogLinks(dir string) {
	entries, _ := os.ReadDir("/var/log/containers")
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
			_ = os.Remove(p)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig with a token of the
// service account, bound to the Node when node is not nil (as
// `kubectl create token --bound-object-kind Node` makes it).
func serviceAccountKubeconfig(t *testing.T, client kubernetes.Interface, host, namespace, name string, node *corev1.Node) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}
	if node != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: node.Name, UID: node.UID}
	}
	tok, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name, req, metav1.CreateOptions{})
	require.NoError(t, err, "a token of service account %s/%s", namespace, name)
	return controlplane.WriteKubeconfig(t, host, tok.Status.Token)
}

// buildScheduler builds numaplace-scheduler from ../kube-scheduler into
// bin (nothing to do when .ci-prepare built it from the same sources).
func buildScheduler(bin string) (string, error) {
	root, err := controlplane.FindRepoRoot()
	if err != nil {
		return "", err
	}
	mod := filepath.Join(root, "plugins", "kube-scheduler")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(bin, "numaplace-scheduler")
	cmd := exec.Command(goBin, "build", "-o", out, "./cmd/numaplace-scheduler")
	cmd.Dir = mod
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build numaplace-scheduler in %s: %w: %s", mod, err, msg)
	}
	return out, nil
}

// startScheduler runs numaplace-scheduler with the repository's profile
// (plugins/kube-scheduler/deploy/scheduler-config.yaml, the kubeconfig
// path replaced as its README says) and its own secure port.
func startScheduler(t *testing.T, dir, binary, kubeconfig string) *hostProcess {
	t.Helper()
	data, err := os.ReadFile(controlplane.RepoPath(t, "plugins", "kube-scheduler", "deploy", "scheduler-config.yaml"))
	require.NoError(t, err)
	const conf = "/etc/kubernetes/scheduler.conf"
	require.Contains(t, string(data), conf, "the profile names the kubeconfig the README says to replace")
	path := filepath.Join(dir, "scheduler-config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(data), conf, kubeconfig)), 0o600))
	return startHostProcess(t, dir, "numaplace-scheduler", exec.Command(binary, "--config", path,
		"--secure-port", strconv.Itoa(freeTCPPort(t)), "--v", "2"))
}

// podScript is the containers' command: it prints what the container got,
// then waits for SIGTERM.
const podScript = `grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status; echo "NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES"; ` +
	`ls /dev | grep nvidia; trap 'exit 0' TERM; while :; do sleep 1; done`

// ackGPUPod is docs/deploy.md's pod, sized for this machine: the ACK
// annotations, numaplace-scheduler, one CPU and one aliyun.com/gpu, host
// network (no CNI), the imported image.
func ackGPUPod(name string) *corev1.Pod {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi"),
		"aliyun.com/gpu": resource.MustParse("1")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{
			"cpuset-scheduler": "required",
			"scheduling.alibabacloud.com/numa-topology-spec": `{"numaTopologyPolicy":"SingleNUMANode"}`,
		}},
		Spec: corev1.PodSpec{
			SchedulerName:                 "numaplace-scheduler",
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: new(int64(5)),
			Containers: []corev1.Container{{Name: "main", Image: e2eImage, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"/bin/sh", "-c", podScript},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}},
		},
	}
}

// waitRunning waits until the pod runs and returns it.
func waitRunning(t *testing.T, client kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	require.Eventually(t, func() bool {
		var err error
		pod, err = client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) == 1 &&
			pod.Status.ContainerStatuses[0].Ready
	}, 60*time.Second, 100*time.Millisecond, "pod %s is not running: %s", name, describe(client, name))
	return pod
}

// describe is what kubectl describe would show of the pod: its phase,
// conditions and events.
func describe(client kubernetes.Interface, name string) string {
	ctx := context.Background()
	var b strings.Builder
	if pod, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(&b, "phase %s, node %q", pod.Status.Phase, pod.Spec.NodeName)
		for _, c := range pod.Status.Conditions {
			fmt.Fprintf(&b, "; %s=%s %s", c.Type, c.Status, c.Message)
		}
	}
	if evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name}); err == nil {
		for _, ev := range evs.Items {
			fmt.Fprintf(&b, "\n  %s %s: %s", ev.Type, ev.Reason, ev.Message)
		}
	}
	return b.String()
}

// waitEvent waits for an event of the pod with the reason and a message
// containing want, and returns its message.
func waitEvent(t *testing.T, client kubernetes.Interface, pod, reason, want string) string {
	t.Helper()
	var msg string
	require.Eventually(t, func() bool {
		evs, err := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason})
		if err != nil {
			return false
		}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, want) {
				msg = ev.Message
				return true
			}
		}
		return false
	}, 60*time.Second, 100*time.Millisecond, "no %s event of pod %s with %q: %s", reason, pod, want, describe(client, pod))
	return msg
}

// deletePod deletes the pod and waits until it is gone (the kubelet has
// stopped it).
// podLog returns what the container main of the pod in default has
// printed, read through the API server from the kubelet. A kubelet that
// has just started again serves the log only once it knows the pod again
// (until then it answers 404), so the read is retried for a minute.
func podLog(t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	var logs []byte
	var err error
	deadline := time.Now().Add(time.Minute)
	for {
		logs, err = client.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{Container: "main"}).DoRaw(context.Background())
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	require.NoError(t, err, "pod %s's log through the API server (retried for a minute)", name)
	return string(logs)
}

func deletePod(t *testing.T, client kubernetes.Interface, name string, grace int64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}))
	require.Eventually(t, func() bool {
		_, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 60*time.Second, 100*time.Millisecond, "pod %s was not removed: %s", name, describe(client, name))
}

// hostMemoryNodes returns the host's NUMA nodes with memory.
func hostMemoryNodes(t *testing.T) numa.CPUSet {
	t.Helper()
	data, err := os.ReadFile("/sys/devices/system/node/has_memory")
	if os.IsNotExist(err) {
		data = []byte("0")
	} else {
		require.NoError(t, err)
	}
	set, err := numa.ParseCPUSet(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	return set
}

// checkPlacement checks, from inside the pod's container, that it got
// what its decision says: the cpuset, the memory nodes (the decision's
// among those with memory on the host, else the runtime's), the GPUs'
// UUIDs in NVIDIA_VISIBLE_DEVICES and their device nodes with the control
// nodes, and no other GPU's node; both as the container printed it at
// start (its log, read through the API server and the kubelet) and in a
// process started in it now. It returns the decision.
func checkPlacement(t *testing.T, e *kubeletEnv, client kubernetes.Interface, pod *corev1.Pod) kube.Decision {
	t.Helper()
	d, err := kube.ParseDecision(pod.Annotations["numaplace.io/allocation"])
	require.NoError(t, err, "pod %s's decision", pod.Name)
	require.Len(t, d.GPUs, 1, "pod %s's decision: %+v", pod.Name, d)
	var uuids, nodes []string
	for _, g := range d.GPUs {
		// The UUID the driver's information file gives, through discovery,
		// the report and the scheduler; the node named by the minor.
		fake := fakeGPUByID(t, g.ID)
		require.Equal(t, fake.uuid, g.UUID, "pod %s's decision names GPU %d by another UUID", pod.Name, g.ID)
		uuids = append(uuids, g.UUID)
		nodes = append(nodes, "nvidia"+strconv.Itoa(fake.minor))
	}
	mems := hostMemoryNodes(t)
	var want numa.CPUSet
	for _, n := range d.NUMANodes {
		if mems.Contains(n) {
			want = want.Union(numa.NewCPUSet(n))
		}
	}
	if want.IsEmpty() {
		want = mems
	}

	ctr := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	require.Equal(t, d.CPUSet, e.status(t, ctr, "Cpus_allowed_list"), "pod %s's cpuset", pod.Name)
	require.Equal(t, want.String(), e.status(t, ctr, "Mems_allowed_list"), "pod %s's memory nodes", pod.Name)
	require.Equal(t, strings.Join(uuids, ","), e.envOf(t, ctr)["NVIDIA_VISIBLE_DEVICES"], "pod %s's GPUs", pod.Name)
	t.Logf("pod %s: phase %s on node %s; decision %s; in its container: Cpus_allowed_list %s, Mems_allowed_list %s, "+
		"NVIDIA_VISIBLE_DEVICES=%s, %s", pod.Name, pod.Status.Phase, pod.Spec.NodeName, pod.Annotations["numaplace.io/allocation"],
		e.status(t, ctr, "Cpus_allowed_list"), e.status(t, ctr, "Mems_allowed_list"), e.envOf(t, ctr)["NVIDIA_VISIBLE_DEVICES"],
		strings.Join(strings.Fields(e.exec(t, ctr, "sh", "-c", "ls /dev | grep nvidia")), " "))
	for i := range 4 {
		n := "/dev/nvidia" + strconv.Itoa(i)
		out, err := e.crictl("exec", ctr, "stat", "-c", "%t:%T %F", n)
		if slices.Contains(nodes, n[len("/dev/"):]) {
			require.NoError(t, err, "pod %s's GPU node %s: %s", pod.Name, n, out)
			require.Equal(t, "1:3 character special file", out, "pod %s's %s", pod.Name, n)
		} else {
			require.Error(t, err, "pod %s has another GPU's node %s (the kubelet's device-plugin allocation, when it is not the decision's: NRI does not remove it, containerd/nri#216): %s", pod.Name, n, out)
		}
	}
	require.Equal(t, "1:3 character special file", e.exec(t, ctr, "stat", "-c", "%t:%T %F", "/dev/nvidiactl"))

	got := podLog(t, client, pod.Name)
	require.Contains(t, got, "Cpus_allowed_list:\t"+d.CPUSet+"\n", "pod %s's log", pod.Name)
	require.Contains(t, got, "NVIDIA_VISIBLE_DEVICES="+strings.Join(uuids, ",")+"\n", "pod %s's log", pod.Name)
	var listed []string
	for line := range strings.Lines(got) {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "nvidia") && !strings.Contains(l, "=") {
			listed = append(listed, l)
		}
	}
	for _, n := range nodes {
		require.Contains(t, listed, n, "pod %s's /dev at start: %v", pod.Name, listed)
	}
	for _, n := range listed {
		if strings.TrimLeft(n, "nvidia0123456789") == "" && n != "nvidia" {
			require.Contains(t, nodes, n, "pod %s had another GPU's node at start: %v", pod.Name, listed)
		}
	}
	return d
}

// nrtAvailable returns the available amount of a resource in a zone of
// the node's NodeResourceTopology, "" when absent.
func nrtAvailable(dyn dynamic.Interface, zone, res string) string {
	obj, err := dyn.Resource(cluster.NRTResource).Get(context.Background(), kubeletNode, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	zones, _, _ := unstructured.NestedSlice(obj.Object, "zones")
	for _, z := range zones {
		zm, _ := z.(map[string]any)
		if zm["name"] != zone {
			continue
		}
		rs, _ := zm["resources"].([]any)
		for _, r := range rs {
			if rm, _ := r.(map[string]any); rm["name"] == res {
				s, _ := rm["available"].(string)
				return s
			}
		}
	}
	return ""
}

// kubeletCluster is docs/deploy.md's node with every component real and
// started by startKubeletCluster: containerd with NRI, etcd and
// kube-apiserver with deploy/'s manifests applied, the kubelet (the node
// labelled for numaplace), numaplace-agent with its three roles (in the
// test's process) and numaplace-scheduler. Tests of pods through the
// kubelet start one each and drive it through client.
type kubeletCluster struct {
	e      *kubeletEnv
	cp     *controlplane.ControlPlane
	client kubernetes.Interface
	dyn    dynamic.Interface
	// kubelet is the kubelet's process and pluginDir its device-plugin
	// directory as the host sees it.
	kubelet   *hostProcess
	pluginDir string
	// node is the Node as it was when the agent started.
	node *corev1.Node
	// agentArgs are the arguments the agent was started with (a test
	// that restarts the agent passes them again); agent is the agent.
	agentArgs []string
	agent     *agentProc
	// schedulerBin is the numaplace-scheduler binary; sched its process.
	schedulerBin string
	sched        *hostProcess
	// stage logs a step with the time since the start.
	stage func(what string)
	// kubeletRuns and agentRuns count the restarts of the kubelet and
	// the agent processes (restart_test.go); agentBin is the agent's
	// binary once built.
	kubeletRuns, agentRuns int
	agentBin               string
}

// startKubeletCluster starts a kubeletCluster, or skips saying what the
// machine lacks. It returns once the kubelet advertises the agent's four
// GPUs, the agent has published the topology annotation and the
// NodeResourceTopology, and numaplace-scheduler runs.
func startKubeletCluster(t *testing.T) *kubeletCluster {
	t.Helper()
	return startKubeletClusterWith(t, kubeletClusterOptions{})
}

// kubeletClusterOptions change what startKubeletClusterWith starts; the
// zero value is startKubeletCluster's.
type kubeletClusterOptions struct {
	// gpus are the fake sysfs tree's GPUs (their device minors must be
	// below len(standInGPUs)-2); nil is fakeGPUs.
	gpus []fakeGPU
	// tree, when set, is the machine instead (its GPUs, NICs and PCIe
	// switches; dra_numaplace_cluster_test.go), gpus unused.
	tree *fakeTree
}

// startKubeletClusterWith is startKubeletCluster with options: it returns
// once the kubelet advertises the agent's GPUs.
func startKubeletClusterWith(t *testing.T, o kubeletClusterOptions) *kubeletCluster {
	t.Helper()
	gpus := o.gpus
	if gpus == nil {
		gpus = fakeGPUs
	}
	if o.tree != nil {
		gpus = o.tree.gpus
	}
	node1GPUs := 0
	for _, g := range gpus {
		if g.node == 1 {
			node1GPUs++
		}
	}
	c := &kubeletCluster{}
	start := time.Now()
	c.stage = func(what string) { t.Logf("%-60s %6.1fs", what, time.Since(start).Seconds()) }
	stage := c.stage
	// Skip before anything is started when something is missing; the
	// kubelet's cgroups go after containerd's containers.
	canRunContainers(t)
	kubeletBinary(t, containerdBinaries(t))
	nodeTools(t)
	cgroups := cgroupRoot(t, fmt.Sprintf("numaplace-e2e-%d", os.Getpid()))
	e := startNodeContainerd(t)
	built := make(chan error, 1)
	var schedulerBin string
	go func() {
		var err error
		schedulerBin, err = buildScheduler(e.bin)
		built <- err
	}()
	cp := controlplane.StartControlPlane(t)
	stage("containerd, etcd and kube-apiserver up")
	ctx := context.Background()
	client, err := kubernetes.NewForConfig(cp.Config)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cp.Config)
	require.NoError(t, err)

	// docs/deploy.md, steps 2 to 4: the CRD, the agent's and the
	// scheduler's manifests.
	deploy := controlplane.RepoPath(t, "deploy")
	controlplane.ApplyFiles(t, cp.Config, filepath.Join(deploy, "crd-noderesourcetopologies.yaml"),
		filepath.Join(deploy, "agent.yaml"), filepath.Join(deploy, "scheduler.yaml"))

	// Step 1: the kubelet, and the node opted in.
	kubeletProc, pluginDir := startKubelet(t, e, cgroups, cp.Kubeconfig(t), client)
	stage("kubelet registered")
	// Step 1's check: the kubelet leaves cpusets alone.
	kc := kubeletConfigz(t, e)
	require.Equal(t, []any{"none", "none", "None"},
		[]any{kc["cpuManagerPolicy"], kc["topologyManagerPolicy"], kc["memoryManagerPolicy"]},
		"the kubelet's cpuManagerPolicy, topologyManagerPolicy and memoryManagerPolicy in its configz")
	_, err = client.CoreV1().Nodes().Patch(ctx, kubeletNode, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"ack.node.gpu.schedule":"topology"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	node, err := client.CoreV1().Nodes().Get(ctx, kubeletNode, metav1.GetOptions{})
	require.NoError(t, err)

	// Step 3: the agent on the host, with a token of its service account
	// bound to the node (the admission policy of deploy/agent.yaml needs
	// the node's name in it); the GPUs' device nodes as containerd sees
	// them.
	sysfs := ""
	if o.tree != nil {
		sysfs = o.tree.write(t, e.dir)
	} else {
		sysfs = fakeSysfsWith(t, e.dir, gpus)
	}
	c.agentArgs = []string{"--sysfs-root", sysfs, "--node-name", kubeletNode,
		"--kubeconfig", serviceAccountKubeconfig(t, client, cp.Config.Host, "numaplace-system", "numaplace-agent", node),
		"--checkpoint", filepath.Join(e.dir, "checkpoint.json"), "--kubelet-socket-dir", pluginDir,
		"--dev-root", fmt.Sprintf("/proc/%d/root/dev", e.pid), "--proc-root", "/proc",
		"--pod-resources-socket", filepath.Join(e.kubeletDir, "pod-resources", "kubelet.sock")}
	agent := e.startAgent(t, c.agentArgs...)
	stage("agent connected to containerd")
	require.Eventually(t, func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, kubeletNode, metav1.GetOptions{})
		have := n.Status.Allocatable["aliyun.com/gpu"]
		return err == nil && have.Value() == int64(len(gpus))
	}, 60*time.Second, 100*time.Millisecond, "the kubelet does not advertise %d aliyun.com/gpu; the agent's log:\n%s", len(gpus), agent.log)
	stage(fmt.Sprintf("agent: the kubelet advertises %d aliyun.com/gpu", len(gpus)))
	require.Eventually(t, func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, kubeletNode, metav1.GetOptions{})
		return err == nil && n.Annotations["numaplace.io/topology"] != "" && nrtAvailable(dyn, "node-1", "aliyun.com/gpu") == strconv.Itoa(node1GPUs)
	}, 60*time.Second, 100*time.Millisecond, "no topology annotation and NodeResourceTopology; the agent's log:\n%s", agent.log)
	stage("agent: topology annotation and NodeResourceTopology published")
	require.NoError(t, <-built)
	c.stage("numaplace-scheduler built")
	c.sched = startScheduler(t, e.dir, schedulerBin,
		serviceAccountKubeconfig(t, client, cp.Config.Host, "kube-system", "numaplace-scheduler", nil))
	c.e, c.cp, c.client, c.dyn = e, cp, client, dyn
	c.kubelet, c.pluginDir, c.node, c.agent, c.schedulerBin = kubeletProc, pluginDir, node, agent, schedulerBin
	return c
}

func TestPodThroughTheKubelet(t *testing.T) {
	c := startKubeletCluster(t)
	e, client, dyn, pluginDir, agent, sched, stage := c.e, c.client, c.dyn, c.pluginDir, c.agent, c.sched, c.stage
	ctx := context.Background()
	// Step 3's checks, as docs/deploy.md prints them for this machine.
	for _, line := range []string{"node agent ready", "registered with the kubelet", "configured by the runtime"} {
		require.Contains(t, agent.log.String(), line, "the agent's log")
	}
	var machineJSON struct {
		NUMANodes []json.RawMessage `json:"numaNodes"`
		GPUs      []struct {
			ID       int    `json:"id"`
			NUMANode int    `json:"numaNode"`
			UUID     string `json:"uuid"`
			BusID    string `json:"busID"`
		} `json:"gpus"`
	}
	n, err := client.CoreV1().Nodes().Get(ctx, kubeletNode, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(n.Annotations["numaplace.io/topology"]), &machineJSON))
	require.Len(t, machineJSON.NUMANodes, 2, "the topology annotation's NUMA nodes")
	require.Len(t, machineJSON.GPUs, len(fakeGPUs), "the topology annotation's GPUs")
	for i, g := range machineJSON.GPUs {
		require.Equal(t, []any{i, fakeGPUs[i].node, fakeGPUs[i].uuid, fakeGPUs[i].bus}, []any{g.ID, g.NUMANode, g.UUID, g.BusID},
			"GPU %d of the topology annotation, discovered from the fake sysfs tree", i)
	}
	zones := nrtZones(t, dyn, true)
	t.Logf("kubectl get noderesourcetopology %s (zones):\n%s", kubeletNode, zones)
	require.Equal(t, "node-0: cpu=1/1 aliyun.com/gpu=2/2 memory=1024Mi/1024Mi \nnode-1: cpu=1/1 aliyun.com/gpu=2/2 memory=1024Mi/1024Mi \n", zones)
	attrs := nrtAttributes(t, dyn)
	t.Logf("kubectl get noderesourcetopology %s (attributes): %v", kubeletNode, attrs)
	require.Equal(t, "none", attrs["topologyManagerPolicy"])
	require.Equal(t, "pod", attrs["topologyManagerScope"])
	require.Equal(t, "exclude-terminal", attrs["nodeTopologyPodsFingerprintMethod"])
	require.True(t, strings.HasPrefix(attrs["nodeTopologyPodsFingerprint"], "pfp0v001"), "the fingerprint: %q", attrs["nodeTopologyPodsFingerprint"])

	// Step 5: the ACK pod with aliyun.com/gpu: 1 starts with its decided
	// CPUs and GPU.
	_, err = client.CoreV1().Pods("default").Create(ctx, ackGPUPod("textgen-0"), metav1.CreateOptions{})
	require.NoError(t, err)
	pod := waitRunning(t, client, "textgen-0")
	stage("textgen-0 running")
	require.False(t, sched.exited(), "numaplace-scheduler exited")
	require.Equal(t, kubeletNode, pod.Spec.NodeName)
	d := checkPlacement(t, e, client, pod)
	// The kubelet's own record: the four GPUs by their UUIDs, and one of
	// them allocated to textgen-0's container by the agent's answer (the
	// NRI role then gives the container the decision's GPU).
	registered, allocated := kubeletDevices(t, pluginDir, "aliyun.com/gpu", pod.UID)
	var uuids []string
	for _, g := range fakeGPUs {
		uuids = append(uuids, g.uuid)
	}
	require.ElementsMatch(t, uuids, registered, "the GPUs the kubelet registered")
	require.Len(t, allocated["main"], 1, "the kubelet's allocation to textgen-0: %v", allocated)
	require.Contains(t, uuids, allocated["main"][0])
	t.Logf("the kubelet allocated %v to textgen-0's container; its decision: GPU %d (%s)", allocated["main"], d.GPUs[0].ID, d.GPUs[0].UUID)
	zone := "node-" + strconv.Itoa(d.NUMANodes[0])
	require.Eventually(t, func() bool {
		return nrtAvailable(dyn, zone, "cpu") == "0" && nrtAvailable(dyn, zone, "aliyun.com/gpu") == "1"
	}, 30*time.Second, 100*time.Millisecond, "the NodeResourceTopology does not count textgen-0 in %s", zone)
	stage("textgen-0 checked from inside its container")

	// A second such pod waits: the other CPU is the node's shared pool.
	_, err = client.CoreV1().Pods("default").Create(ctx, ackGPUPod("textgen-1"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "textgen-1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				strings.Contains(c.Message, "numaplace: exclusive CPUs would leave a shared pool below the minimum of 1 CPU") {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "textgen-1 is not pending for the shared pool: %s", describe(client, "textgen-1"))
	stage("textgen-1 pending, the reason named")

	// A pod bound past the scheduler with a decision naming textgen-0's
	// CPU and GPU is refused by the node, the conflict named.
	intruder := ackGPUPod("intruder")
	intruder.Spec.NodeName = kubeletNode
	intruder.Spec.SchedulerName = ""
	intruder.Annotations["numaplace.io/allocation"] = pod.Annotations["numaplace.io/allocation"]
	_, err = client.CoreV1().Pods("default").Create(ctx, intruder, metav1.CreateOptions{})
	require.NoError(t, err)
	conflict := fmt.Sprintf("CPU %s is held by pod default/textgen-0; GPU %d is held by pod default/textgen-0", d.CPUSet, d.GPUs[0].ID)
	waitEvent(t, client, "intruder", "FailedCreatePodSandBox", conflict)
	waitEvent(t, client, "intruder", "TopologyAffinityError", conflict)
	p, err := client.CoreV1().Pods("default").Get(ctx, "intruder", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodPending, p.Status.Phase)
	stage("intruder refused by the node, the conflict named")

	// When they go, textgen-1 is placed and starts with its own decision.
	deletePod(t, client, "intruder", 0)
	deletePod(t, client, "textgen-0", 5)
	pod = waitRunning(t, client, "textgen-1")
	checkPlacement(t, e, client, pod)
	stage("textgen-0 gone, textgen-1 running and checked")
	deletePod(t, client, "textgen-1", 5)
	require.Eventually(t, func() bool {
		return nrtAvailable(dyn, zone, "cpu") == "1" && nrtAvailable(dyn, zone, "aliyun.com/gpu") == "2"
	}, 30*time.Second, 100*time.Millisecond, "the NodeResourceTopology does not give back %s's CPU and GPU", zone)
	stage("all pods gone, the report back to full")

	// A pod bound by hand with a decision on NUMA node 1 (CPU 1 and GPU 2,
	// whose device minor is 0, not the lowest free GPU): the device
	// plugin's preference makes the kubelet allocate it the decided GPU,
	// and its container sees it.
	pinned := ackGPUPod("pinned")
	pinned.Spec.NodeName = kubeletNode
	pinned.Spec.SchedulerName = ""
	pinned.Annotations["numaplace.io/allocation"] = fmt.Sprintf(`{"policy":"SingleNUMANode","exclusive":"Required",`+
		`"cpuset":"1","numaNodes":[1],"gpus":[{"id":2,"uuid":%q}],"memoryMiB":{"1":64}}`, fakeGPUs[2].uuid)
	_, err = client.CoreV1().Pods("default").Create(ctx, pinned, metav1.CreateOptions{})
	require.NoError(t, err)
	pod = waitRunning(t, client, "pinned")
	checkPlacement(t, e, client, pod)
	_, allocated = kubeletDevices(t, pluginDir, "aliyun.com/gpu", pod.UID)
	require.Len(t, allocated["main"], 1, "the kubelet's allocation to pinned: %v", allocated)
	require.Equal(t, fakeGPUs[2].uuid, allocated["main"][0], "the kubelet's allocation to pinned is its decision's GPU")
	t.Logf("the kubelet allocated %v to pinned's container; its decision and its container: GPU 2 (%s)", allocated["main"], fakeGPUs[2].uuid)
	require.Eventually(t, func() bool {
		return nrtAvailable(dyn, "node-1", "cpu") == "0" && nrtAvailable(dyn, "node-1", "aliyun.com/gpu") == "1"
	}, 30*time.Second, 100*time.Millisecond, "the NodeResourceTopology does not count pinned in node-1")
	deletePod(t, client, "pinned", 5)
	stage("pinned: its decision's GPU, allocated by the kubelet, in its container")

	// A pod with aliyun.com/gpu and no NUMA spec (bound by hand: no default
	// scheduler runs) runs on the shared pool with the GPU the kubelet
	// allocated it: its environment from the device plugin, its device
	// node from the NRI role.
	plain := ackGPUPod("plain")
	plain.Annotations = nil
	plain.Spec.NodeName = kubeletNode
	plain.Spec.SchedulerName = ""
	_, err = client.CoreV1().Pods("default").Create(ctx, plain, metav1.CreateOptions{})
	require.NoError(t, err)
	pod = waitRunning(t, client, "plain")
	_, allocated = kubeletDevices(t, pluginDir, "aliyun.com/gpu", pod.UID)
	require.Len(t, allocated["main"], 1, "the kubelet's allocation to plain: %v", allocated)
	ctr := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	require.Equal(t, "0-1", e.status(t, ctr, "Cpus_allowed_list"), "plain runs on the shared pool: every CPU, none held")
	require.Equal(t, allocated["main"][0], e.envOf(t, ctr)["NVIDIA_VISIBLE_DEVICES"], "plain's GPU is the kubelet's")
	want := -1
	for _, g := range fakeGPUs {
		if g.uuid == allocated["main"][0] {
			want = g.minor
		}
	}
	require.NotEqual(t, -1, want)
	listed := strings.Fields(e.exec(t, ctr, "sh", "-c", "ls /dev | grep nvidia"))
	t.Logf("pod plain: phase %s; the kubelet allocated %v; in its container: Cpus_allowed_list %s, NVIDIA_VISIBLE_DEVICES=%s, %v",
		pod.Status.Phase, allocated["main"], e.status(t, ctr, "Cpus_allowed_list"), e.envOf(t, ctr)["NVIDIA_VISIBLE_DEVICES"], listed)
	require.ElementsMatch(t, []string{"nvidia" + strconv.Itoa(want), "nvidia-uvm", "nvidiactl"}, listed, "plain's GPU device nodes")
	deletePod(t, client, "plain", 5)
	stage("plain: the kubelet's GPU on the shared pool")

	// Step 7's check: the agent gone, the kubelet no longer offers the GPUs.
	agent.stop(t)
	require.Eventually(t, func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, kubeletNode, metav1.GetOptions{})
		gpus := n.Status.Allocatable["aliyun.com/gpu"]
		return err == nil && gpus.Value() == 0
	}, 60*time.Second, 100*time.Millisecond, "the kubelet still advertises aliyun.com/gpu without the agent")
	stage("agent stopped: the kubelet advertises 0 aliyun.com/gpu")
}

// fakeGPU is a GPU of the fake sysfs tree: its PCI address, NUMA node, and
// what the NVIDIA driver says of it in /proc/driver/nvidia/gpus.
type fakeGPU struct {
	bus         string
	node, minor int
	uuid        string
}

// fakeGPUs are the tree's GPUs in bus order (discovery's GPU IDs 0-3).
// Their device minors are not their IDs, as on machines whose driver
// numbered them in another order, so that a device node named by the GPU
// ID instead of the minor is caught.
var fakeGPUs = []fakeGPU{
	{"0000:1b:00.0", 0, 2, "GPU-5a1c0e3e-0b1d-4f0e-9a62-1b0000000000"},
	{"0000:3d:00.0", 0, 3, "GPU-5a1c0e3e-0b1d-4f0e-9a62-3d0000000000"},
	{"0000:9a:00.0", 1, 0, "GPU-5a1c0e3e-0b1d-4f0e-9a62-9a0000000000"},
	{"0000:bc:00.0", 1, 1, "GPU-5a1c0e3e-0b1d-4f0e-9a62-bc0000000000"},
}

// fakeSysfs writes, under a directory of the test, the sys/ and proc/
// trees of a two-socket machine with four NVIDIA GPUs as the agent's
// --sysfs-root reads them on a node (docs/deploy.md's DaemonSet passes
// /host): the host's two CPUs 0 and 1 as NUMA nodes 0 and 1 of 1 GiB
// each (cpusets must name real CPUs for runc to apply them), fakeGPUs on
// the PCI bus with their numa_node, and the driver's information files
// with their UUIDs and device minors. has_memory is the host's, so that
// the memory nodes the agent gives containers exist. It returns the root.
func fakeSysfs(t *testing.T, dir string) string {
	t.Helper()
	return fakeSysfsWith(t, dir, fakeGPUs)
}

// fakeSysfsWith is fakeSysfs with the given GPUs instead of fakeGPUs.
func fakeSysfsWith(t *testing.T, dir string, gpus []fakeGPU) string {
	t.Helper()
	root := filepath.Join(dir, "host")
	write := func(path, content string) {
		p := filepath.Join(root, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content+"\n"), 0o644))
	}
	write("sys/devices/system/cpu/online", "0-1")
	write("sys/devices/system/node/online", "0-1")
	write("sys/devices/system/node/has_memory", hostMemoryNodes(t).String())
	for i := range 2 {
		cpu := fmt.Sprintf("sys/devices/system/cpu/cpu%d/topology/", i)
		write(cpu+"physical_package_id", strconv.Itoa(i))
		write(cpu+"core_id", "0")
		write(cpu+"thread_siblings_list", strconv.Itoa(i))
		node := fmt.Sprintf("sys/devices/system/node/node%d/", i)
		write(node+"cpulist", strconv.Itoa(i))
		write(node+"meminfo", fmt.Sprintf("Node %d MemTotal:        1048576 kB", i))
		write(node+"distance", [...]string{"10 21", "21 10"}[i])
	}
	write("proc/meminfo", "MemTotal:        2097152 kB")
	for _, g := range gpus {
		pci := "sys/bus/pci/devices/" + g.bus + "/"
		write(pci+"vendor", "0x10de")
		write(pci+"device", "0x2330")
		write(pci+"class", "0x030200")
		write(pci+"numa_node", strconv.Itoa(g.node))
		write("proc/driver/nvidia/gpus/"+g.bus+"/information", fmt.Sprintf(
			"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t %s\nVideo BIOS: \t 96.00.61.00.01\n"+
				"Bus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t %s\nDevice Minor: \t %d\n"+
				"GPU Excluded:\t No", g.uuid, g.bus, g.minor))
	}
	return root
}

// fakeGPUByID returns fakeGPUs' GPU of the ID discovery gives it.
func fakeGPUByID(t *testing.T, id int) fakeGPU {
	t.Helper()
	require.True(t, id >= 0 && id < len(fakeGPUs), "GPU %d is not one of the fake tree's", id)
	return fakeGPUs[id]
}

// kubeletConfigz returns the kubelet's running configuration, what
// docs/deploy.md reads with kubectl get --raw
// /api/v1/nodes/NODE/proxy/configz. The API server's node proxy refuses
// a node whose address is loopback ("address not allowed"), as this one's
// is, so the test asks the kubelet's port itself, which is what the proxy
// forwards to.
func kubeletConfigz(t *testing.T, e *kubeletEnv) map[string]any {
	t.Helper()
	insecure := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the kubelet's self-signed certificate on loopback
	resp, err := insecure.Get("https://127.0.0.1:" + strconv.Itoa(e.kubeletPort) + "/configz")
	require.NoError(t, err, "the kubelet's configz")
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the kubelet's configz: %s", raw)
	var doc struct {
		KubeletConfig map[string]any `json:"kubeletconfig"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc), "configz: %s", raw)
	require.NotEmpty(t, doc.KubeletConfig, "configz has no kubeletconfig: %s", raw)
	return doc.KubeletConfig
}

// nrtZones prints the node's NodeResourceTopology zones as docs/deploy.md's
// kubectl jsonpath does: with allocatable,
// {range .zones[*]}{.name}{": "}{range .resources[*]}{.name}={.available}/{.allocatable} {end}{"\n"}{end},
// else the available amounts only.
func nrtZones(t *testing.T, dyn dynamic.Interface, allocatable bool) string {
	t.Helper()
	obj, err := dyn.Resource(cluster.NRTResource).Get(context.Background(), kubeletNode, metav1.GetOptions{})
	require.NoError(t, err)
	zones, _, err := unstructured.NestedSlice(obj.Object, "zones")
	require.NoError(t, err)
	var b strings.Builder
	for _, z := range zones {
		zm, _ := z.(map[string]any)
		fmt.Fprintf(&b, "%v: ", zm["name"])
		rs, _ := zm["resources"].([]any)
		for _, r := range rs {
			rm, _ := r.(map[string]any)
			if allocatable {
				fmt.Fprintf(&b, "%v=%v/%v ", rm["name"], rm["available"], rm["allocatable"])
			} else {
				fmt.Fprintf(&b, "%v=%v ", rm["name"], rm["available"])
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// nrtAttributes returns the NodeResourceTopology's attributes as
// name=value, without numaplace.io/topology (as docs/deploy.md's grep -v).
func nrtAttributes(t *testing.T, dyn dynamic.Interface) map[string]string {
	t.Helper()
	obj, err := dyn.Resource(cluster.NRTResource).Get(context.Background(), kubeletNode, metav1.GetOptions{})
	require.NoError(t, err)
	attrs, _, err := unstructured.NestedSlice(obj.Object, "attributes")
	require.NoError(t, err)
	out := map[string]string{}
	for _, a := range attrs {
		am, _ := a.(map[string]any)
		if name, _ := am["name"].(string); name != "numaplace.io/topology" {
			out[name], _ = am["value"].(string)
		}
	}
	return out
}

// kubeletDevices reads the kubelet's device-manager checkpoint
// (kubelet_internal_checkpoint in its device-plugin directory) and returns
// the devices of resource it registered, and the device IDs it allocated
// to each container of the pod, checking that it kept the agent's
// Allocate answer for them (NVIDIA_VISIBLE_DEVICES with those IDs): the
// kubelet itself called ListAndWatch and Allocate.
func kubeletDevices(t *testing.T, pluginDir, resource string, pod types.UID) (registered []string, allocated map[string][]string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(pluginDir, "kubelet_internal_checkpoint"))
	require.NoError(t, err, "the kubelet's device-manager checkpoint")
	var cp struct {
		Data struct {
			PodDeviceEntries []struct {
				PodUID, ContainerName, ResourceName string
				DeviceIDs                           map[string][]string
				AllocResp                           []byte
			}
			RegisteredDevices map[string][]string
		}
	}
	require.NoError(t, json.Unmarshal(raw, &cp), "the kubelet's device-manager checkpoint: %s", raw)
	allocated = map[string][]string{}
	for _, e := range cp.Data.PodDeviceEntries {
		if e.PodUID != string(pod) || e.ResourceName != resource {
			continue
		}
		for _, ids := range e.DeviceIDs {
			allocated[e.ContainerName] = append(allocated[e.ContainerName], ids...)
		}
		// AllocResp is the protobuf of the agent's ContainerAllocateResponse:
		// its environment's keys and values are in it as they are.
		require.Contains(t, string(e.AllocResp), "NVIDIA_VISIBLE_DEVICES", "the kubelet's copy of the agent's Allocate answer")
		for _, id := range allocated[e.ContainerName] {
			require.Contains(t, string(e.AllocResp), id, "the kubelet's copy of the agent's Allocate answer")
		}
	}
	return cp.Data.RegisteredDevices[resource], allocated
}
