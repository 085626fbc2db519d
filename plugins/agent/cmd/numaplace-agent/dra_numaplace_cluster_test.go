package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/internal/controlplane"
)

// The harness of the tests of numaplace-scheduler deciding DRA claims
// (issue 24): a DRA cluster (startDRACluster) whose node is splitTree,
// a machine on which DRA's built-in allocator and numaplace disagree, with
// numaplace-scheduler running beside the default kube-scheduler, and the
// helpers that read what each component recorded of a pod: its decision,
// its claims' allocations, its container's devices, cpuset and memory
// nodes, and the kubelet's pod-resources API.

// fakeTree is a fake machine for startDRACluster: its GPUs (in bus order,
// discovery's GPU IDs), its RDMA NICs and the sysfs device path of each
// (fakePCIePaths' form), which places it under its PCIe switch.
type fakeTree struct {
	gpus  []fakeGPU
	nics  []fakeNIC
	paths map[string]string
}

// write writes the tree under dir as fakeSysfsWithNICs does (its buses are
// none of fakePCIePaths', so that only the tree's own paths are made) and
// returns the root.
func (f *fakeTree) write(t *testing.T, dir string) string {
	t.Helper()
	for _, g := range f.gpus {
		_, clash := fakePCIePaths[g.bus]
		require.False(t, clash, "the tree's GPU %s has a bus of fakePCIePaths", g.bus)
	}
	root := fakeSysfsWithNICs(t, dir, f.gpus, f.nics)
	for bus, p := range f.paths {
		_, clash := fakePCIePaths[bus]
		require.False(t, clash, "the tree's device %s has a bus of fakePCIePaths", bus)
		require.NoError(t, os.MkdirAll(filepath.Join(root, "sys", "devices", p), 0o755))
	}
	return root
}

// splitTree is a machine of two NUMA nodes (one CPU each, the host's two,
// since cpusets must name real CPUs for runc), eight GPUs and one RDMA NIC,
// arranged so that DRA's first fit and numaplace disagree:
//
//   - NUMA node 0 has GPUs 0-3 (buses 18, 2a, 4c, 5d), each alone under a
//     PCIe switch of its own;
//   - NUMA node 1 has GPUs 4 and 5 (9c, 9d) under switch 0000:90:00.0 with
//     the NIC mlx5_0 (9e), and GPUs 6 and 7 (c1, c2) under switch
//     0000:b0:00.0.
//
// The driver lists GPUs in ID order, so the built-in allocator's first fit
// gives a claim for 2 (or 4) GPUs GPUs 0-1 (0-3) on NUMA node 0, under two
// (four) switches, and a claim for a NIC the NIC on node 1; numaplace
// prefers GPUs under the fewest switches per node (allocator/rank.go's
// penalty), so it gives 2 GPUs of one switch of node 1, 4 GPUs of node 1,
// and GPUs with a NIC node 1's. Device minors are not GPU IDs, and the
// NIC's uverbs minor is 1, so that a device node named by an index is
// caught.
func splitTree() *fakeTree {
	return &fakeTree{
		gpus: []fakeGPU{
			{"0000:18:00.0", 0, 2, "GPU-7e2d5c1a-4b60-4c1e-8d10-180000000000"},
			{"0000:2a:00.0", 0, 3, "GPU-7e2d5c1a-4b60-4c1e-8d10-2a0000000000"},
			{"0000:4c:00.0", 0, 6, "GPU-7e2d5c1a-4b60-4c1e-8d10-4c0000000000"},
			{"0000:5d:00.0", 0, 7, "GPU-7e2d5c1a-4b60-4c1e-8d10-5d0000000000"},
			{"0000:9c:00.0", 1, 0, "GPU-7e2d5c1a-4b60-4c1e-8d10-9c0000000000"},
			{"0000:9d:00.0", 1, 1, "GPU-7e2d5c1a-4b60-4c1e-8d10-9d0000000000"},
			{"0000:c1:00.0", 1, 4, "GPU-7e2d5c1a-4b60-4c1e-8d10-c10000000000"},
			{"0000:c2:00.0", 1, 5, "GPU-7e2d5c1a-4b60-4c1e-8d10-c20000000000"},
		},
		nics: []fakeNIC{{"0000:9e:00.0", 1, "mlx5_0", 1}},
		paths: map[string]string{
			"0000:18:00.0": "pci0000:00/0000:00:01.0/0000:10:00.0/0000:11:00.0/0000:18:00.0",
			"0000:2a:00.0": "pci0000:00/0000:00:02.0/0000:20:00.0/0000:21:00.0/0000:2a:00.0",
			"0000:4c:00.0": "pci0000:00/0000:00:03.0/0000:40:00.0/0000:41:00.0/0000:4c:00.0",
			"0000:5d:00.0": "pci0000:00/0000:00:04.0/0000:50:00.0/0000:51:00.0/0000:5d:00.0",
			"0000:9c:00.0": "pci0000:80/0000:80:01.0/0000:90:00.0/0000:91:00.0/0000:9c:00.0",
			"0000:9d:00.0": "pci0000:80/0000:80:01.0/0000:90:00.0/0000:91:04.0/0000:9d:00.0",
			"0000:9e:00.0": "pci0000:80/0000:80:01.0/0000:90:00.0/0000:91:08.0/0000:9e:00.0",
			"0000:c1:00.0": "pci0000:80/0000:80:02.0/0000:b0:00.0/0000:b1:00.0/0000:c1:00.0",
			"0000:c2:00.0": "pci0000:80/0000:80:02.0/0000:b0:00.0/0000:b1:04.0/0000:c2:00.0",
		},
	}
}

