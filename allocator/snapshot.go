package allocator

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/internal/strictjson"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// Snapshot is the live allocations of a state, enough to rebuild it after a
// restart. Its allocations share no storage with the state.
//
// Its JSON form ([Snapshot.MarshalJSON]) is stable: the process that
// restores it may be another, or a later version of this package. It names
// everything by ID — CPUs as a Linux cpulist, GPUs, devices and NUMA
// nodes by their IDs — and leaves out each allocation's DenseSpan, which
// only the state that made it gives a meaning to (Restore recomputes it):
//
//	{
//	  "version": 1,
//	  "allocations": [
//	    {"id": "pod-1", "policy": "SingleNUMANode", "exclusive": "Required",
//	     "fullPCPUs": true, "cpus": "0-3,112-115", "gpus": [0, 1],
//	     "devices": {"rdma": ["mlx5_0"]}, "memory": [{"numaNode": 0, "mib": 4096}],
//	     "amounts": {"example.com/fpga": [{"numaNode": 0, "units": 1}]}}
//	  ],
//	  "unhealthy": {"gpu": ["3"]}
//	}
//
// "version" is [SnapshotVersion]; "policy" and "exclusive" are the
// annotation names of [policy.Policy] and [policy.Exclusivity]; "cpus" is
// always present ("" for none); the other fields of an allocation are left
// out when empty, and "unhealthy" when no device is unhealthy. Allocations
// are in ID order, as [State.Snapshot] gives them.
type Snapshot struct {
	// Allocations are ordered by ID.
	Allocations []Allocation
	// Unhealthy lists the unhealthy devices by class ("gpu" for GPUs), IDs
	// as strings.
	Unhealthy map[string][]string
}

