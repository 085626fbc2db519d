package strictjson

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type inner struct {
	ID   *int   `json:"id"`
	CPUs string `json:"cpus"`
}

type text string

func (t *text) UnmarshalText(b []byte) error { *t = text(b); return nil }

type Embedded struct {
	Extra int `json:"extra"`
}

type outer struct {
	Embedded
	Op        string         `json:"op"`
	GPUs      int            `json:"gpus"`
	MemoryMiB int64          `json:"memoryMiB"`
	Policy    string         `json:"policy"`
	Nodes     []inner        `json:"numaNodes"`
	Devices   map[string]int `json:"devices"`
	Any       any            `json:"any"`
	Text      text           `json:"text"`
	Raw       json.RawMessage
	skipped   int
	Dash      int `json:"-"`
}

var aliases = map[string]string{"numaTopologyPolicy": "policy"}

func decode(s string, opts Options) (outer, error) {
	var o outer
	err := Decode([]byte(s), &o, opts)
	return o, err
}

func TestDecodeAccepts(t *testing.T) {
	o, err := decode(`{"op":"allocate","gpus":2,"memoryMiB":5,"extra":1,"numaNodes":[{"id":3,"cpus":"0-3"}],
		"devices":{"rdma":1,"RDMA":2},"any":{"a":[1,{"b":null}]},"text":"x","Raw":{"z":1},"policy":"\ud83d\ude00é"}`, Options{})
	require.NoError(t, err)
	require.Equal(t, "allocate", o.Op)
	require.Equal(t, 2, o.GPUs)
	require.Equal(t, 1, o.Extra)
	require.Equal(t, 3, *o.Nodes[0].ID)
	require.Equal(t, map[string]int{"rdma": 1, "RDMA": 2}, o.Devices) // map keys are data, not fields
	require.Equal(t, "😀é", o.Policy)
	require.Equal(t, text("x"), o.Text)
	_, err = decode(`null`, Options{})
	require.NoError(t, err)
}

func TestDecodeUnknownFields(t *testing.T) {
	for _, c := range []struct {
		in, msg string
		path    string
		field   string
		sugg    []string
	}{
		{`{"gpu":1}`, `unknown field "gpu"; did you mean "gpus"?`, "", "gpu", []string{"gpus"}},
		{`{"memoryMB":1}`, `unknown field "memoryMB"; did you mean "memoryMiB"?`, "", "memoryMB", []string{"memoryMiB"}},
		{`{"numaTopologyPolicy":"x"}`, `unknown field "numaTopologyPolicy"; did you mean "policy"?`, "", "numaTopologyPolicy", []string{"policy"}},
		{`{"GPUs":1}`, `unknown field "GPUs"; did you mean "gpus"?`, "", "GPUs", []string{"gpus"}},
		{`{"OP":"x"}`, `unknown field "OP"; did you mean "op"?`, "", "OP", []string{"op"}},
		{`{"pgus":1}`, `did you mean "gpus"?`, "", "pgus", []string{"gpus"}}, // transposition
		{`{"numaNodes":[{"id":1},{"ids":2}]}`, `unknown field "ids" in numaNodes[1]; did you mean "id"?`, "numaNodes[1]", "ids", []string{"id"}},
		{`{"colour":1}`, `unknown field "colour"`, "", "colour", nil},
		{`{"skipped":1}`, `unknown field "skipped"`, "", "skipped", nil},
		{`{"Dash":1}`, `unknown field "Dash"`, "", "Dash", nil},
		{`{"id":1}`, `unknown field "id"`, "", "id", nil},
	} {
		t.Run(c.in, func(t *testing.T) {
			_, err := decode(c.in, Options{Aliases: aliases})
			require.ErrorIs(t, err, ErrUnknownField)
			require.ErrorContains(t, err, c.msg)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, c.path, e.Path)
			require.Equal(t, c.field, e.Field)
			require.Equal(t, c.sugg, e.Suggestions)
		})
	}
}

// The lenient mode ignores unknown fields but not keys that differ from a
// known field only in case (encoding/json would fill the field with them).
func TestDecodeLenient(t *testing.T) {
	o, err := decode(`{"op":"a","future":{"x":[1,2]},"numaNodes":[{"id":1,"cpus":"0","new":true}]}`, Options{AllowUnknownFields: true})
	require.NoError(t, err)
	require.Equal(t, "a", o.Op)
	_, err = decode(`{"Op":"a"}`, Options{AllowUnknownFields: true})
	require.ErrorIs(t, err, ErrUnknownField)
	require.ErrorContains(t, err, `unknown field "Op"; did you mean "op"?`)
	// Duplicates and invalid UTF-8 are refused inside ignored values too.
	_, err = decode(`{"future":{"x":1,"x":2}}`, Options{AllowUnknownFields: true})
	require.ErrorIs(t, err, ErrDuplicateField)
	_, err = decode("{\"future\":\"\xff\"}", Options{AllowUnknownFields: true})
	require.ErrorIs(t, err, ErrInvalidUTF8)
}

