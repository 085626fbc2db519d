package main

import (
	"context"
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
)

// wideGPUPod is a device-plugin pod for numaplace-scheduler (ackGPUPod's
// form) under the policy with one aliyun.com/gpu, 1 CPU and 1536Mi of
// memory: more than a NUMA node of the fake trees holds (1 GiB), so its
// span is both nodes.
func wideGPUPod(name, policy string) *corev1.Pod {
	p := ackGPUPod(name)
	p.Annotations["scheduling.alibabacloud.com/numa-topology-spec"] = `{"numaTopologyPolicy":"` + policy + `"}`
	res := p.Spec.Containers[0].Resources.Requests
	res[corev1.ResourceMemory] = resource.MustParse("1536Mi")
	p.Spec.Containers[0].Resources.Limits = res.DeepCopy()
	return p
}

// checkDevicePluginPod checks a running device-plugin pod placed by
// numaplace-scheduler on the tree: its container's cpuset is its
// decision's, NVIDIA_VISIBLE_DEVICES its decision's GPUs' UUIDs and its GPU
// device nodes theirs (by minor); it returns the decision and the view.
func (d *draCluster) checkDevicePluginPod(t *testing.T, pod *corev1.Pod) (decidedView, containerView) {
	t.Helper()
	return devicePluginView(t, d.e, d.tree, pod)
}

// devicePluginView is checkDevicePluginPod for any cluster on the tree.
func devicePluginView(t *testing.T, e *kubeletEnv, tree *fakeTree, pod *corev1.Pod) (decidedView, containerView) {
	t.Helper()
	dec := podDecision(t, pod)
	dv := decidedView{CPUSet: dec.CPUSet, Nodes: dec.NUMANodes, Memory: dec.MemoryMiB}
	var nodes []string
	for _, g := range dec.GPUs {
		require.Equal(t, tree.gpus[g.ID].uuid, g.UUID, "pod %s's decision names GPU %d by another UUID", pod.Name, g.ID)
		dv.GPUs = append(dv.GPUs, g.ID)
		dv.Visible = append(dv.Visible, g.UUID)
		nodes = append(nodes, "nvidia"+strconv.Itoa(tree.gpus[g.ID].minor))
	}
	slices.Sort(dv.Visible)
	slices.Sort(nodes)
	ctr := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	v := seenIn(t, e, ctr)
	t.Logf("pod %s: decision %s; container: CPUs %s, mems %s, NVIDIA_VISIBLE_DEVICES %v, %v",
		pod.Name, pod.Annotations["numaplace.io/allocation"], v.CPUs, v.Mems, v.Visible, v.GPUNodes)
	require.Equal(t, dv.Visible, v.Visible, "pod %s's NVIDIA_VISIBLE_DEVICES (sorted)", pod.Name)
	require.Equal(t, nodes, v.GPUNodes, "pod %s's GPU device nodes", pod.Name)
	if dec.CPUSet != "" {
		require.Equal(t, dec.CPUSet, v.CPUs, "pod %s's cpuset", pod.Name)
	}
	return dv, v
}

