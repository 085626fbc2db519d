package scheduler_test

import (
	"maps"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// withMemory sets the memory request and limit of every container of p.
func withMemory(p *kube.Pod, request, limit string) *kube.Pod {
	for i := range p.Containers {
		c := &p.Containers[i]
		c.Requests, c.Limits = maps.Clone(c.Requests), maps.Clone(c.Limits)
		if c.Requests == nil {
			c.Requests = map[string]string{}
		}
		if c.Limits == nil {
			c.Limits = map[string]string{}
		}
		if request != "" {
			c.Requests[kube.ResourceMemory] = request
		}
		if limit != "" {
			c.Limits[kube.ResourceMemory] = limit
		}
	}
	return p
}

// sparseMemMachine has NUMA nodes 0 and 3 (one socket each) of 8 CPUs,
// memMiB MiB and 2 GPUs each.
func sparseMemMachine(t testing.TB, memMiB int64) *topology.Machine {
	t.Helper()
	b := topology.NewBuilder("sparse-mem").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 7), MemoryMiB: memMiB}).
		AddNode(topology.Node{ID: 3, Socket: 1, CPUs: numa.CPURange(8, 15), MemoryMiB: memMiB})
	for g := range 4 {
		b.AddGPU(topology.GPU{ID: g, NUMANode: numa.NodeID(3 * (g / 2))})
	}
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

func decisionOf(t *testing.T, ann map[string]string) kube.Decision {
	t.Helper()
	d, err := kube.ParseDecision(ann[kube.AnnotationAllocation])
	require.NoError(t, err)
	return d
}

func labels(kv ...string) map[string]string {
	l := maps.Clone(optIn)
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return l
}

// The case: a SingleNUMANode pod asking for more memory than any
// NUMA node has is refused by every path, as the allocator alone refuses
// it, instead of being placed with "memoryMiB":{"0":0}.
func TestMemoryBeyondAnyNUMANodeIsRefused(t *testing.T) {
	m := preset(t, "dgx-h100") // 1 TiB per NUMA node, 2 TiB in all
	big := withMemory(numaPod("big", 24, 4, "SingleNUMANode"), "1536Gi", "1536Gi")
	require.Error(t, allocator.MustNew(m, allocator.Options{}).Fit(&allocator.Request{CPUs: 24, GPUs: 4,
		MemoryMiB: 1536 << 10, Policy: 1}), "the allocator alone refuses it")

	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "h", Labels: optIn, Machine: m})
	err := c.Filter(big, "h")
	var fe *scheduler.FilterError
	require.ErrorAs(t, err, &fe)
	require.ErrorIs(t, err, allocator.ErrNoNUMAFit)
	require.Equal(t, []string{"no NUMA node can hold 1572864 MiB of memory on this machine"}, fe.Reasons)
	require.True(t, fe.Never)
	require.Contains(t, fe.Detail, "even with nothing allocated")
	_, err = c.Score(big, "h")
	require.ErrorIs(t, err, allocator.ErrNoNUMAFit)
	pp, err := c.Prepare(big)
	require.NoError(t, err)
	require.ErrorIs(t, pp.Filter("h"), allocator.ErrNoNUMAFit)
	_, err = pp.Score("h")
	require.ErrorIs(t, err, allocator.ErrNoNUMAFit)
	require.ErrorIs(t, c.Reserve(big, "h"), allocator.ErrNoNUMAFit)
	_, err = c.ScheduleOne(big)
	var fit *scheduler.FitError
	require.ErrorAs(t, err, &fit)
	require.Equal(t, "0/1 nodes are available: 1 no NUMA node can hold 1572864 MiB of memory on this machine.", fit.Error())
	_, err = c.Preempt(big)
	require.ErrorIs(t, err, scheduler.ErrNoPreemption)
	st, _ := c.Node("h")
	require.Empty(t, st.Pods, "nothing was placed")

	// Restricted spreads it over both nodes, with the real amounts.
	wide := withMemory(numaPod("wide", 24, 4, "Restricted"), "1536Gi", "1536Gi")
	res, err := c.ScheduleOne(wide)
	require.NoError(t, err)
	d := decisionOf(t, res.Annotations)
	require.Equal(t, []int{0, 1}, d.NUMANodes)
	require.Equal(t, int64(1536<<10), d.MemoryMiB["0"]+d.MemoryMiB["1"])
	require.Positive(t, d.MemoryMiB["0"])
	require.Positive(t, d.MemoryMiB["1"])
}

