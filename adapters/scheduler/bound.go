package scheduler

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// MisfitKind says why a pod's accounting on its node is not exactly what
// its decision names.
type MisfitKind string

// The kinds of misfits, from the most to the least serious (a pod has the
// most serious that applies).
const (
	// MisfitLost: the pod's decision names CPUs, GPUs, devices or memory
	// that the node's current machine does not have, reserves, or that an
	// earlier pod's decision (in key order) names too. The pod is accounted
	// with the part that exists and is free; the rest is handed to no one
	// (it does not exist, or another pod holds it).
	MisfitLost MisfitKind = "Lost"
	// MisfitUnplaced: the pod was bound without a decision (by another
	// scheduler) and asks for exclusive CPUs or GPUs, but the node has no
	// room left to predict where the node side put them: it is accounted
	// without them.
	MisfitUnplaced MisfitKind = "Unplaced"
	// MisfitInvalid: the pod cannot be read (kube.ParsePod refuses it, or
	// its decision annotation is malformed). It is accounted by its
	// decision when that can be read, else as a pod without a NUMA spec.
	MisfitInvalid MisfitKind = "Invalid"
)

// Misfit is a pod whose accounting on its node is not exactly its decision.
type Misfit struct {
	// Pod is the pod's key, namespace/name.
	Pod string
	// Kind is the category.
	Kind MisfitKind
	// Reason says what could not be accounted and why, such as "GPU 7 is
	// not on the node's machine".
	Reason string
}

// boundRec is a bound pod as AddPod reads it.
type boundRec struct {
	key  string
	node string
	prio int32
	// pr is the pod as parsed (nil when only its decision can be read).
	pr  *podReq
	req kube.PodRequest
	// dec is the pod's decision and decRaw the annotation it was read
	// from (nil and "" when it has none or it is malformed).
	dec    *kube.Decision
	decRaw string
	// sent is set when decRaw is exactly the decision PreBind returned for
	// the pod's reservation (readBound's sent): dec is not read then
	// unless the record is not that reservation's binding (settle).
	sent *sentDecision
	// invalid says why the pod or its decision could not be read ("" when
	// both could).
	invalid string
}

// readDecision reads decRaw into dec (clearing both when it cannot be
// read) and forgets sent.
func (r *boundRec) readDecision() error {
	r.sent = nil
	d, err := kube.ParseDecision(r.decRaw)
	if err != nil {
		r.dec, r.decRaw = nil, ""
		return err
	}
	r.dec = &d
	return nil
}

// settle reads the decision of a record readBound left unread (sent), as
// readBound reads it for a pod it could parse: a record that is not the
// binding of the reservation the decision was sent for is recorded from
// what its annotation says.
func (r *boundRec) settle() {
	if r.sent == nil {
		return
	}
	if err := r.readDecision(); err != nil {
		r.invalid = decisionUnreadable(err)
	}
}

// decisionUnreadable is the misfit reason of a readable pod whose decision
// cannot be read.
func decisionUnreadable(err error) string {
	return fmt.Sprintf("its decision cannot be read (%v); it is accounted as a pod without one", err)
}

