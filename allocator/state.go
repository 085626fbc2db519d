package allocator

import (
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/allocator/internal/scratch"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// Packing chooses the direction of the best-fit criterion (the sixth) of
// the preference order among admissible spans that the package doc states.
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
	// GPUs prefers NUMA nodes with fewer free GPUs (the fifth criterion of
	// the preference order the package doc states), so CPU-only pods do
	// not strand GPUs.
	SpendGPULocalCPUs bool
	// Resources are extra resource kinds of the caller's own, composed after
	// the built-in ones (GPUs, other device classes, CPUs, memory):
	// requests ask for them in Request.Amounts, allocations hold them in
	// Allocation.Amounts. Each Resource holds the state of one machine, so
	// a state with Resources cannot move to another machine
	// (ReplaceMachine) and the options cannot be shared by the states of
	// several machines (the scheduler adapter refuses them): use
	// NewResources there.
	Resources []Resource
	// NewResources, when set, makes the extra resource kinds of a machine:
	// New calls it once per state (after Resources' kinds), and so does
	// ReplaceMachine for the new machine, so options with NewResources can
	// be shared by the states of many machines (adapters/scheduler's
	// Config.Allocator). An error it returns fails New.
	NewResources func(m *topology.Machine) ([]Resource, error)
}

// State is the allocation state of one machine: free CPUs, free devices per
// class, free memory, the live allocations by ID with their spans, and the
// NUMA node types.
//
// All methods are safe for concurrent use: Fit, Score, FitWithout, Get,
// Live, Snapshot, Clone and the other readers take a read lock and run in
// parallel; Allocate, Release, Resize, Claim, Restore, ReplaceMachine and
// SetDeviceHealth take the write lock; Machine reads an atomic pointer.
// Each call sees one machine, the one before or after a concurrent
// ReplaceMachine (see there). No method holds a lock for unbounded work:
// each one's doc comment states its bound.
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
	ids      idTable
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
	maxSet                 int                     // nodes in the largest NUMA set
	setBit                 [numa.MaxNodes]uint64   // by node: 1 << its NUMA set's index
	setOf                  [numa.MaxNodes]uint8    // by node: its NUMA set's index
	distTab                []int32                 // distTab[i*n+j]: the SLIT distance of nodes i and j (as Distances.Sum reads the pair)
	distBy                 *distClasses            // distTab by value
	keep                   int                     // the resource whose free units rank.stranded counts (-1: none)
	spare                  scratch.Slot[searcher]  // the state's searcher, when no decision holds it (see searcher)
	builtin                int                     // res[builtin:] are the kinds of the caller's own
	gen                    uint64                  // counts the write locks taken (see lockWrite)
	refused                atomic.Pointer[refusal] // Fit's last refusal without a search (see refusal)
	// machine is m for [State.Machine], which reads it without the lock:
	// stored wherever m is set, under the write lock (or before the
	// state is shared). Last, so that the fields a decision reads keep
	// their places.
	machine atomic.Pointer[topology.Machine]
}

// MaxThreadsPerCore is the most threads (SMT siblings) one core of a
// machine may have for [New]: the CPU resource counts a core's
// allocatable threads in an int8 and keeps one plane of free threads per
// thread of a core (tpc+2 words per 64 cores of a node in its working
// memory); 64 is far above what hardware has (SMT8).
const MaxThreadsPerCore = 64

// New returns the state of machine m with everything free. A nil m is
// refused with an error wrapping [ErrNoMachine], a machine with a core of
// more than [MaxThreadsPerCore] threads with one wrapping
// [ErrTooManyThreads]; invalid options (a
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
	if tpc := m.ThreadsPerCore(); tpc > MaxThreadsPerCore {
		return nil, fmt.Errorf("%w: machine %s has a core of %d threads; the allocator takes at most %d threads per core (SMT8 is the most hardware has)",
			ErrTooManyThreads, quote.Short(m.Name()), tpc, MaxThreadsPerCore)
	}
	s := &State{m: m, n: m.NumNodes(), opts: opts, ids: newIDTable(),
		classes: map[string]*Devices{}, setMasks: m.NUMASets(), dist: m.Distances(),
		allPool: [1]numa.Mask{m.AllNodes()}}
	s.machine.Store(m)
	if s.opts.SearchBudget == 0 {
		s.opts.SearchBudget = 512
	}
	s.initSets()
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
	s.linkDevices(nil)
	s.cpu = newCPUs(m)
	s.mem = newMemory(m)
	s.res = append(s.res, s.cpu, s.mem)
	s.builtin = len(s.res)
	for i, r := range opts.Resources {
		if err := s.addResource(fmt.Sprintf("Resources[%d]", i), r); err != nil {
			return nil, err
		}
	}
	if opts.NewResources != nil {
		extra, err := opts.NewResources(m)
		if err != nil {
			return nil, fmt.Errorf("%w: NewResources for machine %s: %w", ErrInvalidOptions, quote.Short(m.Name()), err)
		}
		for i, r := range extra {
			if err := s.addResource(fmt.Sprintf("NewResources' resource %d", i), r); err != nil {
				return nil, err
			}
		}
	}
	s.initPen()
	return s, nil
}

