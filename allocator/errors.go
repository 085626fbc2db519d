package allocator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// Sentinel errors. Placement failures are *[PlacementError] values that
// unwrap to one of the first three; the others are returned wrapped with
// details.
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
	// ErrInvalidRequest: the request itself is malformed.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrDuplicateID: a live allocation already has the request's ID.
	ErrDuplicateID = errors.New("allocation ID already live")
	// ErrUnknownID: no live allocation has the ID (a repeated Release).
	ErrUnknownID = errors.New("unknown allocation ID")
	// ErrUnknownDevice: a device named by a health change does not exist.
	ErrUnknownDevice = errors.New("unknown device")
	// ErrConflict: a claim (restore, admission by decision) names CPUs or
	// devices that are unknown, unhealthy or already held.
	ErrConflict = errors.New("allocation conflicts with the node's state")
)

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
	f := ""
	if e.Field != "" {
		f = " " + e.Field
	}
	return fmt.Sprintf("%s %q:%s %s", ErrInvalidRequest, e.ID, f, e.Reason)
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
// [ErrInsufficient], [ErrNoNUMAFit] or [ErrExclusivity].
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
	// Reason is the whole explanation in words.
	Reason string

	err error
}

// Error implements error.
func (e *PlacementError) Error() string {
	return fmt.Sprintf("request %q (%s): %s", e.ID, e.Policy, e.Reason)
}

// Unwrap returns the sentinel category.
func (e *PlacementError) Unwrap() error { return e.err }

func describeShort(s []Shortage, unit func(kind string, n int64) string) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = fmt.Sprintf("%s (has %d)", unit(x.Resource, x.Need), x.Have)
	}
	return strings.Join(parts, ", ")
}
