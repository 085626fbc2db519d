package kubelet

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// smallMachine is 2 NUMA nodes (IDs 0 and 2) of 4 CPUs each, CPU 7
// reserved, GPUs 0,1 on node 0 and 2,3 on node 2 (one switch per node,
// with UUIDs), and one RDMA NIC per node.
func smallMachine(t testing.TB) *topology.Machine {
	t.Helper()
	return smallMachineWith(t, true)
}

// smallMachineWith is smallMachine, with its two RDMA NICs or without them.
func smallMachineWith(t testing.TB, nics bool) *topology.Machine {
	t.Helper()
	b := topology.NewBuilder("small-test").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 1024}).
		AddNode(topology.Node{ID: 2, Socket: 0, CPUs: numa.CPURange(4, 7), MemoryMiB: 1024}).
		SetReservedCPUs(numa.NewCPUSet(7))
	for g := range 4 {
		node := numa.NodeID(2 * (g / 2))
		b.AddGPU(topology.GPU{ID: g, NUMANode: node, PCIeSwitch: "sw" + strconv.Itoa(g/2), UUID: "GPU-" + strconv.Itoa(g)})
	}
	if nics {
		b.AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: 0})
		b.AddDevice(topology.Device{ID: "mlx5_1", Class: "rdma", NUMANode: 2})
	}
	m, err := b.Build()
	require.NoError(t, err)
	return m
}

func preset(t testing.TB, name string) *topology.Machine {
	t.Helper()
	m, err := topology.Preset(name)
	require.NoError(t, err)
	return m
}

// numaPod is a pod with a NUMA spec asking for cpus CPUs and gpus GPUs.
func numaPod(name string, cpus, gpus int, pol string) *kube.Pod {
	res := map[string]string{"cpu": strconv.Itoa(cpus)}
	if gpus > 0 {
		res[kube.ResourceAliyunGPU] = strconv.Itoa(gpus)
	}
	return &kube.Pod{Namespace: "default", Name: name, UID: "uid-" + name,
		Annotations: map[string]string{
			kube.AnnotationSpecAlibaba:     fmt.Sprintf(`{"numaTopologyPolicy":%q}`, pol),
			kube.AnnotationCPUSetScheduler: "required"},
		Containers: []kube.Container{{Name: "main", Requests: res, Limits: maps.Clone(res)}}}
}

// sharedPod is a pod without a NUMA spec.
func sharedPod(name string) *kube.Pod {
	res := map[string]string{"cpu": "500m"}
	return &kube.Pod{Namespace: "default", Name: name, UID: "uid-" + name,
		Containers: []kube.Container{{Name: "main", Requests: res, Limits: maps.Clone(res)}}}
}

// withDecision returns a copy of pod carrying the decision annotation.
func withDecision(pod *kube.Pod, d kube.Decision) *kube.Pod {
	p := *pod
	p.Annotations = maps.Clone(pod.Annotations)
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[kube.AnnotationAllocation] = d.String()
	return &p
}

// decisionFor decides pod on a separate, empty state of m (as a scheduler
// would) and returns the decision.
func decisionFor(t testing.TB, m *topology.Machine, pod *kube.Pod) kube.Decision {
	t.Helper()
	req, err := kube.ParsePod(pod, kube.Config{})
	require.NoError(t, err)
	r := req.Request(pod.Key())
	a, err := allocator.MustNew(m, allocator.Options{}).Allocate(&r)
	require.NoError(t, err)
	return kube.NewDecision(m, &a)
}

// describeAdmission renders everything an admission says (sets compared by
// members, not by their storage).
func describeAdmission(a Admission) string {
	return fmt.Sprintf("%s uid=%s %s %s cpus=%s mems=%s gpus=%v devices=%v alloc=%s",
		a.Pod, a.UID, a.Source, a.Policy, a.CPUs, a.Mems(), a.GPUs, a.Devices, describeAlloc(&a.Allocation))
}

func describeAlloc(a *allocator.Allocation) string {
	if a.ID == "" {
		return "none"
	}
	return fmt.Sprintf("%s %s/%s full=%t span=%s memory=%v", a, a.Policy, a.Exclusive, a.FullPCPUs, a.DenseSpan, a.Memory)
}

func summary(adms []Admission) []string {
	out := make([]string, len(adms))
	for i, a := range adms {
		out[i] = describeAdmission(a)
	}
	return out
}