// addResource composes r, a kind of the caller's own, or says why not.
func (s *State) addResource(name string, r Resource) error {
	if r == nil {
		return fmt.Errorf("%w: %s is nil", ErrInvalidOptions, name)
	}
	kind := r.Kind()
	if kind == "" {
		return fmt.Errorf("%w: %s has no kind", ErrInvalidOptions, name)
	}
	if _, ok := builtinField(kind); ok || s.classes[kind] != nil {
		return fmt.Errorf("%w: %s is of kind %q, which the state already has", ErrInvalidOptions, name, kind)
	}
	for _, have := range s.res {
		if have.Kind() == kind {
			return fmt.Errorf("%w: %s is of kind %q, which the state already has", ErrInvalidOptions, name, kind)
		}
	}
	s.res = append(s.res, r)
	return nil
}

// customKind reports whether kind is one of the state's kinds of the
// caller's own.
func (s *State) customKind(kind string) bool {
	for _, r := range s.res[s.builtin:] {
		if r.Kind() == kind {
			return true
		}
	}
	return false
}

// customKinds names the state's kinds of the caller's own, for messages.
func (s *State) customKinds() string {
	if len(s.res) == s.builtin {
		return "the state has no kinds of the caller's own"
	}
	names := make([]string, 0, len(s.res)-s.builtin)
	for _, r := range s.res[s.builtin:] {
		names = append(names, r.Kind())
	}
	return "its kinds of the caller's own: " + strings.Join(names, ", ")
}

