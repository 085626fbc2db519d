package numaplace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
)

// DRA: the claims numaplace decides.
const (
	// DRADriver is numaplace-agent's DRA driver, whose devices (gpu-<index>
	// and nic-<ibdev>) numaplace allocates itself.
	DRADriver = "gpu.numaplace.io"
	// ClassGPU, ClassAliyunGPU and ClassNIC are deploy/dra.yaml's
	// DeviceClasses: a claim request naming one is numaplace's.
	ClassGPU       = "gpu.numaplace.io"
	ClassAliyunGPU = "aliyun-gpu.numaplace.io"
	ClassNIC       = "nic.numaplace.io"
	// attrType, attrIndex and attrNUMANode are the device attributes the
	// plugin reads: the driver's type ("gpu" or "nic") and GPU index, and
	// the standard NUMA node.
	attrType     = DRADriver + "/type"
	attrIndex    = DRADriver + "/index"
	attrNUMANode = "resource.kubernetes.io/numaNode"
	// attrIBDevice is a NIC's InfiniBand device name (its ID in the
	// machine's "rdma" class, rdmaClass).
	attrIBDevice = DRADriver + "/ibDevice"
	rdmaClass    = "rdma"
)

// draStateKey is where Reserve keeps the claims' allocations for the
// binding cycle.
const draStateKey fwk.StateKey = Name + "/dra"

// draPod is what PreFilter read of a pod whose ResourceClaims ask for
// numaplace's devices: every claim of the pod, in spec order, the
// unallocated ones, and the cluster's DRA state once for the cycle.
type draPod struct {
	claims     []*resourceapi.ResourceClaim
	consumers  []resourceapi.ResourceClaimConsumerReference // per claim
	toAllocate []int                                        // indexes into claims
	gpus       int                                          // GPUs the numaplace requests ask for
	nics       int                                          // NICs the numaplace requests ask for
	allocated  structured.AllocatedState
	byNode     map[string][]*resourceapi.ResourceSlice // slices local to one node
	anyNode    []*resourceapi.ResourceSlice            // slices of several nodes
	victims    func(keys []string) sets.Set[structured.DeviceID]
	// plain are the requests of the claims to allocate when plainOK
	// (plainRequests: claimsFit may decide them).
	plain   []plainRequest
	plainOK bool
	// plainCons are the constraints of the claims to allocate that
	// claimsFit checks itself (plainConstraints), when plainOK.
	plainCons []plainConstraint
	// extPlain are those of the extended resource claim, when
	// extPlainOK.
	extPlain   []plainRequest
	extPlainOK bool
	// cuts is the plugin's index of numaplace's devices in the slices
	// (dracut.go), or nil.
	cuts *sliceCuts
	// extended is the claim to make for the containers' aliyun.com/gpu
	// on nodes that serve it through DRA (draextended.go), or nil.
	extended *extendedClaim
}

// numaplaceClass reports whether the DeviceClass is one whose devices
// numaplace decides, and whether they are GPUs.
func numaplaceClass(name string) (ours, gpu bool) {
	switch name {
	case ClassGPU, ClassAliyunGPU:
		return true, true
	case ClassNIC:
		return true, false
	}
	return false, false
}

// errDRA marks refusals of a pod's claims that no other node resolves.
var errDRA = errors.New("ResourceClaims")

