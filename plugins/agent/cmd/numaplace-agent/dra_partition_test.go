package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDRABesideTheDevicePlugin runs the agent's DRA role for GPUs 2 and 3
// (--dra-gpus) beside its device plugin, which serves GPUs 0 and 1: the
// slices list GPUs 2 and 3 and both NICs, the kubelet advertises 2
// aliyun.com/gpu; a device-plugin pod and a pod with a claim for every
// DRA GPU (allocationMode All) run side by side, their GPUs disjoint, seen
// from inside their containers; a device-plugin pod whose numaplace
// decision names a GPU the claim holds is refused by the node, the claim
// named; a claim given a device-plugin GPU by hand is refused, saying so.
func TestDRABesideTheDevicePlugin(t *testing.T) {
	d := startDRACluster(t, draClusterOptions{agent: true, draGPUs: []int{2, 3}})
	client, e := d.client, d.e
	ctx := context.Background()
	devs := d.draDevices(t)
	var names []string
	for name := range devs {
		names = append(names, name)
	}
	slices.Sort(names)
	require.Equal(t, []string{deviceNamed(t, devs, fakeGPUs[2].bus), deviceNamed(t, devs, fakeGPUs[3].bus),
		deviceNamed(t, devs, fakeNICs[0].bus), deviceNamed(t, devs, fakeNICs[1].bus)}, names, "the DRA role's devices")
	require.Eventually(t, func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, kubeletNode, metav1.GetOptions{})
		g := n.Status.Allocatable["aliyun.com/gpu"]
		return err == nil && g.Value() == 2
	}, 60*time.Second, 100*time.Millisecond, "the kubelet does not advertise the device plugin's 2 aliyun.com/gpu")
	d.stage("slices: GPUs 2 and 3 and the NICs; the kubelet: 2 aliyun.com/gpu")

	// A device-plugin pod (no NUMA spec, bound by hand) and a pod with
	// every DRA GPU.
	plain := plainGPUPod("plain", []int{1})
	plain.Spec.SchedulerName = ""
	plain.Spec.NodeName = kubeletNode
	_, err := client.CoreV1().Pods("default").Create(ctx, plain, metav1.CreateOptions{})
	require.NoError(t, err)
	all := exactly("gpus", draGPUClass, 0)
	all.Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
	createTemplate(t, client, "all-gpus", resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{all}})
	pod, claim := d.runDRAPod(t, draPod("dra", fromTemplate("devices", "all-gpus")), "devices")
	d.checkDRAContainer(t, pod, devs, allDevices(claim))
	plainPod := waitRunning(t, client, "plain")
	ctr := strings.TrimPrefix(plainPod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	visible := e.envOf(t, ctr)["NVIDIA_VISIBLE_DEVICES"]
	require.Contains(t, []string{fakeGPUs[0].uuid, fakeGPUs[1].uuid}, visible, "the device-plugin pod's GPU is one of the device plugin's")
	t.Logf("dra: %v; plain: NVIDIA_VISIBLE_DEVICES=%s", allDevices(claim), visible)
	d.stage("a device-plugin pod and a DRA pod side by side, their GPUs disjoint")

	// A device-plugin pod with a decision naming GPU 2, the claim's.
	decided := ackGPUPod("decided")
	decided.Spec.SchedulerName = ""
	decided.Spec.NodeName = kubeletNode
	decided.Annotations["numaplace.io/allocation"] = fmt.Sprintf(`{"policy":"SingleNUMANode","exclusive":"Required",`+
		`"cpuset":"1","numaNodes":[1],"gpus":[{"id":2,"uuid":%q}],"memoryMiB":{"1":64}}`, fakeGPUs[2].uuid)
	_, err = client.CoreV1().Pods("default").Create(ctx, decided, metav1.CreateOptions{})
	require.NoError(t, err)
	msg := waitEvent(t, client, "decided", "FailedCreatePodSandBox", "ResourceClaim default/"+claim.Name)
	t.Logf("decided (aliyun.com/gpu, a decision naming GPU 2): %s", msg)
	p, err := client.CoreV1().Pods("default").Get(ctx, "decided", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.PodPending, p.Status.Phase)
	d.stage("a device-plugin pod whose decision names the claim's GPU refused, the claim named")

	// A claim given the device plugin's GPU 0 by hand (no slice lists it):
	// the DRA role refuses to prepare it, saying whose it is.
	d.handAllocated(t, "dp-gpu", claim.Status.Allocation.Devices.Results[0].Pool, "gpu-0")
	msg = waitEvent(t, client, "dp-gpu", "FailedPrepareDynamicResources", "GPU 0 is the device plugin's")
	t.Logf("dp-gpu (a claim given gpu-0 by hand): %s", msg)
	deletePod(t, client, "dp-gpu", 0)
	d.stage("a claim given the device plugin's GPU refused, saying so")
	deletePod(t, client, "decided", 0)
	deletePod(t, client, "plain", 2)
	deleteDRAPod(t, client, "dra", claim)
}
