package numaplace

import (
	"context"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/numaplace/numaplace/allocator"
)

// The cut of a node's ResourceSlices down to numaplace's decision, which
// Filter makes for every feasible node of a DRA pod (draPod.nodeSlices).
// The structured allocator reads its slices and never writes to them
// (DynamicResources hands it the informers' own objects; its conversion
// to the allocator's types shares the devices' attribute and capacity
// maps), so the cut shares everything with the published slices: each
// numaplace slice becomes a new ResourceSlice value whose Devices hold
// copies of the kept Device values only. Where those devices sit in each
// slice is read once per slice object and kept per node (sliceCuts): a
// slice changed by its driver or by a DeviceTaintRule is a new object
// and is read again.

// sliceDevs is where numaplace's devices sit in one ResourceSlice of its
// driver: the positions in Spec.Devices of the GPUs by their index, and
// the NICs.
type sliceDevs struct {
	gpus map[int][]int
	nics []nicDev
	// sel holds the results of selectors on the devices, by position
	// (selectorsMatch).
	mu  sync.Mutex
	sel map[selKey][]int8
}

// nicDev is one NIC of a slice: its position, InfiniBand device name and
// NUMA node (hasNUMA false when the device has no numaNode attribute).
type nicDev struct {
	pos     int
	ibdev   string
	numa    int64
	hasNUMA bool
}

// readSliceDevs reads the positions of numaplace's GPUs and NICs in the
// slice, with the attributes nodeSlices always read (type, index,
// ibDevice, numaNode).
func readSliceDevs(s *resourceapi.ResourceSlice) *sliceDevs {
	sd := &sliceDevs{gpus: map[int][]int{}}
	for i := range s.Spec.Devices {
		dev := &s.Spec.Devices[i]
		switch attrString(dev, attrType) {
		case "gpu":
			if idx, ok := attrInt(dev, attrIndex); ok && idx == int64(int(idx)) {
				sd.gpus[int(idx)] = append(sd.gpus[int(idx)], i)
			}
		case "nic":
			n, ok := attrInt(dev, attrNUMANode)
			sd.nics = append(sd.nics, nicDev{pos: i, ibdev: attrString(dev, attrIBDevice), numa: n, hasNUMA: ok})
		}
	}
	return sd
}

// sliceCuts keeps, per node, the sliceDevs of the numaplace slices it
// last saw for the node. The zero value is ready; it is safe for
// concurrent use (Filter runs for many nodes at once), and the lock is
// held for map look-ups and stores only, never while a slice is read.
type sliceCuts struct {
	mu    sync.Mutex
	nodes map[string]map[*resourceapi.ResourceSlice]*sliceDevs
}

// forNode returns the sliceDevs of each numaplace slice of the node (the
// published slices, in any order): those known from an earlier call when
// the node's numaplace slices are the same objects, else read anew and
// kept. A nil receiver reads them without keeping them.
func (c *sliceCuts) forNode(node string, published []*resourceapi.ResourceSlice) map[*resourceapi.ResourceSlice]*sliceDevs {
	ours := 0
	for _, s := range published {
		if s.Spec.Driver == DRADriver {
			ours++
		}
	}
	if c != nil {
		c.mu.Lock()
		known := c.nodes[node]
		c.mu.Unlock()
		if len(known) == ours {
			hit := true
			for _, s := range published {
				if s.Spec.Driver == DRADriver && known[s] == nil {
					hit = false
					break
				}
			}
			if hit {
				return known
			}
		}
	}
	fresh := make(map[*resourceapi.ResourceSlice]*sliceDevs, ours)
	for _, s := range published {
		if s.Spec.Driver == DRADriver {
			fresh[s] = readSliceDevs(s)
		}
	}
	if c != nil {
		c.mu.Lock()
		if c.nodes == nil {
			c.nodes = map[string]map[*resourceapi.ResourceSlice]*sliceDevs{}
		}
		c.nodes[node] = fresh
		c.mu.Unlock()
	}
	return fresh
}

// forget drops the nodes that publish no slice now (byNode is the
// cluster's slices by node).
func (c *sliceCuts) forget(byNode map[string][]*resourceapi.ResourceSlice) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.nodes) <= len(byNode) {
		return
	}
	for n := range c.nodes {
		if _, ok := byNode[n]; !ok {
			delete(c.nodes, n)
		}
	}
}