// readDRA reads the pod's claims: nil when none asks for a numaplace
// class (DynamicResources handles the pod, see [DRAName]); an error
// wrapping errDRA naming the claim and request numaplace cannot honour.
func (pl *Plugin) readDRA(pod *v1.Pod) (*draPod, error) {
	if pl.dra == nil {
		return nil, nil
	}
	ext, err := pl.readExtended(pod)
	if err != nil {
		return nil, err
	}
	if len(pod.Spec.ResourceClaims) == 0 && ext == nil {
		return nil, nil
	}
	claims := make([]*resourceapi.ResourceClaim, 0, len(pod.Spec.ResourceClaims))
	consumers := make([]resourceapi.ResourceClaimConsumerReference, 0, len(pod.Spec.ResourceClaims))
	ours := ext != nil
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, mustCheckOwner, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return nil, fmt.Errorf("%w: pod claim %q: %v", errDRA, pc.Name, err)
		}
		if name == nil {
			continue // no claim needed (a template that made none)
		}
		claim, err := pl.dra.ResourceClaims().Get(pod.Namespace, *name)
		if err != nil {
			return nil, fmt.Errorf("%w: ResourceClaim %s/%s of pod claim %q: %v", errDRA, pod.Namespace, *name, pc.Name, err)
		}
		if mustCheckOwner {
			if err := resourceclaim.IsForPod(pod, claim, false); err != nil {
				return nil, fmt.Errorf("%w: %v", errDRA, err)
			}
		}
		if claim.DeletionTimestamp != nil {
			return nil, fmt.Errorf("%w: ResourceClaim %s is being deleted", errDRA, klog.KObj(claim))
		}
		ref, err := resourceclaim.BindTo(pod, nil, pc)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errDRA, err)
		}
		claims = append(claims, claim)
		consumers = append(consumers, ref)
		for _, r := range claim.Spec.Devices.Requests {
			if r.Exactly != nil {
				if o, _ := numaplaceClass(r.Exactly.DeviceClassName); o {
					ours = true
				}
			}
			for _, sr := range r.FirstAvailable {
				if o, _ := numaplaceClass(sr.DeviceClassName); o {
					ours = true
				}
			}
		}
	}
	if !ours {
		return nil, nil
	}
	d := &draPod{claims: claims, consumers: consumers, extended: ext}
	for i, claim := range claims {
		if claim.Status.Allocation != nil {
			if usesDriver(claim.Status.Allocation) {
				return nil, fmt.Errorf("%w: ResourceClaim %s is allocated already (to %s): numaplace decides only the claims it allocates "+
					"for the pod, never a claim shared with another pod or allocated before", errDRA, klog.KObj(claim), devicesOf(claim.Status.Allocation))
			}
			if !resourceclaim.CanBeReserved(claim) && !resourceclaim.IsReservedForPod(pod, claim, false) {
				return nil, fmt.Errorf("%w: ResourceClaim %s is in use by %d consumers", errDRA, klog.KObj(claim), len(claim.Status.ReservedFor))
			}
			continue
		}
		if pl.dra.ResourceClaims().GetPendingAllocation(claim.UID) != nil {
			return nil, fmt.Errorf("%w: ResourceClaim %s is being allocated for another pod", errDRA, klog.KObj(claim))
		}
		d.toAllocate = append(d.toAllocate, i)
		for _, r := range claim.Spec.Devices.Requests {
			if len(r.FirstAvailable) > 0 {
				for _, sr := range r.FirstAvailable {
					if o, _ := numaplaceClass(sr.DeviceClassName); o {
						return nil, fmt.Errorf("%w: ResourceClaim %s, request %q: firstAvailable with class %s is not supported: "+
							"numaplace decides how many GPUs and NICs a pod gets, name one count in exactly", errDRA, klog.KObj(claim), r.Name, sr.DeviceClassName)
					}
				}
				continue
			}
			if r.Exactly == nil {
				return nil, fmt.Errorf("%w: ResourceClaim %s, request %q: neither exactly nor firstAvailable", errDRA, klog.KObj(claim), r.Name)
			}
			o, gpu := numaplaceClass(r.Exactly.DeviceClassName)
			if !o {
				continue
			}
			if r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess {
				return nil, fmt.Errorf("%w: ResourceClaim %s, request %q: adminAccess to class %s is not supported", errDRA, klog.KObj(claim), r.Name, r.Exactly.DeviceClassName)
			}
			switch r.Exactly.AllocationMode {
			case resourceapi.DeviceAllocationModeExactCount, "":
			default:
				return nil, fmt.Errorf("%w: ResourceClaim %s, request %q: allocationMode %s of class %s is not supported: "+
					"numaplace places a count of devices, use allocationMode ExactCount", errDRA, klog.KObj(claim), r.Name, r.Exactly.AllocationMode, r.Exactly.DeviceClassName)
			}
			n := r.Exactly.Count
			if n == 0 {
				n = 1
			}
			if n > 1<<12 {
				return nil, fmt.Errorf("%w: ResourceClaim %s, request %q: %d devices", errDRA, klog.KObj(claim), r.Name, n)
			}
			if gpu {
				d.gpus += int(n)
			} else {
				d.nics += int(n)
			}
		}
	}
	toAllocate := make([]*resourceapi.ResourceClaim, 0, len(d.toAllocate))
	for _, k := range d.toAllocate {
		toAllocate = append(toAllocate, claims[k])
	}
	d.plain, d.plainOK = plainRequests(toAllocate)
	d.plainCons, _ = plainConstraints(toAllocate)
	if ext != nil {
		d.extPlain, d.extPlainOK = plainRequests([]*resourceapi.ResourceClaim{ext.claim})
		d.extPlainOK = d.extPlainOK && len(ext.claim.Spec.Devices.Constraints) == 0
	}
	if err := pl.gatherDRA(d); err != nil {
		return nil, err
	}
	return d, nil
}

