package scheduler

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
)

// Categories of refusals besides the allocator's (allocator.ErrInsufficient,
// allocator.ErrNoNUMAFit, allocator.ErrExclusivity). A *[FilterError]
// unwraps to [ErrUnschedulable] and to one of them.
var (
	// ErrUnschedulable is the category of every refusal of a pod by a node.
	ErrUnschedulable = errors.New("pod does not fit on node")
	// ErrNotOptedIn: a pod with a NUMA spec on a node without the opt-in
	// label.
	ErrNotOptedIn = errors.New("node does not take NUMA-aware pods")
	// ErrSharedPool: an exclusive placement would shrink the shared pool
	// below what the node's pods without a NUMA spec request, or below the
	// configured minimum.
	ErrSharedPool = errors.New("shared CPU pool would be too small")
	// ErrNodeRemoved: the node was removed while the pod was being placed.
	ErrNodeRemoved = errors.New("node removed")
	// ErrKubeletRefusal: on a node running the kubelet's own Topology
	// Manager (Node.KubeletPolicy), the kubelet would refuse the pod at
	// admission with a TopologyAffinityError.
	ErrKubeletRefusal = errors.New("the kubelet's Topology Manager would refuse the pod")
)

// FilterError is a node's refusal of a pod.
type FilterError struct {
	// Pod is the pod's key, namespace/name.
	Pod string
	// Node is the name of the node that refused the pod.
	Node string
	// Reasons are short and free of node-specific numbers, so that
	// ScheduleOne can count the nodes by reason, such as "no NUMA node has
	// 4 free GPUs now", "no NUMA node can hold 8 GPUs on this machine" or
	// "fewer than 24 free CPUs now" (usually one; one per short resource
	// when several are).
	Reasons []string
	// Detail is the whole explanation (for the allocator's refusals, its
	// PlacementError's Reason).
	Detail string
	// Err is the category: allocator.ErrInsufficient, ErrNoNUMAFit or
	// ErrExclusivity (with the *allocator.PlacementError itself),
	// [ErrNotOptedIn], [ErrSharedPool] or [ErrNodeRemoved].
	Err error
	// Never is true when the node cannot take the pod whatever is released
	// on it (its machine cannot hold the pod even empty, or it lacks the
	// opt-in label): the reasons say "can hold ... on this machine". False
	// when the refusal is about what is held now, which releasing pods
	// (preemption) may change: the reasons say "... now".
	Never bool
}

// Error implements error.
func (e *FilterError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("pod %s does not fit on node %s: %s", e.Pod, e.Node, e.Detail)
}

// Unwrap returns [ErrUnschedulable] and the category.
func (e *FilterError) Unwrap() []error {
	if e == nil {
		return nil
	}
	return []error{ErrUnschedulable, e.Err}
}

// shape is a request without its ID, the key of the machine classes'
// verdicts.
type shape struct {
	cpus, gpus int
	mem        int64
	pol        policy.Policy
	ex         policy.Exclusivity
	full       bool
	amounts    string // Request.Amounts, written canonically ("" for none)
}

// podReq is a pod as the cache reads it, once per scheduling cycle.
type podReq struct {
	key string
	kube.PodRequest
	// needsAlloc is true when the pod holds an allocation: a NUMA pod, or
	// a pod without a NUMA spec that asks for GPUs (placed under None).
	needsAlloc bool
	// areq is the allocator request (ID "", for Fit and Score) on a node
	// that aligns memory: a NUMA pod's memory request is in it. areqNoMem
	// is the one on a node that does not (the memory left out); sh and
	// shNoMem are their shapes. They are the same for a pod without a
	// memory request or without a NUMA spec.
	areq, areqNoMem allocator.Request
	sh, shNoMem     shape
	// kreq is what the kubelet's managers give the pod on a node running
	// the kubelet's Topology Manager: exclusive CPUs for a Guaranteed pod
	// with whole CPUs, and its GPUs; needsKubelet when it asks for either.
	// kreqMem adds the memory request of a Guaranteed pod, which the
	// kubelet's static memory manager pins (on a node that runs it);
	// needsKubeletMem when it asks for any of the three.
	kreq, kreqMem                 allocator.Request
	needsKubelet, needsKubeletMem bool
	// use is what the pod would take of a node's totals on a node of
	// numaplace's node agent (its exclusive CPUs and GPUs as the allocator
	// gives them), kuse on a node of the kubelet's own Topology Manager
	// (what the kubelet's managers give it).
	use, kuse usage
	// class is the request class (see Cache.classify; 0 when not
	// classified), repeated whether a pod of it was classified before.
	class    uint64
	repeated bool
}