// cutSlice returns the slice s with only the devices at the kept
// positions (ascending), sharing all else with s.
func cutSlice(s *resourceapi.ResourceSlice, kept []int) *resourceapi.ResourceSlice {
	c := &resourceapi.ResourceSlice{TypeMeta: s.TypeMeta, ObjectMeta: s.ObjectMeta, Spec: s.Spec}
	c.Spec.Devices = make([]resourceapi.Device, len(kept))
	for i, p := range kept {
		c.Spec.Devices[i] = s.Spec.Devices[p]
	}
	return c
}

// cutSets returns the NICs the decision names (devices.rdma), or nil,
// and the NUMA nodes of its span, or nil.
func cutSets(a allocator.Allocation) (nics sets.Set[string], span sets.Set[int64]) {
	if names := a.Devices[rdmaClass]; len(names) > 0 {
		nics = sets.New(names...)
	}
	if ids := a.NUMANodes(); len(ids) > 0 {
		span = sets.New[int64]()
		for _, id := range ids {
			span.Insert(int64(id))
		}
	}
	return nics, span
}

// keep appends to kept the positions of the slice's devices that the cut
// for the decision a keeps (its GPUs; its NICs when it names some, else
// the NICs on the NUMA nodes of its span, or all NICs without a span),
// ascending, and returns it.
func (sd *sliceDevs) keep(kept []int, a allocator.Allocation, nics sets.Set[string], span sets.Set[int64]) []int {
	for _, g := range a.GPUs {
		kept = append(kept, sd.gpus[g]...)
	}
	for _, n := range sd.nics {
		switch {
		case nics != nil:
			if nics.Has(n.ibdev) {
				kept = append(kept, n.pos)
			}
		case span == nil || n.hasNUMA && span.Has(n.numa):
			kept = append(kept, n.pos)
		}
	}
	slices.Sort(kept)
	return slices.Compact(kept) // a GPU named twice in the decision
}

// nodeSlices returns the slices the allocator sees for the pod on the
// node: numaplace's devices cut down to the decision (its GPUs, and its
// NICs (devices.rdma) when it names some, else the NICs on the NUMA nodes
// of its span; all NICs for a pod without a span), every other driver's
// devices as published. Every slice of numaplace's pools stays (some
// perhaps with no device), so that the pools stay complete.
func (d *draPod) nodeSlices(node string, a allocator.Allocation) []*resourceapi.ResourceSlice {
	published := d.byNode[node]
	devs := d.cuts.forNode(node, published)
	nics, span := cutSets(a)
	out := make([]*resourceapi.ResourceSlice, 0, len(published)+len(d.anyNode))
	var kept []int
	for _, s := range published {
		if s.Spec.Driver != DRADriver {
			out = append(out, s)
			continue
		}
		kept = devs[s].keep(kept[:0], a, nics, span)
		out = append(out, cutSlice(s, kept))
	}
	for _, s := range d.anyNode {
		if s.Spec.Driver != DRADriver {
			out = append(out, s)
		}
	}
	return out
}

// plainRequest is one request of a claim that claimsFit may decide
// without the structured allocator: ExactCount devices of a numaplace GPU
// class, with CEL selectors and tolerations and nothing else (no capacity
// or admin access).
type plainRequest struct {
	class       string
	count       int64
	tolerations []resourceapi.DeviceToleration
	// selectors are the request's own CEL selectors, exprs their
	// expressions joined (the key of their results).
	selectors []resourceapi.DeviceSelector
	exprs     string
}

// plainRequests returns the requests of the claims as plainRequests, and
// false when some claim has more than that: a constraint plainConstraints
// refuses, a request with firstAvailable, a selector other than CEL,
// capacity, adminAccess, another class or allocation mode, a count below
// one, or more devices than an allocation holds.
func plainRequests(claims []*resourceapi.ResourceClaim) ([]plainRequest, bool) {
	if _, ok := plainConstraints(claims); !ok {
		return nil, false
	}
	var out []plainRequest
	for _, c := range claims {
		total := int64(0)
		for _, r := range c.Spec.Devices.Requests {
			x := r.Exactly
			if x == nil || len(r.FirstAvailable) > 0 || x.Capacity != nil || x.AdminAccess != nil ||
				x.AllocationMode != resourceapi.DeviceAllocationModeExactCount || x.Count < 1 || x.Count > resourceapi.AllocationResultsMaxSize {
				return nil, false
			}
			if _, gpu := numaplaceClass(x.DeviceClassName); !gpu {
				return nil, false
			}
			exprs := make([]string, len(x.Selectors))
			for i, sel := range x.Selectors {
				if sel.CEL == nil {
					return nil, false
				}
				exprs[i] = sel.CEL.Expression
			}
			total += x.Count
			out = append(out, plainRequest{class: x.DeviceClassName, count: x.Count, tolerations: x.Tolerations,
				selectors: x.Selectors, exprs: strings.Join(exprs, "\x00")})
		}
		if total > resourceapi.AllocationResultsMaxSize {
			return nil, false
		}
	}
	return out, true
}

