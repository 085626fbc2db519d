package kubelet

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// ErrDeviceRequest is the category of preferred-allocation requests that
// cannot be answered: unknown or repeated devices, or a size that does not
// fit the lists.
var ErrDeviceRequest = errors.New("invalid preferred allocation request")

// errNilPlugin is the error of a nil *PreferredAllocator's methods.
var errNilPlugin = fmt.Errorf("%w: a preferred-allocation helper without a machine (nil)", ErrDeviceRequest)

// PreferredAllocator answers the kubelet device plugin API's
// GetPreferredAllocation for the GPUs of one machine, with the project's
// one device chooser (allocator/devchoice), so that it prefers what the
// allocator prefers. It is safe for concurrent use, and immutable but for
// its working memory; every call runs the chooser (no answer is kept
// between calls). Its memory is linear in the machine's GPUs and NVLinks.
type PreferredAllocator struct {
	m      *topology.Machine
	nodes  numa.Mask // every NUMA node of m
	x      *devchoice.Index
	gpuIDs []int // by dense index
	// byID[id] is the dense index of GPU id, or -1, for IDs below
	// len(byID), which is at most 4 per GPU plus 64 (linear memory); larger
	// IDs are found by binary search.
	byID   []int32
	byUUID map[string]int
	// decimalUUID: some UUID is written in decimal digits only, so decimal
	// strings are looked up as UUIDs first (as every string is).
	decimalUUID bool
	// Working memory: own serves one call at a time, while busy is set
	// (a flag, cheaper than the pool and than swapping a pointer, which
	// takes a write barrier while the GC runs); the pool serves concurrent
	// calls.
	own  *dpScratch
	busy atomic.Bool
	pool sync.Pool
}

// NewPreferredAllocator returns the preferred-allocation helper of machine
// m (for a nil m, one without GPUs, whose every request is refused with
// [ErrDeviceRequest]).
func NewPreferredAllocator(m *topology.Machine) *PreferredAllocator {
	if m == nil {
		m = emptyMachine()
	}
	x, _ := devchoice.NewIndex(m) // never fails on a machine
	p := &PreferredAllocator{m: m, nodes: m.AllNodes(), x: x, byUUID: map[string]int{}}
	gpus := m.GPUs()
	p.byID = make([]int32, min(4*len(gpus)+64, maxID(gpus)+1))
	for i := range p.byID {
		p.byID[i] = -1
	}
	for i, g := range gpus {
		p.gpuIDs = append(p.gpuIDs, g.ID)
		if g.ID < len(p.byID) {
			p.byID[g.ID] = int32(i)
		}
		if g.UUID != "" {
			p.byUUID[g.UUID] = i
			p.decimalUUID = p.decimalUUID || isDecimal(g.UUID)
		}
	}
	p.pool.New = func() any { return p.newScratch() }
	p.own = p.newScratch()
	return p
}

// emptyMachine is a machine of one NUMA node without CPUs or devices.
func emptyMachine() *topology.Machine {
	m, _ := topology.NewBuilder("empty").AddNode(topology.Node{ID: 0, CPUs: numa.CPUSet{}}).Build()
	return m
}

// maxID returns the largest GPU ID (-1 without GPUs).
func maxID(gpus []topology.GPU) int {
	id := -1
	for _, g := range gpus {
		id = max(id, g.ID)
	}
	return id
}

