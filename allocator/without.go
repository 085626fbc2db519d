package allocator

import (
	"fmt"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
)

// FitWithout reports whether Allocate would accept r if the live
// allocations named by victims were released first, without changing
// anything: a preemption dry-run. The answer is exact: the policies and the
// exclusivity rule see the node types without the victims (releasing a
// multi-node allocation can turn a shared node single, which a multi-node
// request may then not use). A victim ID that is not live returns
// [ErrUnknownID]; r's own ID may be among the victims (a re-placement).
// A nil r or a nil state is an error.
//
// Bound: Fit's decision, plus O(what the victims hold) to read the amounts
// without them, under the read lock (with resources of the caller's own
// that cannot say so, a copy of the state: O(state)).
func (s *State) FitWithout(r *Request, victims []string) error {
	if err := s.check(r); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	recs := make([]*Allocation, 0, len(victims))
	seen := make(map[string]bool, len(victims))
	for _, id := range victims {
		idx, ok := s.ids.get(id)
		if !ok {
			return fmt.Errorf("%w: victim %s", ErrUnknownID, quote.Short(id))
		}
		if !seen[id] {
			seen[id] = true
			recs = append(recs, &s.recs[idx])
		}
	}
	if r.ID != "" && !seen[r.ID] {
		if s.ids.has(r.ID) {
			return fmt.Errorf("%w: %s", ErrDuplicateID, quote.Short(r.ID))
		}
	}
	if !s.returns {
		// A resource of the caller's own without the ability: work on a
		// copy of the state.
		c := s.cloneLocked()
		for _, a := range recs {
			c.releaseLocked(a.ID)
		}
		return c.decideFit(r)
	}
	sr := s.searcher(r, recs)
	err := sr.decide(false)
	sr.done()
	return err
}

// decideFit is Fit's decision on a state no one else sees.
func (s *State) decideFit(r *Request) error {
	sr := s.searcher(r, nil)
	defer sr.done()
	return sr.decide(false)
}

// typesWithout returns the node types as if victims were released.
func (s *State) typesWithout(victims []*Allocation) (single, shared numa.Mask) {
	sg, mu := s.single, s.multi
	for _, a := range victims {
		cnt := &sg
		if a.DenseSpan.Count() > 1 {
			cnt = &mu
		}
		for i := range a.DenseSpan.All() {
			cnt[i]--
		}
	}
	for i := 0; i < s.n; i++ {
		switch {
		case mu[i] > 0:
			shared = shared.With(i)
		case sg[i] > 0:
			single = single.With(i)
		}
	}
	return single, shared
}

// releaseLocked releases a live allocation (the caller holds the write lock
// or owns the state).
func (s *State) releaseLocked(id string) {
	if pos, _, ok := s.ids.probe(id); ok {
		s.releaseAt(pos)
	}
}

// releaseAt releases the live allocation whose ID is at position pos of
// the ID table.
func (s *State) releaseAt(pos uint32) {
	idx := s.ids.slots[pos].idx
	s.ids.deleteAt(pos)
	a := &s.recs[idx]
	for _, res := range s.res {
		res.Give(a)
	}
	s.count(a.DenseSpan, -1)
	s.recs[idx] = Allocation{}
	s.freeRecs = append(s.freeRecs, idx)
}

// FreeWithout implements Returner.
func (c *CPUs) FreeWithout(r *Request, victims []*Allocation, dst []int64) {
	copy(dst, c.FreeView(r))
	if !r.FullPCPUs {
		for _, a := range victims {
			for i := range c.Nodes(a).All() {
				dst[i] += int64(a.CPUs.IntersectionCount(c.m.NodeCPUs(i)))
			}
		}
		return
	}
	// Whole cores: a core becomes whole and free when the victims hold all
	// of its allocatable threads that are not free.
	freed := map[int32]int8{}
	for _, a := range victims {
		for cpu := range a.CPUs.All() {
			if k := c.coreOf(cpu); k >= 0 {
				freed[k]++
			}
		}
	}
	for k, n := range freed {
		if f := c.freeThreads(k); c.full(int(k)) && f < c.coreAlloc[k] && f+n == c.coreAlloc[k] {
			dst[c.m.CoreNode(int(k))]++
		}
	}
}

// UnplacedWithout implements Returner.
func (c *CPUs) UnplacedWithout(*Request, []*Allocation) int64 { return 0 }

// FreeWithout implements Returner.
func (d *Devices) FreeWithout(r *Request, victims []*Allocation, dst []int64) {
	copy(dst, d.FreeView(r))
	for _, a := range victims {
		_ = d.forEach(a, func(i int32) {
			if v := d.dev[i]; v.healthy && v.node >= 0 {
				dst[v.node]++
			}
		})
	}
}

// UnplacedWithout implements Returner.
func (d *Devices) UnplacedWithout(_ *Request, victims []*Allocation) int64 {
	n := int64(d.unFree)
	for _, a := range victims {
		_ = d.forEach(a, func(i int32) {
			if v := d.dev[i]; v.healthy && v.node < 0 {
				n++
			}
		})
	}
	return n
}

// FreeWithout implements Returner.
func (m *Memory) FreeWithout(r *Request, victims []*Allocation, dst []int64) {
	copy(dst, m.FreeView(r))
	for _, a := range victims {
		for _, x := range a.Memory {
			if i, ok := m.m.NodeIndex(x.Node); ok {
				dst[i] += x.MiB
			}
		}
	}
}

// UnplacedWithout implements Returner.
func (m *Memory) UnplacedWithout(*Request, []*Allocation) int64 { return 0 }

var (
	_ Returner = (*CPUs)(nil)
	_ Returner = (*Devices)(nil)
	_ Returner = (*Memory)(nil)
)
