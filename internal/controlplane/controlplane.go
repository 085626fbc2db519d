package controlplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Token is the bearer token of the admin user (in system:masters).
const Token = "numaplace-test-token"

// BinDir returns the directory of the control-plane binaries:
// $NUMAPLACE_CONTROLPLANE_BIN when it is set, otherwise
// plugins/kube-scheduler/bin below [RepoRoot], where
// plugins/kube-scheduler/.ci-prepare builds them.
func BinDir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv("NUMAPLACE_CONTROLPLANE_BIN"); dir != "" {
		abs, err := filepath.Abs(dir)
		require.NoError(t, err)
		return abs
	}
	return RepoPath(t, "plugins", "kube-scheduler", "bin")
}

// Binaries returns the paths of kube-apiserver and etcd in [BinDir], or
// skips the test saying how to build them.
func Binaries(t testing.TB) (apiserver, etcd string) {
	t.Helper()
	return ComponentBinary(t, "kube-apiserver"), ComponentBinary(t, "etcd")
}

// ControlPlane is a running etcd and kube-apiserver. The API server can be
// stopped and started again (an outage) while etcd keeps the cluster's
// state.
type ControlPlane struct {
	// Config reaches the API server as the admin ([Token]).
	Config *rest.Config

	t         testing.TB
	dir, bin  string
	args      []string
	apiserver *Process // nil while stopped
}

// Start starts etcd and kube-apiserver for the test ([StartControlPlane])
// and returns a client configuration with full rights.
func Start(t testing.TB) *rest.Config {
	t.Helper()
	return StartControlPlane(t).Config
}

// StartControlPlane starts etcd and kube-apiserver on loopback ports
// (stopped at the end of the test, their logs in its temporary directory)
// and waits until the API server is ready and has made the default
// namespace. The extra arguments go to kube-apiserver after its own, such
// as "--feature-gates=DRAListTypeAttributes=true". It skips the test when
// the binaries are not built.
func StartControlPlane(t testing.TB, extra ...string) *ControlPlane {
	t.Helper()
	apiserverBin, etcdBin := Binaries(t)
	dir := t.TempDir()
	etcdPort, peerPort := FreePort(t), FreePort(t)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	StartProcess(t, dir, "etcd", exec.Command(etcdBin,
		"--name", "numaplace-test", "--data-dir", filepath.Join(dir, "etcd-data"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "numaplace-test="+peerURL, "--log-level", "warn"))
	waitHTTP(t, dir, "etcd", http.DefaultClient, etcdURL+"/health", "")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(Token+",admin,admin,system:masters\n"), 0o600))
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyFile := filepath.Join(dir, "sa.key")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	port := FreePort(t)
	c := &ControlPlane{t: t, dir: dir, bin: apiserverBin, args: []string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "RBAC",
		"--service-account-key-file", keyFile,
		"--service-account-signing-key-file", keyFile,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--api-audiences", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--endpoint-reconciler-type", "none",
		// No controller manager makes service account tokens or lifts the
		// not-ready taint.
		"--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
		"--v", "1"}}
	c.args = append(c.args, extra...)
	c.Config = &rest.Config{Host: "https://127.0.0.1:" + strconv.Itoa(port), BearerToken: Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 100, Burst: 200}
	c.StartAPIServer()
	t.Cleanup(c.StopAPIServer)
	client, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "the API server made no default namespace")
	return c
}

// StartAPIServer starts the API server (again, after StopAPIServer) on the
// same port, certificates and etcd, and waits until it is ready. Its log
// goes on in the same file.
func (c *ControlPlane) StartAPIServer() {
	c.t.Helper()
	if c.apiserver != nil {
		return
	}
	c.apiserver = StartProcess(c.t, c.dir, "kube-apiserver", exec.Command(c.bin, c.args...))
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test server with a self-signed certificate
	waitHTTP(c.t, c.dir, "kube-apiserver", insecure, c.Config.Host+"/readyz", Token)
}

// StopAPIServer stops the API server ([Process.Stop]); etcd keeps
// running.
func (c *ControlPlane) StopAPIServer() {
	if c.apiserver != nil {
		c.apiserver.Stop()
		c.apiserver = nil
	}
}

// waitHTTP waits until url answers 200, or fails the test with the end of
// the process's log.
func waitHTTP(t testing.TB, dir, name string, client *http.Client, url, token string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, name+".log"))
		if len(log) > 4000 {
			log = log[len(log)-4000:]
		}
		t.Fatalf("%s did not become ready at %s (last: %s): %v\n%s", name, url, last, err, bytes.TrimSpace(log))
	}
	t.Logf("%s ready at %s", name, url)
}

// Kubeconfig writes a kubeconfig for the admin into the test's temporary
// directory and returns its path.
func (c *ControlPlane) Kubeconfig(t testing.TB) string {
	t.Helper()
	return WriteKubeconfig(t, c.Config.Host, c.Config.BearerToken)
}

// Kubeconfig writes a kubeconfig for cfg (as [Start] returns it) into the
// test's temporary directory and returns its path.
func Kubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	return WriteKubeconfig(t, cfg.Host, cfg.BearerToken)
}

// WriteKubeconfig writes a kubeconfig reaching host with the bearer token
// and returns its path.
func WriteKubeconfig(t testing.TB, host, token string) string {
	t.Helper()
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: user
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: user}
current-context: test
`, host, token)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	return path
}
