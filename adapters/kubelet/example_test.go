package kubelet_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/topology"
)

// trainingPod asks for 16 CPUs and 2 GPUs on one NUMA node.
func trainingPod(name string) *kube.Pod {
	res := map[string]string{"cpu": "16", "aliyun.com/gpu": "2"}
	return &kube.Pod{Namespace: "ml", Name: name, UID: "uid-" + name,
		Annotations: map[string]string{
			kube.AnnotationSpecAlibaba:     `{"numaTopologyPolicy":"SingleNUMANode"}`,
			kube.AnnotationCPUSetScheduler: "required"},
		Containers: []kube.Container{{Name: "main", Requests: res, Limits: res}}}
}

// A pod with the scheduler's decision gets exactly what the decision
// names; a second pod whose decision names the same CPUs and GPUs is
// refused with the kubelet's TopologyAffinityError naming the conflict.
func ExampleNode_Admit() {
	m, _ := topology.Preset("dgx-a100")
	node, _ := kubelet.Open(m, "", kubelet.NodeOptions{}) // no checkpoint: in memory

	decision := `{"policy":"SingleNUMANode","cpuset":"48-55,176-183","numaNodes":[3],"gpus":[{"id":0},{"id":1}]}`
	a := trainingPod("a")
	a.Annotations[kube.AnnotationAllocation] = decision
	adm, err := node.Admit(a)
	fmt.Println(adm.Source, adm.CPUs, adm.Mems(), adm.VisibleDevices(), err)

	b := trainingPod("b")
	b.Annotations[kube.AnnotationAllocation] = decision
	_, err = node.Admit(b)
	var tae *kubelet.TopologyAffinityError
	if errors.As(err, &tae) {
		fmt.Println(err)
		fmt.Println(tae.Conflicts[0].HeldBy)
	}

	// Without a decision the node places the pod by its policy.
	adm, err = node.Admit(trainingPod("c"))
	fmt.Println(adm.Source, adm.CPUs, adm.Mems(), adm.VisibleDevices(), err)
	// Output:
	// decision 48-55,176-183 3 0,1 <nil>
	// Resources cannot be allocated with Topology locality: pod ml/b: CPUs 48-55,176-183 are held by pod ml/a; GPU 0 is held by pod ml/a; GPU 1 is held by pod ml/a
	// ml/a
	// local 16-23,144-151 1 2,3 <nil>
}

// The node agent checkpoints every change; a new agent opened on the same
// file (after a restart) has the same pods, and a corrupted file stops the
// start instead of being dropped.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "checkpoint.json")
	m, _ := topology.Preset("dgx-a100")

	node, _ := kubelet.Open(m, path, kubelet.NodeOptions{})
	_, _ = node.Admit(trainingPod("a"))
	_, _ = node.SetDeviceHealth("gpu", "7", false)

	restarted, err := kubelet.Open(m, path, kubelet.NodeOptions{})
	for _, a := range restarted.Admissions() {
		fmt.Println(a.Pod, a.Source, a.CPUs, a.Mems(), a.VisibleDevices(), err)
	}
	fmt.Println(restarted.Unhealthy())

	data, _ := os.ReadFile(path)
	_ = os.WriteFile(path, data[:len(data)/2], 0o600) // a torn write
	_, err = kubelet.Open(m, path, kubelet.NodeOptions{})
	fmt.Println(errors.Is(err, kubelet.ErrCheckpoint))
	var ce *kubelet.CheckpointError
	if errors.As(err, &ce) {
		fmt.Println(ce.Path == path, ce.Problem)
	}
	// Output:
	// ml/a local 16-23,144-151 1 2,3 <nil>
	// map[gpu:[7]]
	// true
	// true not a valid checkpoint (truncated or corrupted JSON)
}

// Apply writes the admission into the container's cgroup v2 directory and
// returns the GPU environment for the container.
func ExampleApply() {
	root, _ := os.MkdirTemp("", "cgroup-")
	defer os.RemoveAll(root)
	cgroup := "kubepods.slice/kubepods-poda.slice/cri-containerd-1.scope"
	// The container runtime has created the cgroup with the cpuset
	// controller enabled.
	_ = os.MkdirAll(filepath.Join(root, cgroup), 0o755)
	_ = os.WriteFile(filepath.Join(root, cgroup, "cpuset.cpus"), nil, 0o644)
	_ = os.WriteFile(filepath.Join(root, cgroup, "cpuset.mems"), nil, 0o644)

	m, _ := topology.Preset("dgx-a100")
	node, _ := kubelet.Open(m, "", kubelet.NodeOptions{})
	adm, _ := node.Admit(trainingPod("a"))

	env, err := kubelet.Apply(root, cgroup, &adm)
	cpus, _ := os.ReadFile(filepath.Join(root, cgroup, "cpuset.cpus"))
	mems, _ := os.ReadFile(filepath.Join(root, cgroup, "cpuset.mems"))
	fmt.Printf("cpuset.cpus: %scpuset.mems: %s%v %v\n", cpus, mems, env, err)

	_, err = kubelet.Apply(root, "../escape", &adm)
	fmt.Println(strings.ReplaceAll(err.Error(), root, "$ROOT"))
	// Output:
	// cpuset.cpus: 16-23,144-151
	// cpuset.mems: 1
	// [NVIDIA_VISIBLE_DEVICES=2,3] <nil>
	// kubelet.Apply: cgroup path "../escape" must be relative and stay under the root "$ROOT"
}

// The device plugin's preferred allocation on a DGX A100: one NUMA node
// and one PCIe switch when they suffice, the nearest nodes otherwise, and
// the lone free GPU of a pair before breaking a whole pair.
func ExamplePreferredAllocator_GetPreferredAllocation() {
	m, _ := topology.Preset("dgx-a100")
	p := kubelet.NewPreferredAllocator(m)
	all := []string{"0", "1", "2", "3", "4", "5", "6", "7"}

	two, _ := p.GetPreferredAllocation(all, nil, 2)
	four, _ := p.GetPreferredAllocation(all, nil, 4)
	fmt.Println(two, four)

	// GPU 0 is taken: one GPU goes to its pair's other GPU, 1.
	one, _ := p.GetPreferredAllocation(all[1:], nil, 1)
	fmt.Println(one)

	// The kubelet has already chosen GPU 6.
	pref, _ := p.Prefer(all, []string{"6"}, 3)
	fmt.Println(pref.Devices, pref)

	_, err := p.GetPreferredAllocation(all, nil, 9)
	fmt.Println(err)
	// Output:
	// [0 1] [0 1 2 3]
	// [1]
	// [4 5 6] GPUs [4 5 6] on NUMA nodes [5 7], 2 PCIe switches, 36 NVLink links
	// invalid preferred allocation request: size 9 is above the 8 available devices
}
