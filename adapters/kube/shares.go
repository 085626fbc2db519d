package kube

import (
	"fmt"
	"slices"

	"github.com/numaplace/numaplace/internal/quote"
)

// ContainerGPUs is one container's share of its pod's GPUs (see
// [GPUShares]).
type ContainerGPUs struct {
	// Name is the container's name.
	Name string
	// Init is set for an init container (a sidecar included); Sidecar for
	// a restartable one (restartPolicy: Always).
	Init, Sidecar bool
	// Count is the container's GPU request (its limit when it has no
	// request), 0 for a container without GPUs.
	Count int
	// GPUs are the container's GPUs, ascending ID (Count of them).
	GPUs []DecisionGPU
}

// GPUShares splits the decision's GPUs among the pod's containers, in the
// order the kubelet's device manager allocates devices to them: the init
// containers in order, then the app containers in order. Each container
// takes as many GPUs as its request of resource (such as aliyun.com/gpu;
// a limit stands for a missing request): first, as the kubelet reuses
// them, the GPUs that earlier non-restartable init containers had and no
// sidecar or app container has taken since (lowest ID first), then the
// decision's next GPUs that no container has had yet, in the order of
// gpus (ascending ID in a decision). A non-restartable init container's
// GPUs become reusable after it; those a sidecar or an app container takes
// are its own. So a pod with one GPU container gets the whole decision in
// it, and app containers asking 1 and 2 of GPUs [0 3 5] get [0] and
// [3 5].
//
// The result has one entry per container, in that order, Count and GPUs
// set (both 0 and empty for a container without GPUs). A container whose
// request is not a whole number is an error wrapping [ErrInvalidPod]; a
// decision with fewer GPUs than the containers need is an error wrapping
// [ErrInvalidDecision] naming the container left short. GPUs of the
// decision that no container takes (more than the pod asks) are in no
// share. It does not change gpus.
func GPUShares(p *Pod, resource string, gpus []DecisionGPU) ([]ContainerGPUs, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: GPUShares of a nil pod", ErrInvalidPod)
	}
	out, err := GPURequests(p, resource)
	if err != nil {
		return nil, err
	}
	var reusable []DecisionGPU // ascending ID
	next := 0                  // the next fresh GPU of gpus
	for i := range out {
		c := &out[i]
		n := c.Count
		take := min(n, len(reusable))
		fresh := n - take
		if fresh > len(gpus)-next {
			return nil, fmt.Errorf("%w: pod %s: its %d GPUs do not cover container %s's %d %s (after the containers before it)",
				ErrInvalidDecision, p.Key(), len(gpus), quote.Short(c.Name), n, resource)
		}
		c.GPUs = append(slices.Clone(reusable[:take]), gpus[next:next+fresh]...)
		if c.Init && !c.Sidecar {
			// Its GPUs stay reusable, the fresh ones with them.
			reusable = append(reusable, gpus[next:next+fresh]...)
		} else {
			reusable = reusable[take:]
		}
		next += fresh
		slices.SortFunc(c.GPUs, byID)
		slices.SortFunc(reusable, byID)
	}
	return out, nil
}

// GPURequests returns the pod's containers in the order the kubelet's
// device manager allocates devices to them (init containers, then app
// containers), each with its request of resource as Count (its limit when
// it has no request; 0 without either) and no GPUs. A request that is not
// a whole number is an error wrapping [ErrInvalidPod].
func GPURequests(p *Pod, resource string) ([]ContainerGPUs, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: GPURequests of a nil pod", ErrInvalidPod)
	}
	out := make([]ContainerGPUs, 0, len(p.InitContainers)+len(p.Containers))
	for i := range p.InitContainers {
		c := &p.InitContainers[i]
		n, err := gpuCount(p, &c.Container, resource)
		if err != nil {
			return nil, err
		}
		out = append(out, ContainerGPUs{Name: c.Name, Init: true, Sidecar: c.RestartPolicyAlways, Count: n})
	}
	for i := range p.Containers {
		n, err := gpuCount(p, &p.Containers[i], resource)
		if err != nil {
			return nil, err
		}
		out = append(out, ContainerGPUs{Name: p.Containers[i].Name, Count: n})
	}
	return out, nil
}

// ShareOf returns the share of the container named name, and whether the
// pod has such a container.
func ShareOf(shares []ContainerGPUs, name string) (ContainerGPUs, bool) {
	for _, s := range shares {
		if s.Name == name {
			return s, true
		}
	}
	return ContainerGPUs{}, false
}

func byID(a, b DecisionGPU) int { return a.ID - b.ID }

// gpuCount returns the container's request of resource (its limit when it
// has no request) as a whole number.
func gpuCount(p *Pod, c *Container, resource string) (int, error) {
	v, ok := c.Requests[resource]
	if !ok {
		v, ok = c.Limits[resource]
	}
	if !ok {
		return 0, nil
	}
	n, err := ParseWhole(v)
	if err != nil || n < 0 || n > 1<<20 {
		return 0, &PodError{Pod: p.Key(), Field: fmt.Sprintf("container %s %s", quote.Short(c.Name), resource),
			Reason: "GPUs are whole devices", Cause: err}
	}
	return int(n), nil
}
