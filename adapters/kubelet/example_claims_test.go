package kubelet_test

import (
	"fmt"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/topology"
)

// A ResourceClaim's GPUs and NIC are held for its pod; a decision naming
// one of them is refused with the claim named, and a second claim of it
// too; once released, the GPU is free.
func ExampleNode_HoldClaim() {
	m, _ := topology.Preset("dgx-a100")
	node, _ := kubelet.Open(m, "", kubelet.NodeOptions{})
	err := node.HoldClaim(kubelet.ClaimHold{UID: "3f1c", Namespace: "ml", Name: "train-gpus",
		Pods: []kubelet.ClaimConsumer{{Name: "train", UID: "uid-train"}},
		GPUs: []int{1, 0}, Devices: map[string][]string{"rdma": {"mlx5_0"}}})
	fmt.Println(err, node.ClaimsOfPod("uid-train")[0].GPUs)

	a := trainingPod("a")
	a.Annotations[kube.AnnotationAllocation] = `{"policy":"SingleNUMANode","cpuset":"48-55,176-183","numaNodes":[3],"gpus":[{"id":0},{"id":1}]}`
	_, err = node.Admit(a)
	fmt.Println(err)

	err = node.HoldClaim(kubelet.ClaimHold{UID: "77aa", Namespace: "ml", Name: "other", GPUs: []int{1}})
	fmt.Println(err)

	fmt.Println(node.ReleaseClaim("3f1c"), node.HoldClaim(kubelet.ClaimHold{UID: "77aa", Namespace: "ml", Name: "other", GPUs: []int{1}}))
	// Output:
	// <nil> [0 1]
	// Resources cannot be allocated with Topology locality: pod ml/a: GPU 0 is held by ResourceClaim ml/train-gpus; GPU 1 is held by ResourceClaim ml/train-gpus
	// Resources cannot be allocated with Topology locality: ResourceClaim ml/other: GPU 1 is held by ResourceClaim ml/train-gpus
	// <nil> <nil>
}
