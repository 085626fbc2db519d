package policy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// requireSpecError checks that err is a *policy.SpecError for field naming
// value, that it unwraps to ErrInvalidSpec and that its message quotes both.
func requireSpecError(t *testing.T, err error, field, value string) *policy.SpecError {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, policy.ErrInvalidSpec)
	var se *policy.SpecError
	require.ErrorAs(t, err, &se)
	require.Equal(t, field, se.Field)
	require.Equal(t, value, se.Value)
	require.NotEmpty(t, se.Reason)
	if field != "" {
		require.Contains(t, err.Error(), field)
		require.Contains(t, err.Error(), fmt.Sprintf("%q", value))
	}
	return se
}

func TestPolicyNames(t *testing.T) {
	tests := []struct {
		p    policy.Policy
		name string
	}{
		{policy.None, "None"},
		{policy.SingleNUMANode, "SingleNUMANode"},
		{policy.Restricted, "Restricted"},
		{policy.BestEffort, "BestEffort"},
	}
	require.Equal(t, []policy.Policy{policy.None, policy.SingleNUMANode, policy.Restricted, policy.BestEffort},
		policy.Policies)
	require.Equal(t, policy.None, policy.Policy(0), "the zero value is None")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, tt.p.Valid())
			require.Equal(t, tt.name, tt.p.String())

			got, err := policy.ParsePolicy(tt.name)
			require.NoError(t, err)
			require.Equal(t, tt.p, got)

			b, err := tt.p.MarshalText()
			require.NoError(t, err)
			require.Equal(t, tt.name, string(b))

			var u policy.Policy = 99
			require.NoError(t, u.UnmarshalText([]byte(tt.name)))
			require.Equal(t, tt.p, u)

			// As a JSON value (through the text marshalers).
			j, err := json.Marshal(tt.p)
			require.NoError(t, err)
			require.Equal(t, `"`+tt.name+`"`, string(j))
			var back policy.Policy
			require.NoError(t, json.Unmarshal(j, &back))
			require.Equal(t, tt.p, back)
		})
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in   string
		want policy.Policy
		bad  bool
	}{
		{in: "", want: policy.None}, // as Koordinator writes it
		{in: "None", want: policy.None},
		{in: "SingleNUMANode", want: policy.SingleNUMANode},
		{in: "Restricted", want: policy.Restricted},
		{in: "BestEffort", want: policy.BestEffort},
		// Names are case-sensitive.
		{in: "none", bad: true},
		{in: "NONE", bad: true},
		{in: "singleNUMANode", bad: true},
		{in: "SingleNumaNode", bad: true},
		{in: "restricted", bad: true},
		{in: "besteffort", bad: true},
		// No trimming, no aliases.
		{in: " Restricted", bad: true},
		{in: "Restricted ", bad: true},
		{in: "single-numa-node", bad: true},
		{in: "Bogus", bad: true},
		{in: "Policy(1)", bad: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			got, err := policy.ParsePolicy(tt.in)
			if tt.bad {
				requireSpecError(t, err, "numaTopologyPolicy", tt.in)
				require.Equal(t, policy.None, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPolicyInvalid(t *testing.T) {
	p := policy.Policy(7)
	require.False(t, p.Valid())
	require.Equal(t, "Policy(7)", p.String())
	_, err := p.MarshalText()
	require.ErrorIs(t, err, policy.ErrInvalidSpec)
	_, err = json.Marshal(p)
	require.Error(t, err)

	// A failed UnmarshalText leaves the value alone.
	q := policy.Restricted
	err = q.UnmarshalText([]byte("restricted"))
	requireSpecError(t, err, "numaTopologyPolicy", "restricted")
	require.Equal(t, policy.Restricted, q)
}

func TestExclusivity(t *testing.T) {
	require.Equal(t, policy.Required, policy.Exclusivity(0), "the zero value is Required")
	for _, tt := range []struct {
		e    policy.Exclusivity
		name string
	}{{policy.Required, "Required"}, {policy.Preferred, "Preferred"}} {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, tt.e.Valid())
			require.Equal(t, tt.name, tt.e.String())
			b, err := tt.e.MarshalText()
			require.NoError(t, err)
			require.Equal(t, tt.name, string(b))
			var u policy.Exclusivity = 9
			require.NoError(t, u.UnmarshalText(b))
			require.Equal(t, tt.e, u)
		})
	}

	e := policy.Exclusivity(2)
	require.False(t, e.Valid())
	require.Equal(t, "Exclusivity(2)", e.String())
	_, err := e.MarshalText()
	require.ErrorIs(t, err, policy.ErrInvalidSpec)

	u := policy.Preferred
	requireSpecError(t, u.UnmarshalText([]byte("preferred")), "singleNUMANodeExclusive", "preferred")
	require.Equal(t, policy.Preferred, u, "a failed UnmarshalText changes nothing")
}

func TestParseExclusivity(t *testing.T) {
	tests := []struct {
		in   string
		want policy.Exclusivity
		bad  bool
	}{
		{in: "", want: policy.Required},
		{in: "Required", want: policy.Required},
		{in: "Preferred", want: policy.Preferred},
		{in: "required", bad: true},
		{in: "PREFERRED", bad: true},
		{in: " Required", bad: true},
		{in: "true", bad: true},
		{in: "None", bad: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.in), func(t *testing.T) {
			got, err := policy.ParseExclusivity(tt.in)
			if tt.bad {
				requireSpecError(t, err, "singleNUMANodeExclusive", tt.in)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestParseSpec(t *testing.T) {
	type spec = policy.Spec
	tests := []struct {
		name  string
		in    string
		want  spec
		field string // for an error: the field named ("" for the document)
		value string // for an error on a field: the value named
		bad   bool
		msg   string // a part of the error message, when set
	}{
		{name: "both", in: `{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Preferred"}`,
			want: spec{policy.SingleNUMANode, policy.Preferred}},
		{name: "both required", in: `{"numaTopologyPolicy": "Restricted", "singleNUMANodeExclusive": "Required"}`,
			want: spec{policy.Restricted, policy.Required}},
		{name: "policy only", in: `{"numaTopologyPolicy":"BestEffort"}`, want: spec{policy.BestEffort, policy.Required}},
		{name: "exclusive only", in: `{"singleNUMANodeExclusive":"Preferred"}`, want: spec{policy.None, policy.Preferred}},
		{name: "empty object", in: `{}`, want: spec{}},
		{name: "empty strings", in: `{"numaTopologyPolicy":"","singleNUMANodeExclusive":""}`, want: spec{}},
		{name: "nulls", in: `{"numaTopologyPolicy":null,"singleNUMANodeExclusive":null}`, want: spec{}},
		{name: "null with spaces", in: `{"numaTopologyPolicy": null , "singleNUMANodeExclusive":"Preferred"}`,
			want: spec{policy.None, policy.Preferred}},
		{name: "escaped string", in: `{"numaTopologyPolicy":"Restr\u0069cted"}`, want: spec{policy.Restricted, policy.Required}},
		{name: "surrounding whitespace", in: " \n\t{\"numaTopologyPolicy\":\"None\"}\n ", want: spec{}},

		{name: "unknown policy", in: `{"numaTopologyPolicy":"restricted"}`, bad: true,
			field: "numaTopologyPolicy", value: "restricted"},
		{name: "unknown exclusivity", in: `{"numaTopologyPolicy":"Restricted","singleNUMANodeExclusive":"Sometimes"}`,
			bad: true, field: "singleNUMANodeExclusive", value: "Sometimes"},
		{name: "policy is a number", in: `{"numaTopologyPolicy":1}`, bad: true, field: "numaTopologyPolicy", value: "1"},
		{name: "policy is a bool", in: `{"numaTopologyPolicy":true}`, bad: true, field: "numaTopologyPolicy", value: "true"},
		{name: "policy is an object", in: `{"numaTopologyPolicy":{}}`, bad: true, field: "numaTopologyPolicy", value: "{}"},
		{name: "exclusivity is a number", in: `{"singleNUMANodeExclusive":0}`, bad: true,
			field: "singleNUMANodeExclusive", value: "0"},
		{name: "exclusivity is a list", in: `{"singleNUMANodeExclusive":["Required"]}`, bad: true,
			field: "singleNUMANodeExclusive", value: `["Required"]`},

		{name: "extra field", in: `{"numaTopologyPolicy":"Restricted","other":[1,{"x":null}],"n":3}`, bad: true,
			msg: `unknown field "other"`},
		{name: "field names are exact", in: `{"NumaTopologyPolicy":"Restricted"}`, bad: true,
			msg: `unknown field "NumaTopologyPolicy"; did you mean "numaTopologyPolicy"?`},
		{name: "one edit away", in: `{"numaTopologyPolicy":"None","singleNUMANodeExclusiv":"Preferred"}`, bad: true,
			msg: `did you mean "singleNUMANodeExclusive"?`},
		{name: "the decision's name", in: `{"policy":"Restricted"}`, bad: true,
			msg: `unknown field "policy"; did you mean "numaTopologyPolicy"?`},
		{name: "repeated field", in: `{"numaTopologyPolicy":"None","numaTopologyPolicy":"Restricted"}`, bad: true,
			msg: `duplicate field "numaTopologyPolicy"`},
		{name: "invalid UTF-8", in: "{\"numaTopologyPolicy\":\"None\xff\"}", bad: true, msg: "not valid UTF-8"},
		{name: "empty input", in: ``, bad: true},
		{name: "only spaces", in: `   `, bad: true},
		{name: "truncated", in: `{"numaTopologyPolicy":"None"`, bad: true},
		{name: "not JSON", in: `numaTopologyPolicy=None`, bad: true},
		{name: "null document", in: `null`, bad: true},
		{name: "array", in: `[{"numaTopologyPolicy":"None"}]`, bad: true},
		{name: "number", in: `42`, bad: true},
		{name: "string", in: `"SingleNUMANode"`, bad: true},
		{name: "trailing object", in: `{"numaTopologyPolicy":"None"} {}`, bad: true},
		{name: "trailing garbage", in: `{} x`, bad: true},
		{name: "trailing brace", in: `{}}`, bad: true},
		{name: "trailing bracket", in: `{"numaTopologyPolicy":"Restricted"}]`, bad: true},
		{name: "trailing comma", in: `{},`, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := policy.ParseSpec([]byte(tt.in))
			if !tt.bad {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			require.Equal(t, policy.Spec{}, got)
			if tt.field != "" {
				requireSpecError(t, err, tt.field, tt.value)
				return
			}
			require.ErrorIs(t, err, policy.ErrInvalidSpec)
			var se *policy.SpecError
			require.ErrorAs(t, err, &se)
			require.Empty(t, se.Field, "a document-level error names no field")
			require.Equal(t, tt.in, se.Value)
			require.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestSpecJSON(t *testing.T) {
	for _, p := range policy.Policies {
		for _, e := range []policy.Exclusivity{policy.Required, policy.Preferred} {
			s := policy.Spec{Policy: p, Exclusive: e}
			t.Run(s.Policy.String()+"/"+s.Exclusive.String(), func(t *testing.T) {
				b, err := s.MarshalJSON()
				require.NoError(t, err)
				require.JSONEq(t, fmt.Sprintf(`{"numaTopologyPolicy":%q,"singleNUMANodeExclusive":%q}`, p, e), string(b))
				require.Equal(t, string(b), s.String())

				back, err := policy.ParseSpec(b)
				require.NoError(t, err)
				require.Equal(t, s, back)

				// Through encoding/json, as a value and inside a struct.
				type pod struct {
					Spec  policy.Spec  `json:"spec"`
					Maybe *policy.Spec `json:"maybe,omitempty"`
				}
				in := pod{Spec: s, Maybe: &s}
				j, err := json.Marshal(in)
				require.NoError(t, err)
				var out pod
				require.NoError(t, json.Unmarshal(j, &out))
				require.Equal(t, in.Spec, out.Spec)
				require.Equal(t, s, *out.Maybe)
			})
		}
	}

	// UnmarshalJSON is ParseSpec, errors included, and leaves the value alone.
	s := policy.Spec{Policy: policy.Restricted}
	err := json.Unmarshal([]byte(`{"numaTopologyPolicy":"Whatever"}`), &s)
	require.ErrorIs(t, err, policy.ErrInvalidSpec)
	require.Equal(t, policy.Spec{Policy: policy.Restricted}, s)

	// An invalid spec does not marshal; String still says something.
	bad := policy.Spec{Policy: policy.Policy(9), Exclusive: policy.Preferred}
	_, err = bad.MarshalJSON()
	require.ErrorIs(t, err, policy.ErrInvalidSpec)
	require.Equal(t, "Spec{Policy(9), Preferred}", bad.String())
	_, err = policy.Spec{Exclusive: policy.Exclusivity(5)}.MarshalJSON()
	require.ErrorIs(t, err, policy.ErrInvalidSpec)
}

func TestSpecErrorMessage(t *testing.T) {
	err := &policy.SpecError{Field: "numaTopologyPolicy", Value: "x", Reason: "unknown policy"}
	require.Equal(t, `invalid NUMA topology spec: numaTopologyPolicy "x": unknown policy`, err.Error())
	doc := &policy.SpecError{Value: "[]", Reason: "want a JSON object"}
	require.Equal(t, "invalid NUMA topology spec: want a JSON object", doc.Error())
	require.True(t, errors.Is(doc, policy.ErrInvalidSpec))
}

func TestNodeTypes(t *testing.T) {
	m := numa.MaskOf
	tests := []struct {
		name           string
		spans          []numa.Mask
		single, shared numa.Mask
	}{
		{name: "nothing live"},
		{name: "empty spans count nowhere", spans: []numa.Mask{0, 0}},
		{name: "one single", spans: []numa.Mask{m(0)}, single: m(0)},
		{name: "two singles on one node", spans: []numa.Mask{m(3), m(3)}, single: m(3)},
		{name: "one multi", spans: []numa.Mask{m(0, 1)}, shared: m(0, 1)},
		// docs/design.md's worked example: a 2-CPU SingleNUMANode pod on node 0.
		{name: "worked example", spans: []numa.Mask{m(0)}, single: m(0)},
		{name: "shared wins over single", spans: []numa.Mask{m(0), m(0, 1), m(2)}, single: m(2), shared: m(0, 1)},
		{name: "order does not matter", spans: []numa.Mask{m(2), m(0, 1), m(0)}, single: m(2), shared: m(0, 1)},
		{name: "high nodes", spans: []numa.Mask{m(63), m(61, 62)}, single: m(63), shared: m(61, 62)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			single, shared := policy.NodeTypes(tt.spans)
			require.Equal(t, tt.single, single, "single")
			require.Equal(t, tt.shared, shared, "shared")
		})
	}
}

func TestTypeOf(t *testing.T) {
	single, shared := numa.MaskOf(1, 4), numa.MaskOf(2, 3)
	want := []policy.NodeType{policy.Idle, policy.Single, policy.Shared, policy.Shared, policy.Single, policy.Idle}
	for i, w := range want {
		require.Equal(t, w, policy.TypeOf(i, single, shared), "node %d", i)
	}
	// A node in both masks (not produced by NodeTypes) is shared.
	require.Equal(t, policy.Shared, policy.TypeOf(0, numa.MaskOf(0), numa.MaskOf(0)))
	require.Equal(t, policy.Idle, policy.TypeOf(63, single, shared))

	require.Equal(t, "idle", policy.Idle.String())
	require.Equal(t, "single", policy.Single.String())
	require.Equal(t, "shared", policy.Shared.String())
	require.Equal(t, "NodeType(3)", policy.NodeType(3).String())
}

func TestAllowed(t *testing.T) {
	m := numa.MaskOf
	all := numa.FirstN(4)
	tests := []struct {
		name           string
		span           numa.Mask
		single, shared numa.Mask
		want           bool
	}{
		{name: "empty span", span: 0, single: all, shared: all, want: true},
		{name: "one idle node", span: m(0), want: true},
		{name: "one single node", span: m(0), single: m(0), want: true},
		{name: "one shared node", span: m(0), shared: m(0, 1), want: false},
		{name: "two idle nodes", span: m(0, 1), want: true},
		{name: "two shared nodes", span: m(0, 1), shared: m(0, 1), want: true},
		{name: "multi over a single node", span: m(0, 1), single: m(1), want: false},
		{name: "multi over shared and idle", span: m(1, 2), shared: m(0, 1), want: true},
		{name: "multi beside a single node", span: m(1, 2), single: m(0, 3), want: true},
		// docs/design.md's worked example (dgx-h100): node 0 single, the 8-GPU
		// Restricted pod's span {0,1} is forbidden, a one-node span on
		// node 0 or node 1 is fine.
		{name: "worked example 8-GPU span", span: m(0, 1), single: m(0), want: false},
		{name: "worked example 1-node span", span: m(0), single: m(0), want: true},
		{name: "worked example other node", span: m(1), single: m(0), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, policy.Allowed(tt.span, tt.single, tt.shared))
			if tt.span != 0 {
				pool := policy.AllowedPool(tt.span.Count(), all, tt.single, tt.shared)
				require.Equal(t, tt.want, tt.span.IsSubsetOf(pool), "AllowedPool agrees")
			}
		})
	}
}

func TestAllowedPool(t *testing.T) {
	all := numa.FirstN(6)
	single, shared := numa.MaskOf(0, 1), numa.MaskOf(2, 3)
	require.Equal(t, numa.MaskOf(0, 1, 4, 5), policy.AllowedPool(1, all, single, shared))
	require.Equal(t, numa.MaskOf(2, 3, 4, 5), policy.AllowedPool(2, all, single, shared))
	require.Equal(t, numa.MaskOf(2, 3, 4, 5), policy.AllowedPool(6, all, single, shared))
	require.Equal(t, policy.AllowedPool(1, all, single, shared), policy.AllowedPool(0, all, single, shared),
		"width 0 is treated as width 1")
	require.Equal(t, numa.MaskOf(4), policy.AllowedPool(2, numa.MaskOf(0, 4), single, shared), "inside all only")
	require.Equal(t, all, policy.AllowedPool(3, all, 0, 0), "no live allocation: everything")
}

func TestWidth(t *testing.T) {
	tests := []struct {
		p                   policy.Policy
		widthCap, widthFree int
		want                int
	}{
		{policy.SingleNUMANode, 2, 3, 1},
		{policy.SingleNUMANode, 0, 0, 1},
		{policy.Restricted, 2, 3, 2},
		{policy.Restricted, 1, 4, 1},
		{policy.BestEffort, 2, 3, 3},
		{policy.BestEffort, 4, 1, 1},
		{policy.None, 2, 3, 0},
		{policy.Policy(9), 2, 3, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%d/%d", tt.p, tt.widthCap, tt.widthFree), func(t *testing.T) {
			require.Equal(t, tt.want, policy.Width(tt.p, tt.widthCap, tt.widthFree))
		})
	}
}

func TestBinds(t *testing.T) {
	for _, p := range policy.Policies {
		t.Run(p.String(), func(t *testing.T) {
			require.Equal(t, p != policy.None, policy.Binds(p, policy.Required), "Required")
			require.False(t, policy.Binds(p, policy.Preferred), "Preferred removes the rule")
		})
	}
}

// genSpans draws the spans of a handful of live allocations on n nodes.
func genSpans(t *rapid.T, n int) []numa.Mask {
	all := uint64(numa.FirstN(n))
	k := rapid.IntRange(0, 8).Draw(t, "live")
	spans := make([]numa.Mask, k)
	for i := range spans {
		// Mostly narrow spans, as in real placements.
		if rapid.Bool().Draw(t, fmt.Sprintf("narrow%d", i)) {
			spans[i] = numa.MaskOf(rapid.IntRange(0, n-1).Draw(t, fmt.Sprintf("node%d", i)))
		} else {
			spans[i] = numa.Mask(rapid.Uint64().Draw(t, fmt.Sprintf("span%d", i)) & all)
		}
	}
	return spans
}

func TestPropertyNodeTypes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, numa.MaxNodes).Draw(t, "nodes")
		spans := genSpans(t, n)
		single, shared := policy.NodeTypes(spans)
		var union numa.Mask
		for _, s := range spans {
			union |= s
		}
		if single&shared != 0 {
			t.Fatalf("single %s and shared %s overlap", single, shared)
		}
		if single|shared != union {
			t.Fatalf("single %s + shared %s != union of spans %s", single, shared, union)
		}
		for i := range union.All() {
			multi := false
			for _, s := range spans {
				multi = multi || (s.Contains(i) && s.Count() > 1)
			}
			if multi != shared.Contains(i) {
				t.Fatalf("node %d: in a multi-node span %v, shared %v", i, multi, shared.Contains(i))
			}
		}
	})
}

func TestPropertyAllowedPool(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, numa.MaxNodes).Draw(t, "nodes")
		all := numa.FirstN(n)
		var single, shared numa.Mask
		if rapid.Bool().Draw(t, "fromSpans") {
			single, shared = policy.NodeTypes(genSpans(t, n))
		} else { // any masks, even overlapping ones
			single = numa.Mask(rapid.Uint64().Draw(t, "single")) & all
			shared = numa.Mask(rapid.Uint64().Draw(t, "shared")) & all
		}
		span := numa.Mask(rapid.Uint64().Draw(t, "span")) & all
		if rapid.Bool().Draw(t, "narrow") {
			span = numa.MaskOf(rapid.IntRange(0, n-1).Draw(t, "node"))
		}
		if span == 0 {
			span = numa.MaskOf(n - 1)
		}
		got := policy.Allowed(span, single, shared)
		pool := policy.AllowedPool(span.Count(), all, single, shared)
		if got != span.IsSubsetOf(pool) {
			t.Fatalf("Allowed(%s, single %s, shared %s) = %v, but pool of width %d is %s",
				span, single, shared, got, span.Count(), pool)
		}
		if !pool.IsSubsetOf(all) {
			t.Fatalf("pool %s outside all %s", pool, all)
		}
	})
}

func TestSpecErrorCutsLongValues(t *testing.T) {
	long := `{"numaTopologyPolicy":"` + strings.Repeat("x", 1<<16) + `"}`
	_, err := policy.ParseSpec([]byte(long))
	require.ErrorIs(t, err, policy.ErrInvalidSpec)
	require.Less(t, len(err.Error()), 300, "the error quotes a short prefix of the value: %.300s", err)
	require.Contains(t, err.Error(), "bytes)")
}
