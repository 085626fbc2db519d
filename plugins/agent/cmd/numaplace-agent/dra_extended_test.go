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
)

// The seed's pod spec served by DRA devices: a container's
// aliyun.com/gpu request, on a node whose kubelet advertises no
// aliyun.com/gpu (the device plugin off), is mapped by deploy/dra.yaml's
// aliyun-gpu.numaplace.io (extendedResourceName) to a claim the default
// kube-scheduler makes and allocates itself (KEP-5004), which the agent's
// DRA role prepares.

// extendedGPUPod is a pod for the default kube-scheduler (no
// schedulerName) whose container main asks for gpus aliyun.com/gpu, cpu
// and 64Mi of memory (requests equal to limits), with no claim of its own.
func extendedGPUPod(name, cpu string, gpus int) *corev1.Pod {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi"),
		"aliyun.com/gpu": *resource.NewQuantity(int64(gpus), resource.DecimalSI)}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: new(int64(5)),
			Containers: []corev1.Container{{Name: "main", Image: e2eImage, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"/bin/sh", "-c", draPodScript},
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res}}},
		},
	}
}

// runExtendedPod creates the pod and waits until it runs; it returns the
// pod and the claim the scheduler made for its extended resource (named
// in its status.extendedResourceClaimStatus), allocated.
func (d *draCluster) runExtendedPod(t *testing.T, pod *corev1.Pod) (*corev1.Pod, *resourcev1.ResourceClaim) {
	t.Helper()
	ctx := context.Background()
	_, err := d.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	p := waitRunning(t, d.client, pod.Name)
	require.Equal(t, kubeletNode, p.Spec.NodeName)
	require.NotNil(t, p.Status.ExtendedResourceClaimStatus, "pod %s has no extended resource claim: %+v", pod.Name, p.Status)
	st := p.Status.ExtendedResourceClaimStatus
	require.Len(t, st.RequestMappings, 1)
	require.Equal(t, []string{"main", "aliyun.com/gpu"}, []string{st.RequestMappings[0].ContainerName, st.RequestMappings[0].ResourceName})
	claim, err := d.client.ResourceV1().ResourceClaims("default").Get(ctx, st.ResourceClaimName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, claim.Status.Allocation, "claim %s is not allocated", claim.Name)
	return p, claim
}

