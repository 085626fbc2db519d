package kubelet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// tcMachine is dgx-a100 with GPU UUIDs and two reserved CPUs.
func tcMachine(t *testing.T) *topology.Machine {
	t.Helper()
	spec := preset(t, "dgx-a100").Spec()
	for i := range spec.GPUs {
		spec.GPUs[i].UUID = fmt.Sprintf("GPU-tc-%d", i)
	}
	spec.ReservedCPUs = "0,128"
	m, err := spec.Build()
	require.NoError(t, err)
	return m
}

// tcCheckAdmissions checks what one call of Admissions returns: no CPU,
// GPU or device in two exclusive admissions, and no exclusive CPU in the
// shared pool that a shared-pool admission of the same call names.
func tcCheckAdmissions(adms []Admission) error {
	var held, pool numa.CPUSet
	gpus := map[int]string{}
	devs := map[string]string{}
	for _, a := range adms {
		if a.Source == SharedPool {
			pool = a.CPUs
			continue
		}
		if held.Intersects(a.CPUs) {
			return fmt.Errorf("CPUs %s of %s are held twice", held.Intersection(a.CPUs), a.Pod)
		}
		held.UnionWith(a.CPUs)
		for _, g := range a.GPUs {
			if other, ok := gpus[g.ID]; ok {
				return fmt.Errorf("GPU %d is held by %s and %s", g.ID, other, a.Pod)
			}
			gpus[g.ID] = a.Pod
		}
		for class, ids := range a.Devices {
			for _, id := range ids {
				if other, ok := devs[class+"/"+id]; ok {
					return fmt.Errorf("%s device %s is held by %s and %s", class, id, other, a.Pod)
				}
				devs[class+"/"+id] = a.Pod
			}
		}
	}
	if pool.Intersects(held) {
		return fmt.Errorf("exclusive CPUs %s are in the shared pool %s", pool.Intersection(held), pool)
	}
	return nil
}

