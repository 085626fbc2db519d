package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/numaplace/numaplace/internal/controlplane"
)

// The harness of the DRA tests: every component of a DRA cluster real
// and started here. etcd and kube-apiserver (resource.k8s.io/v1) with
// deploy/'s manifests, kube-controller-manager with the resourceclaim
// controller and the garbage collector, the upstream kube-scheduler with
// its default profile, containerd with CDI and NRI in the node's mount
// namespace (its /dev with stand-in GPU and RDMA device nodes), the
// kubelet v1.37.2 (its DRA manager and plugin watcher are on by default)
// and, when asked, numaplace-agent with --dra on a fake sysfs tree of two
// NUMA nodes, four GPUs and two RDMA NICs under four PCIe switches.

// fakeNIC is an RDMA NIC of the fake sysfs tree: its PCI address, NUMA
// node, InfiniBand device name and the minor of its uverbs device node.
type fakeNIC struct {
	bus    string
	node   int
	ibdev  string
	uverbs int
}

// fakeNICs are the DRA tree's NICs, one per NUMA node. Their uverbs
// minors are not their order (mlx5_0 is uverbs1), so that a device node
// named by the NIC's index instead of its own is caught.
var fakeNICs = []fakeNIC{
	{"0000:3e:00.0", 0, "mlx5_0", 1},
	{"0000:bd:00.0", 1, "mlx5_1", 0},
}

// fakePCIePaths are the sysfs device paths (under sys/devices) of the DRA
// tree's GPUs and NICs: each behind a PCIe switch (the upstream port the
// path names after the root port), GPU 0 (0000:1b:00.0) alone under
// 0000:10:00.0, GPU 1 (0000:3d:00.0) with mlx5_0 under 0000:30:00.0, GPU 2
// (0000:9a:00.0) alone under 0000:90:00.0, GPU 3 (0000:bc:00.0) with
// mlx5_1 under 0000:b0:00.0. The first GPU of each NUMA node has no NIC
// beside it, so that an allocation by switch must pass it over.
var fakePCIePaths = map[string]string{
	"0000:1b:00.0": "pci0000:00/0000:00:01.0/0000:10:00.0/0000:11:00.0/0000:1b:00.0",
	"0000:3d:00.0": "pci0000:00/0000:00:02.0/0000:30:00.0/0000:31:00.0/0000:3d:00.0",
	"0000:3e:00.0": "pci0000:00/0000:00:02.0/0000:30:00.0/0000:31:04.0/0000:3e:00.0",
	"0000:9a:00.0": "pci0000:80/0000:80:01.0/0000:90:00.0/0000:91:00.0/0000:9a:00.0",
	"0000:bc:00.0": "pci0000:80/0000:80:02.0/0000:b0:00.0/0000:b1:00.0/0000:bc:00.0",
	"0000:bd:00.0": "pci0000:80/0000:80:02.0/0000:b0:00.0/0000:b1:04.0/0000:bd:00.0",
}

// fakePCIeSwitch returns the PCIe switch (its upstream port's bus ID) of
// a device of fakePCIePaths.
func fakePCIeSwitch(t *testing.T, bus string) string {
	t.Helper()
	p, ok := fakePCIePaths[bus]
	require.True(t, ok, "%s is not a device of the fake tree", bus)
	return strings.Split(p, "/")[2]
}

// standInNICs are the RDMA device nodes the node's /dev gets (under
// /dev/infiniband), with /dev/null's numbers as the stand-in GPUs'.
var standInNICs = []string{"infiniband/uverbs0", "infiniband/uverbs1", "infiniband/rdma_cm"}

