package allocator_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// tcMachines are the machines TestTopologyChangeStress moves a state
// between: presets of 1, 2, 4, 8 and 16 NUMA nodes and random machines of
// 1 to 6 (sparse node IDs, sparse CPU numbers, GPUs of unknown node), so
// that each move grows or shrinks the node count, the CPUs and the GPUs.
func tcMachines(t *testing.T) []*topology.Machine {
	t.Helper()
	var out []*topology.Machine
	for _, name := range []string{"dgx-a100", "small-1s", "xeon-2s-snc2-8gpu", "dgx-h100", "xeon-max-snc4", "epyc-2s-nps4"} {
		out = append(out, tbPreset(t, name))
	}
	for seed := range 6 {
		out = append(out, allocatortest.Machine().Example(seed))
	}
	return out
}

// tcRequest draws a request that fits some of the machines: small and
// large, every policy, some fullPCPUs, GPUs, memory, RDMA devices.
func tcRequest(rng *rand.Rand, id string) allocator.Request {
	r := allocator.Request{ID: id, Policy: policy.Policies[rng.IntN(len(policy.Policies))]}
	if rng.IntN(4) == 0 {
		r.Exclusive = policy.Preferred
	}
	r.GPUs = rng.IntN(3)
	r.CPUs = 1 + rng.IntN(8)
	if rng.IntN(3) == 0 {
		r.CPUs = 2 * (1 + rng.IntN(4))
		r.FullPCPUs = true
	}
	if rng.IntN(4) == 0 {
		r.MemoryMiB = int64(rng.IntN(2048))
	}
	if r.GPUs > 0 && rng.IntN(4) == 0 {
		r.Devices = map[string]int{"rdma": 1}
	}
	return r
}

// tcCheckClone checks a state whole through a clone (taken under one
// lock, so its parts are of one moment and one machine): every allocation
// lies on the clone's machine, no CPU or GPU is held twice, free and held
// CPUs are the machine's allocatable ones, free and held healthy GPUs
// its healthy GPUs, the node types are those of the spans, and NodeFree
// answers for exactly the machine's dense indices.
func tcCheckClone(s *allocator.State) error {
	c := s.Clone()
	m := c.Machine()
	snap := c.Snapshot()
	allocatable := m.CPUs().Difference(m.ReservedCPUs())
	var held numa.CPUSet
	gpus := map[int]string{}
	var spans []numa.Mask
	for _, a := range snap.Allocations {
		if !a.CPUs.IsSubsetOf(allocatable) {
			return fmt.Errorf("machine %s: %q holds CPUs %s that are not allocatable", m.Name(), a.ID, a.CPUs.Difference(allocatable))
		}
		if held.Intersects(a.CPUs) {
			return fmt.Errorf("machine %s: CPUs %s of %q are held twice", m.Name(), held.Intersection(a.CPUs), a.ID)
		}
		held.UnionWith(a.CPUs)
		for _, g := range a.GPUs {
			if _, ok := m.GPU(g); !ok {
				return fmt.Errorf("machine %s: %q holds GPU %d, which the machine does not have", m.Name(), a.ID, g)
			}
			if other, ok := gpus[g]; ok {
				return fmt.Errorf("machine %s: GPU %d is held by %q and %q", m.Name(), g, other, a.ID)
			}
			gpus[g] = a.ID
		}
		if a.DenseSpan&^m.AllNodes() != 0 {
			return fmt.Errorf("machine %s: %q has span %s beyond the machine's nodes", m.Name(), a.ID, a.DenseSpan)
		}
		if ids, want := a.NUMANodes(), m.IDsOf(a.DenseSpan); fmt.Sprint(ids) != fmt.Sprint(want) {
			return fmt.Errorf("machine %s: %q lies on NUMA nodes %v, its span says %v", m.Name(), a.ID, ids, want)
		}
		spans = append(spans, a.DenseSpan)
	}
	free := c.FreeCPUs()
	if free.Intersects(held) || !free.Union(held).Equal(allocatable) {
		return fmt.Errorf("machine %s: free CPUs %s and held %s are not the allocatable %s", m.Name(), free, held, allocatable)
	}
	unhealthy := map[string]bool{}
	for _, id := range snap.Unhealthy[allocator.GPUClass] {
		unhealthy[id] = true
	}
	var freeGPUs int64
	for i := range m.NumNodes() {
		f := c.NodeFree(i)
		if f == nil {
			return fmt.Errorf("machine %s: NodeFree(%d) is nil on a machine of %d nodes", m.Name(), i, m.NumNodes())
		}
		freeGPUs += f[allocator.GPUClass]
	}
	if f := c.NodeFree(m.NumNodes()); f != nil {
		return fmt.Errorf("machine %s: NodeFree(%d) = %v on a machine of %d nodes", m.Name(), m.NumNodes(), f, m.NumNodes())
	}
	// GPUs of unknown NUMA node are free on no node.
	var placed, heldPlaced int64
	for _, g := range m.GPUs() {
		if _, ok := m.NodeIndex(g.NUMANode); !ok || unhealthy[strconv.Itoa(g.ID)] {
			continue
		}
		placed++
		if _, ok := gpus[g.ID]; ok {
			heldPlaced++
		}
	}
	if freeGPUs != placed-heldPlaced {
		return fmt.Errorf("machine %s: %d GPUs free on the nodes, want %d healthy placed GPUs minus %d held", m.Name(), freeGPUs, placed, heldPlaced)
	}
	single, shared := c.NodeTypes()
	if ws, wsh := policy.NodeTypes(spans); ws != single || wsh != shared {
		return fmt.Errorf("machine %s: node types single %s shared %s, the spans say %s and %s", m.Name(), single, shared, ws, wsh)
	}
	return nil
}

