package benchmarks

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	_ "unsafe" // go:linkname, for the device manager's constructor

	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	cpustate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	cputopology "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	memstate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"

	numaplacetm "github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

// newDeviceManager is the device manager's unexported constructor, which
// takes the device plugin socket path. The exported NewManagerImpl fixes it
// to /var/lib/kubelet/device-plugins/kubelet.sock and creates that folder
// (and writes its checkpoint there when devices register): a test must not
// touch the machine's /var/lib/kubelet, so the tests reach the constructor
// the kubelet's own tests use, with a temporary folder. Only the
// constructor is reached this way; the hints come from the exported
// GetPodTopologyHints. (A pull linkname to a non-standard-library symbol is
// allowed by the Go linker; the empty linkname.s lets the compiler accept a
// function declaration without a body.)
//
//go:linkname newDeviceManager k8s.io/kubernetes/pkg/kubelet/cm/devicemanager.newManagerImpl
func newDeviceManager(logger klog.Logger, socketPath string, topology []cadvisorapi.Node,
	topologyAffinityStore topologymanager.Store) (*devicemanager.ManagerImpl, error)

// reservedMemoryPerNode is the memory each node reserves for the system on
// the kubelet side (its static memory manager refuses to start without a
// reservation); cAdvisor is told each node has this much more memory than
// numaplace's machine, so that the allocatable memory is the same on both
// sides.
const reservedMemoryPerNode = 1 << 30

// kubeletNode is a kubelet's three hint providers, the real ones from
// k8s.io/kubernetes, set up for a numaplace machine in a given state the
// way the kubelet sets them up at start: the device manager (with the
// machine's GPUs registered under numaplacetm.DefaultGPUResource through the
// device plugin ListAndWatch path), the static CPU manager policy with its
// in-memory state, and the static memory manager policy with its in-memory
// state. Nothing runs in the background and nothing is written outside a
// test's temporary folder.
type kubeletNode struct {
	devices  *devicemanager.ManagerImpl
	cpu      cpumanager.Policy
	cpuState cpustate.State
	memory   memorymanager.Policy
	memState memstate.State
}

// cadvisorInfo describes the machine as cAdvisor would: NUMA nodes with
// their cores (SMT siblings as threads), memory and distance rows.
func cadvisorInfo(m *topology.Machine) *cadvisorapi.MachineInfo {
	info := &cadvisorapi.MachineInfo{NumCores: m.NumCPUs(), NumSockets: max(1, len(m.Sockets()))}
	rows := m.Distances().Rows()
	for i := range m.NumNodes() {
		node := m.Node(i)
		cn := cadvisorapi.Node{Id: int(node.ID), Memory: uint64(node.MemoryMiB)<<20 + reservedMemoryPerNode}
		for _, d := range rows[i] {
			cn.Distances = append(cn.Distances, uint64(d))
		}
		for c := range m.NumCores() {
			if m.CoreNode(c) != i {
				continue
			}
			socket := node.Socket
			if socket < 0 {
				socket = 0
			}
			cn.Cores = append(cn.Cores, cadvisorapi.Core{Id: c, Threads: m.CoreCPUs(c).List(), SocketID: socket})
		}
		info.Topology = append(info.Topology, cn)
	}
	return info
}

