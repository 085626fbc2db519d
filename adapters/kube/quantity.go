package kube

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/numaplace/numaplace/internal/quote"
)

// ErrQuantity is the category of malformed quantity strings.
var ErrQuantity = errors.New("invalid quantity")

// quantity suffixes, as Kubernetes writes them.
var (
	binarySuffixes  = map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
	decimalSuffixes = map[string]int64{"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
)

// parseQuantity parses a Kubernetes quantity ("24", "500m", "1.5", "4Gi",
// "1e3") into an exact rational number. Negative quantities are refused.
// It is the exact path: ParseMilli, ParseWhole, ParseMiB and sameQuantity
// first try readFast, which reads the common forms without allocating and
// leaves every other string (and every error) to this one.
func parseQuantity(s string) (*big.Rat, error) {
	orig := s
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrQuantity)
	}
	mult := big.NewRat(1, 1)
	switch {
	case strings.HasSuffix(s, "m") && !strings.ContainsAny(s, "eE"):
		mult = big.NewRat(1, 1000)
		s = strings.TrimSuffix(s, "m")
	default:
		for suf, v := range binarySuffixes {
			if strings.HasSuffix(s, suf) {
				mult = new(big.Rat).SetInt64(v)
				s = strings.TrimSuffix(s, suf)
				break
			}
		}
		if mult.Cmp(big.NewRat(1, 1)) == 0 {
			for suf, v := range decimalSuffixes {
				if strings.HasSuffix(s, suf) && !strings.HasSuffix(s, "e"+suf) {
					mult = new(big.Rat).SetInt64(v)
					s = strings.TrimSuffix(s, suf)
					break
				}
			}
		}
	}
	if s == "" || strings.HasPrefix(s, "-") || strings.ContainsAny(s, " \t/") {
		return nil, fmt.Errorf("%w %s", ErrQuantity, quote.Short(orig))
	}
	if len(s) > 64 {
		return nil, fmt.Errorf("%w %s: too long", ErrQuantity, quote.Short(orig))
	}
	if !validNumber(s, mult.Cmp(big.NewRat(1, 1)) == 0) {
		return nil, fmt.Errorf("%w %s", ErrQuantity, quote.Short(orig))
	}
	v, ok := new(big.Rat).SetString(s)
	if !ok || v.Sign() < 0 {
		return nil, fmt.Errorf("%w %s", ErrQuantity, quote.Short(orig))
	}
	return v.Mul(v, mult), nil
}

// validNumber reports whether s is a number as Kubernetes writes it: an
// optional "+", digits with at most one ".", and (when no suffix was taken
// off, since an exponent is itself a suffix) an optional exponent "e" or "E"
// with at most three digits. It refuses what big.Rat would otherwise accept
// ("0x10", "0b11", "1_0") and exponents whose exact expansion is costly
// ("1e999999" takes tens of milliseconds).
func validNumber(s string, exponent bool) bool {
	s = strings.TrimPrefix(s, "+")
	digits, dot := 0, false
	i := 0
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
			continue
		case c == '.' && !dot:
			dot = true
			continue
		}
		break
	}
	if digits == 0 {
		return false
	}
	if i == len(s) {
		return true
	}
	if !exponent || (s[i] != 'e' && s[i] != 'E') {
		return false
	}
	exp := strings.TrimLeft(s[i+1:], "+-")
	if len(s[i+1:])-len(exp) > 1 || exp == "" || len(exp) > 3 {
		return false
	}
	for _, c := range exp {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ParseMilli parses a quantity into thousandths ("500m" is 500, "2" is
// 2000), rounding up as Kubernetes does for CPU.
func ParseMilli(s string) (int64, error) {
	if q, ok := readFast(s); ok {
		if v, _, ok := q.ceil(3, 0); ok {
			return v, nil
		}
	}
	return parseMilli(s)
}

// maxQuantity is the largest value a parse returns (the slow path refuses
// more as too large).
const maxQuantity = math.MaxInt64 / 1024

func parseMilli(s string) (int64, error) {
	v, err := parseQuantity(s)
	if err != nil {
		return 0, err
	}
	v.Mul(v, big.NewRat(1000, 1))
	return ceilInt64(v, s)
}

// ParseWhole parses a quantity that must be a whole number ("4", not "1.5"
// nor "500m").
func ParseWhole(s string) (int64, error) {
	if q, ok := readFast(s); ok {
		if v, exact, ok := q.ceil(0, 0); ok && exact {
			return v, nil
		}
	}
	return parseWhole(s)
}

func parseWhole(s string) (int64, error) {
	v, err := parseQuantity(s)
	if err != nil {
		return 0, err
	}
	if !v.IsInt() {
		return 0, fmt.Errorf("%w %s: not a whole number", ErrQuantity, quote.Short(s))
	}
	return ceilInt64(v, s)
}

// ParseMiB parses a memory quantity in bytes ("4Gi", "512Mi", "1e9") into
// MiB, rounding up.
func ParseMiB(s string) (int64, error) {
	if q, ok := readFast(s); ok {
		if v, _, ok := q.ceil(0, -20); ok {
			return v, nil
		}
	}
	return parseMiB(s)
}

func parseMiB(s string) (int64, error) {
	v, err := parseQuantity(s)
	if err != nil {
		return 0, err
	}
	v.Quo(v, big.NewRat(1<<20, 1))
	return ceilInt64(v, s)
}

func ceilInt64(v *big.Rat, s string) (int64, error) {
	n := new(big.Int).Quo(v.Num(), v.Denom())
	if new(big.Rat).SetInt(n).Cmp(v) < 0 {
		n.Add(n, big.NewInt(1))
	}
	if !n.IsInt64() || n.Int64() > maxQuantity {
		return 0, fmt.Errorf("%w %s: too large", ErrQuantity, quote.Short(s))
	}
	return n.Int64(), nil
}
