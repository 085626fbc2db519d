package allocator_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// ccMachine is dgx-a100 with two reserved CPUs, so that "allocatable" is
// not simply every CPU.
func ccMachine(t *testing.T) *topology.Machine {
	t.Helper()
	spec := tbPreset(t, "dgx-a100").Spec()
	spec.ReservedCPUs = "0,128"
	m, err := spec.Build()
	require.NoError(t, err)
	return m
}

// ccAllocatable returns m's CPUs minus the reserved ones.
func ccAllocatable(m *topology.Machine) numa.CPUSet {
	a := m.CPUs()
	a.RemoveAll(m.ReservedCPUs())
	return a
}

// ccHeld verifies that the live allocations of snap hold no CPU or GPU
// twice and no reserved or unknown CPU, and returns what they hold.
func ccHeld(m *topology.Machine, snap allocator.Snapshot) (held numa.CPUSet, gpus map[int]string, spans []numa.Mask, err error) {
	allocatable := ccAllocatable(m)
	gpus = map[int]string{}
	for _, a := range snap.Allocations {
		if held.Intersects(a.CPUs) {
			return held, gpus, spans, fmt.Errorf("CPUs %s of %q are held twice", held.Intersection(a.CPUs), a.ID)
		}
		if !a.CPUs.IsSubsetOf(allocatable) {
			return held, gpus, spans, fmt.Errorf("%q holds CPUs %s that are not allocatable", a.ID,
				a.CPUs.Difference(allocatable))
		}
		held.UnionWith(a.CPUs)
		for _, g := range a.GPUs {
			if other, ok := gpus[g]; ok {
				return held, gpus, spans, fmt.Errorf("GPU %d is held by %q and %q", g, other, a.ID)
			}
			gpus[g] = a.ID
		}
		spans = append(spans, a.DenseSpan)
	}
	return held, gpus, spans, nil
}

// ccCheck verifies ccHeld, that free CPUs plus held CPUs are exactly the
// allocatable ones, that free GPUs plus held GPUs are every GPU, and that
// the node types are those of the live spans.
func ccCheck(m *topology.Machine, snap allocator.Snapshot, free numa.CPUSet, freeGPUs int64,
	single, shared numa.Mask) error {
	held, gpus, spans, err := ccHeld(m, snap)
	if err != nil {
		return err
	}
	allocatable := ccAllocatable(m)
	if free.Intersects(held) {
		return fmt.Errorf("CPUs %s are free and held", free.Intersection(held))
	}
	if !free.Union(held).Equal(allocatable) {
		return fmt.Errorf("free %s + held %s != allocatable %s", free, held, allocatable)
	}
	if int(freeGPUs)+len(gpus) != m.NumGPUs() {
		return fmt.Errorf("%d free GPUs + %d held != %d", freeGPUs, len(gpus), m.NumGPUs())
	}
	ws, wsh := policy.NodeTypes(spans)
	if ws != single || wsh != shared {
		return fmt.Errorf("node types single %s shared %s, the spans say %s and %s", single, shared, ws, wsh)
	}
	return nil
}

// ccCheckState checks s whole: a clone is taken under one lock, so its
// parts agree with each other.
func ccCheckState(s *allocator.State) error {
	c := s.Clone()
	var freeGPUs int64
	for i := range c.Machine().NumNodes() {
		freeGPUs += c.NodeFree(i)["gpu"]
	}
	single, shared := c.NodeTypes()
	return ccCheck(c.Machine(), c.Snapshot(), c.FreeCPUs(), freeGPUs, single, shared)
}

// ccRequest draws a request of a mix the dgx-a100 sees: small and large,
// every policy, some fullPCPUs.
func ccRequest(rng *rand.Rand, id string) allocator.Request {
	r := allocator.Request{ID: id, Policy: policy.Policies[rng.IntN(len(policy.Policies))]}
	if rng.IntN(4) == 0 {
		r.Exclusive = policy.Preferred
	}
	r.GPUs = rng.IntN(4)
	r.CPUs = 2 * (1 + rng.IntN(12))
	r.FullPCPUs = rng.IntN(3) == 0
	if rng.IntN(4) == 0 {
		r.MemoryMiB = int64(rng.IntN(64 << 10))
	}
	if r.GPUs > 0 && rng.IntN(3) == 0 {
		r.Devices = map[string]int{"rdma": r.GPUs}
	}
	return r
}

