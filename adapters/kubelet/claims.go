package kubelet

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
)

// ErrClaimHeldDifferently is returned by [Node.HoldClaim] for a claim the
// node already holds with other devices. Nothing changes.
var ErrClaimHeldDifferently = errors.New("the claim is already held with other devices")

// ClaimConsumer is a pod a claim is reserved for (an entry of the
// ResourceClaim's status.reservedFor): it lives in the claim's namespace.
type ClaimConsumer struct {
	// Name is the pod's name.
	Name string
	// UID is the pod's UID.
	UID string
}

// ClaimHold is a Kubernetes ResourceClaim whose devices the node holds for
// the DRA driver: the GPUs and devices of other classes allocated to it on
// this node, for the pods it is reserved for.
type ClaimHold struct {
	// UID is the claim's UID (required, without "/").
	UID string
	// Namespace and Name name the claim (both required).
	Namespace, Name string
	// Pods are the pods the claim is reserved for (may be empty).
	Pods []ClaimConsumer
	// GPUs are the claim's GPUs by ID (index), ascending.
	GPUs []int
	// Devices are the claim's devices of other classes (such as "rdma"),
	// by class, each list ascending.
	Devices map[string][]string
}

// Key returns the claim's namespace/name.
func (c ClaimHold) Key() string { return c.Namespace + "/" + c.Name }

// clone returns a deep copy of c.
func (c ClaimHold) clone() ClaimHold {
	c.Pods = slices.Clone(c.Pods)
	c.GPUs = slices.Clone(c.GPUs)
	if c.Devices != nil {
		d := make(map[string][]string, len(c.Devices))
		for k, v := range c.Devices {
			d[k] = slices.Clone(v)
		}
		c.Devices = d
	}
	return c
}

// claimPrefix starts the allocator IDs of claims. Pod keys hold a "/" and
// claim UIDs none, so the two never meet.
const claimPrefix = "claim:"

// claimID returns the allocator ID of the claim with the given UID.
func claimID(uid string) string { return claimPrefix + uid }

// isClaimID reports whether an allocator ID is a claim's.
func isClaimID(id string) bool {
	return strings.HasPrefix(id, claimPrefix) && !strings.Contains(id, "/")
}

// normalize checks a hold and returns it with its lists sorted and without
// repetition, or an error naming what is wrong.
func (n *Node) normalizeClaim(c ClaimHold) (ClaimHold, error) {
	c = c.clone()
	switch {
	case c.UID == "" || strings.ContainsAny(c.UID, "/ \t\n"):
		return c, fmt.Errorf("claim %s: UID %s: want a non-empty UID without slashes or blanks", c.Key(), quote.Short(c.UID))
	case c.Namespace == "" || c.Name == "":
		return c, fmt.Errorf("claim UID %s: the namespace and name are required", c.UID)
	}
	slices.Sort(c.GPUs)
	c.GPUs = slices.Compact(c.GPUs)
	for _, g := range c.GPUs {
		if _, ok := n.m.GPU(g); !ok {
			return c, fmt.Errorf("%w: claim %s: GPU %d is not a GPU of this machine", allocator.ErrUnknownDevice, c.Key(), g)
		}
	}
	for class, ids := range c.Devices {
		if len(ids) == 0 {
			delete(c.Devices, class)
			continue
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		c.Devices[class] = ids
		for _, id := range ids {
			if _, ok := n.devs[class][id]; !ok {
				return c, fmt.Errorf("%w: claim %s: %s device %s is not a device of this machine", allocator.ErrUnknownDevice, c.Key(), class, quote.Short(id))
			}
		}
	}
	if len(c.Devices) == 0 {
		c.Devices = nil
	}
	slices.SortFunc(c.Pods, func(a, b ClaimConsumer) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID)) })
	c.Pods = slices.Compact(c.Pods)
	return c, nil
}

