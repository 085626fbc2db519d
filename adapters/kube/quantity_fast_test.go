package kube

import (
	"math/big"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// quantityString draws a quantity string: mostly the forms Kubernetes
// accepts (a sign, digits with leading zeros, a fraction, a decimal or
// binary suffix, milli, an exponent, very long mantissas), often slightly
// wrong (two signs, a minus, a misspelt suffix, spaces, an exponent of
// four digits or after a suffix), sometimes anything from the characters
// of a quantity.
func quantityString() *rapid.Generator[string] {
	digits := func(t *rapid.T, label string, maxLen int) string {
		n := rapid.IntRange(0, maxLen).Draw(t, label+"-len")
		if rapid.IntRange(0, 3).Draw(t, label+"-long") == 0 {
			n = rapid.IntRange(0, 40).Draw(t, label+"-longlen")
		}
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + rapid.IntRange(0, 9).Draw(t, label)))
		}
		return b.String()
	}
	return rapid.Custom(func(t *rapid.T) string {
		if rapid.IntRange(0, 9).Draw(t, "anything") == 0 {
			return rapid.StringOfN(rapid.SampledFrom([]rune("0123456789.+-eEmkKMGTPi x_/")), 0, 12, -1).Draw(t, "chars")
		}
		sign := rapid.SampledFrom([]string{"", "", "", "+", "-", "++", "+-"}).Draw(t, "sign")
		s := sign + digits(t, "int", 6)
		if rapid.Bool().Draw(t, "dot") {
			s += "." + digits(t, "frac", 4)
		}
		switch rapid.IntRange(0, 4).Draw(t, "suffix-kind") {
		case 0:
		case 1:
			s += rapid.SampledFrom([]string{"m", "k", "M", "G", "T", "P", "E"}).Draw(t, "decimal")
		case 2:
			s += rapid.SampledFrom([]string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}).Draw(t, "binary")
		case 3:
			s += rapid.SampledFrom([]string{"e", "E"}).Draw(t, "e") +
				rapid.SampledFrom([]string{"", "", "+", "-", "+-"}).Draw(t, "exp-sign") + digits(t, "exp", 4)
		case 4:
			s += rapid.SampledFrom([]string{"K", "i", "mi", "Kib", "eE", "e3k", "e3m", "3Mi", "Em", ".5", ".", "", " ", "\t"}).Draw(t, "odd")
		}
		if rapid.IntRange(0, 7).Draw(t, "pad") == 0 { // about the 64 bytes the exact path takes
			s = strings.Repeat("0", max(0, rapid.IntRange(60, 70).Draw(t, "padded")-len(s))) + s
		}
		if rapid.IntRange(0, 15).Draw(t, "spaces") == 0 {
			s = " " + s + " "
		}
		return s
	})
}

// ratOf is the exact value of q.
func ratOf(q fastQuantity) *big.Rat {
	v := new(big.Rat).SetInt(new(big.Int).SetUint64(q.mant))
	ten := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(q.exp10))), nil)
	two := new(big.Int).Lsh(big.NewInt(1), uint(abs(q.exp2)))
	for _, f := range []struct {
		n   *big.Int
		exp int
	}{{ten, q.exp10}, {two, q.exp2}} {
		if f.exp >= 0 {
			v.Mul(v, new(big.Rat).SetInt(f.n))
		} else {
			v.Quo(v, new(big.Rat).SetInt(f.n))
		}
	}
	return v
}

func abs(n int) int { return max(n, -n) }

// checkFastQuantity fails when the fast path disagrees with the exact one
// on s: readFast accepts only what parseQuantity accepts, with the same
// value, and the three parsers give the same amounts and errors.
func checkFastQuantity(t interface{ Fatalf(string, ...any) }, s string) {
	if q, ok := readFast(s); ok {
		v, err := parseQuantity(s)
		if err != nil {
			t.Fatalf("readFast(%q) = %+v, the exact parse refuses it: %v", s, q, err)
		}
		if got := ratOf(q); got.Cmp(v) != 0 {
			t.Fatalf("readFast(%q) = %+v = %s, the exact parse says %s", s, q, got.RatString(), v.RatString())
		}
	}
	for _, p := range []struct {
		name       string
		fast, slow func(string) (int64, error)
	}{{"milli", ParseMilli, parseMilli}, {"whole", ParseWhole, parseWhole}, {"MiB", ParseMiB, parseMiB}} {
		fast, errFast := p.fast(s)
		slow, errSlow := p.slow(s)
		if fast != slow || (errFast == nil) != (errSlow == nil) ||
			(errFast != nil && errFast.Error() != errSlow.Error()) {
			t.Fatalf("%s(%q): fast %d %v, exact %d %v", p.name, s, fast, errFast, slow, errSlow)
		}
	}
}

