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
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The DRA role on real components (issue 23's scenarios): startDRACluster
// with the agent's DRA role, the pods placed by the default kube-scheduler
// from ResourceClaimTemplates and ResourceClaims, what they got read from
// inside their containers, from the kubelet's pod-resources API and from
// the CDI specs the agent wrote.

// The DeviceClasses of deploy/dra.yaml the tests' requests name (the
// tests apply deploy/ and check its classes as shipped: the GPUs' and
// the NICs' select the driver's devices by their type attribute, the
// third maps aliyun.com/gpu to the GPUs), and the attributes their
// selectors and constraints use.
const (
	draGPUClass       = "gpu.numaplace.io"
	draNICClass       = "nic.numaplace.io"
	draAliyunGPUClass = "aliyun-gpu.numaplace.io"
	attrNUMANode      = "resource.kubernetes.io/numaNode"
	attrBusID         = "resource.kubernetes.io/pciBusID"
	attrSwitch        = draDriver + "/pcieSwitch"
)

// draDevice is a device of the agent's ResourceSlices mapped to the fake
// tree by its PCI bus ID: a GPU or a NIC.
type draDevice struct {
	resourcev1.Device
	gpu *fakeGPU
	nic *fakeNIC
}

// draDevices waits until the agent's slices list the fake tree's devices
// and returns them by name, each mapped to its fake GPU or NIC by its
// resource.kubernetes.io/pciBusID.
func (d *draCluster) draDevices(t *testing.T) map[string]draDevice {
	t.Helper()
	devs := d.waitSlices(t, func(devs []resourcev1.Device) bool { return len(devs) == d.published },
		fmt.Sprintf("the agent's ResourceSlices do not list %d devices", d.published))
	out := map[string]draDevice{}
	for _, dev := range devs {
		bus := dev.Attributes[attrBusID].StringValue
		require.NotNil(t, bus, "device %s has no %s: %+v", dev.Name, attrBusID, dev.Attributes)
		dd := draDevice{Device: dev}
		for i := range fakeGPUs {
			if fakeGPUs[i].bus == *bus {
				dd.gpu = &fakeGPUs[i]
			}
		}
		for i := range fakeNICs {
			if fakeNICs[i].bus == *bus {
				dd.nic = &fakeNICs[i]
			}
		}
		require.True(t, dd.gpu != nil || dd.nic != nil, "device %s's bus %s is none of the fake tree's", dev.Name, *bus)
		out[dev.Name] = dd
	}
	return out
}

// deviceNamed returns the name of the device of the fake GPU or NIC with
// the bus ID.
func deviceNamed(t *testing.T, devs map[string]draDevice, bus string) string {
	t.Helper()
	for name, d := range devs {
		if (d.gpu != nil && d.gpu.bus == bus) || (d.nic != nil && d.nic.bus == bus) {
			return name
		}
	}
	t.Fatalf("no device of bus %s in the slices", bus)
	return ""
}

// wantSeen is what a container holding the devices sees: its
// NVIDIA_VISIBLE_DEVICES' UUIDs and GPU device nodes (nvidiaN by minor),
// sorted, and its /dev/infiniband entries (the NICs' uverbsN and
// rdma_cm), sorted.
func wantSeen(t *testing.T, devs map[string]draDevice, names []string) (uuids, gpuNodes, rdma []string) {
	t.Helper()
	for _, n := range names {
		d, ok := devs[n]
		require.True(t, ok, "allocated device %s is not in the slices", n)
		switch {
		case d.gpu != nil:
			uuids = append(uuids, d.gpu.uuid)
			gpuNodes = append(gpuNodes, "nvidia"+strconv.Itoa(d.gpu.minor))
		case d.nic != nil:
			rdma = append(rdma, "uverbs"+strconv.Itoa(d.nic.uverbs))
		}
	}
	if len(rdma) > 0 {
		rdma = append(rdma, "rdma_cm")
	}
	slices.Sort(uuids)
	slices.Sort(gpuNodes)
	slices.Sort(rdma)
	return uuids, gpuNodes, rdma
}

// checkDRAContainer checks from inside the pod's running container that
// it sees exactly the claim's devices: NVIDIA_VISIBLE_DEVICES by UUID,
// the GPUs' device nodes (and the control nodes when it has a GPU), the
// NICs' /dev/infiniband nodes and their InfiniBand names in
// NUMAPLACE_RDMA_DEVICES, no other; as the container printed it at
// start (its log) and in a process started in it now. It returns the
// container's ID.
func (d *draCluster) checkDRAContainer(t *testing.T, pod *corev1.Pod, devs map[string]draDevice, names []string) string {
	t.Helper()
	e := d.e
	uuids, gpuNodes, rdma := wantSeen(t, devs, names)
	ctr := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	visible := e.envOf(t, ctr)["NVIDIA_VISIBLE_DEVICES"]
	var got []string
	if visible != "" {
		got = strings.Split(visible, ",")
	}
	slices.Sort(got)
	var nodes, ctl []string
	for _, n := range strings.Fields(e.exec(t, ctr, "ls", "/dev")) {
		if rest, ok := strings.CutPrefix(n, "nvidia"); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				nodes = append(nodes, n)
			} else {
				ctl = append(ctl, n)
			}
		}
	}
	slices.Sort(nodes)
	var ib []string
	if out, err := e.crictl("exec", ctr, "ls", "/dev/infiniband"); err == nil {
		ib = strings.Fields(out)
	}
	slices.Sort(ib)
	t.Logf("pod %s: devices %v; in its container: NVIDIA_VISIBLE_DEVICES=%s, /dev: %v %v, /dev/infiniband: %v",
		pod.Name, names, visible, nodes, ctl, ib)
	require.Equal(t, uuids, got, "pod %s's NVIDIA_VISIBLE_DEVICES (sorted)", pod.Name)
	require.Equal(t, gpuNodes, nodes, "pod %s's GPU device nodes", pod.Name)
	if len(gpuNodes) > 0 {
		require.Subset(t, ctl, []string{"nvidiactl"}, "pod %s's GPU control nodes", pod.Name)
	}
	require.Equal(t, rdma, ib, "pod %s's /dev/infiniband", pod.Name)
	var ibdevs, gotIB []string
	for _, n := range names {
		if devs[n].nic != nil {
			ibdevs = append(ibdevs, devs[n].nic.ibdev)
		}
	}
	if v := e.envOf(t, ctr)["NUMAPLACE_RDMA_DEVICES"]; v != "" {
		gotIB = strings.Split(v, ",")
	}
	slices.Sort(ibdevs)
	slices.Sort(gotIB)
	require.Equal(t, ibdevs, gotIB, "pod %s's NUMAPLACE_RDMA_DEVICES (sorted)", pod.Name)
	for _, n := range gpuNodes {
		require.Equal(t, "1:3 character special file", e.exec(t, ctr, "stat", "-c", "%t:%T %F", "/dev/"+n), "pod %s's %s", pod.Name, n)
	}
	// What it printed at start, through the API server and the kubelet.
	require.Contains(t, podLog(t, d.client, pod.Name), "NVIDIA_VISIBLE_DEVICES="+visible+"\n", "pod %s's log", pod.Name)
	return ctr
}