// The decision carries the real per-node amounts by NUMA node ID (a sparse
// machine), every step of a cycle sees the memory of the pods placed before,
// and the node side claims and applies exactly that.
func TestMemoryJoinsTheDecision(t *testing.T) {
	m := sparseMemMachine(t, 16<<10)
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Labels: optIn, Machine: m})

	// 10 GiB of 16 per node: one pod per NUMA node, although CPUs and GPUs
	// would allow two on each.
	var placed []kube.Decision
	for i := range 2 {
		p := withMemory(numaPod("p"+strconv.Itoa(i), 2, 1, "SingleNUMANode"), "10Gi", "10Gi")
		require.NoError(t, c.Filter(p, "n"))
		_, err := c.Score(p, "n")
		require.NoError(t, err)
		res, err := c.ScheduleOne(p)
		require.NoError(t, err)
		d := decisionOf(t, res.Annotations)
		require.Len(t, d.NUMANodes, 1)
		require.Equal(t, map[string]int64{strconv.Itoa(d.NUMANodes[0]): 10 << 10}, d.MemoryMiB)
		pre, err := c.PreBind(p)
		require.NoError(t, err)
		require.Equal(t, res.Annotations, pre)
		placed = append(placed, d)
	}
	require.NotEqual(t, placed[0].NUMANodes, placed[1].NUMANodes, "memory sends the second pod to the other node")
	require.ElementsMatch(t, []int{0, 3}, []int{placed[0].NUMANodes[0], placed[1].NUMANodes[0]}, "IDs, not dense indices")

	third := withMemory(numaPod("third", 2, 1, "SingleNUMANode"), "10Gi", "10Gi")
	err := c.Filter(third, "n")
	require.ErrorIs(t, err, allocator.ErrNoNUMAFit)
	require.NotContains(t, err.Error(), "even with nothing allocated")
	require.NoError(t, c.Filter(withMemory(numaPod("fits", 2, 1, "SingleNUMANode"), "6Gi", "6Gi"), "n"))

	// The node side: admitted by the decision, memory accounted,
	// cpuset.mems on the decision's node, restored from the checkpoint.
	node, err := kubelet.Open(m, t.TempDir()+"/cp.json", kubelet.NodeOptions{})
	require.NoError(t, err)
	for i, d := range placed {
		p := withMemory(numaPod("p"+strconv.Itoa(i), 2, 1, "SingleNUMANode"), "10Gi", "10Gi")
		p.Annotations[kube.AnnotationAllocation] = d.String()
		adm, err := node.Admit(p)
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(d.NUMANodes[0]), adm.Mems())
		require.Equal(t, int64(10<<10), adm.Allocation.MemoryMiB())
	}
	p := withMemory(numaPod("local", 2, 1, "SingleNUMANode"), "10Gi", "10Gi")
	_, err = node.Admit(p)
	require.ErrorIs(t, err, kubelet.ErrTopologyAffinity, "the node has no NUMA node with 10 GiB left either")
}

