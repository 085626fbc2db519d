package kubelet

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// ErrTopologyAffinity is the category of admissions refused because the
// pod's resources cannot be had with the NUMA locality asked for: the
// CPUs or devices of the scheduler's decision are not free (held by
// another pod, unhealthy, reserved, or not on this node), or the pod's
// policy finds no placement on the node. The wording is the kubelet's
// (its TopologyAffinityError), so that tools matching on it keep working.
var ErrTopologyAffinity = errors.New("Resources cannot be allocated with Topology locality")

// ErrAdmittedDifferently is returned when a pod that is already admitted
// is admitted again with another decision, another request, or another UID.
// Nothing changes.
var ErrAdmittedDifferently = errors.New("pod is already admitted with a different placement")

// Conflict is one reason a decision's resources cannot be claimed.
type Conflict struct {
	// Resource is "cpu", "gpu", "memory", "numaNode" or a device class such
	// as "rdma".
	Resource string
	// Items names the resources in conflict, such as "CPUs 0-3" or "GPU 2".
	Items string
	// Problem says what is wrong: "are held by pod default/a", "is
	// unhealthy", "does not exist on this node", ...
	Problem string
	// HeldBy is the key of the pod holding the items, when that is the
	// problem.
	HeldBy string
	// HeldByClaim is the namespace/name of the ResourceClaim holding the
	// items ([Node.HoldClaim]), when that is the problem.
	HeldByClaim string
}

// String returns the conflict in words, such as "CPUs 0-3 are held by pod
// default/a".
func (c Conflict) String() string { return c.Items + " " + c.Problem }

// TopologyAffinityError says why a pod was refused at admission: the
// conflicts of its decision with what the node holds, or the placement
// engine's reason when the node decided. It unwraps to
// [ErrTopologyAffinity] and, when there is one, to its cause (such as an
// *allocator.PlacementError).
type TopologyAffinityError struct {
	// Pod is the pod's key, namespace/name ("" for a claim's refusal).
	Pod string
	// Claim is, for [Node.HoldClaim]'s refusal, the ResourceClaim's
	// namespace/name.
	Claim string
	// Conflicts lists what the decision names that is not free (empty when
	// the node decided by the pod's policy).
	Conflicts []Conflict
	// Reason is the whole explanation in words.
	Reason string
	// Cause is the underlying error, or nil.
	Cause error
}

// Error implements error: the kubelet's message followed by the pod (or
// the claim) and the reason.
func (e *TopologyAffinityError) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.Claim != "" {
		return fmt.Sprintf("%s: ResourceClaim %s: %s", ErrTopologyAffinity, e.Claim, e.Reason)
	}
	return fmt.Sprintf("%s: pod %s: %s", ErrTopologyAffinity, e.Pod, e.Reason)
}

// Unwrap returns [ErrTopologyAffinity] and the cause.
func (e *TopologyAffinityError) Unwrap() []error {
	if e == nil {
		return nil
	}
	if e.Cause != nil {
		return []error{ErrTopologyAffinity, e.Cause}
	}
	return []error{ErrTopologyAffinity}
}

func affinityError(pod string, conflicts []Conflict, cause error) *TopologyAffinityError {
	e := &TopologyAffinityError{Pod: pod, Conflicts: conflicts, Cause: cause}
	parts := make([]string, 0, len(conflicts))
	for _, c := range conflicts {
		parts = append(parts, c.String())
	}
	if cause != nil && len(parts) == 0 {
		var pe *allocator.PlacementError
		if errors.As(cause, &pe) {
			parts = append(parts, pe.Reason)
		} else {
			parts = append(parts, cause.Error())
		}
	}
	e.Reason = strings.Join(parts, "; ")
	return e
}

// Source says how a pod's placement was decided.
type Source uint8

const (
	// FromDecision: the scheduler's numaplace.io/allocation decision was
	// claimed as written.
	FromDecision Source = iota + 1
	// Local: the pod had no decision; the node placed it by its policy.
	Local
	// SharedPool: the pod has no NUMA spec and runs on the shared pool.
	SharedPool
)

var sourceNames = [...]string{FromDecision: "decision", Local: "local", SharedPool: "shared"}

