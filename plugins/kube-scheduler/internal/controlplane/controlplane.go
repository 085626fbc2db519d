// Package controlplane starts a real etcd and kube-apiserver for the
// module's tests, from binaries that ../../.ci-prepare builds from the Go
// module proxy into bin/ (or that NUMAPLACE_CONTROLPLANE_BIN names). Tests
// that use it skip with a clear message when the binaries are absent.
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
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Token is the bearer token of the API server's only user, in
// system:masters.
const Token = "numaplace-test-token"

// Binaries returns the paths of kube-apiserver and etcd, or
// skips the test saying how to build them.
func Binaries(t testing.TB) (apiserver, etcd string) {
	t.Helper()
	dir := os.Getenv("NUMAPLACE_CONTROLPLANE_BIN")
	if dir == "" {
		dir = defaultBinDir()
	}
	apiserver, etcd = filepath.Join(dir, "kube-apiserver"), filepath.Join(dir, "etcd")
	for _, p := range []string{apiserver, etcd} {
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			t.Skipf("no real control plane: %s is not built; run ./.ci-prepare (builds kube-apiserver and etcd "+
				"from the Go module proxy into bin/, a few minutes) or set NUMAPLACE_CONTROLPLANE_BIN", p)
		}
	}
	for _, p := range []*string{&apiserver, &etcd} {
		abs, err := filepath.Abs(*p)
		require.NoError(t, err)
		*p = abs
	}
	return apiserver, etcd
}

// Start starts etcd and kube-apiserver on loopback ports for the test
// (stopped at its end, their logs in a temporary directory) and returns a
// client configuration with full rights. It skips the test when the
// binaries are not built, and waits until the API server is ready and has
// created the default namespace.
func Start(t testing.TB) *rest.Config {
	t.Helper()
	return StartControlPlane(t).Config
}

// ControlPlane is the etcd and kube-apiserver that [StartControlPlane]
// started; the API server can be stopped and started again (an outage)
// while etcd keeps the cluster's state.
type ControlPlane struct {
	// Config is a client configuration with full rights.
	Config *rest.Config

	t         testing.TB
	dir, bin  string
	args      []string
	apiserver func() // stops the running API server; nil when stopped
}

// StartControlPlane is [Start], returning the control plane, whose API
// server a test can stop and start again.
func StartControlPlane(t testing.TB) *ControlPlane {
	t.Helper()
	apiserverBin, etcdBin := Binaries(t)
	dir := t.TempDir()

	etcdPort, peerPort := freePort(t), freePort(t)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	startProcess(t, dir, "etcd", etcdBin,
		"--name", "numaplace-test",
		"--data-dir", filepath.Join(dir, "etcd-data"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "numaplace-test="+peerURL,
		"--log-level", "warn")
	waitHTTP(t, dir, "etcd", http.DefaultClient, etcdURL+"/health", "")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(Token+",admin,admin,system:masters\n"), 0o600))
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyFile := filepath.Join(dir, "sa.key")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600))
	port := freePort(t)
	host := "https://127.0.0.1:" + strconv.Itoa(port)
	c := &ControlPlane{t: t, dir: dir, bin: apiserverBin, args: []string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", filepath.Join(dir, "tokens.csv"),
		"--authorization-mode", "AlwaysAllow",
		"--service-account-key-file", keyFile,
		"--service-account-signing-key-file", keyFile,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--endpoint-reconciler-type", "none",
		// No controller manager creates service accounts, no node
		// lifecycle controller lifts the not-ready taint.
		"--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
		"--v", "1"},
		Config: &rest.Config{Host: host, BearerToken: Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 100, Burst: 200}}
	c.StartAPIServer()
	t.Cleanup(c.StopAPIServer)

	client, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	require.NoError(t, err, "the API server created no default namespace")
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
	c.apiserver = startProcessStoppable(c.t, c.dir, "kube-apiserver", c.bin, c.args...)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback test server with a self-signed certificate
	waitHTTP(c.t, c.dir, "kube-apiserver", insecure, c.Config.Host+"/readyz", Token)
}

// StopAPIServer stops the API server (SIGTERM, then SIGKILL after 10 s);
// etcd keeps running.
func (c *ControlPlane) StopAPIServer() {
	if c.apiserver != nil {
		c.apiserver()
		c.apiserver = nil
	}
}

// Kubeconfig writes a kubeconfig file for cfg (as Start returns it) into
// the test's temporary directory and returns its path.
func Kubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: admin}
current-context: test
`, cfg.Host, cfg.BearerToken)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(data), 0o600))
	return path
}

// defaultBinDir is the module's bin/, where ../../.ci-prepare builds the
// binaries.
func defaultBinDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "bin"
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "bin")
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startProcess starts a binary with its output in dir/name.log and stops
// it (SIGTERM, then SIGKILL) at the end of the test.
func startProcess(t testing.TB, dir, name, bin string, args ...string) {
	t.Helper()
	startProcessStoppable(t, dir, name, bin, args...)
}

// startProcessStoppable is startProcess, returning a function that stops
// the process (once; the end of the test does nothing more then). The log
// file is appended to, so that a process started again keeps one log.
func startProcessStoppable(t testing.TB, dir, name, bin string, args ...string) (stop func()) {
	t.Helper()
	logFile, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start(), "starting %s", name)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			_ = logFile.Close()
		})
	}
	t.Cleanup(stop)
	return stop
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
