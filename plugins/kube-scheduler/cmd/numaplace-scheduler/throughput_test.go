package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/plugins/kube-scheduler/internal/trialpods"
	"github.com/numaplace/numaplace/topology"

	"github.com/numaplace/numaplace/internal/controlplane"
	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// TestThroughput is the side-by-side throughput trial (throughput.sh runs
// it): on a real kube-apiserver and etcd, N fake nodes (half dgx-h100, half
// dgx-a100, with their topology annotation and the opt-in label) and M pods
// of every kind (the four policies, GPU pods without a spec, plain pods;
// fixed seed) posted before the scheduler starts; then this program runs
// once with deploy/scheduler-config.yaml's NUMAPlace profile and once with a
// profile of the same name without NUMAPlace (kube-scheduler's defaults),
// for each client rate, with the same client QPS and burst, in
// NUMAPLACE_THROUGHPUT_ROUNDS rounds (2) that alternate which goes first.
// Each run logs the pods bound per second (from the first binding seen to
// the last, by a watch), the API server's writes per pod by kind and its CPU
// seconds, the scheduler's CPU seconds and the machine's load average; the
// table at the end has each profile's median pods/s and their ratio. It
// runs only when NUMAPLACE_THROUGHPUT is set; NUMAPLACE_THROUGHPUT_NODES
// (1000), NUMAPLACE_THROUGHPUT_PODS (2000) and NUMAPLACE_THROUGHPUT_RATES
// ("shipped,500/1000": "shipped" is the configuration's clientConnection,
// or kube-scheduler's default 50/100 where it sets none) change the trial.
// It fails when a run leaves pods unbound or, in the NUMAPlace runs, a pod
// that asks for CPUs or GPUs from numaplace bound without its decision.
func TestThroughput(t *testing.T) {
	if os.Getenv("NUMAPLACE_THROUGHPUT") == "" {
		t.Skip("the throughput trial runs only with NUMAPLACE_THROUGHPUT=1 (see throughput.sh)")
	}
	nNodes, nPods := envInt(t, "NUMAPLACE_THROUGHPUT_NODES", 1000), envInt(t, "NUMAPLACE_THROUGHPUT_PODS", 2000)
	base, rates, cfg, client, kubeconfig := startTrial(t, "shipped,500/1000")
	ctx := t.Context()

	start := time.Now()
	parallel(t, nNodes, func(i int) error {
		preset := "dgx-h100"
		if i%2 == 1 {
			preset = "dgx-a100"
		}
		_, err := client.CoreV1().Nodes().Create(ctx, benchNode(t, fmt.Sprintf("gpu-%04d", i), preset), metav1.CreateOptions{})
		return err
	})
	t.Logf("%d nodes created in %s", nNodes, time.Since(start).Round(time.Millisecond))

	rounds := envInt(t, "NUMAPLACE_THROUGHPUT_ROUNDS", 2)
	sideBySide(t, rates, rounds, nPods, "pods",
		func() string {
			return fmt.Sprintf("\nthroughput: %d nodes (half dgx-h100, half dgx-a100), %d pods, %d CPUs, %d rounds (median pods/s), at %s\n",
				nNodes, nPods, runtime.NumCPU(), rounds, time.Now().UTC().Format(time.RFC3339))
		},
		func(profile string, r rate) runResult {
			return runThroughput(t, client, cfg, kubeconfig, base, profile, r, nPods)
		})
}

