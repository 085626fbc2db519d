package allocatortest

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
)

// claimProblem is one reason a claim is refused, with the sentinels an
// engine may answer for it (nil: any error).
type claimProblem struct {
	why       string
	sentinels []error
	node      numa.NodeID // for an unknown NUMA node: the node a *NodeError must name
	unknown   bool
}

// claimProblems lists every reason the model refuses to claim a.
func (md *Model) claimProblems(a allocator.Allocation) []claimProblem {
	var p []claimProblem
	conflict := func(format string, args ...any) {
		p = append(p, claimProblem{why: fmt.Sprintf(format, args...), sentinels: []error{allocator.ErrConflict}})
	}
	switch {
	case a.ID == "":
		p = append(p, claimProblem{why: "empty ID"}) // docs/design.md names no category
	case md.IsLive(a.ID):
		p = append(p, claimProblem{why: fmt.Sprintf("ID %q is live", a.ID), sentinels: []error{allocator.ErrDuplicateID}})
	}
	if !a.Policy.Valid() || !a.Exclusive.Valid() {
		p = append(p, claimProblem{why: "invalid policy or exclusivity",
			sentinels: []error{allocator.ErrConflict, allocator.ErrInvalidRequest}})
	}
	for cpu := range a.CPUs.All() {
		if why := md.cpuTrouble(cpu); why != "" {
			conflict("%s", why)
		}
		if k, ok := md.m.CPUCore(cpu); ok && a.FullPCPUs && (!md.wholeCore(k, md.cpuAllocatable) ||
			!md.m.CoreCPUs(k).IsSubsetOf(a.CPUs)) {
			conflict("fullPCPUs: CPU %d's core %s is not a whole allocatable core held whole", cpu, md.m.CoreCPUs(k))
		}
	}
	seen := map[devKey]bool{}
	check := func(k devKey) {
		_, known := md.devIdx[k.class][k.id]
		h, held := md.devHolder[k]
		switch {
		case !known:
			conflict("%s does not exist", k)
		case seen[k]:
			conflict("%s is named twice", k)
		case held:
			conflict("%s is held by %q", k, h)
		}
		seen[k] = true
	}
	for _, g := range a.GPUs {
		check(devKey{allocator.GPUClass, strconv.Itoa(g)})
	}
	for _, c := range slices.Sorted(maps.Keys(a.Devices)) {
		if _, ok := md.devIdx[c]; !ok || c == allocator.GPUClass {
			conflict("the machine has no %s devices (GPUs are named in the GPUs field)", c)
			continue
		}
		for _, id := range a.Devices[c] {
			check(devKey{c, id})
		}
	}
	used := slices.Clone(md.memUsed)
	nodes := map[numa.NodeID]bool{}
	for _, nm := range a.Memory {
		i, ok := md.m.NodeIndex(nm.Node)
		switch {
		case !ok:
			p = append(p, claimProblem{why: fmt.Sprintf("memory on NUMA node %d, which the machine does not have", nm.Node),
				sentinels: []error{allocator.ErrUnknownNode}, node: nm.Node, unknown: true})
			continue
		case nodes[nm.Node]:
			conflict("memory on NUMA node %d is listed twice", nm.Node)
		case nm.MiB < 0:
			conflict("negative memory (%d MiB) on NUMA node %d", nm.MiB, nm.Node)
		}
		nodes[nm.Node] = true
		used[i] += max(nm.MiB, 0)
		if have := md.m.PodMemoryMiB(i); used[i] > have {
			conflict("%d MiB on NUMA node %d, which has %d MiB of which %d are held", nm.MiB, nm.Node, have, md.memUsed[i])
		}
	}
	return p
}

