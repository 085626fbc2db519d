package scheduler

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
)

// Nodes in the same state give the same verdict: a cluster of thousands of
// nodes holds few different states (empty machines, machines of one kind
// filled alike), and ScheduleOne, Filter and Score judge a pod once per
// state, not once per node.
//
// A node's group is the set of nodes whose every input to a verdict is
// the same: the machine up to its name and GPU UUIDs (the machine class,
// whose never-fit verdicts are shared already), the labels' effect (opt-in,
// memory alignment), the kubelet policy and options, the totals, and what
// the allocator state holds (every live allocation but for its ID, and the
// device health). Two nodes share a group when the SHA-256 digests of that
// content are equal (as machines share a class), that is when their states
// are equal: a verdict found on one is the verdict of every other.
//
// A node's group is worked out when a verdict is first asked of it after a
// change (under its read lock) and forgotten whenever its write lock is
// taken ([Cache.lockNode]), so that a group found on a node without its
// lock is one the node had at some moment: a verdict read from it is the
// node's verdict at that moment, as a verdict under the read lock taken
// then would be. Groups are counted by their nodes and dropped when none is
// left, so their memory stays linear in the nodes.
//
// A group keeps the verdict of one request, the last judged on it. A
// verdict reads of the pod only its request (kube.PodRequest and the
// amounts of kinds of the caller's own): pods asking for the same are one
// request class ([reqClass], numbered by [Cache.classify]), and the verdict
// kept for a class answers every later pod of that class (the replicas of a
// workload, scheduled one after another) until the node changes. A group
// of one node keeps a verdict only for a class seen before (a request that
// repeats), so that one-off requests cost no memory.
// TestGroupedAnswersMatchUngrouped checks on random, changing clusters that
// every answer is the one each node judged on its own gives.

// nodeGroup is one group of nodes in the same state.
type nodeGroup struct {
	key  [sha256.Size]byte
	refs atomic.Int32 // the nodes in the group; changed under Cache.groupsMu
	// last is the verdict of the last pod judged on the group.
	last atomic.Pointer[groupVerdict]
}

// groupVerdict is a verdict (always scored) of a request class on a group.
type groupVerdict struct {
	class uint64 // the request class (podReq.class)
	v     verdict
}

// lockNode takes n's write lock and forgets its group: whatever the caller
// changes, the next verdict is worked out afresh.
func (c *Cache) lockNode(n *nodeInfo) {
	n.mu.Lock()
	if g := n.group.Swap(nil); g != nil {
		c.releaseGroup(g)
	}
}

func (c *Cache) releaseGroup(g *nodeGroup) {
	c.groupsMu.Lock()
	defer c.groupsMu.Unlock()
	if g.refs.Add(-1) == 0 {
		delete(c.groups, g.key)
	}
}

// groupLocked returns n's group, working it out when n changed since it
// was last asked (the caller holds n's read lock); nil for a removed node.
func (c *Cache) groupLocked(n *nodeInfo) *nodeGroup {
	if g := n.group.Load(); g != nil || n.removed {
		return g
	}
	ks := keyScratches.Get().(*keyScratch)
	key := sha256.Sum256(ks.groupKeyLocked(n))
	keyScratches.Put(ks)
	c.groupsMu.Lock()
	g, ok := c.groups[key]
	if !ok {
		g = &nodeGroup{key: key}
		c.groups[key] = g
	}
	g.refs.Add(1)
	c.groupsMu.Unlock()
	if !n.group.CompareAndSwap(nil, g) { // another reader found it first
		c.releaseGroup(g)
		return n.group.Load()
	}
	return g
}

// keyScratch is the working memory of one group key, pooled.
type keyScratch struct {
	b, buf []byte
	spans  [][2]int
}

var keyScratches = sync.Pool{New: func() any { return new(keyScratch) }}

// groupKeyLocked writes everything a verdict on n reads but the pod (the
// caller holds n's read lock) into ks.b and returns it: see nodeGroup.
// TestGroupKeyCoversState fails when the totals, a snapshot or an
// allocation gain a field that it leaves out.
func (ks *keyScratch) groupKeyLocked(n *nodeInfo) []byte {
	b := ks.b[:0]
	b = append(b, n.class.key[:]...)
	flags := byte(0)
	if n.optedIn {
		flags |= 1
	}
	if n.alignMem {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, int64(n.allocCPUs))
	b = binary.AppendVarint(b, int64(n.gpuCap))
	b = binary.AppendVarint(b, n.memCap)
	b = binary.AppendVarint(b, int64(n.exclCPUs))
	b = binary.AppendVarint(b, int64(n.gpusHeld))
	b = binary.AppendVarint(b, n.plainMilli)
	b = binary.AppendVarint(b, n.memUsed)
	if n.kpol != "" { // else the options are the zero value
		kubelet, _ := json.Marshal(struct {
			Policy  string
			Options any
		}{string(n.kpol), n.kopts})
		b = appendString(b, string(kubelet))
	}
	// What a snapshot holds (allocator.Snapshot), read in place: the
	// multiset of allocations, whatever their IDs (each written apart,
	// then in the order of their bytes), and the device health.
	live := n.state.Live()
	buf, spans := ks.buf[:0], ks.spans[:0]
	for i := range live {
		lo := len(buf)
		buf = appendAllocation(buf, &live[i])
		spans = append(spans, [2]int{lo, len(buf)})
	}
	slices.SortFunc(spans, func(x, y [2]int) int { return bytes.Compare(buf[x[0]:x[1]], buf[y[0]:y[1]]) })
	b = binary.AppendUvarint(b, uint64(len(spans)))
	for _, sp := range spans {
		b = append(b, buf[sp[0]:sp[1]]...)
	}
	unhealthy := n.state.Unhealthy()
	b = binary.AppendUvarint(b, uint64(len(unhealthy)))
	for _, class := range slices.Sorted(maps.Keys(unhealthy)) {
		b = appendStrings(appendString(b, class), unhealthy[class])
	}
	ks.b, ks.buf, ks.spans = b, buf, spans
	return b
}

