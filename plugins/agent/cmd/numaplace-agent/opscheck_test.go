package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/plugins/agent/cluster"
)

// This file is the fault tests' check of the node (issue 22, item 4): what
// runs, what the agent's checkpoint holds and what its report says agree.
// It reads the runtime through crictl (so that it works while the API
// server is down, but for the report), the decisions from the sandboxes'
// annotations (the kubelet copies the pod's annotations onto its sandbox),
// and the checkpoint file.

// opsMachineCPUs is the harness machine's CPUs (fakeSysfs: CPU k is NUMA
// node k).
var opsMachineCPUs = numa.NewCPUSet(0, 1)

// opsSandbox is a pod sandbox as crictl lists it.
type opsSandbox struct {
	ID       string `json:"id"`
	Metadata struct {
		Name, Namespace, UID string
	} `json:"metadata"`
	State       string            `json:"state"`
	Annotations map[string]string `json:"annotations"`
}

// opsContainer is a container as crictl lists it.
type opsContainer struct {
	ID           string `json:"id"`
	PodSandboxID string `json:"podSandboxId"`
	Metadata     struct{ Name string }
	State        string `json:"state"`
}

// opsCheckpoint is the part of the agent's checkpoint the check compares.
type opsCheckpoint struct {
	Data struct {
		Pods []opsCheckpointPod `json:"pods"`
	} `json:"data"`
}

// opsCheckpointPod is a pod of the checkpoint.
type opsCheckpointPod struct {
	Pod        string `json:"pod"`
	Source     string `json:"source"`
	Allocation *struct {
		CPUs string `json:"cpus"`
		GPUs []int  `json:"gpus"`
	} `json:"allocation"`
}

// opsNodeState is what the check saw, for the test's log.
type opsNodeState struct {
	// Pods are the running pods (a ready sandbox with a running container)
	// by key, each with its containers' cpusets and GPUs.
	Pods map[string][]string
	// Checkpoint is the checkpoint's pods with what they hold.
	Checkpoint []string
	// Zones is the NodeResourceTopology's available amounts.
	Zones string
}

