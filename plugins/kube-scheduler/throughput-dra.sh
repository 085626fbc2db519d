#!/bin/sh
# The side-by-side throughput trial for DRA pods: a real kube-apiserver and
# etcd (bin/, built by ./.ci-prepare), NODES fake nodes (half dgx-h100, half
# dgx-a100) each with the gpu.numaplace.io ResourceSlice numaplace-agent's
# DRA driver publishes, deploy/dra.yaml's DeviceClasses, PODS pods each with
# its own ResourceClaim for 1, 2 or 4 GPUs (three quarters with the ACK
# numa-topology-spec annotation), numaplace-scheduler run with the NUMAPlace
# profile and with kube-scheduler's defaults (DynamicResources' first fit),
# same binary, same client QPS and burst, at each client rate of RATES,
# ROUNDS times with the profiles taking turns to go first. Prints the median
# pods/s of each, their ratio and the API server's writes per pod (the
# claims' writes among them).
#
#   ./throughput-dra.sh [NODES [PODS [RATES [ROUNDS]]]]   # defaults: 1000 1000 500/1000 2
#
# NUMAPLACE_THROUGHPUT_PPROF=DIR also writes a CPU profile of the scheduler
# and one of the API server, over the first NUMAPLACE_THROUGHPUT_PPROF_SECONDS
# (default 20) seconds of binding of each run, into DIR.
set -eu
cd "$(dirname "$0")/cmd/numaplace-scheduler"
NUMAPLACE_THROUGHPUT_DRA=1 \
NUMAPLACE_THROUGHPUT_NODES="${1:-1000}" \
NUMAPLACE_THROUGHPUT_PODS="${2:-1000}" \
NUMAPLACE_THROUGHPUT_RATES="${3:-500/1000}" \
NUMAPLACE_THROUGHPUT_ROUNDS="${4:-2}" \
	GOWORK=off exec go test -run '^TestThroughputDRA$' -count=1 -timeout 60m -v .
