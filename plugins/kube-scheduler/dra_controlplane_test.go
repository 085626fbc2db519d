package numaplace_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"

	"github.com/numaplace/numaplace/internal/controlplane"
	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// The DRA tests run numaplace-scheduler's profile on a real kube-apiserver
// and etcd, with deploy/dra.yaml's DeviceClasses and a ResourceSlice per
// node as numaplace-agent's DRA driver publishes it (devices gpu-<index>
// and nic-<ibdev>, in index order, with the driver's attributes and the
// standard numaNode), so that the built-in first fit would take gpu-0 and
// gpu-1 first.

// applyDeviceClasses creates deploy/dra.yaml's DeviceClasses as shipped.
func (c *cluster) applyDeviceClasses() {
	t := c.t
	t.Helper()
	data, err := os.ReadFile("../../deploy/dra.yaml")
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	n := 0
	for {
		var dc resourceapi.DeviceClass
		err := dec.Decode(&dc)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if dc.Name == "" {
			continue
		}
		_, err = c.client.ResourceV1().DeviceClasses().Create(context.Background(), &dc, metav1.CreateOptions{})
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 3, n, "deploy/dra.yaml's DeviceClasses")
}

// draNodeObject creates node(name, preset) opted in, without
// aliyun.com/gpu in its allocatable (no device plugin: its GPUs are DRA
// devices), and no ResourceSlice.
func (c *cluster) draNodeObject(name, preset string) {
	c.t.Helper()
	n := node(c.t, name, preset, true, false)
	delete(n.Status.Allocatable, kube.ResourceAliyunGPU)
	delete(n.Status.Capacity, kube.ResourceAliyunGPU)
	c.create(n)
}

// draNode is draNodeObject(name, preset) with its ResourceSlice.
func (c *cluster) draNode(name, preset string) *topology.Machine {
	t := c.t
	t.Helper()
	c.draNodeObject(name, preset)
	m, err := topology.Preset(preset)
	require.NoError(t, err)
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
	num := func(v int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: &v} }
	var devs []resourceapi.Device
	for _, g := range m.GPUs() {
		devs = append(devs, resourceapi.Device{Name: "gpu-" + strconv.Itoa(g.ID), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
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
	_, err = c.client.ResourceV1().ResourceSlices().Create(context.Background(), slice, metav1.CreateOptions{})
	require.NoError(t, err)
	return m
}

// request is one request of a claim: count devices of class, with
// optional CEL selectors.
func request(name, class string, count int64, cel ...string) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class,
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}
	for _, e := range cel {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: e}})
	}
	return r
}

// claim creates a ResourceClaim in default with the requests and
// constraints.
func (c *cluster) claim(name string, reqs []resourceapi.DeviceRequest, cons ...resourceapi.DeviceConstraint) {
	c.t.Helper()
	rc := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: reqs, Constraints: cons}}}
	_, err := c.client.ResourceV1().ResourceClaims("default").Create(context.Background(), rc, metav1.CreateOptions{})
	require.NoError(c.t, err)
}

func (c *cluster) getClaim(name string) *resourceapi.ResourceClaim {
	c.t.Helper()
	rc, err := c.client.ResourceV1().ResourceClaims("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(c.t, err)
	return rc
}

// claimPod is pod(name, policy, cpus, 0) using the named ResourceClaims
// (every container uses them all).
func claimPod(name, policy string, cpus int, claims ...string) *v1.Pod {
	p := pod(name, policy, cpus, 0)
	for _, cl := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: cl, ResourceClaimName: ptr.To(cl)})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: cl})
	}
	return p
}