// TestNodeHealthChangeStress marks GPUs (by index and by UUID) and RDMA
// devices unhealthy and healthy (SetDeviceHealth, the node state's change
// of what its machine offers; its machine itself is fixed when Open
// returns) while writers admit pods by decisions, by their policy and on
// the shared pool and remove them, and readers call every exported reader
// of the node and of its device plugin helper, 8 goroutines in all,
// bounded by iteration counts, under -race in the default test run: no
// race, no panic, every answer of one call consistent, and the checkpoint
// restores the final state.
func TestNodeHealthChangeStress(t *testing.T) {
	m := tcMachine(t)
	n, path := openTemp(t, m)
	const rounds = 40
	errc := make(chan error, 64)
	report := func(format string, args ...any) { errc <- fmt.Errorf(format, args...) }
	expected := func(err error) bool {
		return err == nil || errors.Is(err, ErrTopologyAffinity) || errors.Is(err, allocator.ErrUnknownID)
	}
	var wg sync.WaitGroup
	var admitted, byDecision atomic.Int64

	// 1: SetDeviceHealth of GPUs by index, by UUID and in other spellings,
	// and of RDMA devices.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 11))
		for range 3 * rounds {
			gpu := m.GPUs()[rng.IntN(m.NumGPUs())]
			class, id := allocator.GPUClass, strconv.Itoa(gpu.ID)
			switch rng.IntN(4) {
			case 0:
				id = gpu.UUID
			case 1:
				id = "0" + id
			case 2:
				d := m.Devices()[rng.IntN(len(m.Devices()))]
				class, id = d.Class, d.ID
			}
			if _, err := n.SetDeviceHealth(class, id, rng.IntN(3) != 0); err != nil {
				report("SetDeviceHealth(%s, %s): %v", class, id, err)
				return
			}
		}
	})
	// 2: pods admitted by decisions made on a clone of the node's machine
	// state as a scheduler would (they may conflict with what the node
	// admitted meanwhile), some removed.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(2, 22))
		for k := range rounds {
			pod := numaPod(fmt.Sprintf("dec-%d", k), 2+2*rng.IntN(4), rng.IntN(3), "SingleNUMANode")
			req, err := kube.ParsePod(pod, kube.Config{})
			if err != nil {
				report("ParsePod: %v", err)
				return
			}
			// The scheduler's view: what the node holds now.
			view := allocator.MustNew(m, allocator.Options{})
			for _, adm := range n.Admissions() {
				if adm.Source != SharedPool {
					_, _ = view.Claim(adm.Allocation) // a GPU unhealthy meanwhile stays held
				}
			}
			for class, ids := range n.Unhealthy() {
				for _, id := range ids {
					_, _ = view.SetDeviceHealth(class, id, false)
				}
			}
			r := req.Request(pod.Key())
			a, err := view.Allocate(&r)
			if err != nil {
				continue // the node is full as the scheduler sees it
			}
			pod = withDecision(pod, kube.NewDecision(m, &a))
			_, err = n.Admit(pod)
			if !expected(err) {
				report("Admit %s: %v", pod.Key(), err)
				return
			}
			if err == nil {
				byDecision.Add(1)
			}
			if rng.IntN(2) == 0 {
				if err := n.Remove(pod); !expected(err) {
					report("Remove %s: %v", pod.Key(), err)
					return
				}
			}
		}
	})
	// 3, 4: pods placed by the node by their policy, and shared-pool pods.
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(3+w), 33))
			var mine []*kube.Pod
			pols := []string{"SingleNUMANode", "Restricted", "BestEffort", "None"}
			for k := range rounds {
				if len(mine) > 4 || (len(mine) > 0 && rng.IntN(3) == 0) {
					j := rng.IntN(len(mine))
					if err := n.Remove(mine[j]); err != nil {
						report("writer %d: Remove %s: %v", w, mine[j].Key(), err)
						return
					}
					mine = append(mine[:j], mine[j+1:]...)
				}
				name := fmt.Sprintf("w%d-%d", w, k)
				pod := sharedPod(name)
				if rng.IntN(3) != 0 {
					pod = numaPod(name, 1+rng.IntN(12), rng.IntN(3), pols[rng.IntN(len(pols))])
				}
				adm, err := n.Admit(pod)
				if !expected(err) {
					report("writer %d: Admit %s: %v", w, pod.Key(), err)
					return
				}
				if err != nil {
					continue
				}
				admitted.Add(1)
				mine = append(mine, pod)
				if got, ok := n.Get(pod.Key()); !ok || !got.Allocation.CPUs.Equal(adm.Allocation.CPUs) {
					report("writer %d: %s admitted with %s, then %v %s", w, pod.Key(), adm.Allocation.CPUs, ok, got.Allocation.CPUs)
					return
				}
			}
		})
	}
	// 5-8: readers of the node and of its device plugin helper.
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(5+g), 55))
			available := make([]string, 0, m.NumGPUs())
			for _, gpu := range m.GPUs() {
				if rng.IntN(2) == 0 {
					available = append(available, gpu.UUID)
				} else {
					available = append(available, strconv.Itoa(gpu.ID))
				}
			}
			for k := range 2 * rounds {
				if n.Machine() != m || n.CheckpointPath() != path {
					report("reader %d: the node's machine or checkpoint path changed", g)
					return
				}
				_ = n.RemovedLeftovers()
				adms := n.Admissions()
				if err := tcCheckAdmissions(adms); err != nil {
					report("reader %d: %v", g, err)
					return
				}
				for _, a := range adms {
					if got, ok := n.Get(a.Pod); ok && got.Source != a.Source {
						report("reader %d: %s admitted as %s, then %s", g, a.Pod, a.Source, got.Source)
						return
					}
				}
				if pool := n.SharedPool(); pool.IsEmpty() || !pool.IsSubsetOf(m.CPUs()) {
					report("reader %d: shared pool %s", g, pool)
					return
				}
				for class, ids := range n.Unhealthy() {
					for _, id := range ids {
						if _, err := allocator.CanonicalDeviceID(class, id); err != nil {
							report("reader %d: unhealthy %s %s: %v", g, class, id, err)
							return
						}
					}
				}
				if k%4 == 0 {
					r, err := n.Report("node")
					if err != nil {
						report("reader %d: Report: %v", g, err)
						return
					}
					if len(r.Zones) != m.NumNodes() {
						report("reader %d: Report has %d zones", g, len(r.Zones))
						return
					}
				}
				size := 1 + rng.IntN(4)
				if _, err := n.GetPreferredAllocation(available, available[:1], size); err != nil {
					report("reader %d: GetPreferredAllocation: %v", g, err)
					return
				}
				if _, err := n.PreferredAllocator().Prefer(available, nil, size); err != nil {
					report("reader %d: Prefer: %v", g, err)
					return
				}
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
	t.Logf("%d pods admitted by the node, %d by decisions", admitted.Load(), byDecision.Load())
	require.Positive(t, admitted.Load())
	require.Positive(t, byDecision.Load())
	require.NoError(t, tcCheckAdmissions(n.Admissions()))
	again, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	require.Equal(t, summary(n.Admissions()), summary(again.Admissions()), "the checkpoint restores the admissions")
	require.Equal(t, n.Unhealthy(), again.Unhealthy(), "the checkpoint restores the device health")
}
