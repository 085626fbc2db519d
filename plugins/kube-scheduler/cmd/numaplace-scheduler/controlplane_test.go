package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
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
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"

	"github.com/numaplace/numaplace/internal/controlplane"
	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// TestBinaryOnARealControlPlane runs the program itself, with the example
// configuration (pointed at the test's API server) and leader election,
// against a real kube-apiserver and etcd: a pod that selects
// numaplace-scheduler is bound with its decision, and the placement shows
// on the scheduler's /metrics. It skips when ../../.ci-prepare has not
// built the control plane.
func TestBinaryOnARealControlPlane(t *testing.T) {
	cfg := controlplane.Start(t)
	kubeconfig := controlplane.Kubeconfig(t, cfg)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	data, err := os.ReadFile("../../deploy/scheduler-config.yaml")
	require.NoError(t, err)
	config := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(config, []byte(strings.ReplaceAll(string(data), "/etc/kubernetes/scheduler.conf", kubeconfig)), 0o600))
	port := controlplane.FreePort(t)
	args := []string{"--config", config, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
		"--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig, "--v", "3"}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "NUMAPLACE_SCHEDULER_ARGS="+strings.Join(args, "\n"))
	proc := controlplane.StartProcess(t, t.TempDir(), "scheduler", cmd)
	logPath := proc.Log
	fail := func(format string, args ...any) {
		t.Helper()
		log, _ := os.ReadFile(logPath)
		if len(log) > 6000 {
			log = log[len(log)-6000:]
		}
		t.Fatalf(format+"\nscheduler log:\n%s", append(args, log)...)
	}

	ctx := t.Context()
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
	podRes := v1.ResourceList{v1.ResourceCPU: resource.MustParse("24"), v1.ResourceMemory: resource.MustParse("64Gi"),
		kube.ResourceAliyunGPU: resource.MustParse("4")}
	_, err = client.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "textgen-0", Annotations: map[string]string{
			kube.AnnotationCPUSetScheduler: "required",
			kube.AnnotationSpecAlibaba:     `{"numaTopologyPolicy":"SingleNUMANode"}`}},
		Spec: v1.PodSpec{SchedulerName: "numaplace-scheduler", Containers: []v1.Container{{Name: "main", Image: "registry.example/textgen:1",
			Resources: v1.ResourceRequirements{Requests: podRes, Limits: podRes}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	var p *v1.Pod
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-proc.Done():
			fail("the scheduler exited: %v", proc.Err())
		default:
		}
		p, err = client.CoreV1().Pods("default").Get(ctx, "textgen-0", metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != "", nil
	})
	if err != nil {
		fail("pod textgen-0 not bound: %v (last: %+v)", err, p)
	}
	require.Equal(t, "gpu-1", p.Spec.NodeName)
	d, err := kube.ParseDecision(p.Annotations[kube.AnnotationAllocation])
	require.NoError(t, err)
	require.Len(t, d.NUMANodes, 1)
	require.Len(t, d.GPUs, 4)

	// The placement is counted on /metrics (PostBind runs just after the
	// binding).
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test server
	var body string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(port)+"/metrics", nil)
		if err != nil {
			return false, err
		}
		req.Header.Set("Authorization", "Bearer "+controlplane.Token)
		resp, err := insecure.Do(req)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = resp.Status + "\n" + string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, `numaplace_placements_total{policy="SingleNUMANode"} 1`), nil
	})
	if err != nil {
		if len(body) > 2000 {
			body = body[:2000]
		}
		fail("no placement on /metrics: %v\n%s", err, body)
	}
	require.Contains(t, body, "numaplace_filter_duration_seconds_bucket")
}
