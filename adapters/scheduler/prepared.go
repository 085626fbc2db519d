package scheduler

import (
	"fmt"
	"maps"

	"github.com/numaplace/numaplace/adapters/kube"
)

// PreparedPod is a pod parsed and validated once, for the many Filter and
// Score calls of one scheduling cycle (a framework plugin keeps it in its
// CycleState). It is read-only and safe for concurrent use; it does not
// follow later changes of the pod.
type PreparedPod struct {
	c    *Cache
	pr   *podReq
	prio int32 // the pod's priority (preemption)
}

// Prepare parses and validates the pod as Filter does (its *kube.PodError
// when invalid).
func (c *Cache) Prepare(p *kube.Pod) (*PreparedPod, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: no pod (nil)", kube.ErrInvalidPod)
	}
	pr, err := c.parse(p)
	if err != nil {
		return nil, err
	}
	c.classify(pr)
	return &PreparedPod{c: c, pr: pr, prio: p.Priority}, nil
}

// PrepareWithDevices is [Cache.Prepare] with devices of other classes
// asked for too, by class (such as {"rdma": 1}: the NICs a pod's DRA
// claims ask for), which the pod's containers cannot name: a pod that gets
// an allocation (a NUMA spec, or GPUs) gets them in the same joint
// decision, and its decision names them (devices). For a pod without an
// allocation they are ignored. Reserve the pod with [PreparedPod.Reserve]
// so that the reservation is made with them.
func (c *Cache) PrepareWithDevices(p *kube.Pod, devices map[string]int) (*PreparedPod, error) {
	pp, err := c.Prepare(p)
	if err != nil || len(devices) == 0 || !pp.pr.needsAlloc {
		return pp, err
	}
	pr := *pp.pr
	for class, n := range devices {
		if n < 0 {
			return nil, &kube.PodError{Pod: p.Key(), Field: "devices", Reason: fmt.Sprintf("%d %s devices", n, class)}
		}
	}
	pr.areq.Devices, pr.areqNoMem.Devices = maps.Clone(devices), maps.Clone(devices)
	pr.sh, pr.shNoMem = shapeOf(&pr.areq), shapeOf(&pr.areqNoMem)
	c.classify(&pr)
	return &PreparedPod{c: c, pr: &pr, prio: pp.prio}, nil
}

// Request returns what the pod asks for.
func (pp *PreparedPod) Request() kube.PodRequest { return pp.pr.PodRequest }

// Filter is [Cache.Filter] of the prepared pod.
func (pp *PreparedPod) Filter(node string) error {
	ni, err := pp.c.node(node)
	if err != nil {
		return err
	}
	var v verdict
	if pp.c.evaluateGrouped(ni, pp.pr, nil, true, &v); v.why != fits {
		return pp.c.refusalError(ni.name, pp.pr, v)
	}
	return nil
}

// Score is [Cache.Score] of the prepared pod.
func (pp *PreparedPod) Score(node string) (int, error) {
	ni, err := pp.c.node(node)
	if err != nil {
		return 0, err
	}
	var v verdict
	if pp.c.evaluateGrouped(ni, pp.pr, nil, true, &v); v.why != fits {
		return 0, pp.c.refusalError(ni.name, pp.pr, v)
	}
	return int(v.score), nil
}
