package numaplace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"
)

// NRTResource is the API resource of NodeResourceTopology objects
// (topology.node.k8s.io/v1alpha2, cluster-scoped, one per node, named after
// it), which numaplace's node agent and NFD's topology-updater publish.
var NRTResource = schema.GroupVersionResource{Group: "topology.node.k8s.io", Version: "v1alpha2", Resource: "noderesourcetopologies"}

// Sources of a node's machine, the "source" label of numaplace_nodes_by_source
// and the source the plugin logs.
const (
	SourceTopology     = "annotation"                 // numaplace.io/topology
	SourceNRTAnnot     = "nrt-annotation"             // numaplace.io/node-resource-topology
	SourceKoordinator  = "koordinator-annotation"     // node.koordinator.sh/cpu-topology
	SourceNRT          = "noderesourcetopology"       // a NodeResourceTopology object with numaplace's topology attribute (exact)
	SourceNRTZones     = "noderesourcetopology-zones" // one without it (NFD's): the machine rebuilt from its zones
	nrtKey             = "NodeResourceTopology"       // the record's key for an NRT source
	nrtRecheckInterval = 30 * time.Second
)

// sourceLabel names the source a node's machine was read from.
func sourceLabel(key string, r *kube.NodeResourceTopology) string {
	switch key {
	case AnnotationTopology:
		return SourceTopology
	case AnnotationNRT:
		return SourceNRTAnnot
	case AnnotationKoordCPUTopology:
		return SourceKoordinator
	}
	if r != nil {
		if _, ok := r.Attribute(kube.NRTAttributeTopology); ok {
			return SourceNRT
		}
	}
	return SourceNRTZones
}

// source is where a node's machine is read from: one of its annotations,
// or its NodeResourceTopology object.
type source struct {
	key   string // the annotation's key, or nrtKey
	value string // what the machine is read from (for an NRT, its content without the available amounts)
	when  time.Time
	nrt   *kube.NodeResourceTopology
}

// read returns the machine the source describes.
func (s source) read(n *v1.Node) (*topology.Machine, error) {
	if s.key != nrtKey {
		return machineFrom(n, s.key, s.value)
	}
	m, err := kube.MachineFromNRT(s.nrt)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kube.NRTKind, n.Name, err)
	}
	return m, nil
}

// label is the source's metric label.
func (s source) label() string { return sourceLabel(s.key, s.nrt) }

// annotationSource returns the node's topology annotation, if any, with the
// time it was last written (from the node's managed fields; zero when they
// do not say).
func annotationSource(n *v1.Node) (source, bool) {
	key, value, ok := topologySource(n)
	if !ok {
		return source{}, false
	}
	s := source{key: key, value: value}
	field := fmt.Sprintf("%q", "f:"+key)
	for _, mf := range n.ManagedFields {
		if mf.Time != nil && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), field) && mf.Time.After(s.when) {
			s.when = mf.Time.Time
		}
	}
	return s, true
}

// nrtSourceOf reads a NodeResourceTopology object: its report, the content
// the machine depends on (not the available amounts, which change with
// every admission), and the time it was last written (its managed fields,
// else its creation).
func nrtSourceOf(u *unstructured.Unstructured) (source, error) {
	b, err := json.Marshal(u.Object)
	if err != nil {
		return source{}, err
	}
	r, err := kube.ParseNRT(b)
	if err != nil {
		return source{}, err
	}
	if r.Metadata.Name == "" {
		r.Metadata.Name = u.GetName()
	}
	stable := map[string]any{}
	for k, v := range u.Object {
		if k != "metadata" && k != "apiVersion" && k != "kind" {
			stable[k] = v
		}
	}
	if zones, ok := stable["zones"].([]any); ok {
		out := make([]any, len(zones))
		for i, z := range zones {
			zm, ok := z.(map[string]any)
			if !ok {
				out[i] = z
				continue
			}
			zc := make(map[string]any, len(zm))
			for k, v := range zm {
				zc[k] = v
			}
			if res, ok := zm["resources"].([]any); ok {
				rc := make([]any, len(res))
				for j, x := range res {
					if xm, ok := x.(map[string]any); ok {
						c := make(map[string]any, len(xm))
						for k, v := range xm {
							if k != "available" {
								c[k] = v
							}
						}
						rc[j] = c
					} else {
						rc[j] = x
					}
				}
				zc["resources"] = rc
			}
			out[i] = zc
		}
		stable["zones"] = out
	}
	vb, err := json.Marshal(stable)
	if err != nil {
		return source{}, err
	}
	s := source{key: nrtKey, value: string(vb), nrt: r, when: u.GetCreationTimestamp().Time}
	for _, mf := range u.GetManagedFields() {
		if mf.Time != nil && mf.Time.After(s.when) {
			s.when = mf.Time.Time
		}
	}
	return s, nil
}