// usesDriver reports whether the allocation names a device of numaplace's
// driver.
func usesDriver(a *resourceapi.AllocationResult) bool {
	return slices.ContainsFunc(a.Devices.Results, func(r resourceapi.DeviceRequestAllocationResult) bool { return r.Driver == DRADriver })
}

func devicesOf(a *resourceapi.AllocationResult) string {
	var out []string
	for _, r := range a.Devices.Results {
		out = append(out, r.Pool+"/"+r.Device)
	}
	return strings.Join(out, ", ")
}

// gatherDRA reads the devices allocated now (claims in the assume cache and
// pending allocations) and the ResourceSlices by node, once for the cycle.
func (pl *Plugin) gatherDRA(d *draPod) error {
	var st *structured.AllocatedState
	var err error
	for range 100 { // a concurrent modification of the tracker: try again
		if pl.draFeatures.ConsumableCapacity {
			st, err = pl.dra.ResourceClaims().GatherAllocatedState()
		} else {
			var ids sets.Set[structured.DeviceID]
			ids, err = pl.dra.ResourceClaims().ListAllAllocatedDevices()
			st = &structured.AllocatedState{AllocatedDevices: ids, AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
				AggregatedCapacity: structured.NewConsumedCapacityCollection()}
		}
		if err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("gathering the allocated devices: %w", err)
	}
	if st == nil {
		return errors.New("gathering the allocated devices: none returned")
	}
	d.allocated = *st
	all, err := pl.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return fmt.Errorf("listing ResourceSlices: %w", err)
	}
	d.byNode = map[string][]*resourceapi.ResourceSlice{}
	for _, s := range all {
		if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
			d.byNode[*s.Spec.NodeName] = append(d.byNode[*s.Spec.NodeName], s)
		} else {
			d.anyNode = append(d.anyNode, s)
		}
	}
	d.victims = pl.victimDevices
	d.cuts = &pl.cuts
	d.cuts.forget(d.byNode)
	return nil
}

// victimDevices returns the devices that the claims of the pods with the
// given keys hold alone (reserved for no one else): what a preemption
// dry-run that removes those pods frees.
func (pl *Plugin) victimDevices(keys []string) sets.Set[structured.DeviceID] {
	out := sets.New[structured.DeviceID]()
	for _, key := range keys {
		obj, ok, err := pl.ev.pods.GetByKey(key)
		if err != nil || !ok {
			continue
		}
		p, ok := obj.(*v1.Pod)
		if !ok {
			continue
		}
		for i := range p.Spec.ResourceClaims {
			name, _, err := resourceclaim.Name(p, &p.Spec.ResourceClaims[i])
			if err != nil || name == nil {
				continue
			}
			claim, err := pl.dra.ResourceClaims().Get(p.Namespace, *name)
			if err != nil || claim.Status.Allocation == nil {
				continue
			}
			others := slices.ContainsFunc(claim.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
				return r.UID != p.UID && !slices.ContainsFunc(keys, func(k string) bool { return k == p.Namespace+"/"+r.Name })
			})
			if others {
				continue
			}
			for _, r := range claim.Status.Allocation.Devices.Results {
				out.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
			}
		}
	}
	return out
}

