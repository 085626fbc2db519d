package kubelet

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/numa"
)

// fakeCgroup makes dir look like a cgroup v2 directory with the cpuset
// controller enabled: cpuset.cpus and cpuset.mems exist (holding what the
// parent gave).
func fakeCgroup(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("0-255\n"), 0o644))
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func TestApply(t *testing.T) {
	const cg = "kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope"
	tests := []struct {
		name       string
		adm        Admission
		cgroup     string
		prepare    bool   // make the cgroup directory with its files
		cpus, mems string // expected contents (without the newline)
		env        string
		err        string // expected error substring
	}{{
		name: "exclusive with UUIDs",
		adm: Admission{Pod: "default/a", CPUs: numa.MustParseCPUSet("48-55,176-183"), NUMANodes: []numa.NodeID{3},
			GPUs: []kube.DecisionGPU{{ID: 0, UUID: "GPU-aaa"}, {ID: 1, UUID: "GPU-bbb"}}},
		cgroup: cg, prepare: true, cpus: "48-55,176-183", mems: "3", env: "NVIDIA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb",
	}, {
		name: "indices without UUIDs, two nodes",
		adm: Admission{Pod: "default/a", CPUs: numa.MustParseCPUSet("0-3,56-59"), NUMANodes: []numa.NodeID{0, 1},
			GPUs: []kube.DecisionGPU{{ID: 3}, {ID: 4}}},
		cgroup: cg, prepare: true, cpus: "0-3,56-59", mems: "0-1", env: "NVIDIA_VISIBLE_DEVICES=3,4",
	}, {
		name: "mixed UUIDs and indices, sparse node IDs",
		adm: Admission{Pod: "default/a", CPUs: numa.NewCPUSet(5), NUMANodes: []numa.NodeID{0, 33, 34},
			GPUs: []kube.DecisionGPU{{ID: 3, UUID: "GPU-c"}, {ID: 4}}},
		cgroup: cg, prepare: true, cpus: "5", mems: "0,33-34", env: "NVIDIA_VISIBLE_DEVICES=GPU-c,4",
	}, {
		name: "shared pool, no GPU",
		adm: Admission{Pod: "default/web", Source: SharedPool, CPUs: numa.MustParseCPUSet("0-3,8-255"),
			NUMANodes: []numa.NodeID{0, 1, 2, 3}},
		cgroup: cg, prepare: true, cpus: "0-3,8-255", mems: "0-3", env: "NVIDIA_VISIBLE_DEVICES=void",
	}, {
		name:   "the root itself",
		adm:    Admission{Pod: "default/a", CPUs: numa.NewCPUSet(1), NUMANodes: []numa.NodeID{0}},
		cgroup: "", prepare: true, cpus: "1", mems: "0", env: "NVIDIA_VISIBLE_DEVICES=void",
	}, {
		name:   "no cpuset controller",
		adm:    Admission{Pod: "default/a", CPUs: numa.NewCPUSet(1), NUMANodes: []numa.NodeID{0}},
		cgroup: "no-cpuset",
		err:    "cpuset.cpus: the file does not exist: is the cpuset controller enabled",
	}, {
		name:   "no cgroup directory",
		adm:    Admission{Pod: "default/a", CPUs: numa.NewCPUSet(1), NUMANodes: []numa.NodeID{0}},
		cgroup: "missing/container",
		err:    "the cgroup directory does not exist",
	}, {
		name:   "escaping path",
		adm:    Admission{Pod: "default/a", CPUs: numa.NewCPUSet(1), NUMANodes: []numa.NodeID{0}},
		cgroup: "../elsewhere", prepare: true,
		err: `cgroup path "../elsewhere" must be relative and stay under the root`,
	}, {
		name:   "absolute path",
		adm:    Admission{Pod: "default/a", CPUs: numa.NewCPUSet(1), NUMANodes: []numa.NodeID{0}},
		cgroup: "/sys/fs/cgroup/x",
		err:    "must be relative",
	}, {
		name:   "no CPUs",
		adm:    Admission{Pod: "default/a", NUMANodes: []numa.NodeID{0}},
		cgroup: cg, prepare: true,
		err: "pod default/a: the admission has no CPUs",
	}, {
		name:   "no NUMA nodes",
		adm:    Admission{Pod: "default/a", CPUs: numa.NewCPUSet(1)},
		cgroup: cg, prepare: true,
		err: "pod default/a: the admission has no NUMA nodes",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, tt.cgroup)
			if tt.prepare && filepath.IsLocal(tt.cgroup) || tt.prepare && tt.cgroup == "" {
				fakeCgroup(t, dir)
			}
			if tt.cgroup == "no-cpuset" {
				require.NoError(t, os.MkdirAll(dir, 0o755))
			}
			env, err := Apply(root, tt.cgroup, &tt.adm)
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				require.Nil(t, env)
				if tt.prepare && filepath.IsLocal(tt.cgroup) {
					require.Equal(t, "0-255\n", readFile(t, filepath.Join(dir, "cpuset.cpus")), "nothing written")
				}
				return
			}
			require.NoError(t, err)
			require.Equal(t, []string{tt.env}, env)
			require.Equal(t, tt.cpus+"\n", readFile(t, filepath.Join(dir, "cpuset.cpus")))
			require.Equal(t, tt.mems+"\n", readFile(t, filepath.Join(dir, "cpuset.mems")))
			require.Equal(t, tt.adm.Env(), env)
		})
	}
	_, err := Apply(t.TempDir(), "", nil)
	require.Error(t, err)
}