// fakeSysfsWithNICs is fakeSysfsWith(gpus) with the RDMA NICs as sysfs
// shows a Mellanox ConnectX (vendor 0x15b3, class 0x020700, numa_node,
// infiniband/IBDEV and infiniband_verbs/uverbsN), and every GPU and NIC
// of fakePCIePaths given its device path under sys/devices, with the root
// ports and PCIe switch ports above it, so that discovery finds its
// switch. It returns the root.
func fakeSysfsWithNICs(t *testing.T, dir string, gpus []fakeGPU, nics []fakeNIC) string {
	t.Helper()
	root := fakeSysfsWith(t, dir, gpus)
	write := func(path, content string) {
		p := filepath.Join(root, path)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content+"\n"), 0o644))
	}
	for _, n := range nics {
		pci := "sys/bus/pci/devices/" + n.bus + "/"
		write(pci+"vendor", "0x15b3")
		write(pci+"device", "0x101b")
		write(pci+"class", "0x020700")
		write(pci+"numa_node", strconv.Itoa(n.node))
		require.NoError(t, os.MkdirAll(filepath.Join(root, pci, "infiniband", n.ibdev), 0o755))
		require.NoError(t, os.MkdirAll(filepath.Join(root, pci, "infiniband_verbs", "uverbs"+strconv.Itoa(n.uverbs)), 0o755))
		write(pci+"infiniband_verbs/uverbs"+strconv.Itoa(n.uverbs)+"/ibdev", n.ibdev)
		write(pci+"infiniband_verbs/uverbs"+strconv.Itoa(n.uverbs)+"/dev", "231:"+strconv.Itoa(192+n.uverbs))
	}
	for _, g := range gpus {
		if p, ok := fakePCIePaths[g.bus]; ok {
			require.NoError(t, os.MkdirAll(filepath.Join(root, "sys", "devices", p), 0o755))
		}
	}
	for _, n := range nics {
		if p, ok := fakePCIePaths[n.bus]; ok {
			require.NoError(t, os.MkdirAll(filepath.Join(root, "sys", "devices", p), 0o755))
		}
	}
	return root
}

// draCluster is a DRA cluster started by startDRACluster: the
// kubeletCluster's parts (no numaplace-scheduler: pods go through the
// default kube-scheduler) and the agent's DRA directories.
type draCluster struct {
	*kubeletCluster
	// sysfs is the fake tree's root (the agent's --sysfs-root); devDir
	// is the node's /dev as this process sees it.
	sysfs, devDir string
	// pluginsDir and registryDir are the kubelet's DRA plugin and
	// plugin-registration directories as this process sees them.
	pluginsDir, registryDir string
	// agentProc is the agent, a process of its own (kill -9 can stop it).
	agentProc *hostProcess
	// published is the number of devices the agent's slices list.
	published int
	// tree is the node's machine when the options gave one;
	// schedKubeconfig is numaplace-scheduler's kubeconfig when it runs.
	tree            *fakeTree
	schedKubeconfig string
	schedRuns       int
}

// draClusterOptions change what startDRACluster starts.
type draClusterOptions struct {
	// agent starts numaplace-agent with its DRA role (and the NRI role and
	// the reporter; the device plugin off) once the kubelet runs.
	agent bool
	// draGPUs, when set, are the GPUs the DRA role serves (--dra-gpus),
	// the device plugin on for the others.
	draGPUs []int
	// tree, when set, is the node's machine instead of fakeGPUs and
	// fakeNICs under fakePCIePaths (dra_numaplace_cluster_test.go).
	tree *fakeTree
	// numaplace also starts numaplace-scheduler (deploy/scheduler.yaml
	// applied) beside the default kube-scheduler, once the agent runs.
	numaplace bool
}

