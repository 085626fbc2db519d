// Package controlplane is the test harness both plugin modules share
// (plugins/agent and plugins/kube-scheduler): it starts a real etcd and
// kube-apiserver, and on request kube-controller-manager and the upstream
// kube-scheduler, for a test; it starts and stops any other program a test
// runs ([StartProcess], [FreePort]); and it finds the repository's files
// ([RepoRoot], [RepoPath]) without asking where its own source lies.
//
// It is a module of its own (github.com/numaplace/numaplace/internal/controlplane),
// so that the core module stays free of Kubernetes code; the plugin modules
// require it and find it through a replace directive
// (=> ../../internal/controlplane), and the go.work at the repository root
// puts all of them in one workspace for editors and for running tests across
// modules by hand.
//
// The binaries: plugins/kube-scheduler/.ci-prepare builds kube-apiserver,
// etcd, kube-controller-manager and kube-scheduler from the Go module proxy
// into plugins/kube-scheduler/bin (plugins/agent/.ci-prepare runs it); set
// NUMAPLACE_CONTROLPLANE_BIN to use others. Tests that need them skip with a
// message saying how to build them when they are absent.
//
// The API server authorises with RBAC, so that a component's own rights can
// be tried, and authenticates the admin's bearer token ([Token], in
// system:masters) and service-account tokens.
//
//	cp := controlplane.StartControlPlane(t) // etcd and kube-apiserver, stopped at the end of t
//	client, err := kubernetes.NewForConfig(cp.Config)
//	controlplane.ApplyFiles(t, cp.Config, controlplane.RepoPath(t, "deploy", "agent.yaml"))
package controlplane
