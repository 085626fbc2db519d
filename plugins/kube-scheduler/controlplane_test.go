package numaplace_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/numaplace/numaplace/internal/controlplane"
)

// The control-plane tests run the fake-clientset tests' scenarios against
// a real kube-apiserver and etcd, built by ./.ci-prepare into bin/ (or the
// directory NUMAPLACE_CONTROLPLANE_BIN names). They skip when the binaries
// are absent.

func TestControlPlanePoliciesBindToTheRightNodes(t *testing.T) {
	testPolicies(t, newControlPlaneCluster(t))
}

func TestControlPlaneUnschedulablePodGetsTheReasonSummary(t *testing.T) {
	testUnschedulable(t, newControlPlaneCluster(t))
}

func TestControlPlaneRestartRebuildsStateFromAnnotations(t *testing.T) {
	testRestart(t, newControlPlaneCluster(t))
}

func TestControlPlaneKoordinatorAnnotations(t *testing.T) {
	testKoordinator(t, newControlPlaneCluster(t))
}

func TestControlPlaneNoStallsAfterDeletionsAndJoins(t *testing.T) {
	testNoStalls(t, newControlPlaneCluster(t))
}

func TestControlPlanePreemptionEvictsTheFewestOnTheRightNode(t *testing.T) {
	testPreemption(t, newControlPlaneCluster(t))
}

func TestControlPlaneTopologyChangeUnderLivePods(t *testing.T) {
	testTopologyChange(t, newControlPlaneCluster(t))
}

func TestControlPlaneMalformedNodesAreReportedAsMalformed(t *testing.T) {
	testMalformed(t, newControlPlaneCluster(t))
}

// newControlPlaneCluster starts etcd and kube-apiserver for this test and
// returns a cluster over them.
func newControlPlaneCluster(t *testing.T) *cluster {
	t.Helper()
	cfg := controlplane.Start(t)
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return &cluster{t: t, client: client, config: cfg}
}
