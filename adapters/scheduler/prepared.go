package scheduler

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
)

// PreparedPod is a pod parsed and validated once, for the many Filter and
// Score calls of one scheduling cycle (a framework plugin keeps it in its
// CycleState). It is read-only and safe for concurrent use; it does not
// follow later changes of the pod.
type PreparedPod struct {
	c    *Cache
	pr   *podReq
	prio int32 // the pod's priority (preemption)
	// refused are the last refusals written (see PreparedPod.refusal),
	// next the slot the next one goes to.
	refused [refusalSlots]atomic.Pointer[refusalMemo]
	next    atomic.Uint32
}

// refusalSlots is how many refusals a prepared pod remembers: the nodes
// of a cycle alternate between a few kinds of machines and states.
const refusalSlots = 4

// refusalMemo is a refusing verdict and the *FilterError written for it.
type refusalMemo struct {
	v verdict
	e *FilterError
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
	return pp.filterOn(ni)
}

// filterOn is Filter of the node's record.
func (pp *PreparedPod) filterOn(ni *nodeInfo) error {
	var v verdict
	if pp.c.evaluateGrouped(ni, pp.pr, nil, true, &v); v.why != fits {
		return pp.refusal(ni.name, &v)
	}
	return nil
}

// refusal is refusalError of the pod on the node: a copy, but for the
// node's name, of one of the last refusalSlots written when the verdict is
// the same (the nodes of a cycle refuse a pod for few reasons, and the
// error reads of the node only the verdict and its name). The copies share
// their Reasons (clipped, so that an append copies them).
func (pp *PreparedPod) refusal(node string, v *verdict) *FilterError {
	for i := range pp.refused {
		if m := pp.refused[i].Load(); m != nil && sameVerdict(&m.v, v) {
			e := *m.e
			e.Node = node
			return &e
		}
	}
	e := pp.c.refusalError(node, pp.pr, *v)
	e.Reasons = slices.Clip(e.Reasons)
	pp.refused[pp.next.Add(1)%refusalSlots].Store(&refusalMemo{v: *v, e: e})
	return e
}

// sameVerdict reports whether two verdicts are the same: equal fields, and
// no error or errors explained by the same *allocator.PlacementError (a
// class's never-fit verdicts share theirs; a Fit refusal explains itself
// once, and the state returns the same refusal for the same request until
// it changes). Other errors are never taken for the same.
func sameVerdict(a, b *verdict) bool {
	x, y := *a, *b
	x.err, y.err = nil, nil
	if x != y {
		return false
	}
	if a.err == nil || b.err == nil {
		return a.err == nil && b.err == nil
	}
	pa, pb := placementOf(a.err), placementOf(b.err)
	return pa != nil && pa == pb
}

// placementOf returns the *allocator.PlacementError that explains err, or
// nil.
func placementOf(err error) *allocator.PlacementError {
	if pe, ok := err.(*allocator.PlacementError); ok {
		return pe
	}
	var pe *allocator.PlacementError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// Score is [Cache.Score] of the prepared pod.
func (pp *PreparedPod) Score(node string) (int, error) {
	ni, err := pp.c.node(node)
	if err != nil {
		return 0, err
	}
	return pp.scoreOn(ni)
}

// scoreOn is Score of the node's record.
func (pp *PreparedPod) scoreOn(ni *nodeInfo) (int, error) {
	var v verdict
	if pp.c.evaluateGrouped(ni, pp.pr, nil, true, &v); v.why != fits {
		return 0, pp.c.refusalError(ni.name, pp.pr, v)
	}
	return int(v.score), nil
}
