package numaplace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/topology"
)

// nodeNameIndex is the plugin's index of the pod informer: bound pods by
// spec.nodeName.
const nodeNameIndex = "numaplace.io/nodeName"

func indexByNodeName(obj any) ([]string, error) {
	p, ok := obj.(*v1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{p.Spec.NodeName}, nil
}

// events keeps the plugin's cache a function of the API objects: the nodes
// with their topology annotation and the pods bound to them, as the
// informers' stores hold them. Every change is applied by syncing the node
// it concerns from the stores (the newest state, whatever the order the
// notifications come in): the plugin's own informer handlers do it, and so
// does PreFilter for every node whose framework NodeInfo changed since the
// plugin last looked, so that the cache is current in the very cycle that
// kube-scheduler retries a pod in, whichever handler ran first. mu
// serialises the syncs.
type events struct {
	pl    *Plugin
	nodes corelisters.NodeLister
	pods  cache.Indexer

	mu sync.Mutex
	// recs are the nodes that carry a topology annotation, usable or not.
	recs map[string]*nodeRecord
	// seenGen is the highest NodeInfo generation of the last snapshot
	// PreFilter caught up with: the framework draws generations from one
	// increasing counter, so a node changed (or added) since then has a
	// higher one.
	seenGen atomic.Int64

	// reserved are the pods Reserve placed, by node and key, until the
	// plugin sees them bound there: one deleted before that (or bound
	// elsewhere) has its reservation dropped, since no Unreserve comes
	// after a successful binding. Guarded by resMu.
	resMu    sync.Mutex
	reserved map[string]map[string]bool

	// malformedMsg holds the refusal reason of each node whose topology
	// annotation is malformed, for Filter (read without mu).
	malformedMsg sync.Map

	// nrt is where NodeResourceTopology objects are read from (nil: they
	// are not), nrtInf the plugin's informer behind it.
	nrt    nrtStore
	nrtInf *nrtInformer

	// claims is the ResourceClaim informer's store, indexed by node
	// (draevents.go); releasing holds, by node, the stand-ins of claims
	// whose pods are gone.
	claims    cache.Indexer
	releasing sync.Map

	marks  *marker
	regs   []registration
	synced atomic.Bool
}

// malformed returns the refusal reason of a node whose topology annotation
// is malformed, or "".
func (e *events) malformed(node string) string {
	if v, ok := e.malformedMsg.Load(node); ok {
		return v.(string)
	}
	return ""
}

// nodeRecord is what the plugin knows of a node with a topology
// annotation.
type nodeRecord struct {
	key, value string            // the topology source read (an annotation's key, or nrtKey)
	source     string            // its metric label (SourceTopology, SourceNRT, ...)
	read       bool              // key and value were read
	machine    *topology.Machine // nil when the annotation is malformed
	parseErr   error             // why the annotation cannot be read
	nodeErr    error             // why the cache refuses the node (a bad label)
	err        error             // why the node is unusable (either), for Filter and the mark
	labels     map[string]string // the labels last applied
	inCache    bool
	// pods are the resource versions of the bound pods the cache was
	// given, by key; unaccounted are those it could not record, with why.
	pods        map[string]string
	unaccounted map[string]string
	// misfits and overcommit are what the node was last marked with.
	misfits    map[string]scheduler.Misfit
	overcommit []string
}

type registration struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

// startEvents adds the plugin's index and handlers to the factory's node
// and pod informers, and follows NodeResourceTopology objects through cfg
// (nil: not).
func startEvents(ctx context.Context, pl *Plugin, f informers.SharedInformerFactory, cfg *rest.Config) (*events, error) {
	podInf := f.Core().V1().Pods().Informer()
	if _, ok := podInf.GetIndexer().GetIndexers()[nodeNameIndex]; !ok {
		if err := podInf.AddIndexers(cache.Indexers{nodeNameIndex: indexByNodeName}); err != nil {
			return nil, fmt.Errorf("adding the pod index by node name: %w", err)
		}
	}
	nodeInf := f.Core().V1().Nodes().Informer()
	e := &events{pl: pl, nodes: f.Core().V1().Nodes().Lister(), pods: podInf.GetIndexer(),
		recs: map[string]*nodeRecord{}, reserved: map[string]map[string]bool{}}
	e.marks = newMarker(ctx, pl, e.nodes)
	reg, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.nodeEvent(obj) },
		UpdateFunc: func(_, obj any) { e.nodeEvent(obj) },
		DeleteFunc: e.nodeEvent,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("adding the node event handler: %w", err), e.close())
	}
	e.regs = append(e.regs, registration{nodeInf, reg})
	reg, err = podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.podEvent(obj) },
		UpdateFunc: func(_, obj any) { e.podEvent(obj) },
		DeleteFunc: e.podEvent,
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("adding the pod event handler: %w", err), e.close())
	}
	e.regs = append(e.regs, registration{podInf, reg})
	if err := e.startClaimEvents(f); err != nil {
		return nil, errors.Join(err, e.close())
	}
	nrtInf, err := startNRT(ctx, e, cfg)
	if err != nil {
		return nil, errors.Join(err, e.close())
	}
	if nrtInf != nil {
		e.nrt, e.nrtInf = nrtInf, nrtInf
	}
	synced := e.hasSynced
	e.marks.gate.Store(&synced)
	return e, nil
}