// allocated returns the devices of the claim's allocation, after checking
// that it is allocated on the node and reserved for the pod, with the
// delete-protection finalizer, as DynamicResources writes it.
func (c *cluster) allocated(claimName string, p *v1.Pod) []string {
	t := c.t
	t.Helper()
	rc := c.getClaim(claimName)
	require.NotNil(t, rc.Status.Allocation, "claim %s is not allocated", claimName)
	require.Contains(t, rc.Finalizers, resourceapi.Finalizer)
	require.Equal(t, []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}, rc.Status.ReservedFor)
	require.NotNil(t, rc.Status.Allocation.NodeSelector)
	var out []string
	for _, r := range rc.Status.Allocation.Devices.Results {
		require.Equal(t, numaplace.DRADriver, r.Driver)
		require.Equal(t, p.Spec.NodeName, r.Pool)
		out = append(out, r.Device)
	}
	slices.Sort(out)
	return out
}

func gpuDevices(ids []int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = "gpu-" + strconv.Itoa(id)
	}
	slices.Sort(out)
	return out
}

// busyNUMA0 binds a pod with a decision holding all but 8 of the CPUs of
// NUMA node 0 and none of its GPUs: a pod of 16 CPUs fits on node 1 only.
func (c *cluster) busyNUMA0(node string, m *topology.Machine) {
	c.t.Helper()
	cpus := m.NodeCPUs(0).Difference(m.ReservedCPUs())
	keep := numa.CPUSet{}
	n := 0
	for cpu := range cpus.All() {
		if n >= cpus.Size()-8 {
			break
		}
		keep.Add(cpu)
		n++
	}
	c.create(decided("busy", node, keep.String()))
}

