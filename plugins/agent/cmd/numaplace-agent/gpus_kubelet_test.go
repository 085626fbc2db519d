package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/numaplace/numaplace/adapters/kube"
)

// eightFakeGPUs are fakeGPUs and four more, two on each NUMA node, with
// device minors 4-7 in another order than their IDs.
func eightFakeGPUs() []fakeGPU {
	more := []fakeGPU{
		{"0000:1c:00.0", 0, 6, "GPU-5a1c0e3e-0b1d-4f0e-9a62-1c0000000000"},
		{"0000:3e:00.0", 0, 7, "GPU-5a1c0e3e-0b1d-4f0e-9a62-3e0000000000"},
		{"0000:9b:00.0", 1, 4, "GPU-5a1c0e3e-0b1d-4f0e-9a62-9b0000000000"},
		{"0000:bd:00.0", 1, 5, "GPU-5a1c0e3e-0b1d-4f0e-9a62-bd0000000000"},
	}
	all := slices.Concat(fakeGPUs, more)
	// Discovery numbers GPUs in bus order.
	slices.SortFunc(all, func(a, b fakeGPU) int { return strings.Compare(a.bus, b.bus) })
	return all
}

// podResources lists the kubelet's pod-resources API (the socket under
// its directory, /var/lib/kubelet/pod-resources/kubelet.sock in the
// node's mount namespace) and returns, by pod name in namespace default,
// the aliyun.com/gpu device IDs of each container it lists.
func podResources(t *testing.T, e *kubeletEnv) map[string]map[string][]string {
	t.Helper()
	resp := listPodResources(t, e)
	out := map[string]map[string][]string{}
	for _, p := range resp {
		if p.GetNamespace() != "default" {
			continue
		}
		out[p.GetName()] = map[string][]string{}
		for _, c := range p.GetContainers() {
			var ids []string
			for _, d := range c.GetDevices() {
				if d.GetResourceName() == "aliyun.com/gpu" {
					ids = append(ids, d.GetDeviceIds()...)
				}
			}
			out[p.GetName()][c.GetName()] = ids
		}
	}
	return out
}

// burstPod is a pod of the burst: containers asking for gpus[i] of
// aliyun.com/gpu each (c0, c1, ...), placed by numaplace-scheduler, or
// bound by hand with a decision naming the given GPUs (hand).
type burstPod struct {
	name string
	gpus []int
	hand bool
}

// plainGPUPod is a pod without a NUMA spec whose containers ask for the
// GPUs: the shared pool's CPUs, a little memory.
func plainGPUPod(name string, gpus []int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{SchedulerName: "numaplace-scheduler", HostNetwork: true,
			TerminationGracePeriodSeconds: new(int64(2))},
	}
	for i, n := range gpus {
		res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}
		if n > 0 {
			res["aliyun.com/gpu"] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		}
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "c" + strconv.Itoa(i), Image: e2eImage,
			ImagePullPolicy: corev1.PullNever, Command: []string{"/bin/sh", "-c", podScript},
			Resources: corev1.ResourceRequirements{Requests: res, Limits: res}})
	}
	return pod
}

// handDecision is a None decision naming the GPUs of gpus (by ID), as
// numaplace-scheduler writes for a pod without a NUMA spec.
func handDecision(gpus []fakeGPU, ids []int) string {
	d := kube.Decision{NUMANodes: []int{}, GPUs: []kube.DecisionGPU{}, MemoryMiB: map[string]int64{}}
	for _, id := range slices.Sorted(slices.Values(ids)) {
		d.GPUs = append(d.GPUs, kube.DecisionGPU{ID: id, UUID: gpus[id].uuid})
		if !slices.Contains(d.NUMANodes, gpus[id].node) {
			d.NUMANodes = append(d.NUMANodes, gpus[id].node)
			d.MemoryMiB[strconv.Itoa(gpus[id].node)] = 0
		}
	}
	slices.Sort(d.NUMANodes)
	return d.String()
}

