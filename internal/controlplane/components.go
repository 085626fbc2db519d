package controlplane

import (
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// ComponentBinary returns the path of a control-plane binary in [BinDir]
// (kube-apiserver, etcd, kube-controller-manager or kube-scheduler), or
// skips the test saying how to build it.
func ComponentBinary(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(BinDir(t), name)
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Skipf("no real %s: %s is not built; run plugins/kube-scheduler/.ci-prepare (plugins/agent/.ci-prepare runs it; "+
			"it builds the control plane from the Go module proxy, a few minutes) or set NUMAPLACE_CONTROLPLANE_BIN", name, p)
	}
	return p
}

// ControllerManagerControllers are the controllers StartControllerManager
// runs by default: the resourceclaim controller (it creates a pod's
// ResourceClaims from its ResourceClaimTemplates, removes a pod that is
// done from a claim's reservedFor and deallocates a claim no pod uses any
// more) and the garbage collector (it deletes a deleted pod's generated
// claims, which the pod owns).
var ControllerManagerControllers = []string{"resourceclaim-controller", "garbage-collector-controller"}

// StartControllerManager runs kube-controller-manager (ComponentBinary)
// against the API server as the admin, without leader election, with the
// given controllers (ControllerManagerControllers when none; no service
// account credentials per controller, so the token controller is not
// needed), its secure port on loopback, stopped at the end of the test. It
// waits until its /healthz answers.
func (c *ControlPlane) StartControllerManager(t testing.TB, controllers ...string) {
	t.Helper()
	if len(controllers) == 0 {
		controllers = ControllerManagerControllers
	}
	c.startComponent(t, "kube-controller-manager",
		"--controllers", strings.Join(controllers, ","),
		"--use-service-account-credentials=false")
}

// StartScheduler runs the upstream kube-scheduler (ComponentBinary) with
// its default profile ("default-scheduler": pods that name no scheduler,
// the DynamicResources plugin among its defaults) against the API server
// as the admin, without leader election, its secure port on loopback,
// stopped at the end of the test. It waits until its /healthz answers.
func (c *ControlPlane) StartScheduler(t testing.TB) {
	t.Helper()
	c.startComponent(t, "kube-scheduler")
}

// startComponent runs the control-plane binary name against the API
// server as the admin, without leader election, its secure port on
// loopback, with the extra arguments, and waits until its /healthz
// answers.
func (c *ControlPlane) startComponent(t testing.TB, name string, extra ...string) {
	t.Helper()
	startComponent(t, c.dir, c.Kubeconfig(t), name, extra...)
}

// startComponent runs the control-plane binary name with the kubeconfig,
// without leader election, its secure port on loopback, its log and
// certificates in dir, with the extra arguments, and waits until its
// /healthz answers.
func startComponent(t testing.TB, dir, kubeconfig, name string, extra ...string) {
	t.Helper()
	bin := ComponentBinary(t, name)
	port := FreePort(t)
	args := append([]string{
		"--kubeconfig", kubeconfig,
		"--leader-elect=false",
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(dir, name+"-certs"),
		"--v", "2"}, extra...)
	StartProcess(t, dir, name, exec.Command(bin, args...))
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test server with a self-signed certificate
	waitHTTP(t, dir, name, insecure, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", "")
}

// StartControllerManager runs kube-controller-manager as
// [ControlPlane.StartControllerManager] does, against the API server of
// cfg (a control plane started by [Start]), its log in a directory of the
// test's own.
func StartControllerManager(t testing.TB, cfg *rest.Config, controllers ...string) {
	t.Helper()
	if len(controllers) == 0 {
		controllers = ControllerManagerControllers
	}
	startComponent(t, t.TempDir(), Kubeconfig(t, cfg), "kube-controller-manager",
		"--controllers", strings.Join(controllers, ","),
		"--use-service-account-credentials=false")
}

// Log returns the log of a process the control plane started (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler), "" when it
// has none.
func (c *ControlPlane) Log(name string) string {
	data, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
	return string(data)
}
