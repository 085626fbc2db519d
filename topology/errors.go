package topology

import (
	"errors"
	"fmt"
)

// Sentinel errors; the typed errors below unwrap to them so that both
// errors.Is and errors.As work.
var (
	// ErrInvalid is the category of every validation failure of a machine.
	ErrInvalid = errors.New("invalid topology")
	// ErrTooManyNodes is the category of a machine with more NUMA nodes than
	// a numa.Mask can hold.
	ErrTooManyNodes = errors.New("too many NUMA nodes")
	// ErrDiscovery is the category of every failure to read a machine from
	// Linux sysfs.
	ErrDiscovery = errors.New("topology discovery failed")
)

// ValidationError says which item of a machine description is wrong and why.
// It unwraps to [ErrInvalid] (and to the cause, when there is one).
type ValidationError struct {
	// Item names the offending item, such as "numaNodes[2] (id 5)",
	// "gpus[3] (id 3)", "distances[1][0]" or "cpu 17".
	Item string
	// Reason says what is wrong with it.
	Reason string
	// Cause is an underlying error, such as a parse error, or nil.
	Cause error
}

// Error implements error.
func (e *ValidationError) Error() string {
	s := fmt.Sprintf("%s: %s: %s", ErrInvalid, e.Item, e.Reason)
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns [ErrInvalid] and the cause.
func (e *ValidationError) Unwrap() []error {
	if e.Cause != nil {
		return []error{ErrInvalid, e.Cause}
	}
	return []error{ErrInvalid}
}

func invalid(item, format string, args ...any) *ValidationError {
	return &ValidationError{Item: item, Reason: fmt.Sprintf(format, args...)}
}

// TooManyNodesError is returned when a machine has more NUMA nodes than
// numa.MaxNodes. It unwraps to [ErrTooManyNodes].
type TooManyNodesError struct {
	// Nodes is the number of NUMA nodes the machine has.
	Nodes int
}

// Error implements error.
func (e *TooManyNodesError) Error() string {
	return fmt.Sprintf("%s: the machine has %d NUMA nodes, at most 64 are supported", ErrTooManyNodes, e.Nodes)
}

// Unwrap returns [ErrTooManyNodes].
func (e *TooManyNodesError) Unwrap() error { return ErrTooManyNodes }
