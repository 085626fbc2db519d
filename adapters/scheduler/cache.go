package scheduler

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// Sentinel errors of the cache.
var (
	// ErrUnknownNode: the cache has no node of that name.
	ErrUnknownNode = errors.New("unknown node")
	// ErrNodeExists: AddNode of a name the cache already has.
	ErrNodeExists = errors.New("node already in the cache")
	// ErrInvalidNode: a node without a name or a machine.
	ErrInvalidNode = errors.New("invalid node")
	// ErrPodPlaced: the pod is already reserved or bound on another node
	// (or, for ScheduleOne, on any node).
	ErrPodPlaced = errors.New("pod already placed")
	// ErrNotBound: AddPod of a pod without a node name.
	ErrNotBound = errors.New("pod is not bound to a node")
	// ErrBound: Unreserve of a pod the cache knows as bound (RemovePod
	// removes it).
	ErrBound = errors.New("pod is bound")
)

// Node is a node as the cache takes it: its name, labels (for the opt-in
// label and kube.LabelMemoryAlignment) and machine.
type Node struct {
	// Name is the node's name, unique in the cache.
	Name string
	// Labels are the node's labels; the opt-in label and
	// kube.LabelMemoryAlignment ("true" or "false": whether NUMA pods'
	// memory is aligned on this node, overriding
	// Config.DisableMemoryAlignment) are read.
	Labels map[string]string
	// Machine is the node's machine (from MachineFromNRT, discovery or a
	// preset).
	Machine *topology.Machine
	// KubeletPolicy, when set to a policy other than "none", says that the
	// node runs the kubelet's own Topology Manager with this policy (with
	// the static CPU manager and the device manager) instead of numaplace's
	// node agent. The cache then predicts the kubelet's admission of every
	// pod that gets exclusive CPUs (a Guaranteed pod with whole CPUs) or
	// GPUs (aliyun.com/gpu or nvidia.com/gpu) with the kubelet-compatible
	// hints and merge of adapters/kubelet, so that no pod is sent where the
	// kubelet would refuse it with a TopologyAffinityError, and accounts
	// what the kubelet's managers would take (kubelet.KubeletAllocation).
	// Pods with a NUMA spec are not placed on such nodes.
	KubeletPolicy kubelet.TopologyPolicy
	// KubeletOptions are the kubelet's options on such a node. With
	// StaticMemoryManager, the memory of a Guaranteed pod joins the
	// prediction and is accounted per NUMA node as the kubelet's memory
	// manager would pin it (when the machine describes memory).
	KubeletOptions kubelet.PredictOptions
}

// Cache holds the nodes of a cluster with their allocation state and the
// pods placed on them. Every method is safe for concurrent use.
type Cache struct {
	cfg Config

	mu      sync.RWMutex // guards nodes, list, dirty, classes
	nodes   map[string]*nodeInfo
	list    []*nodeInfo // sorted by name; rebuilt when dirty, never modified in place
	dirty   bool
	classes map[[sha256.Size]byte]*machineClass
	byPtr   map[*topology.Machine]*machineClass

	podsMu sync.Mutex // guards pods and every podInfo's node and bound
	pods   map[string]*podInfo

	nextStart atomic.Int64 // where the next partial search starts
	results   sync.Pool    // *[]verdict for ScheduleOne
}

// nodeInfo is one node. Lock order: Cache.mu, then Cache.podsMu, then
// nodeInfo.mu.
type nodeInfo struct {
	name string

	mu         sync.RWMutex // guards everything below
	labels     map[string]string
	kpol       kubelet.TopologyPolicy // "" unless the kubelet's Topology Manager admits pods
	kopts      kubelet.PredictOptions
	m          *topology.Machine
	optedIn    bool
	alignMem   bool // NUMA pods' memory is reserved per NUMA node (see Cache.alignsMemory)
	class      *machineClass
	state      *allocator.State
	allocCPUs  int   // allocatable CPUs (reserved ones excluded)
	gpuCap     int   // GPUs
	memCap     int64 // MiB, 0 when unknown
	exclCPUs   int   // CPUs held by allocations
	gpusHeld   int
	plainMilli int64 // CPU requests of the pods without a NUMA spec
	memUsed    int64 // memory requests of every pod
	pods       map[string]*podInfo
	removed    bool
}