// switchOf returns the PCIe switch (its upstream port) of the tree's
// device with the bus ID.
func (f *fakeTree) switchOf(t *testing.T, bus string) string {
	t.Helper()
	p, ok := f.paths[bus]
	require.True(t, ok, "%s is not a device of the tree", bus)
	return strings.Split(p, "/")[2]
}

// treeDevices waits until the agent's slices list the tree's devices (of
// the GPUs the DRA role serves) and returns them by name, each mapped to
// its GPU or NIC by its resource.kubernetes.io/pciBusID.
func (d *draCluster) treeDevices(t *testing.T) map[string]draDevice {
	t.Helper()
	require.NotNil(t, d.tree, "the cluster was started without a tree")
	devs := d.waitSlices(t, func(devs []resourcev1.Device) bool { return len(devs) == d.published },
		fmt.Sprintf("the agent's ResourceSlices do not list %d devices", d.published))
	out := map[string]draDevice{}
	for _, dev := range devs {
		bus := dev.Attributes[attrBusID].StringValue
		require.NotNil(t, bus, "device %s has no %s: %+v", dev.Name, attrBusID, dev.Attributes)
		dd := draDevice{Device: dev}
		for i := range d.tree.gpus {
			if d.tree.gpus[i].bus == *bus {
				dd.gpu = &d.tree.gpus[i]
			}
		}
		for i := range d.tree.nics {
			if d.tree.nics[i].bus == *bus {
				dd.nic = &d.tree.nics[i]
			}
		}
		require.True(t, dd.gpu != nil || dd.nic != nil, "device %s's bus %s is none of the tree's", dev.Name, *bus)
		out[dev.Name] = dd
	}
	return out
}

// startNUMAPlaceScheduler applies deploy/scheduler.yaml, builds
// numaplace-scheduler from ../kube-scheduler and starts it with the
// repository's profile and a token of its service account, as
// startKubeletCluster does.
func (d *draCluster) startNUMAPlaceScheduler(t *testing.T) {
	t.Helper()
	deploy := controlplane.RepoPath(t, "deploy")
	controlplane.ApplyFiles(t, d.cp.Config, filepath.Join(deploy, "scheduler.yaml"))
	bin, err := buildScheduler(d.e.dir)
	require.NoError(t, err)
	d.schedulerBin = bin
	d.schedKubeconfig = serviceAccountKubeconfig(t, d.client, d.cp.Config.Host, "kube-system", "numaplace-scheduler", nil)
	d.sched = startScheduler(t, d.e.dir, bin, d.schedKubeconfig)
	d.stage("numaplace-scheduler built and started")
}

// restartNUMAPlaceScheduler stops numaplace-scheduler (SIGTERM, or SIGKILL
// when kill) and starts it again with the same binary and kubeconfig; its
// configuration and log go to a directory of their own per run.
func (d *draCluster) restartNUMAPlaceScheduler(t *testing.T, kill bool) {
	t.Helper()
	if kill {
		d.sched.kill9()
	} else {
		d.sched.stop()
	}
	d.schedRuns++
	dir := filepath.Join(d.e.dir, fmt.Sprintf("scheduler-%d", d.schedRuns))
	require.NoError(t, os.Mkdir(dir, 0o755))
	d.sched = startScheduler(t, dir, d.schedulerBin, d.schedKubeconfig)
}