// podDynamicResources lists the kubelet's pod-resources API and returns
// the dynamic resources of the pod's container main: "claim
// driver/pool/device" for each device, sorted.
func podDynamicResources(t *testing.T, e *kubeletEnv, pod string) []string {
	t.Helper()
	resp := listPodResources(t, e)
	var out []string
	for _, p := range resp {
		if p.GetNamespace() != "default" || p.GetName() != pod {
			continue
		}
		for _, c := range p.GetContainers() {
			if c.GetName() != "main" {
				continue
			}
			out = append(out, dynamicOf(c)...)
		}
	}
	slices.Sort(out)
	return out
}

// dynamicOf is the container's dynamic resources as the pod-resources API
// gives them, "claim driver/pool/device" each.
func dynamicOf(c *podresources.ContainerResources) []string {
	var out []string
	for _, dr := range c.GetDynamicResources() {
		for _, r := range dr.GetClaimResources() {
			out = append(out, fmt.Sprintf("%s %s/%s/%s", dr.GetClaimName(), r.GetDriverName(), r.GetPoolName(), r.GetDeviceName()))
		}
	}
	return out
}

// claimResources is podDynamicResources's form of the claim's allocation.
func claimResources(claim *resourcev1.ResourceClaim) []string {
	var out []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		out = append(out, fmt.Sprintf("%s %s/%s/%s", claim.Name, r.Driver, r.Pool, r.Device))
	}
	slices.Sort(out)
	return out
}

