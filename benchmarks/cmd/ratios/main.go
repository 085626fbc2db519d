// Command ratios reads `go test -bench` output and prints, for every
// side-by-side benchmark named BenchmarkX/numaplace/CASE and
// BenchmarkX/PEER/CASE, a markdown table of the two sides' time and
// allocations per operation and the ratio PEER / numaplace (how many
// times faster numaplace is). PEER is the flag -peer: kubelet (the
// default) or gpuallocator (NVIDIA's go-gpuallocator). Cases that only
// numaplace runs (such as numa64, which the kubelet refuses) are listed
// with the peer's columns empty; benchmarks without any case of the peer
// are left out. With several runs of a benchmark (-count), the median of
// each column is used.
//
// Usage:
//
//	go test -run '^$' -bench . -benchmem . | go run ./cmd/ratios
//	go run ./cmd/ratios FILE...
//	go run ./cmd/ratios -peer gpuallocator FILE...
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
	peer := flag.String("peer", "kubelet", "the other side: the benchmarks' second name element, BenchmarkX/PEER/CASE")
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
	rows := pair(results, order, *peer)
	if len(rows) == 0 {
		fmt.Fprintf(os.Stderr, "ratios: no BenchmarkX/numaplace/CASE results beside BenchmarkX/%s/CASE in the input\n", *peer)
		os.Exit(1)
	}
	fmt.Print(table(rows, *peer))
	for _, t := range tg {
		line, err := checkTarget(rows, t)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ratios:", err)
			os.Exit(1)
		}
		fmt.Println(line)
	}
}
