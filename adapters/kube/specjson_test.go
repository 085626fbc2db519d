package kube

import (
	"encoding/json"
	"errors"
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
		field, value string // the field and value named (field "" for the document)
		reason       string // part of the reason
	}{
		{"unknown field", `{"numaTopologyPolicy":"Restricted","numaNodes":[0,1]}`, "numaNodes", "[0,1]",
			`unknown field; a NUMA topology spec has only "numaTopologyPolicy" and "singleNUMANodeExclusive"`},
		{"miscased key", `{"NumaTopologyPolicy":"Restricted"}`, "NumaTopologyPolicy", "Restricted",
			`keys are case-sensitive: "numaTopologyPolicy"`},
		{"lower-case key", `{"singlenumanodeexclusive":"Preferred"}`, "singlenumanodeexclusive", "Preferred",
			`keys are case-sensitive: "singleNUMANodeExclusive"`},
		{"duplicate key", `{"numaTopologyPolicy":"Restricted","numaTopologyPolicy":"SingleNUMANode"}`,
			"numaTopologyPolicy", "SingleNUMANode", "appears twice"},
		{"duplicate after null", `{"numaTopologyPolicy":null,"numaTopologyPolicy":"SingleNUMANode"}`,
			"numaTopologyPolicy", "SingleNUMANode", "appears twice"},
		{"invalid UTF-8 value", "{\"numaTopologyPolicy\":\"Restricted\xff\"}", "numaTopologyPolicy", "Restricted\xff",
			"not valid UTF-8"},
		{"invalid UTF-8 key", "{\"numa\xc3\":\"Restricted\"}", "", "{\"numa\xc3\":\"Restricted\"}", "not valid UTF-8"},
		{"number", `{"numaTopologyPolicy":1}`, "numaTopologyPolicy", "1", "want a string"},
		{"object", `{"singleNUMANodeExclusive":{"a":[true,false,null,-1.5e3]}}`, "singleNUMANodeExclusive",
			`{"a":[true,false,null,-1.5e3]}`, "want a string"},
		{"unknown policy", `{"numaTopologyPolicy":"restricted"}`, "numaTopologyPolicy", "restricted", "unknown policy"},
		{"unknown exclusivity", `{"singleNUMANodeExclusive":"Sometimes"}`, "singleNUMANodeExclusive", "Sometimes", "unknown value"},
		{"array", `[{"numaTopologyPolicy":"None"}]`, "", `[{"numaTopologyPolicy":"None"}]`, "want a JSON object"},
		{"null document", `null`, "", `null`, "want a JSON object"},
		{"string document", `"SingleNUMANode"`, "", `"SingleNUMANode"`, "want a JSON object"},
		{"empty", ``, "", ``, "malformed JSON"},
		{"truncated", `{"numaTopologyPolicy":"None"`, "", `{"numaTopologyPolicy":"None"`, "malformed JSON"},
		{"trailing comma", `{"numaTopologyPolicy":"None",}`, "", `{"numaTopologyPolicy":"None",}`, "malformed JSON"},
		{"trailing object", `{} {}`, "", `{} {}`, "malformed JSON: data after the object"},
		{"trailing brace", `{}}`, "", `{}}`, "malformed JSON: data after the object"},
		{"bad escape", `{"numaTopologyPolicy":"\x"}`, "", `{"numaTopologyPolicy":"\x"}`, "malformed JSON"},
		{"control character", "{\"numaTopologyPolicy\":\"a\tb\"}", "", "{\"numaTopologyPolicy\":\"a\tb\"}", "malformed JSON"},
		// Malformed JSON is named before the faults of what comes before it.
		{"unknown field, then truncated", `{"x":1,`, "", `{"x":1,`, "malformed JSON"},
		{"unknown policy, then garbage", `{"numaTopologyPolicy":"x"} x`, "", `{"numaTopologyPolicy":"x"} x`, "malformed JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseSpecAnnotation(c.in)
			require.Equal(t, policy.Spec{}, got)
			require.ErrorIs(t, err, policy.ErrInvalidSpec)
			var se *policy.SpecError
			require.ErrorAs(t, err, &se)
			require.Equal(t, c.field, se.Field)
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
	if err != nil || !utf8.ValidString(s) {
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
			`{"a":[1,{"b":"c"}]}`, `-0.5e+3`, `"\ud800"`, `"a\"b"`}
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

// checkSpecAnnotation fails when parseSpecAnnotation disagrees with the
// encoding/json oracle on s, or refuses it with anything but a
// *policy.SpecError (naming malformed JSON whenever encoding/json finds
// the text malformed).
func checkSpecAnnotation(t interface{ Fatalf(string, ...any) }, s string) {
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
	if specSyntaxError(s) != nil && !strings.HasPrefix(se.Reason, "malformed JSON") {
		t.Fatalf("parseSpecAnnotation(%q): malformed JSON refused as %v", s, err)
	}
}

// TestSpecAnnotationOracle: the hand-written parser accepts exactly what
// encoding/json accepts read strictly, with the same value.
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
		`{"numaTopologyPolicy":"Restr\u0069cted"}`, `[[[[]]]]`, `{} {}`, `{"x":[1,{"y":null}]}`, ``, `"\ud800"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkSpecAnnotation(t, s) })
}

// TestSpecAnnotationDeep: deep nesting is refused without exhausting the
// stack (encoding/json stops at 10000 levels too).
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
