package allocator

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// Sentinel errors. Placement failures are *[PlacementError] values that
// unwrap to one of the first four (and match ErrNeverFits when Never is
// set); the others are returned wrapped with details.
var (
	// ErrInsufficient: the machine's free resources do not cover the
	// request, whatever the topology (or its allocatable capacity never can).
	ErrInsufficient = errors.New("insufficient resources")
	// ErrNoNUMAFit: the resources exist but not on a set of NUMA nodes of the
	// width the policy demands.
	ErrNoNUMAFit = errors.New("no NUMA placement satisfies the policy")
	// ErrExclusivity: sets of NUMA nodes of the right width have the free
	// resources, but the singleNUMANodeExclusive rule forbids every one.
	ErrExclusivity = errors.New("singleNUMANodeExclusive rule forbids every placement")
	// ErrSearchLimit: the search for a set of NUMA nodes of the demanded
	// width reached its bound (cover.SearchSteps steps of the search over node
	// classes in one decision) before it could say whether one exists. A
	// Restricted request is refused rather than placed on a width that
	// might be wrong; None and BestEffort requests, admitted by the free
	// totals, are never refused so (their width is then the narrowest the
	// bounded search knows); it never happens on machines of at most 16
	// NUMA nodes, whose search is exhaustive.
	ErrSearchLimit = errors.New("the placement search reached its bound")
	// ErrNeverFits: the request can never fit this machine under its
	// policy, whatever is released: the machine's allocatable capacity
	// (healthy devices, CPUs not reserved) falls short of it, or no NUMA
	// node (SingleNUMANode) holds it. A *PlacementError with Never set
	// matches it with errors.Is, besides its category; only a change of the
	// machine (a device healthy again, other reserved CPUs) can change the
	// answer.
	ErrNeverFits = errors.New("the request can never fit this machine")
	// ErrInvalidRequest: the request itself is malformed.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrDuplicateID: a live allocation already has the request's ID.
	ErrDuplicateID = errors.New("allocation ID already live")
	// ErrUnknownID: no live allocation has the ID (a repeated Release).
	ErrUnknownID = errors.New("unknown allocation ID")
	// ErrUnknownDevice: a device named by a health change does not exist.
	ErrUnknownDevice = errors.New("unknown device")
	// ErrConflict: a claim (restore, admission by decision, machine
	// replacement) names CPUs or devices that are unknown or already held,
	// more memory than a node has free, a resource kind the state does not
	// have, or a NUMA node the machine does not have (a *[NodeError]).
	ErrConflict = errors.New("allocation conflicts with the node's state")
	// ErrNoMachine: allocator.New was given a nil machine, or a method was
	// called on a nil *State.
	ErrNoMachine = errors.New("no machine")
	// ErrInvalidOptions: allocator.New was given options it cannot use.
	ErrInvalidOptions = errors.New("invalid allocator options")
	// ErrTooManyThreads: allocator.New was given a machine with a core of
	// more than MaxThreadsPerCore threads.
	ErrTooManyThreads = errors.New("too many threads per core")
	// ErrUnknownNode: an allocation entering a state (Claim, Restore,
	// ReplaceMachine) names a NUMA node ID the machine does not have; the
	// error is a *[NodeError].
	ErrUnknownNode = errors.New("unknown NUMA node")
)

// NodeError names a NUMA node, by ID, that an allocation entering a state
// names (its memory there) and the machine does not have. It unwraps to
// [ErrUnknownNode] and [ErrConflict]. Nothing is ever moved to another node
// in its place.
type NodeError struct {
	// Node is the ID the allocation names.
	Node numa.NodeID
	// What is what the allocation has there, in words ("1,024 MiB of
	// memory").
	What string
	// IDs are the machine's NUMA node IDs, ascending.
	IDs []numa.NodeID
}

// Error implements error.
func (e *NodeError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s: NUMA node %d does not exist on this machine (its NUMA nodes: %s), but the allocation has %s on it",
		ErrUnknownNode, e.Node, idList(e.IDs), e.What)
}

