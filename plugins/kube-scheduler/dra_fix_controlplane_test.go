package numaplace_test

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/topology"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// publishSlice creates the node's ResourceSlice as numaplace-agent's DRA
// driver publishes it, with only the GPUs published (a node split by
// --dra-gpus) and the taints given per GPU (applied as the slice carries
// them), and all the machine's NICs.
func (c *cluster) publishSlice(name string, m *topology.Machine, published func(id int) bool, taints map[int][]resourceapi.DeviceTaint) {
	t := c.t
	t.Helper()
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
	num := func(v int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: &v} }
	var devs []resourceapi.Device
	for _, g := range m.GPUs() {
		if !published(g.ID) {
			continue
		}
		devs = append(devs, resourceapi.Device{Name: "gpu-" + strconv.Itoa(g.ID), Taints: taints[g.ID], Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type": str("gpu"), "index": num(int64(g.ID)), "minor": num(int64(g.ID)), "uuid": str(g.UUID),
			"resource.kubernetes.io/numaNode": num(int64(g.NUMANode)),
		}})
	}
	for _, d := range m.Devices() {
		if d.Class != "rdma" {
			continue
		}
		devs = append(devs, resourceapi.Device{Name: nicName(d.ID), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"type": str("nic"), "ibDevice": str(d.ID), "resource.kubernetes.io/numaNode": num(int64(d.NUMANode)),
		}})
	}
	slice := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-gpu.numaplace.io"},
		Spec: resourceapi.ResourceSliceSpec{Driver: numaplace.DRADriver, NodeName: &name,
			Pool:    resourceapi.ResourcePool{Name: name, ResourceSliceCount: 1},
			Devices: devs},
	}
	_, err := c.client.ResourceV1().ResourceSlices().Create(context.Background(), slice, metav1.CreateOptions{})
	require.NoError(t, err)
}

// gpusOn returns the machine's GPUs on the NUMA node.
func gpusOn(m *topology.Machine, numaNode int) []int {
	var out []int
	for _, g := range m.GPUs() {
		if int(g.NUMANode) == numaNode {
			out = append(out, g.ID)
		}
	}
	return out
}

// TestControlPlaneDRASplitNode: a dgx-h100 split as the agent's --dra-gpus
// splits it: the GPUs of NUMA node 1 published in its ResourceSlice, those
// of NUMA node 0 served by the device plugin (aliyun.com/gpu: 4). A
// SingleNUMANode pod with a 1-GPU claim gets a published GPU (numaplace's
// decision on the whole machine would take one of node 0, which the slice
// does not offer, and the pod was refused); a device-plugin pod then gets
// GPUs of node 0 only, never a DRA device.
func TestControlPlaneDRASplitNode(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	dra := gpusOn(m, 1)
	require.Len(t, dra, 4)
	n := node(t, "s", "dgx-h100", true, false)
	n.Status.Allocatable[kube.ResourceAliyunGPU] = *resource.NewQuantity(4, resource.DecimalSI)
	n.Status.Capacity[kube.ResourceAliyunGPU] = *resource.NewQuantity(4, resource.DecimalSI)
	c.create(n)
	c.publishSlice("s", m, func(id int) bool { return slices.Contains(dra, id) }, nil)
	c.kubelet()
	c.start(nil)

	c.claim("one", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 1)})
	c.create(claimPod("dra", "SingleNUMANode", 8, "one"))
	p := c.waitBound("dra")
	d := decision(t, p)
	require.Len(t, d.GPUs, 1)
	require.Contains(t, dra, d.GPUs[0].ID, "the decision names a GPU the node does not publish")
	require.Equal(t, gpuDevices(gpuIDs(d)), c.allocated("one", p))

	c.create(pod("dp", "SingleNUMANode", 8, 2))
	q := c.waitBound("dp")
	dq := decision(t, q)
	require.Len(t, dq.GPUs, 2)
	for _, g := range gpuIDs(dq) {
		require.NotContains(t, dra, g, "the device-plugin pod got a DRA GPU: %v", gpuIDs(dq))
	}
	c.requireNoDoubleHandout()
}

