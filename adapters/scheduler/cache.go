package scheduler

import (
	"cmp"
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
	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/internal/quote"
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
	// hints and merge of adapters/topologymanager, so that no pod is sent where the
	// kubelet would refuse it with a TopologyAffinityError, and accounts
	// what the kubelet's managers would take (topologymanager.KubeletAllocation).
	// Pods with a NUMA spec are not placed on such nodes.
	KubeletPolicy topologymanager.Policy
	// KubeletOptions are the kubelet's options on such a node. With
	// StaticMemoryManager, the memory of a Guaranteed pod joins the
	// prediction and is accounted per NUMA node as the kubelet's memory
	// manager would pin it (when the machine describes memory).
	KubeletOptions topologymanager.PredictOptions
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

	groupsMu sync.Mutex // guards groups and every nodeGroup's refs; taken last
	groups   map[[sha256.Size]byte]*nodeGroup

	reqsMu sync.Mutex // guards reqs and reqSeq (see Cache.classify)
	reqs   map[reqKey]reqClass
	reqSeq uint64

	nextStart atomic.Int64 // where the next partial search starts
	results   sync.Pool    // *[]verdict for ScheduleOne

	// index is a copy of nodes that Cache.node reads without mu (Filter
	// and Score look a node up on every call, many at once), current
	// while its gen is nodesGen; stale counts the lookups made under mu
	// since it went stale, and the index is copied again after
	// staleLookups of them (not after every AddNode of a cluster's first
	// listing).
	index    atomic.Pointer[nodeIndex]
	nodesGen atomic.Uint64 // changes of nodes, counted under mu
	stale    atomic.Int32
}

// nodeIndex is a copy of Cache.nodes at a generation.
type nodeIndex struct {
	gen   uint64
	nodes map[string]*nodeInfo
}

// staleLookups is how many lookups under Cache.mu a stale index takes
// before it is copied again.
const staleLookups = 64

// nodeInfo is one node. Lock order: Cache.mu, then Cache.podsMu, then
// nodeInfo.mu, then Cache.groupsMu. The write lock is taken by
// Cache.lockNode only.
type nodeInfo struct {
	// The fields a verdict reads come first, within the first 128 bytes
	// (ScheduleOne reads them on thousands of nodes, mostly out of the
	// caches); TestNodeInfoLayout keeps them there.

	// group is the node's group while it has not changed since it was
	// worked out (nil else); read without the lock (see nodeGroup).
	group atomic.Pointer[nodeGroup]
	// gone is removed, read without the lock through a NodeRef.
	gone atomic.Bool

	mu       sync.RWMutex // guards everything below
	removed  bool
	optedIn  bool
	alignMem bool                   // NUMA pods' memory is reserved per NUMA node (see Cache.alignsMemory)
	kpol     topologymanager.Policy // "" unless the kubelet's Topology Manager admits pods
	class    *machineClass
	state    *allocator.State
	totals   // the machine's and the pods' counts, for the cache's own rules

	name    string // immutable
	kopts   topologymanager.PredictOptions
	labels  map[string]string
	m       *topology.Machine
	pods    map[string]*podInfo
	inexact int // pods whose accounting depends on the order (podInfo.inexact)

	// Up to 256 bytes: a size class whose objects start on a cache line,
	// so that the fields a verdict reads span two lines.
	_ [nodeInfoPad]byte
}

// nodeInfoPad pads nodeInfo to 256 bytes (TestNodeInfoLayout).
const nodeInfoPad = 40

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
	// Of a bound pod: how it was read (pr is nil for a pod read from its
	// decision only), its decision and the annotation it came from, and
	// why it could not be read as it is ("" when it could).
	pr      *podReq
	dec     *kube.Decision
	decRaw  string
	invalid string
	// decLazy: decRaw is the decision sent for the pod's reservation,
	// recorded at its binding without being parsed; dec is read from it
	// when first needed (podInfo.decision).
	decLazy bool
	// sent is the decision annotation PreBind last returned for the
	// reservation (nil: none yet, or the node was rebuilt since, which may
	// have placed it again): the pod seen bound with exactly that
	// annotation is the reservation's binding, known without parsing it
	// (syncPods).
	sent atomic.Pointer[sentDecision]
	// predicted: bound without a decision, placed (or not) by the
	// allocator as the node side would.
	predicted bool
	// misfit and reason: why the accounting is not exactly the decision
	// ("" when it is).
	misfit MisfitKind
	reason string
}

