package nri

import (
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/containerd/nri/pkg/api"
	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/numa"
)

// ErrNoDecision is returned (wrapped) for a pod with a NUMA topology spec
// but no numaplace.io/allocation decision. Such a pod was not placed by
// numaplace's scheduler, and NRI does not pass a pod's container requests
// (its CPU and GPU counts), so the node cannot place it by its policy
// either; the handlers make one exception: a pod whose ResourceClaims
// (prepared by the DRA role) hold GPUs and whose spec the pod lookup
// finds is placed by the node aligned with those GPUs (see
// [Plugin.RunPodSandbox]).
var ErrNoDecision = errors.New("a pod with a NUMA topology spec has no " + kube.AnnotationAllocation + " decision")

// RefusedError is returned by the handlers for a pod the node refuses. Its
// message names the pod and the reason, such as the CPUs of the decision
// that another pod holds. It unwraps to the node's error: a
// *kubelet.TopologyAffinityError (and kubelet.ErrTopologyAffinity) for a
// conflict, or an error wrapping [ErrNoDecision], kube.ErrInvalidPod,
// kube.ErrInvalidDecision or kubelet.ErrAdmittedDifferently; for a refused
// in-place resize (reason [ReasonResizeRefused]), an error wrapping
// kubelet.ErrResizeRefused.
type RefusedError struct {
	// Pod is the pod's key, namespace/name.
	Pod string
	// Reason is the event reason: [ReasonTopologyAffinityError],
	// [ReasonInvalidPlacement] or [ReasonResizeRefused].
	Reason string
	// Err is the node's error.
	Err error
}

// Error implements error.
func (e *RefusedError) Error() string {
	return fmt.Sprintf("numaplace refused pod %s (%s): %v", e.Pod, e.Reason, e.Err)
}

// Unwrap returns the node's error.
func (e *RefusedError) Unwrap() error { return e.Err }

// refusal classifies an admission error.
func refusal(key string, err error) *RefusedError {
	reason := ReasonInvalidPlacement
	if errors.Is(err, kubelet.ErrTopologyAffinity) {
		reason = ReasonTopologyAffinityError
	}
	return &RefusedError{Pod: key, Reason: reason, Err: err}
}

// sandboxKey returns the pod's key, namespace/name.
func sandboxKey(sb *api.PodSandbox) string { return sb.GetNamespace() + "/" + sb.GetName() }

// decisionContainer names the container PodFromSandbox adds to a pod with
// a NUMA spec and a decision.
const decisionContainer = "numaplace-decision"

// PodFromSandbox returns the pod that an NRI pod sandbox stands for, as
// kubelet.Node.Admit reads it: namespace, name, UID, labels and the
// annotations (which carry the NUMA spec and the decision).
//
// NRI does not pass the pod's container requests. For a pod with a NUMA
// spec and a decision, the pod gets one container asking for the CPUs,
// GPUs and memory the decision names (so the spec's rules are still
// checked and the decision's amounts are taken as the request). A pod with a NUMA spec and
// no decision is refused with an error wrapping [ErrNoDecision]; a
// malformed decision with one wrapping kube.ErrInvalidDecision; a nil or
// nameless sandbox with a plain error.
func PodFromSandbox(sb *api.PodSandbox) (*kube.Pod, error) {
	if sb == nil {
		return nil, errors.New("nri: no pod sandbox (nil)")
	}
	if sb.GetName() == "" {
		return nil, fmt.Errorf("nri: pod sandbox %q has no pod name", sb.GetId())
	}
	p := &kube.Pod{Namespace: sb.GetNamespace(), Name: sb.GetName(), UID: sb.GetUid(),
		Annotations: maps.Clone(sb.GetAnnotations()), Labels: maps.Clone(sb.GetLabels())}
	_, spec := p.Annotations[kube.AnnotationSpecAlibaba]
	if _, ok := p.Annotations[kube.AnnotationSpecKoordinator]; ok {
		spec = true
	}
	v, ok := p.Annotations[kube.AnnotationAllocation]
	switch {
	case !ok && spec:
		return nil, fmt.Errorf("pod %s: %w", p.Key(), ErrNoDecision)
	case !ok:
		return p, nil
	}
	d, err := kube.ParseDecision(v)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", p.Key(), err)
	}
	if spec {
		cpus, err := numa.ParseCPUSet(d.CPUSet) // ParseDecision has checked it
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w: cpuset: %w", p.Key(), kube.ErrInvalidDecision, err)
		}
		n := strconv.Itoa(cpus.Size())
		c := kube.Container{Name: decisionContainer,
			Requests: map[string]string{kube.ResourceCPU: n}, Limits: map[string]string{kube.ResourceCPU: n}}
		if g := len(d.GPUs); g > 0 {
			c.Requests[kube.ResourceAliyunGPU] = strconv.Itoa(g)
			c.Limits[kube.ResourceAliyunGPU] = strconv.Itoa(g)
		}
		var mem int64
		for _, mib := range d.MemoryMiB {
			mem += mib
		}
		if mem > 0 {
			q := strconv.FormatInt(mem, 10) + "Mi"
			c.Requests[kube.ResourceMemory], c.Limits[kube.ResourceMemory] = q, q
		}
		p.Containers = []kube.Container{c}
	}
	return p, nil
}
