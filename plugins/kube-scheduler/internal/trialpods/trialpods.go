package trialpods

import (
	"fmt"
	"math/rand/v2"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numaplace/numaplace/adapters/kube"
)

// SchedulerName is the scheduler the pods name: numaplace-scheduler's
// profile.
const SchedulerName = "numaplace-scheduler"

// Pod is a pod for numaplace-scheduler in the namespace: one container
// "main" asking for cpus CPUs (request = limit), 1 GiB and gpus
// aliyun.com/gpu (none when 0). A policy other than "" (SingleNUMANode,
// Restricted, BestEffort, None) is the ACK NUMA spec annotation with the
// cpuset-scheduler annotation "required"; "" means no NUMA spec. The pod
// has no UID: the API server gives it one.
func Pod(namespace, name, policy string, cpus, gpus int) *v1.Pod {
	res := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		v1.ResourceMemory: resource.MustParse("1Gi"),
	}
	if gpus > 0 {
		res[kube.ResourceAliyunGPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	ann := map[string]string{}
	if policy != "" {
		ann[kube.AnnotationSpecAlibaba] = fmt.Sprintf(`{"numaTopologyPolicy":%q}`, policy)
		ann[kube.AnnotationCPUSetScheduler] = "required"
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: ann},
		Spec: v1.PodSpec{SchedulerName: SchedulerName,
			Containers: []v1.Container{{Name: "main", Image: "registry.example/app:1",
				Resources: v1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()}}}},
	}
}

// Mix draws the next pod of the trials' mix from rng: a sixth each of
// SingleNUMANode (4-15 CPUs, 0 or 1 GPU), Restricted (8 CPUs, 0 or 2
// GPUs), BestEffort (4 CPUs, 1 GPU), None (2-7 CPUs, 0 or 1 GPU), GPU pods
// without a spec (1-4 CPUs, 0 or 1 GPU) and plain pods (1-4 CPUs). The
// same rng gives the same pods.
func Mix(rng *rand.Rand) (policy string, cpus, gpus int) {
	switch rng.IntN(6) {
	case 0:
		return "SingleNUMANode", 4 + rng.IntN(12), rng.IntN(2)
	case 1:
		return "Restricted", 8, 2 * rng.IntN(2)
	case 2:
		return "BestEffort", 4, 1
	case 3:
		return "None", 2 + rng.IntN(6), rng.IntN(2)
	case 4:
		return "", 1 + rng.IntN(4), rng.IntN(2)
	}
	return "", 1 + rng.IntN(4), 0
}
