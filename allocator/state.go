package allocator

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// Packing is preference 5 of docs/design.md among admissible choices.
type Packing uint8

const (
	// BestFit keeps large free blocks whole: among otherwise equal spans it
	// takes the one with the least free resources left (the default).
	BestFit Packing = iota
	// Spread takes the span with the most free resources left.
	Spread
)

// Scoring is how [State.Score] ranks a feasible node for a scheduler.
type Scoring uint8

const (
	// MostAllocated favours fuller machines (bin packing; the default).
	MostAllocated Scoring = iota
	// LeastAllocated favours emptier machines.
	LeastAllocated
)

// Options tune a [State]. The zero value is the default.
type Options struct {
	// Packing chooses between best-fit (default) and spread placement.
	Packing Packing
	// Scoring chooses the scoring strategy of Score.
	Scoring Scoring
	// SearchBudget bounds how many candidate spans of the demanded width are
	// compared when choosing among admissible ones on large machines (0:
	// 512; negative is an error). Admissibility never depends on it.
	SearchBudget int
	// SpendGPULocalCPUs turns off the preference that keeps GPU-local CPUs
	// for GPU pods: by default, among admissible spans, a request without
	// GPUs prefers NUMA nodes with fewer free GPUs (after PCIe switch and
	// core preferences, before best fit), so CPU-only pods do not strand
	// GPUs.
	SpendGPULocalCPUs bool
	// Resources are extra resource kinds, composed after the built-in ones
	// (GPUs, other device classes, CPUs, memory).
	Resources []Resource
}

// State is the allocation state of one machine: free CPUs, free devices per
// class, free memory, the live allocations by ID with their spans, and the
// NUMA node types.
//
// All methods are safe for concurrent use: Fit, Score, FitWithout, Get,
// Live, Snapshot, Clone and the other readers take a read lock and run in
// parallel; Allocate, Release, Resize, Claim, Restore, ReplaceMachine and
// SetDeviceHealth take the write lock. No method holds a lock for
// unbounded work: each one's doc comment states its bound.
type State struct {
	mu       sync.RWMutex
	m        *topology.Machine
	n        int
	opts     Options
	res      []Resource
	pen      []Penalizer
	bulk     []BulkReader
	returns  bool // every resource is a Returner
	cpu      *CPUs
	gpu      *Devices
	mem      *Memory
	classes  map[string]*Devices
	ids      map[string]int32
	recs     []Allocation
	freeRecs []int32
	single   [numa.MaxNodes]int32 // live one-node spans using the node
	multi    [numa.MaxNodes]int32 // live multi-node spans using the node
	// singleMask and sharedMask are the node types, kept in step with
	// single and multi by count.
	singleMask, sharedMask numa.Mask
	allPool                [1]numa.Mask
	setMasks               []numa.Mask
	dist                   numa.Distances
	maxSet                 int // nodes in the largest NUMA set
}

// New returns the state of machine m with everything free. A nil m is
// refused with an error wrapping [ErrNoMachine]; invalid options (a
// negative SearchBudget, a nil resource, a resource without a kind or of a
// kind the state already has) with an error wrapping [ErrInvalidOptions].
// It takes time and memory linear in the machine's NUMA nodes, CPUs,
// devices and NVLinks (plus a sort of the devices and links).
func New(m *topology.Machine, opts Options) (*State, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: allocator.New needs a *topology.Machine, got nil", ErrNoMachine)
	}
	if opts.SearchBudget < 0 {
		return nil, fmt.Errorf("%w: SearchBudget %d is negative (0 means the default, 512)", ErrInvalidOptions, opts.SearchBudget)
	}
	s := &State{m: m, n: m.NumNodes(), opts: opts, ids: map[string]int32{},
		classes: map[string]*Devices{}, setMasks: m.NUMASets(), dist: m.Distances(),
		allPool: [1]numa.Mask{m.AllNodes()}}
	if s.opts.SearchBudget == 0 {
		s.opts.SearchBudget = 512
	}
	for _, set := range s.setMasks {
		s.maxSet = max(s.maxSet, set.Count())
	}
	s.gpu = newGPUs(m)
	s.res = append(s.res, s.gpu)
	var classes []string
	for _, d := range m.Devices() {
		if !slices.Contains(classes, d.Class) {
			classes = append(classes, d.Class)
		}
	}
	sort.Strings(classes)
	for _, c := range classes {
		d := newDeviceClass(m, c)
		s.classes[c] = d
		s.res = append(s.res, d)
	}
	s.cpu = newCPUs(m)
	s.mem = newMemory(m)
	s.res = append(s.res, s.cpu, s.mem)
	for i, r := range opts.Resources {
		if r == nil {
			return nil, fmt.Errorf("%w: Resources[%d] is nil", ErrInvalidOptions, i)
		}
		kind := r.Kind()
		if kind == "" {
			return nil, fmt.Errorf("%w: Resources[%d] has no kind", ErrInvalidOptions, i)
		}
		for _, have := range s.res {
			if have.Kind() == kind {
				return nil, fmt.Errorf("%w: Resources[%d] is of kind %q, which the state already has", ErrInvalidOptions, i, kind)
			}
		}
		s.res = append(s.res, r)
	}
	s.initPen()
	return s, nil
}

