package scheduler_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// groupCluster is a random cluster and the pods placed on it, for
// TestGroupedAnswersMatchUngrouped.
type groupCluster struct {
	t        *testing.T
	rng      *rand.Rand
	c        *scheduler.Cache
	machines []*topology.Machine
	nodes    []string
	placed   []*kube.Pod // reserved or bound
	next     int
	kinds    []func(name string) *kube.Pod // the kinds of pods made so far
}

func (g *groupCluster) pick(n int) int { return g.rng.IntN(n) }

// pod returns a new pod: a third of the time one asking for what an earlier
// pod asked for (a replica, of the same request class), else one of a
// random kind (see podKind).
func (g *groupCluster) pod() *kube.Pod {
	g.next++
	name := fmt.Sprintf("p%04d", g.next)
	if len(g.kinds) > 0 && g.pick(3) == 0 {
		return g.kinds[g.pick(len(g.kinds))](name)
	}
	kind := g.podKind()
	g.kinds = append(g.kinds, kind)
	return kind(name)
}

// podKind returns a random kind of pod, made under any name: a NUMA pod
// under any policy, a plain pod (with or without a GPU), or a Guaranteed
// pod of whole CPUs for the kubelet-policy nodes, with a memory request now
// and then.
func (g *groupCluster) podKind() func(name string) *kube.Pod {
	var p func(name string) *kube.Pod
	switch g.pick(4) {
	case 0, 1:
		pols := []string{"SingleNUMANode", "Restricted", "BestEffort", "None"}
		cpus, gpus, pol := []int{2, 4, 8, 16, 24, 48}[g.pick(6)], []int{0, 0, 1, 2, 4}[g.pick(5)], pols[g.pick(len(pols))]
		p = func(name string) *kube.Pod { return numaPod(name, cpus, gpus, pol) }
	case 2:
		cpu, gpus := []string{"500m", "1", "2500m", "8", "30"}[g.pick(5)], []int{0, 0, 1}[g.pick(3)]
		p = func(name string) *kube.Pod { return plainPod(name, cpu, gpus) }
	default:
		cpus, gpus := []int{1, 4, 16}[g.pick(3)], g.pick(3)
		return func(name string) *kube.Pod { return guaranteedPod(name, cpus, gpus) }
	}
	// A memory request now and then: small-1s has little memory, and
	// memory alignment changes the NUMA pods' placements.
	mem := []string{"", "", "1Gi", "12Gi", "200Gi"}[g.pick(5)]
	if mem == "" {
		return p
	}
	return func(name string) *kube.Pod {
		q := p(name)
		ctr := &q.Containers[0]
		ctr.Requests[kube.ResourceMemory] = mem
		if ctr.Limits != nil {
			ctr.Limits[kube.ResourceMemory] = mem
		}
		return q
	}
}

// node returns a random node spec named name: any machine, opted in or
// not, any memory alignment label, and now and then the kubelet's own
// Topology Manager.
func (g *groupCluster) node(name string) scheduler.Node {
	labels := map[string]string{}
	if g.pick(5) != 0 {
		labels[kube.DefaultOptInLabel] = kube.DefaultOptInValue
	}
	switch g.pick(3) {
	case 1:
		labels[kube.LabelMemoryAlignment] = "true"
	case 2:
		labels[kube.LabelMemoryAlignment] = "false"
	}
	n := scheduler.Node{Name: name, Labels: labels, Machine: g.machines[g.pick(len(g.machines))]}
	if g.pick(8) == 0 {
		n.KubeletPolicy = []topologymanager.Policy{topologymanager.PolicySingleNUMANode, topologymanager.PolicyBestEffort,
			topologymanager.PolicyRestricted}[g.pick(3)]
		n.KubeletOptions.StaticMemoryManager = g.pick(2) == 0
	}
	return n
}

