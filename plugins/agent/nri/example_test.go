package nri_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/containerd/nri/pkg/api"
	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	nri "github.com/numaplace/numaplace/plugins/agent/nri"
	"github.com/numaplace/numaplace/topology"
)

// A pod placed by numaplace's scheduler on NUMA node 3 of a DGX A100 with
// GPUs 0 and 1: its container gets those CPUs, that node's memory and
// those GPUs; a second pod whose decision names the same GPUs is refused
// with the conflict named.
func ExamplePlugin_CreateContainer() {
	m, _ := topology.Preset("dgx-a100")
	node, _ := kubelet.Open(m, "", kubelet.NodeOptions{}) // no checkpoint: in memory
	p, _ := nri.New(node, nri.Options{Logger: slog.New(slog.DiscardHandler)})
	defer p.Close()

	pod := func(name, cpus string) *api.PodSandbox {
		return &api.PodSandbox{Id: "sandbox-" + name, Namespace: "ml", Name: name, Uid: "uid-" + name,
			Annotations: map[string]string{
				kube.AnnotationSpecAlibaba:     `{"numaTopologyPolicy":"SingleNUMANode"}`,
				kube.AnnotationCPUSetScheduler: "required",
				kube.AnnotationAllocation:      `{"policy":"SingleNUMANode","cpuset":"` + cpus + `","numaNodes":[3],"gpus":[{"id":0},{"id":1}]}`,
			}}
	}
	a := pod("a", "48-55,176-183")
	adj, _, err := p.CreateContainer(context.Background(), a, &api.Container{Id: "c1", PodSandboxId: a.Id, Name: "main"})
	cpu := adj.GetLinux().GetResources().GetCpu()
	fmt.Println(cpu.GetCpus(), cpu.GetMems(), adj.GetEnv()[0].GetKey(), adj.GetEnv()[0].GetValue(), err)

	b := pod("b", "56-63,184-191")
	_, _, err = p.CreateContainer(context.Background(), b, &api.Container{Id: "c2", PodSandboxId: b.Id, Name: "main"})
	fmt.Println(err)
	// Output:
	// 48-55,176-183 3 NVIDIA_VISIBLE_DEVICES 0,1 <nil>
	// numaplace refused pod ml/b (TopologyAffinityError): Resources cannot be allocated with Topology locality: pod ml/b: GPU 0 is held by pod ml/a; GPU 1 is held by pod ml/a
}