// MustNew is New for machines and options known to be valid (presets,
// tests, examples): it panics when New returns an error.
func MustNew(m *topology.Machine, opts Options) *State {
	s, err := New(m, opts)
	if err != nil {
		panic(err)
	}
	return s
}

func (s *State) initPen() {
	s.pen = make([]Penalizer, len(s.res))
	s.bulk = make([]BulkReader, len(s.res))
	s.returns = true
	for j, r := range s.res {
		if _, ok := r.(Returner); !ok {
			s.returns = false
		}
		if p, ok := r.(Penalizer); ok {
			s.pen[j] = p
		}
		if b, ok := r.(BulkReader); ok {
			s.bulk[j] = b
		}
	}
}

// readFree fills dst with resource j's free amount on every node.
func (s *State) readFree(j int, r *Request, dst []int64) {
	if b := s.bulk[j]; b != nil {
		b.FreeInto(r, dst)
		return
	}
	for i := range dst {
		dst[i] = s.res[j].Free(r, i)
	}
}

// readCapacity fills dst with resource j's capacity on every node.
func (s *State) readCapacity(j int, r *Request, dst []int64) {
	if b := s.bulk[j]; b != nil {
		b.CapacityInto(r, dst)
		return
	}
	for i := range dst {
		dst[i] = s.res[j].Capacity(r, i)
	}
}

// Machine returns the machine (nil for a nil state).
func (s *State) Machine() *topology.Machine {
	if s == nil {
		return nil
	}
	return s.m
}

// scratch holds the per-decision working memory, reused between calls.
type scratch struct {
	c     cover
	kinds [maxKinds]int // resource index of each demanded kind
	un    [maxKinds]int64
	raw   [maxKinds][numa.MaxNodes]int64 // unclipped free amounts
	amt   [maxKinds][numa.MaxNodes]int64
	best  [maxKinds][numa.MaxNodes]int64
	d     dfs
	ch    chooser
	seed  numa.Mask // the last cover anyCover found
	// without, when set, makes decide see the state as if these live
	// allocations were released (FitWithout, Resize).
	without []*Allocation
	victims []*Allocation // storage for without
}

// plan is a decision: the span and, when chosen, the amounts in sc.best.
type plan struct {
	span      numa.Mask
	width     int
	widthCap  int
	widthFree int
	inSet     bool
}

// Fit reports whether Allocate would accept r now, without changing
// anything; the error is the one Allocate would return. It allocates
// nothing on success. A nil r or a nil state is an error.
//
// Bound: one decision (see the engine's doc: O(k·n) reads, the exhaustive
// subset search on at most 16 NUMA nodes, at most searchSteps steps of the
// class search beyond), under the read lock.
func (s *State) Fit(r *Request) error {
	if err := s.check(r); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if r.ID != "" {
		if _, ok := s.ids[r.ID]; ok {
			return fmt.Errorf("%w: %s", ErrDuplicateID, quote.Short(r.ID))
		}
	}
	sc := s.getScratch()
	_, err := s.decide(r, sc, false)
	s.putScratch(sc)
	return err
}

// scratches holds the working memory of decisions (about 80 KB each),
// shared by every State so that a cluster of thousands of machine states
// stays small.
var scratches = sync.Pool{New: func() any { return new(scratch) }}

// getScratch returns a scratch for one decision.
func (s *State) getScratch() *scratch { return scratches.Get().(*scratch) }

func (s *State) putScratch(sc *scratch) {
	sc.without, sc.ch.s, sc.ch.r, sc.ch.sc, sc.d.ch, sc.d.cs.c, sc.d.c = nil, nil, nil, nil, nil, nil, nil
	clear(sc.victims)
	scratches.Put(sc)
}