// startDRACluster starts a draCluster, or skips saying what the machine
// lacks. It returns once the kubelet is registered and, with o.agent, the
// agent's ResourceSlices list the fake tree's six devices.
func startDRACluster(t *testing.T, o draClusterOptions) *draCluster {
	t.Helper()
	c := &kubeletCluster{}
	start := time.Now()
	c.stage = func(what string) { t.Logf("%-60s %6.1fs", what, time.Since(start).Seconds()) }
	// Skip before anything is started when something is missing.
	canRunContainers(t)
	kubeletBinary(t, containerdBinaries(t))
	nodeTools(t)
	controlplane.ComponentBinary(t, "kube-controller-manager")
	controlplane.ComponentBinary(t, "kube-scheduler")
	cgroups := cgroupRoot(t, fmt.Sprintf("numaplace-dra-%d", os.Getpid()))
	e := startNodeContainerdWith(t, nodeContainerdOptions{cdi: true, devices: standInNICs})
	built := make(chan string, 1)
	if o.agent {
		go func() { built <- buildAgentBinary(e.dir) }()
	}
	cp := controlplane.StartControlPlane(t)
	c.stage("containerd (CDI on), etcd and kube-apiserver up")
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
				t.Logf("%s's log (end):\n%s", name, tail([]byte(cp.Log(name)), 4000))
			}
		}
	})
	client, err := kubernetes.NewForConfig(cp.Config)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cp.Config)
	require.NoError(t, err)
	deploy := controlplane.RepoPath(t, "deploy")
	controlplane.ApplyFiles(t, cp.Config, draManifests(t, deploy)...)
	requireDeviceClasses(t, client)
	cp.StartControllerManager(t)
	cp.StartScheduler(t)
	c.stage("kube-controller-manager and kube-scheduler up")

	kubeletProc, pluginDir := startKubelet(t, e, cgroups, cp.Kubeconfig(t), client)
	c.stage("kubelet registered")
	ctx := context.Background()
	_, err = client.CoreV1().Nodes().Patch(ctx, kubeletNode, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"ack.node.gpu.schedule":"topology"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	node, err := client.CoreV1().Nodes().Get(ctx, kubeletNode, metav1.GetOptions{})
	require.NoError(t, err)
	c.e, c.cp, c.client, c.dyn = e, cp, client, dyn
	c.kubelet, c.pluginDir, c.node = kubeletProc, pluginDir, node
	gpus, nics := fakeGPUs, fakeNICs
	var sysfs string
	if o.tree != nil {
		gpus, nics, sysfs = o.tree.gpus, o.tree.nics, o.tree.write(t, e.dir)
	} else {
		sysfs = fakeSysfsWithNICs(t, e.dir, fakeGPUs, fakeNICs)
	}
	d := &draCluster{kubeletCluster: c, sysfs: sysfs, tree: o.tree,
		devDir: fmt.Sprintf("/proc/%d/root/dev", e.pid), pluginsDir: filepath.Join(e.kubeletDir, "plugins"),
		registryDir: filepath.Join(e.kubeletDir, "plugins_registry")}
	if !o.agent {
		return d
	}
	c.agentArgs = d.draAgentArgs(t)
	d.published = len(gpus) + len(nics)
	if o.draGPUs != nil {
		var ids []string
		for _, g := range o.draGPUs {
			ids = append(ids, strconv.Itoa(g))
		}
		c.agentArgs = append(slices.DeleteFunc(c.agentArgs, func(a string) bool { return a == "--device-plugin=false" }),
			"--dra-gpus", strings.Join(ids, ","), "--kubelet-socket-dir", pluginDir)
		d.published = len(o.draGPUs) + len(nics)
	}
	c.agentBin = <-built
	require.NotEmpty(t, c.agentBin, "go build numaplace-agent failed")
	d.agentProc = c.startAgentProcess(t)
	c.stage("agent (DRA role, a process) connected to containerd")
	d.waitSlices(t, func(devs []resourcev1.Device) bool { return len(devs) == d.published },
		fmt.Sprintf("the agent's ResourceSlices do not list %d devices", d.published))
	c.stage("agent: ResourceSlices published")
	if o.numaplace {
		d.startNUMAPlaceScheduler(t)
	}
	return d
}

// draManifests returns the deploy/ manifests a DRA cluster applies: the
// CRD, the agent's (its service account, RBAC and admission policies)
// and every other file naming the DRA role's objects (a DeviceClass).
func draManifests(t *testing.T, deploy string) []string {
	t.Helper()
	files := []string{filepath.Join(deploy, "crd-noderesourcetopologies.yaml"), filepath.Join(deploy, "agent.yaml")}
	entries, err := os.ReadDir(deploy)
	require.NoError(t, err)
	for _, e := range entries {
		p := filepath.Join(deploy, e.Name())
		if slices.Contains(files, p) || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		if data, err := os.ReadFile(p); err == nil && strings.Contains(string(data), "kind: DeviceClass") {
			files = append(files, p)
		}
	}
	return files
}