// TestControlPlaneDRATaintedGPUs: a dgx-h100 publishing all its GPUs, those
// of NUMA node 0 tainted NoSchedule in the slice: a SingleNUMANode pod with
// a 2-GPU claim gets GPUs of node 1 (numaplace's decision on the whole
// machine takes node 0's, which the allocator refuses for the taint); a pod
// whose claim tolerates the taint may be given the tainted ones and binds.
func TestControlPlaneDRATaintedGPUs(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	c.draNodeObject("h", "dgx-h100")
	taint := resourceapi.DeviceTaint{Key: "example.com/broken", Value: "yes", Effect: resourceapi.DeviceTaintEffectNoSchedule}
	taints := map[int][]resourceapi.DeviceTaint{}
	for _, g := range gpusOn(m, 0) {
		taints[g] = []resourceapi.DeviceTaint{taint}
	}
	c.publishSlice("h", m, func(int) bool { return true }, taints)
	c.kubelet()
	c.start(nil)

	c.claim("two", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	c.create(claimPod("a", "SingleNUMANode", 8, "two"))
	p := c.waitBound("a")
	d := decision(t, p)
	require.Equal(t, []int{1}, gpuNUMANodes(t, "dgx-h100", gpuIDs(d)), "the decision names tainted GPUs")
	require.Equal(t, gpuDevices(gpuIDs(d)), c.allocated("two", p))

	tol := request("gpus", numaplace.ClassGPU, 4)
	tol.Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: "example.com/broken", Operator: resourceapi.DeviceTolerationOpExists}}
	c.claim("tolerant", []resourceapi.DeviceRequest{tol})
	c.create(claimPod("b", "SingleNUMANode", 8, "tolerant"))
	pb := c.waitBound("b")
	db := decision(t, pb)
	require.Equal(t, []int{0}, gpuNUMANodes(t, "dgx-h100", gpuIDs(db)), "only node 0 has 4 free GPUs")
	require.Equal(t, gpuDevices(gpuIDs(db)), c.allocated("tolerant", pb))
	c.requireNoDoubleHandout()
}

// TestControlPlaneDRARequeuedOnSlices: a pod with a GPU claim refused
// because the node publishes no ResourceSlice yet (an agent or kubelet
// restarting) is tried again when the slice appears, and binds.
func TestControlPlaneDRARequeuedOnSlices(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	c.draNodeObject("h", "dgx-h100")
	c.kubelet()
	c.start(nil)
	c.claim("two", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	c.create(claimPod("a", "SingleNUMANode", 8, "two"))
	msg := c.waitUnschedulable("a")
	require.Contains(t, msg, "numaplace")
	c.publishSlice("h", m, func(int) bool { return true }, nil)
	p := c.waitBound("a")
	require.Equal(t, gpuDevices(gpuIDs(decision(t, p))), c.allocated("two", p))
}

// TestControlPlaneDRADecisionNamesNICsAndRefusals: a SingleNUMANode pod
// with a 2-GPU claim and a 1-NIC claim gets a decision whose devices.rdma
// names the NIC its claim got (numaplace decides the NIC jointly with the
// GPUs); refusals by a claim's constraint or selector name the claim and
// the constraint or selector.
func TestControlPlaneDRADecisionNamesNICsAndRefusals(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	m := c.draNode("h", "dgx-h100")
	c.kubelet()
	c.start(nil)

	c.claim("same-node", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 8)},
		resourceapi.DeviceConstraint{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("resource.kubernetes.io/numaNode"))})
	c.create(claimPod("m8", "Restricted", 8, "same-node"))
	msg := c.waitUnschedulable("m8")
	require.Contains(t, msg, "ResourceClaim default/same-node: matchAttribute resource.kubernetes.io/numaNode cannot hold for the 8 GPUs numaplace decides (NUMA nodes 0,1) under Restricted")
	c.deletePod("m8")

	sel := `device.attributes["gpu.numaplace.io"].index == 0`
	c.claim("gpu0", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 1, sel)})
	c.busyNUMA0("h", m)
	c.create(claimPod("sel", "SingleNUMANode", 16, "gpu0"))
	msg = c.waitUnschedulable("sel")
	require.Contains(t, msg, `ResourceClaim default/gpu0, request "gpus": selector `+strconv.Quote(sel)+` does not admit the 1 GPU numaplace decides (NUMA nodes 1) under SingleNUMANode`)
	c.deletePod("sel")

	c.claim("a-gpus", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	c.claim("a-nic", []resourceapi.DeviceRequest{request("nic", numaplace.ClassNIC, 1)})
	c.create(claimPod("a", "SingleNUMANode", 16, "a-gpus", "a-nic"))
	p := c.waitBound("a")
	d := decision(t, p)
	require.Equal(t, gpuDevices(gpuIDs(d)), c.allocated("a-gpus", p))
	require.Len(t, d.Devices["rdma"], 1, "the decision names no NIC: %v", p.Annotations[kube.AnnotationAllocation])
	require.Equal(t, []string{nicName(d.Devices["rdma"][0])}, c.allocated("a-nic", p), "the NIC claim got another NIC than the decision's")
	require.Equal(t, []int{1}, nicNUMANodes(t, m, c.allocated("a-nic", p)))

	// A second such pod gets the other NIC of its span, never the first.
	c.claim("b-gpus", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	c.claim("b-nic", []resourceapi.DeviceRequest{request("nic", numaplace.ClassNIC, 1)})
	c.create(claimPod("b", "SingleNUMANode", 16, "b-gpus", "b-nic"))
	pb := c.waitBound("b")
	db := decision(t, pb)
	require.Len(t, db.Devices["rdma"], 1)
	require.NotEqual(t, d.Devices["rdma"], db.Devices["rdma"])
	require.Equal(t, []string{nicName(db.Devices["rdma"][0])}, c.allocated("b-nic", pb))
}