// HoldClaim holds claim c's GPUs and devices on the node for its pods, as
// the DRA driver does when the kubelet prepares the claim: from then on no
// decision, placement of the node's, container given GPUs by the kubelet
// ([Node.SetKubeletGPUs]) or other claim gets them, and the shared pool's
// pods do not see them.
//
// A GPU or device that a pod's allocation, a container of a shared-pool
// pod (given by the kubelet) or another claim holds, or that is unhealthy,
// is refused with a *[TopologyAffinityError] (Claim is the claim's
// namespace/name) whose conflicts name each item and its holder, the pod
// or claim by namespace/name; nothing changes then. Holding a claim that
// is already held with the same GPUs and devices changes only its pods (a
// claim's reservedFor grows and shrinks) and succeeds; with other devices
// it is an error wrapping [ErrClaimHeldDifferently]. A GPU or device the
// machine does not have is an error wrapping allocator.ErrUnknownDevice;
// an empty UID, namespace or name is an error. The checkpoint is written
// before HoldClaim returns; if it cannot be written the change is undone
// and the error returned.
func (n *Node) HoldClaim(c ClaimHold) error {
	if n == nil {
		return errNilNode
	}
	c, err := n.normalizeClaim(c)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.claims[c.UID]; ok {
		if !slices.Equal(old.GPUs, c.GPUs) || !maps.EqualFunc(old.Devices, c.Devices, slices.Equal) ||
			old.Namespace != c.Namespace || old.Name != c.Name {
			return fmt.Errorf("%w: claim %s (UID %s) holds %s, now asked for %s", ErrClaimHeldDifferently,
				old.Key(), c.UID, describeClaim(old), describeClaim(c))
		}
		if slices.Equal(old.Pods, c.Pods) {
			return nil
		}
		n.claims[c.UID] = c
		if err := n.checkpointLocked(); err != nil {
			n.claims[c.UID] = old
			return fmt.Errorf("hold claim %s: undone: %w", c.Key(), n.recheckpointLocked(err))
		}
		return nil
	}
	if conflicts := n.claimConflictsLocked(c); len(conflicts) > 0 {
		return claimAffinityError(c.Key(), conflicts, nil)
	}
	a := allocator.Allocation{ID: claimID(c.UID), GPUs: slices.Clone(c.GPUs)}
	for class, ids := range c.Devices {
		if a.Devices == nil {
			a.Devices = map[string][]string{}
		}
		a.Devices[class] = slices.Clone(ids)
	}
	if _, err := n.s.Claim(a); err != nil {
		return claimAffinityError(c.Key(), nil, err)
	}
	n.claims[c.UID] = c
	if err := n.checkpointLocked(); err != nil {
		delete(n.claims, c.UID)
		_ = n.s.Release(claimID(c.UID))
		return fmt.Errorf("hold claim %s: undone: %w", c.Key(), n.recheckpointLocked(err))
	}
	return nil
}

// claimAffinityError is affinityError for claim key.
func claimAffinityError(key string, conflicts []Conflict, cause error) *TopologyAffinityError {
	e := affinityError("", conflicts, cause)
	e.Claim = key
	return e
}

// describeClaim names what a claim holds, for messages.
func describeClaim(c ClaimHold) string {
	s := fmt.Sprintf("GPUs %v", c.GPUs)
	for _, class := range slices.Sorted(maps.Keys(c.Devices)) {
		s += fmt.Sprintf(" %s %v", class, c.Devices[class])
	}
	return s
}

// claimConflictsLocked lists what claim c names that is not free.
func (n *Node) claimConflictsLocked(c ClaimHold) []Conflict {
	var out []Conflict
	live := n.s.Live()
	for _, g := range c.GPUs {
		item := "GPU " + strconv.Itoa(g)
		if n.unhealthy[allocator.GPUClass][strconv.Itoa(g)] {
			out = append(out, Conflict{Resource: "gpu", Items: item, Problem: "is unhealthy"})
		}
		for i := range live {
			if slices.Contains(live[i].GPUs, g) {
				out = append(out, n.heldByLocked("gpu", item, live[i].ID))
			}
		}
		out = append(out, n.kubeletHoldersLocked(g, "")...)
	}
	for _, class := range slices.Sorted(maps.Keys(c.Devices)) {
		for _, id := range c.Devices[class] {
			item := class + " device " + strconv.Quote(id)
			if n.unhealthy[class][id] {
				out = append(out, Conflict{Resource: class, Items: item, Problem: "is unhealthy"})
			}
			for i := range live {
				if slices.Contains(live[i].Devices[class], id) {
					out = append(out, n.heldByLocked(class, item, live[i].ID))
				}
			}
		}
	}
	return out
}

