package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
)

// PodInformer keeps the pods bound to one node: a client-go informer on
// pods with the field selector spec.nodeName=<node> (the only pods it
// lists and watches; the agent's RBAC grants get, list and watch on pods).
// It is the device plugin's [deviceplugin.Pods] and the NRI role's lookup
// of a pod's containers ([PodInformer.Pod]).
type PodInformer struct {
	client   kubernetes.Interface
	node     string
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
}

var _ deviceplugin.Pods = (*PodInformer)(nil)

// NewPodInformer returns the informer of the pods bound to node, for the
// API server of cfg. [PodInformer.Run] starts it.
func NewPodInformer(cfg *rest.Config, node string) (*PodInformer, error) {
	if node == "" {
		return nil, errors.New("cluster.NewPodInformer: no node name")
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return newPodInformer(client, node), nil
}

func newPodInformer(client kubernetes.Interface, node string) *PodInformer {
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = selector
	}))
	return &PodInformer{client: client, node: node, factory: f, informer: f.Core().V1().Pods().Informer()}
}

// Run runs the informer until ctx is done. It returns nil.
func (p *PodInformer) Run(ctx context.Context) error {
	p.factory.Start(ctx.Done())
	<-ctx.Done()
	p.factory.Shutdown()
	return nil
}

// Pods implements [deviceplugin.Pods]: the informer's pods, or with fresh
// a List from the API server (with the same field selector).
func (p *PodInformer) Pods(ctx context.Context, fresh bool) ([]deviceplugin.PodInfo, error) {
	var pods []*corev1.Pod
	if fresh || !p.informer.HasSynced() {
		list, err := p.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", p.node).String()})
		if err != nil {
			return nil, fmt.Errorf("list the pods bound to node %s: %w", p.node, err)
		}
		for i := range list.Items {
			pods = append(pods, &list.Items[i])
		}
	} else {
		for _, obj := range p.informer.GetStore().List() {
			if pod, ok := obj.(*corev1.Pod); ok {
				pods = append(pods, pod)
			}
		}
	}
	out := make([]deviceplugin.PodInfo, 0, len(pods))
	for _, pod := range pods {
		out = append(out, PodInfo(pod))
	}
	return out, nil
}

// Pod returns the pod namespace/name bound to the node with UID uid ("":
// any), as the informer has it, else read from the API server (a pod
// the watch has not brought yet); false when there is no such pod or it
// cannot be read within ctx.
func (p *PodInformer) Pod(ctx context.Context, namespace, name, uid string) (*kube.Pod, bool) {
	match := func(pod *corev1.Pod) bool {
		return pod != nil && pod.Spec.NodeName == p.node && (uid == "" || string(pod.UID) == uid)
	}
	if obj, ok, err := p.informer.GetStore().GetByKey(namespace + "/" + name); err == nil && ok {
		if pod, _ := obj.(*corev1.Pod); match(pod) {
			return PodInfo(pod).Pod, true
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	pod, err := p.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil || !match(pod) {
		return nil, false
	}
	return PodInfo(pod).Pod, true
}

// PodInfo returns what the device plugin reads of a pod: its identity,
// annotations, labels and containers' requests and limits (as quantity
// strings), its creation time, whether it is terminal (phase Succeeded or
// Failed) and whether a container of it has started (a container status
// that is running or terminated, now or before).
func PodInfo(pod *corev1.Pod) deviceplugin.PodInfo {
	kp := &kube.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID),
		Annotations: maps.Clone(pod.Annotations), Labels: maps.Clone(pod.Labels), NodeName: pod.Spec.NodeName}
	if kp.Annotations == nil {
		kp.Annotations = map[string]string{}
	}
	if pod.Spec.Priority != nil {
		kp.Priority = *pod.Spec.Priority
	}
	for _, c := range pod.Spec.InitContainers {
		kp.InitContainers = append(kp.InitContainers, kube.InitContainer{Container: container(c),
			RestartPolicyAlways: c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways})
	}
	for _, c := range pod.Spec.Containers {
		kp.Containers = append(kp.Containers, container(c))
	}
	info := deviceplugin.PodInfo{Pod: kp, Created: pod.CreationTimestamp.Time,
		Terminal: pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed}
	for _, st := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if st.State.Running != nil || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil {
			info.Started = true
		}
	}
	return info
}

// container returns a container's requests and limits as quantity
// strings.
func container(c corev1.Container) kube.Container {
	out := kube.Container{Name: c.Name, Requests: map[string]string{}, Limits: map[string]string{}}
	for n, q := range c.Resources.Requests {
		out.Requests[string(n)] = q.String()
	}
	for n, q := range c.Resources.Limits {
		out.Limits[string(n)] = q.String()
	}
	return out
}
