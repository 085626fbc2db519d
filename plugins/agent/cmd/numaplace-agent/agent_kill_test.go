package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numaplace/numaplace/adapters/kube"
)

// cpuPod is a SingleNUMANode pod with one CPU and no GPU.
func cpuPod(name string) *corev1.Pod {
	pod := ackGPUPod(name)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: res, Limits: res}
	return pod
}

// gatedGPUPod is oneGPUPlainPod with an init container that waits until
// the file open exists in the host directory gate: the kubelet allocates
// the main container's GPU at admission, before the init container runs,
// and creates the main container only once the gate is open.
func gatedGPUPod(name, gate string) *corev1.Pod {
	pod := oneGPUPlainPod(name)
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	pod.Spec.Volumes = []corev1.Volume{{Name: "gate", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: gate}}}}
	pod.Spec.InitContainers = []corev1.Container{{Name: "gate", Image: e2eImage, ImagePullPolicy: corev1.PullNever,
		Command:      []string{"/bin/sh", "-c", "while [ ! -e /gate/open ]; do sleep 0.1; done"},
		VolumeMounts: []corev1.VolumeMount{{Name: "gate", MountPath: "/gate"}},
		Resources:    corev1.ResourceRequirements{Requests: res, Limits: res}}}
	return pod
}

// containerGPUs returns what the container sees of the GPUs, from inside
// it: its NVIDIA_VISIBLE_DEVICES and its GPU device nodes (/dev/nvidiaN,
// not the control nodes), sorted.
func containerGPUs(t *testing.T, e *kubeletEnv, ctr string) (visible string, nodes []string) {
	t.Helper()
	for _, n := range strings.Fields(e.exec(t, ctr, "ls", "/dev")) {
		if rest, ok := strings.CutPrefix(n, "nvidia"); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				nodes = append(nodes, n)
			}
		}
	}
	slices.Sort(nodes)
	return e.envOf(t, ctr)["NVIDIA_VISIBLE_DEVICES"], nodes
}

// decidedGPUs returns what a container holding all of the decision's GPUs
// sees: their UUIDs in the decision's order, and their device nodes,
// sorted.
func decidedGPUs(t *testing.T, d kube.Decision) (visible string, nodes []string) {
	t.Helper()
	var uuids []string
	for _, g := range d.GPUs {
		uuids = append(uuids, g.UUID)
		nodes = append(nodes, "nvidia"+strconv.Itoa(fakeGPUByID(t, g.ID).minor))
	}
	slices.Sort(nodes)
	return strings.Join(uuids, ","), nodes
}