// podInfo is a pod the cache has placed (reserved) or been told is bound.
type podInfo struct {
	key   string
	node  *nodeInfo
	req   kube.PodRequest
	bound bool
	alloc bool // an allocation with ID key lives in node.state
	cpus  int  // what the allocation holds
	gpus  int
	prio  int32 // the pod's priority (preemption)
}

// account adds (sign 1) or removes (sign -1) what pi holds to n's totals.
// The caller holds n.mu.
func (n *nodeInfo) account(pi *podInfo, sign int) {
	n.exclCPUs += sign * pi.cpus
	n.gpusHeld += sign * pi.gpus
	if !pi.req.NUMA && pi.cpus == 0 { // exclusive CPUs are not the shared pool's
		n.plainMilli += int64(sign) * pi.req.MilliCPU
	}
	n.memUsed += int64(sign) * pi.req.MemoryMiB
}

// New returns an empty cache, or an error wrapping [ErrConfig].
func New(cfg Config) (*Cache, error) {
	cfg, err := cfg.normalise()
	if err != nil {
		return nil, err
	}
	return &Cache{cfg: cfg, nodes: map[string]*nodeInfo{}, pods: map[string]*podInfo{},
		classes: map[[sha256.Size]byte]*machineClass{}, byPtr: map[*topology.Machine]*machineClass{}}, nil
}

// Config returns the configuration with its defaults filled in.
func (c *Cache) Config() Config { return c.cfg }

func (c *Cache) optedIn(labels map[string]string) bool {
	return kube.OptedIn(labels, c.cfg.OptInLabel, c.cfg.OptInValue)
}

// alignsMemory says whether a node with these labels and this machine
// aligns NUMA pods' memory: the label kube.LabelMemoryAlignment or else the
// configured default says so, and the machine describes memory
// (kube.MachineAlignsMemory). An invalid label value is an error wrapping
// [ErrInvalidNode].
func (c *Cache) alignsMemory(n Node) (bool, error) {
	on, err := kube.MemoryAligned(n.Labels, !c.cfg.DisableMemoryAlignment)
	if err != nil {
		return false, fmt.Errorf("%w %s: %w", ErrInvalidNode, n.Name, err)
	}
	return on && kube.MachineAlignsMemory(n.Machine), nil
}

func checkNode(n Node) error {
	switch {
	case n.Name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidNode)
	case n.Machine == nil:
		return fmt.Errorf("%w %s: no machine", ErrInvalidNode, n.Name)
	}
	if _, err := kube.MemoryAligned(n.Labels, true); err != nil {
		return fmt.Errorf("%w %s: %w", ErrInvalidNode, n.Name, err)
	}
	switch n.KubeletPolicy {
	case "", kubelet.PolicyNone, kubelet.PolicyBestEffort, kubelet.PolicyRestricted, kubelet.PolicySingleNUMANode:
	default:
		return fmt.Errorf("%w %s: unknown kubelet Topology Manager policy %q", ErrInvalidNode, n.Name, n.KubeletPolicy)
	}
	return nil
}

// kubeletPolicy returns the node's kubelet policy ("" when numaplace's node
// agent admits pods, or the kubelet's policy is none).
func kubeletPolicy(n Node) (kubelet.TopologyPolicy, kubelet.PredictOptions) {
	if n.KubeletPolicy == "" || n.KubeletPolicy == kubelet.PolicyNone {
		return "", kubelet.PredictOptions{}
	}
	return n.KubeletPolicy, n.KubeletOptions
}

// newState fills in n's machine, state and capacities (the caller holds
// n.mu or owns n).
func (c *Cache) setMachine(n *nodeInfo, m *topology.Machine, class *machineClass, st *allocator.State) {
	n.m, n.class, n.state = m, class, st
	n.allocCPUs = m.CPUs().Difference(m.ReservedCPUs()).Size()
	n.gpuCap = m.NumGPUs()
	n.memCap = 0
	for _, node := range m.Nodes() {
		n.memCap += node.MemoryMiB
	}
}