// TestNUMAPlaceDRABesideDevicePlugin: the singleNUMANodeExclusive rule
// between DRA pods and device-plugin pods on one node. splitTree's node 1
// GPUs (4-7) are the DRA role's (--dra-gpus), node 0's (0-3) the device
// plugin's; numaplace-scheduler places both kinds of pod.
//
//   - dra-then-device-plugin: a SingleNUMANode DRA pod (a claim for 1
//     GPU, on node 1) makes node 1 single; a Restricted device-plugin pod
//     whose memory needs both nodes is then unschedulable, the rule named,
//     and is placed on both nodes once the DRA pod is gone;
//   - device-plugin-then-dra: with that pod running (both nodes shared), a
//     SingleNUMANode DRA pod is unschedulable, the rule named, and runs on
//     node 1 once the device-plugin pod is gone.
//
// With the default kube-scheduler for the DRA pods the first scenario
// fails on the DRA pod's missing decision and the second on the DRA pod
// being placed (the default scheduler knows no such rule).
func TestNUMAPlaceDRABesideDevicePlugin(t *testing.T) {
	d := startDRACluster(t, draClusterOptions{agent: true, tree: splitTree(), numaplace: true, draGPUs: []int{4, 5, 6, 7}})
	client := d.client
	ctx := context.Background()
	devs := d.treeDevices(t)
	gpuTemplate(t, d, "one-gpu", 1)

	d.scenario(t, "dra-then-device-plugin", func(t *testing.T) {
		single, claims := d.runNUMAPod(t, numaDRAPod("single", "SingleNUMANode", 0, fromTemplate("gpus", "one-gpu")), "gpus")
		gpus, _ := claimedGPUs(t, devs, claims...)
		require.Len(t, gpus, 1)
		require.GreaterOrEqual(t, gpus[0], 4, "single's GPU is the DRA role's")
		dec, _ := d.checkDecided(t, single, devs, gpus, nil, claims...)
		require.Equal(t, []int{1}, dec.NUMANodes)

		_, err := client.CoreV1().Pods("default").Create(ctx, wideGPUPod("wide", "Restricted"), metav1.CreateOptions{})
		require.NoError(t, err)
		msg := waitUnschedulable(t, client, "wide", "singleNUMANodeExclusive")
		t.Logf("wide (Restricted, both nodes) beside single (SingleNUMANode on node 1): %s", msg)
		d.deleteNUMAPod(t, "single", claims...)
		wide := waitRunning(t, client, "wide")
		dv, _ := d.checkDevicePluginPod(t, wide)
		require.Equal(t, []int{0, 1}, dv.Nodes, "wide's span")
		require.Len(t, dv.GPUs, 1)
		require.Less(t, dv.GPUs[0], 4, "wide's GPU is the device plugin's")
	})

	d.scenario(t, "device-plugin-then-dra", func(t *testing.T) {
		_, err := client.CoreV1().Pods("default").Create(ctx,
			numaDRAPod("single2", "SingleNUMANode", 0, fromTemplate("gpus", "one-gpu")), metav1.CreateOptions{})
		require.NoError(t, err)
		msg := waitUnschedulable(t, client, "single2", "singleNUMANodeExclusive")
		t.Logf("single2 (SingleNUMANode, a claim) beside wide (both nodes): %s", msg)
		p, err := client.CoreV1().Pods("default").Get(ctx, "single2", metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, p.Spec.NodeName)
		deletePod(t, client, "wide", 5)
		claims := d.podClaims(t, "single2", "gpus")
		single2 := waitRunning(t, client, "single2")
		gpus, _ := claimedGPUs(t, devs, claims...)
		require.Len(t, gpus, 1)
		dec, _ := d.checkDecided(t, single2, devs, gpus, nil, claims...)
		require.Equal(t, []int{1}, dec.NUMANodes)
		d.requireNoDoubleAllocation(t)
		d.deleteNUMAPod(t, "single2", claims...)
	})
}

// seedPod is the seed's pod (docs/deploy.md step 5) sized for the fake
// trees: the ACK annotations (SingleNUMANode), numaplace-scheduler (or
// draSchedulerName when dra), aliyun.com/gpu: 4 and 1 CPU (the seed's 24,
// sized to the host's two CPUs), requests equal to limits.
func seedPod(name string, dra bool) *corev1.Pod {
	p := ackGPUPod(name)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi"),
		"aliyun.com/gpu": resource.MustParse("4")}
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()}
	if dra {
		p.Spec.SchedulerName = draSchedulerName()
	}
	return p
}