// plainConstraint is a constraint claimsFit may check itself: a
// matchAttribute or distinctAttribute of the only claim to allocate that
// applies to all of its requests, so that it bears on every device the
// claim gets.
type plainConstraint struct {
	attr     resourceapi.FullyQualifiedName
	distinct bool
}

// plainConstraints returns the claims' constraints as plainConstraints,
// and false when some constraint is not one: a constraint when several
// claims are allocated together, one naming only some of its claim's
// requests, or one that is neither a matchAttribute nor a
// distinctAttribute.
func plainConstraints(claims []*resourceapi.ResourceClaim) ([]plainConstraint, bool) {
	var out []plainConstraint
	for _, c := range claims {
		for _, k := range c.Spec.Devices.Constraints {
			if len(claims) > 1 {
				return nil, false
			}
			if len(k.Requests) > 0 {
				for _, r := range c.Spec.Devices.Requests {
					if !slices.Contains(k.Requests, r.Name) {
						return nil, false
					}
				}
			}
			switch {
			case k.MatchAttribute != nil && k.DistinctAttribute == nil:
				out = append(out, plainConstraint{attr: *k.MatchAttribute})
			case k.DistinctAttribute != nil && k.MatchAttribute == nil:
				out = append(out, plainConstraint{attr: *k.DistinctAttribute, distinct: true})
			default:
				return nil, false
			}
		}
	}
	return out, true
}

// holds reports whether the constraint holds for the devices (all of one
// claim, of numaplace's driver), as the structured allocator judges it
// for single values: every device has the attribute (by its fully
// qualified name, or by its short name when the domain is the driver's),
// and their values are all equal (matchAttribute) or pairwise different
// (distinctAttribute), values of different types differing. A value that
// is a list, or of no known type, is not judged here: false.
func (k plainConstraint) holds(devs []*resourceapi.Device) bool {
	vals := make([]resourceapi.DeviceAttribute, 0, len(devs))
	for _, dev := range devs {
		a, ok := dev.Attributes[resourceapi.QualifiedName(k.attr)]
		if !ok {
			if i := strings.IndexByte(string(k.attr), '/'); i > 0 && string(k.attr[:i]) == DRADriver {
				a, ok = dev.Attributes[resourceapi.QualifiedName(k.attr[i+1:])]
			}
		}
		if !ok || !singleValue(a) {
			return false
		}
		for _, b := range vals {
			if sameValue(a, b) == k.distinct {
				return false
			}
		}
		if !k.distinct && len(vals) > 0 {
			continue // equal to the first, so to all
		}
		vals = append(vals, a)
	}
	return true
}

// singleValue reports whether the attribute holds exactly one value of
// one of the four single types (no list).
func singleValue(a resourceapi.DeviceAttribute) bool {
	n := 0
	for _, set := range []bool{a.IntValue != nil, a.BoolValue != nil, a.StringValue != nil, a.VersionValue != nil} {
		if set {
			n++
		}
	}
	return n == 1 && a.IntValues == nil && a.BoolValues == nil && a.StringValues == nil
}

// sameValue reports whether two single-valued attributes have the same
// type and value.
func sameValue(a, b resourceapi.DeviceAttribute) bool {
	switch {
	case a.IntValue != nil:
		return b.IntValue != nil && *a.IntValue == *b.IntValue
	case a.BoolValue != nil:
		return b.BoolValue != nil && *a.BoolValue == *b.BoolValue
	case a.StringValue != nil:
		return b.StringValue != nil && *a.StringValue == *b.StringValue
	default:
		return b.VersionValue != nil && *a.VersionValue == *b.VersionValue
	}
}

