// Command ratios reads `go test -bench` output and prints, for every
// side-by-side benchmark named BenchmarkX/numaplace/CASE and
// BenchmarkX/kubelet/CASE, a markdown table of the two sides' time and
// allocations per operation and the ratio kubelet / numaplace (how many
// times faster numaplace is). Cases that only numaplace runs (such as
// numa64, which the kubelet refuses) are listed with the kubelet's columns
// empty. With several runs of a benchmark (-count), the median of each
// column is used.
//
// Usage:
//
//	go test -run '^$' -bench . -benchmem . | go run ./cmd/ratios
//	go run ./cmd/ratios FILE...
//
// The flag -target "CASE=N" (repeatable) adds a line saying whether
// numaplace is at least N times faster on CASE, for instance
// -target Merge/numa8/providers4=100. The exit status is 0 whatever the
// ratios; it is 1 only when the input cannot be read or holds no
// side-by-side pair.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

type targets []string

func (t *targets) String() string     { return strings.Join(*t, ",") }
func (t *targets) Set(v string) error { *t = append(*t, v); return nil }

func main() {
	var tg targets
	flag.Var(&tg, "target", "CASE=N: report whether numaplace is at least N times faster on CASE (repeatable)")
	flag.Parse()
	var in io.Reader = os.Stdin
	if flag.NArg() > 0 {
		var rs []io.Reader
		for _, name := range flag.Args() {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, "ratios:", err)
				os.Exit(1)
			}
			defer f.Close()
			rs = append(rs, f)
		}
		in = io.MultiReader(rs...)
	}
	results, order, err := parse(bufio.NewScanner(in))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratios:", err)
		os.Exit(1)
	}
	rows := pair(results, order)
	if len(rows) == 0 {
		fmt.Fprintln(os.Stderr, "ratios: no BenchmarkX/numaplace/CASE results in the input")
		os.Exit(1)
	}
	fmt.Print(table(rows))
	for _, t := range tg {
		line, err := checkTarget(rows, t)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ratios:", err)
			os.Exit(1)
		}
		fmt.Println(line)
	}
}