// usage returns what the pod would take of n's totals (see podReq.use).
func (pr *podReq) usage(kubelet bool) *usage {
	if kubelet {
		return &pr.kuse
	}
	return &pr.use
}

// request returns the allocator request and its shape on node n (the
// caller holds n.mu): with the memory request where n aligns memory.
func (pr *podReq) request(n *nodeInfo) (*allocator.Request, shape) {
	if n.alignMem {
		return &pr.areq, pr.sh
	}
	return &pr.areqNoMem, pr.shNoMem
}

// kubeletRequest returns what the kubelet's managers give the pod on node n
// (a node running the kubelet's Topology Manager; the caller holds n.mu)
// and whether it asks for anything they manage: its memory too when n runs
// the static memory manager and its machine describes memory.
func (pr *podReq) kubeletRequest(n *nodeInfo) (*allocator.Request, bool) {
	if n.kopts.StaticMemoryManager && n.memCap > 0 {
		return &pr.kreqMem, pr.needsKubeletMem
	}
	return &pr.kreq, pr.needsKubelet
}

func shapeOf(a *allocator.Request) shape {
	sh := shape{cpus: a.CPUs, gpus: a.GPUs, mem: a.MemoryMiB, pol: a.Policy, ex: a.Exclusive, full: a.FullPCPUs}
	if len(a.Amounts) > 0 || len(a.Devices) > 0 {
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(a.Amounts)) {
			fmt.Fprintf(&b, "%q=%d;", k, a.Amounts[k])
		}
		for _, k := range slices.Sorted(maps.Keys(a.Devices)) {
			fmt.Fprintf(&b, "device %q=%d;", k, a.Devices[k])
		}
		sh.amounts = b.String()
	}
	return sh
}

func (c *Cache) parse(p *kube.Pod) (*podReq, error) {
	r, err := kube.ParsePod(p, c.cfg.Pods)
	if err != nil {
		return nil, err
	}
	pr := &podReq{key: p.Key(), PodRequest: r}
	switch {
	case r.NUMA:
		pr.areq, pr.areqNoMem = r.Request(""), r.RequestWithoutMemory("")
		pr.needsAlloc = true
		if c.cfg.Amounts != nil {
			amounts, err := c.cfg.Amounts(p)
			if err != nil {
				return nil, &kube.PodError{Pod: p.Key(), Field: "amounts", Reason: err.Error(), Cause: err}
			}
			pr.areq.Amounts, pr.areqNoMem.Amounts = amounts, amounts
		}
	case r.GPUs > 0:
		pr.areq = allocator.Request{GPUs: r.GPUs, Policy: policy.None}
		pr.areqNoMem = pr.areq
		pr.needsAlloc = true
	}
	pr.sh, pr.shNoMem = shapeOf(&pr.areq), shapeOf(&pr.areqNoMem)
	if !r.NUMA {
		if r.Guaranteed && r.MilliCPU%1000 == 0 {
			pr.kreq.CPUs = int(r.MilliCPU / 1000)
		}
		pr.kreq.GPUs = r.GPUs + r.NvidiaGPUs
		pr.needsKubelet = pr.kreq.CPUs > 0 || pr.kreq.GPUs > 0
		pr.kreqMem = pr.kreq
		if r.Guaranteed {
			pr.kreqMem.MemoryMiB = r.MemoryMiB
		}
		pr.needsKubeletMem = pr.needsKubelet || pr.kreqMem.MemoryMiB > 0
	}
	var excl, gpus int
	if r.NUMA {
		excl = r.CPUs
	}
	if pr.needsAlloc {
		gpus = pr.areq.GPUs // areqNoMem's are the same
	}
	pr.use = usageOf(&pr.PodRequest, excl, gpus)
	pr.kuse = usageOf(&pr.PodRequest, pr.kreq.CPUs, pr.kreq.GPUs)
	return pr, nil
}