// nrtStore is what the plugin reads NodeResourceTopology objects from.
type nrtStore interface {
	// get returns the object of the node, if any.
	get(name string) (*unstructured.Unstructured, bool)
}

// sourceOf chooses where the node's machine is read from: its topology
// annotation or its NodeResourceTopology object, the newer of the two (by
// the time each was last written) when it has both, the annotation on a tie
// or when the times are unknown. An NRT object that cannot be read counts
// as a source (so that it is reported as malformed) only when it is the
// node's only one or the newer.
func (e *events) sourceOf(n *v1.Node) (src source, nrtErr error, ok bool) {
	var u *unstructured.Unstructured
	if e.nrt != nil {
		u, _ = e.nrt.get(n.Name)
	}
	return chooseSource(n, u)
}

// chooseSource is the source of the node's machine given its
// NodeResourceTopology object (nil: none): the newer of its topology
// annotation and the object (by the time each was last written), the
// annotation on a tie. nrtErr says why the chosen object cannot be read.
func chooseSource(n *v1.Node, u *unstructured.Unstructured) (src source, nrtErr error, ok bool) {
	ann, annOK := annotationSource(n)
	var nrt source
	nrtOK := false
	if u != nil {
		var err error
		nrt, err = nrtSourceOf(u)
		if err != nil {
			nrt = source{key: nrtKey, value: "unreadable: " + err.Error(), when: u.GetCreationTimestamp().Time}
			for _, mf := range u.GetManagedFields() {
				if mf.Time != nil && mf.Time.After(nrt.when) {
					nrt.when = mf.Time.Time
				}
			}
			nrtErr = err
		}
		nrtOK = true
	}
	switch {
	case annOK && nrtOK && nrt.when.After(ann.when):
		return nrt, nrtErr, true
	case annOK:
		return ann, nil, true
	case nrtOK:
		return nrt, nrtErr, true
	}
	return source{}, nil, false
}

// MachineOf reads the node's machine as the plugin does: from the newer of
// its topology annotation and its NodeResourceTopology object nrt (nil when
// it has none), the annotation on a tie. It returns the machine and where
// it was read from ("topology annotation numaplace.io/topology",
// "NodeResourceTopology object NAME"), an error wrapping [ErrNoTopology]
// when the node has neither, or the reading error of the chosen source.
func MachineOf(n *v1.Node, nrt *unstructured.Unstructured) (*topology.Machine, string, error) {
	if n == nil {
		return nil, "", errors.New("no node (nil)")
	}
	src, nrtErr, ok := chooseSource(n, nrt)
	if !ok {
		return nil, "", fmt.Errorf("node %s: %w and no %s object", n.Name, ErrNoTopology, kube.NRTKind)
	}
	from := describeSource(src.key, n.Name)
	if nrtErr != nil {
		return nil, from, fmt.Errorf("%s is malformed: %w", from, nrtErr)
	}
	m, err := src.read(n)
	if err != nil {
		return nil, from, fmt.Errorf("%s is malformed: %w", from, err)
	}
	return m, from, nil
}