// TestConcurrentUse runs the readers (Fit, Score, Get, Live, Snapshot,
// NodeTypes, FreeCPUs, NodeFree, Clone) while writers allocate and release
// on the same state, under -race, then checks that the state is
// consistent and that releasing everything gives the empty state back.
func TestConcurrentUse(t *testing.T) {
	m := ccMachine(t)
	s := allocator.MustNew(m, allocator.Options{})
	emptyText := tbText(s)

	const writers, readers = 3, 4
	// Each writer makes at least minOps operations and at most maxOps,
	// stopping at the deadline in between; each reader makes at least
	// minRounds rounds and goes on until the writers are done, so that a
	// loaded machine that starts the goroutines late still runs both.
	const minOps, maxOps, minRounds = 20, 400, 8
	deadline := time.Now().Add(time.Second)
	if testing.Short() {
		deadline = time.Now().Add(200 * time.Millisecond)
	}
	var done atomic.Bool
	var allocated, refused, reads atomic.Int64
	errc := make(chan error, writers+readers)
	var wg, wwg sync.WaitGroup

	for w := range writers {
		wg.Add(1)
		wwg.Add(1)
		go func() {
			defer wg.Done()
			defer wwg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			var mine []string
			for op := 0; op < maxOps && (op < minOps || time.Now().Before(deadline)); op++ {
				if len(mine) > 0 && (len(mine) > 6 || rng.IntN(3) == 0) {
					k := rng.IntN(len(mine))
					if err := s.Release(mine[k]); err != nil {
						errc <- fmt.Errorf("writer %d: release %s: %w", w, mine[k], err)
						return
					}
					mine = append(mine[:k], mine[k+1:]...)
					continue
				}
				r := ccRequest(rng, fmt.Sprintf("w%d-%d", w, op))
				a, err := s.Allocate(&r)
				switch {
				case err == nil:
					allocated.Add(1)
					mine = append(mine, r.ID)
					if a.CPUs.Size() != r.CPUs || len(a.GPUs) != r.GPUs {
						errc <- fmt.Errorf("writer %d: %s got %s", w, &r, a.String())
						return
					}
				case errors.Is(err, allocator.ErrInsufficient), errors.Is(err, allocator.ErrNoNUMAFit),
					errors.Is(err, allocator.ErrExclusivity):
					refused.Add(1)
				default:
					errc <- fmt.Errorf("writer %d: %s: %w", w, &r, err)
					return
				}
				if rng.IntN(50) == 0 { // a retried release of a gone ID is harmless
					if err := s.Release(fmt.Sprintf("w%d-gone", w)); !errors.Is(err, allocator.ErrUnknownID) {
						errc <- fmt.Errorf("writer %d: release of an unknown ID: %v", w, err)
						return
					}
				}
			}
		}()
	}

	for g := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(100+g), 7))
			for i := 0; i < minRounds || !done.Load(); i++ {
				reads.Add(1)
				r := ccRequest(rng, "")
				fitErr := s.Fit(&r)
				if fitErr != nil && errors.Is(fitErr, allocator.ErrInvalidRequest) {
					errc <- fmt.Errorf("reader %d: Fit(%s): %w", g, &r, fitErr)
					return
				}
				if sc, err := s.Score(&r); err == nil && (sc < 0 || sc > 100) {
					errc <- fmt.Errorf("reader %d: Score(%s) = %d", g, &r, sc)
					return
				}
				if a, ok := s.Get(fmt.Sprintf("w%d-%d", rng.IntN(writers), rng.IntN(maxOps))); ok {
					_ = a.String()
				}
				switch i % 4 {
				case 0:
					if _, _, _, err := ccHeld(m, s.Snapshot()); err != nil {
						errc <- fmt.Errorf("reader %d: snapshot: %w", g, err)
						return
					}
				case 1:
					_ = s.Live()
					_, _ = s.NodeTypes()
					_ = s.FreeCPUs()
					_ = s.NodeFree(rng.IntN(m.NumNodes()))
				case 2:
					if err := ccCheckState(s); err != nil {
						errc <- fmt.Errorf("reader %d: clone: %w", g, err)
						return
					}
				case 3:
					// A dry run on a clone never touches the original.
					c := s.Clone()
					r.ID = fmt.Sprintf("dry-%d-%d", g, i)
					_, _ = c.Allocate(&r)
					if _, ok := s.Get(r.ID); ok {
						errc <- fmt.Errorf("reader %d: allocation on a clone is live on the original", g)
						return
					}
				}
			}
		}()
	}

	wwg.Wait()
	done.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	t.Logf("%d allocated, %d refused, %d reader rounds", allocated.Load(), refused.Load(), reads.Load())
	require.Positive(t, allocated.Load())
	require.GreaterOrEqual(t, reads.Load(), int64(readers*minRounds))

	require.NoError(t, ccCheckState(s))
	var freeGPUs int64
	for i := range m.NumNodes() {
		freeGPUs += s.NodeFree(i)["gpu"]
	}
	single, shared := s.NodeTypes()
	require.NoError(t, ccCheck(m, s.Snapshot(), s.FreeCPUs(), freeGPUs, single, shared))

	for _, a := range s.Live() {
		require.NoError(t, s.Release(a.ID))
	}
	require.Equal(t, emptyText, tbText(s), "releasing everything gives the empty state back")
}

// TestConcurrentSameID checks that of several goroutines allocating the
// same ID exactly one succeeds, and of several releasing it exactly one.
func TestConcurrentSameID(t *testing.T) {
	s := tbState(t, "dgx-h100")
	for round := range 20 {
		id := fmt.Sprint("same-", round)
		var wg sync.WaitGroup
		var ok, dup, rel, unknown atomic.Int64
		for range 4 {
			wg.Go(func() {
				r := allocator.Request{ID: id, CPUs: 2, GPUs: 1, Policy: policy.SingleNUMANode}
				_, err := s.Allocate(&r)
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, allocator.ErrDuplicateID):
					dup.Add(1)
				default:
					t.Errorf("allocate %s: %v", id, err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(1), ok.Load())
		require.Equal(t, int64(3), dup.Load())
		for range 4 {
			wg.Go(func() {
				switch err := s.Release(id); {
				case err == nil:
					rel.Add(1)
				case errors.Is(err, allocator.ErrUnknownID):
					unknown.Add(1)
				default:
					t.Errorf("release %s: %v", id, err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, int64(1), rel.Load())
		require.Equal(t, int64(3), unknown.Load())
	}
	require.Empty(t, s.Live())
	require.Equal(t, 224, s.FreeCPUs().Size())
}
