package controlplane

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// StartControllerManager runs kube-controller-manager (bin/, or the
// directory NUMAPLACE_CONTROLPLANE_BIN names) against the API server of
// cfg as the admin, without leader election, with the resourceclaim
// controller (it makes a pod's claims from its ResourceClaimTemplates,
// removes a pod that is gone from a claim's reservedFor and deallocates a
// claim no pod uses) and the garbage collector (it deletes a deleted pod's
// generated claims), its secure port on loopback, stopped at the end of
// the test. It skips the test when the binary is not built, and waits
// until its /healthz answers.
func StartControllerManager(t testing.TB, cfg *rest.Config) {
	t.Helper()
	dir := os.Getenv("NUMAPLACE_CONTROLPLANE_BIN")
	if dir == "" {
		dir = defaultBinDir()
	}
	bin, err := filepath.Abs(filepath.Join(dir, "kube-controller-manager"))
	if err != nil {
		t.Fatalf("the path of kube-controller-manager: %v", err)
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Skipf("no real kube-controller-manager: %s is not built; run ./.ci-prepare or set NUMAPLACE_CONTROLPLANE_BIN", bin)
	}
	logDir := t.TempDir()
	port := freePort(t)
	startProcess(t, logDir, "kube-controller-manager", bin,
		"--kubeconfig", Kubeconfig(t, cfg),
		"--leader-elect=false",
		"--controllers", strings.Join([]string{"resourceclaim-controller", "garbage-collector-controller"}, ","),
		"--use-service-account-credentials=false",
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(logDir, "certs"),
		"--v", "2")
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a loopback test server's self-signed certificate
	waitHTTP(t, logDir, "kube-controller-manager", insecure, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", "")
}