// Every path of the cache places memory the same way: Reserve and AddPod
// without a decision allocate it, AddPod with a decision (a restarted
// scheduler) claims exactly the decision's, Preempt sees what evicting
// frees, and UpdateNode moves it to a new machine.
func TestMemoryOnEveryPath(t *testing.T) {
	m := sparseMemMachine(t, 16<<10)
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Labels: optIn, Machine: m})
	low := withPriority(withMemory(numaPod("low", 1, 0, "SingleNUMANode"), "12Gi", "12Gi"), 1)
	require.NoError(t, c.Reserve(low, "n"))
	ann, err := c.PreBind(low)
	require.NoError(t, err)
	d := decisionOf(t, ann)
	require.Equal(t, int64(12<<10), d.MemoryMiB[strconv.Itoa(d.NUMANodes[0])])

	// A pod bound by someone else (no decision) gets memory by its policy.
	other := withPriority(withMemory(numaPod("other", 1, 0, "SingleNUMANode"), "12Gi", "12Gi"), 1)
	require.NoError(t, c.AddPod(bound(other, "n", nil)))
	ps, ok := c.Pod(other.Key())
	require.True(t, ok)
	require.Equal(t, int64(12<<10), ps.Allocation.MemoryMiB())
	require.NotEqual(t, d.NUMANodes, idsOf(ps.Allocation.NUMANodes()))

	// Preemption: 8 GiB fits only where a victim leaves.
	high := withPriority(withMemory(numaPod("high", 1, 0, "SingleNUMANode"), "8Gi", "8Gi"), 10)
	require.ErrorIs(t, c.Filter(high, "n"), allocator.ErrNoNUMAFit)
	pe, err := c.Preempt(high)
	require.NoError(t, err)
	require.Len(t, pe.Victims, 1)
	pe2, err := c.PreemptOn(high, "n")
	require.NoError(t, err)
	require.Equal(t, pe, pe2)

	// A restarted scheduler rebuilds exactly the memory of the decisions.
	c2 := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Labels: optIn, Machine: m})
	require.NoError(t, c2.AddPod(bound(low, "n", ann)))
	got, ok := c2.Pod(low.Key())
	require.True(t, ok)
	require.Equal(t, d.String(), kube.NewDecision(m, got.Allocation).String(), "the decision round-trips")
	require.NoError(t, c.AddPod(bound(low, "n", ann)), "binding the reserved pod with its own decision")
	st, _ := c.Node("n")
	require.Len(t, st.Allocations, 2)

	// A decision naming memory the node no longer has free is accounted
	// with what is free, a misfit.
	c3 := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Labels: optIn, Machine: m})
	require.NoError(t, c3.AddPod(bound(low, "n", ann)))
	twin := withMemory(numaPod("twin", 1, 0, "SingleNUMANode"), "12Gi", "12Gi")
	d2 := d
	d2.CPUSet = "7"
	if d.NUMANodes[0] == 3 {
		d2.CPUSet = "15"
	}
	require.NoError(t, c3.AddPod(bound(twin, "n", map[string]string{kube.AnnotationAllocation: d2.String()})))
	tw, _ := c3.Pod(twin.Key())
	require.Equal(t, scheduler.MisfitLost, tw.Misfit)
	require.Contains(t, tw.MisfitReason, "MiB of memory")
	require.Equal(t, int64(4<<10), tw.Allocation.MemoryMiB(), "what the node has left")

	// UpdateNode to a machine with the same nodes keeps the memory; to one
	// with too little memory, the pods stay accounted with what it has,
	// misfits of the node.
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "n", Labels: optIn, Machine: sparseMemMachine(t, 16<<10)}))
	ps, _ = c.Pod(low.Key())
	require.Equal(t, int64(12<<10), ps.Allocation.MemoryMiB())
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "n", Labels: optIn, Machine: sparseMemMachine(t, 8<<10)}))
	st, _ = c.Node("n")
	kinds := map[string]scheduler.MisfitKind{}
	for _, mf := range st.Misfits {
		kinds[mf.Pod] = mf.Kind
	}
	require.Equal(t, map[string]scheduler.MisfitKind{"default/low": scheduler.MisfitLost, "default/other": scheduler.MisfitUnplaced}, kinds)
	ps, _ = c.Pod(low.Key())
	require.Equal(t, int64(8<<10), ps.Allocation.MemoryMiB())
}