// cdiSpecsOf returns the CDI spec files in containerd's CDI directory
// that name the claim (by its UID, as the kubelet plugin helpers name the
// claim's CDI devices).
func cdiSpecsOf(t *testing.T, e *kubeletEnv, claim *resourcev1.ResourceClaim) []string {
	t.Helper()
	entries, err := os.ReadDir(e.cdiDir)
	require.NoError(t, err)
	var out []string
	for _, f := range entries {
		data, err := os.ReadFile(filepath.Join(e.cdiDir, f.Name()))
		if err == nil && (strings.Contains(f.Name(), string(claim.UID)) || strings.Contains(string(data), string(claim.UID))) {
			out = append(out, f.Name())
		}
	}
	return out
}

// runDRAPod creates the pod and waits until it runs; it returns the pod
// and its claim (by the claim's name in the pod).
func (d *draCluster) runDRAPod(t *testing.T, pod *corev1.Pod, claim string) (*corev1.Pod, *resourcev1.ResourceClaim) {
	t.Helper()
	_, err := d.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	c := podClaim(t, d.client, pod.Name, claim)
	p := waitRunning(t, d.client, pod.Name)
	require.Equal(t, kubeletNode, p.Spec.NodeName)
	return p, c
}

// allDevices returns the claim's allocated device names, sorted.
func allDevices(claim *resourcev1.ResourceClaim) []string {
	var out []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		out = append(out, r.Device)
	}
	slices.Sort(out)
	return out
}

