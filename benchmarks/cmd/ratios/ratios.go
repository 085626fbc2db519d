package main

import (
	"bufio"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// result is one benchmark's measurements over its runs.
type result struct {
	ns, bytes, allocs []float64
}

// side is one side of a case: the medians of its runs (NaN when absent).
type side struct {
	ns, bytes, allocs float64
}

// row is one side-by-side case, such as Merge numa8/providers4: numaplace's
// side and the peer's (the kubelet's, go-gpuallocator's, ...).
type row struct {
	bench, cas string
	np, peer   side
	hasPeer    bool
}

// ratio is how many times faster numaplace is (peer ns/op / numaplace
// ns/op), NaN without a peer side.
func (r row) ratio() float64 {
	if !r.hasPeer || r.np.ns == 0 {
		return math.NaN()
	}
	return r.peer.ns / r.np.ns
}

var (
	procSuffix = regexp.MustCompile(`-\d+$`)
	numaNodes  = regexp.MustCompile(`\bnuma(\d+)\b`)
)

// parse reads benchmark result lines ("BenchmarkName-P N V ns/op V B/op V
// allocs/op ...") and gathers them by name (the -P suffix removed), in the
// order names first appear. Other lines are skipped.
func parse(sc *bufio.Scanner) (map[string]*result, []string, error) {
	out := map[string]*result{}
	var order []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		r := out[name]
		if r == nil {
			r = &result{}
			out[name] = r
			order = append(order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				r.ns = append(r.ns, v)
			case "B/op":
				r.bytes = append(r.bytes, v)
			case "allocs/op":
				r.allocs = append(r.allocs, v)
			}
		}
	}
	return out, order, sc.Err()
}

// median returns the median of xs, NaN when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func sideOf(r *result) side {
	return side{median(r.ns), median(r.bytes), median(r.allocs)}
}

// split cuts "BenchmarkMerge/numaplace/numa8/providers4" into "Merge",
// "numaplace" and "numa8/providers4".
func split(name string) (bench, who, cas string, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(name, "Benchmark"), "/", 3)
	if len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// pair builds the side-by-side rows of numaplace against peer, in the
// order their numaplace side first appears: every numaplace case of a
// benchmark that has a peer side in some case (cases numaplace alone runs,
// such as Merge's numa64 against the kubelet, are listed without the peer's
// columns; benchmarks without any case of the peer are left out).
func pair(results map[string]*result, order []string, peer string) []row {
	withPeer := map[string]bool{}
	for _, name := range order {
		if bench, who, _, ok := split(name); ok && who == peer {
			withPeer[bench] = true
		}
	}
	var rows []row
	for _, name := range order {
		bench, who, cas, ok := split(name)
		if !ok || who != "numaplace" || !withPeer[bench] {
			continue
		}
		r := row{bench: bench, cas: cas, np: sideOf(results[name])}
		if p, ok := results["Benchmark"+bench+"/"+peer+"/"+cas]; ok {
			r.peer, r.hasPeer = sideOf(p), true
		}
		rows = append(rows, r)
	}
	return rows
}

// human writes a time in ns/op with a readable unit.
func human(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "-"
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.1f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func count(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return strconv.FormatFloat(x, 'f', 0, 64)
}

// times writes a ratio: whole below 10 only when it is a whole number of
// times at two significant digits (1.5x, 0.047x, 3400x).
func times(x float64) string {
	if x >= 10 {
		return fmt.Sprintf("%.0fx", x)
	}
	return fmt.Sprintf("%.2gx", x)
}

// table renders the rows of numaplace against peer as a markdown table.
func table(rows []row, peer string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| benchmark | case | numaplace | %[1]s | %[1]s / numaplace | numaplace allocs/op | %[1]s allocs/op | numaplace B/op | %[1]s B/op |\n", peer)
	b.WriteString("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		pt, ratio, pAllocs, pBytes := "-", "-", "-", "-"
		if m := numaNodes.FindStringSubmatch(r.cas); m != nil && peer == "kubelet" {
			if n, _ := strconv.Atoi(m[1]); n > 8 {
				pt = "refused (more than 8 NUMA nodes)"
			}
		}
		if r.hasPeer {
			pt = human(r.peer.ns)
			ratio = times(r.ratio())
			pAllocs, pBytes = count(r.peer.allocs), count(r.peer.bytes)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.bench, r.cas, human(r.np.ns), pt, ratio,
			count(r.np.allocs), pAllocs, count(r.np.bytes), pBytes)
	}
	return b.String()
}

// checkTarget reads "Bench/case=N" and says whether numaplace is at least
// N times faster there.
func checkTarget(rows []row, target string) (string, error) {
	key, want, ok := strings.Cut(target, "=")
	n, err := strconv.ParseFloat(want, 64)
	if !ok || err != nil {
		return "", fmt.Errorf("bad -target %q, want CASE=N such as Merge/numa8/providers4=100", target)
	}
	for _, r := range rows {
		if r.bench+"/"+r.cas != key {
			continue
		}
		if !r.hasPeer {
			return fmt.Sprintf("target %s: no peer side", target), nil
		}
		verdict := "met"
		if r.ratio() < n {
			verdict = "NOT met"
		}
		return fmt.Sprintf("target %s: numaplace is %s faster: %s", target, times(r.ratio()), verdict), nil
	}
	return fmt.Sprintf("target %s: case not in the input", target), nil
}
