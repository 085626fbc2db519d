package numaplace

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
)

// claimNodeIndex is the plugin's index of the ResourceClaim informer:
// allocated claims by the nodes (pools) of their numaplace devices.
const claimNodeIndex = "numaplace.io/claimNode"

// ClaimHolderPrefix starts the name of the stand-in pod through which the
// cache accounts the GPUs of an allocated claim that no pod with a
// numaplace decision holds (a claim the default scheduler allocated, or
// one whose pod is gone while the claim stays allocated): the key is
// "<namespace>/resourceclaim:<claim name>", which no pod can have.
const ClaimHolderPrefix = "resourceclaim:"

func indexClaimByNode(obj any) ([]string, error) {
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok || c.Status.Allocation == nil {
		return nil, nil
	}
	return claimNodes(c), nil
}

// claimNodes returns the nodes (pool names) of the claim's numaplace
// devices.
func claimNodes(c *resourceapi.ResourceClaim) []string {
	if c == nil || c.Status.Allocation == nil {
		return nil
	}
	var out []string
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver == DRADriver && !slices.Contains(out, r.Pool) {
			out = append(out, r.Pool)
		}
	}
	return out
}

// startClaimEvents indexes the factory's ResourceClaim informer by node
// and syncs the nodes of every claim that changes (its old and new
// allocation's), so that the cache counts the GPUs allocated claims hold.
func (e *events) startClaimEvents(f informers.SharedInformerFactory) error {
	inf := f.Resource().V1().ResourceClaims().Informer()
	if _, ok := inf.GetIndexer().GetIndexers()[claimNodeIndex]; !ok {
		if err := inf.AddIndexers(cache.Indexers{claimNodeIndex: indexClaimByNode}); err != nil {
			return fmt.Errorf("adding the ResourceClaim index by node: %w", err)
		}
	}
	e.claims = inf.GetIndexer()
	sync := func(objs ...any) {
		var nodes []string
		for _, obj := range objs {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if c, ok := obj.(*resourceapi.ResourceClaim); ok {
				for _, n := range claimNodes(c) {
					if !slices.Contains(nodes, n) {
						nodes = append(nodes, n)
					}
				}
			}
		}
		for _, n := range nodes {
			e.syncNode(n)
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { sync(obj) },
		UpdateFunc: func(old, obj any) { sync(old, obj) },
		DeleteFunc: func(obj any) { sync(obj) },
	})
	if err != nil {
		return fmt.Errorf("adding the ResourceClaim event handler: %w", err)
	}
	e.regs = append(e.regs, registration{inf, reg})
	return nil
}

// addClaimHoldersLocked adds to the node's bound pods a stand-in pod for
// every allocated claim holding numaplace GPUs of the node that no pod
// with a decision accounts (see [ClaimHolderPrefix]): its decision names
// the claim's GPUs (gpu-<index> devices), policy None, no CPUs. A claim
// reserved for a bound pod with a numaplace decision, or for a pod the
// cache holds as reserved (its claims are being written), is that pod's.
func (e *events) addClaimHoldersLocked(node string, now map[string]*v1.Pod) {
	if e.claims == nil {
		return
	}
	objs, err := e.claims.ByIndex(claimNodeIndex, node)
	if err != nil {
		e.logger().Error(err, "Listing the node's ResourceClaims from the informer", "node", node)
		return
	}
	var releasing []string
	for _, obj := range objs {
		c, ok := obj.(*resourceapi.ResourceClaim)
		if !ok || c.Status.Allocation == nil {
			continue
		}
		var gpus []int
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver != DRADriver || r.Pool != node || !strings.HasPrefix(r.Device, "gpu-") {
				continue
			}
			if id, err := strconv.Atoi(strings.TrimPrefix(r.Device, "gpu-")); err == nil && id >= 0 && !slices.Contains(gpus, id) {
				gpus = append(gpus, id)
			}
		}
		if len(gpus) == 0 || e.claimAccounted(c, now) {
			continue
		}
		slices.Sort(gpus)
		ids := make([]string, len(gpus))
		for i, g := range gpus {
			ids[i] = fmt.Sprintf(`{"id":%d}`, g)
		}
		dec := fmt.Sprintf(`{"policy":"None","cpuset":"","numaNodes":[],"gpus":[%s],"memoryMiB":{}}`, strings.Join(ids, ","))
		p := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: ClaimHolderPrefix + c.Name, UID: c.UID,
				ResourceVersion: c.ResourceVersion, Annotations: map[string]string{kube.AnnotationAllocation: dec}},
			Spec: v1.PodSpec{NodeName: node},
		}
		now[podKey(p)] = p
		if e.consumersGone(c) {
			releasing = append(releasing, podKey(p))
		}
	}
	if len(releasing) > 0 {
		e.releasing.Store(node, releasing)
	} else {
		e.releasing.Delete(node)
	}
}

// consumersGone reports whether the claim was reserved for pods that are
// all gone (deleted, or finished): the resourceclaim controller is about
// to deallocate it.
func (e *events) consumersGone(c *resourceapi.ResourceClaim) bool {
	if len(c.Status.ReservedFor) == 0 {
		return false
	}
	for _, ref := range c.Status.ReservedFor {
		if ref.Resource != "pods" || ref.APIGroup != "" {
			return false
		}
		obj, ok, err := e.pods.GetByKey(c.Namespace + "/" + ref.Name)
		if err != nil {
			return false
		}
		if p, isPod := obj.(*v1.Pod); ok && isPod && p.UID == ref.UID && !terminal(p) {
			return false
		}
	}
	return true
}

// releasingOn returns the stand-ins of the node's claims whose pods are
// gone (see [events.consumersGone]).
func (e *events) releasingOn(node string) []string {
	if v, ok := e.releasing.Load(node); ok {
		return v.([]string)
	}
	return nil
}

// ReasonTextReleasing is the refusal of a node where the pod fits once the
// claims of deleted pods are deallocated: UnschedulableAndUnresolvable, so
// that no preemption evicts more pods meanwhile; the claims' deallocation
// requeues the pod.
const ReasonTextReleasing = Prefix + "waiting for the ResourceClaims of deleted pods to be deallocated"

// waitForReleasing returns the [ReasonTextReleasing] status when the pod,
// refused on the node, would fit there without the claims that are being
// deallocated; nil otherwise.
func (pl *Plugin) waitForReleasing(s *podState, node string) *fwk.Status {
	if pl.ev == nil {
		return nil
	}
	rel := pl.ev.releasingOn(node)
	if len(rel) == 0 {
		return nil
	}
	if err := s.prepared.FilterWhatIf(node, scheduler.WhatIf{Removed: rel}); err != nil {
		return nil
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonTextReleasing)
}

// claimAccounted reports whether a pod accounts the claim's GPUs itself.
func (e *events) claimAccounted(c *resourceapi.ResourceClaim, now map[string]*v1.Pod) bool {
	for _, ref := range c.Status.ReservedFor {
		if ref.Resource != "pods" || ref.APIGroup != "" {
			continue
		}
		key := c.Namespace + "/" + ref.Name
		if p, ok := now[key]; ok && p.UID == ref.UID && p.Annotations[kube.AnnotationAllocation] != "" {
			return true
		}
		if st, ok := e.pl.cache.Pod(key); ok && !st.Bound {
			return true
		}
	}
	return false
}