func snapSummary(s allocator.Snapshot) []string {
	var out []string
	for i := range s.Allocations {
		out = append(out, describeAlloc(&s.Allocations[i]))
	}
	for _, c := range slices.Sorted(maps.Keys(s.Unhealthy)) {
		out = append(out, fmt.Sprintf("unhealthy %s %v", c, s.Unhealthy[c]))
	}
	return out
}

func openTemp(t testing.TB, m *topology.Machine) (*Node, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	n, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	return n, path
}

func TestAdmitLocalDecisionAndShared(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)

	adm, err := n.Admit(numaPod("a", 2, 1, "SingleNUMANode"))
	require.NoError(t, err)
	require.Equal(t, Local, adm.Source)
	require.Equal(t, 2, adm.CPUs.Size())
	require.Len(t, adm.NUMANodes, 1)
	require.Len(t, adm.GPUs, 1)
	require.Equal(t, "GPU-"+strconv.Itoa(adm.GPUs[0].ID), adm.GPUs[0].UUID)
	require.Equal(t, adm.NUMANodes[0].String(), adm.Mems())

	// A decision the scheduler wrote, on the node the local pod left free.
	d := kube.Decision{Policy: adm.Policy, CPUSet: "4-5", NUMANodes: []int{2},
		GPUs: []kube.DecisionGPU{{ID: 2, UUID: "GPU-2"}}, MemoryMiB: map[string]int64{"2": 0}}
	if adm.NUMANodes[0] == 2 {
		d = kube.Decision{Policy: adm.Policy, CPUSet: "0-1", NUMANodes: []int{0},
			GPUs: []kube.DecisionGPU{{ID: 0, UUID: "GPU-0"}}, MemoryMiB: map[string]int64{"0": 0}}
	}
	adm2, err := n.Admit(withDecision(numaPod("b", 2, 1, "SingleNUMANode"), d))
	require.NoError(t, err)
	require.Equal(t, FromDecision, adm2.Source)
	require.Equal(t, d.CPUSet, adm2.CPUs.String())
	require.Equal(t, []numa.NodeID{numa.NodeID(d.NUMANodes[0])}, adm2.NUMANodes)
	require.Equal(t, d.GPUs, adm2.GPUs)

	// A shared-pool pod gets every CPU no exclusive pod holds (the reserved
	// one included) and every NUMA node.
	sh, err := n.Admit(sharedPod("web"))
	require.NoError(t, err)
	require.Equal(t, SharedPool, sh.Source)
	want := m.CPUs().Difference(adm.CPUs).Difference(adm2.CPUs)
	require.True(t, want.Equal(sh.CPUs), "shared pool %s, want %s", sh.CPUs, want)
	require.True(t, sh.CPUs.Contains(7), "the reserved CPU belongs to the shared pool")
	require.Equal(t, "0,2", sh.Mems())
	require.Empty(t, sh.GPUs)
	require.True(t, want.Equal(n.SharedPool()))

	// The shared pool grows back when an exclusive pod leaves.
	require.NoError(t, n.Remove(numaPod("a", 2, 1, "SingleNUMANode")))
	got, ok := n.Get("default/web")
	require.True(t, ok)
	require.True(t, want.Union(adm.CPUs).Equal(got.CPUs))
	require.Len(t, n.Admissions(), 2)
}