// AddNode adds a node with nothing placed on it. A name already in the
// cache is refused ([ErrNodeExists]); so is a node without a name or a
// machine, or with a kube.LabelMemoryAlignment label that is neither "true"
// nor "false" ([ErrInvalidNode]).
func (c *Cache) AddNode(n Node) error {
	if err := checkNode(n); err != nil {
		return err
	}
	alignMem, err := c.alignsMemory(n)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.nodes[n.Name]; ok {
		return fmt.Errorf("%w: %s", ErrNodeExists, n.Name)
	}
	class, err := c.classLocked(n.Machine)
	if err != nil {
		return err
	}
	ni := &nodeInfo{name: n.Name, labels: maps.Clone(n.Labels), optedIn: c.optedIn(n.Labels), alignMem: alignMem,
		pods: map[string]*podInfo{}}
	ni.kpol, ni.kopts = kubeletPolicy(n)
	c.setMachine(ni, n.Machine, class, allocator.New(n.Machine, c.cfg.Allocator))
	c.nodes[n.Name] = ni
	c.dirty = true
	return nil
}

// NodeUpdateError says why UpdateNode kept the old node: the pods the new
// machine cannot hold, each with the reason.
type NodeUpdateError struct {
	// Node is the node's name.
	Node string
	// Pods are the keys of the affected pods, ascending.
	Pods []string
	// Reasons are the reasons, by pod key.
	Reasons map[string]string
}

// Error implements error.
func (e *NodeUpdateError) Error() string {
	parts := make([]string, len(e.Pods))
	for i, p := range e.Pods {
		parts[i] = p + ": " + e.Reasons[p]
	}
	return fmt.Sprintf("node %s: the new machine cannot hold %d placed pod(s), the old node is kept: %s",
		e.Node, len(e.Pods), strings.Join(parts, "; "))
}

