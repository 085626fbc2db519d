package numaplace_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// taintRule creates a DeviceTaintRule tainting the named devices of
// numaplace's driver in the node's pool NoSchedule (one rule per device:
// a rule selects one device or a whole pool).
func (c *cluster) taintRule(name, pool string, devices ...string) {
	c.t.Helper()
	for _, dev := range devices {
		r := &resourceapi.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + dev},
			Spec: resourceapi.DeviceTaintRuleSpec{
				DeviceSelector: &resourceapi.DeviceTaintSelector{Driver: ptr.To(numaplace.DRADriver), Pool: ptr.To(pool), Device: ptr.To(dev)},
				Taint:          resourceapi.DeviceTaint{Key: "example.com/" + name, Value: "yes", Effect: resourceapi.DeviceTaintEffectNoSchedule},
			}}
		_, err := c.client.ResourceV1().DeviceTaintRules().Create(context.Background(), r, metav1.CreateOptions{})
		require.NoError(c.t, err)
	}
}

// untaintRule deletes the rules taintRule made.
func (c *cluster) untaintRule(name string, devices ...string) {
	c.t.Helper()
	for _, dev := range devices {
		require.NoError(c.t, c.client.ResourceV1().DeviceTaintRules().Delete(context.Background(), name+"-"+dev, metav1.DeleteOptions{}))
	}
}