// appendAllocation writes what an allocation holds, but for its ID, self-
// delimited: every exported field (TestGroupKeyCoversState fails when a
// field is added that it leaves out).
func appendAllocation(b []byte, a *allocator.Allocation) []byte {
	flags := byte(0)
	if a.FullPCPUs {
		flags = 1
	}
	b = append(b, byte(a.Policy), byte(a.Exclusive), flags)
	b = binary.AppendUvarint(b, uint64(a.DenseSpan))
	b = binary.AppendUvarint(b, uint64(a.CPUs.Size()))
	for cpu := range a.CPUs.All() {
		b = binary.AppendUvarint(b, uint64(cpu))
	}
	b = binary.AppendUvarint(b, uint64(len(a.GPUs)))
	for _, g := range a.GPUs {
		b = binary.AppendVarint(b, int64(g))
	}
	b = binary.AppendUvarint(b, uint64(len(a.Devices)))
	if len(a.Devices) > 0 {
		for _, class := range slices.Sorted(maps.Keys(a.Devices)) {
			b = appendStrings(appendString(b, class), a.Devices[class])
		}
	}
	b = binary.AppendUvarint(b, uint64(len(a.Memory)))
	for _, m := range a.Memory {
		b = binary.AppendVarint(b, int64(m.Node))
		b = binary.AppendVarint(b, m.MiB)
	}
	b = binary.AppendUvarint(b, uint64(len(a.Amounts)))
	if len(a.Amounts) > 0 {
		for _, kind := range slices.Sorted(maps.Keys(a.Amounts)) {
			b = appendString(b, kind)
			b = binary.AppendUvarint(b, uint64(len(a.Amounts[kind])))
			for _, u := range a.Amounts[kind] {
				b = binary.AppendVarint(b, int64(u.Node))
				b = binary.AppendVarint(b, u.Units)
			}
		}
	}
	return b
}

// allocationKey is appendAllocation of a alone.
func allocationKey(a allocator.Allocation) string { return string(appendAllocation(nil, &a)) }

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = appendString(b, s)
	}
	return b
}

// evaluateGrouped writes to dst evaluate of pr on n, scored, answered from
// n's group when a node of the same state has been judged for pr's request
// class already (memo may be nil; pr was classified). The verdict is kept
// for the group's other nodes, for later pods of the class when it
// repeats, and with again for n itself (a Filter that a Score follows).
func (c *Cache) evaluateGrouped(n *nodeInfo, pr *podReq, memo *classMemo, again bool, dst *verdict) {
	if kept := n.kept(pr.class); kept != nil {
		*dst = kept.v
		return
	}
	c.evaluateAlone(n, pr, memo, again, dst)
}

// kept returns the verdict n's group keeps for the request class (nil when
// none, and for class 0), read without n's lock (see nodeGroup).
func (n *nodeInfo) kept(class uint64) *groupVerdict {
	if g := n.group.Load(); g != nil {
		if last := g.last.Load(); last != nil && last.class == class && class != 0 {
			return last
		}
	}
	return nil
}

// evaluateAlone is evaluateGrouped when n's group has no verdict for pr.
func (c *Cache) evaluateAlone(n *nodeInfo, pr *podReq, memo *classMemo, again bool, dst *verdict) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	c.evaluateInto(n, pr, true, memo, dst)
	if g := c.groupLocked(n); g != nil && pr.class != 0 && (again || pr.repeated || g.refs.Load() > 1) {
		g.last.Store(&groupVerdict{class: pr.class, v: *dst})
	}
}

// reqKey is everything of a pod that a verdict reads: its request, and the
// amounts of kinds of the caller's own written canonically.
type reqKey struct {
	req     kube.PodRequest
	amounts string
}

// reqClass is the number of a request class and whether a pod of it was
// classified before.
type reqClass struct {
	id       uint64
	repeated bool
}

// maxReqClasses bounds the request classes remembered; they start afresh
// (with new numbers) when full.
const maxReqClasses = 4096

// classify numbers pr's request class (pr.class, never 0): pods whose
// requests are equal get the same number while the class is remembered, so
// that a verdict kept for one answers the others. Numbers are never reused,
// so a verdict kept under a forgotten class answers no pod.
func (c *Cache) classify(pr *podReq) {
	k := reqKey{req: pr.PodRequest, amounts: pr.sh.amounts}
	c.reqsMu.Lock()
	defer c.reqsMu.Unlock()
	rc, ok := c.reqs[k]
	switch {
	case !ok:
		if len(c.reqs) >= maxReqClasses || c.reqs == nil {
			c.reqs = map[reqKey]reqClass{}
		}
		c.reqSeq++
		rc = reqClass{id: c.reqSeq}
		c.reqs[k] = rc
	case !rc.repeated:
		c.reqs[k] = reqClass{id: rc.id, repeated: true}
	}
	pr.class, pr.repeated = rc.id, ok
}

// groupCount returns the number of groups (for tests).
func (c *Cache) groupCount() int {
	c.groupsMu.Lock()
	defer c.groupsMu.Unlock()
	return len(c.groups)
}