// An error names the file that could not be written.
func TestApplyErrorNamesTheFile(t *testing.T) {
	root := t.TempDir()
	fakeCgroup(t, root)
	// cpuset.mems is a directory: opening it for writing fails.
	require.NoError(t, os.Remove(filepath.Join(root, "cpuset.mems")))
	require.NoError(t, os.Mkdir(filepath.Join(root, "cpuset.mems"), 0o755))
	_, err := Apply(root, "", &Admission{Pod: "default/a", CPUs: numa.NewCPUSet(1), NUMANodes: []numa.NodeID{0}})
	require.ErrorContains(t, err, filepath.Join(root, "cpuset.mems"))
}

// Apply of what a node admitted.
func TestApplyAdmission(t *testing.T) {
	m := preset(t, "dgx-a100")
	n, _ := openTemp(t, m)
	adm, err := n.Admit(numaPod("a", 8, 2, "SingleNUMANode"))
	require.NoError(t, err)
	root := t.TempDir()
	fakeCgroup(t, filepath.Join(root, "pod"))
	env, err := Apply(root, "pod", &adm)
	require.NoError(t, err)
	require.Equal(t, adm.CPUs.String()+"\n", readFile(t, filepath.Join(root, "pod", "cpuset.cpus")))
	require.Equal(t, adm.NUMANodes[0].String()+"\n", readFile(t, filepath.Join(root, "pod", "cpuset.mems")))
	require.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=" + adm.VisibleDevices()}, env)
	require.Len(t, adm.GPUs, 2)
}

// cpuset.mems follows the decision's memory: a span of two NUMA nodes whose
// memory is all reserved on one gets that one only.
func TestApplyMemoryNodes(t *testing.T) {
	m := smallMachine(t)
	n, _ := openTemp(t, m)
	d := kube.Decision{CPUSet: "0,4", NUMANodes: []int{0, 2}, MemoryMiB: map[string]int64{"0": 0, "2": 512}}
	adm, err := n.Admit(withDecision(withMem(numaPod("a", 2, 0, "Restricted"), "512Mi"), d))
	require.NoError(t, err)
	root := t.TempDir()
	fakeCgroup(t, filepath.Join(root, "pod"))
	_, err = Apply(root, "pod", &adm)
	require.NoError(t, err)
	require.Equal(t, "2\n", readFile(t, filepath.Join(root, "pod", "cpuset.mems")))
	require.Equal(t, "0,4\n", readFile(t, filepath.Join(root, "pod", "cpuset.cpus")))
}
