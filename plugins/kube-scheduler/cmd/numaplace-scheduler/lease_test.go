package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
	"github.com/numaplace/numaplace/plugins/kube-scheduler/internal/controlplane"
)

// leaseSchedulerProc is the program run as a child process, its output in a
// log file.
type leaseSchedulerProc struct {
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

// startLeaseScheduler runs the program with the configuration file and its
// own secure port until it exits or the test ends.
func startLeaseScheduler(t *testing.T, config, kubeconfig, name string) *leaseSchedulerProc {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	args := []string{"--config", config, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig, "--v", "2"}
	p := &leaseSchedulerProc{log: filepath.Join(t.TempDir(), name+".log"), exited: make(chan struct{})}
	f, err := os.Create(p.log)
	require.NoError(t, err)
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = append(os.Environ(), "NUMAPLACE_SCHEDULER_ARGS="+strings.Join(args, "\n"))
	p.cmd.Stdout, p.cmd.Stderr = f, f
	require.NoError(t, p.cmd.Start())
	go func() { p.err = p.cmd.Wait(); _ = f.Close(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s's log (end):\n%s", name, p.tail())
		}
	})
	return p
}

// tail returns the end of the process's log.
func (p *leaseSchedulerProc) tail() string {
	data, _ := os.ReadFile(p.log)
	if len(data) > 5000 {
		data = data[len(data)-5000:]
	}
	return string(data)
}

// hasExited reports whether the process has exited.
func (p *leaseSchedulerProc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// leaseHolder returns the holder of numaplace-scheduler's lease, "" when
// there is none (or it cannot be read).
func leaseHolder(client kubernetes.Interface) string {
	l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "numaplace-scheduler", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leasePod is a one-GPU pod with a NUMA spec for numaplace-scheduler.
func leasePod(name string) *v1.Pod {
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("1Gi"),
		kube.ResourceAliyunGPU: resource.MustParse("1")}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			kube.AnnotationCPUSetScheduler: "required",
			kube.AnnotationSpecAlibaba:     `{"numaTopologyPolicy":"SingleNUMANode"}`}},
		Spec: v1.PodSpec{SchedulerName: "numaplace-scheduler", Containers: []v1.Container{{Name: "main", Image: "registry.example/x:1",
			Resources: v1.ResourceRequirements{Requests: res, Limits: res}}}},
	}
}

// waitBound waits until the pod is bound with a decision, or the
// scheduler exits, and returns the node.
func waitBound(t *testing.T, client kubernetes.Interface, p *leaseSchedulerProc, name string) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		pod, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && pod.Spec.NodeName != "" {
			_, err := kube.ParseDecision(pod.Annotations[kube.AnnotationAllocation])
			require.NoError(t, err, "pod %s's decision", name)
			return pod.Spec.NodeName
		}
		if p.hasExited() {
			t.Fatalf("the scheduler exited (%v) before binding %s; its log:\n%s", p.err, name, p.tail())
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not bound (last: %v); the scheduler's log:\n%s", name, err, p.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestLeaseLostExits: numaplace-scheduler, with the repository's profile
// and short lease durations, loses its lease when the API server is
// unreachable for longer than the renew deadline, and exits with status 1
// and kube-scheduler's "Leaderelection lost" (so that its Deployment's pod
// is restarted, docs/deploy.md); once the API server is back, a scheduler
// started again takes the lease and schedules.
func TestLeaseLostExits(t *testing.T) {
	cp := controlplane.StartControlPlane(t)
	kubeconfig := controlplane.Kubeconfig(t, cp.Config)
	client, err := kubernetes.NewForConfig(cp.Config)
	require.NoError(t, err)
	ctx := context.Background()

	data, err := os.ReadFile("../../deploy/scheduler-config.yaml")
	require.NoError(t, err)
	conf := strings.ReplaceAll(string(data), "/etc/kubernetes/scheduler.conf", kubeconfig)
	const elect = "\n  leaderElect: true\n"
	require.Contains(t, conf, elect, "the profile's leaderElection section")
	// A lease of 4 s renewed within 3 s, retried every 500 ms: lost 3 s into
	// an outage (kube-scheduler's defaults are 15 s, 10 s and 2 s).
	conf = strings.Replace(conf, elect, elect+"  leaseDuration: 4s\n  renewDeadline: 3s\n  retryPeriod: 500ms\n", 1)
	config := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(config, []byte(conf), 0o600))

	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	js, err := json.Marshal(m)
	require.NoError(t, err)
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("224"), v1.ResourceMemory: resource.MustParse("2Ti"),
		v1.ResourcePods: resource.MustParse("110"), kube.ResourceAliyunGPU: resource.MustParse("8")}
	_, err = client.CoreV1().Nodes().Create(ctx, &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-1",
			Labels:      map[string]string{kube.DefaultOptInLabel: kube.DefaultOptInValue},
			Annotations: map[string]string{numaplace.AnnotationTopology: string(js)}},
		Status: v1.NodeStatus{Capacity: res, Allocatable: res},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	first := startLeaseScheduler(t, config, kubeconfig, "first")
	_, err = client.CoreV1().Pods("default").Create(ctx, leasePod("before"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "gpu-1", waitBound(t, client, first, "before"))
	holder := leaseHolder(client)
	require.NotEmpty(t, holder, "the lease's holder")
	t.Logf("the first scheduler holds the lease as %s and has bound pod before", holder)

	// The outage: the scheduler exits on its own, with status 1.
	cp.StopAPIServer()
	outage := time.Now()
	select {
	case <-first.exited:
	case <-time.After(2 * time.Minute): // far beyond the 3 s renew deadline: a hang, not a speed bound
		t.Fatalf("the scheduler did not exit during the outage; its log:\n%s", first.tail())
	}
	t.Logf("the scheduler exited %s into the outage: %v", time.Since(outage).Round(time.Second), first.err)
	var exit *exec.ExitError
	require.True(t, errors.As(first.err, &exit), "the exit: %v", first.err)
	require.Equal(t, 1, exit.ExitCode(), "the exit status; the log:\n%s", first.tail())
	log := first.tail()
	require.Contains(t, log, "Leaderelection lost")
	require.Contains(t, log, `"Failed to renew lease" lock="kube-system/numaplace-scheduler"`)

	// The API server back, a scheduler started again (as the Deployment's
	// restart does) takes the lease and schedules.
	cp.StartAPIServer()
	second := startLeaseScheduler(t, config, kubeconfig, "second")
	_, err = client.CoreV1().Pods("default").Create(ctx, leasePod("after"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "gpu-1", waitBound(t, client, second, "after"))
	now := leaseHolder(client)
	require.NotEmpty(t, now)
	require.NotEqual(t, holder, now, "the second scheduler holds the lease under its own identity")
	t.Logf("the second scheduler holds the lease as %s and has bound pod after", now)
	// The first pod's placement still counts: the two decisions differ.
	before, err := client.CoreV1().Pods("default").Get(ctx, "before", metav1.GetOptions{})
	require.NoError(t, err)
	after, err := client.CoreV1().Pods("default").Get(ctx, "after", metav1.GetOptions{})
	require.NoError(t, err)
	db, err := kube.ParseDecision(before.Annotations[kube.AnnotationAllocation])
	require.NoError(t, err)
	da, err := kube.ParseDecision(after.Annotations[kube.AnnotationAllocation])
	require.NoError(t, err)
	require.NotEqual(t, db.GPUs[0].ID, da.GPUs[0].ID, "the second scheduler gave pod after the GPU of pod before")
}