func idsOf(ids []numa.NodeID) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// Memory alignment can be turned off per node (label) or for every node
// (Config), the label overriding the default both ways; a bad label value
// is an error; turning it off keeps what placed pods hold.
func TestMemoryAlignmentOption(t *testing.T) {
	m := sparseMemMachine(t, 16<<10)
	big := func(name string) *kube.Pod {
		return withMemory(numaPod(name, 2, 0, "SingleNUMANode"), "20Gi", "20Gi") // more than a node, less than both
	}
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "on", Labels: optIn, Machine: m},
		scheduler.Node{Name: "on-label", Labels: labels(kube.LabelMemoryAlignment, "true"), Machine: m},
		scheduler.Node{Name: "off", Labels: labels(kube.LabelMemoryAlignment, "false"), Machine: m})
	for _, n := range []string{"on", "on-label"} {
		require.ErrorIs(t, c.Filter(big("x"), n), allocator.ErrNoNUMAFit, n)
		st, _ := c.Node(n)
		require.True(t, st.MemoryAligned, n)
	}
	st, _ := c.Node("off")
	require.False(t, st.MemoryAligned)
	res, err := c.ScheduleOne(big("a"))
	require.NoError(t, err)
	require.Equal(t, "off", res.Node)
	d := decisionOf(t, res.Annotations)
	require.Len(t, d.NUMANodes, 1)
	require.Equal(t, map[string]int64{strconv.Itoa(d.NUMANodes[0]): 0}, d.MemoryMiB, "no memory reserved")
	st, _ = c.Node("off")
	require.Equal(t, int64(20<<10), st.MemoryRequestMiB, "still counted against the node's total")
	_, err = c.ScheduleOne(big("b"))
	require.ErrorIs(t, err, scheduler.ErrUnschedulable, "the total (32 GiB) is still checked")

	// The configured default, and the label overriding it.
	c2 := newCache(t, scheduler.Config{DisableMemoryAlignment: true},
		scheduler.Node{Name: "off", Labels: optIn, Machine: m},
		scheduler.Node{Name: "on", Labels: labels(kube.LabelMemoryAlignment, "true"), Machine: m})
	require.NoError(t, c2.Filter(big("x"), "off"))
	require.ErrorIs(t, c2.Filter(big("x"), "on"), allocator.ErrNoNUMAFit)

	// A bad value is an error naming the label and the values meant.
	for _, v := range []string{"False", "off", "", "yes"} {
		err := c2.AddNode(scheduler.Node{Name: "bad", Labels: labels(kube.LabelMemoryAlignment, v), Machine: m})
		require.ErrorIs(t, err, scheduler.ErrInvalidNode, v)
		require.Contains(t, err.Error(), kube.LabelMemoryAlignment)
		require.Contains(t, err.Error(), `"true"`)
		err = c2.UpdateNode(scheduler.Node{Name: "on", Labels: labels(kube.LabelMemoryAlignment, v), Machine: m})
		require.ErrorIs(t, err, scheduler.ErrInvalidNode, v)
	}
	_, ok := c2.Node("bad")
	require.False(t, ok)

	// Turning it off keeps the reserved memory; new pods go without.
	small := withMemory(numaPod("small", 2, 0, "SingleNUMANode"), "12Gi", "12Gi")
	require.NoError(t, c.Reserve(small, "on"))
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "on", Labels: labels(kube.LabelMemoryAlignment, "false"), Machine: m}))
	ps, _ := c.Pod(small.Key())
	require.Equal(t, int64(12<<10), ps.Allocation.MemoryMiB())
	st, _ = c.Node("on")
	require.False(t, st.MemoryAligned)
	require.NoError(t, c.Filter(big("c"), "on"), "12 + 20 GiB fit the node's 32 GiB in total")
}

// A machine that describes no memory cannot align it: NUMA pods are placed
// by their CPUs and GPUs, their decision reserves no memory, and their
// memory request is not checked (the node's total is unknown).
func TestMemoryUnknownMachine(t *testing.T) {
	m := sparseMemMachine(t, 0)
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Labels: labels(kube.LabelMemoryAlignment, "true"), Machine: m})
	st, _ := c.Node("n")
	require.False(t, st.MemoryAligned, "the label cannot make a machine without memory align it")
	p := withMemory(numaPod("p", 2, 1, "SingleNUMANode"), "64Gi", "64Gi")
	res, err := c.ScheduleOne(p)
	require.NoError(t, err)
	d := decisionOf(t, res.Annotations)
	require.Equal(t, map[string]int64{strconv.Itoa(d.NUMANodes[0]): 0}, d.MemoryMiB)

	// The node side agrees: it admits the decision, and places a pod
	// without one by its CPUs and GPUs, cpuset.mems its span.
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	p.Annotations[kube.AnnotationAllocation] = d.String()
	adm, err := node.Admit(p)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(d.NUMANodes[0]), adm.Mems())
	adm, err = node.Admit(withMemory(numaPod("q", 2, 1, "SingleNUMANode"), "64Gi", "64Gi"))
	require.NoError(t, err)
	require.Len(t, adm.NUMANodes, 1)
	require.Equal(t, strconv.Itoa(int(adm.NUMANodes[0])), adm.Mems())
}