// UpdateNode replaces a node's labels and machine, keeping the pods placed
// on it (reserved or bound) with exactly what they hold. If the new machine
// cannot hold them (their CPUs or GPUs do not exist there, or the shared
// pool or memory no longer covers the requests of the pods without a NUMA
// spec), nothing changes and the error is a *[NodeUpdateError] listing the
// affected pods. Removing the opt-in label keeps the NUMA pods already
// placed; it only stops new ones. Turning memory alignment on or off
// (kube.LabelMemoryAlignment) keeps what the placed pods hold, memory
// included, and applies to the pods placed from then on. An unknown node is
// refused ([ErrUnknownNode]), an invalid one as by AddNode.
func (c *Cache) UpdateNode(n Node) error {
	if err := checkNode(n); err != nil {
		return err
	}
	alignMem, err := c.alignsMemory(n)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ni, ok := c.nodes[n.Name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownNode, n.Name)
	}
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	ni.mu.Lock()
	defer ni.mu.Unlock()
	if n.Machine == ni.m {
		ni.labels, ni.optedIn, ni.alignMem = maps.Clone(n.Labels), c.optedIn(n.Labels), alignMem
		ni.kpol, ni.kopts = kubeletPolicy(n)
		return nil
	}
	class, err := c.classLocked(n.Machine)
	if err != nil {
		return err
	}
	// Build the new node beside the old one.
	tmp := &nodeInfo{name: ni.name}
	c.setMachine(tmp, n.Machine, class, allocator.New(n.Machine, c.cfg.Allocator))
	upd := &NodeUpdateError{Node: n.Name, Reasons: map[string]string{}}
	type moved struct {
		pi         *podInfo
		cpus, gpus int
	}
	var moves []moved
	keys := slices.Sorted(maps.Keys(ni.pods))
	for _, key := range keys {
		pi := ni.pods[key]
		mv := moved{pi: pi}
		if pi.alloc {
			a, ok := ni.state.Get(key)
			if !ok {
				upd.Pods = append(upd.Pods, key)
				upd.Reasons[key] = "its allocation is missing from the node's state"
				continue
			}
			d := kube.NewDecision(ni.m, &a)
			na, err := d.Allocation(n.Machine, key)
			if err == nil {
				keepEmptyMemory(ni.m, n.Machine, &a, &na)
				na, err = tmp.state.Claim(na)
			}
			if err != nil {
				upd.Pods = append(upd.Pods, key)
				upd.Reasons[key] = err.Error()
				continue
			}
			mv.cpus, mv.gpus = na.CPUs.Size(), len(na.GPUs)
		}
		moves = append(moves, mv)
		tmp.exclCPUs += mv.cpus
		tmp.gpusHeld += mv.gpus
	}
	// The pods without a NUMA spec, in key order, while the shared pool and
	// memory last.
	for _, mv := range moves {
		r := mv.pi.req
		if !r.NUMA && mv.cpus == 0 {
			if tmp.plainMilli+r.MilliCPU > int64(tmp.allocCPUs-tmp.exclCPUs)*1000 {
				upd.Pods = append(upd.Pods, mv.pi.key)
				upd.Reasons[mv.pi.key] = fmt.Sprintf("the shared pool of %d CPUs cannot hold its %s CPUs besides the other pods' %s",
					tmp.allocCPUs-tmp.exclCPUs, milliString(r.MilliCPU), milliString(tmp.plainMilli))
				continue
			}
			tmp.plainMilli += r.MilliCPU
		}
		if tmp.memCap > 0 && r.MemoryMiB > 0 && tmp.memUsed+r.MemoryMiB > tmp.memCap {
			upd.Pods = append(upd.Pods, mv.pi.key)
			upd.Reasons[mv.pi.key] = fmt.Sprintf("%d MiB of memory left, it requests %d MiB", tmp.memCap-tmp.memUsed, r.MemoryMiB)
			continue
		}
		tmp.memUsed += r.MemoryMiB
	}
	if len(upd.Pods) > 0 {
		slices.Sort(upd.Pods)
		upd.Pods = slices.Compact(upd.Pods)
		c.releaseClassLocked(class)
		return upd
	}
	old := ni.class
	c.setMachine(ni, n.Machine, class, tmp.state)
	ni.exclCPUs, ni.gpusHeld, ni.plainMilli, ni.memUsed = tmp.exclCPUs, tmp.gpusHeld, tmp.plainMilli, tmp.memUsed
	for _, mv := range moves {
		mv.pi.cpus, mv.pi.gpus = mv.cpus, mv.gpus
	}
	ni.labels, ni.optedIn, ni.alignMem = maps.Clone(n.Labels), c.optedIn(n.Labels), alignMem
	ni.kpol, ni.kopts = kubeletPolicy(n)
	c.releaseClassLocked(old)
	return nil
}

// keepEmptyMemory adds to na, the allocation a moved from machine from to
// machine to by its decision, the 0 MiB memory entries of a, which a
// decision leaves out: on a node running the kubelet's own Topology Manager
// they record the nodes of the memory manager's group
// (kubelet.KubeletAllocation).
func keepEmptyMemory(from, to *topology.Machine, a, na *allocator.Allocation) {
	added := false
	for _, x := range a.Memory {
		if x.MiB != 0 || x.Node < 0 || x.Node >= from.NumNodes() {
			continue
		}
		if i, ok := to.NodeIndex(from.NodeID(x.Node)); ok {
			na.Memory = append(na.Memory, allocator.NodeMemory{Node: i})
			added = true
		}
	}
	if added {
		slices.SortFunc(na.Memory, func(x, y allocator.NodeMemory) int { return x.Node - y.Node })
	}
}

// RemoveNode removes a node and forgets the pods placed on it. An unknown
// node is refused ([ErrUnknownNode]).
func (c *Cache) RemoveNode(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni, ok := c.nodes[name]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownNode, name)
	}
	delete(c.nodes, name)
	c.dirty = true
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	ni.mu.Lock()
	defer ni.mu.Unlock()
	for key := range ni.pods {
		delete(c.pods, key)
	}
	ni.pods = map[string]*podInfo{}
	ni.removed = true
	c.releaseClassLocked(ni.class)
	return nil
}

