package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"

	"github.com/numaplace/numaplace/internal/controlplane"
	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// startLeaseScheduler runs the program as a child process with the
// configuration file and its own secure port until it exits or the test
// ends, its output in a log file.
func startLeaseScheduler(t *testing.T, config, kubeconfig, name string) *controlplane.Process {
	t.Helper()
	args := []string{"--config", config, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(controlplane.FreePort(t)),
		"--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig, "--v", "2"}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "NUMAPLACE_SCHEDULER_ARGS="+strings.Join(args, "\n"))
	return controlplane.StartProcess(t, t.TempDir(), name, cmd)
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
func waitBound(t *testing.T, client kubernetes.Interface, p *controlplane.Process, name string) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		pod, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && pod.Spec.NodeName != "" {
			_, err := kube.ParseDecision(pod.Annotations[kube.AnnotationAllocation])
			require.NoError(t, err, "pod %s's decision", name)
			return pod.Spec.NodeName
		}
		if p.Exited() {
			t.Fatalf("the scheduler exited (%v) before binding %s; its log:\n%s", p.Err(), name, p.Tail(5000))
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not bound (last: %v); the scheduler's log:\n%s", name, err, p.Tail(5000))
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
	case <-first.Done():
	case <-time.After(2 * time.Minute): // far beyond the 3 s renew deadline: a hang, not a speed bound
		t.Fatalf("the scheduler did not exit during the outage; its log:\n%s", first.Tail(5000))
	}
	t.Logf("the scheduler exited %s into the outage: %v", time.Since(outage).Round(time.Second), first.Err())
	var exit *exec.ExitError
	require.True(t, errors.As(first.Err(), &exit), "the exit: %v", first.Err())
	require.Equal(t, 1, exit.ExitCode(), "the exit status; the log:\n%s", first.Tail(5000))
	log := first.Tail(5000)
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