// plainDevice reports whether nothing but its attributes, capacity and
// taints bears on allocating the device to a plainRequest: it may not be
// shared, consumes no counters, has no node selection or binding
// conditions of its own, and its capacity has no request policy and no
// negative value.
func plainDevice(d *resourceapi.Device) bool {
	if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations || len(d.ConsumesCounters) > 0 ||
		d.NodeName != nil || d.NodeSelector != nil || d.AllNodes != nil || d.BindsToNode != nil && *d.BindsToNode ||
		len(d.BindingConditions) > 0 || len(d.BindingFailureConditions) > 0 || len(d.NodeAllocatableResources) > 0 {
		return false
	}
	for _, c := range d.Capacity {
		if c.RequestPolicy != nil || c.Value.Sign() < 0 {
			return false
		}
	}
	return true
}

// plainSlice reports whether the slice is the node's own, whole: no
// per-device node selection, no shared counters, no other node selection.
func plainSlice(s *resourceapi.ResourceSlice) bool {
	return s.Spec.PerDeviceNodeSelection == nil && len(s.Spec.SharedCounters) == 0 && s.Spec.NodeSelector == nil &&
		(s.Spec.AllNodes == nil || !*s.Spec.AllNodes)
}

// selKey names a list of selectors whose results sliceDevs keeps: a
// class's (the class object; a changed class is a new object), or a
// request's (its expressions).
type selKey struct {
	class *resourceapi.DeviceClass
	exprs string
}

// Results of selectors on a device, as sliceDevs keeps them.
const (
	selUnknown int8 = iota
	selMatch
	selNoMatch
)

// selectorsMatch reports whether the CEL selectors (a class's or a
// request's, named by key) all select the device at position pos of slice
// s, as the structured allocator evaluates them (in order, the first that
// does not match decides); ok is false when one fails to compile or to
// evaluate. Results are kept per key.
func (sd *sliceDevs) selectorsMatch(ctx context.Context, cache *cel.Cache, key selKey, selectors []resourceapi.DeviceSelector, s *resourceapi.ResourceSlice, pos int) (match, ok bool) {
	sd.mu.Lock()
	if r := sd.sel[key]; r != nil && r[pos] != selUnknown {
		sd.mu.Unlock()
		return r[pos] == selMatch, true
	}
	sd.mu.Unlock()
	dev := &s.Spec.Devices[pos]
	match = true
	for _, sel := range selectors {
		if sel.CEL == nil {
			return false, false
		}
		expr := cache.GetOrCompile(sel.CEL.Expression)
		if expr.Error != nil {
			return false, false
		}
		m, _, err := expr.DeviceMatches(ctx, cel.Device{Driver: s.Spec.Driver, AllowMultipleAllocations: dev.AllowMultipleAllocations,
			Attributes: dev.Attributes, Capacity: dev.Capacity})
		if err != nil {
			return false, false
		}
		if !m {
			match = false
			break
		}
	}
	sd.mu.Lock()
	defer sd.mu.Unlock()
	if sd.sel == nil || len(sd.sel) >= 16 { // classes replaced, claims gone: forget the old ones
		sd.sel = map[selKey][]int8{}
	}
	r := sd.sel[key]
	if r == nil {
		r = make([]int8, len(s.Spec.Devices))
		sd.sel[key] = r
	}
	r[pos] = selNoMatch
	if match {
		r[pos] = selMatch
	}
	return match, true
}

// taintAllows reports whether the request may be given a device with
// these taints, as the structured allocator reads them: each NoSchedule
// or NoExecute taint is tolerated by one of the request's tolerations.
func taintAllows(taints []resourceapi.DeviceTaint, tols []resourceapi.DeviceToleration) bool {
	for _, t := range taints {
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tols, func(tol resourceapi.DeviceToleration) bool { return resourceclaim.ToleratesTaint(tol, t) }) {
			return false
		}
	}
	return true
}

// poolSeen is one pool of a node's slices as claimsFit counts them.
type poolSeen struct {
	name             string
	gen, count, seen int64
}

