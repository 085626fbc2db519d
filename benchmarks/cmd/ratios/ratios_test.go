package main

import (
	"bufio"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkMerge/numaplace/numa8/providers4-2         	   58089	     20000 ns/op	       0 B/op	       0 allocs/op
BenchmarkMerge/kubelet/numa8/providers4-2           	      21	  68000000 ns/op	33206120 B/op	 1009757 allocs/op
BenchmarkMerge/numaplace/numa8/providers4-2         	   58089	     22000 ns/op	       0 B/op	       0 allocs/op
BenchmarkMerge/numaplace/numa8/providers4-2         	   58089	     10000 ns/op	       0 B/op	       0 allocs/op
BenchmarkMerge/numaplace/numa64/providers4-2        	   30934	     39133 ns/op	       0 B/op	       0 allocs/op
--- BENCH: BenchmarkAdmit/kubelet/dgx-a100-2
    bench_test.go:113: kubelet hints per resource: map[cpu:255]
BenchmarkAdmit/numaplace/dgx-a100                   	   14431	     80000 ns/op	   26456 B/op	      68 allocs/op
BenchmarkAdmit/kubelet/dgx-a100                     	       5	 240000000 ns/op	140753432 B/op	 2871487 allocs/op
BenchmarkFit/dgx-h100/SingleNUMANode-2              	 1000000	      1000 ns/op
PASS
`

func TestRatios(t *testing.T) {
	results, order, err := parse(bufio.NewScanner(strings.NewReader(sample)))
	if err != nil {
		t.Fatal(err)
	}
	rows := pair(results, order)
	if len(rows) != 3 {
		t.Fatalf("got %d rows, want 3: %+v", len(rows), rows)
	}
	// Median of 20000, 22000 and 10000 is 20000: ratio 68e6 / 2e4 = 3400.
	if got := rows[0].ratio(); got != 3400 {
		t.Errorf("Merge ratio %v, want 3400", got)
	}
	if rows[1].hasKubelet {
		t.Error("numa64 has no kubelet side")
	}
	if got := rows[2].ratio(); got != 3000 {
		t.Errorf("Admit ratio %v, want 3000", got)
	}
	out := table(rows)
	for _, want := range []string{
		"| Merge | numa8/providers4 | 20.0 µs | 68.0 ms | 3400x | 0 | 1009757 | 0 | 33206120 |",
		"| Merge | numa64/providers4 | 39.1 µs | refused (more than 8 NUMA nodes) | - | 0 | - | 0 | - |",
		"| Admit | dgx-a100 | 80.0 µs | 240.0 ms | 3000x | 68 | 2871487 | 26456 | 140753432 |",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	line, err := checkTarget(rows, "Merge/numa8/providers4=100")
	if err != nil || line != "target Merge/numa8/providers4=100: numaplace is 3400x faster: met" {
		t.Errorf("target: %q, %v", line, err)
	}
	line, _ = checkTarget(rows, "Admit/dgx-a100=5000")
	if !strings.HasSuffix(line, "NOT met") {
		t.Errorf("target: %q", line)
	}
	if _, err := checkTarget(rows, "Merge"); err == nil {
		t.Error("a target without =N must be an error")
	}
}
