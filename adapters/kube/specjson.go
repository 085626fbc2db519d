package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/numaplace/numaplace/policy"
)

// Field names of the NUMA topology spec, exactly (keys are case-sensitive).
const (
	specFieldPolicy    = "numaTopologyPolicy"
	specFieldExclusive = "singleNUMANodeExclusive"
)

// parseSpecAnnotation reads the value of a NUMA topology spec annotation
// ([AnnotationSpecAlibaba] or [AnnotationSpecKoordinator]) strictly: one
// JSON object whose only fields are "numaTopologyPolicy" and
// "singleNUMANodeExclusive", spelt exactly (a key in another case is named
// with the one meant), each at most once, each a string (null is as if
// absent; an absent or empty policy is None, an absent or empty exclusivity
// Required, as [policy.ParseSpec] reads them), the text valid UTF-8 and
// nothing after the object. It does not allocate unless the input has JSON
// escapes or is refused. Errors are *[policy.SpecError]: malformed JSON
// (with encoding/json's words) takes precedence over the other faults,
// which are named by field and value in the order they appear.
func parseSpecAnnotation(s string) (policy.Spec, error) {
	spec, err := scanSpec(s)
	if err != nil {
		if syntax := specSyntaxError(s); syntax != nil {
			return policy.Spec{}, syntax
		}
		return policy.Spec{}, err
	}
	return spec, nil
}

// specSyntaxError returns the error of a spec that is not one well-formed
// JSON value with nothing after it, or nil.
func specSyntaxError(s string) error {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return &policy.SpecError{Value: s, Reason: "malformed JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &policy.SpecError{Value: s, Reason: "malformed JSON: data after the object"}
	}
	return nil
}

// specScanner reads a spec annotation from position i of s.
type specScanner struct {
	s     string
	i     int
	ascii bool // the last string read is all ASCII
}

// scanSpec reads s as parseSpecAnnotation says; it names a syntax error by
// its offset only (parseSpecAnnotation then asks encoding/json for its
// words).
func scanSpec(s string) (policy.Spec, error) {
	sc := specScanner{s: s}
	sc.space()
	if !sc.eat('{') {
		if sc.i == len(s) || !sc.value() {
			return policy.Spec{}, sc.syntax()
		}
		return policy.Spec{}, &policy.SpecError{Value: s, Reason: "want a JSON object"}
	}
	var spec policy.Spec
	var seen [2]bool
	sc.space()
	if !sc.eat('}') {
		for {
			sc.space()
			key, rawKey, ok := sc.str()
			if !ok {
				return policy.Spec{}, sc.syntax()
			}
			if !sc.validUTF8(rawKey) {
				return policy.Spec{}, &policy.SpecError{Value: s, Reason: fmt.Sprintf("key %q is not valid UTF-8", key)}
			}
			sc.space()
			if !sc.eat(':') {
				return policy.Spec{}, sc.syntax()
			}
			sc.space()
			start := sc.i
			var val, rawVal string
			validVal := true
			isString, isNull := sc.i < len(s) && s[sc.i] == '"', strings.HasPrefix(s[sc.i:], "null")
			switch {
			case isString:
				val, rawVal, ok = sc.str()
				validVal = sc.validUTF8(rawVal)
			case isNull:
				sc.i += len("null")
			default:
				ok = sc.value()
			}
			if !ok {
				return policy.Spec{}, sc.syntax()
			}
			if !isString {
				val = s[start:sc.i]
			}
			field := -1
			switch key {
			case specFieldPolicy:
				field = 0
			case specFieldExclusive:
				field = 1
			}
			switch {
			case field < 0:
				return policy.Spec{}, &policy.SpecError{Field: key, Value: val, Reason: unknownSpecField(key)}
			case seen[field]:
				return policy.Spec{}, &policy.SpecError{Field: key, Value: val, Reason: "the field appears twice; write it once"}
			case !validVal:
				return policy.Spec{}, &policy.SpecError{Field: key, Value: val, Reason: "not valid UTF-8"}
			case !isString && !isNull:
				return policy.Spec{}, &policy.SpecError{Field: key, Value: val, Reason: "want a string"}
			}
			seen[field] = true
			if isNull {
				val = "" // as if absent
			}
			var err error
			if field == 0 {
				spec.Policy, err = policy.ParsePolicy(val)
			} else {
				spec.Exclusive, err = policy.ParseExclusivity(val)
			}
			if err != nil {
				return policy.Spec{}, err
			}
			sc.space()
			if sc.eat('}') {
				break
			}
			if !sc.eat(',') {
				return policy.Spec{}, sc.syntax()
			}
		}
	}
	sc.space()
	if sc.i != len(s) {
		return policy.Spec{}, sc.syntax()
	}
	return spec, nil
}

