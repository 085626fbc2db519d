package scheduler_test

import (
	"errors"
	"fmt"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

// textGen is the product's motivating pod: 4 GPUs and 24 CPUs on one NUMA
// node.
func textGen(name string) *kube.Pod {
	res := map[string]string{"cpu": "24", "aliyun.com/gpu": "4"}
	return &kube.Pod{Namespace: "default", Name: name,
		Annotations: map[string]string{
			kube.AnnotationSpecAlibaba:     `{"numaTopologyPolicy":"SingleNUMANode"}`,
			kube.AnnotationCPUSetScheduler: "required",
		},
		Containers: []kube.Container{{Name: "server", Requests: res, Limits: res}}}
}

// A cache of two DGX H100 nodes, one opted in to NUMA-aware scheduling:
// text-generation pods land on its NUMA nodes 0 and 1, and a third is
// refused with kube-scheduler's summary.
func ExampleCache_ScheduleOne() {
	m, _ := topology.Preset("dgx-h100")
	c, _ := scheduler.New(scheduler.Config{})
	_ = c.AddNode(scheduler.Node{Name: "gpu-1", Machine: m,
		Labels: map[string]string{"ack.node.gpu.schedule": "topology"}})
	_ = c.AddNode(scheduler.Node{Name: "gpu-2", Machine: m})

	for _, name := range []string{"tg-0", "tg-1", "tg-2"} {
		res, err := c.ScheduleOne(textGen(name))
		if err != nil {
			fmt.Println(name, err)
			continue
		}
		fmt.Println(name, "->", res.Node, res.Annotations[kube.AnnotationAllocation])
	}
	// Output:
	// tg-0 -> gpu-1 {"policy":"SingleNUMANode","exclusive":"Required","cpuset":"0-11,112-123","numaNodes":[0],"gpus":[{"id":0},{"id":1},{"id":2},{"id":3}],"memoryMiB":{"0":0}}
	// tg-1 -> gpu-1 {"policy":"SingleNUMANode","exclusive":"Required","cpuset":"56-67,168-179","numaNodes":[1],"gpus":[{"id":4},{"id":5},{"id":6},{"id":7}],"memoryMiB":{"1":0}}
	// tg-2 0/2 nodes are available: 1 fewer than 4 free GPUs now, 1 node(s) without the label ack.node.gpu.schedule=topology.
}

// The steps one by one, as a scheduler framework plugin calls them: Filter
// with its reason, Score, Reserve, PreBind for the annotations to write,
// and Unreserve when binding fails (harmless to repeat).
func ExampleCache_PreBind() {
	m, _ := topology.Preset("dgx-h100")
	c, _ := scheduler.New(scheduler.Config{KoordinatorAnnotations: true})
	_ = c.AddNode(scheduler.Node{Name: "gpu-1", Machine: m,
		Labels: map[string]string{"ack.node.gpu.schedule": "topology"}})

	pod := textGen("tg-0")
	fmt.Println("filter:", c.Filter(pod, "gpu-1"))
	score, _ := c.Score(pod, "gpu-1")
	fmt.Println("score:", score)
	fmt.Println("reserve:", c.Reserve(pod, "gpu-1"))
	ann, _ := c.PreBind(pod)
	fmt.Println(ann[kube.AnnotationAllocation])
	fmt.Println(ann[kube.AnnotationKoordResourceStatus])

	fmt.Println("unreserve:", c.Unreserve(pod))
	fmt.Println("again:", errors.Is(c.Unreserve(pod), allocator.ErrUnknownID))

	five := textGen("five")
	five.Containers[0].Limits["aliyun.com/gpu"] = "5"
	five.Containers[0].Requests = five.Containers[0].Limits
	fmt.Println(c.Filter(five, "gpu-1"))
	// Output:
	// filter: <nil>
	// score: 65
	// reserve: <nil>
	// {"policy":"SingleNUMANode","exclusive":"Required","cpuset":"0-11,112-123","numaNodes":[0],"gpus":[{"id":0},{"id":1},{"id":2},{"id":3}],"memoryMiB":{"0":0}}
	// {"cpuset":"0-11,112-123","numaNodeResources":[{"node":0,"resources":{"cpu":"24"}}]}
	// unreserve: <nil>
	// again: true
	// pod default/five does not fit on node gpu-1: no NUMA node of this machine can ever hold 5 GPUs and 24 CPUs (one node has at most 4 GPUs), even with nothing allocated
}

// A restarted scheduler rebuilds the node's state from the bound pods'
// decisions.
func ExampleCache_AddPod() {
	m, _ := topology.Preset("dgx-h100")
	labels := map[string]string{"ack.node.gpu.schedule": "topology"}
	c, _ := scheduler.New(scheduler.Config{})
	_ = c.AddNode(scheduler.Node{Name: "gpu-1", Machine: m, Labels: labels})
	pod := textGen("tg-0")
	res, _ := c.ScheduleOne(pod)
	pod.NodeName = res.Node
	for k, v := range res.Annotations {
		pod.Annotations[k] = v
	}

	restarted, _ := scheduler.New(scheduler.Config{})
	_ = restarted.AddNode(scheduler.Node{Name: "gpu-1", Machine: m, Labels: labels})
	fmt.Println(restarted.AddPod(pod))
	st, _ := restarted.Pod("default/tg-0")
	fmt.Println(st.Node, st.Bound, st.Allocation.CPUs, st.Allocation.GPUs)
	// Output:
	// <nil>
	// gpu-1 true 0-11,112-123 [0 1 2 3]
}