// why is the kind of a verdict.
type why uint8

const (
	fits why = iota
	notOptedIn
	sharedPlain  // the pool would fall below the plain pods' requests
	sharedMin    // the pool would fall below the minimum
	short        // the node's totals are short (see verdict.short)
	allocRefused // err holds the allocator's error
	nodeGone
	kubeletNUMA    // a pod with a NUMA spec on a node of the kubelet's own policy
	kubeletRefused // the kubelet's Topology Manager would refuse it
)

// Bits of verdict.short: the node totals the cache checks itself.
const (
	shortCPU    uint8 = 1 << iota // a plain pod's request and the shared pool
	shortMemory                   // every pod's memory request and the node's memory
	shortGPU                      // more GPUs than the node has left
	shortExcl                     // more exclusive CPUs than the node has left
)

// verdict is a node's answer for a pod, cheap to produce: the error text
// is built only when asked for (refusalError).
type verdict struct {
	why     why
	never   bool  // allocRefused on the empty machine
	kubelet bool  // judged on a node of the kubelet's own policy (by podReq.kuse)
	short   uint8 // short totals, with every why
	// neverShort are the bits of short whose totals the machine itself
	// does not have (an empty node would refuse too).
	neverShort uint8
	score      int32 // when fits and scored
	have       int64 // the numbers of a shared-pool refusal
	need       int64 // (for kubeletRefused: the memory the kubelet would pin)
	cpu        int64 // thousandths of a CPU left in the shared pool (shortCPU)
	mem        int64 // MiB of memory left unrequested (shortMemory)
	err        error
}

// classMemo remembers, for one pod and one worker, the never-fit verdicts
// of the last few machine classes met: comparing a pointer is cheaper than
// the class's map lookup, and a cluster has few kinds of machines.
// Nodes of one class may differ in whether they align memory, so the
// entries are by class and alignment.
type classMemo struct {
	n    int
	next int
	mc   [4]*machineClass
	mem  [4]bool
	err  [4]error
}

func (m *classMemo) never(n *nodeInfo, pr *podReq) error {
	if m == nil {
		r, sh := pr.request(n)
		return n.class.never(sh, r)
	}
	for i := 0; i < m.n; i++ {
		if m.mc[i] == n.class && m.mem[i] == n.alignMem {
			return m.err[i]
		}
	}
	r, sh := pr.request(n)
	err := n.class.never(sh, r)
	i := m.next
	m.mc[i], m.mem[i], m.err[i] = n.class, n.alignMem, err
	m.next = (i + 1) % len(m.mc)
	m.n = max(m.n, i+1)
	return err
}

// checksLocked applies the cache's own rules ([totals.admit]) and the
// machine's never-fit verdict (the caller holds n.mu; memo may be nil).
// Short totals are reported with any other refusal, as kube-scheduler
// lists every insufficient resource, but for those the allocator's own
// never-fit refusal names (GPUs, exclusive CPUs).
func (c *Cache) checksLocked(n *nodeInfo, pr *podReq, memo *classMemo) (v verdict) {
	c.checksInto(n, pr, memo, &v)
	return v
}