// String returns "decision", "local" or "shared".
func (s Source) String() string {
	if int(s) < len(sourceNames) && sourceNames[s] != "" {
		return sourceNames[s]
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText implements encoding.TextMarshaler.
func (s Source) MarshalText() ([]byte, error) {
	if int(s) >= len(sourceNames) || sourceNames[s] == "" {
		return nil, fmt.Errorf("invalid admission source %d", s)
	}
	return []byte(sourceNames[s]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Source) UnmarshalText(b []byte) error {
	for i, n := range sourceNames {
		if n != "" && n == string(b) {
			*s = Source(i)
			return nil
		}
	}
	return fmt.Errorf("invalid admission source %s (want decision, local or shared)", quote.Short(string(b)))
}

// Admission is what a pod received on the node: what to write into its
// containers' cgroups and environment.
type Admission struct {
	// Pod is the pod's key, namespace/name; UID its UID (may be empty).
	Pod, UID string
	// Source says how the placement was decided.
	Source Source
	// Policy is the placement policy (None for shared-pool pods).
	Policy policy.Policy
	// CPUs is the cpuset: the exclusive CPUs, or for a shared-pool pod the
	// shared pool when the admission was read (it changes as exclusive pods
	// come and go; read it again with [Node.Get]).
	CPUs numa.CPUSet
	// NUMANodes are the span's NUMA node IDs, ascending (the nodes of the
	// pod's CPUs, GPUs, devices and memory), or every node of the machine
	// for a shared-pool pod.
	NUMANodes []numa.NodeID
	// MemoryNodes are the NUMA node IDs for cpuset.mems, ascending: the
	// nodes of the pod's reserved memory (the decision's memoryMiB), so
	// that the pod's memory stays where it is reserved; when it reserves
	// none (no memory request, alignment off, or a machine that describes
	// no memory), the span; every node for a shared-pool pod. The memory
	// nodes of the pod's GPUs (topology.Machine.GPUMemoryNode, on Grace
	// machines) are added: not pod memory, but where the GPU's driver puts
	// the pages it moves to the GPU.
	MemoryNodes []numa.NodeID
	// GPUs are the GPUs with their UUIDs when the machine knows them,
	// ascending ID.
	GPUs []kube.DecisionGPU
	// Devices are the devices of other classes by class.
	Devices map[string][]string
	// Allocation is the allocation the pod holds (a copy); the zero value
	// for a shared-pool pod.
	Allocation allocator.Allocation
	// KubeletGPUs are, for a shared-pool pod, the GPUs (by ID, ascending)
	// the kubelet gave each of its containers, by container name, as
	// [Node.SetKubeletGPUs] recorded them (a copy); nil when none.
	KubeletGPUs map[string][]int
	// Claims are, for a pod the node placed with the GPUs of its
	// ResourceClaims (see [Node.Admit]), the claims' namespace/names,
	// ascending: GPUs are then those claims' GPUs, which the claims hold
	// (Allocation names none of them) and which the DRA driver's CDI
	// devices give the containers that use the claims; nil otherwise.
	Claims []string
}

// Mems returns the cpuset.mems value: MemoryNodes (NUMANodes when it is
// empty, as in an Admission built by hand) in Linux list form, such as
// "0-1" or "3".
func (a *Admission) Mems() string {
	ids := a.MemoryNodes
	if len(ids) == 0 {
		ids = a.NUMANodes
	}
	var s numa.CPUSet // a set of small integers, formatted as a Linux list
	for _, id := range ids {
		if id >= 0 {
			s.Add(int(id))
		}
	}
	return s.String()
}

// NodeOptions tune a [Node]. The zero value is the default.
type NodeOptions struct {
	// Pods says how pods are read (kube.ParsePod).
	Pods kube.Config
	// Allocator tunes the placement of pods the node decides itself.
	Allocator allocator.Options
	// DisableMemoryAlignment leaves the memory request out of the
	// placement of the NUMA pods the node decides itself (pods without a
	// decision): set it as the node's kube.LabelMemoryAlignment label and
	// the scheduler's default say (kube.MemoryAligned), so that the node
	// decides as the scheduler would. A decision is claimed as written,
	// with the memory it reserves, whatever this says.
	DisableMemoryAlignment bool
	// SetAsideUnusableCheckpoint makes Open set aside a checkpoint file
	// whose content cannot be used (see [Open]) and start empty, rather
	// than refuse to start. Set it only when the caller rebuilds the state
	// from the running pods, as the NRI agent does when it synchronises.
	SetAsideUnusableCheckpoint bool
}

type podRecord struct {
	uid    string
	source Source
	// kubeletGPUs are, for a shared-pool pod, the GPUs the kubelet gave
	// each of its containers (by container name), as SetKubeletGPUs
	// recorded them; nil when none.
	kubeletGPUs map[string][]int
	// claimGPUs are, for a pod the node placed with the GPUs of its
	// ResourceClaims (see [Node.Admit]), those GPUs (ascending) and
	// claims the namespace/name of the claims holding them; nil
	// otherwise. The claims hold the GPUs, the pod's allocation does not.
	claimGPUs []int
	claims    []string
}

// Node is the node agent of one machine: it admits pods by the scheduler's
// decision (or by their policy when there is none), keeps the allocation
// state in a checkpoint file, and answers the device plugin's preferred
// allocations. Every method is safe for concurrent use; state changes are
// serialised and each is written to the checkpoint before it returns.
type Node struct {
	mu        sync.RWMutex
	m         *topology.Machine
	s         *allocator.State
	path      string
	opts      NodeOptions
	pods      map[string]podRecord
	unhealthy map[string]map[string]bool // class -> device ID -> unhealthy
	devs      map[string]map[string]topology.Device
	claims    map[string]ClaimHold // by claim UID; their allocator IDs are claimID(UID)
	dp        *PreferredAllocator
	alignMem  bool // local placements reserve memory per NUMA node
	// write persists a checkpoint; tests replace it to inject failures.
	write func(path string, data []byte) error
	// leftovers are the temporary files Open removed.
	leftovers []string
	// aside is the unusable checkpoint Open set aside, or nil.
	aside *SetAsideCheckpoint
}

// Open returns the node agent of machine m with its state restored from
// the checkpoint file at path. A missing file starts empty (and is written
// at once, so that an unwritable location fails here rather than at the
// first admission). A file that cannot be used (unreadable, not valid JSON,
// a checksum mismatch, an unknown format version, another machine's, or
// allocations that overlap or name CPUs or devices this machine does not
// have) stops the start with a *[CheckpointError] naming the file and the
// problem; the file is left exactly as it is. With
// NodeOptions.SetAsideUnusableCheckpoint, a regular file that was read and
// cannot be used for what it holds (every reason above but "cannot be
// read", and a file longer than [MaxCheckpointBytes]) is instead renamed
// aside ([AsideSuffix]; never overwriting a file) and the node starts empty
// as for a missing file, [Node.SetAside] saying where the file went and
// why; a file that cannot be read (permissions, I/O errors), a path that is
// not a regular file (a directory, a FIFO, a device) or a file that cannot
// be set aside still stops the start. Before reading the file, Open
// removes the temporary files that writes interrupted by a crash left beside
// it (only this checkpoint's: the regular files named "." + its name +
// ".tmp-" and digits; see [Node.RemovedLeftovers]); a leftover that cannot
// be removed stops the start with a *[CheckpointError] naming it. One Node
// at a time may use a checkpoint file. An empty path keeps the state in
// memory only.
func Open(m *topology.Machine, path string, opts NodeOptions) (*Node, error) {
	if m == nil {
		return nil, errors.New("kubelet.Open: nil machine")
	}
	s, err := allocator.New(m, opts.Allocator)
	if err != nil {
		return nil, fmt.Errorf("kubelet.Open: %w", err)
	}
	n := &Node{m: m, s: s, path: path, opts: opts,
		pods: map[string]podRecord{}, unhealthy: map[string]map[string]bool{}, claims: map[string]ClaimHold{},
		devs: map[string]map[string]topology.Device{}, dp: NewPreferredAllocator(m), write: writeFileAtomic,
		alignMem: !opts.DisableMemoryAlignment && kube.MachineAlignsMemory(m)}
	for _, d := range m.Devices() {
		if n.devs[d.Class] == nil {
			n.devs[d.Class] = map[string]topology.Device{}
		}
		n.devs[d.Class][d.ID] = d
	}
	if path == "" {
		return n, nil
	}
	removed, err := removeLeftovers(path)
	n.leftovers = removed
	if err != nil {
		return nil, &CheckpointError{Path: path, Problem: "the temporary files of interrupted writes cannot be removed", Err: err}
	}
	found, err := n.restore()
	if err != nil {
		if err := n.openAside(err); err != nil {
			return nil, err
		}
		found = false
	}
	if !found {
		if err := n.checkpointLocked(); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// errNilNode is what the methods of a nil *Node return: a node comes from
// [Open].
var errNilNode = errors.New("kubelet: a nil *Node (a node comes from Open)")

// RemovedLeftovers returns the paths of the temporary files, left by
// checkpoint writes that a crash interrupted, that Open removed (ascending;
// nil when there were none), for the agent to log.
func (n *Node) RemovedLeftovers() []string {
	if n == nil {
		return nil
	}
	return slices.Clone(n.leftovers)
}

// Machine returns the node's machine.
func (n *Node) Machine() *topology.Machine {
	if n == nil {
		return nil
	}
	return n.m
}

// CheckpointPath returns the checkpoint file's path ("" when the state is
// kept in memory only).
func (n *Node) CheckpointPath() string {
	if n == nil {
		return ""
	}
	return n.path
}

// Admit admits pod on the node and returns what it receives.
//
//   - With a numaplace.io/allocation decision, it claims exactly the CPUs,
//     GPUs, devices and memory the decision names. If some are not free it
//     refuses with a *[TopologyAffinityError] listing each conflict: which
//     CPUs or devices are held by which pod, unhealthy, reserved, or not on
//     this node. When the pod has a NUMA spec too, the decision's CPU and
//     GPU counts must match its request.
//     A decision that reserves memory must reserve exactly the pod's memory
//     request. GPUs and devices the decision names that ResourceClaims
//     reserved for the pod hold ([Node.HoldClaim]: numaplace-scheduler
//     allocates a DRA pod's claims by its decision) are the pod's through
//     those claims: they stay held by the claims (Admission.GPUs and
//     Admission.Claims name them, as for a pod placed with its claims'
//     GPUs below); every GPU and device of those claims must be named by
//     the decision, and a pod's GPUs come all from its claims or none,
//     else the decision is refused as kube.ErrInvalidDecision (a decision
//     that names none of them was made without them: the pod has its
//     claims' devices beside the decision's). A pod whose
//     claims hold GPUs may ask for no GPUs (it takes its claims') and,
//     having claims, for no CPUs either.
//   - Without a decision, a pod with a NUMA spec is placed by its policy,
//     its memory request per NUMA node with its CPUs and GPUs (unless
//     NodeOptions.DisableMemoryAlignment, or the machine describes no
//     memory); a refusal is a *[TopologyAffinityError] carrying the
//     placement engine's reason (and unwrapping to its
//     *allocator.PlacementError).
//   - Without a decision, a pod with a NUMA spec for which the node holds
//     ResourceClaims with GPUs ([Node.HoldClaim], reserved for the pod's
//     UID: the DRA driver prepares them before the pod's sandbox runs)
//     gets those GPUs for its GPU request, never others: its CPUs and
//     memory are placed by its policy aligned with the claimed GPUs, as
//     the policy would place the request with exactly those GPUs
//     (SingleNUMANode on their NUMA node; Restricted and BestEffort as
//     they would with those GPUs fixed), and the GPUs stay held by the
//     claims (the pod's allocation names none; Admission.GPUs and
//     Admission.Claims name them). A pod that asks for GPUs asks for as
//     many as its claims hold; another number is an error wrapping
//     kube.ErrInvalidPod naming both (a pod asking for none takes the
//     claims' GPUs as its own). When the policy cannot be met with the
//     claimed GPUs (SingleNUMANode with claimed GPUs on two NUMA nodes,
//     or no free CPUs beside them) the pod is refused with a
//     *[TopologyAffinityError] naming the claims, their GPUs and the
//     engine's reason.
//   - A pod without a NUMA spec runs on the shared pool: the CPUs no
//     exclusive allocation holds (reserved CPUs included) and every NUMA
//     node. It is refused only when the shared pool is empty.
//
// An exclusive admission that would leave the shared pool empty while
// pods run on it (shared-pool pods, and decisions without CPUs, whose
// containers run on the shared pool) is refused too, and so is a decision
// without CPUs when the shared pool is empty. Admitting a pod that is already
// admitted returns its admission when the decision (or, for a pod the node
// placed, the request) is the same, and an error wrapping
// [ErrAdmittedDifferently] otherwise. A pod that cannot be read (see
// kube.ParsePod) or a malformed decision returns an error wrapping
// kube.ErrInvalidPod or kube.ErrInvalidDecision. On any error nothing
// changes; on success the checkpoint is written before Admit returns, and
// if it cannot be written the admission is undone and the error returned.
func (n *Node) Admit(pod *kube.Pod) (Admission, error) {
	if n == nil {
		return Admission{}, errNilNode
	}
	if pod == nil {
		return Admission{}, errors.New("kubelet: Admit of a nil pod")
	}
	key := pod.Key()
	if pod.Name == "" {
		return Admission{}, fmt.Errorf("%w %s: the pod has no name", kube.ErrInvalidPod, key)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// The claims the node holds for the pod: a NUMA pod may have no
	// request of its own beside them.
	claims := n.claimsLocked(reservedFor(pod.UID))
	if len(claims) > pod.ResourceClaims {
		p := *pod
		p.ResourceClaims = len(claims)
		pod = &p
	}
	req, err := kube.ParsePod(pod, n.opts.Pods)
	if err != nil {
		return Admission{}, err
	}
	var dec *kube.Decision
	if v, ok := pod.Annotations[kube.AnnotationAllocation]; ok {
		d, err := kube.ParseDecision(v)
		if err != nil {
			return Admission{}, fmt.Errorf("pod %s: %w", key, err)
		}
		dec = &d
	}

	if rec, ok := n.pods[key]; ok {
		return n.readmitLocked(pod, key, rec, req, dec, claims)
	}
	rec := podRecord{uid: pod.UID}
	switch {
	case dec != nil:
		rec.source = FromDecision
		gpus, names, err := n.claimLocked(key, req, dec, claims)
		if err != nil {
			return Admission{}, err
		}
		rec.claimGPUs, rec.claims = gpus, names
	case req.NUMA && claimsWithGPUs(claims):
		rec.source = Local
		gpus, names, err := n.placeWithClaimsLocked(key, req, claims)
		if err != nil {
			return Admission{}, err
		}
		rec.claimGPUs, rec.claims = gpus, names
	case req.NUMA:
		rec.source = Local
		r := n.localRequest(req, key)
		a, err := n.s.Allocate(&r)
		if err != nil {
			var pe *allocator.PlacementError
			if errors.As(err, &pe) {
				return Admission{}, affinityError(key, nil, err)
			}
			return Admission{}, fmt.Errorf("pod %s: %w", key, err)
		}
		var held []Conflict
		for _, g := range a.GPUs {
			held = append(held, n.kubeletHoldersLocked(g, key)...)
		}
		if len(held) > 0 {
			_ = n.s.Release(key)
			return Admission{}, affinityError(key, held, nil)
		}
	default:
		rec.source = SharedPool
		if n.sharedPoolLocked().IsEmpty() {
			return Admission{}, affinityError(key, []Conflict{{Resource: "cpu", Items: "the shared pool",
				Problem: "has no CPUs: exclusive allocations hold every CPU"}}, nil)
		}
	}
	if rec.source != SharedPool && n.sharedPoolLocked().IsEmpty() {
		// A decision without CPUs runs on the shared pool too.
		if a, _ := n.s.Get(key); a.CPUs.IsEmpty() {
			_ = n.s.Release(key)
			return Admission{}, affinityError(key, []Conflict{{Resource: "cpu", Items: "the shared pool",
				Problem: "has no CPUs for a decision without CPUs: exclusive allocations hold every CPU"}}, nil)
		}
		if c := n.countShared(); c > 0 {
			_ = n.s.Release(key)
			return Admission{}, affinityError(key, []Conflict{{Resource: "cpu", Items: "the shared pool",
				Problem: fmt.Sprintf("would be left without CPUs while %d shared-pool pods run", c)}}, nil)
		}
	}
	n.pods[key] = rec
	if err := n.checkpointLocked(); err != nil {
		delete(n.pods, key)
		if rec.source != SharedPool {
			_ = n.s.Release(key)
		}
		return Admission{}, fmt.Errorf("admit pod %s: undone: %w", key, n.recheckpointLocked(err))
	}
	return n.admissionLocked(key, rec), nil
}

// countShared counts the admitted pods that run on the shared pool: those
// without a NUMA spec and those whose decision holds no CPUs (a GPU pod
// without a NUMA spec placed by the scheduler).
func (n *Node) countShared() int {
	c := 0
	for key, r := range n.pods {
		if r.source == SharedPool {
			c++
		} else if a, ok := n.s.Get(key); ok && a.CPUs.IsEmpty() {
			c++
		}
	}
	return c
}

// readmitLocked handles Admit of a pod that is already admitted.
func (n *Node) readmitLocked(pod *kube.Pod, key string, rec podRecord, req kube.PodRequest, dec *kube.Decision, own []ClaimHold) (Admission, error) {
	differ := func(format string, args ...any) (Admission, error) {
		return Admission{}, fmt.Errorf("%w: pod %s: %s", ErrAdmittedDifferently, key, fmt.Sprintf(format, args...))
	}
	if rec.uid != "" && pod.UID != "" && rec.uid != pod.UID {
		return differ("the admitted pod has UID %s, this one %s; remove the old pod first", rec.uid, pod.UID)
	}
	if rec.source == SharedPool {
		if dec != nil || req.NUMA {
			return differ("it runs on the shared pool, this admission asks for exclusive resources")
		}
		return n.admissionLocked(key, rec), nil
	}
	if dec == nil && !req.NUMA {
		return differ("it holds exclusive resources, this admission is for the shared pool")
	}
	old, _ := n.s.Get(key)
	if dec != nil {
		d, claimGPUs, _, err := n.withoutOwnClaims(key, dec, own)
		if err != nil {
			return Admission{}, err
		}
		a, err := d.Allocation(n.m, key)
		if err != nil {
			return Admission{}, fmt.Errorf("pod %s: %w", key, err)
		}
		if !sameHolding(&old, &a) || !slices.Equal(claimGPUs, rec.claimGPUs) {
			return differ("it holds %s and its claims' GPUs %v, the decision names %s and its claims' GPUs %v",
				describe(n.m, &old), rec.claimGPUs, describe(n.m, &a), claimGPUs)
		}
		return n.admissionLocked(key, rec), nil
	}
	r := n.localRequest(req, key)
	held := len(old.GPUs) + len(rec.claimGPUs)
	if len(rec.claimGPUs) > 0 && r.GPUs == 0 {
		r.GPUs = held // a pod asking for no GPUs takes its claims' GPUs
	}
	if old.CPUs.Size() != r.CPUs || held != r.GPUs || old.MemoryMiB() != r.MemoryMiB ||
		old.Policy != r.Policy || old.Exclusive != r.Exclusive {
		return differ("it holds %d CPUs, %d GPUs and %d MiB of memory under %s/%s, the pod now asks for %d CPUs, %d GPUs and %d MiB under %s/%s",
			old.CPUs.Size(), held, old.MemoryMiB(), old.Policy, old.Exclusive, r.CPUs, r.GPUs, r.MemoryMiB, r.Policy, r.Exclusive)
	}
	return n.admissionLocked(key, rec), nil
}

// localRequest is the allocator request of a NUMA pod the node places
// itself: with its memory when the node aligns memory.
func (n *Node) localRequest(req kube.PodRequest, key string) allocator.Request {
	if n.alignMem {
		return req.Request(key)
	}
	return req.RequestWithoutMemory(key)
}

// describe names what an allocation on machine m holds, for messages.
func describe(m *topology.Machine, a *allocator.Allocation) string {
	s := fmt.Sprintf("%s CPUs %q GPUs %v", a.Policy, a.CPUs.String(), a.GPUs)
	for _, c := range slices.Sorted(maps.Keys(a.Devices)) {
		s += fmt.Sprintf(" %s %v", c, a.Devices[c])
	}
	for _, x := range a.Memory {
		s += fmt.Sprintf(" %d MiB of memory on NUMA node %d", x.MiB, memoryNodeID(m, x))
	}
	return s
}

// sameHolding reports whether a and b hold the same resources under the
// same policy (order of GPUs and devices aside).
func sameHolding(a, b *allocator.Allocation) bool {
	if a.Policy != b.Policy || a.Exclusive != b.Exclusive || a.FullPCPUs != b.FullPCPUs || !a.CPUs.Equal(b.CPUs) {
		return false
	}
	if !slices.Equal(sortedInts(a.GPUs), sortedInts(b.GPUs)) || !slices.Equal(a.Memory, b.Memory) {
		return false
	}
	for c := range a.Devices {
		if len(a.Devices[c]) > 0 && len(b.Devices[c]) == 0 {
			return false
		}
	}
	for c := range b.Devices {
		if !slices.Equal(sortedStrings(a.Devices[c]), sortedStrings(b.Devices[c])) {
			return false
		}
	}
	return true
}

func sortedInts(s []int) []int          { s = slices.Clone(s); slices.Sort(s); return s }
func sortedStrings(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// claimLocked claims the decision's resources for the pod. GPUs and
// devices the decision names that ResourceClaims reserved for the pod
// (own) hold are the pod's through those claims: they are not claimed
// again, and the claims keep holding them. Every GPU and device of own must
// be named by the decision (the decision is the whole of what the pod
// gets). It returns the GPUs the pod has through its claims (ascending) and
// the namespace/names of the claims holding them.
func (n *Node) claimLocked(key string, req kube.PodRequest, dec *kube.Decision, own []ClaimHold) ([]int, []string, error) {
	d, claimGPUs, names, err := n.withoutOwnClaims(key, dec, own)
	if err != nil {
		return nil, nil, err
	}
	if conflicts := n.conflictsLocked(d); len(conflicts) > 0 {
		return nil, nil, affinityError(key, conflicts, nil)
	}
	a, err := d.Allocation(n.m, key)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s: %w", key, err)
	}
	if len(claimGPUs) > 0 && len(a.GPUs) > 0 {
		return nil, nil, fmt.Errorf("pod %s: %w: it names GPUs %s, which the pod's ResourceClaims %s hold, and GPUs %s, which they do not: a pod's GPUs come all from its claims or none",
			key, kube.ErrInvalidDecision, intList(claimGPUs), strings.Join(names, ", "), intList(sortedInts(a.GPUs)))
	}
	wantGPUs := req.GPUs
	if wantGPUs == 0 && len(claimGPUs) > 0 {
		wantGPUs = len(claimGPUs) // a pod asking for no GPUs takes its claims'
	}
	if req.NUMA && (a.CPUs.Size() != req.CPUs || len(a.GPUs)+len(claimGPUs) != wantGPUs) {
		return nil, nil, fmt.Errorf("pod %s: %w: it gives %d CPUs and %d GPUs, the pod requests %d CPUs and %d GPUs",
			key, kube.ErrInvalidDecision, a.CPUs.Size(), len(a.GPUs)+len(claimGPUs), req.CPUs, wantGPUs)
	}
	if mem := a.MemoryMiB(); mem != 0 && mem != req.MemoryMiB {
		return nil, nil, fmt.Errorf("pod %s: %w: it reserves %d MiB of memory, the pod requests %d MiB",
			key, kube.ErrInvalidDecision, mem, req.MemoryMiB)
	}
	if len(claimGPUs) > 0 {
		a.GPUs = []int{} // empty, as the checkpoint restores it
	}
	got, err := n.s.Claim(a)
	if err != nil {
		return nil, nil, affinityError(key, nil, err)
	}
	if len(dec.NUMANodes) > 0 {
		want := make([]numa.NodeID, len(dec.NUMANodes))
		for i, id := range dec.NUMANodes {
			want[i] = numa.NodeID(id)
		}
		slices.Sort(want)
		span := got.NUMANodes()
		for _, g := range claimGPUs {
			gpu, _ := n.m.GPU(g)
			if !slices.Contains(span, gpu.NUMANode) {
				span = append(span, gpu.NUMANode)
			}
		}
		slices.Sort(span)
		if !slices.Equal(span, want) {
			_ = n.s.Release(key)
			return nil, nil, fmt.Errorf("pod %s: %w: it names NUMA nodes %v, but its CPUs, GPUs and memory lie on %v",
				key, kube.ErrInvalidDecision, want, span)
		}
	}
	return claimGPUs, names, nil
}

// sameDeviceCount reports whether a and b list as many devices of each
// class.
func sameDeviceCount(a, b map[string][]string) bool {
	for class, ids := range b {
		if len(a[class]) != len(ids) {
			return false
		}
	}
	return true
}

// withoutOwnClaims returns dec without the GPUs and devices that the
// claims own (reserved for the pod) hold, the GPUs it took out
// (ascending) and the namespace/names of the claims holding them. When dec
// names some of them, a GPU or device of own that dec does not name is an
// error wrapping kube.ErrInvalidDecision: the pod would get it through the
// claim's CDI devices though its decision, made with its claims, leaves it
// out. A decision that names none of them is returned as it is: it was
// made without the claims, whose devices the pod's containers get beside
// the decision's.
func (n *Node) withoutOwnClaims(key string, dec *kube.Decision, own []ClaimHold) (*kube.Decision, []int, []string, error) {
	if len(own) == 0 {
		return dec, nil, nil, nil
	}
	gpuClaim := map[int]string{}
	devClaim := map[string]map[string]string{}
	for _, c := range own {
		for _, g := range c.GPUs {
			gpuClaim[g] = c.Key()
		}
		for class, ids := range c.Devices {
			if devClaim[class] == nil {
				devClaim[class] = map[string]string{}
			}
			for _, id := range ids {
				devClaim[class][id] = c.Key()
			}
		}
	}
	d := *dec
	d.GPUs = nil
	d.Devices = nil
	var gpus []int
	used := map[string]bool{}
	for _, g := range dec.GPUs {
		if name, ok := gpuClaim[g.ID]; ok {
			gpus = append(gpus, g.ID)
			used[name] = true
			delete(gpuClaim, g.ID)
			continue
		}
		d.GPUs = append(d.GPUs, g)
	}
	for class, ids := range dec.Devices {
		for _, id := range ids {
			if _, ok := devClaim[class][id]; ok {
				delete(devClaim[class], id)
				continue
			}
			if d.Devices == nil {
				d.Devices = map[string][]string{}
			}
			d.Devices[class] = append(d.Devices[class], id)
		}
	}
	if len(gpus) == 0 && len(d.Devices) == len(dec.Devices) && sameDeviceCount(d.Devices, dec.Devices) {
		// The decision names nothing the claims hold: its GPUs and devices
		// are its own, the claims' are the claims' (a decision made
		// without them).
		return dec, nil, nil, nil
	}
	var missing []string
	for _, g := range slices.Sorted(maps.Keys(gpuClaim)) {
		missing = append(missing, fmt.Sprintf("GPU %d (ResourceClaim %s)", g, gpuClaim[g]))
	}
	for _, class := range slices.Sorted(maps.Keys(devClaim)) {
		for _, id := range slices.Sorted(maps.Keys(devClaim[class])) {
			missing = append(missing, fmt.Sprintf("%s device %q (ResourceClaim %s)", class, id, devClaim[class][id]))
		}
	}
	if len(missing) > 0 {
		return nil, nil, nil, fmt.Errorf("pod %s: %w: the pod's claims hold %s, which the decision does not name",
			key, kube.ErrInvalidDecision, strings.Join(missing, ", "))
	}
	slices.Sort(gpus)
	names := slices.Sorted(maps.Keys(used))
	return &d, gpus, names, nil
}

// conflictsLocked lists what the decision names that is not free.
func (n *Node) conflictsLocked(dec *kube.Decision) []Conflict {
	var out []Conflict
	add := func(res, items, problem, by string) {
		out = append(out, Conflict{Resource: res, Items: items, Problem: problem, HeldBy: by})
	}
	cpus, err := numa.ParseCPUSet(dec.CPUSet)
	if err != nil { // ParseDecision has checked it; keep the node safe anyway
		add("cpu", "cpuset "+strconv.Quote(dec.CPUSet), "is not a CPU list", "")
		return out
	}
	if bad := cpus.Difference(n.m.CPUs()); !bad.IsEmpty() {
		add("cpu", cpuItems(bad), verb(bad, "does", "do")+" not exist on this node", "")
	}
	if bad := cpus.Intersection(n.m.ReservedCPUs()); !bad.IsEmpty() {
		add("cpu", cpuItems(bad), verb(bad, "is", "are")+" reserved for the system (--reserved-cpus)", "")
	}
	live := n.s.Live()
	for i := range live {
		b := &live[i]
		if both := cpus.Intersection(b.CPUs); !both.IsEmpty() {
			add("cpu", cpuItems(both), verb(both, "is", "are")+" held by pod "+b.ID, b.ID)
		}
	}
	seenGPU := map[int]bool{}
	for _, g := range dec.GPUs {
		item := "GPU " + strconv.Itoa(g.ID)
		gpu, ok := n.m.GPU(g.ID)
		switch {
		case seenGPU[g.ID]:
			add("gpu", item, "is named twice", "")
			continue
		case !ok:
			add("gpu", item, "does not exist on this node", "")
			continue
		case g.UUID != "" && gpu.UUID != "" && g.UUID != gpu.UUID:
			add("gpu", item, fmt.Sprintf("is %s on this node, the decision names %s", gpu.UUID, g.UUID), "")
			continue
		}
		seenGPU[g.ID] = true
		if n.unhealthy[allocator.GPUClass][strconv.Itoa(g.ID)] {
			add("gpu", item, "is unhealthy", "")
		}
		for i := range live {
			if slices.Contains(live[i].GPUs, g.ID) {
				out = append(out, n.heldByLocked("gpu", item, live[i].ID))
			}
		}
		out = append(out, n.kubeletHoldersLocked(g.ID, "")...)
	}
	for _, class := range slices.Sorted(maps.Keys(dec.Devices)) {
		seen := map[string]bool{}
		for _, id := range dec.Devices[class] {
			item := class + " device " + strconv.Quote(id)
			_, ok := n.devs[class][id]
			switch {
			case seen[id]:
				add(class, item, "is named twice", "")
				continue
			case !ok:
				add(class, item, "does not exist on this node", "")
				continue
			}
			seen[id] = true
			if n.unhealthy[class][id] {
				add(class, item, "is unhealthy", "")
			}
			for i := range live {
				if slices.Contains(live[i].Devices[class], id) {
					out = append(out, n.heldByLocked(class, item, live[i].ID))
				}
			}
		}
	}
	nodes := slices.Clone(dec.NUMANodes)
	for k := range dec.MemoryMiB {
		id, _ := strconv.Atoi(k)
		nodes = append(nodes, id)
	}
	slices.Sort(nodes)
	for _, id := range slices.Compact(nodes) {
		if _, ok := n.m.NodeIndex(numa.NodeID(id)); !ok {
			add("numaNode", "NUMA node "+strconv.Itoa(id), "does not exist on this node", "")
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(dec.MemoryMiB), compareIDs) {
		want := dec.MemoryMiB[k]
		id, _ := strconv.Atoi(k)
		i, ok := n.m.NodeIndex(numa.NodeID(id))
		if !ok || want == 0 {
			continue
		}
		if free := n.s.NodeFree(i)["memory"]; want > free {
			var holders []string
			for j := range live {
				for _, x := range live[j].Memory {
					if j, ok := memoryIndex(n.m, x); ok && j == i && x.MiB > 0 {
						holders = append(holders, fmt.Sprintf("%s (%d MiB)", live[j].ID, x.MiB))
					}
				}
			}
			problem := fmt.Sprintf("is more than the %d MiB free there of %d MiB", free, n.m.PodMemoryMiB(i))
			if len(holders) > 0 {
				problem += "; held by pods " + strings.Join(holders, ", ")
			}
			add("memory", fmt.Sprintf("%d MiB of memory on NUMA node %d", want, id), problem, "")
		}
	}
	return out
}

// verb returns one or many by the size of s.
func verb(s numa.CPUSet, one, many string) string {
	if s.Size() == 1 {
		return one
	}
	return many
}

func cpuItems(s numa.CPUSet) string {
	if s.Size() == 1 {
		return "CPU " + s.String()
	}
	return "CPUs " + s.String()
}

// Remove releases what the pod holds and forgets it. A pod that is not
// admitted (or whose UID is not the admitted one's, when both are known)
// returns an error wrapping allocator.ErrUnknownID and changes nothing, so
// a repeated Remove is harmless. The checkpoint is written before Remove
// returns; if it cannot be written the pod is admitted again as it was and
// the error returned.
func (n *Node) Remove(pod *kube.Pod) error {
	if n == nil {
		return errNilNode
	}
	if pod == nil {
		return errors.New("kubelet: Remove of a nil pod")
	}
	key := pod.Key()
	n.mu.Lock()
	defer n.mu.Unlock()
	rec, ok := n.pods[key]
	if !ok {
		return fmt.Errorf("%w: pod %s is not admitted on this node", allocator.ErrUnknownID, key)
	}
	if rec.uid != "" && pod.UID != "" && rec.uid != pod.UID {
		return fmt.Errorf("%w: pod %s with UID %s is not admitted on this node (the admitted one has UID %s)",
			allocator.ErrUnknownID, key, pod.UID, rec.uid)
	}
	var old allocator.Allocation
	if rec.source != SharedPool {
		a, _ := n.s.Get(key)
		old = a.Clone()
		if err := n.s.Release(key); err != nil {
			return fmt.Errorf("remove pod %s: %w", key, err)
		}
	}
	delete(n.pods, key)
	if err := n.checkpointLocked(); err != nil {
		n.pods[key] = rec
		if rec.source != SharedPool {
			if _, cerr := n.s.Claim(old); cerr != nil {
				return fmt.Errorf("remove pod %s: %w; and giving its allocation back failed: %w", key, err, cerr)
			}
		}
		return fmt.Errorf("remove pod %s: undone: %w", key, n.recheckpointLocked(err))
	}
	return nil
}

// SetDeviceHealth marks a device healthy or unhealthy: class "gpu" with the
// GPU's index as a decimal string or its UUID, or another class with the
// device's ID. A GPU index is recorded in its canonical decimal form
// (allocator.CanonicalDeviceID: "+3", "03" and "0000000003" are GPU 3, and
// "3" clears what any of them set); other spellings and class names that
// differ in case are refused. An unhealthy device is never handed out to new pods; the
// pods holding it keep it and are returned (their keys, ascending) so the
// caller can act on them; claims holding it ([Node.HoldClaim]) keep it too
// and are not among them. An unknown class or device returns an error
// wrapping allocator.ErrUnknownDevice and changes nothing. A change is
// written to the checkpoint before SetDeviceHealth returns; if it cannot
// be written the change is undone and the error returned.
func (n *Node) SetDeviceHealth(class, id string, healthy bool) (affected []string, err error) {
	if n == nil {
		return nil, errNilNode
	}
	if class == allocator.GPUClass {
		if i, ok := n.dp.lookup(id); ok {
			id = strconv.Itoa(n.dp.gpuIDs[i])
		}
	}
	id, err = allocator.CanonicalDeviceID(class, id)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	was := !n.unhealthy[class][id]
	affected, err = n.s.SetDeviceHealth(class, id, healthy)
	affected = slices.DeleteFunc(affected, isClaimID)
	if err != nil || was == healthy {
		return affected, err
	}
	n.markHealth(class, id, healthy)
	if err := n.checkpointLocked(); err != nil {
		_, _ = n.s.SetDeviceHealth(class, id, was)
		n.markHealth(class, id, was)
		return nil, fmt.Errorf("set %s %s healthy=%t: undone: %w", class, id, healthy, n.recheckpointLocked(err))
	}
	return affected, nil
}

func (n *Node) markHealth(class, id string, healthy bool) {
	if healthy {
		delete(n.unhealthy[class], id)
		return
	}
	if n.unhealthy[class] == nil {
		n.unhealthy[class] = map[string]bool{}
	}
	n.unhealthy[class][id] = true
}

// Unhealthy returns the unhealthy devices by class ("gpu" for GPUs, by
// index as a decimal string), each list ascending.
func (n *Node) Unhealthy() map[string][]string {
	if n == nil {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := map[string][]string{}
	for c, ids := range n.unhealthy {
		if len(ids) > 0 {
			out[c] = slices.SortedFunc(maps.Keys(ids), compareIDs)
		}
	}
	return out
}

// compareIDs orders decimal IDs numerically and other IDs as strings.
func compareIDs(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if errA == nil && errB == nil {
		return x - y
	}
	return strings.Compare(a, b)
}

// Get returns the admission of the pod with the given key (namespace/name),
// with the shared pool as it is now for a shared-pool pod.
func (n *Node) Get(key string) (Admission, bool) {
	if n == nil {
		return Admission{}, false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	rec, ok := n.pods[key]
	if !ok {
		return Admission{}, false
	}
	return n.admissionLocked(key, rec), true
}

// Admissions returns every admitted pod's admission, ordered by key.
func (n *Node) Admissions() []Admission {
	if n == nil {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	keys := slices.Sorted(maps.Keys(n.pods))
	out := make([]Admission, len(keys))
	for i, k := range keys {
		out[i] = n.admissionLocked(k, n.pods[k])
	}
	return out
}

// SharedPool returns the CPUs of the shared pool: every CPU of the machine
// that no exclusive allocation holds, reserved CPUs included (as the
// kubelet's default cpuset).
func (n *Node) SharedPool() numa.CPUSet {
	if n == nil {
		return numa.CPUSet{}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.sharedPoolLocked()
}

func (n *Node) sharedPoolLocked() numa.CPUSet {
	pool := n.s.FreeCPUs()
	pool.UnionWith(n.m.ReservedCPUs())
	return pool
}

// admissionLocked builds the admission of an admitted pod.
func (n *Node) admissionLocked(key string, rec podRecord) Admission {
	adm := Admission{Pod: key, UID: rec.uid, Source: rec.source}
	if rec.source == SharedPool {
		adm.CPUs = n.sharedPoolLocked()
		adm.NUMANodes = n.m.NodeIDs()
		adm.MemoryNodes = adm.NUMANodes
		for c, ids := range rec.kubeletGPUs {
			if adm.KubeletGPUs == nil {
				adm.KubeletGPUs = map[string][]int{}
			}
			adm.KubeletGPUs[c] = slices.Clone(ids)
		}
		return adm
	}
	a, _ := n.s.Get(key)
	a = a.Clone()
	adm.Allocation = a
	adm.Policy = a.Policy
	adm.CPUs = a.CPUs
	adm.NUMANodes = a.NUMANodes()
	for _, x := range a.Memory {
		if x.MiB > 0 {
			adm.MemoryNodes = append(adm.MemoryNodes, memoryNodeID(n.m, x))
		}
	}
	if len(adm.MemoryNodes) == 0 {
		adm.MemoryNodes = slices.Clone(adm.NUMANodes)
	}
	// The memory node of each of the pod's GPUs (a Grace machine's GPU
	// memory onlined as a NUMA node) joins cpuset.mems: it is not pod
	// memory and takes no part in the span, but the GPU's driver places
	// the pod's pages there when it moves them to its GPU.
	for _, g := range a.GPUs {
		if id, ok := n.m.GPUMemoryNode(g); ok && !slices.Contains(adm.MemoryNodes, id) {
			adm.MemoryNodes = append(adm.MemoryNodes, id)
			slices.Sort(adm.MemoryNodes)
		}
	}
	for _, g := range a.GPUs {
		gpu, _ := n.m.GPU(g)
		adm.GPUs = append(adm.GPUs, kube.DecisionGPU{ID: g, UUID: gpu.UUID})
	}
	if len(rec.claimGPUs) > 0 {
		span := numa.Mask(0)
		for _, id := range adm.NUMANodes {
			if i, ok := n.m.NodeIndex(id); ok {
				span = span.With(i)
			}
		}
		for _, g := range rec.claimGPUs {
			gpu, _ := n.m.GPU(g)
			adm.GPUs = append(adm.GPUs, kube.DecisionGPU{ID: g, UUID: gpu.UUID})
			if i, ok := n.m.NodeIndex(gpu.NUMANode); ok {
				span = span.With(i)
			}
		}
		slices.SortFunc(adm.GPUs, func(x, y kube.DecisionGPU) int { return x.ID - y.ID })
		adm.NUMANodes = n.m.IDsOf(span)
		adm.Claims = slices.Clone(rec.claims)
	}
	adm.Devices = a.Devices
	return adm
}

// Report returns the node's NUMA report for the scheduler, a
// NodeResourceTopology named name (the Kubernetes node's name) built by
// kube.NRTFromState: per NUMA node, the CPUs, GPUs and memory as they are
// now (capacity, allocatable, available), the distances, and the whole
// machine as an attribute so that the scheduler's model is the node's own.
// The shared pool's pods are not counted in the amounts: the scheduler
// accounts them itself. The report carries the fingerprint of the pods it
// accounts for (every admitted pod, those of the shared pool included:
// the pods whose sandbox runs), as the attribute
// kube.NRTAttributePodFingerprint with method
// kube.PodFingerprintMethodExcludeTerminal and as the annotation
// kube.AnnotationPodFingerprint, so that a reader can tell whether the
// report has seen the pods it knows bound to the node. The amounts and the
// fingerprint are read under one lock: they describe the same moment.
func (n *Node) Report(name string) (*kube.NodeResourceTopology, error) {
	if n == nil {
		return nil, errNilNode
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	r, err := kube.NRTFromState(n.m, n.s)
	if err != nil {
		return nil, err
	}
	r.Metadata.Name = name
	var fp kube.PodFingerprint
	for key := range n.pods {
		ns, pod, _ := strings.Cut(key, "/")
		fp.Add(ns, pod)
	}
	sign := fp.Sign()
	r.SetAttribute(kube.NRTAttributePodFingerprint, sign)
	r.SetAttribute(kube.NRTAttributePodFingerprintMethod, kube.PodFingerprintMethodExcludeTerminal)
	r.Metadata.Annotations = map[string]string{kube.AnnotationPodFingerprint: sign}
	return r, nil
}

// PreferredAllocator returns the node's preferred-allocation helper.
func (n *Node) PreferredAllocator() *PreferredAllocator {
	if n == nil {
		return nil
	}
	return n.dp
}

// GetPreferredAllocation is [PreferredAllocator.GetPreferredAllocation] on the
// node's machine.
func (n *Node) GetPreferredAllocation(available, mustInclude []string, size int) ([]string, error) {
	if n == nil {
		return nil, errNilNode
	}
	return n.dp.GetPreferredAllocation(available, mustInclude, size)
}
