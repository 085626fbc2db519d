package scheduler

import (
	"fmt"
	"maps"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
)

// Reserve places the pod on the named node: a pod with a NUMA spec (or with
// GPUs) gets its allocation from the node's allocator (a NUMA pod's memory
// per NUMA node where the node aligns memory), and every pod is
// accounted against the node's totals and shared pool. The checks are
// Filter's, made again under the node's write lock, so a reservation never
// breaks a rule whatever runs concurrently; a refusal is Filter's
// *[FilterError] and changes nothing.
//
// Reserve is idempotent: reserving a pod again on the node where it is
// already reserved (or bound) returns nil and changes nothing; on another
// node it returns an error wrapping [ErrPodPlaced].
func (c *Cache) Reserve(p *kube.Pod, node string) error {
	pr, ni, err := c.prepare(p, node)
	if err != nil {
		return err
	}
	v, err := c.reserve(ni, pr, p.Priority, nil)
	if err != nil {
		return err
	}
	if v.why != fits {
		return c.refusalError(ni.name, pr, v)
	}
	return nil
}

// Reserve is [Cache.Reserve] of the prepared pod (with the devices it was
// prepared with, see [Cache.PrepareWithDevices]) and with the node's GPUs
// that withhold names kept from it (as [WhatIf].WithholdGPU keeps them from
// [PreparedPod.Decide]): the decision is then made on a copy of the node's
// state where they are unhealthy and claimed on the node, so it is the
// decision Decide made with the same withhold. On a node running the
// kubelet's own Topology Manager withhold is not applied. A nil withhold
// withholds nothing.
func (pp *PreparedPod) Reserve(node string, withhold func(id int) bool) error {
	ni, err := pp.c.node(node)
	if err != nil {
		return err
	}
	var w *WhatIf
	if withhold != nil {
		w = &WhatIf{WithholdGPU: withhold}
	}
	v, err := pp.c.reserve(ni, pp.pr, pp.prio, w)
	if err != nil {
		return err
	}
	if v.why != fits {
		return pp.c.refusalError(ni.name, pp.pr, v)
	}
	return nil
}

// reserve is Reserve of a parsed pod: the verdict says why the node refused
// it; the error is for a pod already placed elsewhere. Of withhold only
// WithholdGPU and WithholdDevice are read.
func (c *Cache) reserve(ni *nodeInfo, pr *podReq, prio int32, withhold *WhatIf) (verdict, error) {
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if old, ok := c.pods[pr.key]; ok {
		if old.node == ni {
			return verdict{}, nil
		}
		return verdict{}, fmt.Errorf("%w: %s is on node %s", ErrPodPlaced, pr.key, old.node.name)
	}
	c.lockNode(ni)
	defer ni.mu.Unlock()
	v := c.checksLocked(ni, pr, nil)
	if v.why != fits {
		return v, nil
	}
	pi := &podInfo{key: pr.key, node: ni, req: pr.PodRequest, prio: prio}
	var err error
	if withhold != nil && ni.kpol == "" && pr.needsAlloc {
		err = c.placeWithholdingLocked(ni, pr, pi, withhold)
	} else {
		err = c.placeLocked(ni, pr, pi, false)
	}
	if err != nil {
		return verdict{why: allocRefused, err: err}, nil
	}
	ni.account(pi, 1)
	ni.pods[pr.key] = pi
	c.pods[pr.key] = pi
	return verdict{}, nil
}

// placeLocked takes what the pod gets on the node into pi (the caller holds
// ni.mu): from numaplace's allocator, or, on a node running the kubelet's
// own Topology Manager, what the kubelet's managers would take for the
// merged hint. With predicted (a bound pod without a decision) the
// kubelet's hint is used even when it would not admit the pod: the pod
// runs already.
func (c *Cache) placeLocked(ni *nodeInfo, pr *podReq, pi *podInfo, predicted bool) error {
	if ni.kpol != "" {
		kreq, needs := pr.kubeletRequest(ni)
		if !needs {
			return nil
		}
		hint, admit, err := topologymanager.Predict(ni.kpol, ni.kopts, ni.m, ni.state, kreq)
		if err != nil {
			return err
		}
		if !admit && !predicted {
			return fmt.Errorf("%w: node %s", ErrKubeletRefusal, ni.name)
		}
		a, err := topologymanager.KubeletAllocation(ni.m, ni.state, pr.key, kreq, hint)
		if err != nil {
			return err
		}
		got, err := ni.state.Claim(a)
		if err != nil {
			return err
		}
		pi.alloc, pi.cpus, pi.gpus = true, got.CPUs.Size(), len(got.GPUs)
		return nil
	}
	if !pr.needsAlloc {
		return nil
	}
	areq, _ := pr.request(ni)
	r := *areq
	r.ID = pr.key
	a, err := ni.state.Allocate(&r)
	if err != nil {
		return err
	}
	pi.alloc, pi.cpus, pi.gpus = true, a.CPUs.Size(), len(a.GPUs)
	return nil
}