// readBound reads a bound pod: its request and its decision. A pod that
// kube.ParsePod refuses is read from its decision when it has a readable
// one, else as the same pod without its NUMA spec; the error is for a pod
// that cannot be read at all. When the pod's decision annotation is
// exactly sent (the decision PreBind returned for its reservation) and the
// pod can be read, the decision is not parsed here: syncPods records the
// reservation's binding without it, or reads it (boundRec.settle).
func (c *Cache) readBound(p *kube.Pod, sent *sentDecision) (*boundRec, error) {
	if p == nil {
		return nil, fmt.Errorf("%w: no pod (nil)", kube.ErrInvalidPod)
	}
	if p.NodeName == "" {
		return nil, fmt.Errorf("%w: %s", ErrNotBound, p.Key())
	}
	rec := &boundRec{key: p.Key(), node: p.NodeName, prio: p.Priority}
	var decErr error
	raw, hasDec := p.Annotations[kube.AnnotationAllocation]
	if hasDec {
		rec.decRaw = raw
		if sent == nil || sent.raw != raw {
			decErr = rec.readDecision()
		} else {
			rec.sent = sent
		}
	}
	pr, err := c.parse(p)
	if err != nil && rec.sent != nil {
		decErr = rec.readDecision()
	}
	switch {
	case err == nil:
		rec.pr, rec.req = pr, pr.PodRequest
		if decErr != nil {
			rec.invalid = decisionUnreadable(decErr)
		}
	case rec.dec != nil:
		rec.req = decisionRequest(rec.dec)
		rec.invalid = fmt.Sprintf("the pod cannot be read (%v); it is accounted by its decision", err)
	default:
		plain := *p
		plain.Annotations = maps.Clone(p.Annotations)
		for _, k := range []string{kube.AnnotationSpecAlibaba, kube.AnnotationSpecKoordinator, kube.AnnotationCPUSetScheduler, kube.AnnotationAllocation} {
			delete(plain.Annotations, k)
		}
		legacy := c.cfg.Pods.LegacyGPUTopologyAnnotations
		if legacy == nil {
			legacy = []string{kube.DefaultLegacyGPUTopologyAnnotation}
		}
		for _, k := range legacy {
			delete(plain.Annotations, k)
		}
		pr2, err2 := c.parse(&plain)
		if err2 != nil {
			return nil, errors.Join(err, decErr)
		}
		rec.pr, rec.req = pr2, pr2.PodRequest
		why := err.Error()
		if decErr != nil {
			why += "; " + decErr.Error()
		}
		rec.invalid = fmt.Sprintf("the pod cannot be read (%s); it is accounted as a pod without a NUMA spec", why)
	}
	return rec, nil
}

// decisionRequest is what a pod that cannot be read is taken to request:
// what its decision names.
func decisionRequest(d *kube.Decision) kube.PodRequest {
	cpus, _ := numa.ParseCPUSet(d.CPUSet) // checked by ParseDecision
	r := kube.PodRequest{CPUs: cpus.Size(), MilliCPU: int64(cpus.Size()) * 1000, GPUs: len(d.GPUs)}
	r.NUMA = r.CPUs > 0
	r.Spec.Policy, r.Spec.Exclusive = d.Policy, d.Exclusive
	for _, v := range d.MemoryMiB {
		r.MemoryMiB += v
	}
	return r
}

// needsAlloc reports whether the record holds an allocation from the
// allocator when it has no decision (on a node of the kubelet's own policy,
// whether the kubelet's managers give it something).
func (r *boundRec) needsAlloc() bool { return r.pr != nil && r.pr.needsAlloc }

// predicts reports whether a bound pod without a decision, read as pr, is
// placed on ni as the node side would place it (the caller holds ni.mu).
func predicts(ni *nodeInfo, pr *podReq) bool {
	switch {
	case pr == nil:
		return false
	case ni.kpol != "":
		return needsKubelet(ni, pr)
	}
	return pr.needsAlloc
}