// draAgentArgs are the agent's arguments for its DRA role on the node:
// docs/deploy.md's on a host (its token bound to the node), the fake tree,
// the kubelet's DRA directories and containerd's CDI directory, the
// device plugin off.
func (d *draCluster) draAgentArgs(t *testing.T) []string {
	t.Helper()
	e := d.e
	return []string{"--sysfs-root", d.sysfs, "--node-name", kubeletNode,
		"--kubeconfig", serviceAccountKubeconfig(t, d.client, d.cp.Config.Host, "numaplace-system", "numaplace-agent", d.node),
		"--checkpoint", filepath.Join(e.dir, "checkpoint.json"),
		"--dev-root", d.devDir, "--proc-root", "/proc",
		"--pod-resources-socket", filepath.Join(e.kubeletDir, "pod-resources", "kubelet.sock"),
		"--device-plugin=false", "--dra", "--cdi-root", e.cdiDir,
		"--kubelet-plugins-dir", d.pluginsDir, "--kubelet-registry-dir", d.registryDir,
		"--health-interval", "200ms"}
}

// waitSlices waits until the agent's devices satisfy ok.
func (d *draCluster) waitSlices(t *testing.T, ok func([]resourcev1.Device) bool, msg string) []resourcev1.Device {
	t.Helper()
	var devs []resourcev1.Device
	require.Eventually(t, func() bool {
		list, err := d.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{
			FieldSelector: "spec.nodeName=" + kubeletNode + ",spec.driver=" + draDriver})
		if err != nil {
			return false
		}
		devs = nil
		for _, s := range list.Items {
			devs = append(devs, s.Spec.Devices...)
		}
		return ok(devs)
	}, 60*time.Second, 100*time.Millisecond, "%s: %+v", msg, devs)
	return devs
}

// draDriver is the agent's DRA driver name.
const draDriver = "gpu.numaplace.io"

// draPodScript is a DRA pod's command: it prints what the container got,
// then waits for SIGTERM.
const draPodScript = `echo "NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES"; ls /dev | grep nvidia; ls /dev/infiniband; ` +
	`trap 'exit 0' TERM; while :; do sleep 1; done`

// draPod is a pod for the default kube-scheduler (no schedulerName) whose
// container uses the claims, each from a ResourceClaimTemplate (template
// set) or a ResourceClaim: host network (no CNI), a little CPU and memory,
// the imported image.
func draPod(name string, claims ...corev1.PodResourceClaim) *corev1.Pod {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	var uses []corev1.ResourceClaim
	for _, c := range claims {
		uses = append(uses, corev1.ResourceClaim{Name: c.Name})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: new(int64(5)),
			ResourceClaims:                claims,
			Containers: []corev1.Container{{Name: "main", Image: e2eImage, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"/bin/sh", "-c", draPodScript},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res, Claims: uses}}},
		},
	}
}

// fromTemplate is a pod's claim made from the ResourceClaimTemplate.
func fromTemplate(name, template string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: &template}
}

// fromClaim is a pod's claim that is the ResourceClaim.
func fromClaim(name, claim string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: name, ResourceClaimName: &claim}
}

// exactly is a request for count devices of the class with CEL selectors.
func exactly(name, class string, count int64, cel ...string) resourcev1.DeviceRequest {
	r := resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count}}
	for _, x := range cel {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: x}})
	}
	return r
}

// matchAttribute is a constraint that the requests' devices share the
// attribute's value; distinctAttribute that they all differ in it.
func matchAttribute(attr string, requests ...string) resourcev1.DeviceConstraint {
	a := resourcev1.FullyQualifiedName(attr)
	return resourcev1.DeviceConstraint{Requests: requests, MatchAttribute: &a}
}

func distinctAttribute(attr string, requests ...string) resourcev1.DeviceConstraint {
	a := resourcev1.FullyQualifiedName(attr)
	return resourcev1.DeviceConstraint{Requests: requests, DistinctAttribute: &a}
}