// sortedNodes returns the nodes sorted by name (an immutable slice).
func (c *Cache) sortedNodes() []*nodeInfo {
	c.mu.RLock()
	if !c.dirty {
		l := c.list
		c.mu.RUnlock()
		return l
	}
	c.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty {
		l := slices.Collect(maps.Values(c.nodes))
		slices.SortFunc(l, func(a, b *nodeInfo) int { return strings.Compare(a.name, b.name) })
		c.list, c.dirty = l, false
	}
	return c.list
}

func (c *Cache) node(name string) (*nodeInfo, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ni, ok := c.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownNode, name)
	}
	return ni, nil
}

// Nodes returns the names of the nodes, ascending.
func (c *Cache) Nodes() []string {
	l := c.sortedNodes()
	out := make([]string, len(l))
	for i, n := range l {
		out[i] = n.name
	}
	return out
}

// AddPod records a bound pod (pod.NodeName set), as an informer reports
// it, so that a restarted scheduler rebuilds the exact state:
//   - with a numaplace.io/allocation annotation, the node claims exactly
//     the CPUs and GPUs it names (kube.ParseDecision, Decision.Allocation,
//     allocator.State.Claim);
//   - a pod with a NUMA spec (or GPUs) but no decision was placed by
//     someone else: the node's allocator places it by its policy, as the
//     node side would decide locally (a prediction, not a record);
//   - a pod without a NUMA spec is accounted against the node's shared
//     pool by its CPU request.
//
// No shared-pool or opt-in rule is applied: the pod runs already. A pod the
// cache has reserved on the same node becomes bound (if its decision is the
// one reserved; a different decision replaces the reservation); one placed
// on another node moves. On error (unknown node, invalid pod, a decision
// naming CPUs or GPUs that are held or do not exist) the pod is not
// recorded, and a previous record of it is dropped.
func (c *Cache) AddPod(p *kube.Pod) error {
	if p == nil {
		return fmt.Errorf("%w: no pod (nil)", kube.ErrInvalidPod)
	}
	if p.NodeName == "" {
		return fmt.Errorf("%w: %s", ErrNotBound, p.Key())
	}
	pr, err := c.parse(p)
	if err != nil {
		return err
	}
	ni, err := c.node(p.NodeName)
	if err != nil {
		return fmt.Errorf("pod %s: %w", pr.key, err)
	}
	var d *kube.Decision
	if ann, ok := p.Annotations[kube.AnnotationAllocation]; ok {
		dec, err := kube.ParseDecision(ann)
		if err != nil {
			return fmt.Errorf("pod %s: %w", pr.key, err)
		}
		d = &dec
	}
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	if old := c.pods[pr.key]; old != nil {
		if old.node == ni && c.sameDecision(old, d) {
			old.bound = true
			return nil
		}
		c.dropLocked(old)
	}
	ni.mu.Lock()
	defer ni.mu.Unlock()
	if ni.removed {
		return fmt.Errorf("pod %s: %w: %s", pr.key, ErrUnknownNode, ni.name)
	}
	pi := &podInfo{key: pr.key, node: ni, req: pr.PodRequest, bound: true, prio: p.Priority}
	switch {
	case d != nil:
		a, err := d.Allocation(ni.m, pr.key)
		if err != nil {
			return fmt.Errorf("pod %s on node %s: %w", pr.key, ni.name, err)
		}
		got, err := ni.state.Claim(a)
		if err != nil {
			return fmt.Errorf("pod %s on node %s: %w", pr.key, ni.name, err)
		}
		pi.alloc, pi.cpus, pi.gpus = true, got.CPUs.Size(), len(got.GPUs)
	case ni.kpol == "" && pr.needsAlloc, ni.kpol != "" && needsKubelet(ni, pr):
		if err := c.placeLocked(ni, pr, pi, true); err != nil {
			return fmt.Errorf("pod %s on node %s has no %s annotation and the node cannot place it: %w",
				pr.key, ni.name, kube.AnnotationAllocation, err)
		}
	}
	ni.account(pi, 1)
	ni.pods[pr.key] = pi
	c.pods[pr.key] = pi
	return nil
}