// decisionAllocation converts a decision into the allocation to claim on m,
// leaving out (and describing in lost) what m does not have: GPUs matched
// by UUID where both know it, else by ID; memory on NUMA nodes m lacks;
// devices of classes or IDs m lacks. CPUs are kept as they are (the state's
// claim says which are not allocatable).
func decisionAllocation(m *topology.Machine, id string, d *kube.Decision) (a allocator.Allocation, lost []string) {
	cpus, _ := numa.ParseCPUSet(d.CPUSet) // checked by ParseDecision
	a = allocator.Allocation{ID: id, Policy: d.Policy, Exclusive: d.Exclusive, FullPCPUs: d.FullPCPUs, CPUs: cpus}
	byUUID := map[string]int{}
	for _, g := range m.GPUs() {
		if g.UUID != "" {
			byUUID[g.UUID] = g.ID
		}
	}
	var gone []string
	for _, g := range d.GPUs {
		if g.UUID != "" {
			if id, ok := byUUID[g.UUID]; ok {
				a.GPUs = append(a.GPUs, id)
				continue
			}
		}
		gpu, ok := m.GPU(g.ID)
		switch {
		case !ok:
			gone = append(gone, fmt.Sprintf("GPU %d", g.ID))
		case g.UUID != "" && gpu.UUID != "" && gpu.UUID != g.UUID:
			gone = append(gone, fmt.Sprintf("GPU %d (%s; the machine's GPU %d is %s)", g.ID, g.UUID, g.ID, gpu.UUID))
		default:
			a.GPUs = append(a.GPUs, g.ID)
		}
	}
	slices.Sort(a.GPUs)
	a.GPUs = slices.Compact(a.GPUs)
	if len(gone) > 0 {
		lost = append(lost, strings.Join(gone, ", ")+" not on the machine")
	}
	for _, k := range slices.Sorted(maps.Keys(d.MemoryMiB)) {
		v := d.MemoryMiB[k]
		n, _ := strconv.Atoi(k) // checked by ParseDecision
		i, ok := m.NodeIndex(numa.NodeID(n))
		switch {
		case !ok && v > 0:
			lost = append(lost, fmt.Sprintf("%d MiB of memory on NUMA node %d, which the machine does not have", v, n))
		case ok && v > 0:
			a.Memory = append(a.Memory, allocator.NodeMemory{Node: m.NodeID(i), MiB: v})
		}
	}
	slices.SortFunc(a.Memory, func(x, y allocator.NodeMemory) int { return int(x.Node) - int(y.Node) })
	if len(d.Devices) > 0 {
		have := map[string]map[string]bool{}
		for _, dev := range m.Devices() {
			if have[dev.Class] == nil {
				have[dev.Class] = map[string]bool{}
			}
			have[dev.Class][dev.ID] = true
		}
		for _, class := range slices.Sorted(maps.Keys(d.Devices)) {
			for _, id := range d.Devices[class] {
				if !have[class][id] {
					lost = append(lost, fmt.Sprintf("%s device %s not on the machine", class, id))
					continue
				}
				if a.Devices == nil {
					a.Devices = map[string][]string{}
				}
				a.Devices[class] = append(a.Devices[class], id)
			}
		}
	}
	return a, lost
}

