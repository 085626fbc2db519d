package kube_test

import (
	"fmt"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

// A text-generation pod with the NUMA spec, and the same pod with a
// mistake: its CPU request is not a whole number of cores.
func ExampleParsePod() {
	res := map[string]string{"cpu": "24", "aliyun.com/gpu": "4"}
	pod := &kube.Pod{Namespace: "default", Name: "tg",
		Annotations: map[string]string{
			"scheduling.alibabacloud.com/numa-topology-spec": `{"numaTopologyPolicy":"SingleNUMANode"}`,
			"cpuset-scheduler": "required",
		},
		Containers: []kube.Container{{Name: "server", Requests: res, Limits: res}}}
	r, err := kube.ParsePod(pod, kube.Config{})
	fmt.Println(r.NUMA, r.Spec, r.CPUs, r.GPUs, err)

	half := map[string]string{"cpu": "23500m", "aliyun.com/gpu": "4"}
	pod.Containers[0].Requests, pod.Containers[0].Limits = half, half
	_, err = kube.ParsePod(pod, kube.Config{})
	fmt.Println(err)
	// Output:
	// true {"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Required"} 24 4 <nil>
	// invalid pod default/tg: container "server" cpu request: 23500m is not a whole number of cores; a pod with a NUMA topology spec gets whole CPUs
}

// The decision annotation the scheduler side writes and the node side
// turns back into the allocation to claim.
func ExampleNewDecision() {
	m, _ := topology.Preset("dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	a, _ := s.Allocate(&allocator.Request{ID: "default/tg", CPUs: 24, GPUs: 4})
	d := kube.NewDecision(m, &a)
	fmt.Println(d)

	got, _ := kube.ParseDecision(d.String())
	back, _ := got.Allocation(m, "default/tg")
	fmt.Println(back.CPUs, back.GPUs)
	// Output:
	// {"policy":"None","cpuset":"0-11,112-123","numaNodes":[0],"gpus":[{"id":0},{"id":1},{"id":2},{"id":3}],"memoryMiB":{}}
	// 0-11,112-123 [0 1 2 3]
}

// The node side publishes its NodeResourceTopology report; the scheduler
// side builds the same machine from it.
func ExampleMachineFromNRT() {
	m, _ := topology.Preset("dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	_, _ = s.Allocate(&allocator.Request{ID: "a", CPUs: 24, GPUs: 4})
	report, _ := kube.NRTFromState(m, s)
	report.Metadata.Name = "gpu-1"
	for _, z := range report.Zones {
		cpu, _ := z.Resource("cpu")
		gpu, _ := z.Resource("aliyun.com/gpu")
		cpus, _ := z.Attribute(kube.NRTAttributeCPUs)
		fmt.Printf("%s: cpu %s/%s available, GPUs %s/%s, cpus %s\n", z.Name, cpu.Available, cpu.Allocatable,
			gpu.Available, gpu.Allocatable, cpus)
	}
	got, _ := kube.MachineFromNRT(report)
	fmt.Println(got.Name(), got.NumNodes(), got.NumCPUs(), got.NumGPUs(), got.ThreadsPerCore())
	// Output:
	// node-0: cpu 88/112 available, GPUs 0/4, cpus 0-55,112-167
	// node-1: cpu 112/112 available, GPUs 4/4, cpus 56-111,168-223
	// dgx-h100 2 224 8 2
}

// The fingerprint of the pods a NodeResourceTopology report accounts for,
// as its readers compute it from the pods bound to the node.
func ExamplePodFingerprint() {
	var f kube.PodFingerprint
	f.Add("production", "nginx-rt684")
	f.Add("production", "jaeger-dpgjk")
	f.Add("production", "envoy-g9m22")
	fmt.Println(f.Sign())
	// Output: pfp0v001607b76a0e9d3aeb4
}

// The decision's GPUs split among a pod's containers by their requests,
// in the kubelet's container order.
func ExampleGPUShares() {
	pod := &kube.Pod{Namespace: "default", Name: "train", Containers: []kube.Container{
		{Name: "trainer", Limits: map[string]string{"aliyun.com/gpu": "2"}},
		{Name: "logger"},
		{Name: "eval", Limits: map[string]string{"aliyun.com/gpu": "1"}},
	}}
	shares, err := kube.GPUShares(pod, "aliyun.com/gpu", []kube.DecisionGPU{{ID: 4}, {ID: 5}, {ID: 7}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range shares {
		fmt.Println(s.Name, s.Count, s.GPUs)
	}
	// Output:
	// trainer 2 [{4 } {5 }]
	// logger 0 []
	// eval 1 [{7 }]
}
