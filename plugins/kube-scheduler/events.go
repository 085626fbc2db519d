package numaplace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

// events keeps the plugin's cache in step with the node and pod informers.
// Its handlers run on the informers' goroutines; mu serialises them, so
// that a node arriving and the pods bound to it are recorded in a
// consistent order.
type events struct {
	pl *Plugin

	mu sync.Mutex
	// nodes are the nodes in the cache, with the annotation their machine
	// was read from.
	nodes map[string]*nodeRecord
	// bound are the bound, unfinished pods by node name and pod key,
	// whether or not their node is in the cache: a node that arrives (or
	// gains its topology annotation) later gets them.
	bound map[string]map[string]*v1.Pod

	regs   []registration
	synced atomic.Bool
}

// nodeRecord is a node the cache holds.
type nodeRecord struct {
	key, value string // the topology annotation read
	machine    *topology.Machine
	failed     string // the last annotation value that could not be read
}

type registration struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

// startEvents adds the plugin's handlers to the factory's node and pod
// informers.
func startEvents(pl *Plugin, f informers.SharedInformerFactory) (*events, error) {
	e := &events{pl: pl, nodes: map[string]*nodeRecord{}, bound: map[string]map[string]*v1.Pod{}}
	nodeInf := f.Core().V1().Nodes().Informer()
	reg, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.nodeChanged(obj) },
		UpdateFunc: func(_, obj any) { e.nodeChanged(obj) },
		DeleteFunc: e.nodeDeleted,
	})
	if err != nil {
		return nil, fmt.Errorf("adding the node event handler: %w", err)
	}
	e.regs = append(e.regs, registration{nodeInf, reg})
	podInf := f.Core().V1().Pods().Informer()
	reg, err = podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.podChanged(obj) },
		UpdateFunc: func(_, obj any) { e.podChanged(obj) },
		DeleteFunc: e.podDeleted,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("adding the pod event handler: %w", err), e.close())
	}
	e.regs = append(e.regs, registration{podInf, reg})
	return e, nil
}

