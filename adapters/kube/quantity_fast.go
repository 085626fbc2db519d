package kube

import (
	"math"
	"math/bits"
)

// fastQuantity is a quantity read without rational arithmetic: the exact
// value mant × 10^exp10 × 2^exp2.
type fastQuantity struct {
	mant  uint64
	exp10 int
	exp2  int
}

// pow10 holds the powers of ten that fit in a uint64.
var pow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// decimalSuffix and binarySuffix are the exponents of ten and of two of
// the quantity suffixes, by their (first) letter; 0 for any other byte.
var (
	decimalSuffix = [256]int8{'m': -3, 'k': 3, 'M': 6, 'G': 9, 'T': 12, 'P': 15, 'E': 18}
	binarySuffix  = [256]int8{'K': 10, 'M': 20, 'G': 30, 'T': 40, 'P': 50, 'E': 60}
)

// readFast reads the forms of a quantity that make up nearly every pod,
// without allocating: an optional "+", decimal digits with at most one "."
// (at least one digit, the digits as one number below 2^64), then nothing, "m", a
// decimal suffix (k, M, G, T, P, E), a binary suffix (Ki ... Ei) or an
// exponent ("e" or "E", at most one sign, one to three digits); s at most
// 64 bytes, without spaces. ok is false for every other string, valid or
// not: the caller then takes the exact path ([parseQuantity]), which also
// words every error. Whatever readFast accepts, parseQuantity accepts with
// the same value (TestQuantityFastPaths, FuzzQuantity).
func readFast(s string) (q fastQuantity, ok bool) {
	if len(s) == 0 || len(s) > 64 {
		return q, false
	}
	i := 0
	if s[0] == '+' {
		i++
	}
	digits, frac, dot := 0, 0, false
	for ; i < len(s); i++ {
		c := s[i]
		if c == '.' && !dot {
			dot = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		digits++
		if dot {
			frac++
		}
		if q.mant > (math.MaxUint64-9)/10 {
			return q, false
		}
		q.mant = q.mant*10 + uint64(c-'0')
	}
	if digits == 0 {
		return q, false
	}
	q.exp10 = -frac
	switch rest := s[i:]; {
	case rest == "":
	case len(rest) == 1 && decimalSuffix[rest[0]] != 0:
		q.exp10 += int(decimalSuffix[rest[0]])
	case len(rest) == 2 && rest[1] == 'i' && binarySuffix[rest[0]] != 0:
		q.exp2 = int(binarySuffix[rest[0]])
	case rest[0] == 'e' || rest[0] == 'E':
		e, neg := rest[1:], false
		if len(e) > 0 && (e[0] == '+' || e[0] == '-') {
			neg = e[0] == '-'
			e = e[1:]
		}
		if len(e) == 0 || len(e) > 3 {
			return q, false
		}
		n := 0
		for j := 0; j < len(e); j++ {
			if e[j] < '0' || e[j] > '9' {
				return q, false
			}
			n = n*10 + int(e[j]-'0')
		}
		if neg {
			n = -n
		}
		q.exp10 += n
	default:
		return q, false
	}
	return q, true
}

// ceil returns ⌈q × 10^a × 2^b⌉ and whether that is q × 10^a × 2^b
// exactly (nothing rounded). ok is false when a step does not fit in 64
// bits or the result is above maxQuantity: the exact path then answers.
func (q fastQuantity) ceil(a, b int) (v int64, exact, ok bool) {
	if q.mant == 0 {
		return 0, true, true
	}
	a += q.exp10
	b += q.exp2
	num, den := q.mant, uint64(1)
	if a >= 0 {
		if a >= len(pow10) {
			return 0, false, false
		}
		hi, lo := bits.Mul64(num, pow10[a])
		if hi != 0 {
			return 0, false, false
		}
		num = lo
	} else {
		if -a >= len(pow10) {
			return 0, false, false
		}
		den = pow10[-a]
	}
	if b >= 0 {
		if b >= 64 || num > math.MaxUint64>>b {
			return 0, false, false
		}
		num <<= b
	} else {
		if -b >= 64 || den > math.MaxUint64>>-b {
			return 0, false, false
		}
		den <<= -b
	}
	n, r := num/den, num%den
	if r != 0 {
		n++ // den > 1 here, so n < MaxUint64
	}
	if n > maxQuantity {
		return 0, false, false
	}
	return int64(n), r == 0, true
}

// equal reports whether q and o are the same amount; ok is false when the
// comparison does not fit in 64 bits (the exact path then answers).
func (q fastQuantity) equal(o fastQuantity) (eq, ok bool) {
	if q.mant == 0 || o.mant == 0 {
		return q.mant == o.mant, true
	}
	a, b := min(q.exp10, o.exp10), min(q.exp2, o.exp2)
	x, ok1 := scaleUp(q.mant, q.exp10-a, q.exp2-b)
	y, ok2 := scaleUp(o.mant, o.exp10-a, o.exp2-b)
	if !ok1 || !ok2 {
		return false, false
	}
	return x == y, true
}

// scaleUp returns m × 10^a × 2^b for a, b >= 0, and false when it does not
// fit in a uint64.
func scaleUp(m uint64, a, b int) (uint64, bool) {
	if a >= len(pow10) || b >= 64 {
		return 0, false
	}
	hi, lo := bits.Mul64(m, pow10[a])
	if hi != 0 || lo > math.MaxUint64>>b {
		return 0, false
	}
	return lo << b, true
}

// sameQuantity reports whether two quantity strings are the same amount
// (false when either is not a quantity).
func sameQuantity(a, b string) bool {
	if x, ok := readFast(a); ok {
		if a == b {
			return true
		}
		if y, ok := readFast(b); ok {
			if eq, ok := x.equal(y); ok {
				return eq
			}
		}
	}
	return sameQuantityExact(a, b)
}

// sameQuantityExact is sameQuantity by the exact rational parse.
func sameQuantityExact(a, b string) bool {
	x, errA := parseQuantity(a)
	y, errB := parseQuantity(b)
	return errA == nil && errB == nil && x.Cmp(y) == 0
}