// Pods without a memory request reserve none (cpuset.mems is their span);
// a request below its limit reserves the request, a limit alone stands for
// the request (as in Kubernetes); a Guaranteed pod's request is its limit.
func TestMemoryRequestsAndLimits(t *testing.T) {
	m := sparseMemMachine(t, 16<<10)
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Labels: optIn, Machine: m})
	for _, tt := range []struct {
		name, req, lim string
		want           int64
	}{
		{"none", "", "", 0},
		{"burstable", "2Gi", "4Gi", 2 << 10},
		{"limit-only", "", "3Gi", 3 << 10},
		{"guaranteed", "1Gi", "1Gi", 1 << 10},
		{"request-only", "512Mi", "", 512},
	} {
		p := withMemory(numaPod(tt.name, 1, 0, "SingleNUMANode"), tt.req, tt.lim)
		res, err := c.ScheduleOne(p)
		require.NoError(t, err, tt.name)
		d := decisionOf(t, res.Annotations)
		require.Equal(t, map[string]int64{strconv.Itoa(d.NUMANodes[0]): tt.want}, d.MemoryMiB, tt.name)
	}
}

// On a node running the kubelet's own Topology Manager with the static
// memory manager, a Guaranteed pod's memory joins the prediction: the
// single-numa-node policy refuses memory no NUMA node has, the pod is never
// sent there, and the memory is accounted per NUMA node as the manager pins
// it. Without the static memory manager, memory is not pinned.
func TestMemoryKubeletPolicyNodes(t *testing.T) {
	m := preset(t, "dgx-a100")
	perNode := m.Node(0).MemoryMiB
	static := topologymanager.PredictOptions{StaticMemoryManager: true}
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "mm", Machine: m, KubeletPolicy: topologymanager.PolicySingleNUMANode, KubeletOptions: static},
		scheduler.Node{Name: "none", Machine: m, KubeletPolicy: topologymanager.PolicySingleNUMANode})
	q := strconv.FormatInt(perNode+1024, 10) + "Mi"
	p := withMemory(guaranteedPod("p", 4, 0), q, q)
	err := c.Filter(p, "mm")
	require.ErrorIs(t, err, scheduler.ErrKubeletRefusal)
	require.Contains(t, err.Error(), "MiB of memory for the static memory manager")
	require.NoError(t, c.Filter(p, "none"))
	res, err := c.ScheduleOne(p)
	require.NoError(t, err)
	require.Equal(t, "none", res.Node)
	ps, _ := c.Pod(p.Key())
	require.Zero(t, ps.Allocation.MemoryMiB(), "no memory manager: nothing pinned")

	// A fractional-CPU Guaranteed pod has only memory for the managers.
	frac := withMemory(guaranteedPod("frac", 1, 0), "4Gi", "4Gi")
	frac.Containers[0].Requests[kube.ResourceCPU] = "500m"
	frac.Containers[0].Limits[kube.ResourceCPU] = "500m"
	require.NoError(t, c.Reserve(frac, "mm"))
	ps, _ = c.Pod(frac.Key())
	require.NotNil(t, ps.Allocation)
	require.Equal(t, int64(4<<10), ps.Allocation.MemoryMiB())
	require.Zero(t, ps.Allocation.CPUs.Size())
	require.Len(t, ps.Allocation.NUMANodes(), 1)

	// Filling one node's memory moves the next pod to another node.
	fill := strconv.FormatInt(perNode-(4<<10), 10) + "Mi"
	a := withMemory(guaranteedPod("a", 2, 0), fill, fill)
	require.NoError(t, c.Reserve(a, "mm"))
	pa, _ := c.Pod(a.Key())
	require.Equal(t, ps.Allocation.NUMANodes(), pa.Allocation.NUMANodes(), "best fit: the node frac started")
	b := withMemory(guaranteedPod("b", 2, 0), "8Gi", "8Gi")
	require.NoError(t, c.Reserve(b, "mm"))
	pb, _ := c.Pod(b.Key())
	require.NotEqual(t, pa.Allocation.NUMANodes(), pb.Allocation.NUMANodes(), "node full of memory")
}