// TestTopologyChangeStress moves a state between machines of 1 to 16 NUMA
// nodes (ReplaceMachine, releasing what a move cannot keep), marks devices
// unhealthy and healthy (SetDeviceHealth) and restores allocations and
// health (Restore) while writers allocate, claim, resize and release and
// readers call every exported reader, 8 goroutines in all, bounded by
// iteration counts, under -race in the default test run. Every reader must
// see one machine: no race, no panic (an index of a machine that has just
// shrunk), no state whose parts disagree.
func TestTopologyChangeStress(t *testing.T) {
	machines := tcMachines(t)
	s := allocator.MustNew(machines[0], allocator.Options{})
	const rounds = 200
	errc := make(chan error, 64)
	report := func(format string, args ...any) { errc <- fmt.Errorf(format, args...) }
	var wg sync.WaitGroup
	var moves, restores, health int // each written by one goroutine, read after Wait
	// unexpected reports an error that none of the expected categories
	// (a refusal, an ID gone meanwhile, a device the machine no longer
	// has) explains.
	unexpected := func(err error) bool {
		return err != nil && !errors.Is(err, allocator.ErrInsufficient) && !errors.Is(err, allocator.ErrNoNUMAFit) &&
			!errors.Is(err, allocator.ErrExclusivity) && !errors.Is(err, allocator.ErrNeverFits) &&
			!errors.Is(err, allocator.ErrSearchLimit) && !errors.Is(err, allocator.ErrUnknownID) &&
			!errors.Is(err, allocator.ErrInvalidRequest) && !errors.Is(err, allocator.ErrConflict) &&
			!errors.Is(err, allocator.ErrDuplicateID) && !errors.Is(err, allocator.ErrUnknownDevice)
	}

	// 1: ReplaceMachine, through every machine in turn, releasing the
	// allocations a move cannot keep.
	wg.Go(func() {
		for k := range 3 * len(machines) {
			runtime.Gosched() // interleave the goroutines finely on few CPUs
			m := machines[(k+1)%len(machines)]
			for try := 0; ; try++ {
				err := s.ReplaceMachine(m)
				var tc *allocator.TopologyChangeError
				if err == nil {
					moves++
					break
				}
				if !errors.As(err, &tc) || try == 100 { // writers may take what a move cannot keep between tries
					report("ReplaceMachine(%s): %v", m.Name(), err)
					return
				}
				for _, id := range tc.Affected() {
					_ = s.Release(id) // a writer may have released it meanwhile
				}
			}
			if err := tcCheckClone(s); err != nil {
				report("after a move: %v", err)
				return
			}
		}
	})
	// 2: SetDeviceHealth of the GPUs and RDMA devices of the machine the
	// state has now (or had a moment ago: then the device may be gone).
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(2, 22))
		for range 4 * rounds {
			runtime.Gosched() // interleave the goroutines finely on few CPUs
			m := s.Machine()
			class, id := allocator.GPUClass, strconv.Itoa(rng.IntN(10))
			if gpus := m.GPUs(); len(gpus) > 0 {
				id = strconv.Itoa(gpus[rng.IntN(len(gpus))].ID)
			}
			if devs := m.Devices(); len(devs) > 0 && rng.IntN(3) == 0 {
				d := devs[rng.IntN(len(devs))]
				class, id = d.Class, d.ID
			}
			_, err := s.SetDeviceHealth(class, id, rng.IntN(3) != 0)
			switch {
			case err == nil:
				health++
			case !errors.Is(err, allocator.ErrUnknownDevice):
				report("SetDeviceHealth(%s, %s): %v", class, id, err)
				return
			}
		}
	})
	// 3: Restore of allocations made on a clone, and of device health.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(3, 33))
		for k := range rounds {
			runtime.Gosched() // interleave the goroutines finely on few CPUs
			c := s.Clone()
			r := tcRequest(rng, "restored-"+strconv.Itoa(k))
			snap := allocator.Snapshot{Unhealthy: c.Unhealthy()}
			if a, err := c.Allocate(&r); err == nil {
				snap.Allocations = []allocator.Allocation{a}
			}
			switch err := s.Restore(snap); {
			case err == nil:
				restores++
			case unexpected(err):
				report("Restore: %v", err)
				return
			}
			if rng.IntN(2) == 0 {
				_ = s.Release(r.ID)
			}
		}
	})
	// 4, 5: writers: Allocate, Claim, Resize, Release.
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(4+w), 44))
			var mine []string
			for k := range 2 * rounds {
				runtime.Gosched() // interleave the goroutines finely on few CPUs
				if len(mine) > 0 && (len(mine) > 6 || rng.IntN(3) == 0) {
					j := rng.IntN(len(mine))
					if err := s.Release(mine[j]); err != nil && !errors.Is(err, allocator.ErrUnknownID) {
						report("writer %d: Release(%s): %v", w, mine[j], err)
						return
					}
					mine = append(mine[:j], mine[j+1:]...)
					continue
				}
				id := fmt.Sprintf("w%d-%d", w, k)
				r := tcRequest(rng, id)
				var err error
				switch rng.IntN(4) {
				case 0: // the kubelet side: claim what a clone decided
					c := s.Clone()
					var a allocator.Allocation
					if a, err = c.Allocate(&r); err == nil {
						_, err = s.Claim(a)
					}
				default:
					var a allocator.Allocation
					if a, err = s.Allocate(&r); err == nil && (a.CPUs.Size() != r.CPUs || len(a.GPUs) != r.GPUs) {
						report("writer %d: %s got %s", w, &r, a.String())
						return
					}
				}
				if err == nil {
					mine = append(mine, id)
				} else if unexpected(err) {
					report("writer %d: %s: %v", w, &r, err)
					return
				}
				if len(mine) > 0 && rng.IntN(3) == 0 {
					if _, err := s.Resize(mine[rng.IntN(len(mine))], 1+rng.IntN(12)); unexpected(err) {
						report("writer %d: Resize: %v", w, err)
						return
					}
				}
			}
		})
	}
	// 6, 7, 8: readers, every exported one.
	for g := range 3 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(6+g), 66))
			for k := range 2 * rounds {
				runtime.Gosched() // interleave the goroutines finely on few CPUs
				r := tcRequest(rng, "")
				if err := s.Fit(&r); unexpected(err) {
					report("reader %d: Fit(%s): %v", g, &r, err)
					return
				}
				if sc, err := s.Score(&r); unexpected(err) || (err == nil && (sc < 0 || sc > 100)) {
					report("reader %d: Score(%s) = %d, %v", g, &r, sc, err)
					return
				}
				live := s.Live()
				var victims []string
				for i := range live {
					if rng.IntN(2) == 0 {
						victims = append(victims, live[i].ID)
					}
					if got := len(live[i].NUMANodes()); got != live[i].DenseSpan.Count() {
						report("reader %d: %q has %d NUMA nodes for span %s", g, live[i].ID, got, live[i].DenseSpan)
						return
					}
				}
				if err := s.FitWithout(&r, victims); unexpected(err) {
					report("reader %d: FitWithout: %v", g, err)
					return
				}
				if a, ok := s.Get(fmt.Sprintf("w%d-%d", rng.IntN(2), rng.IntN(2*rounds))); ok {
					_ = a.String()
					_ = a.Request()
				}
				for i := range numa.MaxNodes + 1 {
					if f := s.NodeFree(i); f != nil && (f["cpu"] < 0 || f[allocator.GPUClass] < 0 || f["memory"] < 0) {
						report("reader %d: NodeFree(%d) = %v", g, i, f)
						return
					}
				}
				if s.NodeFree(-1) != nil {
					report("reader %d: NodeFree(-1) is not nil", g)
					return
				}
				m := s.Machine()
				single, shared := s.NodeTypes()
				_ = single | shared
				_ = m.NumNodes()
				_ = s.Kinds()
				_ = s.FreeCPUs()
				_ = s.Unhealthy()
				_ = s.Snapshot()
				if k%8 == 0 {
					if err := tcCheckClone(s); err != nil {
						report("reader %d: %v", g, err)
						return
					}
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
	t.Logf("%d moves, %d restores, %d health changes", moves, restores, health)
	require.Equal(t, 3*len(machines), moves)
	require.NoError(t, tcCheckClone(s))
	for _, a := range s.Live() {
		require.NoError(t, s.Release(a.ID))
	}
	m := s.Machine()
	require.True(t, s.FreeCPUs().Equal(m.CPUs().Difference(m.ReservedCPUs())), "releasing everything frees every allocatable CPU")
}
