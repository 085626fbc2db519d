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
BenchmarkGetPreferredAllocation/numaplace/dgx-a100/gpus1 	 1000000	       300 ns/op	      16 B/op	       1 allocs/op
BenchmarkGetPreferredAllocation/numaplace/devices16/gpus2 	 1000000	       500 ns/op	      32 B/op	       1 allocs/op
BenchmarkGetPreferredAllocation/gpuallocator/dgx-a100/gpus1 	 1000000	       450 ns/op	     256 B/op	      16 allocs/op
BenchmarkGetPreferredAllocation/gpuallocator/devices16/gpus2 	       1	4000000000 ns/op	466512240 B/op	29615773 allocs/op
BenchmarkGetPreferredAllocation/numaplace/dgx-a100/gpus1 	 1000000	       900 ns/op	      16 B/op	       1 allocs/op
PASS
`

func TestRatios(t *testing.T) {
	results, order, err := parse(bufio.NewScanner(strings.NewReader(sample)))
	if err != nil {
		t.Fatal(err)
	}
	rows := pair(results, order, "kubelet")
	if len(rows) != 3 {
		t.Fatalf("got %d rows, want 3: %+v", len(rows), rows)
	}
	// Median of 20000, 22000 and 10000 is 20000: ratio 68e6 / 2e4 = 3400.
	if got := rows[0].ratio(); got != 3400 {
		t.Errorf("Merge ratio %v, want 3400", got)
	}
	if rows[1].hasPeer {
		t.Error("numa64 has no kubelet side")
	}
	if got := rows[2].ratio(); got != 3000 {
		t.Errorf("Admit ratio %v, want 3000", got)
	}
	out := table(rows, "kubelet")
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

// The same input against go-gpuallocator: only GetPreferredAllocation has
// that peer, ratios below 10 keep two digits.
func TestRatiosGPUAllocator(t *testing.T) {
	results, order, err := parse(bufio.NewScanner(strings.NewReader(sample)))
	if err != nil {
		t.Fatal(err)
	}
	rows := pair(results, order, "gpuallocator")
	if len(rows) != 2 || rows[0].bench != "GetPreferredAllocation" || !rows[0].hasPeer || !rows[1].hasPeer {
		t.Fatalf("got %+v, want the 2 GetPreferredAllocation cases", rows)
	}
	// Median of 300 and 900 is 600: 450 / 600 = 0.75.
	if got := rows[0].ratio(); got != 0.75 {
		t.Errorf("dgx-a100/gpus1 ratio %v, want 0.75", got)
	}
	out := table(rows, "gpuallocator")
	for _, want := range []string{
		"| benchmark | case | numaplace | gpuallocator | gpuallocator / numaplace | numaplace allocs/op | gpuallocator allocs/op | numaplace B/op | gpuallocator B/op |",
		"| GetPreferredAllocation | dgx-a100/gpus1 | 600 ns | 450 ns | 0.75x | 1 | 16 | 16 | 256 |",
		"| GetPreferredAllocation | devices16/gpus2 | 500 ns | 4.00 s | 8000000x | 1 | 29615773 | 32 | 466512240 |",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(table(pair(results, order, "kubelet"), "kubelet"), "GetPreferredAllocation") {
		t.Error("the kubelet's table lists a benchmark without a kubelet side")
	}
	line, _ := checkTarget(rows, "GetPreferredAllocation/dgx-a100/gpus1=1")
	if line != "target GetPreferredAllocation/dgx-a100/gpus1=1: numaplace is 0.75x faster: NOT met" {
		t.Errorf("target: %q", line)
	}
}