// decisionOf reads the pod's decision.
func decisionOf(t *testing.T, pod *corev1.Pod) kube.Decision {
	t.Helper()
	v, ok := pod.Annotations[kube.AnnotationAllocation]
	require.True(t, ok, "pod %s has no decision", pod.Name)
	d, err := kube.ParseDecision(v)
	require.NoError(t, err, "pod %s's decision", pod.Name)
	return d
}

// waitAllRunning waits until every container of the pods runs.
func waitAllRunning(t *testing.T, client kubernetes.Interface, names []string) map[string]*corev1.Pod {
	t.Helper()
	out := map[string]*corev1.Pod{}
	for _, name := range names {
		require.Eventually(t, func() bool {
			pod, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
			if err != nil || pod.Status.Phase != corev1.PodRunning || len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
				return false
			}
			for _, st := range pod.Status.ContainerStatuses {
				if !st.Ready {
					return false
				}
			}
			out[name] = pod
			return true
		}, 120*time.Second, 200*time.Millisecond, "pod %s is not running: %s", name, describe(client, name))
	}
	return out
}

// TestKubeletAssignsTheDecidedGPUs: 20 GPU pods of mixed sizes, created
// in bursts (waves of at most 8 GPUs on an 8-GPU node, the pods deleted
// between waves), some placed by numaplace-scheduler and some bound by
// hand with decisions naming the highest free GPUs (not the lowest free
// ones, which the kubelet's own choice would take): the kubelet's
// pod-resources API names exactly each container's share of its pod's
// decision (the decision's GPUs split in container order), each
// container sees those GPUs, no GPU is in two containers, and no pod
// has an event saying the kubelet's GPUs differ from its decision.
func TestKubeletAssignsTheDecidedGPUs(t *testing.T) {
	gpus := eightFakeGPUs()
	c := startKubeletClusterWith(t, kubeletClusterOptions{gpus: gpus})
	e, client, stage := c.e, c.client, c.stage
	ctx := context.Background()
	uuidOf := map[int]string{}
	for i, g := range gpus {
		uuidOf[i] = g.uuid
	}
	waves := [][]burstPod{
		{{"s1", []int{2}, false}, {"s2", []int{1}, false}, {"s3", []int{1}, false}, {"h1", []int{1}, true}, {"h2", []int{2}, true}},
		{{"s4", []int{3}, false}, {"m1", []int{1, 0, 1}, false}, {"s5", []int{1}, false}, {"h3", []int{1}, true}, {"h4", []int{1}, true}},
		{{"s6", []int{1}, false}, {"s7", []int{1}, false}, {"s8", []int{2}, false}, {"h5", []int{3}, true}, {"h6", []int{1}, true}},
		{{"s9", []int{1}, false}, {"s10", []int{2}, false}, {"s11", []int{1}, false}, {"m2", []int{1, 1}, true}, {"h7", []int{2}, true}},
	}
	total, notLowest := 0, 0
	for w, wave := range waves {
		// The scheduler's pods in a burst; once they are bound, the hand
		// pods in a burst, their decisions naming the highest GPUs that
		// no decision of the wave names.
		var names []string
		for _, bp := range wave {
			if !bp.hand {
				_, err := client.CoreV1().Pods("default").Create(ctx, plainGPUPod(bp.name, bp.gpus), metav1.CreateOptions{})
				require.NoError(t, err)
				names = append(names, bp.name)
			}
		}
		taken := map[int]bool{}
		for _, name := range names {
			require.Eventually(t, func() bool {
				pod, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
				if err != nil || pod.Spec.NodeName == "" || pod.Annotations[kube.AnnotationAllocation] == "" {
					return false
				}
				for _, g := range decisionOf(t, pod).GPUs {
					taken[g.ID] = true
				}
				return true
			}, 60*time.Second, 100*time.Millisecond, "pod %s is not bound with a decision: %s", name, describe(client, name))
		}
		next := len(gpus) - 1
		for _, bp := range wave {
			if !bp.hand {
				continue
			}
			n := 0
			for _, k := range bp.gpus {
				n += k
			}
			var ids []int
			for ; len(ids) < n; next-- {
				require.GreaterOrEqual(t, next, 0, "wave %d needs more GPUs than the node has", w)
				if !taken[next] {
					ids = append(ids, next)
					taken[next] = true
				}
			}
			pod := plainGPUPod(bp.name, bp.gpus)
			pod.Spec.SchedulerName, pod.Spec.NodeName = "", kubeletNode
			pod.Annotations = map[string]string{kube.AnnotationAllocation: handDecision(gpus, ids)}
			_, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			require.NoError(t, err)
			names = append(names, bp.name)
		}
		pods := waitAllRunning(t, client, names)
		stage(fmt.Sprintf("wave %d: %d pods running", w+1, len(names)))

		// The kubelet's record against the decisions.
		listed := podResources(t, e)
		seen := map[string]string{} // GPU UUID -> pod/container that sees it
		lowestFree := 0             // GPUs of the wave's decisions below which all are decided
		for lowestFree < len(gpus) && taken[lowestFree] {
			lowestFree++
		}
		for _, name := range names {
			pod := pods[name]
			d := decisionOf(t, pod)
			// Each container's share: the decision's GPUs in ascending ID,
			// split by the containers' requests in container order.
			at := 0
			for _, ctr := range pod.Spec.Containers {
				q := ctr.Resources.Limits["aliyun.com/gpu"]
				n := int(q.Value())
				var want []string
				for _, g := range d.GPUs[at : at+n] {
					want = append(want, uuidOf[g.ID])
					if g.ID > lowestFree {
						notLowest++
					}
				}
				at += n
				require.ElementsMatch(t, want, listed[name][ctr.Name],
					"pod %s container %s: the kubelet's pod-resources API against the decision %s", name, ctr.Name, pod.Annotations[kube.AnnotationAllocation])
				id := strings.TrimPrefix(pod.Status.ContainerStatuses[slices.IndexFunc(pod.Status.ContainerStatuses,
					func(s corev1.ContainerStatus) bool { return s.Name == ctr.Name })].ContainerID, "containerd://")
				visible := e.envOf(t, id)["NVIDIA_VISIBLE_DEVICES"]
				if n == 0 {
					require.Equal(t, "void", visible, "pod %s container %s asks for no GPU", name, ctr.Name)
				} else {
					require.ElementsMatch(t, want, strings.Split(visible, ","), "pod %s container %s sees", name, ctr.Name)
				}
				for _, u := range want {
					require.Empty(t, seen[u], "GPU %s is in %s and in pod %s container %s", u, seen[u], name, ctr.Name)
					seen[u] = name + "/" + ctr.Name
				}
				total++
			}
			require.Equal(t, len(d.GPUs), at, "pod %s: its decision has GPUs no container asked for", name)
			evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{
				FieldSelector: "involvedObject.name=" + name + ",reason=NUMAPlacementGPUsDiffer"})
			require.NoError(t, err)
			require.Empty(t, evs.Items, "pod %s: the kubelet's GPUs differ from the decision: %s", name, describe(client, name))
		}
		t.Logf("wave %d: the kubelet's pod-resources API: %v", w+1, listed)
		for _, name := range names {
			require.NoError(t, client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(1))}))
		}
		for _, name := range names {
			require.Eventually(t, func() bool {
				_, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}, 90*time.Second, 200*time.Millisecond, "pod %s was not removed: %s", name, describe(client, name))
		}
		stage(fmt.Sprintf("wave %d checked and deleted", w+1))
	}
	n := 0
	for _, wave := range waves {
		n += len(wave)
	}
	require.Equal(t, 20, n)
	require.Positive(t, notLowest, "no decided GPU was above the lowest free one")
	t.Logf("%d pods, %d containers checked; %d decided GPUs above the lowest free one", n, total, notLowest)
}
