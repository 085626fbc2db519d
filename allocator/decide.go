package allocator

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/numaplace/numaplace/allocator/internal/cover"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// searchLimitText says what a refusal with ErrSearchLimit means.
var searchLimitText = fmt.Sprintf("the search for a set of NUMA nodes of the width its policy demands reached its bound "+
	"(%d steps) before it could tell whether one has the free resources; refused rather than placed on a width that might be wrong", cover.SearchSteps)

// searchLimit builds the refusal of a decision whose search the bound cut.
func (sr *searcher) searchLimit() error {
	return sr.s.refuse(sr.r, sr.plan, ErrSearchLimit, nil, nil, searchLimitText)
}

// checkClasses refuses a request for a device class the machine lacks:
// it can never fit.
func (s *State) checkClasses(r *Request) error {
	for _, class := range slices.Sorted(maps.Keys(r.Devices)) {
		if _, ok := s.classes[class]; !ok && r.Devices[class] > 0 {
			err := s.refuse(r, plan{}, ErrInsufficient,
				[]Shortage{{Resource: class, Need: int64(r.Devices[class])}},
				nil, fmt.Sprintf("the machine has no %s devices, so it can never hold %s (%s%s)",
					quote.Bare(class), deviceCount(quote.Bare(class), int64(r.Devices[class])), s.didYouMean(class), s.classList()))
			err.(*PlacementError).Never = true
			return err
		}
	}
	return nil
}

// deviceCount writes n devices of a class the machine may not have, such
// as "2 rdma devices".
func deviceCount(class string, n int64) string {
	if n == 1 {
		return "1 " + class + " device"
	}
	return groupDigits(n) + " " + class + " devices"
}

// insufficient builds the refusal when the machine's free resources do not
// cover the request: Never when its allocatable capacity does not either.
func (sr *searcher) insufficient(short []Shortage) error {
	s, r := sr.s, sr.r
	never := false
	parts := make([]string, len(short))
	for i, x := range short {
		res := s.res[sr.kinds[sr.demandedIndex(x.Resource)]]
		total, known := s.capacityTotal(res, r)
		switch {
		case known && total < x.Need:
			never = true
			parts[i] = fmt.Sprintf("%s wanted, %s in all", res.Describe(r, x.Need), res.Describe(r, total))
		case known:
			parts[i] = fmt.Sprintf("%s wanted, %s free (%s in all)", res.Describe(r, x.Need), res.Describe(r, x.Have), res.Describe(r, total))
		default:
			parts[i] = fmt.Sprintf("%s wanted, %s free", res.Describe(r, x.Need), res.Describe(r, x.Have))
		}
	}
	reason := "not enough free on the whole machine now: "
	if never {
		reason = "the machine can never hold it (its allocatable capacity falls short; unhealthy devices and reserved CPUs do not count): "
	}
	reason += strings.Join(parts, "; ")
	if !never && r.Policy == policy.SingleNUMANode {
		// The machine may hold it in all, but no node alone ever can.
		var why string
		if why, never = sr.neverOnOneNode(); never {
			reason += "; and " + why
		}
	}
	err := s.refuse(r, plan{}, ErrInsufficient, short, nil, reason)
	err.(*PlacementError).Never = never
	return err
}

// capacityTotal returns res's allocatable units for r on the whole machine
// (devices of unknown NUMA node included for None requests), and whether it
// is known (a resource of the caller's own with free units of unknown node
// does not say its capacity there).
func (s *State) capacityTotal(res Resource, r *Request) (int64, bool) {
	var t int64
	for i := 0; i < s.n; i++ {
		t += res.Capacity(r, i)
	}
	if r.Policy != policy.None {
		return t, true
	}
	if d, ok := res.(*Devices); ok {
		return t + int64(d.unCap), true
	}
	return t, res.Unplaced(r) == 0
}

// noFit builds the refusal when no set of the demanded width has the free
// resources, whatever the exclusivity.
func (sr *searcher) noFit(pools []numa.Mask) error {
	s, r, p := sr.s, sr.r, sr.plan
	// For each kind, the most any cover candidate of the width could offer
	// alone: the sum of the width largest free amounts inside one pool.
	var short []Shortage
	for k := 0; k < sr.k; k++ {
		var best int64
		for _, pool := range pools {
			best = max(best, topSum(sr.freeP.Amount[k], pool, p.width))
		}
		if need := sr.freeP.Need[k]; best < need {
			short = append(short, Shortage{Resource: s.res[sr.kinds[k]].Kind(), Need: need, Have: best})
		}
	}
	if r.Policy == policy.SingleNUMANode {
		if reason, never := sr.neverOnOneNode(); never {
			err := s.refuse(r, p, ErrNoNUMAFit, short, nil, reason)
			err.(*PlacementError).Never = true
			return err
		}
	}
	where := s.whereText(p)
	var reason string
	if len(short) > 0 {
		reason = fmt.Sprintf("%s has %s free now", where, sr.describeNeed(short))
		reason = "no " + strings.TrimPrefix(reason, "a ") + s.mostText(r, short)
	} else {
		reason = fmt.Sprintf("no %s has %s free together now", strings.TrimPrefix(where, "a "), sr.describeAll())
	}
	return s.refuse(r, p, ErrNoNUMAFit, short, nil, reason)
}