// checksInto is checksLocked writing the verdict to v (in place: a verdict
// is copied once on ScheduleOne's path).
func (c *Cache) checksInto(n *nodeInfo, pr *podReq, memo *classMemo, v *verdict) {
	switch {
	case n.removed:
		*v = verdict{why: nodeGone}
		return
	case n.kpol != "":
		*v = c.kubeletChecksLocked(n, pr)
		return
	case pr.NUMA && !n.optedIn:
		*v = verdict{why: notOptedIn}
		return
	}
	// Counts the allocator would refuse anyway are checked without it: a
	// node short of GPUs or of CPUs in total is refused in a few
	// nanoseconds (most nodes of a saturated cluster).
	n.admitInto(&pr.use, c.cfg.MinSharedCPUs, v)
	if pr.needsAlloc {
		if err := memo.never(n, pr); err != nil {
			v.why, v.never, v.err, v.have, v.need = allocRefused, true, err, 0, 0
			v.short &^= shortGPU | shortExcl
			v.neverShort &^= shortGPU | shortExcl
		}
	}
}

// kubeletChecksLocked is checksLocked on a node of the kubelet's own
// Topology Manager: no pod with a NUMA spec; the totals, with what the
// kubelet's managers give the pod; and the kubelet's predicted admission
// for a pod that gets exclusive CPUs or GPUs.
func (c *Cache) kubeletChecksLocked(n *nodeInfo, pr *podReq) verdict {
	if pr.NUMA {
		return verdict{why: kubeletNUMA, kubelet: true}
	}
	// The minimum shared pool stands for the CPU the kubelet keeps shared.
	v := n.admit(pr.kuse, c.cfg.MinSharedCPUs)
	v.kubelet = true
	if v.why != fits {
		return v
	}
	if kreq, needs := pr.kubeletRequest(n); needs {
		hint, admit, err := topologymanager.Predict(n.kpol, n.kopts, n.m, n.state, kreq)
		if err != nil {
			return verdict{why: allocRefused, err: err, kubelet: true}
		}
		if !admit {
			return verdict{why: kubeletRefused, need: kreq.MemoryMiB, kubelet: true}
		}
		if kreq.MemoryMiB > 0 {
			// The memory manager may still fail to extend the merged
			// hint to nodes with enough free memory: Reserve would.
			if _, err := topologymanager.KubeletAllocation(n.m, n.state, "", kreq, hint); err != nil {
				return verdict{why: kubeletRefused, need: kreq.MemoryMiB, kubelet: true}
			}
		}
	}
	return v
}

// evaluate is Filter (and Score when scored) of pr on n (memo may be nil).
func (c *Cache) evaluate(n *nodeInfo, pr *podReq, scored bool, memo *classMemo) verdict {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return c.evaluateLocked(n, pr, scored, memo)
}

// evaluateLocked is evaluate under n's read lock, which the caller holds.
func (c *Cache) evaluateLocked(n *nodeInfo, pr *podReq, scored bool, memo *classMemo) (v verdict) {
	c.evaluateInto(n, pr, scored, memo, &v)
	return v
}

// evaluateInto is evaluateLocked writing the verdict to v.
func (c *Cache) evaluateInto(n *nodeInfo, pr *podReq, scored bool, memo *classMemo, v *verdict) {
	if c.checksInto(n, pr, memo, v); v.why != fits {
		return
	}
	if n.kpol != "" {
		*v = verdict{}
		if scored {
			v.score = int32(c.plainScoreLocked(n, pr))
		}
		return
	}
	if pr.needsAlloc {
		r, _ := pr.request(n)
		if scored && pr.NUMA {
			s, err := n.state.Score(r)
			if err != nil {
				*v = verdict{why: allocRefused, err: err}
				return
			}
			*v = verdict{score: int32(s)}
			return
		}
		if err := n.state.Fit(r); err != nil {
			*v = verdict{why: allocRefused, err: err}
			return
		}
	}
	*v = verdict{}
	if scored {
		v.score = int32(c.plainScoreLocked(n, pr))
	}
}