// nrtInformer follows the cluster's NodeResourceTopology objects with a
// dynamic informer of the plugin's own; when the API server does not serve
// them (the CRD is not installed) it asks again every 30 seconds.
type nrtInformer struct {
	e      *events
	client dynamic.Interface

	mu       sync.Mutex
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

// get implements nrtStore.
func (ni *nrtInformer) get(name string) (*unstructured.Unstructured, bool) {
	ni.mu.Lock()
	inf := ni.informer
	ni.mu.Unlock()
	if inf == nil {
		return nil, false
	}
	o, ok, err := inf.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	u, ok := o.(*unstructured.Unstructured)
	return u, ok
}

// hasSynced reports whether the informer, once started, has listed the
// objects (true while the CRD is not served: there is nothing to wait for).
func (ni *nrtInformer) hasSynced() bool {
	ni.mu.Lock()
	defer ni.mu.Unlock()
	return ni.reg == nil || ni.reg.HasSynced()
}

// startNRT starts following NodeResourceTopology objects through cfg (nil:
// the handle has no configuration, as in tests over a fake clientset, and
// none are read).
func startNRT(ctx context.Context, e *events, cfg *rest.Config) (*nrtInformer, error) {
	if cfg == nil {
		e.logger().V(1).Info("No kubeconfig in the framework handle: NodeResourceTopology objects are not read")
		return nil, nil
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("a dynamic client for %s: %w", NRTResource, err)
	}
	ni := &nrtInformer{e: e, client: client}
	if served, err := ni.served(ctx); err != nil || !served {
		if err != nil {
			e.logger().Error(err, "Asking whether NodeResourceTopology objects are served; asking again every 30s", "resource", NRTResource)
		} else {
			e.logger().Info("NodeResourceTopology objects are not served (the CRD is not installed); asking again every 30s", "resource", NRTResource)
		}
		go ni.waitServed(ctx)
		return ni, nil
	}
	return ni, ni.start(ctx)
}

// served reports whether the API server serves the resource.
func (ni *nrtInformer) served(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := ni.client.Resource(NRTResource).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return false, nil
	}
	return false, err
}

func (ni *nrtInformer) waitServed(ctx context.Context) {
	t := time.NewTicker(nrtRecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ok, _ := ni.served(ctx); ok {
			if err := ni.start(ctx); err != nil {
				ni.e.logger().Error(err, "Following NodeResourceTopology objects")
			}
			return
		}
	}
}

// start starts the informer; its handler syncs the object's node and
// wakes the pods waiting for a node when the node's machine changed.
func (ni *nrtInformer) start(ctx context.Context) error {
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(ni.client, 0, metav1.NamespaceAll, nil)
	inf := f.ForResource(NRTResource).Informer()
	handler := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(metav1.Object); ok {
			ni.e.nrtChanged(o.GetName())
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handler,
		UpdateFunc: func(_, obj any) { handler(obj) },
		DeleteFunc: handler,
	})
	if err != nil {
		return err
	}
	ni.mu.Lock()
	ni.informer, ni.reg = inf, reg
	ni.mu.Unlock()
	f.Start(ctx.Done())
	ni.e.logger().V(1).Info("Following NodeResourceTopology objects", "resource", NRTResource)
	return nil
}

// nrtChanged syncs the node of a NodeResourceTopology object and, when its
// machine changed, moves the pods waiting to be scheduled back to the
// active queue: no Node event tells kube-scheduler about an NRT object.
func (e *events) nrtChanged(node string) {
	e.mu.Lock()
	before := e.machineOf(node)
	e.syncNodeLocked(node)
	after := e.machineOf(node)
	e.mu.Unlock()
	if before != after && after != nil {
		e.pl.activateWaiting()
	}
}

// machineOf returns the machine the cache has for the node (nil: none).
// The caller holds mu.
func (e *events) machineOf(node string) *topology.Machine {
	if rec := e.recs[node]; rec != nil && rec.inCache {
		return rec.machine
	}
	return nil
}

// activateWaiting moves the pods that wait to be scheduled (pending, marked
// unschedulable) back to kube-scheduler's active queue.
func (pl *Plugin) activateWaiting() {
	if pl.handle == nil || pl.ev == nil {
		return
	}
	pods := map[string]*v1.Pod{}
	for _, o := range pl.ev.pods.List() {
		p, ok := o.(*v1.Pod)
		if !ok || p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
				pods[podKey(p)] = p
			}
		}
	}
	if len(pods) > 0 {
		pl.handle.Activate(pl.logger, pods)
	}
}
