package kube

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/policy"
)

func TestSpecAnnotation(t *testing.T) {
	type spec = policy.Spec
	for _, c := range []struct {
		name, in string
		want     spec
	}{
		{"both", `{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Preferred"}`,
			spec{Policy: policy.SingleNUMANode, Exclusive: policy.Preferred}},
		{"reversed, spaced", " \n{ \"singleNUMANodeExclusive\" :\t\"Required\" ,\r\n \"numaTopologyPolicy\": \"Restricted\" }\n",
			spec{Policy: policy.Restricted}},
		{"policy only", `{"numaTopologyPolicy":"BestEffort"}`, spec{Policy: policy.BestEffort}},
		{"empty object", `{}`, spec{}},
		{"empty strings", `{"numaTopologyPolicy":"","singleNUMANodeExclusive":""}`, spec{}},
		{"null is as absent", `{"numaTopologyPolicy":null,"singleNUMANodeExclusive":"Preferred"}`,
			spec{Exclusive: policy.Preferred}},
		{"escapes in value", `{"numaTopologyPolicy":"Restr\u0069cted"}`, spec{Policy: policy.Restricted}},
		{"escapes in key", `{"numaTopology\u0050olicy":"Restricted"}`, spec{Policy: policy.Restricted}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseSpecAnnotation(c.in)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}

	for _, c := range []struct {
		name, in     string
		field, value string // the field and value named (field "" for the document, whose value is the input)
		reason       string // the reason, or a part of it
	}{
		{"unknown field", `{"numaTopologyPolicy":"Restricted","numaNodes":[0,1]}`, "", "", `unknown field "numaNodes"`},
		{"miscased key", `{"NumaTopologyPolicy":"Restricted"}`, "", "",
			`unknown field "NumaTopologyPolicy"; did you mean "numaTopologyPolicy"?`},
		{"lower-case key", `{"singlenumanodeexclusive":"Preferred"}`, "", "",
			`unknown field "singlenumanodeexclusive"; did you mean "singleNUMANodeExclusive"?`},
		{"misspelt key", `{"numaTopologyPolcy":"Restricted"}`, "", "",
			`unknown field "numaTopologyPolcy"; did you mean "numaTopologyPolicy"?`},
		{"the decision's name", `{"policy":"Restricted"}`, "", "", `unknown field "policy"; did you mean "numaTopologyPolicy"?`},
		{"duplicate key", `{"numaTopologyPolicy":"Restricted","numaTopologyPolicy":"SingleNUMANode"}`, "", "",
			`duplicate field "numaTopologyPolicy"`},
		{"duplicate after null", `{"numaTopologyPolicy":null,"numaTopologyPolicy":"SingleNUMANode"}`, "", "",
			`duplicate field "numaTopologyPolicy"`},
		{"invalid UTF-8 value", "{\"numaTopologyPolicy\":\"Restricted\xff\"}", "", "",
			"a string at numaTopologyPolicy is not valid UTF-8"},
		{"unpaired surrogate", `{"numaTopologyPolicy":"\ud800"}`, "", "", "a string at numaTopologyPolicy is not valid UTF-8"},
		{"invalid UTF-8 key", "{\"numa\xc3\":\"Restricted\"}", "", "", "is not valid UTF-8"},
		{"number", `{"numaTopologyPolicy":1}`, "numaTopologyPolicy", "1", "want a string"},
		{"object", `{"singleNUMANodeExclusive":{"a":[true,false,null,-1.5e3]}}`, "singleNUMANodeExclusive",
			`{"a":[true,false,null,-1.5e3]}`, "want a string"},
		{"unknown policy", `{"numaTopologyPolicy":"restricted"}`, "numaTopologyPolicy", "restricted", "unknown policy"},
		{"unknown escaped policy", `{"numaTopologyPolicy":"Restr\u0069ct"}`, "numaTopologyPolicy", "Restrict", "unknown policy"},
		{"unknown exclusivity", `{"singleNUMANodeExclusive":"Sometimes"}`, "singleNUMANodeExclusive", "Sometimes", "unknown value"},
		{"array", `[{"numaTopologyPolicy":"None"}]`, "", "", "want a JSON object"},
		{"null document", `null`, "", "", "want a JSON object"},
		{"string document", `"SingleNUMANode"`, "", "", "want a JSON object"},
		{"empty", ``, "", "", "malformed JSON"},
		{"truncated", `{"numaTopologyPolicy":"None"`, "", "", "malformed JSON"},
		{"trailing comma", `{"numaTopologyPolicy":"None",}`, "", "", "malformed JSON"},
		{"missing comma", `{"numaTopologyPolicy":"None" "singleNUMANodeExclusive":"Preferred"}`, "", "", "malformed JSON"},
		{"missing colon", `{"numaTopologyPolicy" "None"}`, "", "", "malformed JSON"},
		{"trailing object", `{} {}`, "", "", "malformed JSON: data after the JSON value"},
		{"trailing brace", `{}}`, "", "", "malformed JSON"},
		{"bad escape", `{"numaTopologyPolicy":"\x"}`, "", "", "malformed JSON"},
		{"control character", "{\"numaTopologyPolicy\":\"a\tb\"}", "", "", "malformed JSON"},
		// Faults are named in the order they appear.
		{"unknown field, then truncated", `{"x":1,`, "", "", `unknown field "x"`},
		{"garbage after a wrong policy", `{"numaTopologyPolicy":"x"} x`, "", "", "malformed JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseSpecAnnotation(c.in)
			require.Equal(t, policy.Spec{}, got)
			require.ErrorIs(t, err, policy.ErrInvalidSpec)
			var se *policy.SpecError
			require.ErrorAs(t, err, &se)
			require.Equal(t, c.field, se.Field)
			if c.field == "" {
				c.value = c.in
			}
			require.Equal(t, c.value, se.Value)
			require.Contains(t, se.Reason, c.reason)
		})
	}
}