// plainScoreLocked scores a pod without a NUMA spec on the node's totals:
// the average, over CPU, memory (when known) and GPUs (when asked for), of
// the share in use after the placement; MostAllocated scores it, and
// LeastAllocated its complement, on 0-100.
func (c *Cache) plainScoreLocked(n *nodeInfo, pr *podReq) int {
	var sum float64
	k := 0
	add := func(used, capacity float64) {
		if capacity > 0 {
			sum += min(used/capacity, 1)
			k++
		}
	}
	d := pr.usage(n.kpol != "")
	add(float64(int64(n.exclCPUs+d.exclCPUs)*1000+n.plainMilli+d.sharedMilli), float64(n.allocCPUs)*1000)
	add(float64(n.memUsed+d.memMiB), float64(n.memCap))
	if d.gpus > 0 {
		add(float64(n.gpusHeld+d.gpus), float64(n.gpuCap))
	}
	u := 0.0
	if k > 0 {
		u = sum / float64(k)
	}
	if c.cfg.Allocator.Scoring == allocator.LeastAllocated {
		u = 1 - u
	}
	return int(u * 100)
}

// milliString writes thousandths of a CPU as "2", "1.5" or "0.25".
func milliString(m int64) string {
	s := strconv.FormatInt(m/1000, 10)
	if r := m % 1000; r != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%03d", r), "0")
	}
	return s
}

func cpus(n int64) string {
	if n == 1 {
		return "1 CPU"
	}
	return strconv.FormatInt(n, 10) + " CPUs"
}

