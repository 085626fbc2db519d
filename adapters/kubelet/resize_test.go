package kubelet

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// twoCPUMachine is 2 NUMA nodes of one CPU each and no reserved CPU, as
// the agent's real-kubelet test describes its host: the shared pool can be
// emptied.
func twoCPUMachine(t testing.TB) *topology.Machine {
	t.Helper()
	m, err := topology.NewBuilder("two-cpus").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.NewCPUSet(0), MemoryMiB: 1024}).
		AddNode(topology.Node{ID: 1, Socket: 1, CPUs: numa.NewCPUSet(1), MemoryMiB: 1024}).
		Build()
	require.NoError(t, err)
	return m
}

func TestResizeGrowShrinkAndCheckpoint(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	pod := numaPod("a", 2, 1, "SingleNUMANode")
	adm, err := n.Admit(withDecision(pod, decisionFor(t, m, pod)))
	require.NoError(t, err)
	require.Equal(t, FromDecision, adm.Source)
	before := adm.CPUs

	// Growing keeps its CPUs and its GPU, on its NUMA node (node 2, whose
	// CPU 7 is reserved: 3 CPUs for pods).
	require.Equal(t, []numa.NodeID{2}, adm.NUMANodes)
	got, err := n.Resize("default/a", 3)
	require.NoError(t, err)
	require.True(t, before.IsSubsetOf(got.CPUs), "grown %s keeps %s", got.CPUs, before)
	require.Equal(t, adm.GPUs, got.GPUs)
	require.Equal(t, []numa.NodeID{2}, got.NUMANodes)
	require.Equal(t, "4-6", got.CPUs.String())
	d := kube.NewDecision(m, &got.Allocation)
	require.Equal(t, "4-6", d.CPUSet)
	now, ok := n.Get("default/a")
	require.True(t, ok)
	require.Equal(t, describeAdmission(got), describeAdmission(now))

	// The checkpoint has it: a node restarted from it holds the new size.
	again, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	require.Equal(t, summary(n.Admissions()), summary(again.Admissions()))
	// ... and the pod's new decision (which the agent writes on the pod)
	// is what it holds there: admitting the pod with it is idempotent.
	_, err = again.Admit(withDecision(numaPod("a", 3, 1, "SingleNUMANode"), d))
	require.NoError(t, err)

	// Node 2 has no fourth CPU: refused, the reason named, nothing changed.
	_, err = n.Resize("default/a", 4)
	var re *ResizeError
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, ErrResizeRefused)
	require.Equal(t, []any{"default/a", 3, 4}, []any{re.Pod, re.From, re.To})
	var pe *allocator.PlacementError
	require.ErrorAs(t, err, &pe, "the allocator's refusal is the cause")
	require.Contains(t, err.Error(), "in-place resize refused: pod default/a from 3 to 4 CPUs: under its SingleNUMANode policy: ")
	require.Contains(t, err.Error(), "NUMA node 2")
	require.Equal(t, summary(again.Admissions()), summary(n.Admissions()))
	require.ErrorIs(t, n.CheckResize("default/a", 4), ErrResizeRefused)

	// Shrinking keeps the rest.
	got, err = n.Resize("default/a", 1)
	require.NoError(t, err)
	require.Equal(t, 1, got.CPUs.Size())
	require.True(t, got.CPUs.IsSubsetOf(before))
	require.Equal(t, adm.GPUs, got.GPUs)

	// The same size changes nothing.
	same, err := n.Resize("default/a", 1)
	require.NoError(t, err)
	require.Equal(t, describeAdmission(got), describeAdmission(same))
}