// TestDRAExtendedResourceOnTheKubelet: on one DRA cluster (the agent's
// DRA role, the device plugin off), (a) a plain pod asking for 2
// aliyun.com/gpu is served by the claim the default kube-scheduler makes
// through aliyun-gpu.numaplace.io: it runs, its container sees exactly
// the claim's 2 GPUs, the kubelet's pod-resources names them; (b) the same
// with the ACK NUMA annotations (SingleNUMANode, 1 CPU) and no decision:
// it runs, its cpuset is the claimed GPUs' NUMA node's CPU and it sees
// only the claim's GPUs; (c) deleting them frees the GPUs (the claims
// unprepared and deleted, the agent's checkpoint without them, a pod
// asking for all 4 GPUs then runs).
func TestDRAExtendedResourceOnTheKubelet(t *testing.T) {
	d := startDRACluster(t, draClusterOptions{agent: true})
	client, e := d.client, d.e
	devs := d.draDevices(t)
	scenario := func(name string, f func(t *testing.T)) {
		start := time.Now()
		ok := t.Run(name, f)
		d.stage(fmt.Sprintf("scenario %s: passed=%t in %.1fs", name, ok, time.Since(start).Seconds()))
		if !ok {
			t.FailNow()
		}
	}
	gpusOf := func(t *testing.T, claim *resourcev1.ResourceClaim) []string {
		t.Helper()
		var out []string
		for _, r := range claim.Status.Allocation.Devices.Results {
			require.Equal(t, draDriver, r.Driver, "claim %s's device %s", claim.Name, r.Device)
			require.NotNil(t, devs[r.Device].gpu, "claim %s's device %s is not a GPU", claim.Name, r.Device)
			out = append(out, r.Device)
		}
		slices.Sort(out)
		return out
	}
	var claims []*resourcev1.ResourceClaim

	scenario("plain", func(t *testing.T) {
		pod, claim := d.runExtendedPod(t, extendedGPUPod("plain-gpus", "100m", 2))
		claims = append(claims, claim)
		got := gpusOf(t, claim)
		require.Len(t, got, 2, "claim %s", claim.Name)
		d.checkDRAContainer(t, pod, devs, got)
		require.Equal(t, claimResources(claim), podDynamicResources(t, e, pod.Name), "the kubelet's pod-resources List for %s", pod.Name)
		t.Logf("plain-gpus: claim %s (class %s): %v; pod-resources: %v", claim.Name,
			claim.Spec.Devices.Requests[0].Exactly.DeviceClassName, got, podDynamicResources(t, e, pod.Name))
		require.Equal(t, draAliyunGPUClass, claim.Spec.Devices.Requests[0].Exactly.DeviceClassName)
	})

	scenario("ack-numa", func(t *testing.T) {
		pod := extendedGPUPod("ack-gpus", "1", 2)
		pod.Annotations["cpuset-scheduler"] = "required"
		pod.Annotations["scheduling.alibabacloud.com/numa-topology-spec"] = `{"numaTopologyPolicy":"SingleNUMANode"}`
		pod, claim := d.runExtendedPod(t, pod)
		claims = append(claims, claim)
		got := gpusOf(t, claim)
		require.Len(t, got, 2, "claim %s", claim.Name)
		node := devs[got[0]].gpu.node
		require.Equal(t, node, devs[got[1]].gpu.node, "the claim's GPUs %v are on two NUMA nodes", got)
		ctr := d.checkDRAContainer(t, pod, devs, got)
		cpus := e.status(t, ctr, "Cpus_allowed_list")
		t.Logf("ack-gpus: claim %s: %v on NUMA node %d; in its container: Cpus_allowed_list %s, Mems_allowed_list %s",
			claim.Name, got, node, cpus, e.status(t, ctr, "Mems_allowed_list"))
		// The fake tree's NUMA node N has CPU N.
		require.Equal(t, strconv.Itoa(node), cpus, "ack-gpus's cpuset is its claimed GPUs' NUMA node's CPU")
		require.Equal(t, claimResources(claim), podDynamicResources(t, e, pod.Name))
		// The plain pod runs on the shared pool, now without ack-gpus's CPU.
		plain, err := client.CoreV1().Pods("default").Get(context.Background(), "plain-gpus", metav1.GetOptions{})
		require.NoError(t, err)
		plainCtr := strings.TrimPrefix(plain.Status.ContainerStatuses[0].ContainerID, "containerd://")
		e.waitCPUs(t, plainCtr, strconv.Itoa(1-node), "plain-gpus on the shared pool without ack-gpus's CPU")
	})

	scenario("deleted-frees", func(t *testing.T) {
		deleteDRAPod(t, client, "ack-gpus", claims[1])
		deleteDRAPod(t, client, "plain-gpus", claims[0])
		cp := filepath.Join(e.dir, "checkpoint.json")
		require.Eventually(t, func() bool {
			data, err := os.ReadFile(cp)
			if err != nil {
				return false
			}
			for _, c := range claims {
				if strings.Contains(string(data), string(c.UID)) || len(cdiSpecsOf(t, e, c)) > 0 {
					return false
				}
			}
			return true
		}, 60*time.Second, 100*time.Millisecond, "the deleted pods' claims are still held (checkpoint %s) or have CDI specs", cp)
		pod, claim := d.runExtendedPod(t, extendedGPUPod("all-gpus", "100m", 4))
		got := gpusOf(t, claim)
		require.Len(t, got, 4)
		d.checkDRAContainer(t, pod, devs, got)
		t.Logf("all-gpus: claim %s: %v", claim.Name, got)
		deleteDRAPod(t, client, "all-gpus", claim)
	})
}