// checkAmounts refuses a request that asks for a kind the state lacks.
func (s *State) checkAmounts(r *Request) error {
	for kind := range r.Amounts {
		if !s.customKind(kind) {
			what := ""
			if s.classes[kind] != nil {
				what = "; devices of a class are asked for in Devices"
			}
			return invalidRequest(r, "amounts["+quote.Bare(kind)+"]", "the state has no resource of kind %s (%s%s)", quote.Short(kind), s.customKinds(), what)
		}
	}
	return nil
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

// initSets derives the NUMA set tables from the machine.
func (s *State) initSets() {
	s.maxSet = 0
	for _, set := range s.setMasks {
		s.maxSet = max(s.maxSet, set.Count())
	}
	s.distTab = make([]int32, s.n*s.n)
	for i := 0; i < s.n; i++ {
		s.setBit[i] = 1 << uint(s.m.SetOf(i))
		s.setOf[i] = uint8(s.m.SetOf(i))
		for j := 0; j < s.n; j++ {
			// The entry of the lower index's row, as numa.Distances.Sum
			// reads a pair: the table is symmetric even when the SLIT is not.
			s.distTab[i*s.n+j] = int32(s.dist.At(min(i, j), max(i, j)))
		}
	}
	s.distBy = newDistClasses(s.distTab, s.n)
}

// distRow returns the distances from node i to every node.
func (s *State) distRow(i int) []int32 { return s.distTab[i*s.n : (i+1)*s.n] }

func (s *State) initPen() {
	s.keep = -1
	for j, r := range s.res {
		if r.Kind() == GPUClass && !s.opts.SpendGPULocalCPUs {
			s.keep = j
		}
	}
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

// freeOf returns resource j's free units on every node: a view of the
// resource's counters (read-only, under the lock), or buf (one entry per
// node) filled node by node.
func (s *State) freeOf(j int, r *Request, buf []int64) []int64 {
	if b := s.bulk[j]; b != nil && !general.On {
		return b.FreeView(r)
	}
	for i := range buf {
		buf[i] = s.res[j].Free(r, i)
	}
	return buf
}

// builtinKinds is the one table of the built-in kinds that a request's
// own fields ask for, in the engine's kind order (the order of fieldKinds
// and fieldFree): the resource's kind and the Request field.
var builtinKinds = [3]struct{ kind, field string }{
	{GPUClass, "GPUs"}, {"cpu", "CPUs"}, {"memory", "MemoryMiB"},
}

// builtinField returns the Request field that asks for kind, and whether
// kind is a built-in one (builtinKinds).
func builtinField(kind string) (string, bool) {
	for _, b := range builtinKinds {
		if b.kind == kind {
			return b.field, true
		}
	}
	return "", false
}

// fieldKinds returns where the kinds of builtinKinds sit in s.res, in
// their order, and r's demands of them. With fieldDemand and fieldFree it
// is the one statement of the layout of s.res: the GPUs first, then the
// device classes (asked for in Devices, sorted by name), then the CPUs and
// memory, then the kinds of the caller's own (res[builtin:], asked for in
// Amounts).
func (s *State) fieldKinds(r *Request) (idx [3]int, demand [3]int64) {
	gpus, cpus, mem := s.fieldDemand(r)
	return s.fieldIndex(), [3]int64{gpus, cpus, mem}
}

// fieldIndex returns where the kinds of builtinKinds sit in s.res.
func (s *State) fieldIndex() [3]int {
	return [3]int{0, s.builtin - 2, s.builtin - 1}
}

// fieldDemand returns r's demands of the kinds of builtinKinds, in their
// order (as three values, which the hot paths keep in registers).
func (s *State) fieldDemand(r *Request) (gpus, cpus, mem int64) {
	return s.gpu.Demand(r), s.cpu.Demand(r), s.mem.Demand(r)
}

// fieldFree returns the free units on every node of the kinds of
// builtinKinds for r, in their order: views of the resources' own
// counters (whole cores for a FullPCPUs request), as freeOf reads them
// through the Resource interface (TestLoadFreeShortcut keeps them equal).
func (s *State) fieldFree(r *Request) (gpus, cpus, mem []int64) {
	return s.gpu.nodeFree, s.cpu.FreeView(r), s.mem.free
}

// builtinFree returns the free units on every node of built-in resource j
// (the GPUs, the CPUs or memory) for r (fieldFree's view), and its free
// units of unknown NUMA node when unplaced is set (else 0; only GPUs have
// any).
func (s *State) builtinFree(j int, r *Request, unplaced bool) ([]int64, int64) {
	gpus, cpus, mem := s.fieldFree(r)
	switch idx := s.fieldIndex(); j {
	case idx[0]:
		if unplaced {
			return gpus, int64(s.gpu.unFree)
		}
		return gpus, 0
	case idx[1]:
		return cpus, 0
	}
	return mem, 0
}

// capacityOf returns resource j's capacity on every node, as freeOf does
// its free units.
func (s *State) capacityOf(j int, r *Request, buf []int64) []int64 {
	if b := s.bulk[j]; b != nil && !general.On {
		return b.CapacityView(r)
	}
	for i := range buf {
		buf[i] = s.res[j].Capacity(r, i)
	}
	return buf
}

// Machine returns the state's machine (nil for a nil state), in one
// atomic load, without the lock. After a [State.ReplaceMachine] it
// returns the new machine; a caller that reads the machine and then other
// things of the state by further calls may see the machine change between
// them (see [State.ReplaceMachine] for what one call guarantees and how to
// read several things of one machine).
func (s *State) Machine() *topology.Machine {
	if s == nil {
		return nil
	}
	return s.machine.Load()
}

// Fit reports whether Allocate would accept r now, without changing
// anything; the error is the one Allocate would return. It allocates
// nothing on success. A nil r or a nil state is an error.
//
// The common answers cost O(k·n) reads of the free counters and no
// search: an admission on one node, and the refusals of a request of
// built-in amounts that the whole machine's free units do not cover, or
// (SingleNUMANode) that no node covers alone. Such a refusal's error
// builds its explanation only when asked for: Error, errors.As with a
// *[PlacementError] target, and errors.Is with [ErrNeverFits] run the
// decision then (errors.Is with the category does not), under the read
// lock; asked after the state changed, it says that only the category is
// known. Fit allocates nothing when it refuses the same request again on
// an unchanged state (it keeps its last such refusal), and one small
// record otherwise. Use errors.As, not a type assertion, to read a
// refusal's *PlacementError.
//
// Bound: one decision (see the package doc: O(k·n) reads, the exhaustive
// subset search on at most 16 NUMA nodes, at most 32,768 steps of the
// search over node classes beyond, then [ErrSearchLimit]), under the read
// lock.
func (s *State) Fit(r *Request) error {
	if err := s.check(r); err != nil {
		return err
	}
	s.mu.RLock()
	if r.ID != "" {
		if s.ids.has(r.ID) {
			s.mu.RUnlock()
			return fmt.Errorf("%w: %s", ErrDuplicateID, quote.Short(r.ID))
		}
	}
	if !general.On { // the common answers, without a searcher
		if s.fitsOneNode(r) {
			s.mu.RUnlock()
			return nil
		}
		if cat := s.quickRefusal(r); cat != nil {
			e := s.refuseQuick(r, s.gen, cat)
			s.mu.RUnlock()
			return e
		}
	}
	sr := s.searcher(r, nil)
	err := sr.decide(false)
	sr.done()
	s.mu.RUnlock()
	return err
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
	s.lockWrite()
	defer s.mu.Unlock()
	if r.ID == "" {
		return Allocation{}, invalidRequest(r, "id", "is empty")
	}
	pos, hash, dup := s.ids.probe(r.ID)
	if dup {
		s.unchanged()
		return Allocation{}, fmt.Errorf("%w: %s", ErrDuplicateID, quote.Short(r.ID))
	}
	sr := s.searcher(r, nil)
	defer sr.done()
	if err := sr.decide(true); err != nil {
		s.unchanged()
		return Allocation{}, err
	}
	// Build the allocation in its record slot: a local passed to the
	// resources' Take would escape to the heap.
	idx := s.slot()
	a := &s.recs[idx]
	*a = Allocation{ID: r.ID, Policy: r.Policy, Exclusive: r.Exclusive, FullPCPUs: r.FullPCPUs,
		DenseSpan: sr.plan.span, machine: s.m}
	for j := 0; j < sr.k; j++ {
		s.res[sr.kinds[j]].Take(r, sr.take[j][:s.n], sr.unplaced[j], a)
	}
	s.ids.insertAt(pos, hash, r.ID, idx)
	s.count(a.DenseSpan, 1)
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
	s.ids.set(a.ID, idx)
	s.count(a.DenseSpan, 1)
}

func (s *State) count(span numa.Mask, delta int32) {
	cnt := &s.single
	if span.Count() > 1 {
		cnt = &s.multi
	}
	for w := uint64(span); w != 0; w &= w - 1 {
		i := bits.TrailingZeros64(w)
		cnt[i] += delta
		bit := numa.Mask(1) << uint(i)
		s.singleMask &^= bit
		s.sharedMask &^= bit
		switch {
		case s.multi[i] > 0:
			s.sharedMask |= bit
		case s.single[i] > 0:
			s.singleMask |= bit
		}
	}
}

// Release returns everything the allocation with the given ID holds. An ID
// that is not live returns [ErrUnknownID] and changes nothing, so a retried
// release is harmless. It takes time linear in what the allocation holds.
func (s *State) Release(id string) error {
	if s == nil {
		return errNilState
	}
	s.lockWrite()
	defer s.mu.Unlock()
	pos, _, ok := s.ids.probe(id)
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownID, quote.Short(id))
	}
	s.releaseAt(pos)
	return nil
}

// Get returns the live allocation with the given ID (read-only), in O(1).
func (s *State) Get(id string) (Allocation, bool) {
	if s == nil {
		return Allocation{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	idx, ok := s.ids.get(id)
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
	out := make([]Allocation, 0, s.ids.len())
	for _, idx := range s.ids.all() {
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
// is not a node's index of the state's machine when NodeFree reads it
// (under the read lock, so an index of a machine that ReplaceMachine has
// just replaced with a smaller one is nil, never read), or the state is
// nil.
func (s *State) NodeFree(i int) map[string]int64 {
	if s == nil || i < 0 {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i >= s.n {
		return nil
	}
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
// lockWrite takes the write lock and counts it in gen, so that a refusal
// explained later knows whether the state may have changed since
// (see [refusal]): every write lock may change the state.
func (s *State) lockWrite() {
	s.mu.Lock()
	s.gen++
}

// unchanged takes back lockWrite's count for a write that changed
// nothing (a refused Allocate): no reader saw the count, the write lock
// being held.
func (s *State) unchanged() { s.gen-- }

func (s *State) check(r *Request) error {
	if s == nil {
		return errNilState
	}
	if r == nil {
		return &RequestError{Reason: "the request is nil"}
	}
	return nil
}
