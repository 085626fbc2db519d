// Package controlplane starts a real etcd and kube-apiserver for the
// agent's tests: the binaries plugins/kube-scheduler/.ci-prepare builds
// from the Go module proxy (into plugins/kube-scheduler/bin, which
// plugins/agent/.ci-prepare runs), or those in NUMAPLACE_CONTROLPLANE_BIN.
// The API server authorises with RBAC (so that the agent's own rights can
// be tried) and authenticates an admin token and service-account tokens.
// Tests that use it skip with a clear message when the binaries are absent.
package controlplane
