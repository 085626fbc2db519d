package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/numa"
)

// The node's invariants, checked after each fault on the real
// components: what every running container has, what the agent's
// checkpoint holds and what the node reports all agree with the decisions
// of the pods that run, and no CPU or GPU is in two pods.

// checkNodeInvariants waits (up to 90 s: the node converges after a fault)
// until the node keeps its invariants, and fails naming every violation
// when it does not:
//
// A pod's decision is its sandbox's numaplace.io/allocation annotation (the
// kubelet passes the pod's annotations to its sandbox), so pods run with
// crictl are checked too.
//
//   - no CPU is in the decisions of two running pods, no GPU in the
//     containers of two running pods;
//   - every running container's Cpus_allowed_list is its pod's decision's
//     cpuset, or the shared pool (the machine's CPUs that no running pod's
//     decision holds) when the decision has none or there is no decision;
//   - a container of a pod with a decision has NVIDIA_VISIBLE_DEVICES = the
//     decision's GPUs' UUIDs ("void", or unset, for none), and every container has
//     exactly the device nodes /dev/nvidiaN of the GPUs its
//     NVIDIA_VISIBLE_DEVICES names (N the GPU's device minor);
//   - the agent's checkpoint lists exactly the pods whose sandbox is ready
//     (by namespace/name and UID), each holding its decision's CPUs and
//     GPUs;
//   - the NodeResourceTopology's available cpu and aliyun.com/gpu of each
//     NUMA node are its CPUs and GPUs minus those the running pods hold
//     (decisions' CPUs; GPUs in any running container or decision).
//
// It logs what it checked.
func (c *kubeletCluster) checkNodeInvariants(t *testing.T) {
	t.Helper()
	var last []string
	var summary string
	deadline := time.Now().Add(90 * time.Second)
	for {
		last, summary = c.nodeViolations(t)
		if len(last) == 0 {
			t.Logf("node invariants hold: %s", summary)
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("node invariants violated (for 90 s):\n  %s\nstate: %s", strings.Join(last, "\n  "), summary)
}

// crictlSandbox and crictlContainer are what crictl's JSON output gives
// of a pod sandbox and a container.
type crictlSandbox struct {
	ID       string `json:"id"`
	Metadata struct {
		Name, UID, Namespace string
	} `json:"metadata"`
	State       string            `json:"state"`
	Annotations map[string]string `json:"annotations"`
}

type crictlContainer struct {
	ID           string `json:"id"`
	PodSandboxID string `json:"podSandboxId"`
	Metadata     struct {
		Name string
	} `json:"metadata"`
	State string `json:"state"`
}

// nodeViolations returns the violations of the node's invariants (see
// checkNodeInvariants) as they are now, and a summary of the state.
func (c *kubeletCluster) nodeViolations(t *testing.T) (violations []string, summary string) {
	t.Helper()
	bad := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }
	e := c.e

	out, err := e.crictl("pods", "--state", "ready", "-o", "json")
	if err != nil {
		return []string{"crictl pods: " + err.Error() + ": " + out}, ""
	}
	var pods struct{ Items []crictlSandbox }
	require.NoError(t, json.Unmarshal([]byte(out), &pods), "crictl pods: %s", out)
	out, err = e.crictl("ps", "-o", "json")
	if err != nil {
		return []string{"crictl ps: " + err.Error() + ": " + out}, ""
	}
	var ctrs struct{ Containers []crictlContainer }
	require.NoError(t, json.Unmarshal([]byte(out), &ctrs), "crictl ps: %s", out)

	// The running pods and their decisions.
	type podInfo struct {
		key, uid string
		dec      *kube.Decision
		cpus     numa.CPUSet
	}
	bySandbox := map[string]*podInfo{}
	running := map[string]*podInfo{} // key -> pod
	holder := map[int]string{}       // CPU -> pod key
	for _, sb := range pods.Items {
		p := &podInfo{key: sb.Metadata.Namespace + "/" + sb.Metadata.Name, uid: sb.Metadata.UID}
		if old, dup := running[p.key]; dup {
			bad("pod %s has two ready sandboxes (UIDs %s and %s)", p.key, old.uid, p.uid)
		}
		bySandbox[sb.ID], running[p.key] = p, p
		// The decision as the node got it: the kubelet passes the pod's
		// annotations to its sandbox.
		if v, ok := sb.Annotations[kube.AnnotationAllocation]; ok {
			d, err := kube.ParseDecision(v)
			if err != nil {
				bad("pod %s: its decision does not read: %v", p.key, err)
				continue
			}
			p.dec = &d
			if p.cpus, err = numa.ParseCPUSet(d.CPUSet); err != nil {
				bad("pod %s: its decision's cpuset %q: %v", p.key, d.CPUSet, err)
			}
		}
		for cpu := range p.cpus.All() {
			if other, ok := holder[cpu]; ok {
				bad("CPU %d is in the decisions of pods %s and %s", cpu, other, p.key)
			}
			holder[cpu] = p.key
		}
	}
	machine := numa.NewCPUSet(0, 1) // fakeSysfs: the host's CPUs 0 and 1, NUMA nodes 0 and 1
	var exclusive numa.CPUSet
	for cpu := range holder {
		exclusive.Add(cpu)
	}
	pool := machine.Difference(exclusive)

	// Every running container.
	byUUID := map[string]fakeGPU{}
	minorOf := map[string]int{}
	for _, g := range fakeGPUs {
		byUUID[g.uuid] = g
		minorOf[g.uuid] = g.minor
	}
	gpuHolder := map[string]string{} // GPU UUID -> pod key
	heldGPUs := map[int]int{}        // NUMA node -> GPUs held
	count := func(uuid string) {
		if g, ok := byUUID[uuid]; ok {
			heldGPUs[g.node]++
		}
	}
	var lines []string
	for _, ctr := range ctrs.Containers {
		p, ok := bySandbox[ctr.PodSandboxID]
		if !ok {
			bad("container %s (%s) runs in sandbox %s, which is not ready", ctr.Metadata.Name, ctr.ID, ctr.PodSandboxID)
			continue
		}
		where := fmt.Sprintf("pod %s, container %s", p.key, ctr.Metadata.Name)
		status, err := e.crictl("exec", ctr.ID, "cat", "/proc/self/status")
		if err != nil {
			bad("%s: crictl exec: %v: %s", where, err, status)
			continue
		}
		var cpus string
		for line := range strings.Lines(status) {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				cpus = strings.TrimSpace(v)
			}
		}
		want := pool.String()
		if !p.cpus.IsEmpty() {
			want = p.cpus.String()
		}
		if cpus != want {
			bad("%s: Cpus_allowed_list %q, want %q (its decision's cpuset, else the shared pool %q)", where, cpus, want, pool.String())
		}
		env, err := e.crictl("exec", ctr.ID, "env")
		if err != nil {
			bad("%s: crictl exec env: %v", where, err)
			continue
		}
		visible := ""
		for line := range strings.Lines(env) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "NVIDIA_VISIBLE_DEVICES="); ok {
				visible = v
			}
		}
		var uuids []string
		if visible != "" && visible != "void" {
			uuids = strings.Split(visible, ",")
		}
		if p.dec != nil {
			var want []string
			for _, g := range p.dec.GPUs {
				want = append(want, g.UUID)
			}
			wantEnv := strings.Join(want, ",")
			if wantEnv == "" {
				wantEnv = "void"
			}
			if visible != wantEnv && (wantEnv != "void" || visible != "") {
				bad("%s: NVIDIA_VISIBLE_DEVICES=%q, want its decision's %q", where, visible, wantEnv)
			}
		}
		var wantNodes []string
		for _, u := range uuids {
			if other, ok := gpuHolder[u]; ok && other != p.key {
				bad("GPU %s is in the containers of pods %s and %s", u, other, p.key)
			}
			if _, ok := gpuHolder[u]; !ok {
				count(u)
			}
			gpuHolder[u] = p.key
			if m, ok := minorOf[u]; ok {
				wantNodes = append(wantNodes, "nvidia"+strconv.Itoa(m))
			} else {
				bad("%s: NVIDIA_VISIBLE_DEVICES names %q, not a GPU of the node", where, u)
			}
		}
		ls, err := e.crictl("exec", ctr.ID, "ls", "/dev")
		if err != nil {
			bad("%s: crictl exec ls /dev: %v", where, err)
			continue
		}
		var nodes []string
		for _, n := range strings.Fields(ls) {
			if rest, ok := strings.CutPrefix(n, "nvidia"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
				nodes = append(nodes, n)
			}
		}
		slices.Sort(nodes)
		slices.Sort(wantNodes)
		if !slices.Equal(nodes, wantNodes) {
			bad("%s: GPU device nodes %v, want %v (those of NVIDIA_VISIBLE_DEVICES=%s)", where, nodes, wantNodes, visible)
		}
		lines = append(lines, fmt.Sprintf("%s: cpus %s, GPUs %q, %v", where, cpus, visible, nodes))
	}
	// Decision GPUs of pods without a running container are held too.
	for _, p := range running {
		if p.dec == nil {
			continue
		}
		for _, g := range p.dec.GPUs {
			if other, ok := gpuHolder[g.UUID]; ok && other != p.key {
				bad("GPU %s of pod %s's decision is in a container of pod %s", g.UUID, p.key, other)
			}
			if _, ok := gpuHolder[g.UUID]; !ok {
				count(g.UUID)
				gpuHolder[g.UUID] = p.key
			}
		}
	}

	// The agent's checkpoint: exactly the running pods, with their
	// decisions.
	cp := c.checkpointPods(t)
	for key, p := range running {
		got, ok := cp[key]
		switch {
		case !ok:
			bad("pod %s (UID %s) runs but is not in the agent's checkpoint", key, p.uid)
		case got.UID != "" && got.UID != p.uid:
			bad("pod %s runs with UID %s, the checkpoint has UID %s", key, p.uid, got.UID)
		case p.dec != nil:
			var ids []int
			for _, g := range p.dec.GPUs {
				ids = append(ids, g.ID)
			}
			var gotCPUs numa.CPUSet
			var gotGPUs []int
			if got.Allocation != nil {
				gotCPUs, gotGPUs = got.Allocation.CPUs, slices.Sorted(slices.Values(got.Allocation.GPUs))
			}
			if !gotCPUs.Equal(p.cpus) || !slices.Equal(gotGPUs, ids) {
				bad("pod %s: the checkpoint holds CPUs %q and GPUs %v, its decision %q and %v", key, gotCPUs.String(), gotGPUs, p.cpus.String(), ids)
			}
		}
	}
	for key, got := range cp {
		if _, ok := running[key]; !ok {
			bad("the agent's checkpoint holds pod %s (UID %s, %s), which does not run", key, got.UID, got.Source)
		}
	}

	// The NodeResourceTopology.
	var nrt []string
	for node := range 2 {
		zone := "node-" + strconv.Itoa(node)
		wantCPU := 1
		if exclusive.Contains(node) {
			wantCPU = 0
		}
		gotCPU, gotGPU := nrtAvailable(c.dyn, zone, "cpu"), nrtAvailable(c.dyn, zone, "aliyun.com/gpu")
		if gotCPU != strconv.Itoa(wantCPU) || gotGPU != strconv.Itoa(2-heldGPUs[node]) {
			bad("NodeResourceTopology %s: available cpu=%s aliyun.com/gpu=%s, want %d and %d", zone, gotCPU, gotGPU, wantCPU, 2-heldGPUs[node])
		}
		nrt = append(nrt, fmt.Sprintf("%s cpu=%s gpu=%s", zone, gotCPU, gotGPU))
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range running {
			if !yield(k) {
				return
			}
		}
	})
	summary = fmt.Sprintf("%d ready pods %v, shared pool %q; %s; checkpoint %d pods; NRT %s",
		len(running), keys, pool.String(), strings.Join(lines, "; "), len(cp), strings.Join(nrt, ", "))
	return violations, summary
}

// checkpointPod is a pod of the agent's checkpoint file, as
// adapters/kubelet writes it.
type checkpointPod struct {
	Pod        string `json:"pod"`
	UID        string `json:"uid"`
	Source     string `json:"source"`
	Allocation *struct {
		CPUs numa.CPUSet `json:"cpus"`
		GPUs []int       `json:"gpus"`
	} `json:"allocation"`
}

// checkpointPods returns the pods of the agent's checkpoint file by key.
func (c *kubeletCluster) checkpointPods(t *testing.T) map[string]checkpointPod {
	t.Helper()
	path := ""
	for i, a := range c.agentArgs {
		if a == "--checkpoint" && i+1 < len(c.agentArgs) {
			path = c.agentArgs[i+1]
		}
	}
	require.NotEmpty(t, path, "the agent's --checkpoint")
	raw, err := os.ReadFile(path)
	require.NoError(t, err, "the agent's checkpoint")
	var doc struct {
		Data struct {
			Pods []checkpointPod `json:"pods"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc), "the agent's checkpoint: %s", raw)
	out := map[string]checkpointPod{}
	for _, p := range doc.Data.Pods {
		out[p.Pod] = p
	}
	return out
}