// sameDecision reports whether the reserved pod pi holds what d names (no
// decision: nothing to compare, the reservation stands). The caller holds
// podsMu.
func (c *Cache) sameDecision(pi *podInfo, d *kube.Decision) bool {
	if d == nil {
		return true
	}
	ni := pi.node
	ni.mu.RLock()
	defer ni.mu.RUnlock()
	if !pi.alloc {
		return false
	}
	a, ok := ni.state.Get(pi.key)
	if !ok {
		return false
	}
	mine := kube.NewDecision(ni.m, &a)
	return mine.String() == d.String()
}

// dropLocked removes pi from its node and from the cache (the caller holds
// podsMu).
func (c *Cache) dropLocked(pi *podInfo) {
	ni := pi.node
	ni.mu.Lock()
	defer ni.mu.Unlock()
	if pi.alloc {
		_ = ni.state.Release(pi.key) // cannot fail: the cache keeps them in step
	}
	ni.account(pi, -1)
	delete(ni.pods, pi.key)
	delete(c.pods, pi.key)
}

// RemovePod forgets a pod (deleted, or bound elsewhere by someone else) and
// gives back what it held, whether reserved or bound. A pod the cache does
// not know returns an error wrapping allocator.ErrUnknownID and changes
// nothing, so a repeated removal is harmless.
func (c *Cache) RemovePod(p *kube.Pod) error {
	if p == nil {
		return fmt.Errorf("%w: no pod (nil)", kube.ErrInvalidPod)
	}
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	pi, ok := c.pods[p.Key()]
	if !ok {
		return fmt.Errorf("%w: pod %s is not in the cache", allocator.ErrUnknownID, p.Key())
	}
	c.dropLocked(pi)
	return nil
}

// PodStatus is what the cache knows of a placed pod.
type PodStatus struct {
	// Key is the pod's "namespace/name".
	Key string
	// Node is the name of the node the pod is reserved or bound on.
	Node string
	// Bound is false while the pod is only reserved.
	Bound bool
	// NUMA is true for a pod with a NUMA spec.
	NUMA bool
	// Allocation is what the pod holds on the node (CPUs and GPUs; a copy),
	// when it holds an allocation (pods with a NUMA spec or with GPUs).
	Allocation *allocator.Allocation
}

// Pod returns what the cache knows of the pod with the given key
// ("namespace/name").
func (c *Cache) Pod(key string) (PodStatus, bool) {
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	pi, ok := c.pods[key]
	if !ok {
		return PodStatus{}, false
	}
	st := PodStatus{Key: key, Node: pi.node.name, Bound: pi.bound, NUMA: pi.req.NUMA}
	if pi.alloc {
		pi.node.mu.RLock()
		if a, ok := pi.node.state.Get(key); ok {
			a = a.Clone()
			st.Allocation = &a
		}
		pi.node.mu.RUnlock()
	}
	return st, true
}

// NodeStatus is a node's state as the cache sees it.
type NodeStatus struct {
	// Name is the node's name.
	Name string
	// Labels are the node's labels (a copy).
	Labels map[string]string
	// Machine is the node's machine (immutable, shared with the cache).
	Machine *topology.Machine
	// OptedIn is true when the node takes pods with a NUMA spec.
	OptedIn bool
	// MemoryAligned is true when the memory requests of pods with a NUMA
	// spec are reserved per NUMA node on the node: alignment is on (the
	// label kube.LabelMemoryAlignment or Config.DisableMemoryAlignment) and
	// the machine describes its memory.
	MemoryAligned bool
	// AllocatableCPUs is the machine's CPUs without the reserved ones.
	AllocatableCPUs int
	// SharedCPUs are the allocatable CPUs no allocation holds: the shared
	// pool.
	SharedCPUs numa.CPUSet
	// SharedRequestMilli is the CPU request of the pods without a NUMA spec
	// (thousandths), accounted against the shared pool.
	SharedRequestMilli int64
	// FreeGPUs is the number of GPUs no allocation holds.
	FreeGPUs int
	// MemoryRequestMiB is the memory request of every pod placed here.
	MemoryRequestMiB int64
	// Pods are the keys of the pods placed here, ascending.
	Pods []string
	// Allocations are the live allocations ordered by ID (copies).
	Allocations []allocator.Allocation
}