// placeWithholdingLocked is placeLocked for numaplace's allocator with the
// GPUs and devices withhold names kept from the pod: decided on a copy of
// the node's state where they are unhealthy, then claimed on the node.
func (c *Cache) placeWithholdingLocked(ni *nodeInfo, pr *podReq, pi *podInfo, withhold *WhatIf) error {
	areq, _ := pr.request(ni)
	r := *areq
	r.ID = pr.key
	scratch := ni.state.Clone()
	if withhold.WithholdGPU != nil {
		withholdGPUs(scratch, ni.m, withhold.WithholdGPU)
	}
	if withhold.WithholdDevice != nil {
		withholdDevices(scratch, ni.m, withhold.WithholdDevice)
	}
	a, err := scratch.Allocate(&r)
	if err != nil {
		return err
	}
	got, err := ni.state.Claim(a)
	if err != nil {
		return err
	}
	pi.alloc, pi.cpus, pi.gpus = true, got.CPUs.Size(), len(got.GPUs)
	return nil
}

// Unreserve gives back what a reserved pod holds, as after a failed
// binding. It is harmless to repeat: a pod the cache does not know returns
// an error wrapping allocator.ErrUnknownID and changes nothing. A pod the
// cache knows as bound is not touched (the error wraps [ErrBound]; use
// RemovePod for it).
func (c *Cache) Unreserve(p *kube.Pod) error {
	if p == nil {
		return fmt.Errorf("%w: no pod (nil)", kube.ErrInvalidPod)
	}
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	pi, ok := c.pods[p.Key()]
	if !ok {
		return fmt.Errorf("%w: pod %s is not reserved", allocator.ErrUnknownID, p.Key())
	}
	if pi.bound {
		return fmt.Errorf("%w: pod %s is bound to node %s", ErrBound, pi.key, pi.node.name)
	}
	c.dropLocked(pi)
	return nil
}

// PreBind returns the annotations to write on a placed pod before binding
// it: kube.AnnotationAllocation (numaplace.io/allocation) with the decision
// (cpuset, GPUs, NUMA nodes, memory per NUMA node ID), and with Config.KoordinatorAnnotations also
// Koordinator's resource-status and device-allocated. A pod without a NUMA
// spec and without GPUs holds no allocation: the map is empty. A pod the
// cache has not placed returns an error wrapping allocator.ErrUnknownID,
// and so does one whose reservation a change of the node dropped while
// PreBind ran (see [Cache.UpdateNode]).
func (c *Cache) PreBind(p *kube.Pod) (map[string]string, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: no pod (nil)", kube.ErrInvalidPod)
	}
	c.podsMu.Lock()
	pi, ok := c.pods[p.Key()]
	c.podsMu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: pod %s is not reserved", allocator.ErrUnknownID, p.Key())
	}
	return c.annotations(pi)
}

// annotations are PreBind's for pi, read under its node's lock. pi was
// read from c.pods before that lock was taken: a change of the node
// meanwhile (a machine change that drops the reservation, the node
// removed, the pod removed) leaves pi out of the node's pods, and then the
// pod is no longer placed: an error wrapping allocator.ErrUnknownID, not
// the empty annotations of a pod that needs no allocation.
func (c *Cache) annotations(pi *podInfo) (map[string]string, error) {
	ni := pi.node
	ni.mu.RLock()
	defer ni.mu.RUnlock()
	if ni.pods[pi.key] != pi {
		return nil, fmt.Errorf("%w: pod %s is no longer placed on node %s", allocator.ErrUnknownID, pi.key, ni.name)
	}
	out := map[string]string{}
	if !pi.alloc || ni.kpol != "" { // the kubelet decides on its own node
		return out, nil
	}
	a, ok := ni.state.Get(pi.key)
	if !ok {
		return nil, fmt.Errorf("%w: pod %s is no longer placed on node %s", allocator.ErrUnknownID, pi.key, ni.name)
	}
	d := kube.NewDecision(ni.m, &a)
	raw := d.String()
	out[kube.AnnotationAllocation] = raw
	if s := pi.sent.Load(); s == nil || s.raw != raw || s.m != ni.m {
		pi.sent.Store(&sentDecision{raw: raw, m: ni.m})
	}
	if c.cfg.KoordinatorAnnotations {
		koord, err := d.KoordinatorAnnotations(ni.m)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", pi.key, err)
		}
		maps.Copy(out, koord)
	}
	return out, nil
}

// needsKubelet reports whether the pod gets anything from the kubelet's
// managers on ni, a node running the kubelet's Topology Manager (the caller
// holds ni.mu).
func needsKubelet(ni *nodeInfo, pr *podReq) bool {
	_, needs := pr.kubeletRequest(ni)
	return needs
}