func TestDecodeDuplicates(t *testing.T) {
	for in, msg := range map[string]string{
		`{"op":"a","op":"b"}`:              `duplicate field "op"`,
		`{"numaNodes":[{"id":1,"id":1}]}`:  `duplicate field "id" in numaNodes[0]`,
		`{"devices":{"rdma":1,"rdma":2}}`:  `duplicate field "rdma" in devices`,
		`{"any":{"a":{"b":1,"b":1}}}`:      `duplicate field "b" in any.a`,
		`{"text":"x","Raw":{"k":1,"k":2}}`: `duplicate field "k" in Raw`,
		`{"devices":{"a b":{},"a b":{}}}`:  `duplicate field "a b" in devices`,
		`{"any":{"a b":{"c":1,"c":1}}}`:    `duplicate field "c" in any["a b"]`,
	} {
		_, err := decode(in, Options{})
		require.ErrorIs(t, err, ErrDuplicateField, in)
		require.ErrorContains(t, err, msg, in)
	}
}

func TestDecodeInvalidUTF8(t *testing.T) {
	for in, msg := range map[string]string{
		"{\"op\":\"a\xffb\"}":               "a string at op is not valid UTF-8",
		"{\"op\\u00e9\xc3\":1}":             "the field name \"opé\uFFFD\" is not valid UTF-8",
		`{"op":"\ud800"}`:                   "a string at op is not valid UTF-8",
		`{"op":"\udc00x"}`:                  "a string at op is not valid UTF-8",
		`{"op":"\ud800\u0041"}`:             "a string at op is not valid UTF-8",
		`{"numaNodes":[{"cpus":"\ud83d"}]}`: "a string at numaNodes[0].cpus is not valid UTF-8",
		"[\"\xed\xa0\x80\"]":                "a string at [0] is not valid UTF-8", // an encoded surrogate
	} {
		var v any
		err := Decode([]byte(in), &v, Options{})
		if strings.HasPrefix(in, "{") {
			_, err = decode(in, Options{})
		}
		require.ErrorIs(t, err, ErrInvalidUTF8, in)
		require.ErrorContains(t, err, msg, in)
	}
	// Escapes that stand for valid characters are fine.
	_, err := decode(`{"op":"\\ud800 \u00e9 \ud83d\ude00 \\"}`, Options{})
	require.NoError(t, err)
}

func TestDecodeSyntax(t *testing.T) {
	for _, in := range []string{``, ` `, `{`, `{"op":}`, `{"op":"a"} {}`, `{"op":"a"}]`, `[1,]`, strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)} {
		var v any
		err := Decode([]byte(in), &v, Options{})
		require.ErrorIs(t, err, ErrSyntax, "%q", in)
	}
	var v any
	require.NoError(t, Decode([]byte(strings.Repeat("[", MaxDepth)+strings.Repeat("]", MaxDepth)), &v, Options{}))
}

func TestDecodeTypeErrors(t *testing.T) {
	_, err := decode(`{"numaNodes":[{"id":"x"}]}`, Options{})
	require.Error(t, err)
	require.ErrorContains(t, err, "numaNodes")
	var te *json.UnmarshalTypeError
	require.ErrorAs(t, err, &te)
	var o outer
	require.Error(t, Decode([]byte(`{}`), o, Options{}))
	require.Error(t, Decode([]byte(`{}`), (*outer)(nil), Options{}))
}

func TestOSADistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"gpu", "gpus", 1}, {"memorymb", "memorymib", 1}, {"pgus", "gpus", 1}, {"abc", "abc", 0},
		{"abc", "xyz", 2}, {"", "a", 1}, {"ab", "ba", 1}, {"id", "op", 2}, {"é", "e", 1}} {
		require.Equal(t, c.d, osaDistance(c.a, c.b, 1), "%s %s", c.a, c.b)
	}
}

// FuzzDecode: Decode never panics, and what it accepts encoding/json reads
// into the same value.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"op":"a","gpus":1}`, `{"gpu":1}`, `{"op":"a","op":"b"}`, "{\"op\":\"\xff\"}",
		`{"op":"\ud800"}`, `{"numaNodes":[{"id":1,"cpus":"0-3"}],"devices":{"x":1}}`, `{"OP":1}`, `[`, `null`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, lenient bool) {
		var a, b outer
		if err := Decode(data, &a, Options{AllowUnknownFields: lenient, Aliases: aliases}); err != nil {
			return
		}
		require.NoError(t, json.Unmarshal(data, &b))
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		require.Equal(t, string(jb), string(ja))
	})
}