// claimAvailable claims on st what a names that is allocatable and free,
// and describes the rest: nothing when a is claimed exactly. held is false
// when nothing at all could be claimed (the state is unchanged).
func claimAvailable(st *allocator.State, m *topology.Machine, a allocator.Allocation) (got allocator.Allocation, held bool, lost []string) {
	if got, err := st.Claim(a); err == nil {
		return got, true, nil
	}
	owner := func(match func(*allocator.Allocation) bool) string {
		var ids []string
		for _, l := range st.Live() {
			if match(&l) {
				ids = append(ids, l.ID)
			}
		}
		return strings.Join(ids, ", ")
	}
	b := a.Clone()
	allocatable := m.CPUs().Difference(m.ReservedCPUs())
	free := st.FreeCPUs()
	if missing := a.CPUs.Difference(allocatable); !missing.IsEmpty() {
		lost = append(lost, fmt.Sprintf("CPUs %s not allocatable on the machine (not there or reserved)", missing))
	}
	if taken := a.CPUs.Intersection(allocatable).Difference(free); !taken.IsEmpty() {
		lost = append(lost, fmt.Sprintf("CPUs %s held by %s", taken,
			owner(func(l *allocator.Allocation) bool { return !l.CPUs.Intersection(taken).IsEmpty() })))
	}
	b.CPUs = a.CPUs.Intersection(free)
	if b.CPUs.Size() != a.CPUs.Size() {
		b.FullPCPUs = false // what is left need not be whole cores
	}
	heldGPU := map[int]string{}
	heldDev := map[string]map[string]string{}
	for _, l := range st.Live() {
		for _, g := range l.GPUs {
			heldGPU[g] = l.ID
		}
		for class, ids := range l.Devices {
			if heldDev[class] == nil {
				heldDev[class] = map[string]string{}
			}
			for _, id := range ids {
				heldDev[class][id] = l.ID
			}
		}
	}
	b.GPUs = b.GPUs[:0]
	for _, g := range a.GPUs {
		if who, ok := heldGPU[g]; ok {
			lost = append(lost, fmt.Sprintf("GPU %d held by %s", g, who))
			continue
		}
		b.GPUs = append(b.GPUs, g)
	}
	for class, ids := range a.Devices {
		keep := b.Devices[class][:0]
		for _, id := range ids {
			if who, ok := heldDev[class][id]; ok {
				lost = append(lost, fmt.Sprintf("%s device %s held by %s", class, id, who))
				continue
			}
			keep = append(keep, id)
		}
		b.Devices[class] = keep
	}
	b.Memory = b.Memory[:0]
	for _, x := range a.Memory {
		var left int64
		if i, ok := m.NodeIndex(x.Node); ok {
			left = st.NodeFree(i)["memory"]
		}
		if x.MiB > left {
			lost = append(lost, fmt.Sprintf("%d MiB of memory on NUMA node %d, %d MiB free", x.MiB, x.Node, left))
			if left <= 0 {
				continue
			}
			x.MiB = left
		}
		b.Memory = append(b.Memory, x)
	}
	if b.CPUs.IsEmpty() && len(b.GPUs) == 0 && len(b.Memory) == 0 && !hasDevices(b.Devices) {
		return allocator.Allocation{}, false, lost
	}
	got, err := st.Claim(b)
	if err != nil { // cannot happen: b is what is free
		return allocator.Allocation{}, false, append(lost, err.Error())
	}
	return got, true, lost
}

func hasDevices(d map[string][]string) bool {
	for _, ids := range d {
		if len(ids) > 0 {
			return true
		}
	}
	return false
}

// inexact reports whether pi makes its node's accounting depend on the
// order the pods came in: a prediction (a bound pod without a decision that
// holds an allocation, or could not get one) or a decision only partly
// held.
func (pi *podInfo) inexact() bool {
	return pi.bound && (pi.predicted || pi.misfit == MisfitLost || pi.misfit == MisfitUnplaced)
}

// insertLocked adds pi to its node's and the cache's maps, unaccounted
// (the caller accounts it, or rebuilds the node). The caller holds podsMu
// and the node's lock.
func (c *Cache) insertLocked(ni *nodeInfo, pi *podInfo) {
	ni.pods[pi.key] = pi
	c.pods[pi.key] = pi
	if pi.inexact() {
		ni.inexact++
	}
}

// forgetLocked removes pi from its node (giving back what it holds) and
// from the cache; it reports whether the node must be rebuilt because its
// accounting depended on pi (the node was inexact). The caller holds podsMu
// and the node's lock.
func (c *Cache) forgetLocked(ni *nodeInfo, pi *podInfo) (rebuild bool) {
	rebuild = ni.inexact > 0
	if pi.alloc {
		_ = ni.state.Release(pi.key) // cannot fail: the cache keeps them in step
	}
	ni.account(pi, -1)
	if pi.inexact() {
		ni.inexact--
	}
	delete(ni.pods, pi.key)
	delete(c.pods, pi.key)
	return rebuild
}

