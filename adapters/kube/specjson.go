package kube

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/numaplace/numaplace/internal/strictjson"
	"github.com/numaplace/numaplace/policy"
)

// Field names of the NUMA topology spec, exactly (keys are case-sensitive).
const (
	specFieldPolicy    = "numaTopologyPolicy"
	specFieldExclusive = "singleNUMANodeExclusive"
)

// specJSON is the spec as internal/strictjson checks it: its only fields,
// each kept raw (a string, null, or a value of another type, refused).
type specJSON struct {
	Policy    json.RawMessage `json:"numaTopologyPolicy"`
	Exclusive json.RawMessage `json:"singleNUMANodeExclusive"`
}

// specAliases are names people write for the spec's fields (those of the
// numaplace.io/allocation decision), suggested in errors.
var specAliases = map[string]string{"policy": specFieldPolicy, "exclusive": specFieldExclusive}

// parseSpecAnnotation reads the value of a NUMA topology spec annotation
// ([AnnotationSpecAlibaba] or [AnnotationSpecKoordinator]) strictly, as
// every JSON from outside is read (docs/design.md, "Strict JSON"): one
// JSON object whose only fields are "numaTopologyPolicy" and
// "singleNUMANodeExclusive", spelt exactly, each at most once, each a
// string or null (as if absent; an absent or empty policy is None, an
// absent or empty exclusivity Required, as [policy.ParseSpec] reads them),
// valid UTF-8, nothing after the object. A spec written plainly (no
// escapes, ASCII, no null) is read by scanSpec without allocating; any
// other, and every error, by parseSpecStrict. Errors are
// *[policy.SpecError].
func parseSpecAnnotation(s string) (policy.Spec, error) {
	if spec, ok := scanSpec(s); ok {
		return spec, nil
	}
	return parseSpecStrict(s)
}

// parseSpecStrict is parseSpecAnnotation by internal/strictjson (which
// names unknown fields with the one meant, repeated fields, invalid UTF-8
// and malformed JSON) and the field rules of policy.ParseSpec (null is
// absent, a value of another type than string is named, as are unknown
// policies and exclusivities).
func parseSpecStrict(s string) (policy.Spec, error) {
	var raw specJSON
	err := strictjson.Decode([]byte(s), &raw, strictjson.Options{Aliases: specAliases})
	switch {
	case errors.Is(err, strictjson.ErrSyntax):
		return policy.Spec{}, &policy.SpecError{Value: s, Reason: err.Error()}
	case !strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "{"): // a JSON value, but not an object
		return policy.Spec{}, &policy.SpecError{Value: s, Reason: "want a JSON object"}
	case err != nil:
		return policy.Spec{}, &policy.SpecError{Value: s, Reason: err.Error()}
	}
	var spec policy.Spec
	for _, f := range [...]struct {
		name  string
		raw   json.RawMessage
		parse func(string) error
	}{
		{specFieldPolicy, raw.Policy, func(v string) (err error) { spec.Policy, err = policy.ParsePolicy(v); return err }},
		{specFieldExclusive, raw.Exclusive, func(v string) (err error) { spec.Exclusive, err = policy.ParseExclusivity(v); return err }},
	} {
		if len(f.raw) == 0 || string(f.raw) == "null" {
			continue // absent
		}
		var v string
		if err := json.Unmarshal(f.raw, &v); err != nil {
			return policy.Spec{}, &policy.SpecError{Field: f.name, Value: string(f.raw), Reason: "want a string"}
		}
		if err := f.parse(v); err != nil {
			return policy.Spec{}, err
		}
	}
	return spec, nil
}

// scanSpec reads a spec written plainly, without allocating: blanks, "{",
// the two fields or either or none, each once, each key and value a string
// of printable ASCII without escapes, the value a valid policy or
// exclusivity name, "}", blanks. ok is false for everything else, valid or
// not: parseSpecStrict then decides. What scanSpec accepts, parseSpecStrict
// accepts with the same value (TestSpecAnnotationFast, FuzzSpecAnnotation).
func scanSpec(s string) (spec policy.Spec, ok bool) {
	sc := specScanner{s: s}
	sc.space()
	if !sc.eat('{') {
		return spec, false
	}
	var seen [2]bool
	sc.space()
	if !sc.eat('}') {
		for {
			sc.space()
			key, ok := sc.str()
			if !ok {
				return spec, false
			}
			sc.space()
			if !sc.eat(':') {
				return spec, false
			}
			sc.space()
			val, ok := sc.str()
			if !ok {
				return spec, false
			}
			var err error
			switch {
			case key == specFieldPolicy && !seen[0]:
				seen[0] = true
				spec.Policy, err = policy.ParsePolicy(val)
			case key == specFieldExclusive && !seen[1]:
				seen[1] = true
				spec.Exclusive, err = policy.ParseExclusivity(val)
			default:
				return spec, false
			}
			if err != nil {
				return spec, false
			}
			sc.space()
			if sc.eat('}') {
				break
			}
			if !sc.eat(',') {
				return spec, false
			}
		}
	}
	sc.space()
	return spec, sc.i == len(s)
}

// specScanner reads a spec annotation from position i of s.
type specScanner struct {
	s string
	i int
}

func (sc *specScanner) space() {
	for sc.i < len(sc.s) {
		switch sc.s[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

func (sc *specScanner) eat(c byte) bool {
	if sc.i < len(sc.s) && sc.s[sc.i] == c {
		sc.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes (its text between
// the quotes); false for anything else.
func (sc *specScanner) str() (string, bool) {
	if !sc.eat('"') {
		return "", false
	}
	start := sc.i
	for sc.i < len(sc.s) {
		switch c := sc.s[sc.i]; {
		case c == '"':
			sc.i++
			return sc.s[start : sc.i-1], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return "", false
		}
		sc.i++
	}
	return "", false
}
