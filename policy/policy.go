package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/internal/strictjson"
	"github.com/numaplace/numaplace/numa"
)

// Policy is a per-pod NUMA placement policy.
type Policy uint8

// The policies. The zero value is None.
const (
	// None places the request anywhere (still packed sensibly).
	None Policy = iota
	// SingleNUMANode places the whole request on exactly one NUMA node.
	SingleNUMANode
	// Restricted places the request on exactly width_cap NUMA nodes.
	Restricted
	// BestEffort places the request on exactly width_free NUMA nodes and is
	// never refused for topology reasons.
	BestEffort
)

var policyNames = [...]string{None: "None", SingleNUMANode: "SingleNUMANode", Restricted: "Restricted", BestEffort: "BestEffort"}

// Policies lists every policy, in declaration order.
var Policies = []Policy{None, SingleNUMANode, Restricted, BestEffort}

// String returns the annotation name of p ("SingleNUMANode", ...).
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// Valid reports whether p is one of the declared policies.
func (p Policy) Valid() bool { return int(p) < len(policyNames) }

// MarshalText implements encoding.TextMarshaler with the annotation name.
func (p Policy) MarshalText() ([]byte, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("%w: unknown policy %d", ErrInvalidSpec, uint8(p))
	}
	return []byte(p.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with [ParsePolicy].
func (p *Policy) UnmarshalText(b []byte) error {
	v, err := ParsePolicy(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// ParsePolicy parses an annotation name. The empty string is None (as
// Koordinator writes it); names are case-sensitive, as in the product.
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return None, nil
	}
	for p, name := range policyNames {
		if s == name {
			return Policy(p), nil
		}
	}
	return None, &SpecError{Field: "numaTopologyPolicy", Value: s,
		Reason: "unknown policy; want SingleNUMANode, Restricted, BestEffort or None"}
}

// Exclusivity is the singleNUMANodeExclusive rule of a request.
type Exclusivity uint8

// The exclusivity values. The zero value is Required, the default.
const (
	// Required: a one-node span may not use a shared node and a multi-node
	// span may not use a single node.
	Required Exclusivity = iota
	// Preferred removes the rule; the allocator still prefers not to mix.
	Preferred
)

// String returns the annotation name of e ("Required" or "Preferred").
func (e Exclusivity) String() string {
	switch e {
	case Required:
		return "Required"
	case Preferred:
		return "Preferred"
	}
	return fmt.Sprintf("Exclusivity(%d)", uint8(e))
}

// Valid reports whether e is one of the declared values.
func (e Exclusivity) Valid() bool { return e <= Preferred }

// MarshalText implements encoding.TextMarshaler with the annotation name.
func (e Exclusivity) MarshalText() ([]byte, error) {
	if !e.Valid() {
		return nil, fmt.Errorf("%w: unknown exclusivity %d", ErrInvalidSpec, uint8(e))
	}
	return []byte(e.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with [ParseExclusivity].
func (e *Exclusivity) UnmarshalText(b []byte) error {
	v, err := ParseExclusivity(string(b))
	if err != nil {
		return err
	}
	*e = v
	return nil
}

// ParseExclusivity parses "Required" or "Preferred"; "" is Required.
func ParseExclusivity(s string) (Exclusivity, error) {
	switch s {
	case "", "Required":
		return Required, nil
	case "Preferred":
		return Preferred, nil
	}
	return Required, &SpecError{Field: "singleNUMANodeExclusive", Value: s,
		Reason: "unknown value; want Required or Preferred"}
}

// Binds reports whether the exclusivity rule binds a request of policy p
// with exclusivity e: only under Required, and never for None. For
// BestEffort it binds softly: its span must be allowed whenever some span of
// width_free is, otherwise the rule is broken rather than the span widened.
func Binds(p Policy, e Exclusivity) bool { return e == Required && p != None }

// ErrInvalidSpec is the category of every malformed pod-level spec.
var ErrInvalidSpec = errors.New("invalid NUMA topology spec")

// SpecError names the bad field and value of a pod-level spec. It unwraps
// to [ErrInvalidSpec].
type SpecError struct {
	// Field is the JSON field, such as "numaTopologyPolicy", or "" for the
	// document as a whole.
	Field string
	// Value is the offending value as written.
	Value string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *SpecError) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", ErrInvalidSpec, e.Reason)
	}
	return fmt.Sprintf("%s: %s %s: %s", ErrInvalidSpec, e.Field, quote.Short(e.Value), e.Reason)
}

// Unwrap returns [ErrInvalidSpec].
func (e *SpecError) Unwrap() error { return ErrInvalidSpec }

// Spec is the pod-level NUMA topology spec.
type Spec struct {
	// Policy is the placement policy (JSON "numaTopologyPolicy"); the zero
	// value is [None].
	Policy Policy
	// Exclusive is the singleNUMANodeExclusive rule (JSON
	// "singleNUMANodeExclusive"); the zero value is [Required].
	Exclusive Exclusivity
}

// String returns the spec in its JSON form.
func (s Spec) String() string {
	b, err := s.MarshalJSON()
	if err != nil {
		return fmt.Sprintf("Spec{%v, %v}", s.Policy, s.Exclusive)
	}
	return string(b)
}

// MarshalJSON writes {"numaTopologyPolicy": ..., "singleNUMANodeExclusive": ...}.
func (s Spec) MarshalJSON() ([]byte, error) {
	p, err := s.Policy.MarshalText()
	if err != nil {
		return nil, err
	}
	e, err := s.Exclusive.MarshalText()
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `{"numaTopologyPolicy":%q,"singleNUMANodeExclusive":%q}`, p, e), nil
}