// specDevices returns the paths of the devices of the container's OCI
// spec (crictl inspect), in their order.
func specDevices(t *testing.T, e *kubeletEnv, ctr string) []string {
	t.Helper()
	out, err := e.crictl("inspect", ctr)
	require.NoError(t, err, out)
	var info struct {
		Info struct {
			RuntimeSpec struct {
				Linux struct {
					Devices []struct {
						Path string `json:"path"`
					} `json:"devices"`
				} `json:"linux"`
			} `json:"runtimeSpec"`
		} `json:"info"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &info))
	var paths []string
	for _, d := range info.Info.RuntimeSpec.Linux.Devices {
		paths = append(paths, d.Path)
	}
	return paths
}

// TestAgentKilledDuringBurst kills the agent (a process of its own) with
// SIGKILL while GPU pods start in a burst, just after the first is bound;
// a CPU-only NUMA pod is created while it is away, and the agent comes back
// a minute later. A GPU pod whose GPU the kubelet allocated before the kill
// (its decided one, which the device plugin preferred) has its container
// created while the agent is away (an init container holds it back until
// then): containerd creates it without NRI, and it runs with exactly its
// decision's GPU, the environment and the device node Allocate gave it,
// checked from inside the container before the agent returns. Then the
// node keeps its invariants: the CPU-only pod has its decision's cpuset
// (Synchronize corrects it), and no GPU pod runs without its decision's
// GPUs unless the kubelet's GPUs differ from its decision, when the agent
// says so with an event (the kubelet cannot allocate aliyun.com/gpu while
// the agent's device plugin is gone: such a pod waits or fails admission).
// Last, a GPU pod started with the agent back has each of its decided
// GPU's device nodes once in its spec (Allocate's and the NRI role's).
func TestAgentKilledDuringBurst(t *testing.T) {
	c := startKubeletCluster(t)
	e, client := c.e, c.client
	ctx := context.Background()
	c.agent.stop(t)
	agent := c.startAgentProcess(t)
	offers := func(n int64) func() bool {
		return func() bool {
			node, err := client.CoreV1().Nodes().Get(ctx, kubeletNode, metav1.GetOptions{})
			g := node.Status.Allocatable["aliyun.com/gpu"]
			return err == nil && g.Value() == n
		}
	}
	require.Eventually(t, offers(4), 60*time.Second, 100*time.Millisecond, "the agent process's device plugin")
	c.stage("the agent runs as a process of its own")

	// A GPU pod admitted (its GPU allocated) whose container waits.
	gate := filepath.Join(e.dir, "gate")
	require.NoError(t, os.Mkdir(gate, 0o755))
	_, err := client.CoreV1().Pods("default").Create(ctx, gatedGPUPod("gated", gate), metav1.CreateOptions{})
	require.NoError(t, err)
	var gated *corev1.Pod
	require.Eventually(t, func() bool {
		gated, err = client.CoreV1().Pods("default").Get(ctx, "gated", metav1.GetOptions{})
		return err == nil && len(gated.Status.InitContainerStatuses) == 1 && gated.Status.InitContainerStatuses[0].State.Running != nil
	}, 60*time.Second, 50*time.Millisecond, "gated's init container does not run: %s", describe(client, "gated"))
	gatedDecision := decisionOf(t, gated)
	wantVisible, wantNodes := decidedGPUs(t, gatedDecision)
	require.Len(t, gatedDecision.GPUs, 1, "gated's decision")
	require.Equal(t, []string{gatedDecision.GPUs[0].UUID}, podResources(t, e)["gated"]["main"],
		"the kubelet's allocation of gated's main container (the pod-resources API)")
	c.stage("gated admitted, its GPU allocated, its container held back")

	// A burst of GPU pods; the agent is killed once the first is bound.
	burst := []string{"burst-0", "burst-1", "burst-2"}
	for _, name := range burst {
		_, err := client.CoreV1().Pods("default").Create(ctx, oneGPUPlainPod(name), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, burst[0], metav1.GetOptions{})
		return err == nil && p.Spec.NodeName != ""
	}, 60*time.Second, 5*time.Millisecond, "burst-0 is not bound")
	agent.kill9()
	killed := time.Now()
	c.stage("agent killed with SIGKILL after burst-0's binding")

	// gated's container is created now, without NRI: it has exactly its
	// decision's GPU all the same.
	require.NoError(t, os.WriteFile(filepath.Join(gate, "open"), nil, 0o644))
	gated = waitRunning(t, client, "gated")
	gatedCtr := containerIDs(t, gated)["main"]
	require.NotEmpty(t, gatedCtr)
	visible, nodes := containerGPUs(t, e, gatedCtr)
	t.Logf("gated started without the agent: decision %s, NVIDIA_VISIBLE_DEVICES=%s, GPU device nodes %v, Cpus_allowed_list %s",
		gated.Annotations[kube.AnnotationAllocation], visible, nodes, e.status(t, gatedCtr, "Cpus_allowed_list"))
	require.Equal(t, wantVisible, visible, "gated's NVIDIA_VISIBLE_DEVICES, created without the agent")
	require.Equal(t, wantNodes, nodes, "gated's GPU device nodes, created without the agent")
	c.stage("gated's container created without the agent, with its decision's GPU")

	// While it is away, a CPU-only NUMA pod starts (the kubelet needs no
	// device plugin for it, containerd no NRI plugin).
	_, err = client.CoreV1().Pods("default").Create(ctx, cpuPod("cpu-0"), metav1.CreateOptions{})
	require.NoError(t, err)
	pod := waitRunning(t, client, "cpu-0")
	ctr := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	t.Logf("cpu-0 started without the agent: decision %s, Cpus_allowed_list %s", pod.Annotations[kube.AnnotationAllocation],
		e.status(t, ctr, "Cpus_allowed_list"))
	for _, name := range burst {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		t.Logf("%s without the agent: phase %s %s, node %q", name, p.Status.Phase, p.Status.Reason, p.Spec.NodeName)
	}
	c.stage("cpu-0 running without the agent")
	if d := time.Minute - time.Since(killed); d > 0 {
		time.Sleep(d)
	}

	// The agent comes back a minute later.
	c.startAgentProcess(t)
	require.Eventually(t, offers(4), 60*time.Second, 100*time.Millisecond, "the restarted agent's device plugin")
	c.stage("agent back")
	d, err := kube.ParseDecision(pod.Annotations[kube.AnnotationAllocation])
	require.NoError(t, err)
	e.waitCPUs(t, ctr, d.CPUSet, "cpu-0 after the agent's return")
	// A running burst pod has exactly its decision's GPU, unless the
	// kubelet allocated it another (then the agent says so with an
	// event, and the pod is restarted, deleted here, as the event asks).
	kubeletGPUs := podResources(t, e)
	for _, name := range burst {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		t.Logf("%s after the agent's return: phase %s %s", name, p.Status.Phase, p.Status.Reason)
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		id := containerIDs(t, p)["main"]
		if id == "" {
			continue
		}
		dec := decisionOf(t, p)
		wantVisible, wantNodes := decidedGPUs(t, dec)
		visible, nodes := containerGPUs(t, e, id)
		if visible == wantVisible && slices.Equal(nodes, wantNodes) {
			continue
		}
		require.NotEqual(t, []string{wantVisible}, kubeletGPUs[name]["main"],
			"%s: the kubelet allocated its decision's GPU, yet it runs with NVIDIA_VISIBLE_DEVICES=%s and GPU device nodes %v", name, visible, nodes)
		msg := waitEvent(t, client, name, "NUMAPlacementGPUsNotApplied", "restart the pod")
		t.Logf("%s started without the agent, the kubelet's GPU %v, not its decision's: %s", name, kubeletGPUs[name]["main"], msg)
		deletePod(t, client, name, 5)
	}
	c.checkNodeInvariants(t)
	// gated kept its GPU, and the agent found nothing to say about it.
	visible, nodes = containerGPUs(t, e, gatedCtr)
	require.Equal(t, wantVisible, visible, "gated after the agent's return")
	require.Equal(t, wantNodes, nodes, "gated after the agent's return")
	evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=gated,reason=NUMAPlacementGPUsNotApplied"})
	require.NoError(t, err)
	require.Empty(t, evs.Items, "gated runs with its decision's GPU")
	c.stage("after the agent's return, the node's invariants hold")

	// A GPU pod started with the agent: Allocate gave its decided GPU's
	// device nodes and the NRI role added them again, which containerd
	// takes as a replacement: each device once in the container's spec.
	_, err = client.CoreV1().Pods("default").Create(ctx, oneGPUPlainPod("after"), metav1.CreateOptions{})
	require.NoError(t, err)
	after := waitRunning(t, client, "after")
	afterCtr := containerIDs(t, after)["main"]
	wantVisible, wantNodes = decidedGPUs(t, decisionOf(t, after))
	visible, nodes = containerGPUs(t, e, afterCtr)
	require.Equal(t, wantVisible, visible, "after's NVIDIA_VISIBLE_DEVICES")
	require.Equal(t, wantNodes, nodes, "after's GPU device nodes")
	require.Equal(t, []string{wantVisible}, podResources(t, e)["after"]["main"], "after's GPU in the pod-resources API")
	// The kubelet's copy of Allocate's answer (protobuf, whose strings are
	// in it as they are) names the device nodes.
	var allocResp string
	raw, err := os.ReadFile(filepath.Join(c.pluginDir, "kubelet_internal_checkpoint"))
	require.NoError(t, err, "the kubelet's device-manager checkpoint")
	var cp struct {
		Data struct {
			PodDeviceEntries []struct {
				PodUID, ContainerName string
				AllocResp             []byte
			}
		}
	}
	require.NoError(t, json.Unmarshal(raw, &cp), "the kubelet's device-manager checkpoint: %s", raw)
	for _, en := range cp.Data.PodDeviceEntries {
		if en.PodUID == string(after.UID) && en.ContainerName == "main" {
			allocResp = string(en.AllocResp)
		}
	}
	require.Contains(t, allocResp, "/dev/"+wantNodes[0], "Allocate's answer for after's main container")
	require.Contains(t, allocResp, "/dev/nvidiactl", "Allocate's answer for after's main container")
	paths := specDevices(t, e, afterCtr)
	t.Logf("after's devices in its OCI spec: %v", paths)
	require.Contains(t, paths, "/dev/"+wantNodes[0])
	require.Contains(t, paths, "/dev/nvidiactl")
	for _, path := range paths {
		require.Equal(t, 1, strings.Count(" "+strings.Join(paths, " ")+" ", " "+path+" "), "device %s in after's OCI spec: %v", path, paths)
	}
	c.checkNodeInvariants(t)
	c.stage("a GPU pod started with the agent: each device node once")
	for _, name := range append(burst, "cpu-0", "gated", "after") {
		if _, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err == nil {
			deletePod(t, client, name, 5)
		}
	}
	c.checkNodeInvariants(t)
	require.Empty(t, c.checkpointPods(t))
}