// change makes one random change to the cluster: reserve or bind a pod,
// unreserve or remove one, relabel a node or change its machine.
func (g *groupCluster) change() {
	switch g.pick(6) {
	case 0, 1: // a reservation, bound half of the time
		p, node := g.pod(), g.nodes[g.pick(len(g.nodes))]
		if g.c.Reserve(p, node) != nil {
			return
		}
		g.placed = append(g.placed, p)
		if g.pick(2) == 0 {
			ann, err := g.c.PreBind(p)
			require.NoError(g.t, err)
			require.NoError(g.t, g.c.AddPod(bound(p, node, ann)))
		}
	case 2: // a pod bound by someone else, without a decision
		p, node := g.pod(), g.nodes[g.pick(len(g.nodes))]
		require.NoError(g.t, g.c.AddPod(bound(p, node, nil)))
		g.placed = append(g.placed, p)
	case 3: // a pod leaves
		if len(g.placed) == 0 {
			return
		}
		i := g.pick(len(g.placed))
		require.NoError(g.t, g.c.RemovePod(g.placed[i]))
		g.placed = slices.Delete(g.placed, i, i+1)
	case 4: // labels, kubelet policy or machine
		name := g.nodes[g.pick(len(g.nodes))]
		err := g.c.UpdateNode(g.node(name))
		require.True(g.t, err == nil || errors.Is(err, scheduler.ErrInvalidNode), "%v", err)
		// A reservation the new machine cannot keep is dropped.
		g.placed = slices.DeleteFunc(g.placed, func(p *kube.Pod) bool { _, ok := g.c.Pod(p.Key()); return !ok })
	case 5: // a node replaced by a new one of the same name
		name := g.nodes[g.pick(len(g.nodes))]
		require.NoError(g.t, g.c.RemoveNode(name))
		g.placed = slices.DeleteFunc(g.placed, func(p *kube.Pod) bool { _, ok := g.c.Pod(p.Key()); return !ok })
		require.NoError(g.t, g.c.AddNode(g.node(name)))
	}
}

// ungrouped returns every node's score for pp (or its refusal), each node
// judged on its own.
func (g *groupCluster) ungrouped(pp *scheduler.PreparedPod) ([]int, []error) {
	scores, errs := make([]int, len(g.nodes)), make([]error, len(g.nodes))
	for i, n := range g.nodes {
		scores[i], errs[i] = scheduler.UngroupedScore(pp, n)
	}
	return scores, errs
}

// checkPrepared compares pp's Filter and Score on every node with the
// ungrouped answers.
func (g *groupCluster) checkPrepared(pp *scheduler.PreparedPod, step int) {
	scores, errs := g.ungrouped(pp)
	for i, n := range g.nodes {
		ferr := pp.Filter(n)
		s, serr := pp.Score(n)
		if errs[i] != nil {
			require.Equal(g.t, errs[i], ferr, "step %d: Filter of %s on %s", step, pp.Key(), n)
			require.Equal(g.t, errs[i], serr, "step %d: Score of %s on %s", step, pp.Key(), n)
			continue
		}
		require.NoError(g.t, ferr, "step %d: Filter of %s on %s", step, pp.Key(), n)
		require.NoError(g.t, serr, "step %d: Score of %s on %s", step, pp.Key(), n)
		require.Equal(g.t, scores[i], s, "step %d: Score of %s on %s", step, pp.Key(), n)
	}
}

// checkScheduleOne schedules a new pod and compares the node, score and
// feasible count (or the refusal's reasons) with those of the ungrouped
// answers; the pod stays placed half of the time.
func (g *groupCluster) checkScheduleOne(step int) {
	p := g.pod()
	pp, err := g.c.Prepare(p)
	require.NoError(g.t, err)
	scores, errs := g.ungrouped(pp)
	best, feasible := -1, 0
	reasons := map[string]int{}
	for i := range g.nodes {
		if errs[i] != nil {
			var fe *scheduler.FilterError
			require.ErrorAs(g.t, errs[i], &fe)
			for _, r := range fe.Reasons {
				reasons[r]++
			}
			continue
		}
		feasible++
		if best < 0 || scores[i] > scores[best] {
			best = i // g.nodes ascend: the first of equal scores has the lowest name
		}
	}
	res, err := g.c.ScheduleOne(p)
	if best < 0 {
		var fe *scheduler.FitError
		require.ErrorAs(g.t, err, &fe, "step %d: %s", step, p.Key())
		got := map[string]int{}
		for _, r := range fe.Reasons {
			got[r.Reason] = r.Nodes
		}
		require.Equal(g.t, reasons, got, "step %d: %s", step, p.Key())
		return
	}
	require.NoError(g.t, err, "step %d: %s", step, p.Key())
	require.Equal(g.t, g.nodes[best], res.Node, "step %d: %s", step, p.Key())
	require.Equal(g.t, scores[best], res.Score, "step %d: %s", step, p.Key())
	require.Equal(g.t, feasible, res.Feasible, "step %d: %s", step, p.Key())
	if g.pick(2) == 0 {
		require.NoError(g.t, g.c.Unreserve(p))
		return
	}
	g.placed = append(g.placed, p)
}