// Random NUMA pods with memory on nodes that align it and nodes that do
// not: Filter says yes exactly when Reserve succeeds; no NUMA node ever
// holds more memory than it has; every decision reads back equal; and a
// scheduler restarted from the bound pods' decisions holds exactly the same
// allocations, memory included.
func TestMemoryCacheProperty(t *testing.T) {
	machines := []*topology.Machine{sparseMemMachine(t, 16<<10), preset(t, "dgx-a100")}
	pols := []string{"SingleNUMANode", "Restricted", "BestEffort", "None"}
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(machines).Draw(t, "machine")
		perNode := m.Node(0).MemoryMiB
		nodes := []scheduler.Node{
			{Name: "on", Labels: optIn, Machine: m},
			{Name: "off", Labels: labels(kube.LabelMemoryAlignment, "false"), Machine: m},
		}
		mk := func() *scheduler.Cache {
			c, err := scheduler.New(scheduler.Config{})
			require.NoError(t, err)
			for _, n := range nodes {
				require.NoError(t, c.AddNode(n))
			}
			return c
		}
		c := mk()
		var placed []*kube.Pod
		for i := range rapid.IntRange(1, 12).Draw(t, "pods") {
			p := numaPod("p"+strconv.Itoa(i), rapid.IntRange(1, 8).Draw(t, "cpus"),
				rapid.IntRange(0, 2).Draw(t, "gpus"), rapid.SampledFrom(pols).Draw(t, "pol"))
			mib := rapid.Int64Range(0, perNode*3/2).Draw(t, "mib")
			if mib > 0 {
				q := strconv.FormatInt(mib, 10) + "Mi"
				p = withMemory(p, q, q)
			}
			node := rapid.SampledFrom([]string{"on", "off"}).Draw(t, "node")
			ferr := c.Filter(p, node)
			rerr := c.Reserve(p, node)
			require.Equal(t, ferr == nil, rerr == nil, "Filter %v, Reserve %v", ferr, rerr)
			if rerr != nil {
				continue
			}
			ann, err := c.PreBind(p)
			require.NoError(t, err)
			d, err := kube.ParseDecision(ann[kube.AnnotationAllocation])
			require.NoError(t, err)
			again, err := kube.ParseDecision(d.String())
			require.NoError(t, err)
			require.Equal(t, d, again)
			require.Equal(t, ann[kube.AnnotationAllocation], d.String())
			var total int64
			for _, v := range d.MemoryMiB {
				total += v
			}
			if node == "on" {
				require.Equal(t, mib, total, "the decision reserves the request")
			} else {
				require.Zero(t, total)
			}
			b := bound(p, node, ann)
			require.NoError(t, c.AddPod(b))
			placed = append(placed, b)
		}
		for _, name := range []string{"on", "off"} {
			st, _ := c.Node(name)
			used := make([]int64, m.NumNodes())
			for _, a := range st.Allocations {
				for _, x := range a.Memory {
					i, ok := m.NodeIndex(x.Node)
					require.True(t, ok, "memory on NUMA node %d, which the machine has", x.Node)
					used[i] += x.MiB
				}
			}
			for i, u := range used {
				require.LessOrEqual(t, u, m.Node(i).MemoryMiB, "node %s NUMA node %d", name, m.NodeID(i))
			}
		}
		restarted := mk()
		for _, p := range placed {
			require.NoError(t, restarted.AddPod(p))
		}
		for _, name := range []string{"on", "off"} {
			a, _ := c.Node(name)
			b, _ := restarted.Node(name)
			require.Equal(t, len(a.Allocations), len(b.Allocations))
			for i := range a.Allocations {
				require.Equal(t, kube.NewDecision(m, &a.Allocations[i]).String(), kube.NewDecision(m, &b.Allocations[i]).String())
			}
			require.Equal(t, a.MemoryRequestMiB, b.MemoryRequestMiB)
		}
	})
}

// On a kubelet-policy node the memory manager's group (every node of the
// hint, 0 MiB ones too) is kept when the node's machine is replaced.
func TestMemoryKubeletGroupSurvivesUpdateNode(t *testing.T) {
	m := sparseMemMachine(t, 16<<10)
	static := topologymanager.PredictOptions{StaticMemoryManager: true}
	node := scheduler.Node{Name: "k", Machine: m, KubeletPolicy: topologymanager.PolicyBestEffort, KubeletOptions: static}
	c := newCache(t, scheduler.Config{}, node)
	wide := withMemory(guaranteedPod("wide", 12, 0), "1Gi", "1Gi")
	require.NoError(t, c.Reserve(wide, "k"))
	ps, _ := c.Pod(wide.Key())
	require.Equal(t, []allocator.NodeMemory{{Node: 0, MiB: 1024}, {Node: 3}}, ps.Allocation.Memory,
		"1 GiB on NUMA node 0, node 3 in the group")
	node.Machine = sparseMemMachine(t, 16<<10)
	require.NoError(t, c.UpdateNode(node))
	ps, _ = c.Pod(wide.Key())
	require.Equal(t, []allocator.NodeMemory{{Node: 0, MiB: 1024}, {Node: 3}}, ps.Allocation.Memory)
}
