package kube

import (
	"github.com/numaplace/numaplace/policy"
)

// Field names of the NUMA topology spec, exactly (keys are case-sensitive).
const (
	specFieldPolicy    = policy.FieldPolicy
	specFieldExclusive = policy.FieldExclusive
)

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

// parseSpecStrict is parseSpecAnnotation by [policy.ParseSpec], the strict
// reader (which names unknown fields with the one meant, repeated fields,
// invalid UTF-8, malformed JSON, values of another type than string, and
// unknown policies and exclusivities).
func parseSpecStrict(s string) (policy.Spec, error) { return policy.ParseSpec([]byte(s)) }

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
	s, start := sc.s, sc.i
	for i := start; i < len(s); i++ { // in locals: the loop reads no field
		switch c := s[i]; {
		case c == '"':
			sc.i = i + 1
			return s[start:i], true
		case c < 0x20 || c >= 0x7f || c == '\\':
			sc.i = i
			return "", false
		}
	}
	sc.i = len(s)
	return "", false
}