// Unwrap returns [ErrUnknownNode] and [ErrConflict].
func (e *NodeError) Unwrap() []error { return []error{ErrUnknownNode, ErrConflict} }

// groupDigits writes n in decimal with a comma between groups of three
// digits ("96,608").
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var sb strings.Builder
	if neg {
		sb.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			sb.WriteByte(',')
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

// RequestError names the bad field of a request. It unwraps to
// [ErrInvalidRequest].
type RequestError struct {
	// ID is the request's ID (possibly empty).
	ID string
	// Field is the bad field, such as "cpus", "devices[rdma]" or "id"; ""
	// when the request as a whole is at fault (every amount zero, too many
	// resource kinds).
	Field string
	// Reason says what is wrong with the field.
	Reason string
}

// Error implements error.
func (e *RequestError) Error() string {
	if e == nil {
		return "<nil>"
	}
	f := ""
	if e.Field != "" {
		f = " " + e.Field
	}
	if f != "" {
		f += ":"
	}
	return fmt.Sprintf("%s %s:%s %s", ErrInvalidRequest, quote.Short(e.ID), f, e.Reason)
}

// Unwrap returns [ErrInvalidRequest].
func (e *RequestError) Unwrap() error { return ErrInvalidRequest }

func invalidRequest(r *Request, field, format string, args ...any) error {
	return &RequestError{ID: r.ID, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Shortage describes one resource that is short.
type Shortage struct {
	// Resource is the resource kind ("cpu", "gpu", "memory", a device class).
	Resource string
	// Need is the amount asked for, Have the most that was available where
	// it was looked for (on the whole machine, or on the best node or set of
	// the demanded width), in the resource's units.
	Need, Have int64
}

// PlacementError says why a request was refused: which rule, which
// resources are short and where, the widths involved. It unwraps to
// [ErrInsufficient], [ErrNoNUMAFit], [ErrExclusivity] or [ErrSearchLimit],
// and matches [ErrNeverFits] too when Never is set. [State.Fit] may return
// a refusal that builds its PlacementError when asked for: read it with
// errors.As.
type PlacementError struct {
	// ID is the request's ID.
	ID string
	// Policy is the request's placement policy.
	Policy policy.Policy
	// Exclusive is the request's singleNUMANodeExclusive rule.
	Exclusive policy.Exclusivity
	// Width is the span width the policy demanded (0 when none).
	Width int
	// WidthCap and WidthFree are the request's width_cap and width_free
	// (0 when not computed or not finite).
	WidthCap, WidthFree int
	// InSet is true when width_cap was found inside one NUMA set, so that
	// the span had to lie inside one.
	InSet bool
	// Short lists the resources that are short, if the refusal is about
	// amounts.
	Short []Shortage
	// Blocked holds the nodes (IDs) whose exclusivity type forbade an
	// otherwise possible span.
	Blocked []numa.NodeID
	// Never is true when the request can never fit this machine under its
	// policy (see [ErrNeverFits]), false when it does not fit now but might
	// once other allocations are released.
	Never bool
	// Reason is the whole explanation in words.
	Reason string

	err error
}

// Error implements error.
func (e *PlacementError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("request %s (%s): %s", quote.Short(e.ID), e.Policy, e.Reason)
}

// Unwrap returns the sentinel category.
func (e *PlacementError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.err
}

// Is reports whether target is [ErrNeverFits] and the request can never fit
// (Never); errors.Is matches the category through Unwrap.
func (e *PlacementError) Is(target error) bool { return target == ErrNeverFits && e.Never }

// haveOf returns Have of the shortage of the given kind (0 when none).
func (e *PlacementError) haveOf(kind string) int64 {
	for _, x := range e.Short {
		if x.Resource == kind {
			return x.Have
		}
	}
	return 0
}

// idList writes node IDs in list form, ranges of consecutive IDs joined
// ("0,2,5-7"); none is "none".
func idList(ids []numa.NodeID) string {
	if len(ids) == 0 {
		return "none"
	}
	var sb strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if sb.Len() > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(ids[i].String())
		if j > i {
			sb.WriteByte('-')
			sb.WriteString(ids[j].String())
		}
		i = j + 1
	}
	return sb.String()
}
