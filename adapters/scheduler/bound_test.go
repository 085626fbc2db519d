package scheduler_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// variants are descriptions of one small machine as it can change under
// live pods: the original, a GPU gone, CPUs taken offline, CPUs reserved,
// GPUs renumbered (their UUIDs swapped places), a NUMA node renumbered,
// less memory.
var variants = []string{
	`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7","memoryMiB":1024},{"id":1,"socket":0,"cpus":"8-15","memoryMiB":1024}],
	  "gpus":[{"id":0,"numaNode":0,"uuid":"GPU-a"},{"id":1,"numaNode":0,"uuid":"GPU-b"},{"id":2,"numaNode":1,"uuid":"GPU-c"},{"id":3,"numaNode":1,"uuid":"GPU-d"}]}`,
	`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7","memoryMiB":1024},{"id":1,"socket":0,"cpus":"8-15","memoryMiB":1024}],
	  "gpus":[{"id":0,"numaNode":0,"uuid":"GPU-a"},{"id":1,"numaNode":0,"uuid":"GPU-b"},{"id":2,"numaNode":1,"uuid":"GPU-c"}]}`,
	`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7","memoryMiB":1024},{"id":1,"socket":0,"cpus":"8-11","memoryMiB":1024}],
	  "gpus":[{"id":0,"numaNode":0,"uuid":"GPU-a"},{"id":1,"numaNode":0,"uuid":"GPU-b"},{"id":2,"numaNode":1,"uuid":"GPU-c"},{"id":3,"numaNode":1,"uuid":"GPU-d"}]}`,
	`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7","memoryMiB":1024},{"id":1,"socket":0,"cpus":"8-15","memoryMiB":1024}],"reservedCPUs":"0-1,8",
	  "gpus":[{"id":0,"numaNode":0,"uuid":"GPU-a"},{"id":1,"numaNode":0,"uuid":"GPU-b"},{"id":2,"numaNode":1,"uuid":"GPU-c"},{"id":3,"numaNode":1,"uuid":"GPU-d"}]}`,
	`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7","memoryMiB":1024},{"id":1,"socket":0,"cpus":"8-15","memoryMiB":1024}],
	  "gpus":[{"id":0,"numaNode":0,"uuid":"GPU-b"},{"id":1,"numaNode":0,"uuid":"GPU-a"},{"id":2,"numaNode":1,"uuid":"GPU-c"},{"id":3,"numaNode":1,"uuid":"GPU-d"}]}`,
	`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7","memoryMiB":1024},{"id":2,"socket":0,"cpus":"8-15","memoryMiB":1024}],
	  "gpus":[{"id":0,"numaNode":0,"uuid":"GPU-a"},{"id":1,"numaNode":0,"uuid":"GPU-b"},{"id":2,"numaNode":2,"uuid":"GPU-c"},{"id":3,"numaNode":2,"uuid":"GPU-d"}]}`,
	`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7","memoryMiB":256},{"id":1,"socket":0,"cpus":"8-15","memoryMiB":256}],
	  "gpus":[{"id":0,"numaNode":0,"uuid":"GPU-a"},{"id":1,"numaNode":0,"uuid":"GPU-b"},{"id":2,"numaNode":1,"uuid":"GPU-c"},{"id":3,"numaNode":1,"uuid":"GPU-d"}]}`,
}

func variantMachines(t testing.TB) []*topology.Machine {
	t.Helper()
	out := make([]*topology.Machine, len(variants))
	for i, v := range variants {
		m, err := topology.ParseJSON([]byte(v))
		require.NoError(t, err, "variant %d", i)
		out[i] = m
	}
	return out
}

// memPod is numaPod with a memory request (MiB) on every container.
func memPod(name string, cpus, gpus int, memMiB int64, pol string) *kube.Pod {
	p := numaPod(name, cpus, gpus, pol)
	if memMiB > 0 {
		for i := range p.Containers {
			req := map[string]string{}
			for k, v := range p.Containers[i].Requests {
				req[k] = v
			}
			req[kube.ResourceMemory] = fmt.Sprintf("%dMi", memMiB)
			p.Containers[i].Requests, p.Containers[i].Limits = req, req
		}
	}
	return p
}

