package benchmarks

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"

	numaplacetm "github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

var graceLimit = flag.Duration("grace.limit", 30*time.Second,
	"time limit of the kubelet's admission on gb200-tray in BenchmarkGraceAdmit (run in a child process, killed at the limit)")

// graceRequest is the pod of the Grace benchmarks: 2 GPUs, 24 CPUs and 64
// GiB of memory, SingleNUMANode (the kubelet: single-numa-node).
var graceRequest = allocator.Request{ID: "bench", CPUs: 24, GPUs: 2, MemoryMiB: 64 << 10, Policy: policy.SingleNUMANode}

// graceHelperEnv makes TestGraceKubeletAdmitHelper run: BenchmarkGraceAdmit
// starts this test binary again with it to time the kubelet in a process it
// can kill.
const graceHelperEnv = "NUMAPLACE_GRACE_KUBELET_HELPER"

// graceHalfFull returns gb200-tray half full as the core module's
// allocator benchmarks fill it: two SingleNUMANode pods of 1 GPU and 18
// CPUs each, placed by numaplace.
func graceHalfFull(tb testing.TB) (*topology.Machine, *allocator.State) {
	tb.Helper()
	m := mustPreset(tb, "gb200-tray")
	s := allocator.MustNew(m, allocator.Options{})
	for i := range 2 {
		r := allocator.Request{ID: fmt.Sprintf("fill-%d", i), CPUs: 18, GPUs: 1, Policy: policy.SingleNUMANode}
		if _, err := s.Allocate(&r); err != nil {
			tb.Fatal(err)
		}
	}
	return m, s
}

// BenchmarkGraceFit is numaplace's Fit of graceRequest on a half-full
// gb200-tray (34 NUMA nodes, 2 with CPUs).
func BenchmarkGraceFit(b *testing.B) {
	_, s := graceHalfFull(b)
	r := graceRequest
	if err := s.Fit(&r); err != nil {
		b.Fatal(err)
	}
	b.Run("numaplace/gb200-tray", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = s.Fit(&r)
		}
	})
}

// BenchmarkGraceAdmit puts numaplace's admission of graceRequest on
// gb200-tray beside the kubelet's (k8s.io/kubernetes v1.37.2) on the same
// machine:
//
//   - numaplace/gb200-tray: Allocate and Release on the half-full machine.
//   - kubelet/gb200-tray: the kubelet's hint providers (device manager,
//     static CPU manager, static memory manager, as in BenchmarkAdmit) and
//     its single-numa-node merge, for the same pod on the empty machine.
//     With the default options the kubelet's Topology Manager does not
//     start on this machine ("unsupported on machines with more than 8 NUMA
//     Nodes": cadvisor lists all 34 nodes); the benchmark raises
//     max-allowable-numa-nodes to 34, as an operator must, and times one
//     admission in a child process killed after -grace.limit. The static
//     memory manager lists every subset of the 34 nodes
//     (IterateBitMasks over 2^34 - 1 masks): the side is reported as
//     skipped, "did not finish in N s", when the limit passes first.
func BenchmarkGraceAdmit(b *testing.B) {
	_, s := graceHalfFull(b)
	r := graceRequest
	b.Run("numaplace/gb200-tray", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Allocate(&r); err != nil {
				b.Fatal(err)
			}
			if err := s.Release(r.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kubelet/gb200-tray", func(b *testing.B) {
		m := mustPreset(b, "gb200-tray")
		if _, err := topologymanager.NewManager(quiet, cadvisorInfo(m).Topology, "single-numa-node", "pod", nil); err == nil {
			b.Fatal("the kubelet's Topology Manager started on 34 NUMA nodes with the default options")
		} else {
			b.Logf("default options: %v", err)
		}
		elapsed, err := runGraceHelper(b, *graceLimit)
		if errors.Is(err, context.DeadlineExceeded) {
			b.Skipf("did not finish in %.0f s", graceLimit.Seconds())
		}
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(elapsed.Nanoseconds()), "ns/op")
	})
}

var graceHelperResult = regexp.MustCompile(`kubelet admission: ([0-9]+) ns`)

// runGraceHelper runs TestGraceKubeletAdmitHelper in a child process and
// returns the time it reports, or an error wrapping
// context.DeadlineExceeded when the child is still running after limit (it
// is then killed).
func runGraceHelper(tb testing.TB, limit time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGraceKubeletAdmitHelper$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), graceHelperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return 0, fmt.Errorf("kubelet admission on gb200-tray: %w", ctx.Err())
	}
	if err != nil {
		return 0, fmt.Errorf("kubelet admission helper: %w\n%s", err, out)
	}
	mt := graceHelperResult.FindSubmatch(out)
	if mt == nil {
		return 0, fmt.Errorf("kubelet admission helper said no time:\n%s", out)
	}
	ns, _ := strconv.ParseInt(string(mt[1]), 10, 64)
	return time.Duration(ns), nil
}

// TestGraceKubeletAdmitHelper is the child process of BenchmarkGraceAdmit
// (it runs only with NUMAPLACE_GRACE_KUBELET_HELPER=1): it starts the
// kubelet's Topology Manager for gb200-tray with max-allowable-numa-nodes
// 34, then times its hint providers and single-numa-node merge for
// graceRequest's pod, once, and prints "kubelet admission: N ns".
func TestGraceKubeletAdmitHelper(t *testing.T) {
	if os.Getenv(graceHelperEnv) == "" {
		t.Skipf("the child process of BenchmarkGraceAdmit (set %s=1)", graceHelperEnv)
	}
	m := mustPreset(t, "gb200-tray")
	info := cadvisorInfo(m)
	if _, err := topologymanager.NewManager(quiet, info.Topology, "single-numa-node", "pod",
		map[string]string{topologymanager.MaxAllowableNUMANodes: "34"}); err != nil {
		t.Fatal(err)
	}
	kn := newKubeletNode(t, m, nil)
	r := graceRequest
	pod := guaranteedPod(&r)
	pol := mustKubeletPolicy(t, numaplacetm.PolicySingleNUMANode, kubeletNUMAInfo(m.NodeIDs(), m.Distances().Rows()), false)
	start := time.Now()
	h, admit := pol.Merge(quiet, kn.providers(pod))
	elapsed := time.Since(start)
	t.Logf("hint %v, admitted %v", h, admit)
	fmt.Printf("kubelet admission: %d ns\n", elapsed.Nanoseconds())
}

// TestGraceKubeletRefusesByDefault checks the kubelet's own refusal that
// numaplace's topologymanager.Predict reproduces: on gb200-tray (34 NUMA
// nodes, as cadvisor lists them) its Topology Manager does not start with
// the default options, with the same words.
func TestGraceKubeletRefusesByDefault(t *testing.T) {
	m := mustPreset(t, "gb200-tray")
	_, err := topologymanager.NewManager(quiet, cadvisorInfo(m).Topology, "single-numa-node", "pod", nil)
	if err == nil || err.Error() != "unsupported on machines with more than 8 NUMA Nodes" {
		t.Fatalf("kubelet: %v", err)
	}
	r := graceRequest
	_, _, perr := numaplacetm.Predict(numaplacetm.PolicySingleNUMANode, numaplacetm.PredictOptions{}, m, nil, &r)
	if perr == nil || !regexp.MustCompile(regexp.QuoteMeta(err.Error())).MatchString(perr.Error()) {
		t.Fatalf("Predict: %v, want the kubelet's %q", perr, err)
	}
}