// sideBySide runs the two profiles at each client rate of rates, rounds
// times, taking turns to go first (ABBA, so that a drift of the machine's
// load weighs on both alike), logs each run (nPods of what) and prints
// heading's line, then the table: each profile's median pods/s, their
// ratio, the runs and the writes per pod.
func sideBySide(t *testing.T, rates []rate, rounds, nPods int, what string, heading func() string, run func(profile string, r rate) runResult) {
	t.Helper()
	type row struct {
		rate     rate
		runs     map[string][]runResult
		medianPS map[string]float64
	}
	var rows []row
	for _, r := range rates {
		rw := row{rate: r, runs: map[string][]runResult{}, medianPS: map[string]float64{}}
		for round := range rounds {
			order := []string{"default", "numaplace"}
			if round%2 == 1 {
				order = []string{"numaplace", "default"}
			}
			for _, profile := range order {
				res := run(profile, r)
				rw.runs[profile] = append(rw.runs[profile], res)
				t.Logf("qps %g burst %d, round %d, profile %s: %d %s in %s, %.1f pods/s; writes per pod: %s; "+
					"API server CPU %.1f s, scheduler CPU %.1f s; load average %s -> %s",
					r.qps, r.burst, round+1, profile, nPods, what, res.span.Round(time.Millisecond), res.podsPerSecond(),
					res.writesPerPod(nPods), res.apiserverCPU, res.schedulerCPU, res.loadBefore, res.loadAfter)
			}
		}
		for p, runs := range rw.runs {
			ps := make([]float64, len(runs))
			for i, res := range runs {
				ps[i] = res.podsPerSecond()
			}
			rw.medianPS[p] = median(ps)
		}
		rows = append(rows, rw)
	}
	fmt.Print(heading())
	fmt.Printf("%-20s %12s %12s %6s  %-30s %s\n", "client rate", "default", "numaplace", "ratio", "runs default / numaplace", "writes/pod default / numaplace")
	for _, rw := range rows {
		d, n := rw.medianPS["default"], rw.medianPS["numaplace"]
		fmt.Printf("%-20s %8.1f p/s %8.1f p/s %6.2f  %-30s %s / %s\n", fmt.Sprintf("qps %g burst %d", rw.rate.qps, rw.rate.burst),
			d, n, n/d, runsPS(rw.runs["default"])+" / "+runsPS(rw.runs["numaplace"]),
			rw.runs["default"][0].writesPerPod(nPods), rw.runs["numaplace"][0].writesPerPod(nPods))
	}
}

// startTrial reads deploy/scheduler-config.yaml (base, the configuration
// each run edits) and the client rates of NUMAPLACE_THROUGHPUT_RATES (or
// rates), and starts etcd and kube-apiserver: their config, a client for
// the trial's own writes (qps 2000, burst 4000, so that setting up is not
// what the trial waits for) and a kubeconfig for the scheduler.
func startTrial(t *testing.T, rates string) (map[string]any, []rate, *rest.Config, kubernetes.Interface, string) {
	t.Helper()
	shipped, err := os.ReadFile("../../deploy/scheduler-config.yaml")
	require.NoError(t, err)
	var base map[string]any
	require.NoError(t, yaml.Unmarshal(shipped, &base))
	rs := parseRates(t, envString("NUMAPLACE_THROUGHPUT_RATES", rates), base)
	cfg := controlplane.Start(t)
	setup := rest.CopyConfig(cfg)
	setup.QPS, setup.Burst = 2000, 4000
	client, err := kubernetes.NewForConfig(setup)
	require.NoError(t, err)
	return base, rs, cfg, client, controlplane.Kubeconfig(t, cfg)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func runsPS(runs []runResult) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = fmt.Sprintf("%.1f", r.podsPerSecond())
	}
	return strings.Join(parts, ",")
}

// rate is a client QPS and burst.
type rate struct {
	qps   float64
	burst int
}

// parseRates reads "shipped,QPS/BURST,...".
func parseRates(t *testing.T, s string, base map[string]any) []rate {
	t.Helper()
	var out []rate
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "shipped" {
			r := rate{qps: 50, burst: 100} // kube-scheduler's defaults
			if cc, ok := base["clientConnection"].(map[string]any); ok {
				if q, ok := cc["qps"].(float64); ok {
					r.qps = q
				}
				if b, ok := cc["burst"].(float64); ok {
					r.burst = int(b)
				}
			}
			out = append(out, r)
			continue
		}
		q, b, ok := strings.Cut(f, "/")
		qps, err1 := strconv.ParseFloat(q, 64)
		burst, err2 := strconv.Atoi(b)
		require.True(t, ok && err1 == nil && err2 == nil, "NUMAPLACE_THROUGHPUT_RATES: %q is not shipped or QPS/BURST", f)
		out = append(out, rate{qps, burst})
	}
	return out
}

// runResult is one run's measurements.
type runResult struct {
	span                       time.Duration // first binding to last
	bound                      int
	writes                     map[controlplane.Request]float64
	apiserverCPU, schedulerCPU float64
	loadBefore, loadAfter      string
}

func (r runResult) podsPerSecond() float64 {
	if r.span <= 0 || r.bound < 2 {
		return 0
	}
	return float64(r.bound-1) / r.span.Seconds()
}

// writesPerPod lists the scheduler's writes (everything but the trial's own
// pod creations and deletions) per pod, by kind.
func (r runResult) writesPerPod(pods int) string {
	var parts []string
	total := 0.0
	for req, n := range r.writes {
		total += n
		parts = append(parts, fmt.Sprintf("%s %.2f", req, n/float64(pods)))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%.2f (%s)", total/float64(pods), strings.Join(parts, ", "))
}

const benchNamespace = "default"

// runThroughput deletes the pods of the previous run, posts nPods pods,
// runs the scheduler with the profile until every pod is bound, measures,
// and checks that every NUMA or GPU pod numaplace bound has its decision.
func runThroughput(t *testing.T, client kubernetes.Interface, cfg *rest.Config, kubeconfig string, base map[string]any, profile string, r rate, nPods int) runResult {
	t.Helper()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(25, 1))
	pods := make([]*v1.Pod, nPods)
	for i := range pods {
		policy, cpus, gpus := trialpods.Mix(rng)
		pods[i] = trialpods.Pod(benchNamespace, fmt.Sprintf("pod-%05d", i), policy, cpus, gpus)
	}
	res := trialRun(t, client, cfg, kubeconfig, base, profile, r, nPods, nil, func(i int) error {
		_, err := client.CoreV1().Pods(benchNamespace).Create(ctx, pods[i], metav1.CreateOptions{})
		return err
	})
	if profile == "numaplace" {
		l, err := client.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range l.Items {
			if p.Annotations[kube.AnnotationSpecAlibaba] != "" || p.Spec.Containers[0].Resources.Requests.Name(kube.ResourceAliyunGPU, resource.DecimalSI).Value() > 0 {
				require.NotEmpty(t, p.Annotations[kube.AnnotationAllocation], "pod %s bound to %s without its decision", p.Name, p.Spec.NodeName)
			}
		}
	}
	return res
}

// trialRun is one run of a throughput trial: it deletes the pods of the
// previous run (and calls clear, when not nil, for what else it left),
// calls post(i) for i in [0, nPods) in parallel to post the pods, runs
// the scheduler with the profile and the client rate until every pod is
// bound, and measures: the span from the first binding to the last, the
// scheduler's writes by kind, the CPU time of the scheduler and of the
// API server, and the load before and after.
func trialRun(t *testing.T, client kubernetes.Interface, cfg *rest.Config, kubeconfig string, base map[string]any, profile string, r rate, nPods int,
	clear func(), post func(i int) error) runResult {
	t.Helper()
	ctx := t.Context()
	zero := int64(0)
	require.NoError(t, client.CoreV1().Pods(benchNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := client.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, nil
	}))
	if clear != nil {
		clear()
	}
	parallel(t, nPods, post)
	list, err := client.CoreV1().Pods(benchNamespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := client.CoreV1().Pods(benchNamespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()

	config := schedulerConfig(t, base, profile, r, kubeconfig)
	before, err := controlplane.ScrapeMetrics(ctx, cfg)
	require.NoError(t, err)
	res := runResult{loadBefore: loadAverage()}
	args := []string{"--config", config, "--secure-port", "0", "--v", "1"}
	// NUMAPLACE_THROUGHPUT_PPROF=DIR: serve /debug/pprof and write a CPU
	// profile of the scheduler's and the API server's first seconds of
	// binding in each run into DIR (20, or
	// NUMAPLACE_THROUGHPUT_PPROF_SECONDS: shorter than the run, or the
	// profile is lost when the scheduler stops).
	pprofDir := os.Getenv("NUMAPLACE_THROUGHPUT_PPROF")
	pprofSeconds := envInt(t, "NUMAPLACE_THROUGHPUT_PPROF_SECONDS", 20)
	port := 0
	if pprofDir != "" {
		port = controlplane.FreePort(t)
		args = []string{"--config", config, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port),
			"--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig, "--v", "1"}
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "NUMAPLACE_SCHEDULER_ARGS="+strings.Join(args, "\n"))
	proc := controlplane.StartProcess(t, t.TempDir(), "scheduler", cmd)
	logPath, exited, stop := proc.Log, proc.Done(), proc.Stop
	defer stop()

	bound := map[string]bool{}
	var first, last time.Time
	inProfile := 0 // pods bound while the CPU profile ran
	timeout := time.After(15 * time.Minute)
	for len(bound) < nPods {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "the pod watch ended")
			if ev.Type != watch.Modified && ev.Type != watch.Added {
				continue
			}
			p, ok := ev.Object.(*v1.Pod)
			if !ok || p.Spec.NodeName == "" || bound[p.Name] {
				continue
			}
			now := time.Now()
			if first.IsZero() {
				first = now
				if pprofDir != "" {
					go cpuProfile(t, fmt.Sprintf("https://127.0.0.1:%d", port), pprofSeconds, filepath.Join(pprofDir, fmt.Sprintf("%s-%g-%d.pprof", profile, r.qps, r.burst)))
					go cpuProfile(t, cfg.Host, pprofSeconds, filepath.Join(pprofDir, fmt.Sprintf("apiserver-%s-%g-%d.pprof", profile, r.qps, r.burst)))
				}
			}
			last = now
			bound[p.Name] = true
			if now.Sub(first) < time.Duration(pprofSeconds)*time.Second {
				inProfile++
			}
		case <-exited:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("the scheduler exited after binding %d of %d pods:\n%s", len(bound), nPods, tail(log))
		case <-timeout:
			log, _ := os.ReadFile(logPath)
			t.Fatalf("%d of %d pods bound after 15 minutes:\n%s", len(bound), nPods, tail(log))
		}
	}
	res.span, res.bound = last.Sub(first), len(bound)
	if pprofDir != "" {
		t.Logf("profile %s: %d pods bound in the CPU profile's %d s", profile, inProfile, pprofSeconds)
	}
	// The last writes (events, conditions) settle before the count.
	time.Sleep(2 * time.Second)
	stop()
	if cmd.ProcessState != nil {
		res.schedulerCPU = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	after, err := controlplane.ScrapeMetrics(ctx, cfg)
	require.NoError(t, err)
	res.loadAfter = loadAverage()
	d := after.Sub(before)
	res.apiserverCPU = d.CPUSeconds
	res.writes = map[controlplane.Request]float64{}
	for req, n := range d.Requests {
		if req.Write() && req.Resource != "leases" { // the API server's own identity lease
			res.writes[req] = n
		}
	}
	return res
}

// cpuProfile fetches a CPU profile of the seconds from the /debug/pprof of
// the server at base (https://host:port) into path.
func cpuProfile(t *testing.T, base string, seconds int, path string) {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test server
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds), nil)
	if err != nil {
		t.Logf("profile: %v", err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+controlplane.Token)
	resp, err := client.Do(req)
	if err != nil {
		t.Logf("profile: %v", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Logf("profile: %v", err)
	}
	t.Logf("CPU profile %s (%s, %d bytes)", path, resp.Status, len(b))
}

// schedulerConfig writes the configuration of one run: the shipped file
// with the test's kubeconfig, the client rate, no leader election, and for
// profile "default" a profile of the same scheduler name with
// kube-scheduler's default plugins only.
func schedulerConfig(t *testing.T, base map[string]any, profile string, r rate, kubeconfig string) string {
	t.Helper()
	var c map[string]any
	b, err := json.Marshal(base)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &c))
	c["clientConnection"] = map[string]any{"kubeconfig": kubeconfig, "qps": r.qps, "burst": r.burst}
	c["leaderElection"] = map[string]any{"leaderElect": false}
	if profile == "default" {
		c["profiles"] = []any{map[string]any{"schedulerName": "numaplace-scheduler"}}
	}
	out, err := yaml.Marshal(c)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), profile+".yaml")
	require.NoError(t, os.WriteFile(path, out, 0o600))
	return path
}

// benchNode is a fake node of the preset with its topology annotation, the
// opt-in label and the matching capacity.
func benchNode(t *testing.T, name, preset string) *v1.Node {
	m, err := topology.Preset(preset)
	require.NoError(t, err)
	js, err := json.Marshal(m)
	require.NoError(t, err)
	var memMiB int64
	for _, n := range m.Nodes() {
		memMiB += n.MemoryMiB
	}
	res := v1.ResourceList{
		v1.ResourceCPU:         *resource.NewQuantity(int64(m.NumCPUs()), resource.DecimalSI),
		v1.ResourceMemory:      *resource.NewQuantity(memMiB<<20, resource.BinarySI),
		v1.ResourcePods:        resource.MustParse("110"),
		kube.ResourceAliyunGPU: *resource.NewQuantity(int64(m.NumGPUs()), resource.DecimalSI),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{v1.LabelHostname: name, kube.DefaultOptInLabel: kube.DefaultOptInValue},
			Annotations: map[string]string{numaplace.AnnotationTopology: string(js)}},
		Status: v1.NodeStatus{Capacity: res, Allocatable: res},
	}
}

// parallel runs f(0..n-1) on 16 goroutines and fails the test on the first
// error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("item %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	require.NoError(t, first)
}

func envInt(t *testing.T, key string, def int) int {
	t.Helper()
	s := os.Getenv(key)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "%s=%q is not a number", key, s)
	return n
}

func envString(key, def string) string {
	if s := os.Getenv(key); s != "" {
		return s
	}
	return def
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func tail(b []byte) []byte {
	if len(b) > 6000 {
		return b[len(b)-6000:]
	}
	return b
}