// randomDecision is a decision over the variants' CPUs (0-15), GPUs (0-3,
// with or without their UUIDs) and NUMA nodes (0-2), so that it may name
// what a variant lacks or another pod holds.
func randomDecision(t *rapid.T, label string) (string, int, int) {
	var cpus numa.CPUSet
	for _, c := range rapid.SliceOfNDistinct(rapid.IntRange(0, 15), 0, 5, rapid.ID[int]).Draw(t, label+"-cpus") {
		cpus.Add(c)
	}
	gpus := rapid.SliceOfNDistinct(rapid.IntRange(0, 3), 0, 3, rapid.ID[int]).Draw(t, label+"-gpus")
	slices.Sort(gpus)
	uuids := rapid.Bool().Draw(t, label+"-uuids")
	parts := make([]string, len(gpus))
	for i, g := range gpus {
		if uuids {
			parts[i] = fmt.Sprintf(`{"id":%d,"uuid":"GPU-%c"}`, g, 'a'+g)
		} else {
			parts[i] = fmt.Sprintf(`{"id":%d}`, g)
		}
	}
	mem := ""
	if rapid.Bool().Draw(t, label+"-mem") {
		mem = fmt.Sprintf(`,"memoryMiB":{"%d":%d}`, rapid.SampledFrom([]int{0, 1, 2}).Draw(t, label+"-memnode"),
			rapid.Int64Range(1, 600).Draw(t, label+"-memMiB"))
	}
	if cpus.IsEmpty() && len(gpus) == 0 {
		cpus.Add(rapid.IntRange(0, 15).Draw(t, label+"-cpu"))
	}
	return fmt.Sprintf(`{"policy":"None","cpuset":%q,"gpus":[%s]%s}`, cpus.String(), strings.Join(parts, ","), mem), cpus.Size(), len(gpus)
}

// requireSound checks that no CPU or GPU is held twice on the node and
// that everything held is on its current machine.
func requireSound(t require.TestingT, c *scheduler.Cache, node string) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	st, ok := c.Node(node)
	require.True(t, ok)
	allocatable := st.Machine.CPUs().Difference(st.Machine.ReservedCPUs())
	var cpus numa.CPUSet
	gpus := map[int]string{}
	for _, a := range st.Allocations {
		require.True(t, a.CPUs.Intersection(cpus).IsEmpty(), "node %s: CPUs %s of %s held twice", node, a.CPUs.Intersection(cpus), a.ID)
		require.True(t, a.CPUs.IsSubsetOf(allocatable), "node %s: %s holds CPUs %s the machine does not hand out", node, a.ID, a.CPUs.Difference(allocatable))
		cpus.UnionWith(a.CPUs)
		for _, g := range a.GPUs {
			require.NotContains(t, gpus, g, "node %s: GPU %d of %s held by %s too", node, g, a.ID, gpus[g])
			_, ok := st.Machine.GPU(g)
			require.True(t, ok, "node %s: %s holds GPU %d the machine lacks", node, a.ID, g)
			gpus[g] = a.ID
		}
	}
}

