package numaplace

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"
)

// Node annotations the plugin reads a node's machine from, in this order
// of precedence (the first present wins; a present but unusable one is an
// error, not a reason to try the next).
const (
	// AnnotationTopology holds the machine in numaplace's topology
	// interchange JSON (what `numaplan topology --json` prints, or
	// topology.Machine's MarshalJSON). It describes the node exactly:
	// CPUs, SMT cores, reserved CPUs, GPUs with their NUMA node and PCIe
	// switch, NVLinks, distances, NUMA sets.
	AnnotationTopology = "numaplace.io/topology"
	// AnnotationNRT holds a NodeResourceTopology report as JSON (the
	// v1alpha2 object, as kube.NRTFromState and the node side's
	// kubelet.Node.Report write it); the machine is kube.MachineFromNRT's:
	// exact when the report carries numaplace's numaplace.io/topology
	// attribute, counted from the zones otherwise.
	AnnotationNRT = "numaplace.io/node-resource-topology"
	// AnnotationKoordCPUTopology is Koordinator's CPU topology
	// (kube.AnnotationKoordCPUTopology). It has no GPUs, memory or
	// distances: the node's GPUs are its allocatable aliyun.com/gpu (else
	// nvidia.com/gpu), of unknown NUMA node, so only pods without a NUMA
	// spec (or with policy None) receive them there.
	AnnotationKoordCPUTopology = kube.AnnotationKoordCPUTopology
)

// maxNodeGPUs bounds the GPUs read from a node's allocatable.
const maxNodeGPUs = 1 << 12

// topologyKeys are the node annotations a machine is read from, in order.
var topologyKeys = []string{AnnotationTopology, AnnotationNRT, AnnotationKoordCPUTopology}

// ErrNoTopology: the node has none of the topology annotations.
var ErrNoTopology = errors.New("node has no numaplace topology annotation")

// topologySource returns the key and value of the node's topology
// annotation, if any.
func topologySource(n *v1.Node) (key, value string, ok bool) {
	for _, k := range topologyKeys {
		if v, found := n.Annotations[k]; found {
			return k, v, true
		}
	}
	return "", "", false
}

// MachineFromNode returns the machine a node's annotations describe (see
// [AnnotationTopology], [AnnotationNRT] and [AnnotationKoordCPUTopology]
// for the keys and their precedence) and the key it was read from. A node
// without any of them gives an error wrapping [ErrNoTopology]; an unusable
// annotation, an error naming the node and the key.
func MachineFromNode(n *v1.Node) (*topology.Machine, string, error) {
	if n == nil {
		return nil, "", errors.New("no node (nil)")
	}
	key, value, ok := topologySource(n)
	if !ok {
		return nil, "", fmt.Errorf("node %s: %w (want one of %s)", n.Name, ErrNoTopology, strings.Join(topologyKeys, ", "))
	}
	m, err := machineFrom(n, key, value)
	if err != nil {
		return nil, key, fmt.Errorf("node %s: annotation %s: %w", n.Name, key, err)
	}
	return m, key, nil
}

func machineFrom(n *v1.Node, key, value string) (*topology.Machine, error) {
	switch key {
	case AnnotationTopology:
		return topology.ParseJSON([]byte(value))
	case AnnotationNRT:
		r, err := kube.ParseNRT([]byte(value))
		if err != nil {
			return nil, err
		}
		if r.Metadata.Name == "" {
			r.Metadata.Name = n.Name
		}
		return kube.MachineFromNRT(r)
	default: // AnnotationKoordCPUTopology
		var gpus []topology.GPU
		count, ok := n.Status.Allocatable[kube.ResourceAliyunGPU]
		if !ok {
			count = n.Status.Allocatable[kube.ResourceNvidiaGPU]
		}
		if c := count.Value(); c > maxNodeGPUs {
			return nil, fmt.Errorf("%d GPUs in the node's allocatable, more than %d", c, maxNodeGPUs)
		}
		for i := range int(count.Value()) {
			gpus = append(gpus, topology.GPU{ID: i, NUMANode: topology.UnknownNode})
		}
		return kube.MachineFromKoordinatorCPUTopology(value, gpus)
	}
}

// PodFromV1 converts a Kubernetes pod to the adapters' kube.Pod: its
// identity, labels, annotations (shared, not copied), priority and node,
// and every container's requests and limits as quantity strings
// (Quantity.String). Init containers with restartPolicy Always are
// sidecars (kube.InitContainer.RestartPolicyAlways). Pod-level resources
// (spec.resources) and the pod overhead are not read.
func PodFromV1(p *v1.Pod) *kube.Pod {
	if p == nil {
		return nil
	}
	kp := &kube.Pod{
		Namespace:   p.Namespace,
		Name:        p.Name,
		UID:         string(p.UID),
		Annotations: p.Annotations,
		Labels:      p.Labels,
		NodeName:    p.Spec.NodeName,
	}
	if p.Spec.Priority != nil {
		kp.Priority = *p.Spec.Priority
	}
	if len(p.Spec.InitContainers) > 0 {
		kp.InitContainers = make([]kube.InitContainer, len(p.Spec.InitContainers))
		for i := range p.Spec.InitContainers {
			c := &p.Spec.InitContainers[i]
			kp.InitContainers[i] = kube.InitContainer{
				Container:           container(c),
				RestartPolicyAlways: c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways,
			}
		}
	}
	kp.Containers = make([]kube.Container, len(p.Spec.Containers))
	for i := range p.Spec.Containers {
		kp.Containers[i] = container(&p.Spec.Containers[i])
	}
	return kp
}

func container(c *v1.Container) kube.Container {
	return kube.Container{Name: c.Name, Requests: quantities(c.Resources.Requests), Limits: quantities(c.Resources.Limits)}
}

func quantities(l v1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for name, q := range l {
		out[string(name)] = q.String()
	}
	return out
}

// podKey returns the pod's "namespace/name", the adapters' identity.
func podKey(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// terminal reports whether the pod has finished: it holds nothing any
// more.
func terminal(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
}