// sameValueString writes the value of s (a quantity the exact path
// accepts) in another form Kubernetes accepts: plain, milli, binary,
// decimal suffix, exponent, with a sign or extra zeros.
func sameValueString(t *rapid.T, s string) string {
	v, err := parseQuantity(s)
	if err != nil {
		return s
	}
	var forms []string
	if v.IsInt() {
		n := v.Num()
		forms = append(forms, n.String(), "+"+n.String(), n.String()+".00", "0"+n.String(), n.String()+"e0",
			new(big.Int).Mul(n, big.NewInt(1000)).String()+"m")
		for _, suf := range []struct {
			s string
			v int64
		}{{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}} {
			if q, r := new(big.Int).QuoRem(n, big.NewInt(suf.v), new(big.Int)); r.Sign() == 0 {
				forms = append(forms, q.String()+suf.s)
			}
		}
		if n.Sign() > 0 {
			forms = append(forms, n.String()+"0e-1")
		}
	}
	if m := new(big.Rat).Mul(v, big.NewRat(1000, 1)); m.IsInt() {
		forms = append(forms, m.Num().String()+"m", m.Num().String()+"e-3")
	}
	for k := 0; k <= 20; k++ {
		if f := v.FloatString(k); new(big.Rat).SetFrac(v.Num(), v.Denom()).Cmp(mustRat(f)) == 0 {
			forms = append(forms, f, f+"0")
			break
		}
	}
	if len(forms) == 0 {
		return s
	}
	return rapid.SampledFrom(forms).Draw(t, "same-value")
}

func mustRat(s string) *big.Rat {
	v, ok := new(big.Rat).SetString(s)
	if !ok {
		panic("not a rational: " + s)
	}
	return v
}

// TestQuantityFastPaths: the fast paths (readFast, and through it
// ParseMilli, ParseWhole, ParseMiB and sameQuantity) answer exactly what
// the exact rational parse answers, on every form of quantity and on
// malformed ones (where the error is the exact path's).
func TestQuantityFastPaths(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		for i := range 20 { // many strings per check: each is cheap
			s := quantityString().Draw(t, "s")
			if rapid.IntRange(0, 4).Draw(t, "plain") == 0 {
				n := rapid.Int64Range(0, 1e15).Draw(t, "n")
				if rapid.Bool().Draw(t, "huge") {
					n = rapid.Int64Range(0, 1<<62).Draw(t, "big")
				}
				s = strconv.FormatInt(n, 10) + rapid.SampledFrom([]string{"", "m", "k", "Mi", "Gi", "Ti", "Ei"}).Draw(t, "suffix")
			}
			checkFastQuantity(t, s)
			o := quantityString().Draw(t, "other")
			if rapid.Bool().Draw(t, "same") {
				o = sameValueString(t, s)
			}
			if fast, exact := sameQuantity(s, o), sameQuantityExact(s, o); fast != exact {
				t.Fatalf("string %d: sameQuantity(%q, %q) = %v, exactly %v", i, s, o, fast, exact)
			}
		}
	})
}

// TestQuantityFastForms pins the forms the fast path takes itself (the
// rest goes to the exact path, which the property test compares it with).
func TestQuantityFastForms(t *testing.T) {
	for _, s := range []string{"24", "+5", "0", "500m", "1.5", ".5", "5.", "4Gi", "512Mi", "2k", "7E", "1e3", "1E+3",
		"5e-1", "0e999", "0.0001", "18446744073709551609", "0000000000000000000000000000001",
		"1.00000000000000", "123.4567890123456789", "0.000000000000000001Ei", "8191Pi", "1e-19", "1.0000000000000000000"} {
		if _, ok := readFast(s); !ok {
			t.Errorf("readFast(%q) leaves it to the exact path", s)
		}
		checkFastQuantity(t, s)
	}
	for _, s := range []string{"", " 4", "4 ", "-1", "++1", "1e1000", "1e", "1e3k", "1Ki5", "1K", "0x10", "1_0",
		"184467440737095516150", strings.Repeat("0", 64) + "1"} {
		if q, ok := readFast(s); ok {
			t.Errorf("readFast(%q) = %+v, want it left to the exact path", s, q)
		}
		checkFastQuantity(t, s)
	}
}

// TestSameQuantity: amounts written differently are the same, including
// where the fast comparison would overflow 64 bits (17Ei is 2^64 + 2^60).
func TestSameQuantity(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"4", "4000m", true}, {"64Gi", "68719476736", true}, {"1.5", "1500m", true}, {"1k", "1e3", true},
		{"0", "0m", true}, {"0", "0Ei", true}, {"+2", "2", true}, {"2", "2.000", true},
		{"1", "1m", false}, {"1Gi", "1G", false}, {"17Ei", "1152921504606846976", false}, {"17Ei", "1Ei", false},
		{"1", "x", false}, {"x", "x", false}, {"-1", "-1", false}, {"", "", false},
	} {
		for _, ab := range [][2]string{{c.a, c.b}, {c.b, c.a}} {
			if got := sameQuantity(ab[0], ab[1]); got != c.want {
				t.Errorf("sameQuantity(%q, %q) = %v, want %v", ab[0], ab[1], got, c.want)
			}
			if got := sameQuantityExact(ab[0], ab[1]); got != c.want {
				t.Errorf("sameQuantityExact(%q, %q) = %v, want %v", ab[0], ab[1], got, c.want)
			}
		}
	}
}

// FuzzQuantityFast checks the fast paths against the exact parse on any
// string, and sameQuantity against its exact form on any pair.
func FuzzQuantityFast(f *testing.F) {
	for _, s := range [][2]string{{"24", "24000m"}, {"500m", "0.5"}, {"4Gi", "4096Mi"}, {"1e3", "1k"},
		{"+.5", "5e-1"}, {"7E", "7000P"}, {"1Ei", "1152921504606846976"}, {"0e999", "0"},
		{"99999999999999999999", "1e20"}, {"1e-999", "0"}, {" 1", "1"}, {"1.0000000000000000000001", "1"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		checkFastQuantity(t, a)
		if fast, exact := sameQuantity(a, b), sameQuantityExact(a, b); fast != exact {
			t.Fatalf("sameQuantity(%q, %q) = %v, exactly %v", a, b, fast, exact)
		}
	})
}
