// Command kubelet shows numaplace's node agent (adapters/kubelet) on a DGX
// A100: it admits a pod by the scheduler's decision annotation and one that
// the node places by its own policy, refuses a stale decision with the
// kubelet's TopologyAffinityError naming the conflict, writes the
// checkpoint, "restarts" (a new node agent from the same checkpoint file),
// restores the pods exactly, writes their cgroup v2 cpusets and GPU
// environment, and shows that a corrupted checkpoint stops the start
// instead of being dropped.
//
//	go run ./examples/kubelet
//
// Everything is written under a temporary directory, removed at the end.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

func main() {
	dir, err := os.MkdirTemp("", "numaplace-kubelet-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	if err := run(os.Stdout, dir); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// pod returns a pod with the NUMA spec asking for cpus CPUs and gpus GPUs
// under the given policy, as a user writes it.
func pod(name string, cpus, gpus string, pol policy.Policy) *kube.Pod {
	res := map[string]string{kube.ResourceCPU: cpus, kube.ResourceAliyunGPU: gpus}
	lim := map[string]string{kube.ResourceCPU: cpus, kube.ResourceAliyunGPU: gpus}
	return &kube.Pod{Namespace: "ml", Name: name, UID: "uid-" + name,
		Annotations: map[string]string{
			kube.AnnotationSpecAlibaba:     fmt.Sprintf(`{"numaTopologyPolicy":%q}`, pol),
			kube.AnnotationCPUSetScheduler: "required"},
		Containers: []kube.Container{{Name: "main", Requests: res, Limits: lim}}}
}

// run plays the scenario, writing under dir and printing to w (paths are
// printed relative to dir, so the output is the same on every run).
func run(w io.Writer, dir string) error {
	rel := func(p string) string { return "$TMP/" + strings.TrimPrefix(strings.TrimPrefix(p, dir), "/") }
	m, err := topology.Preset("dgx-a100")
	if err != nil {
		return err
	}
	checkpoint := filepath.Join(dir, "numaplace", "checkpoint.json")
	if err := os.MkdirAll(filepath.Dir(checkpoint), 0o755); err != nil {
		return err
	}

	fmt.Fprintf(w, "== start: %s, %d CPUs, %d GPUs, %d NUMA nodes\n", m.Name(), m.NumCPUs(), m.NumGPUs(), m.NumNodes())
	node, err := kubelet.Open(m, checkpoint, kubelet.NodeOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "no checkpoint at %s: starting empty (and writing one)\n", rel(checkpoint))

	// The scheduler side decides the training pod and writes its decision
	// annotation, as adapters/scheduler does at PreBind.
	fmt.Fprintln(w, "\n== admit by the scheduler's decision")
	train := pod("train", "16", "2", policy.SingleNUMANode)
	sched, err := allocator.New(m, allocator.Options{})
	if err != nil {
		return err
	}
	req, err := kube.ParsePod(train, kube.Config{})
	if err != nil {
		return err
	}
	r := req.Request(train.Key())
	decided, err := sched.Allocate(&r)
	if err != nil {
		return err
	}
	decision := kube.NewDecision(m, &decided).String()
	train.Annotations[kube.AnnotationAllocation] = decision
	fmt.Fprintf(w, "%s: %s\n", kube.AnnotationAllocation, decision)
	adm, err := node.Admit(train)
	if err != nil {
		return err
	}
	printAdmission(w, adm)

	fmt.Fprintln(w, "\n== admit without a decision: the node places the pod by its policy")
	infer := pod("infer", "8", "1", policy.BestEffort)
	adm, err = node.Admit(infer)
	if err != nil {
		return err
	}
	printAdmission(w, adm)

	fmt.Fprintln(w, "\n== admit a pod without a NUMA spec: the shared pool")
	web := &kube.Pod{Namespace: "ml", Name: "web", UID: "uid-web", Containers: []kube.Container{{Name: "main",
		Requests: map[string]string{kube.ResourceCPU: "500m"}, Limits: map[string]string{kube.ResourceCPU: "1"}}}}
	adm, err = node.Admit(web)
	if err != nil {
		return err
	}
	printAdmission(w, adm)

	fmt.Fprintln(w, "\n== a stale decision naming CPUs and GPUs another pod holds")
	stale := pod("stale", "16", "2", policy.SingleNUMANode)
	stale.Annotations[kube.AnnotationAllocation] = decision
	_, err = node.Admit(stale)
	var tae *kubelet.TopologyAffinityError
	if !errors.As(err, &tae) {
		return fmt.Errorf("the stale decision was not refused: %v", err)
	}
	fmt.Fprintln(w, "refused:", err)
	for _, c := range tae.Conflicts {
		fmt.Fprintf(w, "  conflict: %s\n", c)
	}

	fmt.Fprintln(w, "\n== a GPU fails")
	affected, err := node.SetDeviceHealth("gpu", "7", false)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "GPU 7 unhealthy; pods holding it: %v\n", affected)

	data, err := os.ReadFile(checkpoint)
	if err != nil {
		return err
	}
	var head struct {
		Version  int    `json:"version"`
		Checksum string `json:"checksum"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n== checkpoint %s: format version %d, checksum %s..., %d bytes; every change was written before it returned\n",
		rel(checkpoint), head.Version, head.Checksum[:15], len(data))

	fmt.Fprintln(w, "\n== restart: a new node agent from the same checkpoint")
	restarted, err := kubelet.Open(m, checkpoint, kubelet.NodeOptions{})
	if err != nil {
		return err
	}
	for _, a := range restarted.Admissions() {
		fmt.Fprintf(w, "restored %s (%s): cpus %s mems %s gpus %s\n", a.Pod, a.Source, a.CPUs, a.Mems(), gpuList(a))
	}
	fmt.Fprintf(w, "unhealthy: %v\n", restarted.Unhealthy())
	fmt.Fprintf(w, "same as before the restart: %t\n", same(node.Admissions(), restarted.Admissions()))

	fmt.Fprintln(w, "\n== apply: cgroup v2 files and the GPU environment")
	root := filepath.Join(dir, "cgroup")
	for _, a := range restarted.Admissions() {
		cg := filepath.Join("kubepods.slice", "pod-"+strings.ReplaceAll(a.Pod, "/", "-"), "main")
		if err := fakeCgroup(filepath.Join(root, cg)); err != nil {
			return err
		}
		env, err := kubelet.Apply(root, cg, &a)
		if err != nil {
			return err
		}
		cpus, _ := os.ReadFile(filepath.Join(root, cg, "cpuset.cpus"))
		mems, _ := os.ReadFile(filepath.Join(root, cg, "cpuset.mems"))
		fmt.Fprintf(w, "%s: cpuset.cpus=%s cpuset.mems=%s env %s\n", a.Pod,
			strings.TrimSpace(string(cpus)), strings.TrimSpace(string(mems)), strings.Join(env, " "))
	}

	fmt.Fprintln(w, "\n== remove the inference pod; a repeated remove is harmless")
	if err := restarted.Remove(infer); err != nil {
		return err
	}
	fmt.Fprintf(w, "removed %s; shared pool now %d CPUs\n", infer.Key(), restarted.SharedPool().Size())
	fmt.Fprintf(w, "again: %v\n", restarted.Remove(infer))

	fmt.Fprintln(w, "\n== a corrupted checkpoint stops the start")
	bad := filepath.Join(dir, "corrupt.json")
	data, err = os.ReadFile(checkpoint)
	if err != nil {
		return err
	}
	corrupted := strings.Replace(string(data), `"ml/train"`, `"ml/trainx"`, 1)
	if err := os.WriteFile(bad, []byte(corrupted), 0o600); err != nil {
		return err
	}
	_, err = kubelet.Open(m, bad, kubelet.NodeOptions{})
	if !errors.Is(err, kubelet.ErrCheckpoint) {
		return fmt.Errorf("the corrupted checkpoint was not refused: %v", err)
	}
	fmt.Fprintln(w, "refused:", strings.ReplaceAll(err.Error(), dir+"/", "$TMP/"))
	after, err := os.ReadFile(bad)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "the file is left as it was: %t\n", string(after) == corrupted)
	return nil
}

func printAdmission(w io.Writer, a kubelet.Admission) {
	cpus := a.CPUs.String()
	if a.Source == kubelet.SharedPool {
		cpus = fmt.Sprintf("%s (%d CPUs)", cpus, a.CPUs.Size())
	}
	fmt.Fprintf(w, "admitted %s (%s, %s): cpuset %s, NUMA nodes %s, GPUs %s\n",
		a.Pod, a.Source, a.Policy, cpus, a.Mems(), gpuList(a))
}

func gpuList(a kubelet.Admission) string {
	if len(a.GPUs) == 0 {
		return "none"
	}
	ids := make([]string, len(a.GPUs))
	for i, g := range a.GPUs {
		ids[i] = fmt.Sprint(g.ID)
	}
	return strings.Join(ids, ",")
}

// same compares two lists of admissions by what they give each pod.
func same(a, b []kubelet.Admission) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Pod != b[i].Pod || a[i].Source != b[i].Source || !a[i].CPUs.Equal(b[i].CPUs) ||
			a[i].Mems() != b[i].Mems() || gpuList(a[i]) != gpuList(b[i]) {
			return false
		}
	}
	return true
}

// fakeCgroup makes dir look like a cgroup v2 directory with the cpuset
// controller enabled, as the container runtime would have created it.
func fakeCgroup(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}
