package controlplane

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// ComponentBinary returns the path of a control-plane component built
// beside kube-apiserver (kube-controller-manager or kube-scheduler: the
// same bin/ directory or NUMAPLACE_CONTROLPLANE_BIN), or skips the test
// saying how to build it.
func ComponentBinary(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("NUMAPLACE_CONTROLPLANE_BIN")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "..", "kube-scheduler", "bin")
	}
	p, err := filepath.Abs(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("the path of %s: %v", name, err)
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Skipf("no real %s: %s is not built; run plugins/agent/.ci-prepare (it runs plugins/kube-scheduler/.ci-prepare, "+
			"which builds it from the Go module proxy, a few minutes) or set NUMAPLACE_CONTROLPLANE_BIN", name, p)
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
	bin := ComponentBinary(t, "kube-controller-manager")
	if len(controllers) == 0 {
		controllers = ControllerManagerControllers
	}
	kubeconfig := c.Kubeconfig(t)
	port := freePort(t)
	p := startProcess(t, c.dir, "kube-controller-manager", bin,
		"--kubeconfig", kubeconfig,
		"--leader-elect=false",
		"--controllers", strings.Join(controllers, ","),
		"--use-service-account-credentials=false",
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(c.dir, "kube-controller-manager-certs"),
		"--v", "2")
	t.Cleanup(p.stop)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test server with a self-signed certificate
	waitHTTP(t, c.dir, "kube-controller-manager", insecure, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", "")
}

// StartScheduler runs the upstream kube-scheduler (ComponentBinary) with
// its default profile ("default-scheduler": pods that name no scheduler,
// the DynamicResources plugin among its defaults) against the API server
// as the admin, without leader election, its secure port on loopback,
// stopped at the end of the test. It waits until its /healthz answers.
func (c *ControlPlane) StartScheduler(t testing.TB) {
	t.Helper()
	bin := ComponentBinary(t, "kube-scheduler")
	kubeconfig := c.Kubeconfig(t)
	port := freePort(t)
	p := startProcess(t, c.dir, "kube-scheduler", bin,
		"--kubeconfig", kubeconfig,
		"--leader-elect=false",
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(c.dir, "kube-scheduler-certs"),
		"--v", "2")
	t.Cleanup(p.stop)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test server with a self-signed certificate
	waitHTTP(t, c.dir, "kube-scheduler", insecure, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", "")
}

// Log returns the log of a process the control plane started (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler), "" when it
// has none.
func (c *ControlPlane) Log(name string) string {
	data, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
	return string(data)
}