// devicesOn returns the names of the devices on the NUMA node (by their
// resource.kubernetes.io/numaNode attribute), of GPUs or of NICs.
func devicesOn(devs map[string]draDevice, node int64, gpus bool) []string {
	var out []string
	for name, d := range devs {
		if (d.gpu != nil) == gpus && d.Attributes[attrNUMANode].IntValue != nil && *d.Attributes[attrNUMANode].IntValue == node {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// taintsOf returns the taints of the named device in the agent's slices.
func (d *draCluster) taintsOf(t *testing.T, name string) []resourcev1.DeviceTaint {
	t.Helper()
	list, err := d.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + kubeletNode + ",spec.driver=" + draDriver})
	require.NoError(t, err)
	for _, s := range list.Items {
		for _, dev := range s.Spec.Devices {
			if dev.Name == name {
				return dev.Taints
			}
		}
	}
	t.Fatalf("device %s is not in the slices", name)
	return nil
}

// deleteDRAPod deletes the pod and waits until it is gone and its
// generated claim too (the resourceclaim controller and the garbage
// collector).
func deleteDRAPod(t *testing.T, client kubernetes.Interface, name string, claim *resourcev1.ResourceClaim) {
	t.Helper()
	deletePod(t, client, name, 5)
	if len(claim.OwnerReferences) > 0 {
		waitGone(t, "claim "+claim.Name, func() error {
			_, err := client.ResourceV1().ResourceClaims("default").Get(context.Background(), claim.Name, metav1.GetOptions{})
			return err
		})
	}
}

// TestDRAOnTheKubelet runs issue 23's DRA scenarios as subtests on one
// cluster (each leaves no pod or claim behind): the slices' attributes; an
// aligned pod (2 GPUs and 1 NIC by numaNode), its container's devices, its
// pod-resources entry and CDI spec, deleted (unprepared, its devices free
// for the next pod); a CEL selector and a matchAttribute on pcieSwitch;
// distinctAttribute and allocationMode All; a GPU made unhealthy
// (tainted, avoided, untainted when back); a claim for a GPU that a pod's
// numaplace decision holds refused, the holder named; last, the agent
// killed with kill -9 and restarted while a pod runs, then a claim
// allocated that pod's GPU by hand refused by the node, the holder named,
// and a pod whose numaplace decision names it refused, the claim named.
func TestDRAOnTheKubelet(t *testing.T) {
	d := startDRACluster(t, draClusterOptions{agent: true})
	client, e := d.client, d.e
	devs := d.draDevices(t)
	scenario := func(name string, f func(t *testing.T)) {
		start := time.Now()
		ok := t.Run(name, f)
		d.stage(fmt.Sprintf("scenario %s: passed=%t in %.1fs", name, ok, time.Since(start).Seconds()))
	}

	scenario("slices", func(t *testing.T) {
		for name, dev := range devs {
			node := 0
			if dev.gpu != nil {
				node = dev.gpu.node
				require.Equal(t, dev.gpu.uuid, str(own(dev.Device, "uuid")), "device %s's uuid", name)
			} else {
				node = dev.nic.node
			}
			require.NotNil(t, dev.Attributes[attrNUMANode].IntValue, "device %s's numaNode: %+v", name, dev.Attributes)
			require.Equal(t, int64(node), *dev.Attributes[attrNUMANode].IntValue, "device %s's numaNode", name)
			bus := *dev.Attributes[attrBusID].StringValue
			require.Equal(t, fakePCIeSwitch(t, bus), str(own(dev.Device, "pcieSwitch")), "device %s's pcieSwitch", name)
		}
	})

	scenario("aligned-then-freed", func(t *testing.T) {
		createTemplate(t, client, "aligned", resourcev1.DeviceClaim{
			Requests:    []resourcev1.DeviceRequest{exactly("gpu", draGPUClass, 2), exactly("nic", draNICClass, 1)},
			Constraints: []resourcev1.DeviceConstraint{matchAttribute(attrNUMANode, "gpu", "nic")},
		})
		pod, claim := d.runDRAPod(t, draPod("aligned", fromTemplate("devices", "aligned")), "devices")
		got := allocated(claim, draDriver)
		require.Len(t, got["gpu"], 2, "claim %s: %v", claim.Name, got)
		require.Len(t, got["nic"], 1, "claim %s: %v", claim.Name, got)
		numa := *devs[got["nic"][0]].Attributes[attrNUMANode].IntValue
		for _, g := range got["gpu"] {
			require.Equal(t, numa, *devs[g].Attributes[attrNUMANode].IntValue, "claim %s's GPU %s is not on its NIC's NUMA node", claim.Name, g)
		}
		d.checkDRAContainer(t, pod, devs, allDevices(claim))
		require.Equal(t, claimResources(claim), podDynamicResources(t, e, "aligned"), "the kubelet's pod-resources List for aligned")
		require.NotEmpty(t, cdiSpecsOf(t, e, claim), "no CDI spec names claim %s in %s", claim.Name, e.cdiDir)
		t.Logf("aligned: claim %s on NUMA node %d: %v; pod-resources: %v", claim.Name, numa, got, podDynamicResources(t, e, "aligned"))

		// Deleted: unprepared (its CDI spec goes), its claim deleted, its
		// devices free: the next such pod gets them.
		deleteDRAPod(t, client, "aligned", claim)
		require.Eventually(t, func() bool { return len(cdiSpecsOf(t, e, claim)) == 0 }, 30*time.Second, 100*time.Millisecond,
			"claim %s's CDI spec is still in %s", claim.Name, e.cdiDir)
		pod, again := d.runDRAPod(t, draPod("aligned-again", fromTemplate("devices", "aligned")), "devices")
		require.Equal(t, allDevices(claim), allDevices(again), "aligned-again gets aligned's freed devices")
		d.checkDRAContainer(t, pod, devs, allDevices(again))
		deleteDRAPod(t, client, "aligned-again", again)
	})

	scenario("pcie-switch", func(t *testing.T) {
		// A CEL selector: the GPU and the NIC under mlx5_1's switch.
		nic := fakeNICs[1]
		sw := fakePCIeSwitch(t, nic.bus)
		onSwitch := fmt.Sprintf(`device.attributes[%q].pcieSwitch == %q`, draDriver, sw)
		createClaim(t, client, "on-switch", resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{exactly("gpu", draGPUClass, 1, onSwitch), exactly("nic", draNICClass, 1, onSwitch)},
		})
		t.Cleanup(func() {
			_ = client.ResourceV1().ResourceClaims("default").Delete(context.Background(), "on-switch", metav1.DeleteOptions{})
		})
		pod, claim := d.runDRAPod(t, draPod("on-switch", fromClaim("devices", "on-switch")), "devices")
		got := allocated(claim, draDriver)
		require.Equal(t, []string{deviceNamed(t, devs, nic.bus)}, got["nic"], "claim on-switch's NIC")
		require.Equal(t, []string{deviceNamed(t, devs, fakeGPUs[3].bus)}, got["gpu"], "claim on-switch's GPU: GPU 3, under switch %s", sw)
		d.checkDRAContainer(t, pod, devs, allDevices(claim))

		// matchAttribute pcieSwitch: GPU 0, listed first, has no NIC beside
		// it; GPU 1 shares mlx5_0's switch.
		createTemplate(t, client, "by-switch", resourcev1.DeviceClaim{
			Requests:    []resourcev1.DeviceRequest{exactly("gpu", draGPUClass, 1), exactly("nic", draNICClass, 1)},
			Constraints: []resourcev1.DeviceConstraint{matchAttribute(attrSwitch, "gpu", "nic")},
		})
		pod2, claim2 := d.runDRAPod(t, draPod("by-switch", fromTemplate("devices", "by-switch")), "devices")
		got2 := allocated(claim2, draDriver)
		require.Equal(t, []string{deviceNamed(t, devs, fakeNICs[0].bus)}, got2["nic"], "claim %s's NIC", claim2.Name)
		require.Equal(t, []string{deviceNamed(t, devs, fakeGPUs[1].bus)}, got2["gpu"], "claim %s's GPU: GPU 1, beside mlx5_0", claim2.Name)
		d.checkDRAContainer(t, pod2, devs, allDevices(claim2))
		t.Logf("on-switch: %v; by-switch: %v", got, got2)
		deleteDRAPod(t, client, "by-switch", claim2)
		deleteDRAPod(t, client, "on-switch", claim)
	})

	scenario("distinct-and-all", func(t *testing.T) {
		all := exactly("nics", draNICClass, 0)
		all.Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
		createTemplate(t, client, "spread", resourcev1.DeviceClaim{
			Requests:    []resourcev1.DeviceRequest{exactly("gpus", draGPUClass, 2), all},
			Constraints: []resourcev1.DeviceConstraint{distinctAttribute(attrNUMANode, "gpus")},
		})
		pod, claim := d.runDRAPod(t, draPod("spread", fromTemplate("devices", "spread")), "devices")
		got := allocated(claim, draDriver)
		require.Len(t, got["gpus"], 2)
		require.NotEqual(t, *devs[got["gpus"][0]].Attributes[attrNUMANode].IntValue, *devs[got["gpus"][1]].Attributes[attrNUMANode].IntValue,
			"claim %s's GPUs share a NUMA node", claim.Name)
		require.ElementsMatch(t, append(devicesOn(devs, 0, false), devicesOn(devs, 1, false)...), got["nics"], "allocationMode All: every NIC")
		d.checkDRAContainer(t, pod, devs, allDevices(claim))
		t.Logf("spread: %v", got)
		deleteDRAPod(t, client, "spread", claim)
	})

	scenario("unhealthy-gpu", func(t *testing.T) {
		sick := deviceNamed(t, devs, fakeGPUs[2].bus)
		sickNode := filepath.Join(d.devDir, "nvidia"+strconv.Itoa(fakeGPUs[2].minor))
		mknod := func() error { return unix.Mknod(sickNode, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) }
		require.NoError(t, os.Remove(sickNode))
		t.Cleanup(func() {
			if _, err := os.Stat(sickNode); os.IsNotExist(err) {
				_ = mknod()
			}
		})
		require.Eventually(t, func() bool {
			for _, taint := range d.taintsOf(t, sick) {
				if taint.Effect == resourcev1.DeviceTaintEffectNoSchedule {
					return true
				}
			}
			return false
		}, 60*time.Second, 100*time.Millisecond, "device %s (GPU 2, its node %s removed) is not tainted NoSchedule", sick, sickNode)
		t.Logf("device %s's taints with its node gone: %+v", sick, d.taintsOf(t, sick))
		createTemplate(t, client, "node1-gpu", resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{exactly("gpu", draGPUClass, 1,
				fmt.Sprintf(`device.attributes["resource.kubernetes.io"].numaNode == %d`, fakeGPUs[2].node))},
		})
		pod, claim := d.runDRAPod(t, draPod("avoid", fromTemplate("devices", "node1-gpu")), "devices")
		require.Equal(t, []string{deviceNamed(t, devs, fakeGPUs[3].bus)}, allocated(claim, draDriver)["gpu"], "the claim avoids tainted %s", sick)
		d.checkDRAContainer(t, pod, devs, allDevices(claim))
		require.NoError(t, mknod())
		require.Eventually(t, func() bool { return len(d.taintsOf(t, sick)) == 0 }, 60*time.Second, 100*time.Millisecond,
			"device %s keeps its taint with its node back", sick)
		deleteDRAPod(t, client, "avoid", claim)
	})

	scenario("held-by-decision", func(t *testing.T) {
		// A pod bound by hand with a numaplace decision naming GPU 2 (the
		// NRI role holds it in the node state once the pod starts), then a
		// claim for GPU 2 by its uuid: the scheduler allocates it (it knows
		// nothing of the decision), the agent refuses to prepare it naming
		// the holder, and the kubelet shows that on the claim's pod.
		holder := cpuPod("holder")
		holder.Spec.NodeName = kubeletNode
		holder.Spec.SchedulerName = ""
		holder.Annotations["numaplace.io/allocation"] = fmt.Sprintf(`{"policy":"SingleNUMANode","exclusive":"Required",`+
			`"cpuset":"1","numaNodes":[1],"gpus":[{"id":2,"uuid":%q}],"memoryMiB":{"1":64}}`, fakeGPUs[2].uuid)
		_, err := client.CoreV1().Pods("default").Create(context.Background(), holder, metav1.CreateOptions{})
		require.NoError(t, err)
		waitRunning(t, client, "holder")
		holderGone := false
		t.Cleanup(func() {
			if !holderGone {
				deletePod(t, client, "holder", 1)
			}
		})
		createClaim(t, client, "wants-gpu2", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactly("gpu", draGPUClass, 1,
			fmt.Sprintf(`device.attributes[%q].uuid == %q`, draDriver, fakeGPUs[2].uuid))}})
		t.Cleanup(func() {
			_ = client.ResourceV1().ResourceClaims("default").Delete(context.Background(), "wants-gpu2", metav1.DeleteOptions{})
		})
		_, err = client.CoreV1().Pods("default").Create(context.Background(), draPod("wants-gpu2", fromClaim("devices", "wants-gpu2")), metav1.CreateOptions{})
		require.NoError(t, err)
		claim := podClaim(t, client, "wants-gpu2", "devices")
		require.Equal(t, []string{deviceNamed(t, devs, fakeGPUs[2].bus)}, allocated(claim, draDriver)["gpu"])
		msg := waitEvent(t, client, "wants-gpu2", "FailedPrepareDynamicResources", "default/holder")
		t.Logf("wants-gpu2 (claim %s, GPU 2, held by holder's decision): %s", claim.Name, msg)
		p, err := client.CoreV1().Pods("default").Get(context.Background(), "wants-gpu2", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, corev1.PodPending, p.Status.Phase)
		require.Empty(t, cdiSpecsOf(t, e, claim), "the refused claim has a CDI spec")

		// The refusal holds only while the holder does: once it is gone (a
		// grace period, so that the kubelet has stopped its sandbox when its
		// object goes), the kubelet's retry prepares the claim.
		deletePod(t, client, "holder", 1)
		holderGone = true
		start := time.Now()
		require.Eventually(t, func() bool {
			p, err := client.CoreV1().Pods("default").Get(context.Background(), "wants-gpu2", metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning
		}, 180*time.Second, 200*time.Millisecond, "wants-gpu2 does not run once the holder is gone: %s", describe(client, "wants-gpu2"))
		t.Logf("wants-gpu2 runs %.1fs after the holder went", time.Since(start).Seconds())
		d.checkDRAContainer(t, waitRunning(t, client, "wants-gpu2"), devs, allDevices(claim))
		deletePod(t, client, "wants-gpu2", 1)
	})
	scenario("agent-kill-9", func(t *testing.T) {
		// On NUMA node 1, whose CPU is free for the decision below (node
		// 0's is the shared pool's).
		onNode1 := `device.attributes["resource.kubernetes.io"].numaNode == 1`
		createTemplate(t, client, "one-each", resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{exactly("gpu", draGPUClass, 1, onNode1), exactly("nic", draNICClass, 1, onNode1)},
		})
		pod, claim := d.runDRAPod(t, draPod("survivor", fromTemplate("devices", "one-each")), "devices")
		ctr := d.checkDRAContainer(t, pod, devs, allDevices(claim))
		specs := cdiSpecsOf(t, e, claim)
		require.NotEmpty(t, specs)
		d.agentProc.kill9()
		d.agentProc = d.startAgentProcess(t)
		require.Eventually(t, func() bool {
			data, _ := os.ReadFile(d.agentProc.log)
			return strings.Contains(string(data), "DRA driver registered")
		}, 60*time.Second, 100*time.Millisecond, "the restarted agent's DRA driver did not register (log: %s)", d.agentProc.log)
		// Nothing lost: the claim allocated and reserved for survivor, its
		// CDI spec, the container's devices, the node state's hold.
		now, err := client.ResourceV1().ResourceClaims("default").Get(context.Background(), claim.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, now.Status.Allocation)
		require.Equal(t, allDevices(claim), allDevices(now))
		require.Len(t, now.Status.ReservedFor, 1)
		require.Equal(t, pod.UID, now.Status.ReservedFor[0].UID)
		require.Equal(t, specs, cdiSpecsOf(t, e, claim), "the claim's CDI spec after the restart")
		require.Equal(t, ctr, d.checkDRAContainer(t, waitRunning(t, client, "survivor"), devs, allDevices(claim)))
		cp, err := os.ReadFile(filepath.Join(e.dir, "checkpoint.json"))
		require.NoError(t, err)
		require.Contains(t, string(cp), string(claim.UID), "the agent's checkpoint holds claim %s", claim.Name)

		// A claim given survivor's GPU by hand (past the scheduler, which
		// would not) for a pod bound to the node: the agent refuses to
		// prepare it, naming the holder, and the kubelet says so on the pod.
		gpu := allocated(claim, draDriver)["gpu"][0]
		d.handAllocated(t, "intruder", claim.Status.Allocation.Devices.Results[0].Pool, gpu)
		msg := waitEvent(t, client, "intruder", "FailedPrepareDynamicResources", "survivor")
		t.Logf("intruder (given %s, survivor's GPU, by hand): %s", gpu, msg)
		p, err := client.CoreV1().Pods("default").Get(context.Background(), "intruder", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, corev1.PodPending, p.Status.Phase)
		require.Equal(t, ctr, d.checkDRAContainer(t, waitRunning(t, client, "survivor"), devs, allDevices(claim)))
		deletePod(t, client, "intruder", 0)

		// The other way round: a pod bound by hand with a numaplace
		// decision naming survivor's GPU is refused by the NRI role, the
		// claim named.
		id := devs[gpu].gpu
		gpuID := slices.IndexFunc(fakeGPUs, func(g fakeGPU) bool { return g.bus == id.bus })
		decided := cpuPod("decided")
		decided.Spec.NodeName = kubeletNode
		decided.Spec.SchedulerName = ""
		decided.Annotations["numaplace.io/allocation"] = fmt.Sprintf(`{"policy":"SingleNUMANode","exclusive":"Required",`+
			`"cpuset":"%d","numaNodes":[%d],"gpus":[{"id":%d,"uuid":%q}],"memoryMiB":{"%d":64}}`, id.node, id.node, gpuID, id.uuid, id.node)
		_, err = client.CoreV1().Pods("default").Create(context.Background(), decided, metav1.CreateOptions{})
		require.NoError(t, err)
		msg = waitEvent(t, client, "decided", "FailedCreatePodSandBox", "ResourceClaim default/"+claim.Name)
		t.Logf("decided (a decision naming GPU %d, survivor's): %s", gpuID, msg)
		deletePod(t, client, "decided", 0)
		deleteDRAPod(t, client, "survivor", claim)
	})
}