// Snapshot returns a copy of the live allocations and device health, in
// time linear in what they hold plus the devices (an empty snapshot for a
// nil state). Everything in it names CPUs, devices and NUMA nodes by ID,
// except each allocation's DenseSpan, which only this state's machine
// gives a meaning to (Restore recomputes it).
func (s *State) Snapshot() Snapshot {
	if s == nil {
		return Snapshot{}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	live := s.liveLocked()
	for i := range live {
		live[i] = live[i].Clone()
	}
	return Snapshot{Allocations: live, Unhealthy: s.unhealthyLocked()}
}

func (s *State) devices() []*Devices {
	out := []*Devices{s.gpu}
	for _, r := range s.res {
		if d, ok := r.(*Devices); ok && d != s.gpu {
			out = append(out, d)
		}
	}
	return out
}

// RestoreError names the allocation a restore refused and why. It unwraps
// to [ErrConflict] (or [ErrDuplicateID]).
type RestoreError struct {
	// ID is the ID of the refused allocation (possibly empty, when that is
	// why it was refused).
	ID string
	// Err is the reason; it wraps [ErrConflict] or is [ErrDuplicateID] (or
	// an error for an empty ID).
	Err error
}

// Error implements error.
func (e *RestoreError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("allocation %s: %v", quote.Short(e.ID), e.Err)
}

// Unwrap returns the cause.
func (e *RestoreError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Restore claims every allocation of snap, exactly as recorded (their
// spans are recomputed from what they hold), and applies its device health.
// It refuses, changing nothing, an allocation with a duplicate or empty ID,
// unknown or reserved CPUs, unknown devices, CPUs or devices held twice, or
// more memory than a node has; the error is a *[RestoreError] naming it.
// Restore works on a state that already has live allocations too (it adds
// to them), but is meant for a fresh one. Everything is matched by ID: a
// snapshot restored on another machine keeps each allocation's CPUs,
// devices and memory per NUMA node ID exactly, or is refused (memory on a
// node ID the machine does not have: a *[NodeError]), never moved.
//
// Device health is matched by ID as well, as [State.ReplaceMachine] carries
// it over: a device the machine has is marked unhealthy (its ID in any form
// [CanonicalDeviceID] accepts), while the health of a device or class the
// machine does not have is dropped (a device that is gone has no health to
// keep; an allocation holding it is refused as above). A GPU ID that is not
// a decimal integer names no device of any machine, and a class or device
// ID that differs from one of the machine's only in case ("GPU", "MLX5_0")
// is a misspelling: both are refused with an error wrapping [ErrConflict]
// and [ErrUnknownDevice] that names them.
//
// Bound: a copy of the state (O(state)) and claims linear in what the
// snapshot holds, under the write lock.
func (s *State) Restore(snap Snapshot) error {
	if s == nil {
		return errNilState
	}
	s.lockWrite()
	defer s.mu.Unlock()
	// Work on a copy so that a refusal changes nothing.
	tmp := s.cloneLocked()
	for _, a := range snap.Allocations {
		if err := tmp.claim(a.Clone()); err != nil {
			return &RestoreError{ID: a.ID, Err: err}
		}
	}
	for _, class := range slices.Sorted(maps.Keys(snap.Unhealthy)) {
		for _, id := range snap.Unhealthy[class] {
			if _, err := tmp.setHealth(class, id, false); err != nil {
				if _, bad := CanonicalDeviceID(class, id); bad != nil {
					return fmt.Errorf("%w: restore device health: %w", ErrConflict, bad)
				}
				if tmp.misspelt(class, id) {
					return fmt.Errorf("%w: restore device health: %w", ErrConflict, err)
				}
				// The machine has no such class or device: nothing to mark.
			}
		}
	}
	s.adopt(tmp)
	return nil
}

// misspelt reports whether class, or id in it, differs only in case from a
// class or device of the machine: a spelling to refuse, not a device that
// is gone (class names and device IDs are case-sensitive).
func (s *State) misspelt(class, id string) bool {
	d := s.gpu
	if class != GPUClass {
		d = s.classes[class]
	}
	if d == nil {
		return s.didYouMean(class) != ""
	}
	return d.nearID(id) != ""
}

// Claim adds a as a live allocation holding exactly what it names (the
// kubelet side admitting a pod by the scheduler's decision): CPUs by CPU
// ID, GPUs by GPU ID, devices by class and ID, memory by NUMA node ID. Its
// span is recomputed from those on this state's machine (a.DenseSpan is
// ignored). On error (*[RestoreError] wrapping [ErrConflict],
// [ErrDuplicateID] or a *[NodeError] for a NUMA node the machine does not
// have) nothing changes. It costs O(what a holds), whatever else is live.
func (s *State) Claim(a Allocation) (Allocation, error) {
	if s == nil {
		return Allocation{}, errNilState
	}
	s.lockWrite()
	defer s.mu.Unlock()
	if err := s.claim(a.Clone()); err != nil {
		return Allocation{}, &RestoreError{ID: a.ID, Err: err}
	}
	idx, _ := s.ids.get(a.ID)
	return s.recs[idx], nil
}

// claim makes a live, holding exactly what it names, or returns why not
// and changes nothing: the resources claimed before the one that refuses
// give back what they took.
func (s *State) claim(a Allocation) error {
	if a.ID == "" {
		return errors.New("empty allocation ID")
	}
	if s.ids.has(a.ID) {
		return ErrDuplicateID
	}
	if !a.Policy.Valid() || !a.Exclusive.Valid() {
		return fmt.Errorf("%w: invalid policy or exclusivity", ErrConflict)
	}
	a.machine = s.m
	slices.Sort(a.GPUs)
	a.Memory = normalMemory(a.Memory)
	for c := range a.Devices {
		if _, ok := s.classes[c]; !ok {
			return fmt.Errorf("%w: the machine has no %s devices (%s)", ErrConflict, quote.Bare(c), s.classList())
		}
		slices.Sort(a.Devices[c])
	}
	for kind, units := range a.Amounts {
		if !s.customKind(kind) {
			return fmt.Errorf("%w: the state has no resource of kind %s (%s)", ErrConflict, quote.Short(kind), s.customKinds())
		}
		slices.SortStableFunc(units, func(x, y NodeUnits) int { return cmp.Compare(x.Node, y.Node) })
	}
	var span numa.Mask
	for j, res := range s.res {
		if err := res.Claim(&a); err != nil {
			for _, done := range s.res[:j] {
				done.Give(&a)
			}
			return err
		}
		span |= res.Nodes(&a)
	}
	a.DenseSpan = span
	idx := s.slot()
	s.recs[idx] = a
	s.commit(idx)
	return nil
}

// normalMemory sorts mem by node ID (a node listed twice is refused by
// Memory.Claim). Entries of 0 MiB stay: a claim may name them
// (adapters/topologymanager records the kubelet memory manager's group so); they
// count in no span.
func normalMemory(mem []NodeMemory) []NodeMemory {
	slices.SortStableFunc(mem, func(x, y NodeMemory) int { return cmp.Compare(x.Node, y.Node) })
	return mem
}

// cloneLocked returns an independent copy of the state (the caller holds a
// lock).
func (s *State) cloneLocked() *State {
	c := &State{m: s.m, n: s.n, opts: s.opts, classes: map[string]*Devices{},
		ids: s.ids.clone(), recs: slices.Clone(s.recs),
		freeRecs: slices.Clone(s.freeRecs), single: s.single, multi: s.multi,
		singleMask: s.singleMask, sharedMask: s.sharedMask, allPool: s.allPool,
		setMasks: s.setMasks, dist: s.dist, maxSet: s.maxSet, setBit: s.setBit, setOf: s.setOf, distTab: s.distTab,
		distBy:  s.distBy,
		builtin: s.builtin}
	c.machine.Store(s.m)
	c.res = make([]Resource, len(s.res))
	for j, r := range s.res {
		c.res[j] = r.Clone()
		switch r {
		case Resource(s.gpu):
			c.gpu = c.res[j].(*Devices)
		case Resource(s.cpu):
			c.cpu = c.res[j].(*CPUs)
		case Resource(s.mem):
			c.mem = c.res[j].(*Memory)
		}
		if d, ok := r.(*Devices); ok && s.classes[d.class] == d {
			c.classes[d.class] = c.res[j].(*Devices)
		}
	}
	c.linkDevices(s.gpu.joint.x)
	c.initPen()
	return c
}

// Clone returns an independent copy of the state: a cheap way to try
// placements (a preemption dry-run) without touching the original. The
// allocations of the copy share their read-only storage with the original.
// It takes time linear in the state (nil for a nil state).
func (s *State) Clone() *State {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cloneLocked()
}

// adopt moves the contents of t into s (the caller holds s's write lock).
func (s *State) adopt(t *State) {
	s.res, s.pen, s.bulk, s.cpu, s.gpu, s.mem, s.classes = t.res, t.pen, t.bulk, t.cpu, t.gpu, t.mem, t.classes
	s.returns, s.builtin = t.returns, t.builtin
	s.ids, s.recs, s.freeRecs, s.single, s.multi = t.ids, t.recs, t.freeRecs, t.single, t.multi
	s.singleMask, s.sharedMask = t.singleMask, t.sharedMask
}

// SetDeviceHealth marks the device of the given class ("gpu" for GPUs)
// healthy or unhealthy. The ID may be in any form [CanonicalDeviceID]
// accepts ("03" is GPU 3) and is recorded in canonical form; class names
// are case-sensitive. An unknown class (the error lists the machine's
// classes), a malformed or unknown ID returns an error wrapping
// [ErrUnknownDevice] and changes nothing. An unhealthy device is never
// handed out and is not capacity; live allocations that hold it keep it and
// are returned (their IDs, ascending) so the caller can act on them. It
// takes O(log devices) plus O(what the live allocations hold) to find them.
func (s *State) SetDeviceHealth(class, id string, healthy bool) (affected []string, err error) {
	if s == nil {
		return nil, errNilState
	}
	s.lockWrite()
	defer s.mu.Unlock()
	return s.setHealth(class, id, healthy)
}

func (s *State) setHealth(class, id string, healthy bool) ([]string, error) {
	d := s.gpu
	if class != GPUClass {
		d = s.classes[class]
	}
	if d == nil {
		return nil, fmt.Errorf("%w: the machine has no %s devices (%s%s)", ErrUnknownDevice, quote.Bare(class), s.didYouMean(class), s.classList())
	}
	canon, err := CanonicalDeviceID(class, id)
	if err != nil {
		return nil, err
	}
	i, ok := d.index(canon)
	if !ok {
		return nil, fmt.Errorf("%w: %s %s does not exist on this machine%s", ErrUnknownDevice, d.noun(), quote.Bare(canon), d.nearID(canon))
	}
	d.setHealthy(i, healthy)
	var affected []string
	if d.dev[i].held {
		for aid, idx := range s.ids.all() {
			a := &s.recs[idx]
			if d.holds(a, i) {
				affected = append(affected, aid)
			}
		}
		slices.Sort(affected)
	}
	return affected, nil
}

// SnapshotVersion is the version of [Snapshot]'s JSON form that
// [Snapshot.MarshalJSON] writes and [Snapshot.UnmarshalJSON] reads. A
// change that an older reader would misread gets a new version; fields
// added later are left out when empty, so that older readers keep
// reading what they understand.
const SnapshotVersion = 1

// snapshotJSON is Snapshot's JSON form.
type snapshotJSON struct {
	Version     int                 `json:"version"`
	Allocations []allocationJSON    `json:"allocations"`
	Unhealthy   map[string][]string `json:"unhealthy,omitempty"`
}

// allocationJSON is an Allocation's part of Snapshot's JSON form: all but
// DenseSpan.
type allocationJSON struct {
	ID        string                 `json:"id"`
	Policy    policy.Policy          `json:"policy"`
	Exclusive policy.Exclusivity     `json:"exclusive"`
	FullPCPUs bool                   `json:"fullPCPUs,omitempty"`
	CPUs      numa.CPUSet            `json:"cpus"`
	GPUs      []int                  `json:"gpus,omitempty"`
	Devices   map[string][]string    `json:"devices,omitempty"`
	Memory    []nodeMemoryJSON       `json:"memory,omitempty"`
	Amounts   map[string][]unitsJSON `json:"amounts,omitempty"`
}

// nodeMemoryJSON is a NodeMemory in Snapshot's JSON form.
type nodeMemoryJSON struct {
	Node numa.NodeID `json:"numaNode"`
	MiB  int64       `json:"mib"`
}

// unitsJSON is a NodeUnits in Snapshot's JSON form.
type unitsJSON struct {
	Node  numa.NodeID `json:"numaNode"`
	Units int64       `json:"units"`
}

// MarshalJSON implements json.Marshaler with the stable form described at
// [Snapshot].
func (s Snapshot) MarshalJSON() ([]byte, error) {
	w := snapshotJSON{Version: SnapshotVersion, Allocations: make([]allocationJSON, len(s.Allocations)), Unhealthy: s.Unhealthy}
	if len(w.Unhealthy) == 0 {
		w.Unhealthy = nil
	}
	for i := range s.Allocations {
		a := &s.Allocations[i]
		aj := allocationJSON{ID: a.ID, Policy: a.Policy, Exclusive: a.Exclusive, FullPCPUs: a.FullPCPUs,
			CPUs: a.CPUs, GPUs: a.GPUs, Devices: a.Devices}
		for _, m := range a.Memory {
			aj.Memory = append(aj.Memory, nodeMemoryJSON(m))
		}
		if len(a.Amounts) > 0 {
			aj.Amounts = make(map[string][]unitsJSON, len(a.Amounts))
			for kind, units := range a.Amounts {
				list := make([]unitsJSON, len(units))
				for j, u := range units {
					list[j] = unitsJSON(u)
				}
				aj.Amounts[kind] = list
			}
		}
		w.Allocations[i] = aj
	}
	return json.Marshal(w)
}

// UnmarshalJSON implements json.Unmarshaler: it reads the form described
// at [Snapshot] strictly (an unknown or misspelt field, a duplicate key, a
// version other than [SnapshotVersion] or a malformed CPU list is an error
// naming it), replacing what s held. It checks the form only: whether the
// allocations fit a machine is [State.Restore]'s to say. JSON null leaves
// s unchanged.
func (s *Snapshot) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	var w snapshotJSON
	if err := strictjson.Decode(data, &w, strictjson.Options{}); err != nil {
		return fmt.Errorf("allocator snapshot: %w", err)
	}
	if w.Version != SnapshotVersion {
		return fmt.Errorf("allocator snapshot: version %d, this package reads version %d", w.Version, SnapshotVersion)
	}
	out := Snapshot{Unhealthy: w.Unhealthy}
	if len(w.Allocations) > 0 {
		out.Allocations = make([]Allocation, len(w.Allocations))
	}
	for i, aj := range w.Allocations {
		a := Allocation{ID: aj.ID, Policy: aj.Policy, Exclusive: aj.Exclusive, FullPCPUs: aj.FullPCPUs,
			CPUs: aj.CPUs, GPUs: aj.GPUs, Devices: aj.Devices}
		for _, m := range aj.Memory {
			a.Memory = append(a.Memory, NodeMemory(m))
		}
		if len(aj.Amounts) > 0 {
			a.Amounts = make(map[string][]NodeUnits, len(aj.Amounts))
			for kind, units := range aj.Amounts {
				list := make([]NodeUnits, len(units))
				for j, u := range units {
					list[j] = NodeUnits(u)
				}
				a.Amounts[kind] = list
			}
		}
		out.Allocations[i] = a
	}
	*s = out
	return nil
}