// close removes the handlers and stops marking nodes.
func (e *events) close() error {
	var errs []error
	for _, r := range e.regs {
		if err := r.informer.RemoveEventHandler(r.reg); err != nil {
			errs = append(errs, err)
		}
	}
	e.regs = nil
	if e.marks != nil {
		e.marks.stop()
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
	if e.nrtInf != nil && !e.nrtInf.hasSynced() {
		return false
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

// nodeEvent syncs the node a notification is about.
func (e *events) nodeEvent(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	n, ok := obj.(*v1.Node)
	if !ok {
		e.logger().Error(nil, "Node event with an unexpected object", "type", fmt.Sprintf("%T", obj))
		return
	}
	e.syncNode(n.Name)
}

// podEvent syncs the node of a bound pod a notification is about.
func (e *events) podEvent(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*v1.Pod)
	if !ok {
		e.logger().Error(nil, "Pod event with an unexpected object", "type", fmt.Sprintf("%T", obj))
		return
	}
	if p.Spec.NodeName != "" {
		e.syncNode(p.Spec.NodeName)
	}
}

// syncNode brings the cache's record of a node and its bound pods to what
// the informers' stores hold now.
func (e *events) syncNode(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.syncNodeLocked(name)
}

// catchUp syncs every node whose framework NodeInfo changed since the
// last snapshot it was given (PreFilter calls it with the cycle's snapshot,
// all the nodes): the framework updates its snapshot from the same stores,
// so a node it sees changed is synced before the plugin decides on it. A
// NodeInfo's generation comes from one increasing counter, so the changed
// ones are those above the highest generation seen last time: an unchanged
// node costs a comparison.
func (e *events) catchUp(nodes []fwk.NodeInfo) {
	seen := e.seenGen.Load()
	top := seen
	var changed []string
	for _, ni := range nodes {
		g := ni.GetGeneration()
		if g <= seen {
			continue
		}
		top = max(top, g)
		if n := ni.Node(); n != nil {
			changed = append(changed, n.Name)
		}
	}
	if len(changed) > 0 {
		e.mu.Lock()
		for _, name := range changed {
			e.syncNodeLocked(name)
		}
		e.mu.Unlock()
	}
	e.seenGen.CompareAndSwap(seen, top)
}

func (e *events) syncNodeLocked(name string) {
	n, err := e.nodes.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		e.logger().Error(err, "Reading node from the informer", "node", name)
		return
	}
	rec := e.recs[name]
	var src source
	var srcErr error
	ok := false
	if n != nil {
		src, srcErr, ok = e.sourceOf(n)
	}
	key, value := src.key, src.value
	if !ok {
		if rec != nil {
			why := "the node was deleted"
			if n != nil {
				why = "the node has no topology annotation any more"
			}
			e.dropLocked(name, rec, why)
			if n != nil {
				e.marks.update(name, n.ResourceVersion, nil)
			}
		}
		if n == nil {
			e.marks.forget(name)
		}
		return
	}
	if rec == nil {
		rec = &nodeRecord{}
		e.recs[name] = rec
	}
	c := e.pl.cache
	// A new annotation is read once, whatever follows.
	newAnnotation := !rec.read || rec.key != key || rec.value != value
	if newAnnotation {
		if rec.read && rec.source != src.label() {
			e.logger().V(2).Info("Node topology source changed: the newer is used", "node", name, "from", rec.source, "to", src.label())
		}
		rec.key, rec.value, rec.read, rec.source = key, value, true, src.label()
		old := rec.machine
		if srcErr != nil {
			rec.machine, rec.parseErr = nil, srcErr
		} else {
			rec.machine, rec.parseErr = src.read(n)
		}
		if old != nil && rec.machine != nil && sameMachine(old, rec.machine) {
			// The same machine written again (an object's other attributes
			// changed, say its pod fingerprint): nothing to rebuild.
			rec.machine = old
			newAnnotation = false
		}
		if rec.parseErr != nil {
			rec.machine = nil
			topologyUpdates.WithLabelValues(UpdateMalformed).Inc()
			e.logger().Error(rec.parseErr, "Node topology is malformed: the node takes no NUMA pods until it is fixed", "node", name, "source", describeSource(key, name))
			e.pl.event(n, nil, v1.EventTypeWarning, EventTopologyMalformed, "ReadTopology",
				"%s%s is malformed, the node takes no NUMA-aware pods until it is fixed: %v", Prefix, describeSource(key, name), rec.parseErr)
		}
	}
	// The node as the cache should have it: added, or updated when its
	// machine or labels changed (the labels are retried only when they
	// change).
	var nodeErr error
	added := false
	if rec.parseErr == nil && (newAnnotation || !maps.Equal(rec.labels, n.Labels) || (!rec.inCache && rec.nodeErr == nil)) {
		node := scheduler.Node{Name: name, Labels: n.Labels, Machine: rec.machine}
		if rec.inCache {
			nodeErr = c.UpdateNode(node)
		} else if nodeErr = c.AddNode(node); nodeErr == nil {
			rec.inCache, rec.pods, rec.unaccounted, added = true, map[string]string{}, map[string]string{}, true
		}
		rec.labels = n.Labels
		if nodeErr != nil && !errors.Is(nodeErr, scheduler.ErrInvalidNode) {
			e.logger().Error(nodeErr, "Recording node", "node", name)
			return
		}
		if nodeErr != nil && (rec.nodeErr == nil || rec.nodeErr.Error() != nodeErr.Error()) {
			topologyUpdates.WithLabelValues(UpdateMalformed).Inc()
			e.logger().Error(nodeErr, "Node cannot be used: it takes no NUMA pods until it is fixed", "node", name)
			e.pl.event(n, nil, v1.EventTypeWarning, EventNodeInvalid, "ReadNode",
				"%sthe node takes no NUMA-aware pods until it is fixed: %v", Prefix, nodeErr)
		}
		rec.nodeErr = nodeErr
	}
	was := rec.err
	switch {
	case rec.parseErr != nil:
		rec.err = fmt.Errorf("%s is malformed: %w", describeSource(key, name), rec.parseErr)
	case rec.nodeErr != nil:
		rec.err = rec.nodeErr
	default:
		rec.err = nil
	}
	if rec.err != nil {
		if rec.inCache {
			if err := c.RemoveNode(name); err != nil && !errors.Is(err, scheduler.ErrUnknownNode) {
				e.logger().Error(err, "Removing node", "node", name)
			}
			rec.inCache, rec.pods, rec.unaccounted, rec.misfits, rec.overcommit = false, nil, nil, nil, nil
		}
		rec.labels = n.Labels
		e.malformedMsg.Store(name, Prefix+rec.err.Error())
		e.markLocked(n, rec)
		return
	}
	e.malformedMsg.Delete(name)
	if newAnnotation || added {
		e.logger().V(2).Info("Node topology read", "node", name, "source", rec.source, "from", describeSource(key, name),
			"numaNodes", rec.machine.NumNodes(), "cpus", rec.machine.CPUs().Size(), "gpus", rec.machine.NumGPUs())
		e.syncPodsLocked(name, rec)
		misfits, overcommit, _ := c.Misfits(name)
		if len(misfits) > 0 || len(overcommit) > 0 || len(rec.unaccounted) > 0 {
			topologyUpdates.WithLabelValues(UpdateMisfit).Inc()
		} else {
			topologyUpdates.WithLabelValues(UpdateApplied).Inc()
		}
		e.markLocked(n, rec)
	} else if e.syncPodsLocked(name, rec) || was != nil {
		e.markLocked(n, rec)
	}
	e.dropStaleReservationsLocked(name)
}

// noteReserved records a reservation the plugin's Reserve made.
func (e *events) noteReserved(node, key string) {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	if e.reserved[node] == nil {
		e.reserved[node] = map[string]bool{}
	}
	e.reserved[node][key] = true
}

// forgetReserved drops the record of a reservation (Unreserve).
func (e *events) forgetReserved(node, key string) {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	delete(e.reserved[node], key)
	if len(e.reserved[node]) == 0 {
		delete(e.reserved, node)
	}
}

// dropStaleReservationsLocked drops the reservations on the node of pods
// that the pod store no longer has or has bound elsewhere (a pod bound and
// deleted before the plugin saw it bound), and stops following those it
// has bound here (the cache records them from the store).
func (e *events) dropStaleReservationsLocked(node string) {
	e.resMu.Lock()
	keys := slices.Sorted(maps.Keys(e.reserved[node]))
	e.resMu.Unlock()
	for _, k := range keys {
		o, exists, err := e.pods.GetByKey(k)
		if err != nil {
			continue
		}
		p, _ := o.(*v1.Pod)
		switch {
		case exists && p != nil && p.Spec.NodeName == "":
			continue // still being scheduled
		case exists && p != nil && p.Spec.NodeName == node && !terminal(p):
			// Bound here: the cache has the pod's record from the store.
		default:
			ns, name := splitKey(k)
			err := e.pl.cache.Unreserve(&kube.Pod{Namespace: ns, Name: name})
			if err == nil {
				e.logger().V(2).Info("Reservation of a pod gone before it was seen bound dropped", "pod", k, "node", node)
			}
		}
		e.forgetReserved(node, k)
	}
}

// sameMachine reports whether two machines are described alike.
func sameMachine(a, b *topology.Machine) bool {
	if a == b {
		return true
	}
	x, err1 := json.Marshal(a.Spec())
	y, err2 := json.Marshal(b.Spec())
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// describeSource names a topology source in messages.
func describeSource(key, node string) string {
	if key == nrtKey {
		return fmt.Sprintf("%s object %s", kube.NRTKind, node)
	}
	return "topology annotation " + key
}

// dropLocked removes a node from the cache and the plugin's records.
func (e *events) dropLocked(name string, rec *nodeRecord, why string) {
	if rec.inCache {
		if err := e.pl.cache.RemoveNode(name); err != nil && !errors.Is(err, scheduler.ErrUnknownNode) {
			e.logger().Error(err, "Removing node", "node", name)
		}
	}
	delete(e.recs, name)
	e.malformedMsg.Delete(name)
	e.logger().V(2).Info("Node removed", "node", name, "reason", why)
}

// syncPodsLocked gives the cache the node's bound pods that changed since
// it last did (by resource version) and takes away those gone, in one
// batch; it reports whether anything changed.
func (e *events) syncPodsLocked(name string, rec *nodeRecord) bool {
	objs, err := e.pods.ByIndex(nodeNameIndex, name)
	if err != nil {
		e.logger().Error(err, "Listing the node's pods from the informer", "node", name)
		return false
	}
	now := make(map[string]*v1.Pod, len(objs))
	for _, o := range objs {
		p, ok := o.(*v1.Pod)
		if !ok || p.Spec.NodeName != name || terminal(p) {
			continue
		}
		now[podKey(p)] = p
	}
	e.addClaimHoldersLocked(name, now)
	var bound []*kube.Pod
	var gone []*kube.Pod
	var boundV1 []*v1.Pod
	// The pods changed and gone, each in key order (only they are sorted:
	// an event changes one pod of many).
	var changed, goneKeys []string
	for k, p := range now {
		if rv, ok := rec.pods[k]; !ok || rv != p.ResourceVersion {
			changed = append(changed, k)
		}
	}
	slices.Sort(changed)
	for _, k := range changed {
		p := now[k]
		bound = append(bound, PodFromV1(p))
		boundV1 = append(boundV1, p)
	}
	if len(rec.pods) > len(now)-len(changed) { // some recorded pod is not in the store now
		for k := range rec.pods {
			if _, ok := now[k]; !ok {
				goneKeys = append(goneKeys, k)
			}
		}
		slices.Sort(goneKeys)
	}
	for _, k := range goneKeys {
		ns, n := splitKey(k)
		gone = append(gone, &kube.Pod{Namespace: ns, Name: n})
		delete(rec.pods, k)
		delete(rec.unaccounted, k)
	}
	if len(bound) == 0 && len(gone) == 0 {
		return false
	}
	errs, err := e.pl.cache.SyncPods(name, bound, gone)
	if err != nil {
		e.logger().Error(err, "Recording the node's pods", "node", name)
		return false
	}
	for i, p := range boundV1 {
		k := podKey(p)
		rec.pods[k] = p.ResourceVersion
		if errs[i] == nil {
			delete(rec.unaccounted, k)
			continue
		}
		why := errs[i].Error()
		if rec.unaccounted[k] != why {
			podMisfits.WithLabelValues(MisfitUnaccounted).Inc()
			e.logger().Error(errs[i], "Bound pod not recorded: what it holds is not accounted", "pod", k, "node", name)
			if n, err := e.nodes.Get(name); err == nil {
				e.pl.event(n, p, v1.EventTypeWarning, EventPodUnaccounted, "AccountPod",
					"numaplace: pod %s cannot be read, what it holds is not accounted: %s", k, why)
			}
		}
		rec.unaccounted[k] = why
	}
	return true
}

func splitKey(k string) (ns, name string) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return "", k
}

// markLocked reports the node's misfits that are new (an Event each, the
// counter) and has the node's condition say what it holds now. A misfit
// the node's condition names already (an earlier scheduler process
// reported it) gets no Event again.
func (e *events) markLocked(n *v1.Node, rec *nodeRecord) {
	var st struct {
		Misfits    []scheduler.Misfit
		Overcommit []string
	}
	if rec.inCache {
		st.Misfits, st.Overcommit, _ = e.pl.cache.Misfits(n.Name)
	}
	now := map[string]scheduler.Misfit{}
	for _, m := range st.Misfits {
		now[m.Pod] = m
		if old, ok := rec.misfits[m.Pod]; ok && old == m {
			continue
		}
		if _, seen := rec.misfits[m.Pod]; !seen && marked(n, misfitText(m)) {
			continue // reported before a restart: the condition says so already
		}
		podMisfits.WithLabelValues(string(m.Kind)).Inc()
		e.logger().Info("Pod misfits its node's machine", "pod", m.Pod, "node", n.Name, "kind", m.Kind, "reason", m.Reason)
		var related *v1.Pod
		if ns, name := splitKey(m.Pod); name != "" {
			if o, ok, _ := e.pods.GetByKey(ns + "/" + name); ok {
				related, _ = o.(*v1.Pod)
			}
		}
		e.pl.event(n, related, v1.EventTypeWarning, EventPodMisfit, "AccountPod", "numaplace: pod %s: %s", m.Pod, m.Reason)
	}
	rec.misfits = now
	if !slices.Equal(rec.overcommit, st.Overcommit) && len(st.Overcommit) > 0 &&
		(rec.overcommit != nil || !slices.ContainsFunc(st.Overcommit, func(o string) bool { return !marked(n, o) })) {
		e.pl.event(n, nil, v1.EventTypeWarning, EventOvercommitted, "AccountPod", "numaplace: %s", joinSemi(st.Overcommit))
	}
	rec.overcommit = st.Overcommit
	e.marks.update(n.Name, n.ResourceVersion, markOf(rec))
}