// neverOnOneNode reports whether no NUMA node's allocatable capacity holds
// r's demands on known nodes (a SingleNUMANode request can then never fit)
// and says so with the most one node has of each kind it lacks.
func (sr *searcher) neverOnOneNode() (string, bool) {
	s, r := sr.s, sr.r
	cp := sr.capacity()
	if _, ok := cp.OneNode(s.m.AllNodes()); ok {
		return "", false
	}
	var lack []string
	for k := 0; k < sr.k; k++ {
		if sr.capMax[k] < cp.Need[k] {
			res := s.res[sr.kinds[k]]
			lack = append(lack, fmt.Sprintf("at most %s", res.Describe(r, sr.capMax[k])))
		}
	}
	reason := fmt.Sprintf("no NUMA node of this machine can ever hold %s", sr.describeAll())
	if len(lack) > 0 {
		return reason + " (one node has " + joinAnd(lack) + ")", true
	}
	return reason + " together", true
}

// blocked builds the refusal when only the exclusivity rule stands in the way.
func (sr *searcher) blocked(pools []numa.Mask, forbidden numa.Mask) error {
	s, r, p := sr.s, sr.r, sr.plan
	// The forbidden nodes of the pools where a cover exists without the rule.
	var used numa.Mask
	for _, pool := range pools {
		if _, ok := sr.exists(&sr.freeP, pool, p.width); ok {
			used |= pool & forbidden
		}
	}
	ids := s.m.IDsOf(used)
	what := "used by single-NUMA-node allocations, and a multi-node span may not use them"
	if p.width == 1 {
		what = "shared by multi-node allocations, and a one-node span may not use them"
	}
	reason := fmt.Sprintf("%s with %s free exists, but NUMA node(s) %s are %s (singleNUMANodeExclusive: Required)",
		s.whereText(p), sr.describeAll(), joinIDs(ids), what)
	return s.refuse(r, p, ErrExclusivity, nil, ids, reason)
}

func (s *State) whereText(p plan) string {
	switch {
	case p.width == 1:
		return "a NUMA node"
	case p.inSet:
		return fmt.Sprintf("a set of %d NUMA nodes inside one NUMA set (width_cap %d)", p.width, p.widthCap)
	case p.widthCap > 0:
		return fmt.Sprintf("a set of %d NUMA nodes (width_cap %d)", p.width, p.widthCap)
	}
	return fmt.Sprintf("a set of %d NUMA nodes", p.width)
}

func (s *State) mostText(r *Request, short []Shortage) string {
	parts := make([]string, 0, len(short))
	for _, x := range short {
		for _, res := range s.res {
			if res.Kind() == x.Resource {
				parts = append(parts, res.Describe(r, x.Have))
				break
			}
		}
	}
	return fmt.Sprintf(" (at most %s free there)", joinAnd(parts))
}

func joinIDs(ids []numa.NodeID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id.String()
	}
	return strings.Join(parts, ",")
}

// describeNeed writes the short kinds' demands in words.
func (sr *searcher) describeNeed(short []Shortage) string {
	parts := make([]string, 0, len(short))
	for _, x := range short {
		for k := 0; k < sr.k; k++ {
			if res := sr.s.res[sr.kinds[k]]; res.Kind() == x.Resource {
				parts = append(parts, res.Describe(sr.r, x.Need))
			}
		}
	}
	return joinAnd(parts)
}

// describeAll writes every demand of the request on known nodes in words.
func (sr *searcher) describeAll() string {
	parts := make([]string, 0, sr.k)
	for k := 0; k < sr.k; k++ {
		if need := sr.freeP.Need[k]; need > 0 {
			parts = append(parts, sr.s.res[sr.kinds[k]].Describe(sr.r, need))
		}
	}
	return joinAnd(parts)
}

func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return "nothing"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func (s *State) refuse(r *Request, p plan, sentinel error, short []Shortage, blocked []numa.NodeID, reason string) error {
	return &PlacementError{ID: r.ID, Policy: r.Policy, Exclusive: r.Exclusive, Width: p.width,
		WidthCap: max(p.widthCap, 0), WidthFree: max(p.widthFree, 0), InSet: p.inSet,
		Short: short, Blocked: blocked, Reason: reason, err: sentinel}
}