// strictSpecOracle reads s with encoding/json: policy.ParseSpec's answer,
// accepted only when the text is valid UTF-8 and the object has no key
// but the two fields, spelt exactly, each at most once.
func strictSpecOracle(s string) (policy.Spec, bool) {
	spec, err := policy.ParseSpec([]byte(s))
	if err != nil || !utf8.ValidString(s) || unpairedSurrogate(s) {
		return policy.Spec{}, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if _, err := dec.Token(); err != nil { // "{"
		return policy.Spec{}, false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		key, _ := tok.(string)
		if err != nil || (key != specFieldPolicy && key != specFieldExclusive) || seen[key] {
			return policy.Spec{}, false
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return policy.Spec{}, false
		}
	}
	return spec, true
}

// unpairedSurrogate reports whether s has a \u escape of a UTF-16
// surrogate that is not half of a pair (encoding/json reads it as U+FFFD).
func unpairedSurrogate(s string) bool {
	s = strings.ReplaceAll(s, `\\`, "__") // escaped backslashes escape nothing after them
	s = surrogatePair.ReplaceAllString(s, "")
	return loneSurrogate.MatchString(s)
}

var (
	surrogatePair = regexp.MustCompile(`\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}`)
	loneSurrogate = regexp.MustCompile(`\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)
)

// specString draws a spec annotation: mostly a well-formed object of the
// two fields (or of keys miscased, misspelt, escaped, repeated) in any
// order with any spacing, values of every kind; otherwise also with a
// missing or extra comma, colon, brace or value, or text after it.
func specString() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 9).Draw(t, "anything") == 0 {
			return rapid.StringOfN(rapid.SampledFrom([]rune(`{}[]":, nul\tx1eE.-+`)), 0, 16, -1).Draw(t, "chars")
		}
		broken := rapid.IntRange(0, 2).Draw(t, "broken") == 0
		pick := func(label string, good []string, bad ...string) string {
			if broken {
				good = append(good, bad...)
			}
			return rapid.SampledFrom(good).Draw(t, label)
		}
		ws := func(label string) string { return pick(label, []string{"", "", " ", "\n\t", "\r\n  "}) }
		keys := rapid.SliceOfN(rapid.SampledFrom([]string{
			`"numaTopologyPolicy"`, `"singleNUMANodeExclusive"`, `"numaTopologyPolicy"`, `"singleNUMANodeExclusive"`,
			`"NumaTopologyPolicy"`, `"singlenumanodeexclusive"`, `"numaTopology\u0050olicy"`, `"numaTopologyPolic\ud800"`,
			`"other"`, `""`, "\"numa\xff\"",
		}), 0, 3).Draw(t, "keys")
		values := []string{`"SingleNUMANode"`, `"Restricted"`, `"BestEffort"`, `"None"`, `""`, `"Required"`, `"Preferred"`,
			`null`, `"Restr\u0069cted"`, `"Pre\u0066erred"`, "\"Restricted\xff\"", `1`, `true`, `{}`, `[null]`,
			`{"a":[1,{"b":"c"}]}`, `-0.5e+3`, `"\ud800"`, `"\ud83d\ude00"`, `"\udc00\ud800"`, `"a\\\\ud800"`, `"a\"b"`}
		var b strings.Builder
		b.WriteString(ws("lead") + pick("open", []string{"{"}, "[", ""))
		for i, k := range keys {
			if i > 0 {
				b.WriteString(pick("comma", []string{","}, "", ",,"))
			}
			b.WriteString(ws("before-key") + pick("key", []string{k}, `numaTopologyPolicy`, `"numaTopologyPolicy`))
			b.WriteString(ws("after-key") + pick("colon", []string{":"}, "", "::"))
			b.WriteString(ws("before-value") + pick("value", values, `nul`, `01`, `1.`, `"unterminated`, `"\x"`, "\"a\tb\""))
			b.WriteString(ws("after-value"))
		}
		b.WriteString(pick("close", []string{"}"}, ",}", "", "}}", "]"))
		b.WriteString(ws("trail") + pick("after", []string{""}, "{}", "x", "\xff"))
		return b.String()
	})
}