// close removes the handlers.
func (e *events) close() error {
	var errs []error
	for _, r := range e.regs {
		if err := r.informer.RemoveEventHandler(r.reg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// hasSynced reports whether every handler has seen its informer's
// initial list.
func (e *events) hasSynced() bool {
	if e.synced.Load() {
		return true
	}
	for _, r := range e.regs {
		if !r.reg.HasSynced() {
			return false
		}
	}
	e.synced.Store(true)
	return true
}

// waitSynced waits until every handler has seen its informer's initial
// list, at most timeout.
func (e *events) waitSynced(ctx context.Context, timeout time.Duration) error {
	if e.hasSynced() {
		return nil
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !e.hasSynced() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for the node and pod informers: %w", Name, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("%s: the node and pod informers have not synced after %s", Name, timeout)
		case <-tick.C:
		}
	}
	return nil
}

func (e *events) logger() klog.Logger { return e.pl.logger }

// nodeChanged adds or updates a node from its topology annotation and
// labels, or removes it from the cache when it has lost the annotation.
func (e *events) nodeChanged(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		e.logger().Error(nil, "Node event with an unexpected object", "type", fmt.Sprintf("%T", obj))
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.pl.cache
	rec := e.nodes[n.Name]
	key, value, ok := topologySource(n)
	if !ok {
		if rec != nil {
			e.removeNodeLocked(n.Name, "the node has no topology annotation any more")
		}
		return
	}
	var m *topology.Machine
	fresh := false // m was read now from a changed annotation
	switch {
	case rec != nil && rec.key == key && rec.value == value:
		m = rec.machine
	case rec != nil && rec.failed == value:
		m = rec.machine // already reported: keep the machine, take the labels
	default:
		var err error
		if m, _, err = MachineFromNode(n); err != nil {
			e.logger().Error(err, "Node topology unusable", "node", n.Name)
			if rec == nil {
				return
			}
			rec.failed = value
			m = rec.machine
		} else {
			fresh = true
		}
	}
	node := scheduler.Node{Name: n.Name, Labels: n.Labels, Machine: m}
	if rec == nil {
		if err := c.AddNode(node); err != nil {
			e.logger().Error(err, "Adding node", "node", n.Name)
			return
		}
		e.nodes[n.Name] = &nodeRecord{key: key, value: value, machine: m}
		e.logger().V(2).Info("Node added", "node", n.Name, "source", key,
			"numaNodes", m.NumNodes(), "cpus", m.CPUs().Size(), "gpus", m.NumGPUs())
		e.addBoundLocked(n.Name)
		return
	}
	if err := c.UpdateNode(node); err != nil {
		// The new machine cannot hold the pods placed on the node (the
		// error lists them): the node stays as it was.
		e.logger().Error(err, "Updating node, keeping it as it was", "node", n.Name)
		if fresh {
			rec.failed = value
		}
		return
	}
	if fresh {
		rec.key, rec.value, rec.machine, rec.failed = key, value, m, ""
	}
}

func (e *events) nodeDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	n, ok := obj.(*v1.Node)
	if !ok {
		e.logger().Error(nil, "Node deletion with an unexpected object", "type", fmt.Sprintf("%T", obj))
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.nodes[n.Name] != nil {
		e.removeNodeLocked(n.Name, "the node was deleted")
	}
}

func (e *events) removeNodeLocked(name, why string) {
	if err := e.pl.cache.RemoveNode(name); err != nil && !errors.Is(err, scheduler.ErrUnknownNode) {
		e.logger().Error(err, "Removing node", "node", name)
	}
	delete(e.nodes, name)
	e.logger().V(2).Info("Node removed", "node", name, "reason", why)
}

// addBoundLocked adds the bound pods of a node that has just entered the
// cache: those with a decision first (they claim exactly what it names),
// then the others (whose allocation, if any, is a prediction), each group
// by key.
func (e *events) addBoundLocked(node string) {
	pods := e.bound[node]
	keys := slices.Sorted(maps.Keys(pods))
	slices.SortStableFunc(keys, func(a, b string) int {
		return boolRank(!hasDecision(pods[a])) - boolRank(!hasDecision(pods[b]))
	})
	for _, k := range keys {
		e.addPodLocked(pods[k])
	}
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func hasDecision(p *v1.Pod) bool {
	_, ok := p.Annotations[kube.AnnotationAllocation]
	return ok
}

func asPod(obj any) (*v1.Pod, bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*v1.Pod)
	return p, ok
}

// podChanged records a bound pod in the cache; a finished one is removed.
// Pending pods are the scheduling cycles' business (Reserve, Unreserve).
func (e *events) podChanged(obj any) {
	p, ok := asPod(obj)
	if !ok {
		e.logger().Error(nil, "Pod event with an unexpected object", "type", fmt.Sprintf("%T", obj))
		return
	}
	if p.Spec.NodeName == "" {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if terminal(p) {
		e.forgetLocked(p)
		return
	}
	byKey := e.bound[p.Spec.NodeName]
	if byKey == nil {
		byKey = map[string]*v1.Pod{}
		e.bound[p.Spec.NodeName] = byKey
	}
	byKey[podKey(p)] = p
	if e.nodes[p.Spec.NodeName] != nil {
		e.addPodLocked(p)
	}
}

func (e *events) podDeleted(obj any) {
	p, ok := asPod(obj)
	if !ok {
		e.logger().Error(nil, "Pod deletion with an unexpected object", "type", fmt.Sprintf("%T", obj))
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.forgetLocked(p)
}

// forgetLocked removes a deleted or finished pod, bound or only reserved.
func (e *events) forgetLocked(p *v1.Pod) {
	key := podKey(p)
	if byKey := e.bound[p.Spec.NodeName]; byKey != nil {
		delete(byKey, key)
		if len(byKey) == 0 {
			delete(e.bound, p.Spec.NodeName)
		}
	}
	err := e.pl.cache.RemovePod(&kube.Pod{Namespace: p.Namespace, Name: p.Name})
	if err != nil && !errors.Is(err, allocator.ErrUnknownID) {
		e.logger().Error(err, "Removing pod", "pod", key)
	}
}

// addPodLocked records a bound pod on a node the cache holds. When a
// decision cannot be claimed, the pods of the node without a decision
// (whose allocations are the allocator's predictions, possibly of the
// very CPUs or GPUs the decision names) are taken out, the decision
// claimed, and they are placed again after it.
func (e *events) addPodLocked(p *v1.Pod) {
	c := e.pl.cache
	err := c.AddPod(PodFromV1(p))
	if err == nil {
		return
	}
	if !hasDecision(p) || errors.Is(err, kube.ErrInvalidPod) || errors.Is(err, kube.ErrInvalidDecision) {
		e.logger().Error(err, "Bound pod not recorded: what it holds is not accounted", "pod", podKey(p), "node", p.Spec.NodeName)
		return
	}
	var predicted []*v1.Pod
	for _, k := range slices.Sorted(maps.Keys(e.bound[p.Spec.NodeName])) {
		q := e.bound[p.Spec.NodeName][k]
		if q == p || hasDecision(q) {
			continue
		}
		if st, ok := c.Pod(k); ok && st.Allocation != nil {
			if c.RemovePod(&kube.Pod{Namespace: q.Namespace, Name: q.Name}) == nil {
				predicted = append(predicted, q)
			}
		}
	}
	if len(predicted) > 0 {
		err = c.AddPod(PodFromV1(p))
	}
	if err != nil {
		e.logger().Error(err, "Bound pod's decision conflicts with the node's state: what it holds is not accounted",
			"pod", podKey(p), "node", p.Spec.NodeName)
	}
	for _, q := range predicted {
		if err := c.AddPod(PodFromV1(q)); err != nil {
			e.logger().Error(err, "Bound pod without a decision no longer fits beside the decisions: what it holds is not accounted",
				"pod", podKey(q), "node", q.Spec.NodeName)
		}
	}
}
