package topology

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
)

// Sentinel errors; the typed errors below unwrap to them so that both
// errors.Is and errors.As work.
var (
	// ErrInvalid is the category of every validation failure of a machine.
	ErrInvalid = errors.New("invalid topology")
	// ErrTooManyNodes is the category of a machine with more NUMA nodes than
	// a numa.Mask can hold.
	ErrTooManyNodes = errors.New("too many NUMA nodes")
	// ErrTooLarge is the category of a machine larger than the caps
	// [MaxCPUs], [MaxDevices] or [MaxNVLinks].
	ErrTooLarge = errors.New("machine too large")
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
	if e == nil {
		return "<nil>"
	}
	s := fmt.Sprintf("%s: %s: %s", ErrInvalid, e.Item, e.Reason)
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns [ErrInvalid] and the cause.
func (e *ValidationError) Unwrap() []error {
	if e == nil {
		return nil
	}
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
	// AtLeast says that Nodes is only a lower bound: the description was
	// refused while it was read, before the rest was counted.
	AtLeast bool
}

// Error implements error.
func (e *TooManyNodesError) Error() string {
	if e == nil {
		return "<nil>"
	}
	n := strconv.Itoa(e.Nodes)
	if e.AtLeast {
		n = "at least " + n
	}
	return fmt.Sprintf("%s: the machine has %s NUMA nodes, at most 64 are supported", ErrTooManyNodes, n)
}

// Unwrap returns [ErrTooManyNodes].
func (e *TooManyNodesError) Unwrap() error { return ErrTooManyNodes }

// The caps on the size of a machine, checked by [Builder.Build] before it
// allocates anything for the machine (a *[LimitError]). They are far above
// real servers (Linux itself runs at most 8,192 CPUs) and keep a hostile
// description from taking the memory or the time of a process.
const (
	// MaxCPUs is the most logical CPUs a machine may have (CPU numbers are
	// at most numa.MaxCPUID); cores and L3 groups, which are disjoint sets
	// of CPUs, are capped at the same number.
	MaxCPUs = 1 << 14
	// MaxDevices is the most devices a machine may have: GPUs and other
	// devices together.
	MaxDevices = 1 << 17
	// MaxNVLinks is the most NVLink connections (pairs of GPUs) a machine
	// may list.
	MaxNVLinks = 1 << 20
)

// LimitError is returned when a machine is larger than one of the caps
// ([MaxCPUs], [MaxDevices], [MaxNVLinks]). It unwraps to [ErrTooLarge].
type LimitError struct {
	// What names what there is too much of, such as "NVLinks".
	What string
	// Count is how many the description has.
	Count int
	// Limit is the cap.
	Limit int
	// AtLeast says that Count is only a lower bound: the description was
	// refused while it was read, before the rest was counted.
	AtLeast bool
}

// Error implements error.
func (e *LimitError) Error() string {
	if e == nil {
		return "<nil>"
	}
	n := strconv.Itoa(e.Count)
	if e.AtLeast {
		n = "at least " + n
	}
	return fmt.Sprintf("%s: the machine has %s %s, at most %d are supported", ErrTooLarge, n, e.What, e.Limit)
}

// Unwrap returns [ErrTooLarge].
func (e *LimitError) Unwrap() error { return ErrTooLarge }

// shortSet writes a CPU set for an error message in the cpulist format, cut
// as [quote.Bare] cuts outside values (a set read from outside may be a
// long list of single CPUs).
func shortSet(s numa.CPUSet) string { return quote.Bare(s.String()) }