// heldByLocked is the conflict of items held by the allocation with the
// given allocator ID: a pod's (HeldBy its key) or a claim's (HeldByClaim
// its namespace/name).
func (n *Node) heldByLocked(res, items, id string) Conflict {
	if isClaimID(id) {
		key := strings.TrimPrefix(id, claimPrefix)
		if c, ok := n.claims[key]; ok {
			key = c.Key()
		}
		return Conflict{Resource: res, Items: items, Problem: "is held by ResourceClaim " + key, HeldByClaim: key}
	}
	return Conflict{Resource: res, Items: items, Problem: "is held by pod " + id, HeldBy: id}
}

// ReleaseClaim gives back what the claim with the given UID holds and
// forgets it, as the DRA driver does when the kubelet unprepares it. A
// claim the node does not hold returns an error wrapping
// allocator.ErrUnknownID and changes nothing, so a repeated release is
// harmless. The checkpoint is written before ReleaseClaim returns; if it
// cannot be written the claim is held again and the error returned.
func (n *Node) ReleaseClaim(uid string) error {
	if n == nil {
		return errNilNode
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.claims[uid]
	if !ok {
		return fmt.Errorf("%w: claim UID %s is not held on this node", allocator.ErrUnknownID, quote.Short(uid))
	}
	old, _ := n.s.Get(claimID(uid))
	old = old.Clone()
	if err := n.s.Release(claimID(uid)); err != nil {
		return fmt.Errorf("release claim %s: %w", c.Key(), err)
	}
	delete(n.claims, uid)
	if err := n.checkpointLocked(); err != nil {
		n.claims[uid] = c
		if _, cerr := n.s.Claim(old); cerr != nil {
			return fmt.Errorf("release claim %s: %w; and holding it again failed: %w", c.Key(), err, cerr)
		}
		return fmt.Errorf("release claim %s: undone: %w", c.Key(), n.recheckpointLocked(err))
	}
	return nil
}

// Claim returns the hold of the claim with the given UID (a copy).
func (n *Node) Claim(uid string) (ClaimHold, bool) {
	if n == nil {
		return ClaimHold{}, false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	c, ok := n.claims[uid]
	return c.clone(), ok
}

// Claims returns every claim the node holds (copies), ordered by
// namespace/name, then UID.
func (n *Node) Claims() []ClaimHold {
	if n == nil {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.claimsLocked(func(ClaimHold) bool { return true })
}

// ClaimsOfPod returns the claims the node holds for the pod with the given
// UID (those reserved for it), ordered as [Node.Claims]; none for an empty
// UID.
func (n *Node) ClaimsOfPod(podUID string) []ClaimHold {
	if n == nil || podUID == "" {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.claimsLocked(func(c ClaimHold) bool {
		return slices.ContainsFunc(c.Pods, func(p ClaimConsumer) bool { return p.UID == podUID })
	})
}

func (n *Node) claimsLocked(keep func(ClaimHold) bool) []ClaimHold {
	var out []ClaimHold
	for _, c := range n.claims {
		if keep(c) {
			out = append(out, c.clone())
		}
	}
	slices.SortFunc(out, func(a, b ClaimHold) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
	})
	return out
}

// ClaimedGPUs returns the GPUs (by ID) that claims hold, with the
// namespace/name of the claim holding each.
func (n *Node) ClaimedGPUs() map[int]string {
	if n == nil {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := map[int]string{}
	for _, c := range n.claims {
		for _, g := range c.GPUs {
			out[g] = c.Key()
		}
	}
	return out
}

// reservedFor returns the filter of the claims reserved for the pod with
// the given UID (none for an empty UID).
func reservedFor(podUID string) func(ClaimHold) bool {
	return func(c ClaimHold) bool {
		return podUID != "" && slices.ContainsFunc(c.Pods, func(p ClaimConsumer) bool { return p.UID == podUID })
	}
}

// claimsWithGPUs reports whether one of the claims holds a GPU.
func claimsWithGPUs(claims []ClaimHold) bool {
	return slices.ContainsFunc(claims, func(c ClaimHold) bool { return len(c.GPUs) > 0 })
}

// placeWithClaimsLocked admits the NUMA pod key, which has no decision,
// with the GPUs its claims hold serving its GPU request: its CPUs and
// memory are placed by its policy on a copy of the state in which the
// claims' GPUs are free and every other GPU unhealthy, so that the
// engine can pick those GPUs only; the placement's CPUs and memory (no
// GPU: the claims keep holding theirs) are then claimed for the pod in
// the node's state. It returns the claimed GPUs (ascending) and the
// namespace/names of the claims holding them, or the refusal.
func (n *Node) placeWithClaimsLocked(key string, req kube.PodRequest, claims []ClaimHold) ([]int, []string, error) {
	var gpus []int
	var names []string
	for _, c := range claims {
		if len(c.GPUs) > 0 {
			gpus = append(gpus, c.GPUs...)
			names = append(names, c.Key())
		}
	}
	slices.Sort(gpus)
	gpus = slices.Compact(gpus)
	slices.Sort(names)
	what := "ResourceClaim " + strings.Join(names, ", ")
	if len(names) > 1 {
		what = "ResourceClaims " + strings.Join(names, ", ")
	}
	if req.GPUs != 0 && req.GPUs != len(gpus) {
		return nil, nil, fmt.Errorf("pod %s: %w: it requests %d GPUs, and its %s hold %d (GPUs %s): the claims' GPUs serve the request, so the numbers must agree",
			key, kube.ErrInvalidPod, req.GPUs, what, len(gpus), intList(gpus))
	}
	st := n.s.Clone()
	for _, c := range claims {
		_ = st.Release(claimID(c.UID))
	}
	for _, g := range n.m.GPUs() {
		// A claimed GPU that turned unhealthy is still the claim's: the
		// pod has it through the claim.
		if _, err := st.SetDeviceHealth(allocator.GPUClass, strconv.Itoa(g.ID), slices.Contains(gpus, g.ID)); err != nil {
			return nil, nil, fmt.Errorf("pod %s: %w", key, err)
		}
	}
	r := n.localRequest(req, key)
	r.GPUs = len(gpus)
	a, err := st.Allocate(&r)
	if err == nil && !slices.Equal(sortedInts(a.GPUs), gpus) {
		err = fmt.Errorf("the placement took GPUs %s, not the claimed %s", intList(sortedInts(a.GPUs)), intList(gpus))
	}
	if err != nil {
		var nodes []numa.NodeID
		for _, g := range gpus {
			gpu, _ := n.m.GPU(g)
			nodes = append(nodes, gpu.NUMANode)
		}
		slices.Sort(nodes)
		reason := err.Error()
		var pe *allocator.PlacementError
		if errors.As(err, &pe) {
			reason = pe.Reason
		}
		e := &TopologyAffinityError{Pod: key, Cause: err, Reason: fmt.Sprintf(
			"its GPUs come from %s (GPUs %s, on NUMA nodes %v), and its %s policy cannot place its %d CPUs and %d MiB of memory with them: %s",
			what, intList(gpus), slices.Compact(nodes), r.Policy, r.CPUs, r.MemoryMiB, reason)}
		for _, name := range names {
			e.Conflicts = append(e.Conflicts, Conflict{Resource: "gpu", Items: "GPUs " + intList(gpus),
				Problem: "are held by ResourceClaim " + name, HeldByClaim: name})
		}
		return nil, nil, e
	}
	a.GPUs = a.GPUs[:0] // empty, as the checkpoint restores it
	if _, err := n.s.Claim(a); err != nil {
		return nil, nil, affinityError(key, nil, err)
	}
	return gpus, names, nil
}

// intList writes IDs as "0, 2, 3".
func intList(ids []int) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ", ")
}