func isDecimal(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// lookup returns the dense index of the GPU named by s: its UUID, or its
// index on the machine in any spelling allocator.CanonicalDeviceID accepts
// ("3", "+3", "03" and "0000000003" are GPU 3), so the plugin, the node's
// health and the allocator agree on what names a GPU.
func (p *PreferredAllocator) lookup(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	if c := s[0]; c < '0' || c > '9' || p.decimalUUID {
		if i, ok := p.byUUID[s]; ok {
			return i, true
		}
	}
	id, ok := allocator.ParseGPUID(s)
	if !ok {
		return 0, false
	}
	if id < len(p.byID) {
		i := p.byID[id]
		return int(i), i >= 0
	}
	return p.x.GPU(id)
}

// Preference is a preferred allocation and what it achieves.
type Preference struct {
	// Devices are the chosen device IDs, as the available list spells them,
	// in ascending GPU index.
	Devices []string
	// GPUs are the chosen GPUs' indices, ascending.
	GPUs []int
	// NUMANodes are the IDs of the chosen GPUs' NUMA nodes, ascending.
	NUMANodes []numa.NodeID
	// UnknownNUMA counts the chosen GPUs whose NUMA node is unknown.
	UnknownNUMA int
	// Switches counts the PCIe switches the chosen GPUs sit under (the GPUs
	// of one NUMA node whose switch is not described count as one switch).
	Switches int
	// NVLinks is the number of NVLink links among the chosen GPUs (the sum
	// over pairs).
	NVLinks int
}

// GetPreferredAllocation returns size device IDs out of available that
// include every ID of mustInclude and sit as close together as the machine
// allows, as the kubelet's device plugin API asks (IDs are GPU indices as
// decimal strings, or GPU UUIDs; the answer spells each as available does,
// in ascending GPU index). See [PreferredAllocator.Prefer] for what is preferred.
// It allocates the answer only, and most answers not even that: they are
// cut from chunks of 64 strings (each answer with a capacity of its own,
// so that appending to one copies it).
func (p *PreferredAllocator) GetPreferredAllocation(available, mustInclude []string, size int) ([]string, error) {
	if p == nil {
		return nil, errNilPlugin
	}
	sc := p.scratch()
	if len(sc.free) == 1 { // at most 64 GPUs: the sets are words
		// check, with the sets read as words
		err := p.readWord(sc, available, mustInclude)
		if err == nil {
			err = checkSize(size, available, mustInclude)
		}
		if err != nil {
			p.release(sc)
			return nil, err
		}
		// The chooser's answer for one class as words, on every node.
		chosen, err := sc.ch.ChooseWord(0, size, sc.free[0], sc.must[0], p.nodes, true)
		if err != nil { // cannot happen after the checks
			p.release(sc)
			return nil, fmt.Errorf("%w: %w", ErrDeviceRequest, err)
		}
		out := sc.answer(size)
		k := 0
		for w := chosen; w != 0 && k < len(out); w &= w - 1 {
			out[k] = available[sc.pos[bits.TrailingZeros64(w)]]
			k++
		}
		p.release(sc)
		return out, nil
	}
	defer p.release(sc)
	res, err := p.choose(sc, available, mustInclude, size)
	if err != nil {
		return nil, err
	}
	chosen := res.Devices(0)
	out := sc.answer(size)[:0]
	for wi, w := range chosen {
		for ; w != 0; w &= w - 1 {
			out = append(out, sc.str[wi<<6|bits.TrailingZeros64(w)])
		}
	}
	return out, nil
}

// Prefer is GetPreferredAllocation returning what the choice achieves.
//
// The choice is devchoice's ([devchoice.Chooser.Choose]) for size GPUs out
// of available including mustInclude, on every NUMA node and among the
// GPUs of unknown node too: the best under [devchoice.Rank], whose doc
// comment states the preference order, with that function's search,
// bounds and exactness. It is the same chooser the allocator uses for the
// devices of a span: on each NUMA node of an allocation, the allocator
// takes the GPUs this answers for that node's free GPUs and count
// (TestAllocatorAgreesWithPreferredAllocation checks it on random
// machines).
//
// Errors wrap [ErrDeviceRequest]: an ID that is no GPU of the machine, an
// ID listed twice (also as index and UUID), a mustInclude ID not in
// available, size < 1, size < len(mustInclude) or size > len(available).
func (p *PreferredAllocator) Prefer(available, mustInclude []string, size int) (Preference, error) {
	if p == nil {
		return Preference{}, errNilPlugin
	}
	sc := p.scratch()
	defer p.release(sc)
	res, err := p.choose(sc, available, mustInclude, size)
	if err != nil {
		return Preference{}, err
	}
	pref := Preference{Devices: make([]string, 0, size), GPUs: make([]int, 0, size),
		UnknownNUMA: res.UnknownNUMA, Switches: res.Rank.Switches, NVLinks: res.Rank.NVLinks}
	for i := range res.Devices(0).All() {
		pref.Devices = append(pref.Devices, sc.spelling(available, i))
		pref.GPUs = append(pref.GPUs, p.gpuIDs[i])
	}
	pref.NUMANodes = p.m.IDsOf(res.NUMA)
	return pref, nil
}

// dpScratch is the working memory of one call, reused through a pool.
type dpScratch struct {
	ch         *devchoice.Chooser
	free, must devchoice.Set
	str        []string // dense index -> the caller's spelling (more than 64 GPUs)
	// pos[i] is the position in available of GPU i's spelling (at most 64
	// GPUs: one word; positions, not strings, so that reading stores no
	// pointers).
	pos  [64]uint8
	want [1]devchoice.Want
	req  devchoice.Request
	// rest is what is left of the chunk answers are cut from (answer).
	rest []string
}

// answerChunk is the length of the chunks GetPreferredAllocation's answers
// are cut from.
const answerChunk = 64

// answer returns a slice of n strings for an answer, of capacity n: cut
// from the current chunk when it has n left, from a new chunk otherwise
// (made alone when n is more than half a chunk). Its strings are empty: no
// element of a chunk is cut twice.
func (sc *dpScratch) answer(n int) []string {
	if n > len(sc.rest) {
		if n*2 > answerChunk {
			return make([]string, n)
		}
		sc.rest = make([]string, answerChunk)
	}
	out := sc.rest[:n:n]
	sc.rest = sc.rest[n:]
	return out
}

// spelling returns the spelling of GPU i in available, as read into sc.
func (sc *dpScratch) spelling(available []string, i int) string {
	if len(sc.free) == 1 {
		return available[sc.pos[i]]
	}
	return sc.str[i]
}

// newScratch returns new working memory for one call.
func (p *PreferredAllocator) newScratch() *dpScratch {
	n := len(p.gpuIDs)
	sc := &dpScratch{ch: p.x.NewChooser(), free: devchoice.NewSet(n), must: devchoice.NewSet(n), str: make([]string, n)}
	sc.req.Wants = sc.want[:]
	return sc
}

// scratch returns working memory for one call.
func (p *PreferredAllocator) scratch() *dpScratch {
	if p.busy.CompareAndSwap(false, true) {
		return p.own
	}
	return p.pool.Get().(*dpScratch)
}

// release gives back what scratch returned.
func (p *PreferredAllocator) release(sc *dpScratch) {
	if sc == p.own {
		p.busy.Store(false)
		return
	}
	p.pool.Put(sc)
}

// read reads available and mustInclude into sc's sets and spellings.
func (p *PreferredAllocator) read(sc *dpScratch, available, mustInclude []string) error {
	if len(sc.free) == 1 {
		return p.readWord(sc, available, mustInclude)
	}
	sc.free.Clear()
	sc.must.Clear()
	for _, s := range available {
		i, ok := p.index(s)
		if !ok {
			return p.notGPU("available", s)
		}
		if sc.free.Has(i) {
			return p.twice(sc, available, i, s)
		}
		sc.free.Add(i)
		sc.str[i] = s
	}
	for _, s := range mustInclude {
		i, ok := p.index(s)
		if err := p.checkMust(ok, sc.free.Has(i), sc.must.Has(i), i, s); err != nil {
			return err
		}
		sc.must.Add(i)
	}
	return nil
}

// readWord is read for machines of at most 64 GPUs: the sets are one
// word, and each GPU's spelling is recorded by its position in available.
// IDs of one or two decimal digits are read inline through byID (when no
// UUID is decimal) in a loop without calls; at the first other ID, or a
// repeated GPU, readWordRest goes on from there.
func (p *PreferredAllocator) readWord(sc *dpScratch, available, mustInclude []string) error {
	var free uint64
	j := 0
	if !p.decimalUUID {
		free, j = readShortIDs(available, p.byID, &sc.pos)
	}
	return p.readWordRest(sc, available, j, free, mustInclude)
}

// readShortIDs reads the IDs of available from the first on while they
// are one or two decimal digits naming distinct GPUs in byID (a GPU ID
// below len(byID) -> its dense index, or -1), recording each GPU's
// position in pos; it returns the GPUs read and the position of the first
// ID left unread. It has no calls and few live values, so its loop stays
// in registers.
func readShortIDs(available []string, byID []int32, pos *[64]uint8) (free uint64, j int) {
	for ; j < len(available); j++ {
		s := available[j]
		n := len(s)
		if uint(n-1) >= 2 { // not "0" to "99"
			break
		}
		d := uint(s[0]) - '0'
		id := d
		if n == 2 {
			d1 := uint(s[1]) - '0'
			id = d*10 + d1
			d = max(d, d1) // both digits, or above 9
		}
		if d > 9 || id >= uint(len(byID)) {
			break
		}
		i := uint(byID[id])
		bit := uint64(1) << (i & 63)
		if i >= 64 || free&bit != 0 { // no such GPU (-1), or listed twice
			break
		}
		free |= bit
		pos[i] = uint8(j) // j < 64: the 65th ID repeats a GPU
	}
	return free, j
}

// readWordRest is readWord from available position j on, with the GPUs
// before it in free.
func (p *PreferredAllocator) readWordRest(sc *dpScratch, available []string, j int, free uint64, mustInclude []string) error {
	for ; j < len(available); j++ {
		s := available[j]
		i, ok := p.index(s)
		if !ok {
			return p.notGPU("available", s)
		}
		bit := uint64(1) << uint(i&63)
		if free&bit != 0 {
			return p.twice(sc, available, i, s)
		}
		free |= bit
		sc.pos[i] = uint8(j) // j < 64: the 65th ID repeats a GPU
	}
	var must uint64
	for _, s := range mustInclude {
		i, ok := p.index(s)
		bit := uint64(1) << uint(i&63)
		if err := p.checkMust(ok, free&bit != 0, must&bit != 0, i, s); err != nil {
			return err
		}
		must |= bit
	}
	sc.free[0], sc.must[0] = free, must
	return nil
}

// notGPU is the error for an ID of list that names no GPU.
func (p *PreferredAllocator) notGPU(list, s string) error {
	if list == "available" {
		return fmt.Errorf("%w: available device %s is not a GPU of this machine (give a GPU index or UUID)", ErrDeviceRequest, quote.Short(s))
	}
	return fmt.Errorf("%w: must-include device %s is not a GPU of this machine (give a GPU index or UUID)", ErrDeviceRequest, quote.Short(s))
}

// twice is the error for GPU i listed again as s in available.
func (p *PreferredAllocator) twice(sc *dpScratch, available []string, i int, s string) error {
	return fmt.Errorf("%w: available lists GPU %d twice (%s and %s)", ErrDeviceRequest, p.gpuIDs[i], quote.Short(sc.spelling(available, i)), quote.Short(s))
}

// checkMust checks must-include ID s (GPU i when found): found, available
// and not listed before.
func (p *PreferredAllocator) checkMust(found, available, again bool, i int, s string) error {
	switch {
	case !found:
		return p.notGPU("mustInclude", s)
	case !available:
		return fmt.Errorf("%w: must-include device %s is not among the available devices", ErrDeviceRequest, quote.Short(s))
	case again:
		return fmt.Errorf("%w: must-include lists GPU %d twice", ErrDeviceRequest, p.gpuIDs[i])
	}
	return nil
}

// index returns the dense index of the GPU named by s, as lookup does,
// with short decimal IDs read inline.
func (p *PreferredAllocator) index(s string) (int, bool) {
	if n := len(s); n > 0 && n <= 4 && !p.decimalUUID {
		id := 0
		for j := 0; j < n; j++ {
			d := s[j] - '0'
			if d > 9 {
				return p.lookup(s)
			}
			id = id*10 + int(d)
		}
		if id < len(p.byID) {
			i := p.byID[id]
			return int(i), i >= 0
		}
	}
	return p.lookup(s)
}

// check reads and checks the request into sc.
func (p *PreferredAllocator) check(sc *dpScratch, available, mustInclude []string, size int) error {
	if err := p.read(sc, available, mustInclude); err != nil {
		return err
	}
	return checkSize(size, available, mustInclude)
}

// checkSize checks the size of a request read without error.
func checkSize(size int, available, mustInclude []string) error {
	switch {
	case size < 1:
		return fmt.Errorf("%w: size %d: at least one device must be asked for", ErrDeviceRequest, size)
	case size < len(mustInclude):
		return fmt.Errorf("%w: size %d is below the %d must-include devices", ErrDeviceRequest, size, len(mustInclude))
	case size > len(available):
		return fmt.Errorf("%w: size %d is above the %d available devices", ErrDeviceRequest, size, len(available))
	}
	return nil
}

// choose reads and checks the request into sc and chooses.
func (p *PreferredAllocator) choose(sc *dpScratch, available, mustInclude []string, size int) (*devchoice.Result, error) {
	if err := p.check(sc, available, mustInclude, size); err != nil {
		return nil, err
	}
	sc.want[0] = devchoice.Want{Class: 0, Count: size, Free: sc.free, Must: sc.must}
	sc.req.Nodes, sc.req.Unknown = p.nodes, true
	res, err := sc.ch.Choose(&sc.req)
	if err != nil { // cannot happen after the checks above
		return nil, fmt.Errorf("%w: %w", ErrDeviceRequest, err)
	}
	return res, nil
}

// String describes the preference, such as
// "GPUs [0 1] on NUMA nodes [3], 1 PCIe switch, 12 NVLink links".
func (pref Preference) String() string {
	s := fmt.Sprintf("GPUs %v on NUMA nodes %v", pref.GPUs, pref.NUMANodes)
	if pref.UnknownNUMA > 0 {
		s += fmt.Sprintf(" and %d of unknown NUMA node", pref.UnknownNUMA)
	}
	sw := "switches"
	if pref.Switches == 1 {
		sw = "switch"
	}
	s += ", " + strconv.Itoa(pref.Switches) + " PCIe " + sw
	if pref.NVLinks > 0 {
		s += ", " + strconv.Itoa(pref.NVLinks) + " NVLink links"
	}
	return s
}
