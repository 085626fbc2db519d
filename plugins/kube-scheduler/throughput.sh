#!/bin/sh
# The side-by-side throughput trial: a real kube-apiserver and etcd (bin/,
# built by ./.ci-prepare), NODES fake nodes (half dgx-h100, half dgx-a100),
# PODS pods of every kind, numaplace-scheduler run with the NUMAPlace profile
# and with kube-scheduler's defaults only (same binary, same client QPS and
# burst), at each client rate of RATES ("shipped" is
# deploy/scheduler-config.yaml's), ROUNDS times with the profiles taking
# turns to go first. Prints the median pods/s of each, their ratio and the
# API server's writes per pod.
#
#   ./throughput.sh [NODES [PODS [RATES [ROUNDS]]]]   # defaults: 1000 2000 shipped,500/1000 2
#
# NUMAPLACE_THROUGHPUT_PPROF=DIR also writes a CPU profile of the scheduler
# and one of the API server, over the first NUMAPLACE_THROUGHPUT_PPROF_SECONDS
# (default 20) seconds of binding of each run, into DIR.
set -eu
cd "$(dirname "$0")/cmd/numaplace-scheduler"
NUMAPLACE_THROUGHPUT=1 \
NUMAPLACE_THROUGHPUT_NODES="${1:-1000}" \
NUMAPLACE_THROUGHPUT_PODS="${2:-2000}" \
NUMAPLACE_THROUGHPUT_RATES="${3:-shipped,500/1000}" \
NUMAPLACE_THROUGHPUT_ROUNDS="${4:-2}" \
	exec go test -run '^TestThroughput$' -count=1 -timeout 90m -v .
