#!/usr/bin/env bash
# Runs the core module's hot-path benchmarks (numa, topology, policy,
# allocator, adapters/...) from the repository root, then the side-by-side
# benchmarks of this module (numaplace against the kubelet, and the device
# plugin's preferred allocation against NVIDIA's go-gpuallocator), and
# prints the tables of ratios (the peer's ns/op divided by numaplace's, same
# input).
#
# Environment:
#   OUT        folder for the raw outputs (default: a new temporary folder)
#   BENCHTIME  -benchtime of the core module's benchmarks (default 1s)
#   COUNT      -count of every run (default 1; use 6+ for benchstat)
#   CORE=0     skip the core module's benchmarks
#   KUBELET_BENCHTIME  -benchtime of the kubelet sides (default 1s: the
#              slowest, a few seconds per merge, then run once; 1x is a
#              quick look)
#   GPUALLOCATOR_BENCHTIME  -benchtime of go-gpuallocator's sides (default
#              1s; its devices16/gpus2 and gpus4 take seconds per answer)
#
# The raw outputs are benchstat-compatible: core.txt and side-by-side.txt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
out=${OUT:-$(mktemp -d -t numaplace-bench.XXXXXX)}
mkdir -p "$out"
benchtime=${BENCHTIME:-1s}
count=${COUNT:-1}
kubelet_benchtime=${KUBELET_BENCHTIME:-1s}
gpuallocator_benchtime=${GPUALLOCATOR_BENCHTIME:-1s}

if [ "${CORE:-1}" != 0 ]; then
	echo "==> core module hot paths (benchtime $benchtime, count $count)" >&2
	(cd "$root" && go test -run '^$' -bench . -benchmem -benchtime "$benchtime" -count "$count" \
		./numa/... ./topology/... ./policy/... ./allocator/... ./adapters/...) | tee "$out/core.txt"
fi

echo "==> side by side: numaplace" >&2
(cd "$here" && go test -run '^$' -bench '/numaplace/' -benchmem -count "$count" .) | tee "$out/side-by-side.txt"
echo "==> side by side: kubelet (benchtime $kubelet_benchtime)" >&2
(cd "$here" && go test -run '^$' -bench '/kubelet/' -benchmem -benchtime "$kubelet_benchtime" -count "$count" .) |
	tee -a "$out/side-by-side.txt"
echo "==> side by side: go-gpuallocator (benchtime $gpuallocator_benchtime)" >&2
(cd "$here" && go test -run '^$' -bench '/gpuallocator/' -benchmem -benchtime "$gpuallocator_benchtime" -count "$count" .) |
	tee -a "$out/side-by-side.txt"

echo
echo "numaplace against the kubelet (k8s.io/kubernetes v1.37.2), same inputs; ratio = kubelet ns/op / numaplace ns/op:"
echo
(cd "$here" && go run ./cmd/ratios -target Merge/numa8/providers4=100 "$out/side-by-side.txt")
echo
echo "numaplace's device plugin against NVIDIA's go-gpuallocator (its best-effort policy alone), same machines; ratio = gpuallocator ns/op / numaplace ns/op:"
echo
(cd "$here" && go run ./cmd/ratios -peer gpuallocator "$out/side-by-side.txt")
echo
echo "raw outputs in $out" >&2