func TestAdmitRefusals(t *testing.T) {
	m := smallMachine(t)
	gpuDecision := func(cpus string, node int, gpus ...kube.DecisionGPU) kube.Decision {
		return kube.Decision{CPUSet: cpus, NUMANodes: []int{node}, GPUs: gpus, MemoryMiB: map[string]int64{}}
	}
	tests := []struct {
		name     string
		setup    func(t *testing.T, n *Node) // what the node holds before
		pod      *kube.Pod
		affinity bool     // a *TopologyAffinityError
		is       error    // errors.Is target
		contains []string // in the message
		heldBy   string   // a conflict held by this pod
	}{{
		name: "CPUs held by another pod",
		setup: func(t *testing.T, n *Node) {
			_, err := n.Admit(withDecision(numaPod("a", 2, 0, "SingleNUMANode"), gpuDecision("0-1", 0)))
			require.NoError(t, err)
		},
		pod:      withDecision(numaPod("b", 2, 0, "SingleNUMANode"), gpuDecision("1-2", 0)),
		affinity: true, contains: []string{"CPU 1 is held by pod default/a", "Resources cannot be allocated with Topology locality"},
		heldBy: "default/a",
	}, {
		name: "GPU held by another pod",
		setup: func(t *testing.T, n *Node) {
			_, err := n.Admit(withDecision(numaPod("a", 1, 1, "SingleNUMANode"), gpuDecision("0", 0, kube.DecisionGPU{ID: 1})))
			require.NoError(t, err)
		},
		pod:      withDecision(numaPod("b", 1, 1, "SingleNUMANode"), gpuDecision("1", 0, kube.DecisionGPU{ID: 1})),
		affinity: true, contains: []string{"GPU 1 is held by pod default/a"}, heldBy: "default/a",
	}, {
		name: "unhealthy GPU",
		setup: func(t *testing.T, n *Node) {
			_, err := n.SetDeviceHealth("gpu", "GPU-3", false)
			require.NoError(t, err)
		},
		pod:      withDecision(numaPod("b", 1, 1, "SingleNUMANode"), gpuDecision("4", 2, kube.DecisionGPU{ID: 3})),
		affinity: true, contains: []string{"GPU 3 is unhealthy"},
	}, {
		name:     "GPU not on this node",
		pod:      withDecision(numaPod("b", 1, 1, "SingleNUMANode"), gpuDecision("4", 2, kube.DecisionGPU{ID: 9})),
		affinity: true, contains: []string{"GPU 9 does not exist on this node"},
	}, {
		name:     "GPU UUID differs",
		pod:      withDecision(numaPod("b", 1, 1, "SingleNUMANode"), gpuDecision("4", 2, kube.DecisionGPU{ID: 2, UUID: "GPU-x"})),
		affinity: true, contains: []string{"GPU 2 is GPU-2 on this node, the decision names GPU-x"},
	}, {
		name:     "CPUs not on this node and reserved",
		pod:      withDecision(numaPod("b", 3, 0, "SingleNUMANode"), gpuDecision("7-9", 2)),
		affinity: true, contains: []string{"CPUs 8-9 do not exist on this node", "CPU 7 is reserved"},
	}, {
		name:     "NUMA node not on this node",
		pod:      withDecision(numaPod("b", 1, 0, "SingleNUMANode"), gpuDecision("4", 5)),
		affinity: true, contains: []string{"NUMA node 5 does not exist on this node"},
	}, {
		name: "device held and unknown",
		setup: func(t *testing.T, n *Node) {
			d := gpuDecision("0", 0)
			d.Devices = map[string][]string{"rdma": {"mlx5_0"}}
			_, err := n.Admit(withDecision(numaPod("a", 1, 0, "SingleNUMANode"), d))
			require.NoError(t, err)
		},
		pod: func() *kube.Pod {
			d := gpuDecision("1", 0)
			d.Devices = map[string][]string{"rdma": {"mlx5_0", "mlx5_9"}}
			return withDecision(numaPod("b", 1, 0, "SingleNUMANode"), d)
		}(),
		affinity: true, contains: []string{`rdma device "mlx5_0" is held by pod default/a`, `rdma device "mlx5_9" does not exist`},
		heldBy: "default/a",
	}, {
		name:     "local placement impossible",
		pod:      numaPod("b", 1, 3, "SingleNUMANode"),
		affinity: true, is: allocator.ErrNoNUMAFit, contains: []string{"pod default/b"},
	}, {
		name: "pod without cpuset-scheduler",
		pod: func() *kube.Pod {
			p := numaPod("b", 1, 0, "SingleNUMANode")
			delete(p.Annotations, kube.AnnotationCPUSetScheduler)
			return p
		}(),
		is:       kube.ErrInvalidPod,
		contains: []string{kube.AnnotationCPUSetScheduler},
	}, {
		name: "malformed decision",
		pod: func() *kube.Pod {
			p := numaPod("b", 1, 0, "SingleNUMANode")
			p.Annotations[kube.AnnotationAllocation] = `{"cpuset":"1-"}`
			return p
		}(),
		is: kube.ErrInvalidDecision, contains: []string{"pod default/b"},
	}, {
		name:     "decision disagrees with the request",
		pod:      withDecision(numaPod("b", 2, 0, "SingleNUMANode"), gpuDecision("0", 0)),
		is:       kube.ErrInvalidDecision,
		contains: []string{"it gives 1 CPUs and 0 GPUs, the pod requests 2 CPUs and 0 GPUs"},
	}, {
		name:     "decision names the wrong NUMA nodes",
		pod:      withDecision(numaPod("b", 1, 0, "SingleNUMANode"), gpuDecision("0", 2)),
		is:       kube.ErrInvalidDecision,
		contains: []string{"names NUMA nodes [2], but its CPUs, GPUs and memory lie on [0]"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, path := openTemp(t, m)
			if tt.setup != nil {
				tt.setup(t, n)
			}
			before := n.Admissions()
			file, err := os.ReadFile(path)
			require.NoError(t, err)

			_, err = n.Admit(tt.pod)
			require.Error(t, err)
			var tae *TopologyAffinityError
			if tt.affinity {
				require.ErrorAs(t, err, &tae)
				require.ErrorIs(t, err, ErrTopologyAffinity)
				require.Equal(t, "default/b", tae.Pod)
			} else {
				require.False(t, errors.As(err, &tae), "not an affinity error: %v", err)
			}
			if tt.is != nil {
				require.ErrorIs(t, err, tt.is)
			}
			for _, c := range tt.contains {
				require.Contains(t, err.Error(), c)
			}
			if tt.heldBy != "" {
				found := false
				for _, c := range tae.Conflicts {
					found = found || c.HeldBy == tt.heldBy
				}
				require.True(t, found, "conflicts %v name %s", tae.Conflicts, tt.heldBy)
			}
			// Nothing changed, in memory or on disk.
			require.Equal(t, summary(before), summary(n.Admissions()))
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, string(file), string(after))
			_, ok := n.Get("default/b")
			require.False(t, ok)
		})
	}
}

