package kubelet

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/numaplace/numaplace/allocator"
)

// ErrNotShared is returned by [Node.SetKubeletGPUs] for a pod that holds
// exclusive resources: its containers' GPUs are its decision's, whatever
// the kubelet gave them.
var ErrNotShared = errors.New("the pod is not on the shared pool")

// SetKubeletGPUs records that the kubelet gave container of the admitted
// shared-pool pod key the GPUs gpus (by ID) through the device plugin: a
// pod outside numaplace's decisions (bound by nodeName, another scheduler,
// a DaemonSet) whose container sees the GPUs the kubelet chose. The node
// then refuses any decision that names them (see [Node.Admit]) until the
// pod is removed. Recording the GPUs a container already has changes
// nothing; recording others replaces what the container had.
//
// A GPU that a pod's allocation (a decision, or a placement of the node's)
// or a ResourceClaim ([Node.HoldClaim]) holds, or that another pod's
// container got from the kubelet, is refused
// with a *[TopologyAffinityError] whose conflicts name each GPU and its
// holder; nothing is recorded then. A GPU the machine does not have is an
// error wrapping allocator.ErrUnknownDevice; a pod that is not admitted
// one wrapping allocator.ErrUnknownID; a pod with exclusive resources one
// wrapping [ErrNotShared]. The checkpoint is written before it returns; if
// it cannot be written the change is undone and the error returned.
func (n *Node) SetKubeletGPUs(key, container string, gpus []int) error {
	if n == nil {
		return errNilNode
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	rec, ok := n.pods[key]
	switch {
	case !ok:
		return fmt.Errorf("%w: pod %s is not admitted on this node", allocator.ErrUnknownID, key)
	case rec.source != SharedPool:
		return fmt.Errorf("pod %s: %w: its containers' GPUs are those its allocation holds", key, ErrNotShared)
	}
	ids := sortedInts(gpus)
	ids = slices.Compact(ids)
	for _, g := range ids {
		if _, ok := n.m.GPU(g); !ok {
			return fmt.Errorf("%w: pod %s, container %s: GPU %d is not a GPU of this machine", allocator.ErrUnknownDevice, key, container, g)
		}
	}
	if slices.Equal(rec.kubeletGPUs[container], ids) {
		return nil
	}
	if conflicts := n.gpuHoldersLocked(ids, key); len(conflicts) > 0 {
		return affinityError(key, conflicts, nil)
	}
	old := rec.kubeletGPUs
	next := maps.Clone(old)
	if next == nil {
		next = map[string][]int{}
	}
	if len(ids) == 0 {
		delete(next, container)
	} else {
		next[container] = ids
	}
	if len(next) == 0 {
		next = nil
	}
	rec.kubeletGPUs = next
	n.pods[key] = rec
	if err := n.checkpointLocked(); err != nil {
		rec.kubeletGPUs = old
		n.pods[key] = rec
		return fmt.Errorf("record the kubelet's GPUs of pod %s: undone: %w", key, n.recheckpointLocked(err))
	}
	return nil
}

// gpuHoldersLocked lists, for each GPU of ids, the pods other than except
// that hold it (by an allocation, or by a container the kubelet gave it
// to) and the claims that hold it.
func (n *Node) gpuHoldersLocked(ids []int, except string) []Conflict {
	var out []Conflict
	live := n.s.Live()
	for _, g := range ids {
		item := "GPU " + strconv.Itoa(g)
		for i := range live {
			if live[i].ID != except && slices.Contains(live[i].GPUs, g) {
				c := n.heldByLocked("gpu", item, live[i].ID)
				if c.HeldBy != "" {
					c.Problem += " (its numaplace allocation)"
				}
				out = append(out, c)
			}
		}
		out = append(out, n.kubeletHoldersLocked(g, except)...)
	}
	return out
}

// kubeletHoldersLocked lists the shared-pool pods other than except whose
// containers the kubelet gave GPU g.
func (n *Node) kubeletHoldersLocked(g int, except string) []Conflict {
	var out []Conflict
	for _, key := range slices.Sorted(maps.Keys(n.pods)) {
		rec := n.pods[key]
		if key == except || rec.kubeletGPUs == nil {
			continue
		}
		for _, c := range slices.Sorted(maps.Keys(rec.kubeletGPUs)) {
			if slices.Contains(rec.kubeletGPUs[c], g) {
				out = append(out, Conflict{Resource: "gpu", Items: "GPU " + strconv.Itoa(g),
					Problem: fmt.Sprintf("is held by pod %s (container %s, given by the kubelet outside numaplace's decisions)", key, c),
					HeldBy:  key})
				break
			}
		}
	}
	return out
}

// kubeletHeldLocked returns the GPUs the kubelet gave shared-pool pods'
// containers, with the pod holding each.
func (n *Node) kubeletHeldLocked() map[int]string {
	out := map[int]string{}
	for key, rec := range n.pods {
		for _, ids := range rec.kubeletGPUs {
			for _, g := range ids {
				out[g] = key
			}
		}
	}
	return out
}