// claimsFit reports whether the structured allocator, given the node's
// slices cut down to the decision a (nodeSlices), is sure to allocate
// the pod's claims, found without running it; false means "not known",
// and the caller runs the allocator. It is true only when every claim to
// allocate has plainRequests, the node publishes only numaplace's
// slices, every pool of them is complete (one generation, all its slices
// on the node, plain slices, device names unique among the kept
// devices), every kept device is plain, and the kept devices that no
// allocated claim holds are, for every request alike, either selected by
// its class and its own selectors (CEL, evaluated as the allocator does)
// and allowed by its tolerations or not, and number at least the requests' counts. Then the
// allocator's exhaustive first-fit search finds an allocation (every
// request takes any of those devices) and meets no error (every
// selector it may evaluate on these devices was evaluated here without
// one). Reserve always runs the allocator, which writes the allocation.
func (pl *Plugin) claimsFit(ctx context.Context, d *draPod, node *v1.Node, a allocator.Allocation, freed sets.Set[structured.DeviceID]) bool {
	reqs, ok := d.plain, d.plainOK
	if !ok {
		return false
	}
	if extendedOn(d, node) {
		if !d.extPlainOK {
			return false
		}
		reqs = append(slices.Clip(reqs), d.extPlain...)
	}
	if len(reqs) == 0 || len(d.anyNode) > 0 {
		return false
	}
	// A constraint is judged here only for one claim, on single-valued
	// attributes read as the allocator without list attributes, derived
	// attributes or compatibility groups reads them.
	cons := d.plainCons
	if len(cons) > 0 && (extendedOn(d, node) || pl.draFeatures.ListTypeAttributes || pl.draFeatures.DerivedAttributes ||
		pl.draFeatures.CompatibilityGroups) {
		return false
	}
	st := &d.allocated
	if pl.draFeatures.ConsumableCapacity && (len(st.AllocatedSharedDeviceIDs) > 0 || len(st.AggregatedCapacity) > 0) {
		return false
	}
	published := d.byNode[node.Name]
	var pools []poolSeen
	for _, s := range published {
		if s.Spec.Driver != DRADriver || !plainSlice(s) {
			return false
		}
		i := slices.IndexFunc(pools, func(p poolSeen) bool { return p.name == s.Spec.Pool.Name })
		if i < 0 {
			pools = append(pools, poolSeen{name: s.Spec.Pool.Name, gen: s.Spec.Pool.Generation, count: s.Spec.Pool.ResourceSliceCount})
			i = len(pools) - 1
		}
		p := &pools[i]
		if p.gen != s.Spec.Pool.Generation || p.count != s.Spec.Pool.ResourceSliceCount {
			return false
		}
		p.seen++
	}
	for _, p := range pools {
		if p.seen != p.count {
			return false
		}
	}
	classes := make([]*resourceapi.DeviceClass, len(reqs))
	need := int64(0)
	for i, r := range reqs {
		c, err := pl.dra.DeviceClasses().Get(r.class)
		if err != nil || c == nil {
			return false
		}
		classes[i] = c
		need += r.count
	}
	devs := d.cuts.forNode(node.Name, published)
	nics, span := cutSets(a)
	var kept []int
	var ids []structured.DeviceID
	var chosen []*resourceapi.Device // the eligible devices, when a constraint needs them
	eligible := int64(0)
	for _, s := range published {
		sd := devs[s]
		kept = sd.keep(kept[:0], a, nics, span)
		for _, pos := range kept {
			dev := &s.Spec.Devices[pos]
			if !plainDevice(dev) {
				return false
			}
			id := structured.MakeDeviceID(DRADriver, s.Spec.Pool.Name, dev.Name)
			if slices.Contains(ids, id) {
				return false // the allocator would find the pool invalid
			}
			ids = append(ids, id)
			if st.AllocatedDevices.Has(id) && !freed.Has(id) {
				continue
			}
			all, none := true, true
			for i, r := range reqs {
				m, ok := sd.selectorsMatch(ctx, pl.celCache, selKey{class: classes[i]}, classes[i].Spec.Selectors, s, pos)
				if !ok {
					return false
				}
				if m && len(r.selectors) > 0 {
					if m, ok = sd.selectorsMatch(ctx, pl.celCache, selKey{exprs: r.exprs}, r.selectors, s, pos); !ok {
						return false
					}
				}
				if m && pl.draFeatures.DeviceTaints && !taintAllows(dev.Taints, r.tolerations) {
					m = false
				}
				all, none = all && m, none && !m
			}
			switch {
			case all:
				eligible++
				if len(cons) > 0 {
					chosen = append(chosen, dev)
				}
			case !none:
				return false
			}
		}
	}
	if len(cons) == 0 || eligible < need {
		return eligible >= need
	}
	// A constraint that holds for all the eligible devices holds for any
	// of them the allocator takes (equal values stay equal, different
	// ones different); one that does not is left to the allocator's own
	// search, which may find a set of them for which it holds.
	for _, k := range cons {
		if !k.holds(chosen) {
			return false
		}
	}
	return true
}