// draSchedulerEnv names the environment variable that makes the tests of
// numaplace-scheduler's claims give their pods another scheduler (such as
// default-scheduler, to see which of them fail without numaplace).
const draSchedulerEnv = "NUMAPLACE_E2E_DRA_SCHEDULER"

// draSchedulerName is the scheduler the tests' NUMA pods name:
// numaplace-scheduler unless draSchedulerEnv says otherwise.
func draSchedulerName() string {
	if s := os.Getenv(draSchedulerEnv); s != "" {
		return s
	}
	return "numaplace-scheduler"
}

// numaDRAPod is a pod for numaplace-scheduler (draSchedulerName) with
// the ACK annotations of the policy (cpuset-scheduler: required and the
// numa-topology-spec; exclusivity Required unless exclusive is given), cpus
// whole CPUs (none: no CPU request) and 64Mi of memory, its container
// using the claims: draPod's host network, image and script.
func numaDRAPod(name, policy string, cpus int, claims ...corev1.PodResourceClaim) *corev1.Pod {
	p := draPod(name, claims...)
	p.Spec.SchedulerName = draSchedulerName()
	p.Annotations = map[string]string{
		"cpuset-scheduler": "required",
		"scheduling.alibabacloud.com/numa-topology-spec": fmt.Sprintf(`{"numaTopologyPolicy":%q}`, policy),
	}
	res := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	if cpus > 0 {
		res[corev1.ResourceCPU] = *resource.NewQuantity(int64(cpus), resource.DecimalSI)
	}
	p.Spec.Containers[0].Resources.Requests = res
	p.Spec.Containers[0].Resources.Limits = res.DeepCopy()
	return p
}

// podClaims waits until each of the pod's claims (by its name in the pod)
// is allocated and returns them in that order.
func (d *draCluster) podClaims(t *testing.T, pod string, names ...string) []*resourcev1.ResourceClaim {
	t.Helper()
	var out []*resourcev1.ResourceClaim
	for _, n := range names {
		out = append(out, podClaim(t, d.client, pod, n))
	}
	return out
}

// claimedGPUs returns the fake GPUs of the claims' allocations (of every
// request), by GPU ID ascending, and the NICs' InfiniBand names, sorted.
func claimedGPUs(t *testing.T, devs map[string]draDevice, claims ...*resourcev1.ResourceClaim) (gpus []int, nics []string) {
	t.Helper()
	for _, c := range claims {
		require.NotNil(t, c.Status.Allocation, "claim %s is not allocated", c.Name)
		for _, r := range c.Status.Allocation.Devices.Results {
			require.Equal(t, draDriver, r.Driver, "claim %s's device %s", c.Name, r.Device)
			dev, ok := devs[r.Device]
			require.True(t, ok, "claim %s's device %s is not in the slices", c.Name, r.Device)
			switch {
			case dev.gpu != nil:
				id := own(dev.Device, "index").IntValue
				require.NotNil(t, id, "GPU device %s has no index attribute", r.Device)
				gpus = append(gpus, int(*id))
			case dev.nic != nil:
				nics = append(nics, dev.nic.ibdev)
			}
		}
	}
	slices.Sort(gpus)
	slices.Sort(nics)
	return gpus, nics
}

// gpuPlaces returns the NUMA nodes of the tree's GPUs with the IDs,
// sorted, without repetition, and the PCIe switches they are under.
func (f *fakeTree) gpuPlaces(t *testing.T, ids []int) (nodes []int, switches []string) {
	t.Helper()
	for _, id := range ids {
		require.True(t, id >= 0 && id < len(f.gpus), "GPU %d is not one of the tree's", id)
		g := f.gpus[id]
		if !slices.Contains(nodes, g.node) {
			nodes = append(nodes, g.node)
		}
		if sw := f.switchOf(t, g.bus); !slices.Contains(switches, sw) {
			switches = append(switches, sw)
		}
	}
	slices.Sort(nodes)
	slices.Sort(switches)
	return nodes, switches
}

// podDecision returns the pod's numaplace.io/allocation decision, failing
// when it has none (a pod the default kube-scheduler placed).
func podDecision(t *testing.T, pod *corev1.Pod) kube.Decision {
	t.Helper()
	raw, ok := pod.Annotations["numaplace.io/allocation"]
	require.True(t, ok, "pod %s has no numaplace.io/allocation decision (placed by %q)", pod.Name, pod.Spec.SchedulerName)
	dec, err := kube.ParseDecision(raw)
	require.NoError(t, err, "pod %s's decision %s", pod.Name, raw)
	return dec
}

// decidedView is what the pod's record says it holds: the decision's
// GPUs by ID, its rdma devices, cpuset and NUMA nodes.
type decidedView struct {
	GPUs    []int
	NICs    []string
	CPUSet  string
	Nodes   []int
	Memory  map[string]int64
	Visible []string
}

// containerView is what the pod's container sees and the kubelet records
// of it: NVIDIA_VISIBLE_DEVICES (sorted), its GPU device nodes, its
// /dev/infiniband, its cpuset and memory nodes, and the pod-resources
// API's dynamic resources (List and Get) and exclusive CPUs.
type containerView struct {
	Visible, GPUNodes, RDMA []string
	CPUs, Mems              string
	ListDynamic, GetDynamic []string
	ListCPUs, GetCPUs       []int64
}

// viewOf reads the containerView of the pod's container main.
func (d *draCluster) viewOf(t *testing.T, pod *corev1.Pod) containerView {
	t.Helper()
	e := d.e
	ctr := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	v := seenIn(t, e, ctr)
	if out, err := e.crictl("exec", ctr, "ls", "/dev/infiniband"); err == nil {
		v.RDMA = strings.Fields(out)
		slices.Sort(v.RDMA)
	}
	v.ListDynamic, v.ListCPUs, v.GetDynamic, v.GetCPUs = podResourcesOf(t, e, pod.Name)
	return v
}

// seenIn reads what the container sees of its GPUs and CPUs:
// NVIDIA_VISIBLE_DEVICES (sorted), its GPU device nodes (/dev/nvidiaN,
// sorted), its cpuset and memory nodes.
func seenIn(t *testing.T, e *kubeletEnv, ctr string) containerView {
	t.Helper()
	var v containerView
	if s := e.envOf(t, ctr)["NVIDIA_VISIBLE_DEVICES"]; s != "" {
		v.Visible = strings.Split(s, ",")
		slices.Sort(v.Visible)
	}
	for _, n := range strings.Fields(e.exec(t, ctr, "ls", "/dev")) {
		if rest, ok := strings.CutPrefix(n, "nvidia"); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				v.GPUNodes = append(v.GPUNodes, n)
			}
		}
	}
	slices.Sort(v.GPUNodes)
	v.CPUs = e.status(t, ctr, "Cpus_allowed_list")
	v.Mems = e.status(t, ctr, "Mems_allowed_list")
	return v
}

// podResourcesOf asks the kubelet's pod-resources API for the pod's
// container main, by List and by Get: its dynamic resources ("claim
// driver/pool/device", sorted) and its exclusive CPUs (cpu_ids, sorted).
func podResourcesOf(t *testing.T, e *kubeletEnv, pod string) (listDyn []string, listCPUs []int64, getDyn []string, getCPUs []int64) {
	t.Helper()
	read := func(p *podresources.PodResources) (dyn []string, cpus []int64) {
		for _, c := range p.GetContainers() {
			if c.GetName() != "main" {
				continue
			}
			dyn = append(dyn, dynamicOf(c)...)
			cpus = append(cpus, c.GetCpuIds()...)
		}
		slices.Sort(dyn)
		slices.Sort(cpus)
		return dyn, cpus
	}
	withPodResources(t, e, func(ctx context.Context, client podresources.PodResourcesListerClient, sock string) {
		list, err := client.List(ctx, &podresources.ListPodResourcesRequest{})
		require.NoError(t, err, "List on the kubelet's pod-resources API at %s", sock)
		found := false
		for _, p := range list.GetPodResources() {
			if p.GetNamespace() == "default" && p.GetName() == pod {
				listDyn, listCPUs = read(p)
				found = true
			}
		}
		require.True(t, found, "the kubelet's pod-resources List has no pod %s", pod)
		got, err := client.Get(ctx, &podresources.GetPodResourcesRequest{PodName: pod, PodNamespace: "default"})
		require.NoError(t, err, "Get of pod %s on the kubelet's pod-resources API", pod)
		getDyn, getCPUs = read(got.GetPodResources())
	})
	return listDyn, listCPUs, getDyn, getCPUs
}