// bindLocked records rec on ni (the caller holds podsMu and ni's lock and
// has removed any earlier record of the pod): incrementally when the
// node's accounting is exact and stays so, else by inserting the record and
// asking for a rebuild.
func (c *Cache) bindLocked(ni *nodeInfo, rec *boundRec) (rebuild bool) {
	pi := &podInfo{key: rec.key, node: ni, req: rec.req, bound: true, prio: rec.prio, pr: rec.pr,
		dec: rec.dec, decRaw: rec.decRaw, invalid: rec.invalid}
	if rec.invalid != "" {
		pi.misfit, pi.reason = MisfitInvalid, rec.invalid
	}
	if ni.inexact > 0 {
		c.insertLocked(ni, pi)
		return true
	}
	switch {
	case rec.dec != nil:
		a, lost := decisionAllocation(ni.m, rec.key, rec.dec)
		if len(lost) > 0 {
			c.insertLocked(ni, pi)
			return true
		}
		got, err := ni.state.Claim(a)
		if err != nil {
			c.insertLocked(ni, pi)
			return true
		}
		pi.alloc, pi.cpus, pi.gpus = true, got.CPUs.Size(), len(got.GPUs)
	case predicts(ni, rec.pr):
		// The only prediction on a node of exact claims: the same as the
		// node rebuilt in key order.
		c.placePredictionLocked(ni, pi)
	}
	ni.account(pi, 1)
	c.insertLocked(ni, pi)
	return false
}

// placePredictionLocked places a bound pod without a decision as the node
// side would (the allocator's choice on the node's state), or marks it
// unplaced.
func (c *Cache) placePredictionLocked(ni *nodeInfo, pi *podInfo) {
	pi.predicted = true
	if err := c.placeLocked(ni, pi.pr, pi, true); err != nil {
		if pi.misfit != MisfitLost {
			pi.misfit = MisfitUnplaced
			pi.reason = joinReason(fmt.Sprintf("it has no %s annotation and the node has no room to predict its placement: %v",
				kube.AnnotationAllocation, err), pi.invalid)
		}
	}
}

func joinReason(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "; ")
}