// requireSameAccounting checks that two caches account the node alike.
func requireSameAccounting(t require.TestingT, want, got *scheduler.Cache, node string) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	w, ok1 := want.Node(node)
	g, ok2 := got.Node(node)
	require.Equal(t, ok1, ok2, "node %s", node)
	if !ok1 {
		return
	}
	require.Equal(t, w.Name, g.Name)
	require.True(t, w.SharedCPUs.Equal(g.SharedCPUs), "node %s shared CPUs %s, want %s", node, g.SharedCPUs, w.SharedCPUs)
	require.Equal(t, w.FreeGPUs, g.FreeGPUs, node)
	require.Equal(t, w.SharedRequestMilli, g.SharedRequestMilli, node)
	require.Equal(t, w.MemoryRequestMiB, g.MemoryRequestMiB, node)
	require.Equal(t, w.Pods, g.Pods, node)
	require.Equal(t, w.Misfits, g.Misfits, node)
	require.Equal(t, w.Overcommit, g.Overcommit, node)
	misfits, overcommit, ok3 := got.Misfits(node)
	require.True(t, ok3, node)
	require.Equal(t, g.Misfits, misfits, node)
	require.Equal(t, g.Overcommit, overcommit, node)
	require.Equal(t, len(w.Allocations), len(g.Allocations), node)
	for i, a := range w.Allocations {
		b := g.Allocations[i]
		require.Equal(t, a.ID, b.ID, node)
		require.Equal(t, a.CPUs.String(), b.CPUs.String(), a.ID)
		require.Equal(t, a.GPUs, b.GPUs, a.ID)
		require.Equal(t, a.Memory, b.Memory, a.ID)
		require.Equal(t, a.DenseSpan, b.DenseSpan, a.ID)
	}
}