// checkDecided checks that every record of the running pod agrees with
// its numaplace decision: its claims' allocations hold exactly the
// decision's GPUs and NICs (gpus and nics, what the test expects, are
// compared first, so that a pod placed by another scheduler fails on
// where its devices are), its container sees exactly those devices (its
// NVIDIA_VISIBLE_DEVICES, GPU device nodes, /dev/infiniband and
// NUMAPLACE_RDMA_DEVICES: checkDRAContainer), its cpuset is the
// decision's (its memory nodes the decision's with memory on the host),
// and the kubelet's pod-resources API (List and Get) names exactly the
// claims' devices; the kubelet runs with the CPU manager's policy none
// (docs/deploy.md), so it reports no exclusive CPUs. It returns the
// decision and the container's view.
func (d *draCluster) checkDecided(t *testing.T, pod *corev1.Pod, devs map[string]draDevice, gpus []int, nics []string,
	claims ...*resourcev1.ResourceClaim) (kube.Decision, containerView) {
	t.Helper()
	claimed, claimedNICs := claimedGPUs(t, devs, claims...)
	require.Equal(t, gpus, claimed, "pod %s's claims' GPUs", pod.Name)
	require.Equal(t, nics, claimedNICs, "pod %s's claims' NICs", pod.Name)
	dec := podDecision(t, pod)
	var decided []int
	for _, g := range dec.GPUs {
		decided = append(decided, g.ID)
		require.Equal(t, d.tree.gpus[g.ID].uuid, g.UUID, "pod %s's decision names GPU %d by another UUID", pod.Name, g.ID)
	}
	require.Equal(t, claimed, decided, "pod %s: its claims' GPUs and its decision's", pod.Name)
	decidedNICs := slices.Clone(dec.Devices["rdma"])
	slices.Sort(decidedNICs)
	require.Equal(t, claimedNICs, decidedNICs, "pod %s: its claims' NICs and its decision's rdma devices", pod.Name)

	var names []string
	for _, c := range claims {
		names = append(names, allDevices(c)...)
	}
	slices.Sort(names)
	d.checkDRAContainer(t, pod, devs, names)
	v := d.viewOf(t, pod)
	mems := hostMemoryNodes(t)
	wantMems := ""
	for _, n := range dec.NUMANodes {
		if mems.Contains(n) {
			wantMems = strings.Trim(wantMems+","+strconv.Itoa(n), ",")
		}
	}
	if wantMems == "" {
		wantMems = mems.String()
	}
	if dec.CPUSet != "" {
		require.Equal(t, dec.CPUSet, v.CPUs, "pod %s's cpuset", pod.Name)
	}
	require.Equal(t, wantMems, v.Mems, "pod %s's memory nodes (the decision's %v with memory on the host %s)", pod.Name, dec.NUMANodes, mems)
	var want []string
	for _, c := range claims {
		want = append(want, claimResources(c)...)
	}
	slices.Sort(want)
	require.Equal(t, want, v.ListDynamic, "pod %s's dynamic resources in the kubelet's pod-resources List", pod.Name)
	require.Equal(t, want, v.GetDynamic, "pod %s's dynamic resources in the kubelet's pod-resources Get", pod.Name)
	require.Empty(t, v.ListCPUs, "pod %s's cpu_ids in pod-resources List (the kubelet's CPU manager is none)", pod.Name)
	require.Empty(t, v.GetCPUs, "pod %s's cpu_ids in pod-resources Get (the kubelet's CPU manager is none)", pod.Name)
	t.Logf("pod %s: decision %s; claims %v; container: CPUs %s, mems %s, NVIDIA_VISIBLE_DEVICES %v, %v, %v; pod-resources %v",
		pod.Name, pod.Annotations["numaplace.io/allocation"], want, v.CPUs, v.Mems, v.Visible, v.GPUNodes, v.RDMA, v.ListDynamic)
	return dec, v
}

// waitUnschedulable waits until the pod's PodScheduled condition is false
// (Unschedulable) with a message that contains want, and returns the
// message.
func waitUnschedulable(t *testing.T, client kubernetes.Interface, name, want string) string {
	t.Helper()
	var msg string
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				strings.Contains(c.Message, want) {
				msg = c.Message
				return true
			}
		}
		return false
	}, 60*time.Second, 100*time.Millisecond, "pod %s is not unschedulable with %q: %s", name, want, describe(client, name))
	return msg
}