// refusalError turns a refusing verdict into its *FilterError.
func (c *Cache) refusalError(node string, pr *podReq, v verdict) *FilterError {
	e := &FilterError{Pod: pr.key, Node: node, Never: v.never || v.neverShort != 0}
	u := pr.usage(v.kubelet)
	switch v.why {
	case notOptedIn:
		label := c.cfg.OptInLabel + "=" + c.cfg.OptInValue
		e.Err, e.Never = ErrNotOptedIn, true
		e.Reasons = []string{"node(s) without the label " + label}
		e.Detail = fmt.Sprintf("the pod has a NUMA topology spec and the node is not labelled %s", label)
	case sharedPlain:
		e.Err = ErrSharedPool
		e.Reasons = []string{"exclusive CPUs would starve the shared pool of the pods without a NUMA spec now"}
		e.Detail = fmt.Sprintf("taking %s exclusively would leave a shared pool of %s, but the node's pods without a NUMA spec request %s CPUs",
			cpus(int64(u.exclCPUs)), cpus(v.have), milliString(v.need))
	case sharedMin:
		e.Err = ErrSharedPool
		if v.never {
			e.Reasons = []string{fmt.Sprintf("the machine has too few CPUs to give %s exclusively and keep a shared pool of %s",
				cpus(int64(u.exclCPUs)), cpus(v.need))}
		} else {
			e.Reasons = []string{fmt.Sprintf("exclusive CPUs would leave a shared pool below the minimum of %s now", cpus(v.need))}
		}
		e.Detail = fmt.Sprintf("taking %s exclusively would leave a shared pool of %s, below the minimum of %s",
			cpus(int64(u.exclCPUs)), cpus(v.have), cpus(v.need))
	case nodeGone:
		e.Err = ErrNodeRemoved
		e.Reasons = []string{"node removed"}
		e.Detail = "the node was removed from the cache"
	case kubeletNUMA:
		e.Err, e.Never = ErrNotOptedIn, true
		e.Reasons = []string{"node(s) running the kubelet's own Topology Manager"}
		e.Detail = "the pod has a NUMA topology spec and the node's kubelet admits pods by its own Topology Manager policy"
	case kubeletRefused:
		e.Err = ErrKubeletRefusal
		e.Reasons = []string{"node(s) whose kubelet Topology Manager would refuse the pod (TopologyAffinityError)"}
		mem := ""
		if v.need > 0 {
			mem = fmt.Sprintf(", %d MiB of memory for the static memory manager", v.need)
		}
		e.Detail = fmt.Sprintf("the kubelet's Topology Manager policy would refuse the pod with TopologyAffinityError (%d exclusive CPUs, %d GPUs%s)",
			pr.kreq.CPUs, pr.kreq.GPUs, mem)
	case allocRefused:
		e.Err = v.err
		var pe *allocator.PlacementError
		if !errors.As(v.err, &pe) {
			e.Reasons = []string{v.err.Error()}
			e.Detail = v.err.Error()
			break
		}
		e.Reasons = placementReasons(pe, &pr.areq, v.never)
		e.Detail = pe.Reason
		if v.never {
			e.Detail += ", even with nothing allocated"
		}
	}
	var details []string
	if e.Detail != "" {
		details = append(details, e.Detail)
	}
	add := func(reason, detail string) {
		if e.Err == nil {
			e.Err = allocator.ErrInsufficient
		}
		if !slices.Contains(e.Reasons, reason) {
			e.Reasons = append(e.Reasons, reason)
		}
		details = append(details, detail)
	}
	never := func(bit uint8, yes, now string) string {
		if v.neverShort&bit != 0 {
			return yes
		}
		return now
	}
	if v.short&shortCPU != 0 {
		add(never(shortCPU, fmt.Sprintf("the machine has fewer than %s allocatable CPUs", milliString(u.sharedMilli)),
			fmt.Sprintf("fewer than %s CPUs free in the shared pool now", milliString(u.sharedMilli))),
			fmt.Sprintf("the shared CPU pool has %s CPUs left, the pod requests %s", milliString(v.cpu), milliString(u.sharedMilli)))
	}
	if v.short&shortMemory != 0 {
		add(never(shortMemory, fmt.Sprintf("the machine has less than %d MiB of memory", u.memMiB),
			fmt.Sprintf("less than %d MiB of memory unrequested now", u.memMiB)),
			fmt.Sprintf("%d MiB of memory left unrequested, the pod requests %d MiB", v.mem, u.memMiB))
	}
	if v.short&shortGPU != 0 {
		n := u.gpus
		add(never(shortGPU, fmt.Sprintf("the machine has fewer than %d GPUs", n), fmt.Sprintf("fewer than %d free GPUs now", n)),
			fmt.Sprintf("the node has fewer than %d GPUs left", n))
	}
	if v.short&shortExcl != 0 {
		n := u.exclCPUs
		add(never(shortExcl, fmt.Sprintf("the machine has fewer than %s allocatable", cpus(int64(n))),
			fmt.Sprintf("fewer than %d free CPUs now", n)),
			fmt.Sprintf("the node has fewer than %s left", cpus(int64(n))))
	}
	e.Detail = strings.Join(details, "; ")
	return e
}

// amount writes a demanded amount of a kind, free or not: "4 free GPUs"
// or "4 GPUs", "24 free CPUs", "12 free whole cores", "4096 MiB of free
// memory".
func amount(kind string, n int64, r *allocator.Request, free bool) string {
	adj := ""
	if free {
		adj = "free "
	}
	plural := func(one, many string) string {
		if n == 1 {
			return "1 " + adj + one
		}
		return strconv.FormatInt(n, 10) + " " + adj + many
	}
	switch kind {
	case allocator.GPUClass:
		return plural("GPU", "GPUs")
	case "cpu":
		if r.FullPCPUs {
			return plural("whole core", "whole cores")
		}
		return plural("CPU", "CPUs")
	case "memory":
		return strconv.FormatInt(n, 10) + " MiB of " + adj + "memory"
	}
	return plural(kind+" device", kind+" devices")
}