// An exclusive admission may not leave running shared-pool pods without
// CPUs; a shared-pool pod is refused when no CPU is left for it.
func TestSharedPoolNeverEmptied(t *testing.T) {
	m, err := topology.NewBuilder("no-reserved").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3)}).Build()
	require.NoError(t, err)
	n, _ := openTemp(t, m)
	_, err = n.Admit(sharedPod("web"))
	require.NoError(t, err)
	_, err = n.Admit(numaPod("a", 3, 0, "SingleNUMANode"))
	require.NoError(t, err)
	_, err = n.Admit(numaPod("b", 1, 0, "SingleNUMANode"))
	var tae *TopologyAffinityError
	require.ErrorAs(t, err, &tae)
	require.Contains(t, err.Error(), "the shared pool would be left without CPUs while 1 shared-pool pods run")
	require.Equal(t, 1, n.SharedPool().Size())

	require.NoError(t, n.Remove(sharedPod("web")))
	_, err = n.Admit(numaPod("b", 1, 0, "SingleNUMANode"))
	require.NoError(t, err, "no shared-pool pod runs: every CPU may be exclusive")
	_, err = n.Admit(sharedPod("web"))
	require.ErrorAs(t, err, &tae)
	require.Contains(t, err.Error(), "the shared pool has no CPUs")
}

func TestAdmitTwice(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	local := numaPod("a", 2, 1, "SingleNUMANode")
	first, err := n.Admit(local)
	require.NoError(t, err)
	dec := decisionFor(t, m, numaPod("b", 1, 0, "SingleNUMANode"))
	// decisionFor decided on an empty machine; move it to a CPU the local
	// pod does not hold.
	free := n.SharedPool().Difference(m.ReservedCPUs())
	cpu := free.Min()
	node, _ := m.CPUNode(cpu)
	dec.CPUSet, dec.NUMANodes, dec.MemoryMiB = strconv.Itoa(cpu), []int{int(m.NodeID(node))}, map[string]int64{}
	byDecision := withDecision(numaPod("b", 1, 0, "SingleNUMANode"), dec)
	second, err := n.Admit(byDecision)
	require.NoError(t, err)
	shared := sharedPod("web")
	_, err = n.Admit(shared)
	require.NoError(t, err)

	tests := []struct {
		name string
		pod  *kube.Pod
		same *Admission // nil: ErrAdmittedDifferently
	}{
		{"local again", local, &first},
		{"decision again", byDecision, &second},
		{"local pod now with its own decision", withDecision(local, kube.NewDecision(m, &first.Allocation)), &first},
		{"decision pod again without UID", func() *kube.Pod { p := *byDecision; p.UID = ""; return &p }(), &second},
		{"local pod asking for more", numaPod("a", 3, 1, "SingleNUMANode"), nil},
		{"local pod under another policy", numaPod("a", 2, 1, "BestEffort"), nil},
		{"another decision", withDecision(numaPod("b", 1, 0, "SingleNUMANode"), kube.Decision{CPUSet: "6", MemoryMiB: map[string]int64{}}), nil},
		{"another UID", func() *kube.Pod { p := *local; p.UID = "other"; return &p }(), nil},
		{"shared pod asking for exclusive CPUs", func() *kube.Pod { p := *numaPod("web", 1, 0, "SingleNUMANode"); p.UID = "uid-web"; return &p }(), nil},
		{"exclusive pod now shared", func() *kube.Pod { p := *sharedPod("a"); return &p }(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := n.Admissions()
			got, err := n.Admit(tt.pod)
			if tt.same != nil {
				require.NoError(t, err)
				require.Equal(t, describeAdmission(*tt.same), describeAdmission(got))
			} else {
				require.ErrorIs(t, err, ErrAdmittedDifferently)
				require.Contains(t, err.Error(), tt.pod.Key())
			}
			require.Equal(t, summary(before), summary(n.Admissions()))
		})
	}
	// A shared pod admitted again sees the shared pool as it is now.
	again, err := n.Admit(shared)
	require.NoError(t, err)
	require.True(t, n.SharedPool().Equal(again.CPUs))
}

