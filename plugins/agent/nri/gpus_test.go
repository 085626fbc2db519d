package nri_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	nri "github.com/numaplace/numaplace/plugins/agent/nri"
)

// specs is a PodLookup of pods by key.
type specs map[string]*kube.Pod

func (s specs) Pod(_ context.Context, namespace, name, _ string) (*kube.Pod, bool) {
	p, ok := s[namespace+"/"+name]
	return p, ok
}

// gpuContainers is a pod whose containers c-<name> ask for the GPUs.
func gpuContainers(name string, gpus map[string]string, order ...string) *kube.Pod {
	p := &kube.Pod{Namespace: "default", Name: name}
	for _, c := range order {
		k := kube.Container{Name: "c-" + c, Limits: map[string]string{}}
		if n := gpus[c]; n != "" {
			k.Limits["aliyun.com/gpu"] = n
		}
		p.Containers = append(p.Containers, k)
	}
	return p
}

func visible(t *testing.T, p *nri.Plugin, sb *api.PodSandbox, c *api.Container) []string {
	t.Helper()
	adj, _, err := p.CreateContainer(ctx, sb, c)
	require.NoError(t, err)
	return envOf(adj)
}

// TestContainersGetTheirShareOfTheDecision: each container of a pod with
// a decision sees its share of the decision's GPUs, split in container
// order by their requests (the pod's spec from the lookup); without the
// spec, the kubelet's GPUs when they are the decision's, else all of
// them.
func TestContainersGetTheirShareOfTheDecision(t *testing.T) {
	node, err := kubelet.Open(machine(t), "", kubelet.NodeOptions{})
	require.NoError(t, err)
	lookup := specs{"default/a": gpuContainers("a", map[string]string{"x": "1", "z": "1"}, "x", "y", "z")}
	p, err := nri.New(node, nri.Options{Events: &events{}, Pods: lookup})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	sb := numaPod("sb-a", "a", decision("8-11", []int{1}, 2, 3))
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-b0"}, visible(t, p, sb, ctr("x", sb, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-a0")))
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=void"}, visible(t, p, sb, ctr("y", sb, "", "")))
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-b1"}, visible(t, p, sb, ctr("z", sb, "", "")))

	// Without the pod's spec.
	q, err := nri.New(node, nri.Options{Events: &events{}})
	require.NoError(t, err)
	t.Cleanup(q.Close)
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-b1"}, visible(t, q, sb, ctr("x", sb, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b1")),
		"the kubelet's GPU, one of the decision's")
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=GPU-b0,GPU-b1"}, visible(t, q, sb, ctr("y", sb, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-a0")),
		"the kubelet's GPU is not the decision's: all of the decision's")
}

// TestSharedPoolGPUsAgainstDecisions: a pod outside numaplace's decisions
// whose container the kubelet gave a GPU a decision holds is refused,
// the holder named; in the other order, the decision naming a GPU such a
// pod holds is refused, naming it, also after a restart from the
// checkpoint; once the pod is gone, the decision is admitted.
func TestSharedPoolGPUsAgainstDecisions(t *testing.T) {
	e := newPlugin(t, "")
	decided := numaPod("sb-d", "d", decision("8-11", []int{1}, 2))
	require.NoError(t, e.p.RunPodSandbox(ctx, decided))
	plain := sharedPod("sb-p", "plain")
	require.NoError(t, e.p.RunPodSandbox(ctx, plain))
	_, _, err := e.p.CreateContainer(ctx, plain, ctr("p1", plain, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b0"))
	var refused *nri.RefusedError
	require.ErrorAs(t, err, &refused)
	require.ErrorIs(t, err, kubelet.ErrTopologyAffinity)
	require.ErrorContains(t, err, "GPU 2 is held by pod default/d (its numaplace allocation)")
	evs := e.events.list()
	require.Equal(t, nri.ReasonTopologyAffinityError, evs[len(evs)-1].Reason)
	require.Equal(t, "plain", evs[len(evs)-1].Name)
	// Another GPU is the pod's.
	_, _, err = e.p.CreateContainer(ctx, plain, ctr("p1", plain, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b1"))
	require.NoError(t, err)

	// The other order, and a restart between.
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	f := newPlugin(t, path)
	require.NoError(t, f.p.RunPodSandbox(ctx, plain))
	_, _, err = f.p.CreateContainer(ctx, plain, ctr("p1", plain, "", "", "NVIDIA_VISIBLE_DEVICES=GPU-b0"))
	require.NoError(t, err)
	f.p.Close()
	g := newPlugin(t, path)
	err = g.p.RunPodSandbox(ctx, decided)
	require.ErrorAs(t, err, &refused)
	require.ErrorContains(t, err, "GPU 2 is held by pod default/plain (container c-p1, given by the kubelet outside numaplace's decisions)")
	require.NoError(t, g.p.RemovePodSandbox(ctx, plain))
	require.NoError(t, g.p.RunPodSandbox(ctx, decided))
}

// TestSynchronizeRecordsTheKubeletsGPUs: after a restart without a
// checkpoint, the running shared-pool containers' GPUs are recorded
// again, so a decision naming one is refused.
func TestSynchronizeRecordsTheKubeletsGPUs(t *testing.T) {
	e := newPlugin(t, "")
	plain := sharedPod("sb-p", "plain")
	_, err := e.p.Synchronize(ctx, []*api.PodSandbox{plain}, []*api.Container{ctr("p1", plain, "0-15", "0-1", "NVIDIA_VISIBLE_DEVICES=GPU-a1")})
	require.NoError(t, err)
	adm, ok := e.p.Node().Get("default/plain")
	require.True(t, ok)
	require.Equal(t, map[string][]int{"c-p1": {1}}, adm.KubeletGPUs)
	err = e.p.RunPodSandbox(ctx, numaPod("sb-d", "d", decision("0-3", []int{0}, 1)))
	require.ErrorContains(t, err, "GPU 1 is held by pod default/plain")
}
