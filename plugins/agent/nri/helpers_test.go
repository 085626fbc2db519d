package nri_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	nri "github.com/numaplace/numaplace/plugins/agent/nri"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
	"github.com/stretchr/testify/require"
)

// testMachine has two NUMA nodes of 8 CPUs (0-7 and 8-15), each with two
// GPUs.
const testMachine = `{
  "name": "nri-test",
  "numaNodes": [
    {"id": 0, "socket": 0, "cpus": "0-7", "memoryMiB": 65536},
    {"id": 1, "socket": 1, "cpus": "8-15", "memoryMiB": 65536}
  ],
  "gpus": [
    {"id": 0, "numaNode": 0, "uuid": "GPU-a0"},
    {"id": 1, "numaNode": 0, "uuid": "GPU-a1"},
    {"id": 2, "numaNode": 1, "uuid": "GPU-b0"},
    {"id": 3, "numaNode": 1, "uuid": "GPU-b1"}
  ]
}`

func machine(t testing.TB) *topology.Machine {
	t.Helper()
	m, err := topology.ParseJSON([]byte(testMachine))
	require.NoError(t, err)
	return m
}

// syncBuffer is a bytes.Buffer safe for the plugin's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// events records the plugin's events.
type events struct {
	mu  sync.Mutex
	all []nri.Event
}

func (e *events) Record(_ context.Context, ev nri.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) list() []nri.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.all)
}

// updater records unsolicited updates.
type updater struct{ c chan []*api.ContainerUpdate }

func newUpdater() *updater { return &updater{c: make(chan []*api.ContainerUpdate, 16)} }

func (u *updater) UpdateContainers(up []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	u.c <- up
	return nil, nil
}

// next returns the next unsolicited updates, failing after a while.
func (u *updater) next(t *testing.T) []*api.ContainerUpdate {
	t.Helper()
	select {
	case up := <-u.c:
		return up
	case <-time.After(5 * time.Second):
		t.Fatal("no unsolicited update within 5s")
		return nil
	}
}

// env is a plugin under test with what it logged and recorded.
type env struct {
	p      *nri.Plugin
	events *events
	log    *syncBuffer
}

// newPlugin opens a node on the test machine with the checkpoint at path
// ("" for none) and returns its plugin.
func newPlugin(t *testing.T, path string) *env {
	t.Helper()
	node, err := kubelet.Open(machine(t), path, kubelet.NodeOptions{})
	require.NoError(t, err)
	e := &env{events: &events{}, log: &syncBuffer{}}
	e.p, err = nri.New(node, nri.Options{Logger: slog.New(slog.NewTextHandler(e.log, nil)), Events: e.events})
	require.NoError(t, err)
	t.Cleanup(e.p.Close)
	return e
}

// decision returns a decision annotation value for the test machine.
func decision(cpus string, nodes []int, gpus ...int) string {
	d := kube.Decision{Policy: policy.SingleNUMANode, Exclusive: policy.Required, CPUSet: cpus, NUMANodes: nodes,
		GPUs: []kube.DecisionGPU{}, MemoryMiB: map[string]int64{}}
	for _, g := range gpus {
		d.GPUs = append(d.GPUs, kube.DecisionGPU{ID: g, UUID: []string{"GPU-a0", "GPU-a1", "GPU-b0", "GPU-b1"}[g]})
	}
	return d.String()
}

// numaPod is a sandbox of a pod with a NUMA spec and the given decision
// ("" for none).
func numaPod(id, name, dec string) *api.PodSandbox {
	sb := sharedPod(id, name)
	sb.Annotations[kube.AnnotationSpecAlibaba] = `{"numaTopologyPolicy":"SingleNUMANode"}`
	sb.Annotations[kube.AnnotationCPUSetScheduler] = "required"
	if dec != "" {
		sb.Annotations[kube.AnnotationAllocation] = dec
	}
	return sb
}

// sharedPod is a sandbox of a pod without a NUMA spec.
func sharedPod(id, name string) *api.PodSandbox {
	return &api.PodSandbox{Id: id, Name: name, Namespace: "default", Uid: "uid-" + name,
		Annotations: map[string]string{"kubernetes.io/config.source": "api"}, Labels: map[string]string{"app": name}}
}

// ctr is a container of sandbox sb with the given cpuset ("" for none).
func ctr(id string, sb *api.PodSandbox, cpus, mems string, env ...string) *api.Container {
	return &api.Container{Id: id, PodSandboxId: sb.GetId(), Name: "c-" + id, State: api.ContainerState_CONTAINER_RUNNING,
		Env: env, Linux: &api.LinuxContainer{Resources: &api.LinuxResources{Cpu: &api.LinuxCPU{Cpus: cpus, Mems: mems}}}}
}

// cpuset returns the cpuset.cpus and cpuset.mems of an adjustment.
func cpuset(a *api.ContainerAdjustment) (cpus, mems string) {
	c := a.GetLinux().GetResources().GetCpu()
	return c.GetCpus(), c.GetMems()
}

// envOf returns the environment an adjustment adds, "NAME=value".
func envOf(a *api.ContainerAdjustment) []string {
	var out []string
	for _, kv := range a.GetEnv() {
		out = append(out, kv.GetKey()+"="+kv.GetValue())
	}
	return out
}

// updated returns the updates as container ID -> cpus (and "/mems" when
// set).
func updated(up []*api.ContainerUpdate) map[string]string {
	out := map[string]string{}
	for _, u := range up {
		c := u.GetLinux().GetResources().GetCpu()
		v := c.GetCpus()
		if c.GetMems() != "" {
			v += "/" + c.GetMems()
		}
		out[u.GetContainerId()] = v
	}
	return out
}

// admitted returns the keys of the node's admitted pods with their
// sources.
func admitted(p *nri.Plugin) map[string]string {
	out := map[string]string{}
	for _, a := range p.Node().Admissions() {
		out[a.Pod] = a.Source.String()
	}
	return out
}

// started reports container id of sb started (PostStartContainer), as the
// runtime does once its task runs, with the cpuset of its adjustment adj
// (nil: none reported).
func started(t *testing.T, p *nri.Plugin, sb *api.PodSandbox, id string, adj *api.ContainerAdjustment) {
	t.Helper()
	cpus, mems := cpuset(adj)
	require.NoError(t, p.PostStartContainer(ctx, sb, ctr(id, sb, cpus, mems)))
}

// createStarted creates container id of sb and reports it started.
func createStarted(t *testing.T, p *nri.Plugin, sb *api.PodSandbox, id string) (*api.ContainerAdjustment, []*api.ContainerUpdate) {
	t.Helper()
	adj, up, err := p.CreateContainer(ctx, sb, ctr(id, sb, "", ""))
	require.NoError(t, err)
	started(t, p, sb, id, adj)
	return adj, up
}