// TestControlPlaneDRAClaimsFollowTheDecision: a SingleNUMANode pod with a
// 2-GPU claim and a NIC claim and 16 CPUs, on a dgx-h100 whose NUMA node 0
// has 8 free CPUs (the built-in first fit would take gpu-0 and gpu-1, on
// node 0): the claims are allocated to the GPUs of numaplace's decision and
// a NIC of its span, all on node 1, reserved for the pod, and the
// decision annotation names the same GPUs. A claim whose selector asks for
// GPU 0 is refused with the reason, not allocated. After a restart of the
// scheduler a second such pod gets the other two GPUs of node 1 and the
// other NIC there: nothing is allocated twice.
func TestControlPlaneDRAClaimsFollowTheDecision(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	m := c.draNode("h", "dgx-h100")
	c.busyNUMA0("h", m)
	for _, g := range []int{0, 1} {
		gpu, _ := m.GPU(g)
		require.Equal(t, numa.NodeID(0), gpu.NUMANode, "the first fit's GPUs are on node 0")
	}
	c.kubelet()
	r := c.start(nil)

	// numaplace puts a SingleNUMANode pod of 16 CPUs on node 1's GPUs; a
	// selector asking for GPU 0 cannot be met by that (the first fit would
	// take GPU 0 and leave the CPUs on another node): refused, with the
	// reason.
	c.claim("gpu0", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 1, `device.attributes["gpu.numaplace.io"].index == 0`)})
	c.create(claimPod("sel", "SingleNUMANode", 16, "gpu0"))
	require.Contains(t, c.waitUnschedulable("sel"), "numaplace: the pod's ResourceClaims")
	require.Nil(t, c.getClaim("gpu0").Status.Allocation)
	c.deletePod("sel")

	c.claim("a-gpus", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	c.claim("a-nic", []resourceapi.DeviceRequest{request("nic", numaplace.ClassNIC, 1)})
	c.create(claimPod("a", "SingleNUMANode", 16, "a-gpus", "a-nic"))
	p := c.waitBound("a")
	require.Equal(t, "h", p.Spec.NodeName)
	d := decision(t, p)
	require.Equal(t, []int{1}, d.NUMANodes)
	require.Equal(t, []int{1}, gpuNUMANodes(t, "dgx-h100", gpuIDs(d)))
	require.Equal(t, []int{1}, cpuNUMANodes(t, "dgx-h100", d.CPUSet))
	require.Len(t, d.GPUs, 2)
	require.Equal(t, gpuDevices(gpuIDs(d)), c.allocated("a-gpus", p), "the claim's GPUs are the decision's")
	nics := c.allocated("a-nic", p)
	require.Len(t, nics, 1)
	require.Equal(t, []int{1}, nicNUMANodes(t, m, nics), "the NIC is in the pod's span")

	r.stop()
	c.start(nil)
	c.claim("b-gpus", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
	c.claim("b-nic", []resourceapi.DeviceRequest{request("nic", numaplace.ClassNIC, 1)})
	c.create(claimPod("b", "SingleNUMANode", 16, "b-gpus", "b-nic"))
	pb := c.waitBound("b")
	db := decision(t, pb)
	require.Equal(t, []int{1}, gpuNUMANodes(t, "dgx-h100", gpuIDs(db)))
	require.Equal(t, gpuDevices(gpuIDs(db)), c.allocated("b-gpus", pb))
	for _, g := range gpuIDs(db) {
		require.NotContains(t, gpuIDs(d), g, "GPU %d is in both pods' decisions", g)
	}
	nb := c.allocated("b-nic", pb)
	require.Equal(t, []int{1}, nicNUMANodes(t, m, nb))
	require.NotEqual(t, nics, nb, "the NIC is allocated twice")
	c.requireNoDoubleHandout()
}

// nicName is the driver's device name of an RDMA device (nic-<ibdev>
// with "_" as "-").
func nicName(ibdev string) string { return "nic-" + strings.ReplaceAll(ibdev, "_", "-") }

// nicNUMANodes returns the NUMA nodes of nic-<ibdev> devices.
func nicNUMANodes(t *testing.T, m *topology.Machine, devs []string) []int {
	t.Helper()
	set := map[int]bool{}
	for _, name := range devs {
		found := false
		for _, d := range m.Devices() {
			if nicName(d.ID) == name {
				set[int(d.NUMANode)] = true
				found = true
			}
		}
		require.True(t, found, "no NIC %s", name)
	}
	var out []int
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestControlPlaneDRAConstraintsHonouredOrRefused: a Restricted pod with
// an 8-GPU claim on a 2-NUMA-node dgx-h100 is admitted with 4+4 GPUs (all
// eight in its claim); the same claim with matchAttribute on numaNode,
// which 4+4 cannot meet, is refused with the reason; so is allocationMode
// All.
func TestControlPlaneDRAConstraintsHonouredOrRefused(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	c.draNode("h", "dgx-h100")
	c.kubelet()
	c.start(nil)

	c.claim("same-node", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 8)},
		resourceapi.DeviceConstraint{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("resource.kubernetes.io/numaNode"))})
	c.create(claimPod("m8", "Restricted", 8, "same-node"))
	msg := c.waitUnschedulable("m8")
	require.Contains(t, msg, "numaplace: the pod's ResourceClaims")

	all := request("gpus", numaplace.ClassGPU, 0)
	all.Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	c.claim("all", []resourceapi.DeviceRequest{all})
	c.create(claimPod("all", "Restricted", 4, "all"))
	require.Contains(t, c.waitUnschedulable("all"), "allocationMode All")

	for _, name := range []string{"m8", "all"} {
		c.deletePod(name)
	}
	c.claim("eight", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 8)})
	c.create(claimPod("r8", "Restricted", 8, "eight"))
	p := c.waitBound("r8")
	d := decision(t, p)
	require.Equal(t, []int{0, 1}, gpuNUMANodes(t, "dgx-h100", gpuIDs(d)))
	require.Equal(t, gpuDevices([]int{0, 1, 2, 3, 4, 5, 6, 7}), c.allocated("eight", p))
}

// waitClaimFree waits until the claim is deallocated or gone.
func (c *cluster) waitClaimFree(name string) {
	c.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		rc, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
		return err != nil || rc.Status.Allocation == nil, nil
	})
	require.NoError(c.t, err, "claim %s stays allocated", name)
}