// Claim is the model's answer to [allocator.State.Claim] of a: the model
// with a live and a as the engine must return it (GPU and device IDs
// ascending, memory by node ID, entries of 0 MiB kept, DenseSpan the nodes
// of what it holds on this machine; a.DenseSpan is ignored), or an error
// naming every reason it must be refused, wrapping the sentinel of the
// first. A claim holds exactly what it names, whatever the exclusivity
// rule and the policy's span would say (it is a fact decided elsewhere),
// and may hold unhealthy devices and devices of unknown NUMA node. It is
// refused for an empty ID, an ID already live ([allocator.ErrDuplicateID]),
// an invalid policy or exclusivity, and, with [allocator.ErrConflict], for
// a CPU that is unknown, reserved or held, under fullPCPUs a CPU whose core
// is not a whole allocatable core held whole, a device (GPU by ID, other
// classes by class and ID) that is unknown, held or named twice, a class
// the machine lacks, memory listed twice on a node, negative or above what
// a node has free; memory on a NUMA node ID the machine does not have is a
// *[allocator.NodeError] naming it ([allocator.ErrUnknownNode]).
func (md *Model) Claim(a allocator.Allocation) (*Model, allocator.Allocation, error) {
	if p := md.claimProblems(a); len(p) > 0 {
		var why []string
		for _, x := range p {
			why = append(why, x.why)
		}
		first := errors.New("refused")
		if len(p[0].sentinels) > 0 {
			first = p[0].sentinels[0]
		}
		return nil, allocator.Allocation{}, fmt.Errorf("%w: %s", first, strings.Join(why, "; "))
	}
	c := a.Clone()
	slices.Sort(c.GPUs)
	for _, ids := range c.Devices {
		slices.Sort(ids)
	}
	slices.SortStableFunc(c.Memory, func(x, y allocator.NodeMemory) int { return cmp.Compare(x.Node, y.Node) })
	c.DenseSpan = SpanOf(md.m, c)
	next, err := md.With(c)
	if err != nil {
		return nil, allocator.Allocation{}, fmt.Errorf("allocatortest: a claim the model accepts is not a possible state: %w", err)
	}
	return next, c, nil
}

// CheckClaim says what is wrong with the answer (got, err) of
// [allocator.State.Claim] for a, or returns nil: a claim the model accepts
// ([Model.Claim]) must be granted and return exactly the model's
// allocation; one it refuses must be refused with an error of one of the
// categories of its reasons (any error for an empty ID; when the only
// reasons are NUMA node IDs the machine lacks, a *[allocator.NodeError]
// naming one of them).
func (md *Model) CheckClaim(a allocator.Allocation, got allocator.Allocation, err error) error {
	p := md.claimProblems(a)
	if len(p) == 0 {
		_, want, _ := md.Claim(a)
		if err != nil {
			return fmt.Errorf("claim of %s refused though the model accepts it: %q", a, err)
		}
		if err := CompareAllocations(want, got); err != nil {
			return fmt.Errorf("claim of %s: %w", a, err)
		}
		return nil
	}
	var why []string
	onlyNodes := true
	for _, x := range p {
		why = append(why, x.why)
		onlyNodes = onlyNodes && x.unknown
	}
	if err == nil {
		return fmt.Errorf("claim of %s granted (%s) though the model refuses it: %s", a, got, strings.Join(why, "; "))
	}
	if onlyNodes {
		var ne *allocator.NodeError
		if !errors.As(err, &ne) || !slices.ContainsFunc(p, func(x claimProblem) bool { return x.node == ne.Node }) {
			return fmt.Errorf("claim of %s: want a *allocator.NodeError naming the unknown node (%s), got %T %q",
				a, strings.Join(why, "; "), err, err)
		}
	}
	for _, x := range p {
		if x.sentinels == nil || slices.ContainsFunc(x.sentinels, func(s error) bool { return errors.Is(err, s) }) {
			return nil
		}
	}
	return fmt.Errorf("claim of %s refused with %q, which names none of the model's reasons' categories: %s",
		a, err, strings.Join(why, "; "))
}