// TestAccountingIsAFunctionOfTheObjects drives random sequences of machine
// changes, bound pods (decisions that fit, name what the machine lacks or
// another pod holds; pods without a decision; plain and invalid pods),
// scheduling cycles, pods updated, moved and removed through the cache,
// and checks after each step that nothing is held twice or off the
// machine, and at the end that the cache equals one rebuilt from the final
// machines and pods added in any order.
func TestAccountingIsAFunctionOfTheObjects(t *testing.T) {
	machines := variantMachines(t)
	nodes := []string{"n1", "n2"}
	rapid.Check(t, func(t *rapid.T) {
		c, err := scheduler.New(scheduler.Config{MinSharedCPUs: -1})
		require.NoError(t, err)
		current := map[string]int{}
		for _, n := range nodes {
			current[n] = 0
			require.NoError(t, c.AddNode(scheduler.Node{Name: n, Labels: optIn, Machine: machines[0]}))
		}
		objects := map[string]*kube.Pod{} // bound pods by name
		next := 0
		newName := func() string { next++; return fmt.Sprintf("p%02d", next) }
		bind := func(p *kube.Pod) {
			objects[p.Name] = p
			err := c.AddPod(p)
			if err != nil {
				require.NotErrorIs(t, err, scheduler.ErrUnknownNode)
			}
		}
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for range steps {
			node := rapid.SampledFrom(nodes).Draw(t, "node")
			switch rapid.IntRange(0, 8).Draw(t, "op") {
			case 0: // the node's machine changes
				k := rapid.IntRange(0, len(machines)-1).Draw(t, "variant")
				current[node] = k
				require.NoError(t, c.UpdateNode(scheduler.Node{Name: node, Labels: optIn, Machine: machines[k]}))
			case 1, 2: // a pod bound with a decision
				d, ncpu, ngpu := randomDecision(t, "decision")
				p := memPod(newName(), max(ncpu, 1), ngpu, 0, "None")
				if rapid.Bool().Draw(t, "plain-gpu") && ngpu > 0 {
					p = plainPod(p.Name, "1", ngpu)
				}
				bind(bound(p, node, map[string]string{kube.AnnotationAllocation: d}))
			case 3: // a pod bound without a decision
				pol := rapid.SampledFrom([]string{"SingleNUMANode", "Restricted", "BestEffort", "None"}).Draw(t, "policy")
				p := memPod(newName(), rapid.IntRange(1, 6).Draw(t, "cpus"), rapid.IntRange(0, 2).Draw(t, "gpus"),
					rapid.Int64Range(0, 300).Draw(t, "mem"), pol)
				bind(bound(p, node, nil))
			case 4: // a plain pod, or an invalid one
				var p *kube.Pod
				if rapid.Bool().Draw(t, "invalid") {
					p = numaPod(newName(), 2, 1, "SingleNUMANode")
					p.Annotations[kube.AnnotationCPUSetScheduler] = "true"
					if rapid.Bool().Draw(t, "with-decision") {
						d, _, _ := randomDecision(t, "invalid-decision")
						p.Annotations[kube.AnnotationAllocation] = d
					}
				} else {
					p = plainPod(newName(), fmt.Sprintf("%dm", rapid.IntRange(100, 4000).Draw(t, "milli")), 0)
				}
				bind(bound(p, node, nil))
			case 5: // a scheduling cycle: reserved, then bound or given up
				p := memPod(newName(), rapid.IntRange(1, 4).Draw(t, "cpus"), rapid.IntRange(0, 2).Draw(t, "gpus"), 0,
					rapid.SampledFrom([]string{"SingleNUMANode", "BestEffort", "None"}).Draw(t, "policy"))
				if err := c.Reserve(p, node); err != nil {
					break
				}
				ann, err := c.PreBind(p)
				require.NoError(t, err)
				if rapid.Bool().Draw(t, "binds") {
					bind(bound(p, node, ann))
				} else {
					require.NoError(t, c.Unreserve(p))
				}
			case 6, 7: // a pod deleted, updated or recreated elsewhere
				if len(objects) == 0 {
					break
				}
				names := slices.Sorted(func(yield func(string) bool) {
					for n := range objects {
						if !yield(n) {
							return
						}
					}
				})
				name := rapid.SampledFrom(names).Draw(t, "victim")
				p := objects[name]
				switch rapid.IntRange(0, 2).Draw(t, "change") {
				case 0:
					delete(objects, name)
					err := c.RemovePod(p)
					if err != nil {
						require.True(t, errors.Is(err, scheduler.ErrUnknownNode) || strings.Contains(err.Error(), "not in the cache"), err)
					}
				case 1:
					q := bound(p, p.NodeName, nil)
					if _, ok := q.Annotations[kube.AnnotationAllocation]; ok {
						delete(q.Annotations, kube.AnnotationAllocation)
					} else {
						d, _, _ := randomDecision(t, "new-decision")
						q.Annotations[kube.AnnotationAllocation] = d
					}
					bind(q)
				case 2:
					bind(bound(p, rapid.SampledFrom(nodes).Draw(t, "to"), nil))
				}
			case 8: // the same object again (an informer resync)
				for _, name := range slices.Sorted(mapKeys(objects)) {
					bind(objects[name])
					break
				}
			}
			for _, n := range nodes {
				requireSound(t, c, n)
			}
		}

		// A restarted cache, fed the same objects in another order, one
		// by one or per node at once, accounts exactly alike.
		fresh, err := scheduler.New(scheduler.Config{MinSharedCPUs: -1})
		require.NoError(t, err)
		for _, n := range nodes {
			require.NoError(t, fresh.AddNode(scheduler.Node{Name: n, Labels: optIn, Machine: machines[current[n]]}))
		}
		names := rapid.Permutation(slices.Sorted(mapKeys(objects))).Draw(t, "order")
		if rapid.Bool().Draw(t, "batch") {
			for _, n := range nodes {
				var batch []*kube.Pod
				for _, name := range names {
					if objects[name].NodeName == n {
						batch = append(batch, objects[name])
					}
				}
				_, err := fresh.SyncPods(n, batch, nil)
				require.NoError(t, err)
			}
		} else {
			for _, name := range names {
				_ = fresh.AddPod(objects[name])
			}
		}
		for _, n := range nodes {
			requireSameAccounting(t, fresh, c, n)
		}
		for _, name := range names {
			w, ok1 := fresh.Pod("default/" + name)
			g, ok2 := c.Pod("default/" + name)
			require.Equal(t, ok1, ok2, name)
			require.Equal(t, w.Misfit, g.Misfit, name)
			require.Equal(t, w.MisfitReason, g.MisfitReason, name)
		}
	})
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestMachineChangeUnderLivePods: a node's machine loses GPU 7 while a pod
// holds GPUs 4-7 (the case). The new machine takes effect at once,
// the pod stays accounted on what still exists and is the node's misfit
// until it is gone, no later pod gets its CPUs or GPUs, and a restarted
// cache says the same.
func TestMachineChangeUnderLivePods(t *testing.T) {
	h100 := preset(t, "dgx-h100")
	spec := h100.Spec()
	spec.GPUs = slices.DeleteFunc(spec.GPUs, func(g topology.GPUSpec) bool { return *g.ID == 7 })
	spec.NVLinks = slices.DeleteFunc(spec.NVLinks, func(l []int) bool { return l[0] == 7 || l[1] == 7 })
	noGPU7, err := spec.Build()
	require.NoError(t, err)

	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "a", Labels: optIn, Machine: h100})
	holder := numaPod("holder", 24, 4, "SingleNUMANode")
	res, err := c.ScheduleOne(holder)
	require.NoError(t, err)
	require.NoError(t, c.AddPod(bound(holder, "a", res.Annotations)))
	first, _ := c.Pod("default/holder")
	if first.Allocation.GPUs[0] != 4 {
		// Make it hold GPUs 4-7 whatever the packing chose.
		require.NoError(t, c.RemovePod(holder))
		other := numaPod("other", 24, 4, "SingleNUMANode")
		_, err := c.ScheduleOne(other)
		require.NoError(t, err)
		res, err = c.ScheduleOne(holder)
		require.NoError(t, err)
		require.NoError(t, c.Unreserve(other))
		require.NoError(t, c.AddPod(bound(holder, "a", res.Annotations)))
		first, _ = c.Pod("default/holder")
	}
	require.Equal(t, []int{4, 5, 6, 7}, first.Allocation.GPUs)

	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "a", Labels: optIn, Machine: noGPU7}))
	st, _ := c.Pod("default/holder")
	require.Equal(t, []int{4, 5, 6}, st.Allocation.GPUs)
	require.True(t, st.Allocation.CPUs.Equal(first.Allocation.CPUs))
	require.Equal(t, scheduler.MisfitLost, st.Misfit)
	require.Contains(t, st.MisfitReason, "GPU 7 not on the machine")
	node, _ := c.Node("a")
	require.Len(t, node.Misfits, 1)
	require.Equal(t, 4, node.FreeGPUs)

	// The new machine at once: a 4-GPU pod takes the other NUMA node, a
	// second finds none (GPU 7 is gone, 4-6 are held).
	next := numaPod("next", 24, 4, "SingleNUMANode")
	res, err = c.ScheduleOne(next)
	require.NoError(t, err)
	require.NoError(t, c.AddPod(bound(next, "a", res.Annotations)))
	n2, _ := c.Pod("default/next")
	require.Equal(t, []int{0, 1, 2, 3}, n2.Allocation.GPUs)
	require.True(t, n2.Allocation.CPUs.Intersection(first.Allocation.CPUs).IsEmpty())
	_, err = c.ScheduleOne(numaPod("third", 24, 3, "SingleNUMANode"))
	require.ErrorIs(t, err, scheduler.ErrUnschedulable)
	requireSound(t, c, "a")

	// A restart reads the same.
	fresh := newCache(t, scheduler.Config{}, scheduler.Node{Name: "a", Labels: optIn, Machine: noGPU7})
	require.NoError(t, fresh.AddPod(bound(next, "a", res.Annotations)))
	require.NoError(t, fresh.AddPod(bound(holder, "a", map[string]string{kube.AnnotationAllocation: kube.NewDecision(h100, first.Allocation).String()})))
	requireSameAccounting(t, c, fresh, "a")

	// Once the pod is gone, the node is whole again.
	require.NoError(t, c.RemovePod(holder))
	node, _ = c.Node("a")
	require.Empty(t, node.Misfits)
	_, err = c.ScheduleOne(numaPod("third", 24, 3, "SingleNUMANode"))
	require.NoError(t, err)
	third, _ := c.Pod("default/third")
	require.Equal(t, []int{4, 5, 6}, third.Allocation.GPUs)
}