// attrInt reads an integer attribute (the first value of a list).
func attrInt(d *resourceapi.Device, name resourceapi.QualifiedName) (int64, bool) {
	a, ok := d.Attributes[name]
	if !ok {
		if i := strings.LastIndexByte(string(name), '/'); i > 0 && string(name[:i]) == DRADriver {
			a, ok = d.Attributes[name[i+1:]]
		}
	}
	switch {
	case !ok:
		return 0, false
	case a.IntValue != nil:
		return *a.IntValue, true
	case len(a.IntValues) > 0:
		return a.IntValues[0], true
	}
	return 0, false
}

func attrString(d *resourceapi.Device, name resourceapi.QualifiedName) string {
	a, ok := d.Attributes[name]
	if !ok {
		if i := strings.LastIndexByte(string(name), '/'); i > 0 && string(name[:i]) == DRADriver {
			a, ok = d.Attributes[name[i+1:]]
		}
	}
	if !ok || a.StringValue == nil {
		return ""
	}
	return *a.StringValue
}

// allocateClaims allocates the pod's unallocated claims on the node for
// the decision a with the structured allocator over the cut-down slices
// (so that numaplace's GPUs and only those serve the GPU requests, and
// every selector and constraint of the claims is checked by the same code
// as DynamicResources'); freed are devices a preemption dry-run releases.
// A nil result with a nil error means the claims do not admit the
// decision.
func (pl *Plugin) allocateClaims(ctx context.Context, d *draPod, node *v1.Node, a allocator.Allocation, freed sets.Set[structured.DeviceID]) ([]resourceapi.AllocationResult, error) {
	claims := make([]*resourceapi.ResourceClaim, 0, len(d.toAllocate)+1)
	for _, k := range d.toAllocate {
		claims = append(claims, d.claims[k])
	}
	if extendedOn(d, node) {
		claims = append(claims, d.extended.claim)
	}
	if len(claims) == 0 {
		return nil, nil
	}
	st := d.allocated
	if freed.Len() > 0 {
		st.AllocatedDevices = st.AllocatedDevices.Clone().Difference(freed)
	}
	al, err := structured.NewAllocator(ctx, pl.draFeatures, st, pl.dra.DeviceClasses(), d.nodeSlices(node.Name, a), pl.celCache)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := al.Allocate(actx, node, claims)
	if err != nil {
		return nil, err
	}
	if len(res) != len(claims) {
		return nil, nil
	}
	// The claims name GPUs of the decision only (the cut-down offers no
	// other); their GPU requests are what the decision counted for them.
	return res, nil
}

// draRefusal is the Filter status of a node whose slices and the pod's
// claims do not admit numaplace's decision.
// why, when known, names the claim and its constraint or selector at fault
// (explainRefusal).
func draRefusal(why string) *fwk.Status {
	if why != "" {
		return fwk.NewStatus(fwk.Unschedulable, Prefix+"the pod's ResourceClaims do not admit numaplace's devices for its policy: "+why)
	}
	return fwk.NewStatus(fwk.Unschedulable, Prefix+"the pod's ResourceClaims (their selectors, constraints, or the node's published devices) "+
		"do not admit numaplace's devices for its policy")
}