// TestGroupedAnswersMatchUngrouped: on random clusters whose nodes change
// between calls (reservations, bindings, pods bound without a decision,
// removals, new labels, kubelet policies and machines, nodes replaced),
// ScheduleOne and a prepared pod's Filter and Score, which judge a pod once
// for the nodes in the same state, give exactly the answers of every node
// judged on its own: the node chosen, its score, the feasible count, the
// refusals counted by reason, and every node's refusal or score. The
// prepared pods are kept across changes, so that a verdict kept for a
// node's group before the node changed would be caught.
func TestGroupedAnswersMatchUngrouped(t *testing.T) {
	h100, a100, small := preset(t, "dgx-h100"), preset(t, "dgx-a100"), preset(t, "small-1s")
	// A second dgx-a100 under another name and GPU UUIDs: another machine
	// of the same class.
	spec := a100.Spec()
	spec.Name = "dgx-a100-b"
	for i := range spec.GPUs {
		spec.GPUs[i].UUID = "GPU-b-" + strconv.Itoa(i)
	}
	a100b, err := spec.Build()
	require.NoError(t, err)
	seeds := 8
	if testing.Short() {
		seeds = 2
	}
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			g := &groupCluster{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 12)),
				machines: []*topology.Machine{h100, a100, a100b, small}}
			g.c = newCache(t, scheduler.Config{Parallelism: 1 + seed%3, MinSharedCPUs: []int{0, -1, 8}[seed%3]})
			for i := range 30 {
				name := fmt.Sprintf("n%02d", i)
				g.nodes = append(g.nodes, name)
				n := g.node(name)
				if i < 20 { // many nodes alike: opted-in empty dgx-h100s
					n = scheduler.Node{Name: name, Labels: optIn, Machine: h100}
				}
				require.NoError(t, g.c.AddNode(n))
			}
			var kept []*scheduler.PreparedPod
			for step := range 120 {
				if step == 0 {
					g.checkScheduleOne(step)
					require.Less(t, scheduler.GroupCount(g.c), len(g.nodes), "nodes alike share a group")
				}
				switch g.pick(4) {
				case 0:
					g.checkScheduleOne(step)
				case 1:
					pp, err := g.c.Prepare(g.pod())
					require.NoError(t, err)
					kept = append(kept, pp)
					if len(kept) > 3 {
						kept = kept[1:]
					}
					g.checkPrepared(pp, step)
				default:
					g.change()
					if len(kept) > 0 {
						g.checkPrepared(kept[g.pick(len(kept))], step)
					}
				}
			}
			// Every node gone: no group is left.
			for _, n := range g.nodes {
				require.NoError(t, g.c.RemoveNode(n))
			}
			require.Zero(t, scheduler.GroupCount(g.c))
		})
	}
}

// TestGroupedVerdictAfterChange: nodes alike share a prepared pod's
// verdict until one of them changes; the changed node is judged afresh at
// once, the others keep the shared verdict.
func TestGroupedVerdictAfterChange(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "a", Labels: optIn, Machine: h100},
		scheduler.Node{Name: "b", Labels: optIn, Machine: h100},
		scheduler.Node{Name: "c", Labels: optIn, Machine: h100})
	pp, err := c.Prepare(numaPod("tg", 56, 4, "SingleNUMANode"))
	require.NoError(t, err)
	for _, n := range []string{"a", "b", "c"} {
		require.NoError(t, pp.Filter(n))
	}
	require.Equal(t, 1, scheduler.GroupCount(c))
	s, err := pp.Score("b")
	require.NoError(t, err)

	// b fills its NUMA node 0 and takes a GPU of node 1: the pod no longer
	// fits on b, and a and c say the same as before.
	require.NoError(t, c.Reserve(numaPod("fill-0", 56, 4, "SingleNUMANode"), "b"))
	require.NoError(t, c.Reserve(numaPod("fill-1", 8, 1, "SingleNUMANode"), "b"))
	require.ErrorIs(t, pp.Filter("b"), allocator.ErrInsufficient)
	for _, n := range []string{"a", "c"} {
		got, err := pp.Score(n)
		require.NoError(t, err)
		require.Equal(t, s, got)
	}
	require.Equal(t, 2, scheduler.GroupCount(c))

	// Not opted in any more: refused for that, at once.
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "c", Machine: h100}))
	require.ErrorIs(t, pp.Filter("c"), scheduler.ErrNotOptedIn)
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "c", Labels: optIn, Machine: h100}))
	require.NoError(t, pp.Filter("c"))
}