func TestRemove(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	pod := numaPod("a", 2, 1, "SingleNUMANode")
	_, err := n.Admit(pod)
	require.NoError(t, err)
	_, err = n.Admit(sharedPod("web"))
	require.NoError(t, err)

	other := *pod
	other.UID = "someone-else"
	require.ErrorIs(t, n.Remove(&other), allocator.ErrUnknownID)
	_, ok := n.Get(pod.Key())
	require.True(t, ok, "a Remove with another UID changes nothing")

	require.NoError(t, n.Remove(pod))
	require.ErrorIs(t, n.Remove(pod), allocator.ErrUnknownID, "a repeated Remove is harmless and says so")
	require.NoError(t, n.Remove(sharedPod("web")))
	require.Empty(t, n.Admissions())
	require.True(t, m.CPUs().Equal(n.SharedPool()))

	re, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	require.Empty(t, re.Admissions())
}

func TestSetDeviceHealth(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	d := kube.Decision{CPUSet: "0", NUMANodes: []int{0}, GPUs: []kube.DecisionGPU{{ID: 1}}, MemoryMiB: map[string]int64{}}
	_, err := n.Admit(withDecision(numaPod("a", 1, 1, "SingleNUMANode"), d))
	require.NoError(t, err)

	affected, err := n.SetDeviceHealth("gpu", "GPU-1", false) // by UUID
	require.NoError(t, err)
	require.Equal(t, []string{"default/a"}, affected, "the pod holding it keeps it and is reported")
	affected, err = n.SetDeviceHealth("gpu", "0", false) // by index
	require.NoError(t, err)
	require.Empty(t, affected)
	_, err = n.SetDeviceHealth("rdma", "mlx5_1", false)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"gpu": {"0", "1"}, "rdma": {"mlx5_1"}}, n.Unhealthy())

	_, err = n.SetDeviceHealth("gpu", "7", false)
	require.ErrorIs(t, err, allocator.ErrUnknownDevice)
	_, err = n.SetDeviceHealth("fpga", "x", false)
	require.ErrorIs(t, err, allocator.ErrUnknownDevice)

	// A one-GPU pod on node 0 cannot be placed any more: both GPUs there are
	// unhealthy or held.
	_, err = n.Admit(withDecision(numaPod("b", 1, 1, "SingleNUMANode"),
		kube.Decision{CPUSet: "1", NUMANodes: []int{0}, GPUs: []kube.DecisionGPU{{ID: 0}}, MemoryMiB: map[string]int64{}}))
	require.ErrorIs(t, err, ErrTopologyAffinity)

	re, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	require.Equal(t, n.Unhealthy(), re.Unhealthy(), "health survives a restart")
	_, err = re.SetDeviceHealth("gpu", "0", true)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"gpu": {"1"}, "rdma": {"mlx5_1"}}, re.Unhealthy())
}