// filterDRA is Filter's part for a pod with numaplace claims, once the
// cache admits the pod on the node: the decision (on the dry-run's node
// when w is set) must be what the claims can be allocated to.
func (pl *Plugin) filterDRA(ctx context.Context, s *podState, node *v1.Node, w *scheduler.WhatIf, withhold func(int) bool) *fwk.Status {
	var freed sets.Set[structured.DeviceID]
	if w != nil && len(w.Removed) > 0 {
		freed = s.dra.victims(w.Removed)
	}
	nics := pl.withholdNICsOn(s, node.Name, freed)
	if withhold != nil || nics != nil {
		if w == nil {
			w = &scheduler.WhatIf{}
		}
		w.WithholdGPU, w.WithholdDevice = withhold, nics
	}
	a, err := s.prepared.Decide(node.Name, w)
	if err != nil {
		return pl.refusal(fwk.Unschedulable, s, node.Name, err)
	}
	if pl.claimsFit(ctx, s.dra, node, a, freed) {
		return nil
	}
	res, err := pl.allocateClaims(ctx, s.dra, node, a, freed)
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("%s: allocating the claims of pod %s on node %s: %w", Name, s.pod.Key(), node.Name, err))
	}
	if res == nil && (len(s.dra.toAllocate) > 0 || extendedOn(s.dra, node)) {
		st := s.dra.allocated
		if freed.Len() > 0 {
			st.AllocatedDevices = st.AllocatedDevices.Clone().Difference(freed)
		}
		why := pl.explainRefusal(ctx, s, node, a, st)
		if v := pl.logger.V(4); v.Enabled() {
			v.Info("The pod's claims do not admit numaplace's decision", "pod", s.pod.Key(), "node", node.Name, "gpus", a.GPUs, "numaNodes", a.NUMANodes(), "why", why)
		}
		return draRefusal(why)
	}
	return nil
}

// draReserved is what Reserve allocated: the claims, their allocations,
// and which were written to the API server.
type draReserved struct {
	claims    []*resourceapi.ResourceClaim // with the allocation, as signalled
	consumers []resourceapi.ResourceClaimConsumerReference
	// others are the pod's claims allocated already, to be reserved for
	// the pod only.
	others, othersConsumers []int
	all                     *draPod
	written                 []*resourceapi.ResourceClaim
	// ext is the extended resource claim to create (in memory, with its
	// allocation), extMappings the pod status's mappings, extCreated the
	// claim once created.
	ext         *resourceapi.ResourceClaim
	extMappings []v1.ContainerExtendedResourceRequest
	extCreated  *resourceapi.ResourceClaim
}

// Clone implements fwk.StateData (the binding cycle's state is not cloned
// concurrently).
func (r *draReserved) Clone() fwk.StateData { return r }

// reserveDRA allocates the claims for the decision Reserve just took and
// tells the claim tracker, so that other pods' cycles see the devices
// taken before the claims are written.
func (pl *Plugin) reserveDRA(ctx context.Context, state fwk.CycleState, s *podState, pod *v1.Pod, nodeName string) *fwk.Status {
	st, ok := pl.cache.Pod(podKey(pod))
	if !ok {
		return fwk.NewStatus(fwk.Error, Name+": the pod's reservation is gone")
	}
	var a allocator.Allocation
	if st.Allocation != nil {
		a = *st.Allocation
	}
	node, err := pl.handle.SnapshotSharedLister().NodeInfos().Get(nodeName)
	if err != nil || node.Node() == nil {
		return fwk.AsStatus(fmt.Errorf("%s: node %s: %v", Name, nodeName, err))
	}
	res, err := pl.allocateClaims(ctx, s.dra, node.Node(), a, nil)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if res == nil && (len(s.dra.toAllocate) > 0 || extendedOn(s.dra, node.Node())) {
		return draRefusal(pl.explainRefusal(ctx, s, node.Node(), a, s.dra.allocated))
	}
	r := &draReserved{all: s.dra}
	if extendedOn(s.dra, node.Node()) {
		c := s.dra.extended.claim.DeepCopy()
		c.Finalizers = append(c.Finalizers, resourceapi.Finalizer)
		c.Status.Allocation = &res[len(res)-1]
		if err := pl.dra.ResourceClaims().SignalClaimPendingAllocation(c.UID, c); err != nil {
			return fwk.AsStatus(fmt.Errorf("%s: the extended resource claim of pod %s: %w", Name, podKey(pod), err))
		}
		r.ext, r.extMappings = c, s.dra.extended.mappings
	}
	for i, k := range s.dra.toAllocate {
		c := s.dra.claims[k].DeepCopy()
		if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
			c.Finalizers = append(c.Finalizers, resourceapi.Finalizer)
		}
		c.Status.Allocation = &res[i]
		if err := pl.dra.ResourceClaims().SignalClaimPendingAllocation(c.UID, c); err != nil {
			pl.unsignal(r)
			return fwk.AsStatus(fmt.Errorf("%s: claim %s: %w", Name, klog.KObj(c), err))
		}
		r.claims = append(r.claims, c)
		r.consumers = append(r.consumers, s.dra.consumers[k])
	}
	for k := range s.dra.claims {
		if !slices.Contains(s.dra.toAllocate, k) {
			r.others = append(r.others, k)
		}
	}
	state.Write(draStateKey, r)
	return nil
}