// UnmarshalJSON is [ParseSpec].
func (s *Spec) UnmarshalJSON(b []byte) error {
	v, err := ParseSpec(b)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseSpec parses the pod-level spec {"numaTopologyPolicy": ...,
// "singleNUMANodeExclusive": ...} strictly, as every JSON from outside is
// read (docs/design.md, "Strict JSON"): one JSON object whose only fields
// are those two, spelt exactly (keys are case-sensitive), each at most once,
// each a string or null (as if absent), valid UTF-8, nothing after the
// object. An absent or empty policy is None, an absent or empty exclusivity
// is Required. An unknown field is named, with the field meant when it is
// one edit away, differs only in case, or is the decision's name for it
// ("policy", "exclusive"). Errors are *[SpecError] naming the bad field and
// value.
func ParseSpec(data []byte) (Spec, error) {
	var raw specJSON
	err := strictjson.Decode(data, &raw, strictjson.Options{Aliases: specAliases})
	switch {
	case errors.Is(err, strictjson.ErrSyntax):
		return Spec{}, &SpecError{Value: string(data), Reason: err.Error()}
	case !bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{")): // a JSON value, but not an object
		return Spec{}, &SpecError{Value: string(data), Reason: "want a JSON object"}
	case err != nil:
		return Spec{}, &SpecError{Value: string(data), Reason: err.Error()}
	}
	var s Spec
	if s.Policy, err = specField(FieldPolicy, raw.Policy, ParsePolicy); err != nil {
		return Spec{}, err
	}
	if s.Exclusive, err = specField(FieldExclusive, raw.Exclusive, ParseExclusivity); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// Field names of the pod-level spec, exactly (keys are case-sensitive).
const (
	// FieldPolicy is the spec's policy field.
	FieldPolicy = "numaTopologyPolicy"
	// FieldExclusive is the spec's exclusivity field.
	FieldExclusive = "singleNUMANodeExclusive"
)

// specJSON is the spec as internal/strictjson checks it: its only fields,
// each kept raw (a string, null, or a value of another type, refused).
type specJSON struct {
	Policy    json.RawMessage `json:"numaTopologyPolicy"`
	Exclusive json.RawMessage `json:"singleNUMANodeExclusive"`
}

// specAliases are names people write for the spec's fields (those of the
// numaplace.io/allocation decision), suggested in errors.
var specAliases = map[string]string{"policy": FieldPolicy, "exclusive": FieldExclusive}

// specField reads one field of the spec: absent or null is the zero value,
// a string is parsed, anything else is refused.
func specField[T any](name string, raw json.RawMessage, parse func(string) (T, error)) (T, error) {
	var zero T
	if len(raw) == 0 || string(raw) == "null" {
		return zero, nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return zero, &SpecError{Field: name, Value: string(raw), Reason: "want a string"}
	}
	return parse(v)
}

// NodeType is the exclusivity type of a NUMA node.
type NodeType uint8

// The node types.
const (
	// Idle: no live allocation uses the node.
	Idle NodeType = iota
	// Single: live allocations use the node, all of them with one-node spans.
	Single
	// Shared: some live allocation with a multi-node span uses the node.
	Shared
)

// String returns "idle", "single" or "shared".
func (t NodeType) String() string {
	switch t {
	case Idle:
		return "idle"
	case Single:
		return "single"
	case Shared:
		return "shared"
	}
	return fmt.Sprintf("NodeType(%d)", uint8(t))
}

// NodeTypes returns the single and shared nodes given the spans of every live
// allocation (whatever their policies). Empty spans count nowhere.
func NodeTypes(spans []numa.Mask) (single, shared numa.Mask) {
	var used numa.Mask
	for _, s := range spans {
		used |= s
		if bits.OnesCount64(uint64(s)) > 1 {
			shared |= s
		}
	}
	return used &^ shared, shared
}

// TypeOf returns the type of dense node i given the single and shared masks.
func TypeOf(i int, single, shared numa.Mask) NodeType {
	switch {
	case shared.Contains(i):
		return Shared
	case single.Contains(i):
		return Single
	}
	return Idle
}

// Allowed reports whether span obeys the exclusivity rule: a one-node span
// may not use a shared node and a multi-node span may not use a single node.
// The empty span is always allowed.
func Allowed(span, single, shared numa.Mask) bool {
	switch span.Count() {
	case 0:
		return true
	case 1:
		return span&shared == 0
	}
	return span&single == 0
}

// AllowedPool returns the nodes a span of the given width may use under the
// rule: for width 1 every node that is not shared, for a wider span every
// node that is not single. A span of that width is allowed exactly when it
// is a subset of the pool.
func AllowedPool(width int, all, single, shared numa.Mask) numa.Mask {
	if width <= 1 {
		return all &^ shared
	}
	return all &^ single
}

// Width returns the span width a policy demands given width_cap and
// width_free: 1 for SingleNUMANode, widthCap for Restricted, widthFree for
// BestEffort, and 0 (no demand) for None.
func Width(p Policy, widthCap, widthFree int) int {
	switch p {
	case SingleNUMANode:
		return 1
	case Restricted:
		return widthCap
	case BestEffort:
		return widthFree
	}
	return 0
}
