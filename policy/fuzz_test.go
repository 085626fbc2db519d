package policy_test

import (
	"errors"
	"testing"

	"github.com/numaplace/numaplace/policy"
)

// FuzzParseSpec checks that ParseSpec never panics, that every error is a
// *SpecError unwrapping to ErrInvalidSpec, and that an accepted spec
// survives MarshalJSON and ParseSpec unchanged.
func FuzzParseSpec(f *testing.F) {
	for _, seed := range []string{
		``,
		`{}`,
		`null`,
		`[]`,
		`42`,
		`{"numaTopologyPolicy":"SingleNUMANode","singleNUMANodeExclusive":"Preferred"}`,
		`{"numaTopologyPolicy":"Restricted"}`,
		`{"numaTopologyPolicy":"BestEffort","singleNUMANodeExclusive":"Required"}`,
		`{"numaTopologyPolicy":"","singleNUMANodeExclusive":""}`,
		`{"numaTopologyPolicy":null}`,
		`{"numaTopologyPolicy":1}`,
		`{"numaTopologyPolicy":"restricted"}`,
		`{"singleNUMANodeExclusive":"Sometimes"}`,
		`{"numaTopologyPolicy":"None","x":[1,2,{"y":null}]}`,
		`{"numaTopologyPolicy":"None"} {}`,
		`{}}`,
		`{"numaTopologyPolicy":"Restr\u0069cted"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := policy.ParseSpec(data)
		if err != nil {
			var se *policy.SpecError
			if !errors.As(err, &se) || !errors.Is(err, policy.ErrInvalidSpec) {
				t.Fatalf("ParseSpec(%q) error %v (%T) is not a *SpecError wrapping ErrInvalidSpec", data, err, err)
			}
			if s != (policy.Spec{}) {
				t.Fatalf("ParseSpec(%q) failed but returned %v", data, s)
			}
			return
		}
		if !s.Policy.Valid() || !s.Exclusive.Valid() {
			t.Fatalf("ParseSpec(%q) = invalid %#v", data, s)
		}
		b, err := s.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON(%#v): %v", s, err)
		}
		back, err := policy.ParseSpec(b)
		if err != nil {
			t.Fatalf("ParseSpec(%s) after MarshalJSON: %v", b, err)
		}
		if back != s {
			t.Fatalf("round trip of %q: %#v -> %s -> %#v", data, s, b, back)
		}
	})
}
