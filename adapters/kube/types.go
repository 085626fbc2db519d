package kube

// Container is one container of a pod: its name and its resource requests
// and limits as Kubernetes quantity strings ("24", "500m", "4Gi") by
// resource name ("cpu", "memory", "aliyun.com/gpu", ...).
type Container struct {
	Name     string
	Requests map[string]string
	Limits   map[string]string
}

// InitContainer is an init container. RestartPolicyAlways marks a
// restartable init container (a sidecar), whose requests add to the app
// containers' sum.
type InitContainer struct {
	Container
	RestartPolicyAlways bool
}

// Pod mirrors the fields of a Kubernetes pod that placement needs.
type Pod struct {
	Namespace   string
	Name        string
	UID         string
	Annotations map[string]string
	Labels      map[string]string
	// Priority is the pod's scheduling priority (higher wins preemption).
	Priority       int32
	InitContainers []InitContainer
	Containers     []Container
	// NodeName is the node the pod is bound to ("" while pending).
	NodeName string
}

// Key returns "namespace/name", the pod's identity in the adapters (also
// the allocation ID).
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }
