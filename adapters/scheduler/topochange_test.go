package scheduler_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// tcMachines are the machines TestCacheTopologyChangeStress moves nodes
// between: presets of 1, 2, 4, 8 and 16 NUMA nodes and random machines of
// 1 to 6, so that each move grows or shrinks the node count.
func tcMachines(t *testing.T) []*topology.Machine {
	t.Helper()
	var out []*topology.Machine
	for _, name := range []string{"dgx-a100", "small-1s", "xeon-2s-snc2-8gpu", "dgx-h100", "xeon-max-snc4"} {
		out = append(out, preset(t, name))
	}
	for seed := range 5 {
		out = append(out, allocatortest.Machine().Example(seed))
	}
	return out
}

// tcPod draws a pod of any kind, small enough for the small machines too.
func tcPod(rng *rand.Rand, name string) *kube.Pod {
	pols := []string{"SingleNUMANode", "Restricted", "BestEffort", "None"}
	switch rng.IntN(5) {
	case 0:
		return plainPod(name, fmt.Sprintf("%dm", 100+rng.IntN(2000)), 0)
	case 1:
		return plainPod(name, "1", 1)
	}
	return numaPod(name, 1+rng.IntN(6), rng.IntN(3), pols[rng.IntN(len(pols))])
}

// tcNeedsDecision reports whether a pod of tcPod holds an allocation on
// a numaplace node, so that PreBind writes its decision: a NUMA pod or a
// pod with GPUs.
func tcNeedsDecision(p *kube.Pod) bool {
	return p.Annotations[kube.AnnotationSpecAlibaba] != "" || p.Containers[0].Requests[kube.ResourceAliyunGPU] != ""
}

// tcCheckNode checks what one call of Node returns: one machine's view,
// whose allocations hold no CPU or GPU twice and lie on the machine, and
// whose shared pool is exactly its allocatable CPUs that no allocation
// holds.
func tcCheckNode(st scheduler.NodeStatus) error {
	m := st.Machine
	allocatable := m.CPUs().Difference(m.ReservedCPUs())
	var held numa.CPUSet
	gpus := map[int]bool{}
	for _, a := range st.Allocations {
		if held.Intersects(a.CPUs) || !a.CPUs.IsSubsetOf(allocatable) {
			return fmt.Errorf("node %s (machine %s): %s holds CPUs %s, held already %s, allocatable %s", st.Name, m.Name(), a.ID, a.CPUs, held, allocatable)
		}
		held.UnionWith(a.CPUs)
		for _, g := range a.GPUs {
			if _, ok := m.GPU(g); !ok || gpus[g] {
				return fmt.Errorf("node %s (machine %s): %s holds GPU %d, unknown or held twice", st.Name, m.Name(), a.ID, g)
			}
			gpus[g] = true
		}
		for _, id := range a.NUMANodes() {
			if _, ok := m.NodeIndex(id); !ok {
				return fmt.Errorf("node %s (machine %s): %s lies on NUMA node %d, which the machine does not have", st.Name, m.Name(), a.ID, id)
			}
		}
	}
	if !held.Union(st.SharedCPUs).Equal(allocatable) || held.Intersects(st.SharedCPUs) {
		return fmt.Errorf("node %s (machine %s): held %s and shared %s are not the allocatable %s", st.Name, m.Name(), held, st.SharedCPUs, allocatable)
	}
	if st.FreeGPUs != m.NumGPUs()-len(gpus) {
		return fmt.Errorf("node %s (machine %s): %d free GPUs, want %d of %d", st.Name, m.Name(), st.FreeGPUs, m.NumGPUs()-len(gpus), m.NumGPUs())
	}
	return nil
}

// tcCheckFree checks what one call of Free returns: the NUMA nodes of
// one of the machines, whole, with no more free than they have.
func tcCheckFree(name string, free []scheduler.NUMAFree, machines []*topology.Machine) error {
	ids := make([]numa.NodeID, len(free))
	for i, f := range free {
		ids[i] = f.ID
	}
machines:
	for _, m := range machines {
		if !slices.Equal(ids, m.NodeIDs()) {
			continue
		}
		for i, f := range free {
			n := m.Node(i)
			if f.CPUs < 0 || f.CPUs > n.CPUs.Size() || f.GPUs < 0 || f.MemoryMiB < 0 || f.MemoryMiB > n.MemoryMiB {
				continue machines // not this machine (two machines may have the same node IDs)
			}
		}
		return nil
	}
	return fmt.Errorf("node %s: Free gives %+v, of no machine it had", name, free)
}

// TestCacheTopologyChangeStress changes nodes' machines (UpdateNode
// between machines of 1 to 16 NUMA nodes, on a numaplace node and on a
// node of the kubelet's own Topology Manager; RemoveNode and AddNode) and
// records bound pods by their decisions (SyncPods, which restores the
// decisions on the node's state) while writers schedule, reserve, bind and
// remove pods and readers call every exported reader of the cache and of
// prepared pods, 8 goroutines in all, bounded by iteration counts, under
// -race in the default test run: no race, no panic, and every answer of
// one call is of one machine.
func TestCacheTopologyChangeStress(t *testing.T) {
	machines := tcMachines(t)
	kubeletNode := func(m *topology.Machine) scheduler.Node {
		return scheduler.Node{Name: "k-0", Machine: m, KubeletPolicy: topologymanager.PolicySingleNUMANode,
			KubeletOptions: topologymanager.PredictOptions{StaticMemoryManager: true}}
	}
	c := newCache(t, scheduler.Config{},
		scheduler.Node{Name: "m-0", Labels: optIn, Machine: machines[0]},
		scheduler.Node{Name: "m-1", Labels: optIn, Machine: machines[3]},
		scheduler.Node{Name: "x-0", Labels: optIn, Machine: machines[2]},
		kubeletNode(machines[0]))
	names := []string{"m-0", "m-1", "x-0", "k-0"}
	const rounds = 45
	errc := make(chan error, 64)
	report := func(format string, args ...any) { errc <- fmt.Errorf(format, args...) }
	expected := func(err error) bool {
		return err == nil || errors.Is(err, scheduler.ErrUnschedulable) || errors.Is(err, scheduler.ErrUnknownNode) ||
			errors.Is(err, scheduler.ErrPodPlaced) || errors.Is(err, allocator.ErrUnknownID) ||
			errors.Is(err, scheduler.ErrNoPreemption) || errors.Is(err, scheduler.ErrBound)
	}
	var wg sync.WaitGroup
	var placed, synced atomic.Int64

	// 1: UpdateNode of m-0 through every machine, the opt-in label and
	// memory alignment toggled.
	wg.Go(func() {
		for k := range 3 * len(machines) {
			labels := map[string]string{kube.LabelMemoryAlignment: fmt.Sprint(k%3 != 0)}
			if k%4 != 3 {
				labels[kube.DefaultOptInLabel] = kube.DefaultOptInValue
			}
			if err := c.UpdateNode(scheduler.Node{Name: "m-0", Labels: labels, Machine: machines[(k+1)%len(machines)]}); err != nil {
				report("UpdateNode m-0: %v", err)
				return
			}
		}
	})
	// 2: UpdateNode of k-0 (the kubelet's Topology Manager) and of m-1.
	wg.Go(func() {
		for k := range 3 * len(machines) {
			if err := c.UpdateNode(kubeletNode(machines[(k+2)%len(machines)])); err != nil {
				report("UpdateNode k-0: %v", err)
				return
			}
			if err := c.UpdateNode(scheduler.Node{Name: "m-1", Labels: optIn, Machine: machines[(k+4)%len(machines)]}); err != nil {
				report("UpdateNode m-1: %v", err)
				return
			}
		}
	})
	// 3: x-0 removed and added again on another machine; pods bound to m-1
	// by decisions made on a private cache of its machine, recorded in
	// batches (SyncPods restores them on the node's state) and forgotten.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(3, 33))
		for k := range rounds {
			if k%3 == 0 {
				if err := c.RemoveNode("x-0"); err != nil {
					report("RemoveNode: %v", err)
					return
				}
				if err := c.AddNode(scheduler.Node{Name: "x-0", Labels: optIn, Machine: machines[k%len(machines)]}); err != nil {
					report("AddNode: %v", err)
					return
				}
			}
			st, ok := c.Node("m-1")
			if !ok {
				report("node m-1 is gone")
				return
			}
			private := newCache(t, scheduler.Config{}, scheduler.Node{Name: "m-1", Labels: optIn, Machine: st.Machine})
			var batch []*kube.Pod
			for j := range 3 {
				p := tcPod(rng, fmt.Sprintf("sync-%d-%d", k, j))
				if err := private.Reserve(p, "m-1"); err != nil {
					continue
				}
				ann, err := private.PreBind(p)
				if err != nil {
					report("private PreBind: %v", err)
					return
				}
				batch = append(batch, bound(p, "m-1", ann))
			}
			errs, err := c.SyncPods("m-1", batch, nil)
			if err != nil {
				report("SyncPods: %v", err)
				return
			}
			for i, err := range errs {
				if err != nil {
					report("SyncPods %s: %v", batch[i].Key(), err)
					return
				}
			}
			synced.Add(int64(len(batch)))
			if len(batch) > 0 && rng.IntN(2) == 0 {
				if _, err := c.SyncPods("m-1", nil, batch[:1]); err != nil {
					report("SyncPods gone: %v", err)
					return
				}
			}
		}
	})
	// 4, 5: writers: ScheduleOne, Reserve, Unreserve, PreBind, AddPod,
	// RemovePod.
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(4+w), 44))
			for k := range 2 * rounds {
				p := tcPod(rng, fmt.Sprintf("w%d-%d", w, k))
				node := names[rng.IntN(len(names))]
				if rng.IntN(2) == 0 {
					res, err := c.ScheduleOne(p)
					var fe *scheduler.FitError
					if errors.As(err, &fe) {
						for _, n := range names {
							_ = fe.Node(n)
						}
						continue
					}
					if err != nil {
						// ErrPodPlaced: the reservation was dropped by a
						// machine change before ScheduleOne returned.
						if !expected(err) {
							report("writer %d: ScheduleOne: %v", w, err)
							return
						}
						continue
					}
					node = res.Node
					if node != "k-0" && tcNeedsDecision(p) && res.Annotations[kube.AnnotationAllocation] == "" {
						report("writer %d: ScheduleOne placed %s on %s without a decision", w, p.Key(), node)
						return
					}
				} else if err := c.Reserve(p, node); err != nil {
					if !expected(err) {
						report("writer %d: Reserve: %v", w, err)
						return
					}
					continue
				}
				placed.Add(1)
				switch rng.IntN(4) {
				case 0:
					if err := c.Unreserve(p); !expected(err) {
						report("writer %d: Unreserve: %v", w, err)
						return
					}
				case 1, 2:
					ann, err := c.PreBind(p)
					if err != nil {
						if !expected(err) { // dropped by a machine change
							report("writer %d: PreBind: %v", w, err)
							return
						}
						continue
					}
					if node != "k-0" && tcNeedsDecision(p) && ann[kube.AnnotationAllocation] == "" {
						report("writer %d: PreBind of %s on %s gives no decision", w, p.Key(), node)
						return
					}
					if err := c.AddPod(bound(p, node, ann)); !expected(err) {
						report("writer %d: AddPod: %v", w, err)
						return
					}
				}
				if rng.IntN(3) == 0 {
					if err := c.RemovePod(p); !expected(err) {
						report("writer %d: RemovePod: %v", w, err)
						return
					}
				}
			}
		})
	}
	// 6, 7, 8: readers of the cache and of prepared pods.
	for g := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(6+g), 66))
			for k := range 2 * rounds {
				p := tcPod(rng, fmt.Sprintf("r%d-%d", g, k))
				p.Priority = 1000
				node := names[rng.IntN(len(names))]
				if err := c.Filter(p, node); !expected(err) {
					report("reader %d: Filter: %v", g, err)
					return
				}
				if s, err := c.Score(p, node); !expected(err) || (err == nil && (s < 0 || s > 100)) {
					report("reader %d: Score = %d, %v", g, s, err)
					return
				}
				pp, err := c.Prepare(p)
				if err != nil {
					report("reader %d: Prepare: %v", g, err)
					return
				}
				_, _ = pp.Request(), pp.Key()
				for _, n := range names {
					if err := pp.Filter(n); !expected(err) {
						report("reader %d: PreparedPod.Filter: %v", g, err)
						return
					}
					if _, err := pp.Score(n); !expected(err) {
						report("reader %d: PreparedPod.Score: %v", g, err)
						return
					}
				}
				st, ok := c.Node(node)
				if ok {
					if err := tcCheckNode(st); err != nil {
						report("reader %d: %v", g, err)
						return
					}
					if err := pp.FilterWhatIf(node, scheduler.WhatIf{Removed: st.Pods, Added: []*scheduler.PreparedPod{pp}}); !expected(err) {
						report("reader %d: FilterWhatIf: %v", g, err)
						return
					}
					if _, err := pp.Victims(node, st.Pods); !expected(err) {
						report("reader %d: Victims: %v", g, err)
						return
					}
					for _, key := range st.Pods {
						if ps, ok := c.Pod(key); ok && ps.Allocation != nil {
							_ = ps.Allocation.String()
						}
					}
				}
				if free, ok := c.Free(node); ok {
					if err := tcCheckFree(node, free, machines); err != nil {
						report("reader %d: %v", g, err)
						return
					}
				}
				if k%4 == 0 {
					if _, err := c.Preempt(p); !expected(err) {
						report("reader %d: Preempt: %v", g, err)
						return
					}
				}
				if _, err := c.PreemptOn(p, node); !expected(err) {
					report("reader %d: PreemptOn: %v", g, err)
					return
				}
				_ = c.Nodes()
				_ = c.Config()
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d pods placed by ScheduleOne or Reserve, %d bound by SyncPods", placed.Load(), synced.Load())
	require.Positive(t, placed.Load())
	require.Positive(t, synced.Load())
	for _, name := range c.Nodes() {
		st, ok := c.Node(name)
		require.True(t, ok)
		require.NoError(t, tcCheckNode(st))
	}
}

// TestPreBindAfterMachineChange checks PreBind against a machine change
// that drops the pod's reservation (the new machine has no GPUs) after
// PreBind has read the pod's record and before it reads the node: PreBind
// must fail, as UpdateNode promises, never answer without a decision.
func TestPreBindAfterMachineChange(t *testing.T) {
	a100 := preset(t, "dgx-a100")
	spec := a100.Spec()
	spec.GPUs, spec.Devices = nil, nil
	noGPUs, err := spec.Build()
	require.NoError(t, err)
	c := newCache(t, scheduler.Config{}, scheduler.Node{Name: "n", Labels: optIn, Machine: a100})
	p := numaPod("p", 4, 1, "SingleNUMANode")
	require.NoError(t, c.Reserve(p, "n"))
	later := scheduler.PreBindLater(c, p.Key())
	require.NoError(t, c.UpdateNode(scheduler.Node{Name: "n", Labels: optIn, Machine: noGPUs}))
	_, ok := c.Pod(p.Key())
	require.False(t, ok, "the reservation holds a GPU, which the new machine does not have")
	ann, err := later()
	require.ErrorIs(t, err, allocator.ErrUnknownID, "annotations %v", ann)
	_, err = c.PreBind(p)
	require.ErrorIs(t, err, allocator.ErrUnknownID)
}