// TestTopString: a top-level string field is read whatever else is wrong
// with the document, unless it is itself unreadable.
func TestTopString(t *testing.T) {
	for _, c := range []struct {
		data string
		want string
		ok   bool
	}{
		{`{"id":"a"}`, "a", true},
		{`{"x":{"id":"b","y":[1,{"z":2}]},"id":"a"}`, "a", true},
		{`{"id":"a","x":1,"x":2}`, "a", true},
		{"{\"id\":\"a\",\"x\":\"\xff\"}", "a", true},
		{`{"id":"a","x":"\ud800"}`, "a", true},
		{`{"id":"a","x":}`, "a", true},
		{`{"id":"a\u00e9"}`, "a\u00e9", true},
		{`{"x":1}`, "", false},
		{`{"id":1}`, "", false},
		{`{"id":null}`, "", false},
		{`{"id":["a"]}`, "", false},
		{`{"id":"a","id":"a"}`, "", false},
		{"{\"id\":\"a\xff\"}", "", false},
		{`{"id":"\udc00"}`, "", false},
		{`{"x":[1,2,,],"id":"a"}`, "", false},
		{`["id","a"]`, "", false},
		{``, "", false},
	} {
		got, ok := TopString([]byte(c.data), "id")
		if got != c.want || ok != c.ok {
			t.Errorf("TopString(%q) = %q, %v; want %q, %v", c.data, got, ok, c.want, c.ok)
		}
	}
}

// TestErrorCutsLongPaths: the path of an error deep in nested JSON, or
// through a long key, is cut to 64 bytes in the message.
func TestErrorCutsLongPaths(t *testing.T) {
	type doc struct {
		X any `json:"x"`
	}
	deep := `{"x":` + strings.Repeat(`[`, 500) + `{"a":1,"a":2}` + strings.Repeat(`]`, 500) + `}`
	longKey := `{"x":{"` + strings.Repeat("k", 300) + `":{"a":1,"a":2}}}`
	badKey := `{"x":{"` + strings.Repeat("k", 300) + `\u0001":"\ud800"}}`
	tooDeep := `{"x":` + strings.Repeat(`[`, MaxDepth+10) + strings.Repeat(`]`, MaxDepth+10) + `}`
	for name, in := range map[string]string{"deep": deep, "long key": longKey, "control key": badKey, "too deep": tooDeep} {
		var d doc
		err := Decode([]byte(in), &d, Options{})
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		msg := err.Error()
		if len(msg) > 200 || strings.Contains(msg, strings.Repeat("k", 65)) || strings.Contains(msg, strings.Repeat("[0]", 30)) || strings.Contains(msg, "\x01") {
			t.Errorf("%s: the error quotes the path uncut: %.300s", name, msg)
		}
		if !strings.Contains(msg, "bytes)") {
			t.Errorf("%s: the error does not say the path was cut: %s", name, msg)
		}
	}
}

// syntaxCases are inputs at the edges of the JSON grammar.
var syntaxCases = []string{
	``, ` `, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`, `1e5x`, `-01`, `2.0e10`,
	`true`, `tru`, `truex`, `nul`, `null `, `false`, `"a"`, `"a`, `"\x"`, `"\u12"`, `"\u12g4"`, `"\ud800"`,
	"\"a\tb\"", "\"\x7f\"", `"\/\b\f\n\r\t\\\""`, `[]`, `[ ]`, `[1,2]`, `[1 2]`, `[1,]`, `[,1]`, `{}`,
	`{ }`, `{"a":1}`, `{"a" 1}`, `{"a":1,}`, `{,"a":1}`, `{"a":1 "b":2}`, `{1:2}`, `{"a"}`, `{"a":}`,
	`[{"a":[{"b":[]}]}]`, "[1]\x00", "\x00", ` [1] `, `[1]]`, `{"a":1}}`, "\ufeff[1]", `["\u00e9"]`,
}

// TestSyntaxAgreesWithEncodingJSON: Decode refuses what encoding/json
// finds not valid (as malformed, unless a string before the fault is not
// valid UTF-8 or a key is repeated), and never calls valid JSON malformed.
func TestSyntaxAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range syntaxCases {
		checkSyntax(t, []byte(in))
	}
}

func checkSyntax(t *testing.T, data []byte) {
	t.Helper()
	var v any
	err := Decode(data, &v, Options{})
	if json.Valid(data) {
		require.False(t, errors.Is(err, ErrSyntax), "%q is valid JSON: %v", data, err)
		return
	}
	require.Error(t, err, "%q is not valid JSON", data)
	if !errors.Is(err, ErrInvalidUTF8) && !errors.Is(err, ErrDuplicateField) {
		require.ErrorIs(t, err, ErrSyntax, "%q", data)
	}
}

// FuzzSyntax: as TestSyntaxAgreesWithEncodingJSON, on any input.
func FuzzSyntax(f *testing.F) {
	for _, s := range syntaxCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkSyntax(t, data) })
}