// A checkpoint that cannot be written undoes the change: in memory and on
// disk the node is as it was.
func TestCheckpointFailureUndoes(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	held := numaPod("a", 2, 1, "SingleNUMANode")
	_, err := n.Admit(held)
	require.NoError(t, err)
	_, err = n.Admit(sharedPod("web"))
	require.NoError(t, err)
	before, snap := n.Admissions(), n.s.Snapshot()
	file, err := os.ReadFile(path)
	require.NoError(t, err)

	boom := errors.New("disk full")
	n.write = func(string, []byte) error { return boom }
	check := func(t *testing.T, err error) {
		t.Helper()
		require.ErrorIs(t, err, boom)
		require.ErrorIs(t, err, ErrCheckpoint)
		require.Contains(t, err.Error(), path)
		require.Equal(t, summary(before), summary(n.Admissions()))
		require.Equal(t, snapSummary(snap), snapSummary(n.s.Snapshot()))
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Equal(t, string(file), string(after))
	}
	t.Run("admit local", func(t *testing.T) {
		_, err := n.Admit(numaPod("b", 1, 1, "SingleNUMANode"))
		check(t, err)
	})
	t.Run("admit shared", func(t *testing.T) {
		_, err := n.Admit(sharedPod("web2"))
		check(t, err)
	})
	t.Run("remove", func(t *testing.T) {
		check(t, n.Remove(held))
	})
	t.Run("remove shared", func(t *testing.T) {
		check(t, n.Remove(sharedPod("web")))
	})
	t.Run("health", func(t *testing.T) {
		_, err := n.SetDeviceHealth("gpu", "3", false)
		check(t, err)
	})

	// The same through the file system: the checkpoint's directory is gone.
	n.write = writeFileAtomic
	require.NoError(t, os.RemoveAll(filepath.Dir(path)))
	_, err = n.Admit(numaPod("b", 1, 1, "SingleNUMANode"))
	require.ErrorIs(t, err, ErrCheckpoint)
	require.Equal(t, summary(before), summary(n.Admissions()))
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	_, err = n.Admit(numaPod("b", 1, 1, "SingleNUMANode"))
	require.NoError(t, err)
}

// The write that fails after the rename (the directory's fsync) leaves the
// new file in place; the node writes the undone state again.
func TestCheckpointFailureAfterRename(t *testing.T) {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	calls := 0
	n.write = func(p string, data []byte) error {
		calls++
		if err := writeFileAtomic(p, data); err != nil {
			return err
		}
		if calls == 1 {
			return errors.New("fsync directory: input/output error")
		}
		return nil
	}
	_, err := n.Admit(numaPod("a", 1, 0, "SingleNUMANode"))
	require.ErrorIs(t, err, ErrCheckpoint)
	require.Equal(t, 2, calls)
	re, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	require.Empty(t, re.Admissions(), "the file matches the undone state")
}

func TestOpenInMemory(t *testing.T) {
	m := smallMachine(t)
	n, err := Open(m, "", NodeOptions{})
	require.NoError(t, err)
	require.Equal(t, "", n.CheckpointPath())
	_, err = n.Admit(numaPod("a", 1, 0, "SingleNUMANode"))
	require.NoError(t, err)
	_, err = Open(nil, "", NodeOptions{})
	require.Error(t, err)
	_, err = n.Admit(nil)
	require.Error(t, err)
	require.Error(t, n.Remove(nil))
	_, err = n.Admit(&kube.Pod{Namespace: "default"})
	require.ErrorIs(t, err, kube.ErrInvalidPod)
}