// sentDecision is a decision annotation PreBind returned for a
// reservation on the machine m.
type sentDecision struct {
	raw string
	m   *topology.Machine
}

// decision returns the pod's decision, reading a decision recorded lazily
// (decLazy) first. The caller holds the node's write lock. A decision the
// cache wrote itself always reads back (kube.ParseDecision of
// kube.Decision.String); were it not to, the pod counts as having none.
func (pi *podInfo) decision() *kube.Decision {
	if pi.decLazy {
		pi.decLazy = false
		if d, err := kube.ParseDecision(pi.decRaw); err == nil {
			pi.dec = &d
		}
	}
	return pi.dec
}

// usage is what pi takes of its node's totals.
func (pi *podInfo) usage() usage { return usageOf(&pi.req, pi.cpus, pi.gpus) }

// account adds (sign 1) or removes (sign -1) what pi holds to n's totals.
// The caller holds n.mu.
func (n *nodeInfo) account(pi *podInfo, sign int) { n.add(pi.usage(), sign) }

// New returns an empty cache, or an error wrapping [ErrConfig].
func New(cfg Config) (*Cache, error) {
	cfg, err := cfg.normalise()
	if err != nil {
		return nil, err
	}
	return &Cache{cfg: cfg, nodes: map[string]*nodeInfo{}, pods: map[string]*podInfo{}, groups: map[[sha256.Size]byte]*nodeGroup{},
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
	case "", topologymanager.PolicyNone, topologymanager.PolicyBestEffort, topologymanager.PolicyRestricted, topologymanager.PolicySingleNUMANode:
	default:
		return fmt.Errorf("%w %s: unknown kubelet Topology Manager policy %s", ErrInvalidNode, n.Name, quote.Short(string(n.KubeletPolicy)))
	}
	return nil
}

// kubeletPolicy returns the node's kubelet policy ("" when numaplace's node
// agent admits pods, or the kubelet's policy is none).
func kubeletPolicy(n Node) (topologymanager.Policy, topologymanager.PredictOptions) {
	if n.KubeletPolicy == "" || n.KubeletPolicy == topologymanager.PolicyNone {
		return "", topologymanager.PredictOptions{}
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
	for i := range m.NumNodes() {
		n.memCap += m.PodMemoryMiB(i) // GPU memory nodes hold no pod memory
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
	st, err := allocator.New(n.Machine, c.cfg.Allocator)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidNode, n.Name, err)
	}
	c.setMachine(ni, n.Machine, class, st)
	c.nodes[n.Name] = ni
	c.dirty = true
	c.nodesGen.Add(1)
	return nil
}

// UpdateNode replaces a node's labels and machine. The new machine takes
// effect at once: new placements see only what it has. The pods placed on
// the node stay accounted: every bound pod's decision is claimed again on
// the new machine (what the machine no longer has, or now reserves, is left
// out and the pod becomes a misfit, see [NodeStatus].Misfits, until it is
// gone), the pods without a decision are placed again, and the reservations
// of scheduling cycles keep exactly what they hold or are dropped (their
// PreBind then fails and the pod is tried again). Pods whose requests the
// new machine's totals do not cover stay accounted too
// ([NodeStatus].Overcommit). Removing the opt-in label keeps the NUMA pods
// already placed; it only stops new ones. Turning memory alignment on or
// off (kube.LabelMemoryAlignment) keeps what the decided pods hold, memory
// included, and applies to the pods placed from then on (and to the
// predictions of pods without a decision). An unknown node is refused
// ([ErrUnknownNode]), an invalid one as by AddNode.
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
	c.lockNode(ni)
	defer ni.mu.Unlock()
	kpol, kopts := kubeletPolicy(n)
	if n.Machine == ni.m && kpol == ni.kpol {
		realign := ni.alignMem != alignMem
		ni.labels, ni.optedIn, ni.alignMem = maps.Clone(n.Labels), c.optedIn(n.Labels), alignMem
		ni.kopts = kopts
		if realign && ni.inexact > 0 {
			return c.rebuildLocked(ni, ni.m, ni.state) // the predictions follow the alignment
		}
		return nil
	}
	if _, err := allocator.New(n.Machine, c.cfg.Allocator); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidNode, n.Name, err)
	}
	class, err := c.classLocked(n.Machine)
	if err != nil {
		return err
	}
	oldM, oldState, oldClass := ni.m, ni.state, ni.class
	oldLabels, oldOptedIn, oldAlign, oldKpol, oldKopts := ni.labels, ni.optedIn, ni.alignMem, ni.kpol, ni.kopts
	c.setMachine(ni, n.Machine, class, ni.state)
	ni.labels, ni.optedIn, ni.alignMem = maps.Clone(n.Labels), c.optedIn(n.Labels), alignMem
	ni.kpol, ni.kopts = kpol, kopts
	if err := c.rebuildLocked(ni, oldM, oldState); err != nil {
		c.setMachine(ni, oldM, oldClass, oldState)
		ni.labels, ni.optedIn, ni.alignMem, ni.kpol, ni.kopts = oldLabels, oldOptedIn, oldAlign, oldKpol, oldKopts
		c.releaseClassLocked(class)
		return err
	}
	c.releaseClassLocked(oldClass)
	return nil
}