func (pl *Plugin) unsignal(r *draReserved) {
	for _, c := range r.claims {
		pl.dra.ResourceClaims().MaybeRemoveClaimPendingAllocation(c.UID, true)
	}
	if r.ext != nil {
		pl.dra.ResourceClaims().MaybeRemoveClaimPendingAllocation(r.ext.UID, true)
	}
}

func reservedOf(state fwk.CycleState) *draReserved {
	if state == nil {
		return nil
	}
	d, err := state.Read(draStateKey)
	if err != nil {
		return nil
	}
	r, _ := d.(*draReserved)
	return r
}

// writeClaims writes each allocated claim as DynamicResources does: the
// finalizer (resource.kubernetes.io/delete-protection) by an update when
// it is missing, then status.allocation and status.reservedFor (the pod)
// by one status update; the claims allocated already get the pod added to
// reservedFor. It retries on conflicts with the claim as the API server
// has it, and fails when the claim was allocated or deleted meanwhile.
func (pl *Plugin) writeClaims(ctx context.Context, state fwk.CycleState, pod *v1.Pod) error {
	r := reservedOf(state)
	if r == nil {
		return nil
	}
	client := pl.handle.ClientSet().ResourceV1()
	write := func(claim *resourceapi.ResourceClaim, alloc *resourceapi.AllocationResult, ref resourceapi.ResourceClaimConsumerReference) (*resourceapi.ResourceClaim, error) {
		c := claim.DeepCopy()
		c.Status.Allocation = nil
		refresh := false
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if refresh {
				got, err := client.ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				c = got
			}
			refresh = true
			if c.UID != claim.UID || c.DeletionTimestamp != nil {
				return fmt.Errorf("claim %s was deleted meanwhile", klog.KObj(claim))
			}
			if alloc != nil {
				if c.Status.Allocation != nil {
					return fmt.Errorf("claim %s was allocated elsewhere meanwhile", klog.KObj(c))
				}
				if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
					c.Finalizers = append(c.Finalizers, resourceapi.Finalizer)
					got, err := client.ResourceClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
					if err != nil {
						return err
					}
					c = got
				}
				c.Status.Allocation = alloc.DeepCopy()
			}
			if !slices.ContainsFunc(c.Status.ReservedFor, func(x resourceapi.ResourceClaimConsumerReference) bool { return x.UID == ref.UID }) {
				c.Status.ReservedFor = append(c.Status.ReservedFor, ref)
			}
			got, err := client.ResourceClaims(c.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
			if err != nil {
				return err
			}
			c = got
			return nil
		})
		return c, err
	}
	for _, k := range r.others {
		claim := r.all.claims[k]
		if resourceclaim.IsReservedForPod(pod, claim, false) {
			continue
		}
		c, err := write(claim, nil, r.all.consumers[k])
		if err != nil {
			return fmt.Errorf("reserving claim %s for pod %s: %w", klog.KObj(claim), podKey(pod), err)
		}
		_ = pl.dra.ResourceClaims().AssumeClaimAfterAPICall(c)
	}
	for i, claim := range r.claims {
		c, err := write(r.all.claims[r.all.toAllocate[i]], claim.Status.Allocation, r.consumers[i])
		if err != nil {
			return fmt.Errorf("writing the allocation of claim %s for pod %s: %w", klog.KObj(claim), podKey(pod), err)
		}
		r.written = append(r.written, c)
		if err := pl.dra.ResourceClaims().AssumeClaimAfterAPICall(c); err != nil {
			pl.logger.V(5).Info("Claim not stored in the assume cache", "claim", klog.KObj(c), "err", err)
		}
	}
	if r.ext != nil {
		if err := pl.createExtended(ctx, r, pod); err != nil {
			return err
		}
	}
	pl.unsignal(r)
	return nil
}