// Allocate places r and returns what it received, or an error that says why
// not (a *PlacementError for topology and amount refusals, wrapping
// [ErrInvalidRequest], [ErrDuplicateID] otherwise). On error nothing
// changes. The allocation shares storage with the state: treat it as
// read-only. A nil r or a nil state is an error.
//
// Bound: Fit's decision plus the choice among admissible spans, at most
// Options.SearchBudget candidates and as many local-search swaps, each
// O(k·n) plus the resources' penalties (O(devices on the span's nodes)),
// and taking the units, under the write lock.
func (s *State) Allocate(r *Request) (Allocation, error) {
	if err := s.check(r); err != nil {
		return Allocation{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.ID == "" {
		return Allocation{}, invalidRequest(r, "id", "is empty")
	}
	if _, ok := s.ids[r.ID]; ok {
		return Allocation{}, fmt.Errorf("%w: %s", ErrDuplicateID, quote.Short(r.ID))
	}
	sc := s.getScratch()
	defer s.putScratch(sc)
	p, err := s.decide(r, sc, true)
	if err != nil {
		return Allocation{}, err
	}
	// Build the allocation in its record slot: a local passed to the
	// resources' Take would escape to the heap.
	idx := s.slot()
	a := &s.recs[idx]
	*a = Allocation{ID: r.ID, Policy: r.Policy, Exclusive: r.Exclusive, FullPCPUs: r.FullPCPUs,
		DenseSpan: p.span, machine: s.m}
	for k := 0; k < sc.c.k; k++ {
		s.res[sc.kinds[k]].Take(r, sc.best[k][:s.n], sc.un[k], a)
	}
	s.commit(idx)
	return *a, nil
}

// slot returns the index of a free record.
func (s *State) slot() int32 {
	if n := len(s.freeRecs); n > 0 {
		idx := s.freeRecs[n-1]
		s.freeRecs = s.freeRecs[:n-1]
		return idx
	}
	s.recs = append(s.recs, Allocation{})
	return int32(len(s.recs) - 1)
}

// commit makes the record at idx live.
func (s *State) commit(idx int32) {
	a := &s.recs[idx]
	s.ids[a.ID] = idx
	s.count(a.DenseSpan, 1)
}

func (s *State) count(span numa.Mask, delta int32) {
	cnt := &s.single
	if span.Count() > 1 {
		cnt = &s.multi
	}
	for i := range span.All() {
		cnt[i] += delta
	}
	s.singleMask, s.sharedMask = s.types()
}

// Release returns everything the allocation with the given ID holds. An ID
// that is not live returns [ErrUnknownID] and changes nothing, so a retried
// release is harmless. It takes time linear in what the allocation holds.
func (s *State) Release(id string) error {
	if s == nil {
		return errNilState
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.ids[id]; !ok {
		return fmt.Errorf("%w: %s", ErrUnknownID, quote.Short(id))
	}
	s.releaseLocked(id)
	return nil
}

// Get returns the live allocation with the given ID (read-only), in O(1).
func (s *State) Get(id string) (Allocation, bool) {
	if s == nil {
		return Allocation{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, ok := s.ids[id]
	if !ok {
		return Allocation{}, false
	}
	return s.recs[idx], true
}

// Live returns the live allocations ordered by ID (read-only), in
// O(l log l) for l live allocations.
func (s *State) Live() []Allocation {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.liveLocked()
}

func (s *State) liveLocked() []Allocation {
	out := make([]Allocation, 0, len(s.ids))
	for _, idx := range s.ids {
		out = append(out, s.recs[idx])
	}
	slices.SortFunc(out, func(a, b Allocation) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// NodeTypes returns the single and shared NUMA nodes (masks of dense
// indices of the state's machine), in O(1).
func (s *State) NodeTypes() (single, shared numa.Mask) {
	if s == nil {
		return 0, 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.singleMask, s.sharedMask
}

func (s *State) types() (single, shared numa.Mask) {
	for i := 0; i < s.n; i++ {
		switch {
		case s.multi[i] > 0:
			shared = shared.With(i)
		case s.single[i] > 0:
			single = single.With(i)
		}
	}
	return single, shared
}

// FreeCPUs returns the free allocatable CPUs, in O(CPUs).
func (s *State) FreeCPUs() numa.CPUSet {
	if s == nil {
		return numa.CPUSet{}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cpu.FreeCPUs()
}

// Kinds returns the kinds of the composed resources in the engine's order
// (such as "gpu", "rdma", "cpu", "memory"), in O(kinds).
func (s *State) Kinds() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	kinds := make([]string, len(s.res))
	for j, r := range s.res {
		kinds[j] = r.Kind()
	}
	return kinds
}

// NodeFree returns, for the node at dense index i, the free amount of each
// resource kind in plain units (CPUs, devices, MiB), by kind; nil when i
// is not a node's index (or the state is nil).
func (s *State) NodeFree(i int) map[string]int64 {
	if s == nil || i < 0 || i >= s.n {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var plain Request
	out := make(map[string]int64, len(s.res))
	for _, res := range s.res {
		out[res.Kind()] = res.Free(&plain, i)
	}
	return out
}

// classList names the machine's device classes, for messages: "its device
// classes: gpu, rdma; names are case-sensitive".
func (s *State) classList() string {
	return "its device classes: " + strings.Join(s.classNames(), ", ") + "; names are case-sensitive"
}

// classNames returns "gpu" and the machine's other device classes, sorted.
func (s *State) classNames() []string {
	return append([]string{GPUClass}, slices.Sorted(maps.Keys(s.classes))...)
}

// didYouMean returns `did you mean "rdma"? ` when the machine has a class
// that differs from class only in case, else "".
func (s *State) didYouMean(class string) string {
	for _, c := range s.classNames() {
		if c != class && strings.EqualFold(c, class) {
			return fmt.Sprintf("did you mean %q? ", c)
		}
	}
	return ""
}

// errNilState is what the methods of a nil *State return.
var errNilState = fmt.Errorf("%w: the *allocator.State is nil", ErrNoMachine)

// check refuses a nil state or a nil request.
func (s *State) check(r *Request) error {
	if s == nil {
		return errNilState
	}
	if r == nil {
		return &RequestError{Reason: "the request is nil"}
	}
	return nil
}
