package kube

import (
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// TestQuantityFastPaths: the plain-integer shortcuts answer exactly what
// the exact rational parse answers.
func TestQuantityFastPaths(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Int64Range(0, 1e15).Draw(t, "n")
		if rapid.Bool().Draw(t, "huge") {
			n = rapid.Int64Range(0, 999999999999999).Draw(t, "big")
		}
		digits := strconv.FormatInt(n, 10)
		suffix := rapid.SampledFrom([]string{"", "m", "Mi", "Gi", "Ti"}).Draw(t, "suffix")
		s := digits + suffix
		for name, pair := range map[string][2]func(string) (int64, error){
			"milli": {ParseMilli, parseMilli},
			"whole": {ParseWhole, parseWhole},
			"MiB":   {ParseMiB, parseMiB},
		} {
			fast, errFast := pair[0](s)
			slow, errSlow := pair[1](s)
			if (errFast == nil) != (errSlow == nil) || fast != slow {
				t.Fatalf("%s(%q): fast %d %v, exact %d %v", name, s, fast, errFast, slow, errSlow)
			}
		}
	})
}