// TestGroupKeyCoversState: the group key writes every exported field of
// an allocation but its ID, so that nodes whose allocations differ in
// anything the allocator reads are never in one group; and the totals and
// the allocator's snapshot have the fields the key writes, no more (a new
// one must be added to the key).
func TestGroupKeyCoversState(t *testing.T) {
	require.Equal(t, []string{"allocCPUs", "gpuCap", "memCap", "exclCPUs", "gpusHeld", "plainMilli", "memUsed"}, scheduler.TotalsFields,
		"the totals changed: write the new field in groupKeyLocked")
	var snapFields []string
	for f := range reflect.TypeFor[allocator.Snapshot]().Fields() {
		snapFields = append(snapFields, f.Name)
	}
	require.Equal(t, []string{"Allocations", "Unhealthy"}, snapFields, "the snapshot changed: write the new field in groupKeyLocked")

	typ := reflect.TypeFor[allocator.Allocation]()
	zero := scheduler.GroupKeyOfAllocation(allocator.Allocation{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		var a allocator.Allocation
		reflect.ValueOf(&a).Elem().Field(i).Set(nonZero(t, f.Type))
		key := scheduler.GroupKeyOfAllocation(a)
		if f.Name == "ID" {
			require.Equal(t, zero, key, "the ID is not part of the key")
			continue
		}
		require.NotEqual(t, zero, key, "field %s is not in the group key", f.Name)
	}
	// And every value counts, not only whether a field is set.
	for _, pair := range [][2]allocator.Allocation{
		{{CPUs: numa.NewCPUSet(1, 2)}, {CPUs: numa.NewCPUSet(1, 3)}},
		{{GPUs: []int{1}}, {GPUs: []int{2}}},
		{{Devices: map[string][]string{"rdma": {"a"}}}, {Devices: map[string][]string{"rdma": {"b"}}}},
		{{Devices: map[string][]string{"rdma": {"a"}}}, {Devices: map[string][]string{"nic": {"a"}}}},
		{{Memory: []allocator.NodeMemory{{Node: 0, MiB: 1}}}, {Memory: []allocator.NodeMemory{{Node: 1, MiB: 1}}}},
		{{Memory: []allocator.NodeMemory{{Node: 0, MiB: 1}}}, {Memory: []allocator.NodeMemory{{Node: 0, MiB: 2}}}},
	} {
		require.NotEqual(t, scheduler.GroupKeyOfAllocation(pair[0]), scheduler.GroupKeyOfAllocation(pair[1]), "%+v", pair)
	}
}

// nonZero returns a value of type t that is not its zero value.
func nonZero(tb testing.TB, t reflect.Type) reflect.Value {
	tb.Helper()
	if t == reflect.TypeFor[numa.CPUSet]() {
		return reflect.ValueOf(numa.NewCPUSet(3))
	}
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.String:
		v.SetString("x")
	case reflect.Slice:
		v = reflect.Append(v, nonZero(tb, t.Elem()))
	case reflect.Map:
		v = reflect.MakeMap(t)
		v.SetMapIndex(nonZero(tb, t.Key()), nonZero(tb, t.Elem()))
	case reflect.Struct:
		for i := range t.NumField() {
			if t.Field(i).IsExported() {
				v.Field(i).Set(nonZero(tb, t.Field(i).Type))
			}
		}
	default:
		tb.Fatalf("no non-zero value for %s: extend nonZero", t)
	}
	return v
}

// TestGroupedSameTotalsOtherPlacement: two nodes whose totals are equal
// but whose allocations sit on other NUMA nodes are in different groups:
// a pod that fits on one is refused by the other.
func TestGroupedSameTotalsOtherPlacement(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "a", Labels: optIn, Machine: h100},
		scheduler.Node{Name: "b", Labels: optIn, Machine: h100})
	// a: one GPU and 8 CPUs taken on each NUMA node; b: both on NUMA node
	// 0. The pods are bound with these decisions.
	// The nth pod on a NUMA node takes its nth GPU and the nth 8 CPUs.
	decided := func(name, node string, numaNode numa.NodeID, nth int) {
		var ids []string
		for _, g := range h100.GPUs() {
			if g.NUMANode == numaNode {
				ids = append(ids, fmt.Sprintf(`{"id":%d}`, g.ID))
			}
		}
		ids = ids[nth : nth+1]
		cpus := numa.NewCPUSet(h100.NodeCPUs(int(numaNode)).List()[4+8*nth : 12+8*nth]...)
		ann := fmt.Sprintf(`{"policy":"SingleNUMANode","cpuset":%q,"numaNodes":[%d],"gpus":[%s],"memoryMiB":{"%d":0}}`,
			cpus, numaNode, strings.Join(ids, ","), numaNode)
		p := numaPod(name, 8, 1, "SingleNUMANode")
		require.NoError(t, c.AddPod(bound(p, node, map[string]string{kube.AnnotationAllocation: ann})))
		st, ok := c.Pod(p.Key())
		require.True(t, ok)
		require.Empty(t, st.Misfit, st.MisfitReason)
	}
	decided("a-0", "a", 0, 0)
	decided("a-1", "a", 1, 0)
	decided("b-0", "b", 0, 0)
	decided("b-1", "b", 0, 1)
	sa, _ := c.Node("a")
	sb, _ := c.Node("b")
	require.Equal(t, sa.FreeGPUs, sb.FreeGPUs)
	require.Equal(t, sa.SharedCPUs.Size(), sb.SharedCPUs.Size())

	pp, err := c.Prepare(numaPod("tg", 24, 4, "SingleNUMANode"))
	require.NoError(t, err)
	for range 2 { // the second time from the groups' verdicts
		require.ErrorIs(t, pp.Filter("a"), scheduler.ErrUnschedulable)
		require.NoError(t, pp.Filter("b"))
	}
	require.Equal(t, 2, scheduler.GroupCount(c))
	res, err := c.ScheduleOne(numaPod("tg", 24, 4, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, "b", res.Node)
}

