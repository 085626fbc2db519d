package numaplace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// applySchedulerRBAC creates deploy/scheduler.yaml's ServiceAccount,
// ClusterRoles, ClusterRoleBindings, Roles and RoleBindings as shipped
// (not its ConfigMap and Deployment) and returns how many it created.
func (c *cluster) applySchedulerRBAC() int {
	t := c.t
	t.Helper()
	data, err := os.ReadFile("../../deploy/scheduler.yaml")
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	ctx := context.Background()
	n := 0
	for {
		var u unstructured.Unstructured
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(u.Object) == 0 {
			continue
		}
		obj, err := scheme.Scheme.New(u.GroupVersionKind())
		require.NoError(t, err, "deploy/scheduler.yaml: %s", u.GroupVersionKind())
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj))
		switch o := obj.(type) {
		case *v1.ServiceAccount:
			_, err = c.client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = c.client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			continue
		}
		require.NoError(t, err, "creating %s %s", u.GetKind(), u.GetName())
		n++
	}
	return n
}

// forbidden records the requests the API server refused with 403.
type forbidden struct {
	mu   sync.Mutex
	reqs []string
}

func (f *forbidden) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			f.mu.Lock()
			f.reqs = append(f.reqs, req.Method+" "+req.URL.Path+"?"+req.URL.RawQuery)
			f.mu.Unlock()
		}
		return resp, err
	})
}

func (f *forbidden) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reqs...)
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// asSchedulerServiceAccount returns a cluster over the same API server
// whose client authenticates as deploy/scheduler.yaml's service account
// (a token from the TokenRequest API), recording the requests refused to
// it.
func (c *cluster) asSchedulerServiceAccount() (*cluster, *forbidden) {
	t := c.t
	t.Helper()
	tr, err := c.client.CoreV1().ServiceAccounts("kube-system").CreateToken(context.Background(), "numaplace-scheduler",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"https://kubernetes.default.svc"},
			ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := rest.CopyConfig(c.config)
	cfg.BearerToken = tr.Status.Token
	f := &forbidden{}
	cfg.WrapTransport = f.wrap
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "system:serviceaccount:kube-system:numaplace-scheduler", review.Status.UserInfo.Username)
	return &cluster{t: t, client: client, config: cfg}, f
}

// TestControlPlaneRBACCoversTheDRAPath: with RBAC authorization on (as
// internal/controlplane runs the API server), numaplace-scheduler runs as
// deploy/scheduler.yaml's service account bound by its shipped roles
// (system:kube-scheduler, system:volume-scheduler and numaplace's own)
// and schedules the DRA path: a pod with a GPU claim and a NIC claim
// (claims' finalizer and status written), the seed's pod spec through
// extendedResourceName (an extended resource claim created, its status
// and the pod's status written), with DeviceTaintRules, ResourceSlices,
// DeviceClasses and NodeResourceTopologies watched. The API server refuses
// it nothing (every 403 is a failure, naming the request), and it may
// take its leader-election lease.
func TestControlPlaneRBACCoversTheDRAPath(t *testing.T) {
	admin := newControlPlaneCluster(t)
	require.GreaterOrEqual(t, admin.applySchedulerRBAC(), 6)
	admin.applyDeviceClasses()
	admin.draNode("h", "dgx-h100")
	admin.taintRule("unrelated", "other-pool", "gpu-0")
	admin.kubelet()
	sa, refused := admin.asSchedulerServiceAccount()

	ctx := context.Background()
	for _, verb := range []string{"get", "update"} {
		r, err := sa.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: "kube-system", Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Name: "numaplace-scheduler"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.True(t, r.Status.Allowed, "%s its lease: %s", verb, r.Status.Reason)
	}

	sa.start(nil)
	admin.claim("a-gpus", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	admin.claim("a-nic", []resourceapi.DeviceRequest{request("nic", numaplace.ClassNIC, 1)})
	admin.create(claimPod("a", "SingleNUMANode", 8, "a-gpus", "a-nic"))
	p := admin.waitBound("a")
	require.Equal(t, gpuDevices(gpuIDs(decision(t, p))), admin.allocated("a-gpus", p))
	require.Len(t, admin.allocated("a-nic", p), 1)

	admin.create(pod("seed", "SingleNUMANode", 24, 4))
	ps := admin.waitBound("seed")
	ps = admin.waitFor("seed", "its extended resource claim status", func(p *v1.Pod) bool { return p.Status.ExtendedResourceClaimStatus != nil })
	require.Equal(t, gpuDevices(gpuIDs(decision(t, ps))), admin.allocated(ps.Status.ExtendedResourceClaimStatus.ResourceClaimName, ps))
	require.Empty(t, refused.list(), fmt.Sprintf("requests refused to the scheduler's service account: %v", refused.list()))
}