// rebuildLocked recomputes the node's allocation state and totals from its
// pods' records, so that the accounting is a function of the node's machine
// and its bound pods, whatever order they came in: first every bound pod
// with a decision, by key (claiming what exists and is free of it), then
// the reservations of scheduling cycles (exactly what they hold on the old
// state, or they are dropped), then the bound pods without a decision, by
// key (placed by the allocator as the node side would). oldM and old are the
// machine and state the reservations were made on. The caller holds podsMu
// and the node's write lock; the work is linear in the node's pods.
func (c *Cache) rebuildLocked(ni *nodeInfo, oldM *topology.Machine, old *allocator.State) error {
	st, err := allocator.New(ni.m, c.cfg.Allocator)
	if err != nil {
		// The node's machine made a state when it was set: this does not
		// happen, and leaves the node as it was if it does.
		return fmt.Errorf("%w %s: %w", ErrInvalidNode, ni.name, err)
	}
	ni.state = st
	ni.exclCPUs, ni.gpusHeld, ni.plainMilli, ni.memUsed, ni.inexact = 0, 0, 0, 0, 0 // the pods' part of the totals
	keys := slices.Sorted(maps.Keys(ni.pods))
	var decided, reserved, predicted []*podInfo
	for _, k := range keys {
		pi := ni.pods[k]
		wasAlloc := pi.alloc
		pi.alloc, pi.cpus, pi.gpus, pi.predicted = false, 0, 0, false
		pi.misfit, pi.reason = "", ""
		pi.sent.Store(nil) // a reservation may be placed again below
		if pi.invalid != "" {
			pi.misfit, pi.reason = MisfitInvalid, pi.invalid
		}
		switch {
		case !pi.bound:
			if wasAlloc {
				reserved = append(reserved, pi)
			}
		case pi.decision() != nil:
			decided = append(decided, pi)
		case predicts(ni, pi.pr):
			predicted = append(predicted, pi)
		}
	}
	// The decisions: claimed in runs, each run restored at once (one copy
	// of the state per run instead of per pod), a decision that cannot be
	// claimed exactly ending a run and claimed as far as it goes.
	allocs := make([]allocator.Allocation, len(decided))
	lostBy := make([][]string, len(decided))
	for i, pi := range decided {
		allocs[i], lostBy[i] = decisionAllocation(ni.m, pi.key, pi.dec)
	}
	for i := 0; i < len(decided); {
		j := i
		for j < len(decided) && len(lostBy[j]) == 0 {
			j++
		}
		if j > i {
			err := st.Restore(allocator.Snapshot{Allocations: allocs[i:j]})
			var re *allocator.RestoreError
			if err != nil && errors.As(err, &re) {
				k := slices.IndexFunc(decided[i:j], func(pi *podInfo) bool { return pi.key == re.ID })
				if k < 0 {
					k = 0
				}
				if k > 0 { // the run up to the refused one
					if err := st.Restore(allocator.Snapshot{Allocations: allocs[i : i+k]}); err != nil {
						k = 0
					}
				}
				for _, pi := range decided[i : i+k] {
					pi.alloc = true
				}
				i += k
				j = i // the refused one is claimed as far as it goes below
			} else if err == nil {
				for _, pi := range decided[i:j] {
					pi.alloc = true
				}
				i = j
				continue
			}
		}
		if i >= len(decided) {
			break
		}
		pi := decided[i]
		got, held, more := claimAvailable(st, ni.m, allocs[i])
		lost := append(lostBy[i], more...)
		if held {
			pi.alloc, pi.cpus, pi.gpus = true, got.CPUs.Size(), len(got.GPUs)
		}
		if len(lost) > 0 {
			pi.misfit = MisfitLost
			pi.reason = joinReason("its decision names "+strings.Join(lost, "; ")+"; it is accounted with the rest", pi.invalid)
		}
		i++
	}
	for _, pi := range decided {
		if pi.alloc && pi.misfit != MisfitLost {
			if a, ok := st.Get(pi.key); ok {
				pi.cpus, pi.gpus = a.CPUs.Size(), len(a.GPUs)
			}
		}
	}
	for _, pi := range reserved {
		a, ok := old.Get(pi.key)
		if ok {
			d := kube.NewDecision(oldM, &a)
			if na, err := d.Allocation(ni.m, pi.key); err == nil {
				keepEmptyMemory(oldM, ni.m, &a, &na)
				if got, err := st.Claim(na); err == nil {
					pi.alloc, pi.cpus, pi.gpus = true, got.CPUs.Size(), len(got.GPUs)
					continue
				}
			}
		}
		// The reservation no longer holds: its scheduling cycle fails
		// at PreBind (the pod is unknown) and the pod is tried again.
		delete(ni.pods, pi.key)
		delete(c.pods, pi.key)
	}
	for _, pi := range predicted {
		c.placePredictionLocked(ni, pi)
	}
	for _, pi := range ni.pods {
		ni.account(pi, 1)
		if pi.inexact() {
			ni.inexact++
		}
	}
	return nil
}

// misfitsLocked returns the node's misfits by pod key (the caller holds
// the node's lock).
func (ni *nodeInfo) misfitsLocked() []Misfit {
	var out []Misfit
	for k, pi := range ni.pods {
		if pi.misfit != "" {
			out = append(out, Misfit{Pod: k, Kind: pi.misfit, Reason: pi.reason})
		}
	}
	slices.SortFunc(out, func(a, b Misfit) int { return strings.Compare(a.Pod, b.Pod) })
	return out
}

// Misfits returns [NodeStatus]'s Misfits and Overcommit of the named node
// (false for an unknown node) without the rest of [Cache.Node]'s copy:
// what a caller following a node's misfits after every change reads.
func (c *Cache) Misfits(name string) (misfits []Misfit, overcommit []string, ok bool) {
	ni, err := c.node(name)
	if err != nil {
		return nil, nil, false
	}
	ni.mu.RLock()
	defer ni.mu.RUnlock()
	return ni.misfitsLocked(), ni.overcommitLocked(), true
}

// overcommitLocked describes the node's totals that its pods exceed (the
// caller holds the node's lock): the shared pool and memory, after a
// machine change or pods bound by someone else.
func (ni *nodeInfo) overcommitLocked() []string {
	return ni.overcommit()
}