// unreserveDRA forgets the pending allocations and takes back the
// allocations written for a pod that was not bound after all (the
// allocation and the pod's reservedFor entry).
func (pl *Plugin) unreserveDRA(ctx context.Context, state fwk.CycleState, pod *v1.Pod) {
	r := reservedOf(state)
	if r == nil {
		return
	}
	pl.unsignal(r)
	pl.deleteExtended(ctx, r)
	client := pl.handle.ClientSet().ResourceV1()
	for _, w := range r.written {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := client.ResourceClaims(w.Namespace).Get(ctx, w.Name, metav1.GetOptions{})
			if err != nil || c.UID != w.UID {
				return err
			}
			c.Status.ReservedFor = slices.DeleteFunc(c.Status.ReservedFor, func(x resourceapi.ResourceClaimConsumerReference) bool { return x.UID == pod.UID })
			if len(c.Status.ReservedFor) == 0 {
				c.Status.Allocation = nil
			}
			_, err = client.ResourceClaims(w.Namespace).UpdateStatus(ctx, c, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			pl.logger.Error(err, "Taking back the allocation of a claim", "claim", klog.KObj(w), "pod", klog.KObj(pod))
		}
		pl.dra.ResourceClaims().AssumedClaimRestore(w.Namespace, w.Name)
	}
	r.written = nil
}

// podForDecision is the pod as the cache reads it: with the GPUs of its
// numaplace claims added to its first container's aliyun.com/gpu (request
// and limit), so that numaplace decides them jointly with the CPUs and
// memory exactly as for a device-plugin pod.
func podForDecision(kp *kube.Pod, gpus int) *kube.Pod {
	if gpus == 0 || len(kp.Containers) == 0 {
		return kp
	}
	q := *kp
	q.Containers = slices.Clone(kp.Containers)
	c := &q.Containers[0]
	add := func(m map[string]string) (map[string]string, error) {
		out := make(map[string]string, len(m)+1)
		for k, v := range m {
			out[k] = v
		}
		have := 0
		if v, ok := out[kube.ResourceAliyunGPU]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("container %s: %s %q is not a whole number", c.Name, kube.ResourceAliyunGPU, v)
			}
			have = n
		}
		out[kube.ResourceAliyunGPU] = strconv.Itoa(have + gpus)
		return out, nil
	}
	var err error
	if c.Requests, err = add(c.Requests); err != nil {
		return kp
	}
	if c.Limits, err = add(c.Limits); err != nil {
		return kp
	}
	return &q
}

// newCELCache is the CEL cache of the plugin's structured allocator.
func newCELCache(f structured.Features) *cel.Cache {
	return cel.NewCache(10, cel.Features{EnableConsumableCapacity: f.ConsumableCapacity, EnableListTypeAttributes: f.ListTypeAttributes})
}

// schedulerWhatIf converts a dry-run's changes of a node for the cache.
func schedulerWhatIf(w *nodeWhatIf) *scheduler.WhatIf {
	if w == nil {
		return nil
	}
	removed := slices.Sorted(maps.Keys(w.removed))
	added := make([]*scheduler.PreparedPod, 0, len(w.added))
	for _, k := range slices.Sorted(maps.Keys(w.added)) {
		added = append(added, w.added[k].prepared)
	}
	return &scheduler.WhatIf{Removed: removed, Added: added}
}