// placementReasons summarises an allocator refusal without the node's own
// numbers, so that nodes refusing for the same reason count together; never
// says the machine cannot hold the request even empty ("can hold ... on
// this machine") rather than now ("has ... free now").
func placementReasons(pe *allocator.PlacementError, r *allocator.Request, never bool) []string {
	where := "no NUMA node"
	switch {
	case pe.Width > 1 && pe.InSet:
		where = fmt.Sprintf("no set of %d NUMA nodes inside one NUMA set", pe.Width)
	case pe.Width > 1:
		where = fmt.Sprintf("no set of %d NUMA nodes", pe.Width)
	}
	switch {
	case errors.Is(pe, allocator.ErrInsufficient):
		out := make([]string, 0, len(pe.Short))
		for _, s := range pe.Short {
			if never {
				out = append(out, "the machine has fewer than "+amount(s.Resource, s.Need, r, false))
			} else {
				out = append(out, "fewer than "+amount(s.Resource, s.Need, r, true)+" now")
			}
		}
		if len(out) == 0 {
			if never {
				return []string{"the machine has too few resources"}
			}
			return []string{"too few free resources now"}
		}
		return out
	case errors.Is(pe, allocator.ErrNoNUMAFit):
		var parts []string
		for _, s := range pe.Short {
			parts = append(parts, amount(s.Resource, s.Need, r, !never))
		}
		switch {
		case never && len(parts) == 0:
			return []string{where + " can hold the requested CPUs and GPUs together on this machine"}
		case never:
			return []string{where + " can hold " + strings.Join(parts, " and ") + " on this machine"}
		case len(parts) == 0:
			return []string{where + " has the requested CPUs and GPUs free together now"}
		}
		return []string{where + " has " + strings.Join(parts, " and ") + " now"}
	case errors.Is(pe, allocator.ErrExclusivity):
		if pe.Width == 1 {
			return []string{"every NUMA node that fits is shared by multi-node allocations now (singleNUMANodeExclusive)"}
		}
		return []string{"every set of NUMA nodes that fits uses nodes of single-NUMA-node allocations now (singleNUMANodeExclusive)"}
	}
	return []string{pe.Reason}
}

// Filter says whether the pod fits on the named node now: nil, or a
// *[FilterError] with the reason. For a pod with a NUMA spec: the node must
// carry the opt-in label, the allocator must admit it (allocator.State.Fit;
// the reason is its PlacementError's), and its exclusive CPUs must leave
// the shared pool at least what the node's pods without a NUMA spec request
// and at least Config.MinSharedCPUs. For a pod without one: its CPU request
// must fit in the shared pool, its GPUs on the node. A NUMA pod's memory
// request is part of the allocator's request on a node that aligns memory
// (NodeStatus.MemoryAligned; docs/design.md, "Memory alignment"), and every
// pod's memory request is checked against the node's total memory when the
// machine gives it. An invalid pod returns its *kube.PodError, an unknown
// node an error wrapping [ErrUnknownNode]. Where the pod is already placed
// does not matter.
func (c *Cache) Filter(p *kube.Pod, node string) error {
	pp, err := c.Prepare(p)
	if err != nil {
		return err
	}
	return pp.Filter(node)
}

// Score rates the named node for the pod on 0-100, higher is better, or
// returns Filter's error. A pod with a NUMA spec is scored by the
// allocator (allocator.State.Score: alignment first, then the packing
// strategy); a pod without one by the node's totals (MostAllocated by
// default, LeastAllocated as Config.Allocator.Scoring says).
func (c *Cache) Score(p *kube.Pod, node string) (int, error) {
	pp, err := c.Prepare(p)
	if err != nil {
		return 0, err
	}
	return pp.Score(node)
}

func (c *Cache) prepare(p *kube.Pod, node string) (*podReq, *nodeInfo, error) {
	if p == nil {
		return nil, nil, fmt.Errorf("%w: no pod (nil)", kube.ErrInvalidPod)
	}
	pr, err := c.parse(p)
	if err != nil {
		return nil, nil, err
	}
	ni, err := c.node(node)
	if err != nil {
		return nil, nil, err
	}
	return pr, ni, nil
}