func TestResizeAcrossNodesUnderBestEffort(t *testing.T) {
	m := twoCPUMachine(t)
	n, _ := openTemp(t, m)
	pod := numaPod("be", 1, 0, "BestEffort")
	d, err := kube.ParseDecision(`{"policy":"BestEffort","exclusive":"Preferred","cpuset":"0","numaNodes":[0],"gpus":[],"memoryMiB":{"0":0}}`)
	require.NoError(t, err)
	_, err = n.Admit(withDecision(pod, d))
	require.NoError(t, err)
	require.NoError(t, n.CheckResize("default/be", 2))
	require.Equal(t, "1", n.SharedPool().String(), "CheckResize changes nothing")
	got, err := n.Resize("default/be", 2)
	require.NoError(t, err)
	require.Equal(t, "0-1", got.CPUs.String())
	require.Equal(t, []numa.NodeID{0, 1}, got.NUMANodes)
	require.True(t, n.SharedPool().IsEmpty(), "no shared-pool pod runs: the pool may be emptied, as Admit allows")
	got, err = n.Resize("default/be", 1)
	require.NoError(t, err)
	require.Equal(t, "0", got.CPUs.String(), "shrinking keeps the CPU of the node it started on")

	// SingleNUMANode on a node of one CPU cannot grow.
	d, err = kube.ParseDecision(`{"policy":"SingleNUMANode","exclusive":"Preferred","cpuset":"1","numaNodes":[1],"gpus":[],"memoryMiB":{"1":0}}`)
	require.NoError(t, err)
	_, err = n.Admit(withDecision(numaPod("snn", 1, 0, "SingleNUMANode"), d))
	require.NoError(t, err)
	_, err = n.Resize("default/snn", 2)
	require.ErrorIs(t, err, ErrResizeRefused)
	t.Logf("refusal: %v", err)
	require.Contains(t, err.Error(), "pod default/snn from 1 to 2 CPUs: under its SingleNUMANode policy")
}

func TestResizeKeepsTheSharedPool(t *testing.T) {
	m := twoCPUMachine(t)
	n, _ := openTemp(t, m)
	d, err := kube.ParseDecision(`{"policy":"None","exclusive":"Preferred","cpuset":"0","numaNodes":[0],"gpus":[],"memoryMiB":{"0":0}}`)
	require.NoError(t, err)
	_, err = n.Admit(withDecision(numaPod("x", 1, 0, "None"), d))
	require.NoError(t, err)
	_, err = n.Admit(sharedPod("web"))
	require.NoError(t, err)
	before := summary(n.Admissions())
	for _, check := range []func() error{
		func() error { _, err := n.Resize("default/x", 2); return err },
		func() error { return n.CheckResize("default/x", 2) },
	} {
		err := check()
		require.ErrorIs(t, err, ErrResizeRefused)
		require.Contains(t, err.Error(), "the shared pool would be left without CPUs while 1 shared-pool pods run")
		require.Equal(t, before, summary(n.Admissions()))
		require.Equal(t, "1", n.SharedPool().String())
	}
}

func TestResizeRefusals(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	_, err := n.Admit(sharedPod("web"))
	require.NoError(t, err)
	_, err = n.Admit(numaPod("a", 2, 0, "SingleNUMANode"))
	require.NoError(t, err)
	for _, c := range []struct {
		key  string
		cpus int
		want string
	}{
		{"default/nope", 2, "pod default/nope from 0 to 2 CPUs: the pod is not admitted on this node"},
		{"default/web", 2, "it runs on the shared pool"},
		{"default/a", 0, "pod default/a from 2 to 0 CPUs: a pod with exclusive CPUs keeps at least one"},
	} {
		_, err := n.Resize(c.key, c.cpus)
		require.ErrorIs(t, err, ErrResizeRefused, c.key)
		require.Contains(t, err.Error(), c.want)
		require.ErrorIs(t, n.CheckResize(c.key, c.cpus), ErrResizeRefused)
	}
	_, err = n.Resize("default/nope", 1)
	require.ErrorIs(t, err, allocator.ErrUnknownID)
	var nilNode *Node
	_, err = nilNode.Resize("default/a", 1)
	require.Error(t, err)
	require.Error(t, nilNode.CheckResize("default/a", 1))
}

func TestResizeCheckpointFailureUndoes(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	_, err := n.Admit(numaPod("a", 2, 1, "SingleNUMANode"))
	require.NoError(t, err)
	before, snap := summary(n.Admissions()), snapSummary(n.s.Snapshot())
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	boom := errors.New("disk full")
	n.write = func(string, []byte) error { return boom }
	_, err = n.Resize("default/a", 3)
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, err, ErrCheckpoint)
	require.Equal(t, before, summary(n.Admissions()))
	require.Equal(t, snap, snapSummary(n.s.Snapshot()))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(file), string(after))
}
