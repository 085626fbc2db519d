package kube

// Container is one container of a pod: its name and its resource requests
// and limits as Kubernetes quantity strings ("24", "500m", "4Gi") by
// resource name ("cpu", "memory", "aliyun.com/gpu", ...).
type Container struct {
	// Name is the container's name, used in error messages.
	Name string
	// Requests are the container's resource requests, quantity strings by
	// resource name; a resource without a request falls back to its limit,
	// as in Kubernetes.
	Requests map[string]string
	// Limits are the container's resource limits, quantity strings by
	// resource name.
	Limits map[string]string
}

// InitContainer is an init container. RestartPolicyAlways marks a
// restartable init container (a sidecar), whose requests add to the app
// containers' sum.
type InitContainer struct {
	Container
	// RestartPolicyAlways is set for a restartable init container (a
	// sidecar, restartPolicy: Always): its requests add to the app
	// containers' sum instead of only bounding the pod's startup.
	RestartPolicyAlways bool
}

// Pod mirrors the fields of a Kubernetes pod that placement needs.
type Pod struct {
	// Namespace is the pod's namespace; with Name it makes the pod's key
	// (see [Pod.Key]).
	Namespace string
	// Name is the pod's name.
	Name string
	// UID is the pod's Kubernetes UID; "" when unknown, in which case no
	// check against a recorded UID is made.
	UID string
	// Annotations are the pod's annotations, where the NUMA topology spec
	// and the numaplace.io/allocation decision are read.
	Annotations map[string]string
	// Labels are the pod's labels.
	Labels map[string]string
	// Priority is the pod's scheduling priority (higher wins preemption).
	Priority int32
	// InitContainers are the pod's init containers, sidecars included.
	InitContainers []InitContainer
	// Containers are the pod's app containers; a pod without any is never
	// of Guaranteed QoS.
	Containers []Container
	// NodeName is the node the pod is bound to ("" while pending).
	NodeName string
	// ResourceClaims is the number of the pod's ResourceClaims
	// (spec.resourceClaims, and the claim of extended resources that DRA
	// devices serve), when known: a NUMA pod with claims may ask for no
	// CPUs and no GPUs of its own, its claims' devices being what it is
	// placed for. A node that holds claims reserved for the pod counts
	// them here before it reads the pod.
	ResourceClaims int
}

// Key returns "namespace/name", the pod's identity in the adapters (also
// the allocation ID).
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }
