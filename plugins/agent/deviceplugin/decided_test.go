package deviceplugin_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
	"github.com/numaplace/numaplace/plugins/agent/nri"
)

// fakePods is the pods bound to the node; fresh counts the fresh reads.
type fakePods struct {
	mu    sync.Mutex
	pods  []deviceplugin.PodInfo
	fresh int
	// late are pods only a fresh read returns (the watch has not brought
	// them yet).
	late []deviceplugin.PodInfo
}

func (f *fakePods) Pods(_ context.Context, fresh bool) ([]deviceplugin.PodInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fresh {
		f.fresh++
		f.pods = append(f.pods, f.late...)
		f.late = nil
	}
	return append([]deviceplugin.PodInfo(nil), f.pods...), nil
}

// fakeKubelet is the kubelet's pod-resources list.
type fakeKubelet struct{ pods []deviceplugin.KubeletPod }

func (f *fakeKubelet) List(context.Context, string) ([]deviceplugin.KubeletPod, error) {
	return f.pods, nil
}

// admitting makes the kubelet list pod (being admitted, no devices yet).
func (f *fakeKubelet) admitting(name string) {
	f.pods = append(f.pods, deviceplugin.KubeletPod{Namespace: "default", Name: name, Devices: map[string][]string{}})
}

// gave records the kubelet's devices for a container.
func (f *fakeKubelet) gave(name, container string, ids ...string) {
	for i := range f.pods {
		if f.pods[i].Name == name {
			f.pods[i].Devices[container] = ids
		}
	}
}

type recordedEvents struct {
	mu     sync.Mutex
	events []nri.Event
}

func (r *recordedEvents) Record(_ context.Context, e nri.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

var t0 = time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)

// gpuPodInfo is a pod asking gpus (per container) of aliyun.com/gpu,
// created at t0 + sec seconds, with a None decision naming decided
// (none when nil).
func gpuPodInfo(name string, sec int, decided []int, gpus ...int) deviceplugin.PodInfo {
	pod := &kube.Pod{Namespace: "default", Name: name, UID: "uid-" + name, Annotations: map[string]string{}}
	for i, n := range gpus {
		pod.Containers = append(pod.Containers, kube.Container{Name: fmt.Sprintf("c%d", i),
			Limits: map[string]string{"aliyun.com/gpu": fmt.Sprint(n)}})
	}
	if decided != nil {
		d := kube.Decision{NUMANodes: []int{}, GPUs: []kube.DecisionGPU{}, MemoryMiB: map[string]int64{}}
		for _, g := range decided {
			d.GPUs = append(d.GPUs, kube.DecisionGPU{ID: g})
		}
		pod.Annotations[kube.AnnotationAllocation] = d.String()
	}
	return deviceplugin.PodInfo{Pod: pod, Created: t0.Add(time.Duration(sec) * time.Second)}
}

func decidedPlugin(t *testing.T, pods deviceplugin.Pods, kl deviceplugin.KubeletPods) (*deviceplugin.Plugin, *recordedEvents) {
	t.Helper()
	node, devs, _ := testNodeDevices(t)
	ev := &recordedEvents{}
	opts := deviceplugin.Options{SocketDir: t.TempDir(), NoDeviceNodes: true, HealthInterval: -1,
		Logger: slog.New(slog.DiscardHandler), Pods: pods, Events: ev}
	if kl != nil {
		opts.KubeletPods = kl
	}
	p, err := deviceplugin.New(node, devs, opts)
	require.NoError(t, err)
	return p, ev
}

var allGPUs = []string{"GPU-a0", "GPU-a1", "GPU-b0", "3"}

func prefer(t *testing.T, p *deviceplugin.Plugin, size int, available ...string) []string {
	t.Helper()
	resp, err := p.GetPreferredAllocation(context.Background(), &api.PreferredAllocationRequest{ContainerRequests: []*api.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: available, AllocationSize: int32(size)}}})
	require.NoError(t, err)
	return resp.GetContainerResponses()[0].GetDeviceIDs()
}

func allocate(p *deviceplugin.Plugin, ids ...string) error {
	_, err := p.Allocate(context.Background(), &api.AllocateRequest{ContainerRequests: []*api.ContainerAllocateRequest{{DevicesIds: ids}}})
	return err
}