// TestControlPlaneDRARequeuedOnTaintRuleDeletion: a pod with a 2-GPU claim
// on a node whose GPUs are all tainted NoSchedule by DeviceTaintRules is
// refused; deleting the rules (the slice itself unchanged) has the pod
// tried again and bound within the wait (30s), long before the
// unschedulable pods' 5-minute flush.
func TestControlPlaneDRARequeuedOnTaintRuleDeletion(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	m := c.draNode("h", "dgx-h100")
	var gpus []string
	for _, g := range m.GPUs() {
		gpus = append(gpus, gpuDevices([]int{g.ID})...)
	}
	c.taintRule("broken", "h", gpus...)
	c.kubelet()
	c.start(nil)

	c.claim("two", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	c.create(claimPod("a", "SingleNUMANode", 8, "two"))
	msg := c.waitUnschedulable("a")
	require.Contains(t, msg, "numaplace")
	c.untaintRule("broken", gpus...)
	p := c.waitBound("a")
	require.Equal(t, gpuDevices(gpuIDs(decision(t, p))), c.allocated("two", p))
}

// TestControlPlaneDRAScoreRatesTheWithheldView: two empty dgx-h100 but for
// what they offer a DRA pod: on "a" GPUs 0-5 are tainted NoSchedule in the
// slice (GPUs 6 and 7 of NUMA node 1 offered), "b" offers all its GPUs and
// a bound pod holds GPUs 0-3 there. A SingleNUMANode pod with a 2-GPU
// claim fills "a"'s offered GPUs, so MostAllocated packs it there; rated
// on the whole machine (the old Score) "a" looked emptier than "b" and the
// pod went to "b".
func TestControlPlaneDRAScoreRatesTheWithheldView(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	m, err := topology.Preset("dgx-h100")
	require.NoError(t, err)
	c.draNodeObject("a", "dgx-h100")
	taints := map[int][]resourceapi.DeviceTaint{}
	for id := range 6 {
		taints[id] = []resourceapi.DeviceTaint{{Key: "example.com/broken", Value: "yes", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	}
	c.publishSlice("a", m, func(int) bool { return true }, taints)
	c.draNode("b", "dgx-h100")
	busy := m.NodeCPUs(0).Difference(m.ReservedCPUs())
	two := numa.CPUSet{}
	for cpu := range busy.All() {
		if two.Size() == 2 {
			break
		}
		two.Add(cpu)
	}
	c.create(decided("busy", "b", two.String(), gpusOn(m, 0)...))
	c.kubelet()
	c.start(nil)

	c.claim("two", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	c.create(claimPod("p", "SingleNUMANode", 8, "two"))
	p := c.waitBound("p")
	require.Equal(t, "a", p.Spec.NodeName, "the pod was not packed on the node its offered GPUs fill")
	require.Equal(t, []string{"gpu-6", "gpu-7"}, c.allocated("two", p))
	c.requireNoDoubleHandout()
}

// nicsOn returns the driver's device names of the machine's NICs on the
// NUMA node.
func nicsOn(m *topology.Machine, numaNode int) []string {
	var out []string
	for _, d := range m.Devices() {
		if d.Class == "rdma" && int(d.NUMANode) == numaNode {
			out = append(out, nicName(d.ID))
		}
	}
	return out
}

// TestControlPlaneDRANICsWithheld: on an empty dgx-h100, numaplace's
// decision for a SingleNUMANode pod with a 2-GPU claim and a 1-NIC claim
// takes NUMA node 0 and a NIC there. When node 0's NICs are tainted by
// DeviceTaintRules, not published, or held by a claim allocated outside
// numaplace (its NICs no decision accounts), the pod is decided around
// them: GPUs, CPUs and NIC on NUMA node 1, the claims allocated to the
// decision. (Before NICs were withheld, the decision named a NIC of node 0
// and the pod was refused.)
func TestControlPlaneDRANICsWithheld(t *testing.T) {
	for _, how := range []string{"tainted", "unpublished", "held"} {
		t.Run(how, func(t *testing.T) {
			c := newControlPlaneCluster(t)
			c.applyDeviceClasses()
			m, err := topology.Preset("dgx-h100")
			require.NoError(t, err)
			node0 := nicsOn(m, 0)
			require.Len(t, node0, 4)
			switch how {
			case "unpublished":
				c.draNodeObject("h", "dgx-h100")
				c.publishSlice("h", m, func(int) bool { return true }, nil)
				sl, err := c.client.ResourceV1().ResourceSlices().Get(context.Background(), "h-gpu.numaplace.io", metav1.GetOptions{})
				require.NoError(t, err)
				sl.Spec.Devices = slices.DeleteFunc(sl.Spec.Devices, func(d resourceapi.Device) bool { return slices.Contains(node0, d.Name) })
				_, err = c.client.ResourceV1().ResourceSlices().Update(context.Background(), sl, metav1.UpdateOptions{})
				require.NoError(t, err)
			default:
				c.draNode("h", "dgx-h100")
			}
			switch how {
			case "tainted":
				c.taintRule("nic-broken", "h", node0...)
			case "held":
				c.claim("elsewhere", []resourceapi.DeviceRequest{request("nics", numaplace.ClassNIC, 4)})
				rc := c.getClaim("elsewhere")
				rc.Status.Allocation = &resourceapi.AllocationResult{}
				for _, dev := range node0 {
					rc.Status.Allocation.Devices.Results = append(rc.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
						Request: "nics", Driver: numaplace.DRADriver, Pool: "h", Device: dev})
				}
				_, err := c.client.ResourceV1().ResourceClaims("default").UpdateStatus(context.Background(), rc, metav1.UpdateOptions{})
				require.NoError(t, err)
			}
			c.kubelet()
			c.start(nil)

			c.claim("a-gpus", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
			c.claim("a-nic", []resourceapi.DeviceRequest{request("nic", numaplace.ClassNIC, 1)})
			c.create(claimPod("a", "SingleNUMANode", 8, "a-gpus", "a-nic"))
			p := c.waitBound("a")
			d := decision(t, p)
			require.Equal(t, []int{1}, d.NUMANodes)
			require.Equal(t, gpuDevices(gpuIDs(d)), c.allocated("a-gpus", p))
			require.Len(t, d.Devices["rdma"], 1, "the decision names no NIC: %v", p.Annotations[kube.AnnotationAllocation])
			nic := c.allocated("a-nic", p)
			require.Equal(t, []string{nicName(d.Devices["rdma"][0])}, nic, "the NIC claim got another NIC than the decision's")
			require.NotContains(t, node0, nic[0])
		})
	}
}

// TestControlPlaneDRALeftOverClaimRecovered: the state numaplace-scheduler
// leaves when it dies between Bind's claim writes and the Binding (a
// claim with the delete-protection finalizer, allocated to numaplace's
// devices and reserved for the unbound pod, the pod without a decision)
// written directly, here with GPUs 0 and 4 (NUMA nodes 0 and 1), which no
// SingleNUMANode decision takes together. A scheduler started on it
// deallocates the claim and decides the pod afresh: it binds, its claim
// names the decision's GPUs on one NUMA node, reserved for it, and no GPU
// is held twice. (Before, the pod was refused for good: "allocated
// already".)
func TestControlPlaneDRALeftOverClaimRecovered(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	c.draNode("h", "dgx-h100")
	c.claim("two", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	c.create(claimPod("a", "SingleNUMANode", 8, "two"))
	pa := c.get("a")
	ctx := context.Background()
	rc := c.getClaim("two")
	rc.Finalizers = append(rc.Finalizers, resourceapi.Finalizer)
	rc, err := c.client.ResourceV1().ResourceClaims("default").Update(ctx, rc, metav1.UpdateOptions{})
	require.NoError(t, err)
	rc.Status.Allocation = &resourceapi.AllocationResult{}
	for _, dev := range []string{"gpu-0", "gpu-4"} {
		rc.Status.Allocation.Devices.Results = append(rc.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpus", Driver: numaplace.DRADriver, Pool: "h", Device: dev})
	}
	rc.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "a", UID: pa.UID}}
	_, err = c.client.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, rc, metav1.UpdateOptions{})
	require.NoError(t, err)
	c.kubelet()
	c.start(nil)

	p := c.waitBound("a")
	d := decision(t, p)
	require.Len(t, d.GPUs, 2)
	require.Len(t, gpuNUMANodes(t, "dgx-h100", gpuIDs(d)), 1, "the decision spans NUMA nodes: %v", gpuIDs(d))
	require.Equal(t, gpuDevices(gpuIDs(d)), c.allocated("two", p))

	// Nothing is held twice: a second pod gets two other GPUs.
	c.claim("more", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	c.create(claimPod("b", "SingleNUMANode", 8, "more"))
	pb := c.waitBound("b")
	db := decision(t, pb)
	require.Equal(t, gpuDevices(gpuIDs(db)), c.allocated("more", pb))
	for _, g := range gpuIDs(db) {
		require.NotContains(t, gpuIDs(d), g)
	}
	c.requireNoDoubleHandout()
}