// Concurrent admissions and removals (run with -race): every pod that was
// admitted and not removed holds exactly what it was given, nothing is held
// twice, and the checkpoint restores the same state.
func TestConcurrentAdmitRemove(t *testing.T) {
	m := preset(t, "dgx-a100")
	n, path := openTemp(t, m)
	const workers, perWorker = 4, 12
	var wg sync.WaitGroup
	kept := make([][]Admission, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				name := fmt.Sprintf("w%d-%d", w, i)
				var pod *kube.Pod
				switch i % 3 {
				case 0:
					pod = numaPod(name, 4, 1, "SingleNUMANode")
				case 1:
					pod = numaPod(name, 6, 0, "BestEffort")
				default:
					pod = sharedPod(name)
				}
				adm, err := n.Admit(pod)
				if err != nil {
					if !errors.Is(err, ErrTopologyAffinity) {
						t.Errorf("admit %s: %v", name, err)
					}
					continue
				}
				_, _ = n.Admit(pod) // idempotent, concurrently with others
				if i%2 == 0 {
					if err := n.Remove(pod); err != nil {
						t.Errorf("remove %s: %v", name, err)
					}
					continue
				}
				kept[w] = append(kept[w], adm)
				_ = n.SharedPool()
				_, _ = n.GetPreferredAllocation([]string{"0", "1", "2", "3"}, nil, 2)
			}
		}()
	}
	wg.Wait()

	var held numa.CPUSet
	gpus := map[int]string{}
	count := 0
	for _, ks := range kept {
		for _, k := range ks {
			count++
			got, ok := n.Get(k.Pod)
			require.True(t, ok, k.Pod)
			if k.Source == SharedPool {
				continue
			}
			require.True(t, k.CPUs.Equal(got.CPUs), k.Pod)
			require.False(t, held.Intersects(k.CPUs), "CPUs %s held twice", k.CPUs)
			held.UnionWith(k.CPUs)
			for _, g := range k.GPUs {
				require.Empty(t, gpus[g.ID], "GPU %d held twice", g.ID)
				gpus[g.ID] = k.Pod
			}
		}
	}
	require.Len(t, n.Admissions(), count)
	re, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	require.Equal(t, summary(n.Admissions()), summary(re.Admissions()))
	require.Equal(t, snapSummary(n.s.Snapshot()), snapSummary(re.s.Snapshot()))
}

// The report carries what the node holds, and gives the scheduler back the
// node's own machine.
func TestReport(t *testing.T) {
	m := preset(t, "dgx-a100")
	n, _ := openTemp(t, m)
	adm, err := n.Admit(numaPod("a", 16, 2, "SingleNUMANode"))
	require.NoError(t, err)
	_, err = n.SetDeviceHealth("gpu", "7", false)
	require.NoError(t, err)

	r, err := n.Report("node-1")
	require.NoError(t, err)
	require.Equal(t, "node-1", r.Metadata.Name)
	require.Len(t, r.Zones, m.NumNodes())
	zone := "node-" + adm.NUMANodes[0].String()
	for _, z := range r.Zones {
		cpu, ok := z.Resource(kube.ResourceCPU)
		require.True(t, ok)
		gpu, ok := z.Resource(kube.ResourceAliyunGPU)
		require.True(t, ok)
		switch z.Name {
		case zone:
			require.Equal(t, kube.NRTQuantity("16"), cpu.Available)
			require.Equal(t, kube.NRTQuantity("0"), gpu.Available)
		case "node-5": // GPUs 6 and 7; 7 is unhealthy
			require.Equal(t, kube.NRTQuantity("32"), cpu.Available)
			require.Equal(t, kube.NRTQuantity("1"), gpu.Allocatable)
			require.Equal(t, kube.NRTQuantity("1"), gpu.Available)
		default:
			require.Equal(t, kube.NRTQuantity("32"), cpu.Available, z.Name)
		}
	}
	back, err := kube.MachineFromNRT(r)
	require.NoError(t, err)
	require.Equal(t, m.NumCPUs(), back.NumCPUs())
	require.Equal(t, m.GPUs(), back.GPUs())
}

// TestDeviceIDsAreCanonical: a GPU marked unhealthy under another spelling
// of its index ("+1", "01", "0000000001") and cleared with "1" ends
// healthy in the node, its state, the checkpoint and after a restart;
// spellings that are not decimal integers and class names that differ in
// case are refused, changing nothing.
func TestDeviceIDsAreCanonical(t *testing.T) {
	m := smallMachine(t)
	for _, form := range []string{"+1", "01", "0000000001"} {
		t.Run(form, func(t *testing.T) {
			n, path := openTemp(t, m)
			_, err := n.SetDeviceHealth("gpu", form, false)
			require.NoError(t, err)
			require.Equal(t, map[string][]string{"gpu": {"1"}}, n.Unhealthy(), "recorded as GPU 1")
			re, err := Open(m, path, NodeOptions{})
			require.NoError(t, err)
			require.Equal(t, map[string][]string{"gpu": {"1"}}, re.Unhealthy(), "the checkpoint says GPU 1")

			_, err = n.SetDeviceHealth("gpu", "1", true)
			require.NoError(t, err)
			require.Empty(t, n.Unhealthy())
			require.Empty(t, n.s.Snapshot().Unhealthy, "healthy in the state")
			re, err = Open(m, path, NodeOptions{})
			require.NoError(t, err)
			require.Empty(t, re.Unhealthy(), "healthy after a restart")
			require.Empty(t, re.s.Snapshot().Unhealthy)
			// Both GPUs of node 0 can be handed out again.
			_, err = re.Admit(withDecision(numaPod("a", 1, 2, "SingleNUMANode"),
				kube.Decision{CPUSet: "0", NUMANodes: []int{0}, GPUs: []kube.DecisionGPU{{ID: 0}, {ID: 1}}, MemoryMiB: map[string]int64{}}))
			require.NoError(t, err)
		})
	}
	n, path := openTemp(t, m)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, bad := range []string{"", " 1", "1 ", "0x1", "-1", "1.0", "1e0", "٣", "++1", "99999999999999999999"} {
		_, err := n.SetDeviceHealth("gpu", bad, false)
		require.ErrorIs(t, err, allocator.ErrUnknownDevice, "%q", bad)
	}
	_, err = n.SetDeviceHealth("GPU", "1", false)
	require.ErrorIs(t, err, allocator.ErrUnknownDevice)
	require.ErrorContains(t, err, `did you mean "gpu"?`)
	require.ErrorContains(t, err, "its device classes: gpu, rdma")
	_, err = n.SetDeviceHealth("RDMA", "mlx5_1", false)
	require.ErrorContains(t, err, `did you mean "rdma"?`)
	require.Empty(t, n.Unhealthy(), "nothing changed")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "the checkpoint is untouched")
}