// TestGroupedKubeletPolicies: empty nodes alike but for their kubelet's
// Topology Manager policy are in different groups (the 4-GPU pod:
// single-numa-node refuses it on a dgx-a100, best-effort admits it).
func TestGroupedKubeletPolicies(t *testing.T) {
	a100 := preset(t, "dgx-a100")
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "be", Machine: a100, KubeletPolicy: topologymanager.PolicyBestEffort},
		scheduler.Node{Name: "snn", Machine: a100, KubeletPolicy: topologymanager.PolicySingleNUMANode})
	pp, err := c.Prepare(guaranteedPod("big", 24, 4))
	require.NoError(t, err)
	for range 2 {
		require.NoError(t, pp.Filter("be"))
		require.ErrorIs(t, pp.Filter("snn"), scheduler.ErrKubeletRefusal)
	}
	require.Equal(t, 2, scheduler.GroupCount(c))
}

// TestRequestClassVerdict: pods asking for the same are judged once per
// node state (the verdict kept for the first answers the next), and a pod
// of the same request after a node changed, or a pod asking for something
// else, gets the answer of every node judged on its own.
func TestRequestClassVerdict(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	c := newCache(t, scheduler.Config{Parallelism: 1})
	for i, fill := range []int{8, 40, 24} { // every node in a state of its own
		name := fmt.Sprintf("n%d", i)
		require.NoError(t, c.AddNode(scheduler.Node{Name: name, Labels: optIn, Machine: h100}))
		require.NoError(t, c.Reserve(numaPod(fmt.Sprintf("fill%d", i), fill, 2, "SingleNUMANode"), name))
	}
	check := func(p *kube.Pod, wantNode string) {
		t.Helper()
		pp, err := c.Prepare(p)
		require.NoError(t, err)
		best, bestScore := "", -1
		for _, n := range c.Nodes() {
			s, err := scheduler.UngroupedScore(pp, n)
			require.Equal(t, err, pp.Filter(n), "%s on %s", p.Name, n)
			got, gerr := pp.Score(n)
			require.Equal(t, err, gerr, "%s on %s", p.Name, n)
			require.Equal(t, s, got, "%s on %s", p.Name, n)
			if err == nil && s > bestScore {
				best, bestScore = n, s
			}
		}
		res, err := c.ScheduleOne(p)
		require.NoError(t, err)
		require.Equal(t, best, res.Node, p.Name)
		require.Equal(t, wantNode, res.Node, p.Name)
		require.Equal(t, bestScore, res.Score, p.Name)
		require.NoError(t, c.Unreserve(p))
	}
	check(numaPod("a", 24, 4, "SingleNUMANode"), "n1")
	check(numaPod("b", 24, 4, "SingleNUMANode"), "n1") // the verdicts kept for a
	// n1 fills up: the next pod of the class sees it at once.
	require.NoError(t, c.Reserve(numaPod("more", 60, 4, "SingleNUMANode"), "n1"))
	check(numaPod("c", 24, 4, "SingleNUMANode"), "n2")
	check(numaPod("d", 24, 4, "SingleNUMANode"), "n2")
	// Another request on the same states: judged afresh.
	check(numaPod("e", 4, 1, "SingleNUMANode"), "n1")
	check(numaPod("f", 4, 1, "SingleNUMANode"), "n1")
}
