package allocator

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/topology"
)

// ErrTopologyChange is the category of a machine replacement that some
// live allocations do not survive.
var ErrTopologyChange = errors.New("the new machine cannot hold every live allocation")

// Conflict is one live allocation a new machine cannot hold, and why.
type Conflict struct {
	// ID is the live allocation's ID.
	ID string
	// Err says why the new machine cannot hold it, such as CPUs, devices or
	// memory it does not have or does not make allocatable; it wraps
	// [ErrConflict].
	Err error
}

// TopologyChangeError lists the live allocations a machine replacement
// would break. It unwraps to [ErrTopologyChange].
type TopologyChangeError struct {
	// Conflicts are the affected allocations, one each, ordered by ID.
	Conflicts []Conflict
}

// Error implements error.
func (e *TopologyChangeError) Error() string {
	if e == nil {
		return "<nil>"
	}
	parts := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		parts[i] = fmt.Sprintf("%s: %v", quote.Short(c.ID), c.Err)
	}
	return fmt.Sprintf("%s: %d allocation(s) affected: %s", ErrTopologyChange, len(e.Conflicts), strings.Join(parts, "; "))
}

// Unwrap returns [ErrTopologyChange] and the conflicts' causes, so that
// errors.As finds, for example, a *[NodeError] for a NUMA node the new
// machine does not have.
func (e *TopologyChangeError) Unwrap() []error {
	if e == nil {
		return nil
	}
	errs := []error{ErrTopologyChange}
	for _, c := range e.Conflicts {
		errs = append(errs, c.Err)
	}
	return errs
}

// Affected returns the IDs of the conflicting allocations.
func (e *TopologyChangeError) Affected() []string {
	if e == nil {
		return nil
	}
	ids := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		ids[i] = c.ID
	}
	return ids
}

// ReplaceMachine moves the state to a new description of the same machine
// (CPUs taken offline, a GPU gone, reserved CPUs changed, a BIOS change of
// NUMA mode). Every live allocation is re-validated on m: if all of them
// still fit — their CPUs, devices and memory exist, are allocatable and
// are not held twice — they are kept exactly (their spans recomputed on
// m's NUMA nodes) and device health carries over for the devices m still
// has. Otherwise nothing changes and the error is a *[TopologyChangeError]
// listing every affected allocation; the caller can release or evict those
// and try again. States with Options.Resources cannot be moved (the extra
// resources were built for the old machine); those of
// Options.NewResources are made anew for m, and each allocation's holdings
// of them claimed there like the rest. Allocations keep their
// memory on the same NUMA node IDs: memory on a node ID m does not have is
// a conflict (a *[NodeError]), never moved to another node. A nil m is an
// error wrapping [ErrNoMachine].
//
// Readers see the old machine or the new one, never a mix: the new state
// is built apart and moved in under the write lock, which every other
// method but Machine takes for the whole of its work, so each call's
// answer is of one machine (its dense indices, node types, free amounts
// and allocations); Machine reads the machine from an atomic pointer
// stored under that lock. Between two calls the machine may change: a
// dense index taken from an earlier call may be beyond the new machine
// (NodeFree returns nil for it, nothing indexes it), so a caller that
// reads several things of one machine reads them from one [State.Clone].
// Allocations returned before the move are not changed by it (the new
// state holds copies): they keep their meaning on the machine they were
// made on ([Allocation.NUMANodes] included). Restore and SetDeviceHealth
// change the state under the write lock in the same way.
//
// Bound: building the new state (linear in m) and claiming every live
// allocation on it (linear in what they hold), under the write lock.
func (s *State) ReplaceMachine(m *topology.Machine) error {
	if s == nil {
		return errNilState
	}
	if m == nil {
		return fmt.Errorf("%w: ReplaceMachine needs a *topology.Machine, got nil", ErrNoMachine)
	}
	s.lockWrite()
	defer s.mu.Unlock()
	if len(s.opts.Resources) > 0 {
		return fmt.Errorf("%w: the state has resources of the caller's own (Options.Resources), which cannot follow a new machine", ErrTopologyChange)
	}
	next, err := New(m, s.opts)
	if err != nil {
		return err
	}
	for _, d := range s.devices() {
		for i, v := range d.dev {
			if !v.healthy {
				_, _ = next.setHealth(d.class, d.ids[i], false) // gone devices have no health to keep
			}
		}
	}
	live := s.liveLocked()
	var conflicts []Conflict
	for _, a := range live {
		if err := next.claim(a.Clone()); err != nil {
			conflicts = append(conflicts, Conflict{ID: a.ID, Err: err})
		}
	}
	if conflicts != nil {
		slices.SortFunc(conflicts, func(x, y Conflict) int { return strings.Compare(x.ID, y.ID) })
		return &TopologyChangeError{Conflicts: conflicts}
	}
	s.adoptMachine(next)
	return nil
}

// adoptMachine moves a state built for another machine into s (the caller
// holds the write lock).
func (s *State) adoptMachine(t *State) {
	s.adopt(t)
	s.m, s.n, s.setMasks, s.dist, s.maxSet, s.setBit, s.allPool = t.m, t.n, t.setMasks, t.dist, t.maxSet, t.setBit, t.allPool
	s.distTab, s.distBy, s.setOf = t.distTab, t.distBy, t.setOf
	s.machine.Store(t.m)
}