// Node returns the state of the named node.
func (c *Cache) Node(name string) (NodeStatus, bool) {
	ni, err := c.node(name)
	if err != nil {
		return NodeStatus{}, false
	}
	ni.mu.RLock()
	defer ni.mu.RUnlock()
	st := NodeStatus{Name: ni.name, Labels: maps.Clone(ni.labels), Machine: ni.m, OptedIn: ni.optedIn, MemoryAligned: ni.alignMem,
		AllocatableCPUs: ni.allocCPUs, SharedCPUs: ni.state.FreeCPUs(), SharedRequestMilli: ni.plainMilli,
		FreeGPUs: ni.gpuCap - ni.gpusHeld, MemoryRequestMiB: ni.memUsed,
		Pods: slices.Sorted(maps.Keys(ni.pods))}
	for _, a := range ni.state.Live() {
		st.Allocations = append(st.Allocations, a.Clone())
	}
	return st, true
}

// machineClass is shared by the nodes whose machines are the same but for
// their names and GPU UUIDs: an empty state of such a machine tells which
// requests can never fit on it, whatever is allocated (free amounts only
// shrink from the empty machine's, and the exclusivity rule only forbids
// more), so that ScheduleOne refuses them without running the allocator on
// every node.
type machineClass struct {
	m    *topology.Machine
	opts allocator.Options
	key  [sha256.Size]byte
	refs int // guarded by Cache.mu

	once  sync.Once
	empty *allocator.State

	mu       sync.Mutex // serialises writers of verdicts
	verdicts atomic.Pointer[map[shape]error]
}

// maxVerdicts bounds a class's verdict memo; it starts afresh when full.
const maxVerdicts = 1024

// never returns the error Fit gives for r on the empty machine (nil when r
// may fit), from the memo when known.
func (mc *machineClass) never(sh shape, r *allocator.Request) error {
	if p := mc.verdicts.Load(); p != nil {
		if err, ok := (*p)[sh]; ok {
			return err
		}
	}
	mc.once.Do(func() { mc.empty = allocator.New(mc.m, mc.opts) })
	err := mc.empty.Fit(r)
	mc.mu.Lock()
	defer mc.mu.Unlock()
	var next map[shape]error
	if p := mc.verdicts.Load(); p != nil && len(*p) < maxVerdicts {
		next = make(map[shape]error, len(*p)+1)
		maps.Copy(next, *p)
	} else {
		next = map[shape]error{}
	}
	next[sh] = err
	mc.verdicts.Store(&next)
	return err
}

// classLocked returns the class of machine m, counting one more user (the
// caller holds c.mu).
func (c *Cache) classLocked(m *topology.Machine) (*machineClass, error) {
	if mc, ok := c.byPtr[m]; ok {
		mc.refs++
		return mc, nil
	}
	spec := m.Spec()
	spec.Name = ""
	for i := range spec.GPUs {
		spec.GPUs[i].UUID = ""
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: machine: %w", ErrInvalidNode, err)
	}
	key := sha256.Sum256(b)
	mc, ok := c.classes[key]
	if !ok {
		mc = &machineClass{m: m, opts: c.cfg.Allocator, key: key}
		c.classes[key] = mc
	}
	c.byPtr[m] = mc
	mc.refs++
	return mc, nil
}

// releaseClassLocked counts one user less of mc and forgets it when unused
// (the caller holds c.mu).
func (c *Cache) releaseClassLocked(mc *machineClass) {
	mc.refs--
	if mc.refs > 0 {
		return
	}
	delete(c.classes, mc.key)
	for m, x := range c.byPtr {
		if x == mc {
			delete(c.byPtr, m)
		}
	}
}