// newKubeletNode sets up the kubelet's hint providers for m in the state
// st (nil: empty). Live allocations become what the kubelet's managers
// would hold: their CPUs are assigned to a container in the CPU manager's
// state, their GPUs are reported unhealthy by the device plugin (the device
// manager counts held and unhealthy devices alike: registered but not
// available; the device manager's allocated set cannot be filled without a
// running plugin), and their memory is taken from its nodes in the memory
// manager's machine state, grouped over the allocation's memory nodes.
func newKubeletNode(tb testing.TB, m *topology.Machine, st *allocator.State) *kubeletNode {
	tb.Helper()
	var snap allocator.Snapshot
	if st != nil {
		snap = st.Snapshot()
	}
	info := cadvisorInfo(m)
	store := topologymanager.NewFakeManager(quiet)
	k := &kubeletNode{}

	// Device manager.
	dir := tb.TempDir()
	dm, err := newDeviceManager(quiet, filepath.Join(dir, "kubelet.sock"), info.Topology, store)
	if err != nil {
		tb.Fatal(err)
	}
	held := map[int]bool{}
	for _, a := range snap.Allocations {
		for _, g := range a.GPUs {
			held[g] = true
		}
	}
	for _, id := range snap.Unhealthy[allocator.GPUClass] {
		g, _ := strconv.Atoi(id)
		held[g] = true
	}
	var devs []*pluginapi.Device
	for _, g := range m.GPUs() {
		d := &pluginapi.Device{ID: strconv.Itoa(g.ID), Health: pluginapi.Healthy}
		if held[g.ID] {
			d.Health = pluginapi.Unhealthy
		}
		if g.NUMANode >= 0 {
			d.Topology = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(g.NUMANode)}}}
		}
		devs = append(devs, d)
	}
	if len(devs) > 0 {
		dm.PluginListAndWatchReceiver(quiet, numaplacetm.DefaultGPUResource, &pluginapi.ListAndWatchResponse{Devices: devs})
	}
	k.devices = dm

	// CPU manager, static policy.
	topo, err := cputopology.Discover(quiet, info)
	if err != nil {
		tb.Fatal(err)
	}
	reserved := cpuset.New(m.ReservedCPUs().List()...)
	k.cpu, err = cpumanager.NewStaticPolicy(quiet, topo, reserved.Size(), reserved, store, nil)
	if err != nil {
		tb.Fatal(err)
	}
	k.cpuState = cpustate.NewMemoryState(quiet)
	if err := k.cpu.Start(quiet, k.cpuState); err != nil {
		tb.Fatal(err)
	}
	free := k.cpuState.GetDefaultCPUSet()
	for _, a := range snap.Allocations {
		cpus := cpuset.New(a.CPUs.List()...)
		if cpus.Size() == 0 {
			continue
		}
		k.cpuState.SetCPUSet("held-"+a.ID, "main", cpus)
		free = free.Difference(cpus)
	}
	k.cpuState.SetDefaultCPUSet(free)

	// Memory manager, static policy.
	reservedMem := map[int]map[v1.ResourceName]uint64{}
	for _, n := range info.Topology {
		reservedMem[n.Id] = map[v1.ResourceName]uint64{v1.ResourceMemory: reservedMemoryPerNode}
	}
	k.memory, err = memorymanager.NewPolicyStatic(quiet, info, reservedMem, store)
	if err != nil {
		tb.Fatal(err)
	}
	k.memState = memstate.NewMemoryState(quiet)
	if err := k.memory.Start(quiet, k.memState); err != nil {
		tb.Fatal(err)
	}
	ms := k.memState.GetMachineState()
	for _, a := range snap.Allocations {
		var cells []int
		for _, nm := range a.Memory {
			cells = append(cells, int(nm.Node))
		}
		for _, nm := range a.Memory {
			ns := ms[int(nm.Node)]
			t := ns.MemoryMap[v1.ResourceMemory]
			t.Free -= uint64(nm.MiB) << 20
			t.Reserved += uint64(nm.MiB) << 20
			ns.NumberOfAssignments++
			ns.Cells = append([]int(nil), cells...)
		}
	}
	k.memState.SetMachineState(ms)
	return k
}

// providers returns the three providers' pod hints for the pod, in the
// order the kubelet adds them to its Topology Manager on Linux (device,
// CPU, memory manager), as its pod scope gathers them.
func (k *kubeletNode) providers(pod *v1.Pod) []map[string][]topologymanager.TopologyHint {
	return []map[string][]topologymanager.TopologyHint{
		k.devices.GetPodTopologyHints(quiet, pod, lifecycle.AddOperation),
		k.cpu.GetPodTopologyHints(quiet, k.cpuState, pod, lifecycle.AddOperation),
		k.memory.GetPodTopologyHints(quiet, k.memState, pod, lifecycle.AddOperation),
	}
}

// guaranteedPod is a one-container Guaranteed pod asking for the request's
// CPUs, memory and GPUs (requests equal to limits), as the kubelet's CPU
// and memory managers need it to give hints.
func guaranteedPod(r *allocator.Request) *v1.Pod {
	res := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(r.CPUs), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(r.MemoryMiB<<20, resource.BinarySI),
	}
	if r.GPUs > 0 {
		res[numaplacetm.DefaultGPUResource] = *resource.NewQuantity(int64(r.GPUs), resource.DecimalSI)
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod", Namespace: "default", UID: types.UID("pod-" + r.String())},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name:      "main",
			Resources: v1.ResourceRequirements{Requests: res, Limits: res},
		}}},
	}
}

// mustPreset returns a built-in machine.
func mustPreset(tb testing.TB, name string) *topology.Machine {
	tb.Helper()
	m, err := topology.Preset(name)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// TestNoKubeletFolder guards the reason for the linkname above: setting up
// the kubelet's providers must not create the kubelet's folder.
func TestNoKubeletFolder(t *testing.T) {
	_, before := os.Stat("/var/lib/kubelet")
	newKubeletNode(t, mustPreset(t, "dgx-a100"), nil)
	_, after := os.Stat("/var/lib/kubelet")
	if os.IsNotExist(before) && !os.IsNotExist(after) {
		t.Fatal("setting up the device manager created /var/lib/kubelet")
	}
}