// slowKubelet finishes the deletion of bound pods as a kubelet would,
// after they were terminating for the grace given (so that
// DefaultPreemption, seeing its victims terminate, does not preempt
// again meanwhile).
func (c *cluster) slowKubelet(grace time.Duration) {
	t := c.t
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp != nil && time.Since(p.DeletionTimestamp.Time) > grace-time.Duration(*p.DeletionGracePeriodSeconds)*time.Second {
					_ = c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
				}
			}
			return false, nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// templatePod is claimPod with one claim made from the template.
func templatePod(name, policy string, cpus int, template string) *v1.Pod {
	p := pod(name, policy, cpus, 0)
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "devices", ResourceClaimTemplateName: ptr.To(template)}}
	p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "devices"}}
	return p
}

// podClaim returns the name of the claim made for the pod's "devices"
// claim (pod.status.resourceClaimStatuses).
func (c *cluster) podClaim(name string) string {
	c.t.Helper()
	p := c.waitFor(name, "its claim", func(p *v1.Pod) bool {
		return len(p.Status.ResourceClaimStatuses) == 1 && p.Status.ResourceClaimStatuses[0].ResourceClaimName != nil
	})
	return *p.Status.ResourceClaimStatuses[0].ResourceClaimName
}

// TestControlPlaneDRATemplatesPreemptionExclusivity, with the controller
// manager's resourceclaim controller: four low-priority SingleNUMANode
// pods whose claims come from a 2-GPU ResourceClaimTemplate fill a
// dgx-h100's GPUs, each claim allocated to its pod's decision; a
// high-priority pod of the same template preempts exactly one of them
// (numaplace's dry-run counts the victim's claim free) and gets its GPUs
// once the controller has deallocated the victim's claim; a Restricted pod
// without devices that would need both NUMA nodes is refused while DRA
// pods hold single NUMA nodes (singleNUMANodeExclusive).
func TestControlPlaneDRATemplatesPreemptionExclusivity(t *testing.T) {
	c := newControlPlaneCluster(t)
	controlplane.StartControllerManager(t, c.config)
	c.applyDeviceClasses()
	c.priorityClasses()
	c.draNode("h", "dgx-h100")
	c.slowKubelet(3 * time.Second)
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "two-gpus"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)}}}}}
	_, err := c.client.ResourceV1().ResourceClaimTemplates("default").Create(context.Background(), tmpl, metav1.CreateOptions{})
	require.NoError(t, err)
	c.start(nil)

	held := map[string][]int{}
	for i := range 4 {
		name := "low-" + strconv.Itoa(i)
		c.create(c.withPriority(templatePod(name, "SingleNUMANode", 8, "two-gpus"), "low"))
		p := c.waitBound(name)
		d := decision(t, p)
		require.Equal(t, gpuDevices(gpuIDs(d)), c.allocated(c.podClaim(name), p), "pod %s", name)
		held[name] = gpuIDs(d)
	}
	c.requireNoDoubleHandout()

	// Exclusivity: single-NUMA-node pods (DRA ones) on both nodes.
	c.create(pod("wide", "Restricted", 120, 0))
	require.Contains(t, c.waitUnschedulable("wide"), "singleNUMANodeExclusive")
	c.deletePod("wide")

	c.create(c.withPriority(templatePod("high", "SingleNUMANode", 8, "two-gpus"), "high"))
	p := c.waitBound("high")
	d := decision(t, p)
	require.Equal(t, gpuDevices(gpuIDs(d)), c.allocated(c.podClaim("high"), p))
	names := c.podNames()
	require.Len(t, names, 4, "one low pod was evicted: %v", names)
	var victim string
	for name := range held {
		if !slices.Contains(names, name) {
			victim = name
		}
	}
	require.NotEmpty(t, victim)
	require.Equal(t, held[victim], gpuIDs(d), "the high pod has the victim's GPUs")
	c.requireNoDoubleHandout()
}