// checkSpecAnnotation fails when scanSpec accepts s otherwise than
// parseSpecStrict, when parseSpecAnnotation disagrees with the
// encoding/json oracle on s, or refuses it with anything but a
// *policy.SpecError (calling it malformed only when it is).
func checkSpecAnnotation(t interface{ Fatalf(string, ...any) }, s string) {
	if fast, ok := scanSpec(s); ok {
		if strict, err := parseSpecStrict(s); err != nil || strict != fast {
			t.Fatalf("scanSpec(%q) = %v; parseSpecStrict reads %v, %v", s, fast, strict, err)
		}
	}
	got, err := parseSpecAnnotation(s)
	want, ok := strictSpecOracle(s)
	if ok != (err == nil) || got != want {
		t.Fatalf("parseSpecAnnotation(%q) = %v, %v; encoding/json read strictly: %v, %v", s, got, err, want, ok)
	}
	if err == nil {
		return
	}
	var se *policy.SpecError
	if !errors.As(err, &se) || !errors.Is(err, policy.ErrInvalidSpec) || se.Reason == "" {
		t.Fatalf("parseSpecAnnotation(%q): error %v (%T) is not a *policy.SpecError", s, err, err)
	}
	if strings.HasPrefix(se.Reason, "malformed JSON") && json.Valid([]byte(s)) && !strings.Contains(se.Reason, "nested deeper") {
		t.Fatalf("parseSpecAnnotation(%q): well-formed JSON refused as malformed: %v", s, err)
	}
}

// TestSpecAnnotationOracle: parseSpecAnnotation accepts exactly what
// encoding/json accepts read strictly, with the same value, and scanSpec
// accepts only what parseSpecStrict accepts, with the same value.
func TestSpecAnnotationOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		for range 20 {
			checkSpecAnnotation(t, specString().Draw(t, "s"))
		}
	})
}

// FuzzSpecAnnotation: as TestSpecAnnotationOracle, on any text.
func FuzzSpecAnnotation(f *testing.F) {
	for _, s := range []string{`{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Preferred"}`,
		`{}`, `{"numaTopologyPolicy":null}`, `{"NumaTopologyPolicy":"x"}`, `{"a":1,"a":2}`, "{\"\xff\":1}",
		`{"numaTopologyPolicy":"Restr\u0069cted"}`, `[[[[]]]]`, `{} {}`, `{"x":[1,{"y":null}]}`, ``, `"\ud800"`,
		`{"numaTopologyPolicy":"\ud83d\ude00"}`, `{"numaTopologyPolicy":"\\ud800"}`, `{"policy":"Restricted"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkSpecAnnotation(t, s) })
}

// TestSpecAnnotationDeep: deep nesting is refused without exhausting the
// stack.
func TestSpecAnnotationDeep(t *testing.T) {
	for _, n := range []int{100, 20000, 200000} {
		s := `{"numaTopologyPolicy":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
		_, err := parseSpecAnnotation(s)
		require.ErrorIs(t, err, policy.ErrInvalidSpec)
	}
}

// TestSpecAnnotationAllocs: the common spec annotations are read without
// allocating.
func TestSpecAnnotationAllocs(t *testing.T) {
	for _, s := range []string{`{"numaTopologyPolicy":"SingleNUMANode"}`, `{}`,
		`{"numaTopologyPolicy":"Restricted","singleNUMANodeExclusive":"Preferred"}`} {
		if n := testing.AllocsPerRun(100, func() { _, _ = parseSpecAnnotation(s) }); n != 0 {
			t.Errorf("parseSpecAnnotation(%q): %v allocations", s, n)
		}
	}
}