// TestPreferTheDecision: the kubelet is given each container's share of
// its pod's decision, the pod found through the kubelet's pod-resources
// list (the pod it is admitting), whatever the creation times say; a
// difference is reported; a pod without a decision is steered off and
// refused the decisions' GPUs, the holder named.
func TestPreferTheDecision(t *testing.T) {
	pods := &fakePods{pods: []deviceplugin.PodInfo{
		gpuPodInfo("a", 0, []int{3}, 1),
		gpuPodInfo("b", 0, []int{1}, 1),
		gpuPodInfo("multi", 1, []int{0, 2}, 1, 0, 1),
		gpuPodInfo("plain", 2, nil, 1),
	}}
	kl := &fakeKubelet{}
	p, ev := decidedPlugin(t, pods, kl)

	// The kubelet admits b first (a is not listed: not reached yet).
	kl.admitting("b")
	require.Equal(t, []string{"GPU-a1"}, prefer(t, p, 1, allGPUs...))
	require.NoError(t, allocate(p, "GPU-a1"))
	kl.gave("b", "c0", "GPU-a1")
	// Then a: the lowest free GPU is GPU-a0, its decision GPU 3.
	kl.admitting("a")
	require.Equal(t, []string{"3"}, prefer(t, p, 1, "GPU-a0", "GPU-b0", "3"))
	// The kubelet ignores the preference: allowed, reported.
	require.NoError(t, allocate(p, "GPU-a0"))
	kl.gave("a", "c0", "GPU-a0")
	require.Len(t, ev.events, 1)
	require.Equal(t, nri.Event{Namespace: "default", Name: "a", UID: "uid-a", Type: "Warning", Reason: deviceplugin.ReasonGPUsDiffer,
		Message: "the kubelet allocated GPU 0 (GPU-a0) to container c0, its share of the numaplace decision is GPU 3: " +
			"the container gets the decision's GPUs, but the kubelet's pod-resources API names the kubelet's"}, ev.events[0])

	// A pod of three containers (1, 0 and 1 GPUs): each its share, in
	// container order.
	kl.admitting("multi")
	require.Equal(t, []string{"GPU-a0"}, prefer(t, p, 1, "GPU-a0", "GPU-b0", "3"))
	require.NoError(t, allocate(p, "GPU-a0"))
	kl.gave("multi", "c0", "GPU-a0")
	require.Equal(t, []string{"GPU-b0"}, prefer(t, p, 1, "GPU-b0", "3"))
	require.NoError(t, allocate(p, "GPU-b0"))
	kl.gave("multi", "c2", "GPU-b0")

	// The plain pod (no decision) is steered off the decisions' GPUs
	// (b's and a's; multi has ended), and refused one.
	pods.mu.Lock()
	pods.pods[2].Terminal = true
	pods.mu.Unlock()
	kl.admitting("plain")
	got := prefer(t, p, 1, allGPUs...)
	require.Len(t, got, 1)
	require.Contains(t, []string{"GPU-a0", "GPU-b0"}, got[0], "a GPU no decision names")
	err := allocate(p, "GPU-a1")
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	require.ErrorContains(t, err, "numaplace: pod default/plain (container c0), which has no numaplace decision, cannot have it: GPU 1 (GPU-a1) is held by pod default/b (its numaplace decision)")
	require.Len(t, ev.events, 2)
	require.Equal(t, deviceplugin.ReasonGPUHeld, ev.events[1].Reason)
	require.Equal(t, "plain", ev.events[1].Name)

	c := p.Counts()
	require.Equal(t, deviceplugin.Counts{PreferDecision: 4, PreferUndecided: 1, AllocDecision: 3, AllocDiffers: 1, AllocRefused: 1}, c)
	var b strings.Builder
	require.NoError(t, p.WriteMetrics(&b))
	require.Contains(t, b.String(), "numaplace_agent_gpu_allocations_total{result=\"differs\"} 1\n")
	require.Contains(t, b.String(), "numaplace_agent_gpu_allocations_total{result=\"refused\"} 1\n")
}

// TestPreferWithoutThePodResourcesAPI: without the kubelet's list the
// pods not yet started are taken oldest first, then by name; a pod the
// informer has not seen yet is read afresh.
func TestPreferWithoutThePodResourcesAPI(t *testing.T) {
	pods := &fakePods{pods: []deviceplugin.PodInfo{
		gpuPodInfo("z-old", 0, []int{3}, 1),
		gpuPodInfo("b-new", 5, []int{1}, 1),
		gpuPodInfo("a-new", 5, []int{2}, 1),
		gpuPodInfo("two", 1, []int{0, 1}, 2),
	}}
	p, _ := decidedPlugin(t, pods, nil)
	require.Equal(t, []string{"3"}, prefer(t, p, 1, allGPUs...), "the oldest pod asking for 1")
	require.NoError(t, allocate(p, "3"))
	require.Equal(t, []string{"GPU-a0", "GPU-a1"}, prefer(t, p, 2, "GPU-a0", "GPU-a1", "GPU-b0"), "the pod asking for 2")
	require.NoError(t, allocate(p, "GPU-a0", "GPU-a1"))
	require.Equal(t, []string{"GPU-b0"}, prefer(t, p, 1, "GPU-b0"), "equal times: by name, a-new")
	require.NoError(t, allocate(p, "GPU-b0"))
	require.Equal(t, 0, pods.fresh)
	// A pod only a fresh read knows.
	pods.late = []deviceplugin.PodInfo{gpuPodInfo("late", 9, []int{0}, 1)}
	pods.pods = pods.pods[:0] // the others have started or gone
	require.Equal(t, []string{"GPU-a0"}, prefer(t, p, 1, "GPU-a0", "GPU-a1"))
	require.Equal(t, 1, pods.fresh)
}