// unknownSpecField says what is wrong with a key that is not a spec field.
func unknownSpecField(key string) string {
	for _, f := range [...]string{specFieldPolicy, specFieldExclusive} {
		if strings.EqualFold(key, f) {
			return fmt.Sprintf("unknown field (keys are case-sensitive: %q)", f)
		}
	}
	return fmt.Sprintf("unknown field; a NUMA topology spec has only %q and %q", specFieldPolicy, specFieldExclusive)
}

// syntax returns the error of a syntax error at the scanner's position.
func (sc *specScanner) syntax() error {
	return &policy.SpecError{Value: sc.s, Reason: fmt.Sprintf("malformed JSON at byte %d", sc.i)}
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

// str reads a JSON string: its value (escapes decoded), its text between
// the quotes, and false on a syntax error; it sets sc.ascii to whether that
// text is all ASCII. Only a string with escapes allocates.
func (sc *specScanner) str() (val, raw string, ok bool) {
	if !sc.eat('"') {
		return "", "", false
	}
	start, escaped := sc.i, false
	sc.ascii = true
	for sc.i < len(sc.s) {
		c := sc.s[sc.i]
		if c >= 0x20 && c < 0x80 && c != '"' && c != '\\' {
			sc.i++
			continue
		}
		switch {
		case c == '"':
			raw = sc.s[start:sc.i]
			sc.i++
			if !escaped {
				return raw, raw, true
			}
			var v string // declared here: only a string with escapes allocates
			if err := json.Unmarshal([]byte(sc.s[start-1:sc.i]), &v); err != nil {
				return "", "", false
			}
			return v, raw, true
		case c == '\\':
			escaped = true
			sc.i++
			if sc.i >= len(sc.s) {
				return "", "", false
			}
			switch sc.s[sc.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				sc.i++
			case 'u':
				if sc.i+5 > len(sc.s) {
					return "", "", false
				}
				for _, h := range []byte(sc.s[sc.i+1 : sc.i+5]) {
					if !isHex(h) {
						return "", "", false
					}
				}
				sc.i += 5
			default:
				return "", "", false
			}
		case c < 0x20:
			return "", "", false
		default: // a byte of a multi-byte character, or not UTF-8
			sc.ascii = false
			sc.i++
		}
	}
	return "", "", false
}

// validUTF8 reports whether raw, the text of the string sc.str last read,
// is valid UTF-8.
func (sc *specScanner) validUTF8(raw string) bool { return sc.ascii || utf8.ValidString(raw) }

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// value skips any JSON value, reporting false on a syntax error.
func (sc *specScanner) value() bool {
	return sc.valueDepth(0)
}

// maxSpecDepth bounds the nesting the scanner follows (encoding/json's
// own limit is 10000).
const maxSpecDepth = 10000

func (sc *specScanner) valueDepth(depth int) bool {
	if sc.i >= len(sc.s) || depth > maxSpecDepth {
		return false
	}
	switch c := sc.s[sc.i]; {
	case c == '"':
		_, _, ok := sc.str()
		return ok
	case c == '{' || c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		sc.i++
		sc.space()
		if sc.eat(end) {
			return true
		}
		for {
			sc.space()
			if c == '{' {
				if _, _, ok := sc.str(); !ok {
					return false
				}
				sc.space()
				if !sc.eat(':') {
					return false
				}
				sc.space()
			}
			if !sc.valueDepth(depth + 1) {
				return false
			}
			sc.space()
			if sc.eat(end) {
				return true
			}
			if !sc.eat(',') {
				return false
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		return sc.number()
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if strings.HasPrefix(sc.s[sc.i:], lit) {
			sc.i += len(lit)
			return true
		}
	}
	return false
}

// number skips a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (sc *specScanner) number() bool {
	sc.eat('-')
	digits := func() int {
		n := 0
		for sc.i < len(sc.s) && sc.s[sc.i] >= '0' && sc.s[sc.i] <= '9' {
			sc.i++
			n++
		}
		return n
	}
	if sc.eat('0') {
		// no more integer digits after a leading 0
	} else if digits() == 0 {
		return false
	}
	if sc.eat('.') && digits() == 0 {
		return false
	}
	if sc.eat('e') || sc.eat('E') {
		if !sc.eat('+') {
			sc.eat('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