// keepEmptyMemory adds to na, the allocation a moved from machine from to
// machine to by its decision, the 0 MiB memory entries of a, which a
// decision leaves out: on a node running the kubelet's own Topology Manager
// they record the nodes of the memory manager's group
// (topologymanager.KubeletAllocation).
func keepEmptyMemory(from, to *topology.Machine, a, na *allocator.Allocation) {
	added := false
	for _, x := range a.Memory {
		if x.MiB != 0 {
			continue
		}
		_, onFrom := from.NodeIndex(x.Node)
		if _, ok := to.NodeIndex(x.Node); ok && onFrom { // by NUMA node ID on both machines
			na.Memory = append(na.Memory, allocator.NodeMemory{Node: x.Node})
			added = true
		}
	}
	if added {
		slices.SortFunc(na.Memory, func(x, y allocator.NodeMemory) int { return cmp.Compare(x.Node, y.Node) })
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
	c.nodesGen.Add(1)
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	c.lockNode(ni)
	defer ni.mu.Unlock()
	for key := range ni.pods {
		delete(c.pods, key)
	}
	ni.pods = map[string]*podInfo{}
	ni.removed = true
	ni.gone.Store(true)
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
	var ni *nodeInfo
	var ok bool
	if ix := c.index.Load(); ix != nil && ix.gen == c.nodesGen.Load() {
		ni, ok = ix.nodes[name]
	} else {
		ni, ok = c.nodeLocking(name)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownNode, name)
	}
	return ni, nil
}