// createTemplate creates a ResourceClaimTemplate in namespace default.
func createTemplate(t *testing.T, client kubernetes.Interface, name string, devices resourcev1.DeviceClaim) {
	t.Helper()
	_, err := client.ResourceV1().ResourceClaimTemplates("default").Create(context.Background(), &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: devices}},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "ResourceClaimTemplate %s", name)
}

// createClaim creates a ResourceClaim in namespace default.
func createClaim(t *testing.T, client kubernetes.Interface, name string, devices resourcev1.DeviceClaim) {
	t.Helper()
	_, err := client.ResourceV1().ResourceClaims("default").Create(context.Background(), &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       resourcev1.ResourceClaimSpec{Devices: devices},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "ResourceClaim %s", name)
}

// podClaim waits until the pod's claim (by its name in the pod) exists
// and is allocated, and returns it: for a claim from a template, the one
// the resourceclaim controller generated (named in the pod's status).
func podClaim(t *testing.T, client kubernetes.Interface, pod, name string) *resourcev1.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	var claim *resourcev1.ResourceClaim
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false
		}
		claimName := ""
		for _, c := range p.Spec.ResourceClaims {
			if c.Name == name && c.ResourceClaimName != nil {
				claimName = *c.ResourceClaimName
			}
		}
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name == name && s.ResourceClaimName != nil {
				claimName = *s.ResourceClaimName
			}
		}
		if claimName == "" {
			return false
		}
		claim, err = client.ResourceV1().ResourceClaims("default").Get(ctx, claimName, metav1.GetOptions{})
		return err == nil && claim.Status.Allocation != nil
	}, 60*time.Second, 100*time.Millisecond, "pod %s's claim %s is not allocated: %s", pod, name, describe(client, pod))
	return claim
}

// allocated returns the claim's allocated devices of the driver by
// request: request -> device names, in the allocation's order.
func allocated(claim *resourcev1.ResourceClaim, driver string) map[string][]string {
	out := map[string][]string{}
	if claim.Status.Allocation == nil {
		return out
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == driver {
			out[r.Request] = append(out[r.Request], r.Device)
		}
	}
	return out
}

// waitGone waits until the object is deleted.
func waitGone(t *testing.T, what string, get func() error) {
	t.Helper()
	require.Eventually(t, func() bool { return apierrors.IsNotFound(get()) }, 60*time.Second, 100*time.Millisecond, "%s was not deleted", what)
}

// buildAgentBinary is buildAgent for a goroutine: the binary's path, ""
// when go build failed (its output in dir/build-agent.log). It builds in
// the working directory, which go test makes this package's.
func buildAgentBinary(dir string) string {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(dir, "numaplace-agent")
	cmd := exec.Command(goBin, "build", "-o", out, ".")
	msg, err := cmd.CombinedOutput()
	if err != nil {
		_ = os.WriteFile(filepath.Join(dir, "build-agent.log"), msg, 0o644)
		return ""
	}
	return out
}

// requireDeviceClasses fails the test unless deploy/'s manifests made
// the DRA path's DeviceClasses: gpu.numaplace.io and nic.numaplace.io
// selecting the driver's devices, and aliyun-gpu.numaplace.io mapping
// aliyun.com/gpu (the tests use the shipped classes, never their own).
func requireDeviceClasses(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	for _, name := range []string{draGPUClass, draNICClass, draAliyunGPUClass} {
		c, err := client.ResourceV1().DeviceClasses().Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err, "deploy/'s manifests make no DeviceClass %s", name)
		require.NotEmpty(t, c.Spec.Selectors, "DeviceClass %s selects no devices", name)
		require.Contains(t, c.Spec.Selectors[0].CEL.Expression, `device.driver == "`+draDriver+`"`, "DeviceClass %s's selector", name)
		if name == draAliyunGPUClass {
			require.NotNil(t, c.Spec.ExtendedResourceName, "DeviceClass %s maps no extended resource", name)
			require.Equal(t, "aliyun.com/gpu", *c.Spec.ExtendedResourceName, "DeviceClass %s's extendedResourceName", name)
		}
	}
}