// own returns the device's attribute of the driver's own domain: named
// without a domain in the slice (as the API lets a driver write its own)
// or with the driver's name.
func own(dev resourcev1.Device, name string) resourcev1.DeviceAttribute {
	if a, ok := dev.Attributes[resourcev1.QualifiedName(name)]; ok {
		return a
	}
	return dev.Attributes[resourcev1.QualifiedName(draDriver+"/"+name)]
}

// str is a string attribute's value, "" when it is not one.
func str(a resourcev1.DeviceAttribute) string {
	if a.StringValue == nil {
		return ""
	}
	return *a.StringValue
}

// handAllocated creates a pod bound to the node (no scheduler) whose
// claim (of the same name) is allocated the pool's device by hand, as an
// admin or a faulty scheduler could write it: the finalizer, the
// allocation and the reservation for the pod.
func (d *draCluster) handAllocated(t *testing.T, name, pool, device string) {
	t.Helper()
	ctx := context.Background()
	client := d.client
	createClaim(t, client, name, resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactly("gpu", draGPUClass, 1)}})
	t.Cleanup(func() {
		_ = client.ResourceV1().ResourceClaims("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// The pod names a scheduler that does not run; the test binds it once
	// its claim is allocated and reserved for it, as a scheduler does (a
	// pod bound at creation would have the kubelet find its claim
	// unreserved first).
	pod := draPod(name, fromClaim("devices", name))
	pod.Spec.SchedulerName = "numaplace-test-no-scheduler"
	pod, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	claim, err := client.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	claim.Finalizers = append(claim.Finalizers, resourcev1.Finalizer)
	claim, err = client.ResourceV1().ResourceClaims("default").Update(ctx, claim, metav1.UpdateOptions{})
	require.NoError(t, err)
	claim.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: draDriver, Pool: pool, Device: device}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{kubeletNode}}}}}},
	}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: pod.UID}}
	_, err = client.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	require.NoError(t, err, "allocating claim %s by hand", name)
	require.NoError(t, client.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: name, UID: pod.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: kubeletNode}}, metav1.CreateOptions{}), "binding pod %s", name)
}
