package cluster_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/plugins/agent/cluster"
)

func TestPodInfo(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	created := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	gpu := func(n string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Limits: corev1.ResourceList{"aliyun.com/gpu": resource.MustParse(n), "cpu": resource.MustParse("500m")}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", CreationTimestamp: metav1.NewTime(created),
			Annotations: map[string]string{kube.AnnotationAllocation: "{}"}},
		Spec: corev1.PodSpec{NodeName: "gpu-1",
			InitContainers: []corev1.Container{{Name: "setup", Resources: gpu("1")}, {Name: "side", RestartPolicy: &always}},
			Containers:     []corev1.Container{{Name: "main", Resources: gpu("2")}}},
	}
	info := cluster.PodInfo(pod)
	require.Equal(t, "ns/p", info.Pod.Key())
	require.Equal(t, "u1", info.Pod.UID)
	require.Equal(t, "gpu-1", info.Pod.NodeName)
	require.Equal(t, created, info.Created)
	require.False(t, info.Terminal)
	require.False(t, info.Started)
	require.Equal(t, "{}", info.Pod.Annotations[kube.AnnotationAllocation])
	shares, err := kube.GPURequests(info.Pod, "aliyun.com/gpu")
	require.NoError(t, err)
	require.Equal(t, []kube.ContainerGPUs{{Name: "setup", Init: true, Count: 1}, {Name: "side", Init: true, Sidecar: true},
		{Name: "main", Count: 2}}, shares)
	require.Equal(t, "500m", info.Pod.Containers[0].Limits["cpu"])

	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}}}
	require.False(t, cluster.PodInfo(pod).Started, "waiting to start")
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}
	require.True(t, cluster.PodInfo(pod).Started, "an init container ran")
	pod.Status.Phase = corev1.PodFailed
	require.True(t, cluster.PodInfo(pod).Terminal)
}