// TestNUMAPlaceDRASeedSpec runs the seed's pod spec unchanged
// (aliyun.com/gpu: 4, the ACK annotations, numaplace-scheduler) on a
// device-plugin node and then on a DRA node (the device plugin off: the
// scheduler makes the pod a claim through aliyun-gpu.numaplace.io's
// extendedResourceName), both on splitTree: on each, numaplace's decision
// is GPUs 4-7 (node 1, two switches; first fit would give 0-3 under four)
// and node 1's CPU; the two decisions are the same, and so are the two
// containers' views (NVIDIA_VISIBLE_DEVICES, GPU device nodes, cpuset,
// memory nodes); on the DRA node the claim holds exactly those GPUs and
// the kubelet's pod-resources API names them.
//
// With the default kube-scheduler for the DRA node's pod, the dra part
// fails on the claim's GPUs (0-3).
func TestNUMAPlaceDRASeedSpec(t *testing.T) {
	var dpDecided decidedView
	var dpView containerView
	ok := t.Run("device-plugin", func(t *testing.T) {
		tree := splitTree()
		c := startKubeletClusterWith(t, kubeletClusterOptions{tree: tree})
		_, err := c.client.CoreV1().Pods("default").Create(context.Background(), seedPod("seed", false), metav1.CreateOptions{})
		require.NoError(t, err)
		pod := waitRunning(t, c.client, "seed")
		dpDecided, dpView = devicePluginView(t, c.e, tree, pod)
		require.Equal(t, []int{4, 5, 6, 7}, dpDecided.GPUs, "seed's GPUs on the device-plugin node")
		require.Equal(t, "1", dpDecided.CPUSet)
		// The kubelet's own record: the device plugin's allocation is the
		// decision's GPUs (its preference), by UUID.
		listed := podResources(t, c.e)["seed"]["main"]
		slices.Sort(listed)
		require.Equal(t, dpDecided.Visible, listed, "seed's aliyun.com/gpu devices in the kubelet's pod-resources List")
		deletePod(t, c.client, "seed", 5)
	})
	require.True(t, ok, "the device-plugin node's run failed")

	t.Run("dra", func(t *testing.T) {
		d := startDRACluster(t, draClusterOptions{agent: true, tree: splitTree(), numaplace: true})
		devs := d.treeDevices(t)
		pod, claim := d.runSeedPod(t, seedPod("seed", true))
		gpus, _ := claimedGPUs(t, devs, claim)
		require.Equal(t, []int{4, 5, 6, 7}, gpus, "claim %s (aliyun.com/gpu through %s; first fit: 0-3)", claim.Name, draAliyunGPUClass)
		dec, view := d.checkDecided(t, pod, devs, gpus, nil, claim)
		got := decidedView{CPUSet: dec.CPUSet, Nodes: dec.NUMANodes, Memory: dec.MemoryMiB}
		for _, g := range dec.GPUs {
			got.GPUs = append(got.GPUs, g.ID)
			got.Visible = append(got.Visible, g.UUID)
		}
		slices.Sort(got.Visible)
		require.Equal(t, dpDecided, got, "the decision on the DRA node and on the device-plugin node")
		require.Equal(t, dpView.Visible, view.Visible, "NVIDIA_VISIBLE_DEVICES on the two nodes")
		require.Equal(t, dpView.GPUNodes, view.GPUNodes, "GPU device nodes on the two nodes")
		require.Equal(t, dpView.CPUs, view.CPUs, "cpuset on the two nodes")
		require.Equal(t, dpView.Mems, view.Mems, "memory nodes on the two nodes")
		d.deleteNUMAPod(t, "seed", claim)
	})
}

// runSeedPod creates the pod, waits until the scheduler has made and
// allocated the claim for its aliyun.com/gpu (named in its
// status.extendedResourceClaimStatus, mapped to its container main) and it
// runs, and returns it and the claim.
func (d *draCluster) runSeedPod(t *testing.T, pod *corev1.Pod) (*corev1.Pod, *resourcev1.ResourceClaim) {
	t.Helper()
	ctx := context.Background()
	_, err := d.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	var claim *resourcev1.ResourceClaim
	require.Eventually(t, func() bool {
		p, err := d.client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || p.Status.ExtendedResourceClaimStatus == nil {
			return false
		}
		claim, err = d.client.ResourceV1().ResourceClaims("default").Get(ctx, p.Status.ExtendedResourceClaimStatus.ResourceClaimName, metav1.GetOptions{})
		return err == nil && claim.Status.Allocation != nil
	}, 60*time.Second, 100*time.Millisecond, "pod %s has no allocated claim for its aliyun.com/gpu: %s", pod.Name, describe(d.client, pod.Name))
	t.Logf("pod %s: claim %s (extended resource) allocated %v", pod.Name, claim.Name, allDevices(claim))
	p := waitRunning(t, d.client, pod.Name)
	require.Equal(t, kubeletNode, p.Spec.NodeName)
	st := p.Status.ExtendedResourceClaimStatus
	require.Len(t, st.RequestMappings, 1)
	require.Equal(t, []string{"main", "aliyun.com/gpu"}, []string{st.RequestMappings[0].ContainerName, st.RequestMappings[0].ResourceName})
	return p, claim
}