// The report's fingerprint is that of the admitted pods, shared-pool pods
// included, and follows admissions and removals.
func TestReportFingerprint(t *testing.T) {
	m := preset(t, "dgx-a100")
	n, _ := openTemp(t, m)
	sign := func() string {
		t.Helper()
		r, err := n.Report("node-1")
		require.NoError(t, err)
		v, ok := r.Attribute(kube.NRTAttributePodFingerprint)
		require.True(t, ok)
		method, _ := r.Attribute(kube.NRTAttributePodFingerprintMethod)
		require.Equal(t, kube.PodFingerprintMethodExcludeTerminal, method)
		require.Equal(t, v, r.Metadata.Annotations[kube.AnnotationPodFingerprint])
		return v
	}
	var empty kube.PodFingerprint
	require.Equal(t, empty.Sign(), sign())
	_, err := n.Admit(numaPod("a", 16, 2, "SingleNUMANode"))
	require.NoError(t, err)
	_, err = n.Admit(sharedPod("web"))
	require.NoError(t, err)
	var want kube.PodFingerprint
	want.Add("default", "web")
	want.Add("default", "a")
	require.Equal(t, want.Sign(), sign())
	require.NoError(t, n.Remove(sharedPod("web")))
	var after kube.PodFingerprint
	after.Add("default", "a")
	require.Equal(t, after.Sign(), sign())
}

// TestNilNodeAndPlugin: a nil *Node and a device plugin of no machine
// answer with errors (or empty results), never a panic.
func TestNilNodeAndPlugin(t *testing.T) {
	var n *Node
	pod := &kube.Pod{Namespace: "default", Name: "a"}
	_, err := n.Admit(pod)
	require.ErrorIs(t, err, errNilNode)
	require.ErrorIs(t, n.Remove(pod), errNilNode)
	_, err = n.SetDeviceHealth("gpu", "0", false)
	require.ErrorIs(t, err, errNilNode)
	_, err = n.Report("node")
	require.ErrorIs(t, err, errNilNode)
	_, err = n.GetPreferredAllocation([]string{"0"}, nil, 1)
	require.ErrorIs(t, err, errNilNode)
	_, ok := n.Get("default/a")
	require.False(t, ok)
	require.Nil(t, n.Admissions())
	require.Nil(t, n.Unhealthy())
	require.Nil(t, n.Machine())
	require.Nil(t, n.PreferredAllocator())
	require.Nil(t, n.RemovedLeftovers())
	require.Empty(t, n.CheckpointPath())
	require.True(t, n.SharedPool().IsEmpty())
	for _, e := range []error{(*CheckpointError)(nil), (*TopologyAffinityError)(nil)} {
		require.Equal(t, "<nil>", e.Error())
	}

	_, err = NewPreferredAllocator(nil).GetPreferredAllocation([]string{"0"}, nil, 1)
	require.ErrorIs(t, err, ErrDeviceRequest)
	var p *PreferredAllocator
	_, err = p.Prefer([]string{"0"}, nil, 1)
	require.ErrorIs(t, err, ErrDeviceRequest)
}
