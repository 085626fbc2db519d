package numaplace_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/numaplace/numaplace/adapters/kube"

	"github.com/numaplace/numaplace/internal/controlplane"
	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// writesPods are the pods of the write-count tests: every kind the plugin
// sees (the four policies, a GPU pod without a spec, a plain pod), four of
// each, and whether numaplace decides for them.
func writesPods() (pods []struct {
	name    string
	decided bool
	policy  string
	cpus    int
	gpus    int
}) {
	kinds := []struct {
		policy     string
		cpus, gpus int
	}{{"SingleNUMANode", 8, 1}, {"Restricted", 8, 2}, {"BestEffort", 4, 1}, {"None", 4, 0}, {"", 2, 1}, {"", 2, 0}}
	for i := range 4 {
		for j, k := range kinds {
			pods = append(pods, struct {
				name    string
				decided bool
				policy  string
				cpus    int
				gpus    int
			}{fmt.Sprintf("w-%d-%d", j, i), k.policy != "" || k.gpus > 0, k.policy, k.cpus, k.gpus})
		}
	}
	return pods
}

// testOneWritePerPod binds 24 pods of every kind on four DGX nodes and
// returns how many of them numaplace decided for; count says which writes
// the scheduler made.
func testOneWritePerPod(t *testing.T, c *cluster) int {
	for i := range 4 {
		preset := "dgx-h100"
		if i%2 == 1 {
			preset = "dgx-a100"
		}
		c.create(node(t, fmt.Sprintf("gpu-%d", i), preset, true, false))
	}
	pods := writesPods()
	for _, p := range pods {
		c.create(pod(p.name, p.policy, p.cpus, p.gpus))
	}
	decided := 0
	c.start(nil)
	for _, p := range pods {
		got := c.waitBound(p.name)
		if p.decided {
			decided++
			d := decision(t, got) // present and readable
			require.Len(t, d.GPUs, p.gpus, "pod %s", p.name)
		} else {
			require.NotContains(t, got.Annotations, kube.AnnotationAllocation, "pod %s", p.name)
		}
	}
	c.requireNoDoubleHandout()
	return decided
}

// TestOneWritePerPod: over the fake clientset, each pod costs the scheduler
// one write, its binding, which carries the decision; no patch of the pod
// or its status.
func TestOneWritePerPod(t *testing.T) {
	c := newFakeCluster(t)
	testOneWritePerPod(t, c)
	counts := map[string]int{}
	for _, a := range c.client.(*fake.Clientset).Actions() {
		if a.GetResource().Resource != "pods" {
			continue
		}
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			counts[a.GetVerb()+" "+a.GetSubresource()]++
		}
	}
	n := len(writesPods())
	require.Equal(t, map[string]int{"create ": n, "create binding": n}, counts,
		"writes of pods (the test's creations and the scheduler's writes)")
}

// TestControlPlaneOneWritePerPod counts the scheduler's writes from the
// real API server's apiserver_request_total: one POST pods/binding per pod
// and no PATCH of pods or pods/status (no decision patch, no
// nominatedNodeName patch).
func TestControlPlaneOneWritePerPod(t *testing.T) {
	c := newControlPlaneCluster(t)
	before, err := controlplane.ScrapeMetrics(context.Background(), c.config)
	require.NoError(t, err)
	decided := testOneWritePerPod(t, c)
	after, err := controlplane.ScrapeMetrics(context.Background(), c.config)
	require.NoError(t, err)
	writes := map[string]float64{}
	for r, n := range after.Sub(before).Requests {
		if r.Write() && r.Resource == "pods" {
			writes[r.String()] = n
		}
	}
	n := float64(len(writesPods()))
	t.Logf("pods: %v, %d decided by numaplace; pod writes: %v", n, decided, writes)
	require.Equal(t, map[string]float64{"POST pods": n, "POST pods/binding": n}, writes,
		"writes of pods (the test's creations and the scheduler's writes)")
}

// TestDecisionPatchedWhereAnotherPluginBinds: a profile of before this
// change (NUMAPlace at preBind, DefaultBinder binding) still binds every pod
// with its decision, patched on the pod before the binding.
func TestDecisionPatchedWhereAnotherPluginBinds(t *testing.T) {
	c := newFakeCluster(t)
	c.editProfile = func(p *schedconfig.KubeSchedulerProfile) {
		p.Plugins.Bind = schedconfig.PluginSet{}
		p.Plugins.PreBind.Enabled = append(p.Plugins.PreBind.Enabled, schedconfig.Plugin{Name: numaplace.Name})
	}
	testOneWritePerPod(t, c)
	patches := 0
	for _, a := range c.client.(*fake.Clientset).Actions() {
		if a.GetResource().Resource == "pods" && a.GetVerb() == "patch" && a.GetSubresource() == "" {
			patches++
		}
	}
	require.Equal(t, 20, patches, "decision patches")
}

// TestNoWayToWriteTheDecision: a profile where NUMAPlace neither binds nor
// runs at preBind binds the pods that need no decision and none of those
// that do.
func TestNoWayToWriteTheDecision(t *testing.T) {
	c := newFakeCluster(t)
	c.editProfile = func(p *schedconfig.KubeSchedulerProfile) { p.Plugins.Bind = schedconfig.PluginSet{} }
	c.create(node(t, "gpu-0", "dgx-h100", true, false), pod("plain", "", 2, 0), pod("numa", "SingleNUMANode", 8, 1))
	c.start(nil)
	c.waitBound("plain")
	time.Sleep(500 * time.Millisecond)
	require.Empty(t, c.get("numa").Spec.NodeName, "a pod that needs a decision was bound without a way to write it")
}