// opsCheckNode checks the node once and returns what it saw and every
// disagreement found:
//
//   - every running container's cpuset is its pod's decision's when the
//     decision has exclusive CPUs, else the shared pool (the machine's CPUs
//     that no running pod's decision holds); a container of a pod with a
//     decision sees exactly the decision's GPUs (NVIDIA_VISIBLE_DEVICES);
//   - no CPU is held by the decisions of two running pods, and no GPU is
//     seen by containers of two running pods;
//   - the checkpoint lists exactly the running pods, each pod with a
//     decision holding exactly its CPUs and GPUs;
//   - the NodeResourceTopology's available CPUs and GPUs per NUMA node are
//     the machine's minus what the checkpoint holds, and its pod fingerprint
//     is that of the running pods (skipped when report is false).
func opsCheckNode(c *kubeletCluster, report bool) (opsNodeState, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	st := opsNodeState{Pods: map[string][]string{}}

	out, err := c.e.crictl("pods", "-o", "json")
	if err != nil {
		return st, fmt.Errorf("crictl pods: %w: %s", err, out)
	}
	var pods struct{ Items []opsSandbox }
	if err := json.Unmarshal([]byte(out), &pods); err != nil {
		return st, fmt.Errorf("crictl pods: %w", err)
	}
	out, err = c.e.crictl("ps", "-o", "json")
	if err != nil {
		return st, fmt.Errorf("crictl ps: %w: %s", err, out)
	}
	var ctrs struct{ Containers []opsContainer }
	if err := json.Unmarshal([]byte(out), &ctrs); err != nil {
		return st, fmt.Errorf("crictl ps: %w", err)
	}
	sandboxes := map[string]opsSandbox{}
	for _, p := range pods.Items {
		if p.State == "SANDBOX_READY" {
			sandboxes[p.ID] = p
		}
	}
	// The running pods and their decisions.
	decisions := map[string]*kube.Decision{}
	running := map[string][]opsContainer{}
	for _, ctr := range ctrs.Containers {
		sb, ok := sandboxes[ctr.PodSandboxID]
		if !ok || ctr.State != "CONTAINER_RUNNING" {
			continue
		}
		key := sb.Metadata.Namespace + "/" + sb.Metadata.Name
		if _, dup := running[key]; !dup {
			if v, ok := sb.Annotations[kube.AnnotationAllocation]; ok {
				d, err := kube.ParseDecision(v)
				if err != nil {
					bad("pod %s: decision %q: %v", key, v, err)
				} else {
					decisions[key] = &d
				}
			}
		}
		running[key] = append(running[key], ctr)
	}
	// Exclusive CPUs and the shared pool.
	var exclusive numa.CPUSet
	cpuHolder := map[int]string{}
	for _, key := range slices.Sorted(maps.Keys(decisions)) {
		set, err := numa.ParseCPUSet(decisions[key].CPUSet)
		if err != nil {
			bad("pod %s: decision cpuset: %v", key, err)
			continue
		}
		for cpu := range set.All() {
			if other, held := cpuHolder[cpu]; held {
				bad("CPU %d is in the decisions of two running pods, %s and %s", cpu, other, key)
			}
			cpuHolder[cpu] = key
		}
		exclusive = exclusive.Union(set)
	}
	shared := opsMachineCPUs.Difference(exclusive)
	// Each running container.
	gpuHolder := map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(running)) {
		d := decisions[key]
		for _, ctr := range running[key] {
			status, err := c.e.crictl("exec", ctr.ID, "cat", "/proc/self/status")
			if err != nil {
				bad("pod %s container %s: crictl exec: %v: %s", key, ctr.Metadata.Name, err, status)
				continue
			}
			var cpus string
			for line := range strings.Lines(status) {
				if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
					cpus = strings.TrimSpace(v)
				}
			}
			env, err := c.e.crictl("exec", ctr.ID, "env")
			if err != nil {
				bad("pod %s container %s: crictl exec env: %v: %s", key, ctr.Metadata.Name, err, env)
				continue
			}
			var visible string
			for line := range strings.Lines(env) {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "NVIDIA_VISIBLE_DEVICES="); ok {
					visible = v
				}
			}
			st.Pods[key] = append(st.Pods[key], fmt.Sprintf("%s: cpus %s gpus %q", ctr.Metadata.Name, cpus, visible))
			want := shared.String()
			if d != nil && d.CPUSet != "" {
				want = d.CPUSet
			}
			if cpus != want {
				bad("pod %s container %s runs on CPUs %q, want %q (decision %v, shared pool %s)", key, ctr.Metadata.Name, cpus, want, d != nil, shared)
			}
			if d != nil {
				var uuids []string
				for _, g := range d.GPUs {
					uuids = append(uuids, g.UUID)
				}
				wantGPUs := strings.Join(uuids, ",")
				if wantGPUs == "" {
					wantGPUs = "void"
				}
				if visible != wantGPUs {
					bad("pod %s container %s sees GPUs %q, its decision %q", key, ctr.Metadata.Name, visible, wantGPUs)
				}
			}
			if visible == "" || visible == "void" {
				continue
			}
			for _, g := range strings.Split(visible, ",") {
				if other, held := gpuHolder[g]; held && other != key {
					bad("GPU %s is seen by running containers of two pods, %s and %s", g, other, key)
				}
				gpuHolder[g] = key
			}
		}
	}

	// The checkpoint.
	raw, err := os.ReadFile(filepath.Join(c.e.dir, "checkpoint.json"))
	if err != nil {
		return st, fmt.Errorf("the checkpoint: %w", err)
	}
	var cp opsCheckpoint
	if err := json.Unmarshal(raw, &cp); err != nil {
		return st, fmt.Errorf("the checkpoint: %w", err)
	}
	held := map[string][2]any{} // pod -> cpus, gpus
	var heldCPUs numa.CPUSet
	heldGPUs := map[int]bool{}
	for _, p := range cp.Data.Pods {
		line := p.Pod + " " + p.Source
		if a := p.Allocation; a != nil {
			line += fmt.Sprintf(" cpus %q gpus %v", a.CPUs, a.GPUs)
			held[p.Pod] = [2]any{a.CPUs, a.GPUs}
			set, err := numa.ParseCPUSet(a.CPUs)
			if err != nil {
				bad("checkpoint: pod %s: cpus %q: %v", p.Pod, a.CPUs, err)
			}
			heldCPUs = heldCPUs.Union(set)
			for _, g := range a.GPUs {
				heldGPUs[g] = true
			}
		}
		st.Checkpoint = append(st.Checkpoint, line)
		if _, ok := running[p.Pod]; !ok {
			bad("the checkpoint holds pod %s, which does not run", p.Pod)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(running)) {
		if !slices.ContainsFunc(cp.Data.Pods, func(p opsCheckpointPod) bool { return p.Pod == key }) {
			bad("pod %s runs but is not in the checkpoint", key)
		}
		d := decisions[key]
		if d == nil {
			continue
		}
		var gpus []int
		for _, g := range d.GPUs {
			gpus = append(gpus, g.ID)
		}
		h, ok := held[key]
		if !ok {
			bad("pod %s has a decision but holds nothing in the checkpoint", key)
			continue
		}
		hg, _ := h[1].([]int)
		if h[0] != d.CPUSet || !slices.Equal(hg, gpus) {
			bad("pod %s holds CPUs %q and GPUs %v in the checkpoint, its decision %q and %v", key, h[0], hg, d.CPUSet, gpus)
		}
	}

	// The report.
	if report {
		obj, err := c.dyn.Resource(cluster.NRTResource).Get(context.Background(), kubeletNode, metav1.GetOptions{})
		if err != nil {
			return st, fmt.Errorf("the NodeResourceTopology: %w", err)
		}
		zones, _, _ := unstructured.NestedSlice(obj.Object, "zones")
		var b strings.Builder
		for node := range 2 {
			wantCPU := 1
			if heldCPUs.Contains(node) {
				wantCPU = 0
			}
			wantGPU := 0
			for i, g := range fakeGPUs {
				if g.node == node && !heldGPUs[i] {
					wantGPU++
				}
			}
			zone := "node-" + strconv.Itoa(node)
			var gotCPU, gotGPU string
			for _, z := range zones {
				zm, _ := z.(map[string]any)
				if zm["name"] != zone {
					continue
				}
				rs, _ := zm["resources"].([]any)
				for _, r := range rs {
					rm, _ := r.(map[string]any)
					switch rm["name"] {
					case "cpu":
						gotCPU, _ = rm["available"].(string)
					case "aliyun.com/gpu":
						gotGPU, _ = rm["available"].(string)
					}
				}
			}
			fmt.Fprintf(&b, "%s: cpu=%s aliyun.com/gpu=%s; ", zone, gotCPU, gotGPU)
			if gotCPU != strconv.Itoa(wantCPU) || gotGPU != strconv.Itoa(wantGPU) {
				bad("the NodeResourceTopology's %s has cpu=%s aliyun.com/gpu=%s available, the checkpoint leaves %d and %d", zone, gotCPU, gotGPU, wantCPU, wantGPU)
			}
		}
		// The pod fingerprint: that of the running pods.
		var fp kube.PodFingerprint
		for key := range running {
			ns, name, _ := strings.Cut(key, "/")
			fp.Add(ns, name)
		}
		attrs, _, _ := unstructured.NestedSlice(obj.Object, "attributes")
		var got string
		for _, a := range attrs {
			if am, _ := a.(map[string]any); am["name"] == "nodeTopologyPodsFingerprint" {
				got, _ = am["value"].(string)
			}
		}
		fmt.Fprintf(&b, "fingerprint %s", got)
		if want := fp.Sign(); got != want {
			bad("the NodeResourceTopology's pod fingerprint is %s, the running pods' %s", got, want)
		}
		st.Zones = b.String()
	}
	return st, errors.Join(errs...)
}

// opsRequireConsistent waits (up to timeout: the kubelet's and the
// reporter's retries) until opsCheckNode finds nothing wrong, logs what it
// saw, and fails with the last disagreements otherwise.
func opsRequireConsistent(t *testing.T, c *kubeletCluster, report bool, timeout time.Duration) opsNodeState {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st, err := opsCheckNode(c, report)
		if err == nil {
			t.Logf("node consistent: running %v; checkpoint %v; report %s", st.Pods, st.Checkpoint, st.Zones)
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node is not consistent after %s:\n%v\nrunning %v\ncheckpoint %v\nreport %s\nthe agent's log (end):\n%s",
				timeout, err, st.Pods, st.Checkpoint, st.Zones, tail([]byte(c.agent.log.String()), 6000))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