// TestControlPlaneDRAWritesPerPod counts the scheduler's writes for pods
// whose claims numaplace allocates, from the API server's
// apiserver_request_total: per pod its Binding and no pod patch (no
// nominatedNodeName); per claim one PUT resourceclaims (the finalizer) and
// one PUT resourceclaims/status (allocation and reservedFor).
func TestControlPlaneDRAWritesPerPod(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	c.draNode("h", "dgx-h100")
	const pods = 3
	for i := range pods {
		name := "w" + strconv.Itoa(i)
		c.claim(name+"-gpus", []resourceapi.DeviceRequest{request("gpus", numaplace.ClassGPU, 2)})
		c.claim(name+"-nic", []resourceapi.DeviceRequest{request("nic", numaplace.ClassNIC, 1)})
	}
	before, err := controlplane.ScrapeMetrics(context.Background(), c.config)
	require.NoError(t, err)
	c.start(nil)
	for i := range pods {
		name := "w" + strconv.Itoa(i)
		c.create(claimPod(name, "SingleNUMANode", 8, name+"-gpus", name+"-nic"))
		p := c.waitBound(name)
		require.Equal(t, gpuDevices(gpuIDs(decision(t, p))), c.allocated(name+"-gpus", p))
	}
	after, err := controlplane.ScrapeMetrics(context.Background(), c.config)
	require.NoError(t, err)
	writes := map[string]float64{}
	for r, n := range after.Sub(before).Requests {
		if r.Write() && (r.Resource == "pods" || r.Resource == "resourceclaims") {
			writes[r.String()] = n
		}
	}
	t.Logf("writes: %v", writes)
	require.Equal(t, map[string]float64{"POST pods": pods, "POST pods/binding": pods,
		"PUT resourceclaims": 2 * pods, "PUT resourceclaims/status": 2 * pods}, writes)
}

// TestControlPlaneDRASeedPodSpec: the seed's pod spec unchanged
// (aliyun.com/gpu: 4, 24 CPUs, the ACK SingleNUMANode annotation) on a
// node whose GPUs are DRA devices (no aliyun.com/gpu in its allocatable;
// deploy/dra.yaml's aliyun-gpu.numaplace.io maps it): numaplace makes the
// pod's extended resource claim as DynamicResources would (owned by the
// pod, annotated, one request for the container), allocated to the GPUs of
// its decision and reserved for the pod, and records it in the pod's
// status.extendedResourceClaimStatus.
func TestControlPlaneDRASeedPodSpec(t *testing.T) {
	c := newControlPlaneCluster(t)
	c.applyDeviceClasses()
	m := c.draNode("h", "dgx-h100")
	c.busyNUMA0("h", m)
	c.kubelet()
	c.start(nil)
	c.create(pod("seed", "SingleNUMANode", 24, 4))
	p := c.waitBound("seed")
	d := decision(t, p)
	require.Len(t, d.GPUs, 4)
	require.Equal(t, []int{1}, gpuNUMANodes(t, "dgx-h100", gpuIDs(d)))
	p = c.waitFor("seed", "its extended resource claim status", func(p *v1.Pod) bool { return p.Status.ExtendedResourceClaimStatus != nil })
	st := p.Status.ExtendedResourceClaimStatus
	require.Equal(t, []v1.ContainerExtendedResourceRequest{{ContainerName: "main", ResourceName: "aliyun.com/gpu", RequestName: "container-0-request-0"}},
		st.RequestMappings)
	rc := c.getClaim(st.ResourceClaimName)
	require.Equal(t, "true", rc.Annotations[resourceapi.ExtendedResourceClaimAnnotation])
	require.Len(t, rc.OwnerReferences, 1)
	require.Equal(t, p.UID, rc.OwnerReferences[0].UID)
	require.Equal(t, gpuDevices(gpuIDs(d)), c.allocated(st.ResourceClaimName, p))
	require.Equal(t, numaplace.ClassAliyunGPU, rc.Spec.Devices.Requests[0].Exactly.DeviceClassName)
}