// nodeLocking is node's lookup under mu, when the index is stale; every
// staleLookups-th copies the nodes into a new index.
func (c *Cache) nodeLocking(name string) (*nodeInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ni, ok := c.nodes[name]
	if c.stale.Add(1) >= staleLookups {
		c.stale.Store(0)
		// nodes changes under the write lock only: the copy is of
		// generation nodesGen. Of two copies stored out of order, the
		// older is stale and copied again.
		c.index.Store(&nodeIndex{gen: c.nodesGen.Load(), nodes: maps.Clone(c.nodes)})
	}
	return ni, ok
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
// it. The accounting of a node is a function of its machine and its bound
// pods, whatever order they arrive in (and however often), so that a
// restarted scheduler rebuilds the exact state:
//   - with a numaplace.io/allocation annotation, the node claims exactly
//     the CPUs, GPUs, devices and memory it names (kube.ParseDecision,
//     allocator.State.Claim). What the node's machine does not have, or
//     reserves, or what another bound pod's decision earlier in key order
//     names, is left out: the pod is accounted with the rest and is a
//     misfit of the node ([NodeStatus].Misfits) until it is gone;
//   - a pod with a NUMA spec (or GPUs) but no decision was placed by
//     someone else: the node's allocator places it by its policy, as the
//     node side would decide locally (a prediction, not a record), after
//     the decisions and in key order; when there is no room it is accounted
//     without its CPUs and GPUs (a misfit);
//   - a pod without a NUMA spec is accounted against the node's shared
//     pool by its CPU request;
//   - a pod kube.ParsePod refuses is accounted by its decision if it has a
//     readable one, else as the same pod without its NUMA spec (a misfit
//     either way).
//
// No shared-pool or opt-in rule is applied: the pod runs already. A pod the
// cache has reserved on the same node becomes bound (if its decision is the
// one reserved; a different decision replaces the reservation); one placed
// on another node moves. The errors are for a pod not recorded: an unknown
// node, a pod that is not bound, or one that cannot be read at all (then a
// previous record of it is dropped).
func (c *Cache) AddPod(p *kube.Pod) error {
	if p == nil {
		return fmt.Errorf("%w: no pod (nil)", kube.ErrInvalidPod)
	}
	if p.NodeName == "" {
		return fmt.Errorf("%w: %s", ErrNotBound, p.Key())
	}
	errs, err := c.syncPods(p.NodeName, []*kube.Pod{p}, nil)
	if err != nil {
		return err
	}
	return errs[0]
}

// SyncPods records a batch of changes of one node's bound pods: every pod
// of bound is recorded as [Cache.AddPod] would (they must all be bound to
// the named node), every pod of gone is forgotten as [Cache.RemovePod]
// would (unknown ones are skipped), and the node's state is recomputed at
// most once, which makes the first listing of a node's pods (a restart)
// linear in them. A pod bound with exactly the decision [Cache.PreBind]
// returned for its reservation is that reservation's binding: recorded
// without reading the decision again, and without recomputing the node
// (so is a batch of such pods). It returns one error per pod of bound (nil
// for those recorded), and an error wrapping [ErrUnknownNode] (nothing
// changed) when the node is not in the cache.
func (c *Cache) SyncPods(node string, bound, gone []*kube.Pod) ([]error, error) {
	return c.syncPods(node, bound, gone)
}

func (c *Cache) syncPods(node string, bound, gone []*kube.Pod) ([]error, error) {
	errs := make([]error, len(bound))
	recs := make([]*boundRec, len(bound))
	for i, p := range bound {
		rec, err := c.readBound(p, c.sentFor(p))
		switch {
		case err != nil:
			errs[i] = err
		case rec.node != node:
			errs[i] = fmt.Errorf("pod %s is bound to node %s, not %s", rec.key, rec.node, node)
		default:
			recs[i] = rec
		}
	}
	ni, err := c.node(node)
	if err != nil {
		if len(bound) == 1 && errs[0] == nil {
			err = fmt.Errorf("pod %s: %w", recs[0].key, err)
		}
		return errs, err
	}
	c.podsMu.Lock()
	defer c.podsMu.Unlock()
	// Records elsewhere first (a pod recreated under the same name on
	// another node), each with its own node's lock.
	for i, p := range bound {
		if p == nil {
			continue
		}
		if old := c.pods[p.Key()]; old != nil && old.node != ni && (recs[i] != nil || !errors.Is(errs[i], ErrNotBound)) {
			c.dropLocked(old)
		}
	}
	c.lockNode(ni)
	defer ni.mu.Unlock()
	if ni.removed {
		err := fmt.Errorf("%w: %s", ErrUnknownNode, ni.name)
		return errs, err
	}
	rebuild := false
	for _, p := range gone {
		if p == nil {
			continue
		}
		if pi := c.pods[p.Key()]; pi != nil && pi.node == ni {
			rebuild = c.forgetLocked(ni, pi) || rebuild
		}
	}
	// The records that change nothing, and the bindings of reservations
	// (which claim nothing), first; then the others, which claim what their
	// decisions name: a batch of several of those is recorded by one
	// rebuild (its decisions restored at once) rather than one claim, and
	// one copy of the state, per pod. Only those claims touch the node's
	// allocation state, so the order of the two kinds does not matter.
	claims := 0
	for i, rec := range recs {
		if rec == nil {
			continue
		}
		old := c.pods[rec.key]
		switch {
		case old != nil && old.sameRecord(rec):
			// An update that changes nothing the cache reads.
		case old != nil && !old.bound && old.alloc && c.reservedAsDecided(old, rec):
			// The reservation's binding: it becomes the record.
			old.bound, old.pr, old.dec, old.decRaw, old.decLazy, old.invalid, old.prio = true, rec.pr, rec.dec, rec.decRaw, rec.sent != nil, rec.invalid, rec.prio
			ni.account(old, -1)
			old.req = rec.req
			ni.account(old, 1)
			if rec.invalid != "" {
				old.misfit, old.reason = MisfitInvalid, rec.invalid
			}
			rebuild = rebuild || ni.inexact > 0
		default:
			rec.settle()
			if old != nil && !old.bound && !old.alloc && !rec.needsAlloc() && rec.dec == nil {
				// A reservation without an allocation, bound.
				ni.account(old, -1)
				old.bound, old.pr, old.req, old.invalid, old.prio = true, rec.pr, rec.req, rec.invalid, rec.prio
				if rec.invalid != "" {
					old.misfit, old.reason = MisfitInvalid, rec.invalid
				}
				ni.account(old, 1)
			} else {
				claims++
				continue
			}
		}
		recs[i] = nil
	}
	rebuild = rebuild || claims > 1
	for i, rec := range recs {
		if rec == nil {
			if bound[i] != nil && errs[i] != nil && !errors.Is(errs[i], ErrNotBound) {
				if pi := c.pods[bound[i].Key()]; pi != nil && pi.node == ni {
					rebuild = c.forgetLocked(ni, pi) || rebuild
				}
			}
			continue
		}
		if old := c.pods[rec.key]; old != nil {
			rebuild = c.forgetLocked(ni, old) || rebuild
		}
		if rebuild {
			pi := &podInfo{key: rec.key, node: ni, req: rec.req, bound: true, prio: rec.prio, pr: rec.pr,
				dec: rec.dec, decRaw: rec.decRaw, invalid: rec.invalid}
			c.insertLocked(ni, pi)
			continue
		}
		rebuild = c.bindLocked(ni, rec)
	}
	if rebuild {
		if err := c.rebuildLocked(ni, ni.m, ni.state); err != nil {
			return errs, err
		}
	}
	return errs, nil
}

// sentFor returns the decision PreBind returned for the reservation of the
// bound pod p when p's decision annotation is exactly it, else nil.
func (c *Cache) sentFor(p *kube.Pod) *sentDecision {
	if p == nil || p.NodeName == "" {
		return nil
	}
	raw, ok := p.Annotations[kube.AnnotationAllocation]
	if !ok {
		return nil
	}
	c.podsMu.Lock()
	pi := c.pods[p.Key()]
	c.podsMu.Unlock()
	if pi == nil || pi.bound {
		return nil
	}
	if s := pi.sent.Load(); s != nil && s.raw == raw {
		return s
	}
	return nil
}

// sameRecord reports whether rec is what pi already records for a bound
// pod (then an informer update changes nothing).
func (pi *podInfo) sameRecord(rec *boundRec) bool {
	if !pi.bound || pi.decRaw != rec.decRaw || pi.invalid != rec.invalid || pi.prio != rec.prio || pi.req != rec.req {
		return false
	}
	return (pi.pr == nil) == (rec.pr == nil)
}

// reservedAsDecided reports whether the reserved pod pi holds what rec's
// decision names: rec's annotation is the decision PreBind returned for
// this very reservation on the node's current machine (rec.sent, compared
// without parsing), or rec's decision, parsed, is the one pi holds. The
// caller holds the node's lock.
func (c *Cache) reservedAsDecided(pi *podInfo, rec *boundRec) bool {
	if rec.sent != nil {
		if s := pi.sent.Load(); s == rec.sent && s.m == pi.node.m {
			return true
		}
		rec.settle()
	}
	d := rec.dec
	if d == nil {
		return false
	}
	ni := pi.node
	a, ok := ni.state.Get(pi.key)
	if !ok {
		return false
	}
	mine := kube.NewDecision(ni.m, &a)
	return mine.String() == d.String()
}

// dropLocked removes pi from its node and from the cache, rebuilding the
// node when its accounting depended on pi (the caller holds podsMu).
func (c *Cache) dropLocked(pi *podInfo) {
	ni := pi.node
	c.lockNode(ni)
	defer ni.mu.Unlock()
	if c.forgetLocked(ni, pi) {
		// An error leaves the node's state as it was without pi, which
		// forgetLocked released: still sound.
		_ = c.rebuildLocked(ni, ni.m, ni.state)
	}
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
	// Misfit and MisfitReason say why the accounting of a bound pod is not
	// exactly its decision ("" when it is; see [Misfit]).
	Misfit       MisfitKind
	MisfitReason string
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
	pi.node.mu.RLock()
	defer pi.node.mu.RUnlock()
	st := PodStatus{Key: key, Node: pi.node.name, Bound: pi.bound, NUMA: pi.req.NUMA, Misfit: pi.misfit, MisfitReason: pi.reason}
	if pi.alloc {
		if a, ok := pi.node.state.Get(key); ok {
			a = a.Clone()
			st.Allocation = &a
		}
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
	// Misfits are the pods whose accounting is not exactly their decision,
	// by pod key: after a machine change, decisions naming what the machine
	// lacks, pods that cannot be read, pods without a decision the node has
	// no room to predict. The node is marked until they are gone.
	Misfits []Misfit
	// Overcommit describes the totals the node's pods request beyond what
	// the machine has (the shared pool, memory), after a machine change or
	// pods bound by someone else; empty when none.
	Overcommit []string
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
		Pods: slices.Sorted(maps.Keys(ni.pods)), Misfits: ni.misfitsLocked(), Overcommit: ni.overcommitLocked()}
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

	// verdicts are the never-fit verdicts by request shape: read without a
	// lock, replaced (never changed) by writers, who hold mu; dirty are
	// the newest verdicts, not yet in verdicts (guarded by mu), moved there
	// in batches so that a new verdict copies O(1) entries on average.
	verdicts atomic.Pointer[map[shape]error]
	mu       sync.Mutex
	dirty    map[shape]error
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
	mc.mu.Lock()
	err, ok := mc.dirty[sh]
	mc.mu.Unlock()
	if ok {
		return err
	}
	// AddNode built a state of this machine and options already, so New
	// succeeds; were it to fail, the nil state's Fit returns the error.
	mc.once.Do(func() { mc.empty, _ = allocator.New(mc.m, mc.opts) })
	err = mc.empty.Fit(r)
	mc.mu.Lock()
	defer mc.mu.Unlock()
	var old map[shape]error
	if p := mc.verdicts.Load(); p != nil {
		old = *p
	}
	if len(old)+len(mc.dirty) >= maxVerdicts {
		old, mc.dirty = nil, nil
		mc.verdicts.Store(nil)
	}
	if mc.dirty == nil {
		mc.dirty = map[shape]error{}
	}
	mc.dirty[sh] = err
	if len(mc.dirty) > len(old)/8 {
		next := make(map[shape]error, len(old)+len(mc.dirty))
		maps.Copy(next, old)
		maps.Copy(next, mc.dirty)
		mc.verdicts.Store(&next)
		clear(mc.dirty)
	}
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

// NUMAFree is what no allocation holds on one NUMA node of a node.
type NUMAFree struct {
	// ID is the NUMA node's ID.
	ID numa.NodeID
	// CPUs are the allocatable CPUs no exclusive allocation holds (the
	// shared pool's part on this node, whatever the pods without a NUMA
	// spec request of it).
	CPUs int
	// GPUs are the healthy GPUs no allocation holds.
	GPUs int
	// MemoryMiB is the memory no allocation holds (0 when the machine
	// does not say).
	MemoryMiB int64
}

// Free returns, for every NUMA node of the named node's machine (in
// ascending dense order), what no allocation holds there; false for an
// unknown node. It is cheap: a few counters per NUMA node.
func (c *Cache) Free(name string) ([]NUMAFree, bool) {
	ni, err := c.node(name)
	if err != nil {
		return nil, false
	}
	ni.mu.RLock()
	defer ni.mu.RUnlock()
	out := make([]NUMAFree, ni.m.NumNodes())
	for i := range out {
		f := ni.state.NodeFree(i)
		out[i] = NUMAFree{ID: ni.m.NodeID(i), CPUs: int(f["cpu"]), GPUs: int(f[allocator.GPUClass]), MemoryMiB: f["memory"]}
	}
	return out, true
}
