package deviceplugin

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/numaplace/numaplace/adapters/kube"
)

// PodInfo is what the device plugin reads of a pod bound to its node.
type PodInfo struct {
	// Pod is the pod: namespace, name, UID, annotations (its decision) and
	// containers with their requests and limits.
	Pod *kube.Pod
	// Created is the pod's creation time (the kubelet admits the pods it
	// receives together oldest first).
	Created time.Time
	// Terminal is set for a pod in phase Succeeded or Failed (the kubelet
	// refuses a pod by failing it).
	Terminal bool
	// Started is set when a container of the pod has started or run (its
	// status says so): the kubelet gave it its devices long ago.
	Started bool
}

// Pods lists the pods bound to the node, as an informer on spec.nodeName
// keeps them (cluster.PodInformer).
type Pods interface {
	// Pods returns the pods bound to the node. With fresh, the list is
	// read from the API server first (a List, not the informer's cache),
	// for a pod the kubelet admits before the watch has brought it.
	Pods(ctx context.Context, fresh bool) ([]PodInfo, error)
}

// KubeletPod is a pod as the kubelet's pod-resources API lists it: the
// pods the kubelet runs or is admitting (its active pods), with the
// devices of the plugin's resource it has given each of their app
// containers and sidecars (the API leaves other init containers out).
type KubeletPod struct {
	// Namespace and Name identify the pod.
	Namespace, Name string
	// Devices are the device IDs of the resource by container name; a
	// container without devices of the resource is absent.
	Devices map[string][]string
}

// Key returns "namespace/name".
func (k KubeletPod) Key() string { return k.Namespace + "/" + k.Name }

// KubeletPods reads the kubelet's pod-resources API.
type KubeletPods interface {
	// List returns the kubelet's active pods with the devices of resource
	// it has allocated to their containers.
	List(ctx context.Context, resource string) ([]KubeletPod, error)
}

// PodResourcesSocket is where the kubelet serves its pod-resources API.
const PodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// PodResources is [KubeletPods] through the kubelet's pod-resources API v1
// (List) on a unix socket.
type PodResources struct {
	// Socket is the socket's path; "" is [PodResourcesSocket].
	Socket string
}

var _ KubeletPods = PodResources{}

// List implements [KubeletPods]: one List call on a new connection (the
// kubelet may have restarted since the last one).
func (r PodResources) List(ctx context.Context, resource string) ([]KubeletPod, error) {
	sock := cmp.Or(r.Socket, PodResourcesSocket)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("the kubelet's pod-resources API at %s: %w", sock, err)
	}
	defer conn.Close()
	resp, err := podresources.NewPodResourcesListerClient(conn).List(ctx, &podresources.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("the kubelet's pod-resources API at %s: %w", sock, err)
	}
	out := make([]KubeletPod, 0, len(resp.GetPodResources()))
	for _, p := range resp.GetPodResources() {
		kp := KubeletPod{Namespace: p.GetNamespace(), Name: p.GetName(), Devices: map[string][]string{}}
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDevices() {
				if d.GetResourceName() == resource {
					kp.Devices[c.GetName()] = append(kp.Devices[c.GetName()], d.GetDeviceIds()...)
				}
			}
		}
		out = append(out, kp)
	}
	return out, nil
}

// candidate is a pod that the kubelet may be giving GPUs now, with the
// container it would be giving them to.
type candidate struct {
	info *PodInfo
	// decision is the pod's decision, nil without one (or a malformed
	// one); shares its GPUs split among its containers (nil without a
	// decision, or when they cannot be split).
	decision *kube.Decision
	shares   []kube.ContainerGPUs
	// container is the container the kubelet gives GPUs to next.
	container kube.ContainerGPUs
	// sure is set when the pod is known to be the one the kubelet admits:
	// the only candidate among the pods the kubelet's pod-resources API
	// lists, not a guess from the API server's pods alone.
	sure bool
}

// key returns the pod's key.
func (c *candidate) key() string { return c.info.Pod.Key() }

// share returns the container's GPUs of the decision, and whether there
// is a decision to take them from.
func (c *candidate) share() ([]int, bool) {
	if c.decision == nil || c.shares == nil {
		return nil, false
	}
	ids := make([]int, len(c.container.GPUs))
	for i, g := range c.container.GPUs {
		ids[i] = g.ID
	}
	return ids, true
}

// podOrder is the order in which the plugin expects the kubelet to admit
// pods: by creation time, then by namespace/name (the kubelet sorts the
// pods it receives together by creation time, which has a resolution of
// one second; among equal times its order is not known, and the plugin
// takes the names').
func podOrder(a, b *candidate) int {
	if c := a.info.Created.Compare(b.info.Created); c != 0 {
		return c
	}
	return strings.Compare(a.key(), b.key())
}

// candidates returns the pods the kubelet may be giving size GPUs of the
// plugin's resource to now, in podOrder, with the container each would be
// given them to: pods bound to the node, not terminal, with a container
// asking for the resource that has not had its GPUs yet, and asking for
// size of them.
//
// Which containers have had their GPUs: with the kubelet's pod-resources
// list (view not nil), only pods it lists are candidates (the kubelet
// lists the pod it is admitting and the pods it runs, never those it has
// not reached yet), and an app container or sidecar it lists with devices
// of the resource has had them, as has every container before it; the
// other init containers, which it does not list, by the plugin's own
// record of its Allocate calls (given). Without the list (the API not
// configured or not answering): a pod not yet admitted on the node (no
// sandbox) whose containers have not started, and containers by given.
func (p *Plugin) candidates(pods []PodInfo, view map[string]KubeletPod, size int) []*candidate {
	var out []*candidate
	for i := range pods {
		info := &pods[i]
		if info.Terminal || info.Pod == nil {
			continue
		}
		key := info.Pod.Key()
		var kp KubeletPod
		if view != nil {
			var ok bool
			if kp, ok = view[key]; !ok {
				continue
			}
		} else {
			if info.Started {
				continue
			}
			if adm, ok := p.node.Get(key); ok && (adm.UID == "" || adm.UID == info.Pod.UID) {
				continue
			}
		}
		c := &candidate{info: info}
		var gpus []kube.DecisionGPU
		if v, ok := info.Pod.Annotations[kube.AnnotationAllocation]; ok {
			if d, err := kube.ParseDecision(v); err == nil {
				c.decision = &d
				gpus = d.GPUs
			}
		}
		shares, err := kube.GPUShares(info.Pod, p.opts.ResourceName, gpus)
		if err == nil && c.decision != nil {
			c.shares = shares
		} else if shares, err = kube.GPURequests(info.Pod, p.opts.ResourceName); err != nil {
			continue
		}
		p.mu.Lock()
		given := p.given[info.Pod.UID]
		p.mu.Unlock()
		next := -1
		for j, s := range shares {
			if s.Count == 0 || given[s.Name] {
				continue
			}
			if view != nil && (!s.Init || s.Sidecar) && len(kp.Devices[s.Name]) > 0 {
				next = -1 // had its GPUs, and so had every container before it
				continue
			}
			if next < 0 {
				next = j
			}
		}
		if next < 0 || shares[next].Count != size {
			continue
		}
		c.container = shares[next]
		out = append(out, c)
	}
	slices.SortFunc(out, podOrder)
	return out
}

// identifyTimeout bounds each read of the API server or the kubelet made
// while the kubelet waits for an answer.
const identifyTimeout = 3 * time.Second

// identify returns the pod (and container) the kubelet is giving size GPUs
// of the resource to now: the first of [Plugin.candidates] in podOrder,
// read again from the API server when the informer's pods have none. It
// also returns the pods bound to the node (for the decisions' GPUs), and
// nil when the plugin has no Pods or none is a candidate. The candidate is
// sure (see [candidate]) when the kubelet's list was read and it was the
// only one.
func (p *Plugin) identify(ctx context.Context, size int) (*candidate, []PodInfo) {
	if p.opts.Pods == nil {
		return nil, nil
	}
	var view map[string]KubeletPod
	if p.opts.KubeletPods != nil {
		lctx, cancel := context.WithTimeout(ctx, identifyTimeout)
		list, err := p.opts.KubeletPods.List(lctx, p.opts.ResourceName)
		cancel()
		if err != nil {
			p.note("cannot read the kubelet's pod-resources API; guessing the pod the kubelet admits from the API server's pods: " + err.Error())
		} else {
			view = map[string]KubeletPod{}
			for _, kp := range list {
				view[kp.Key()] = kp
			}
		}
	}
	var pods []PodInfo
	for _, fresh := range []bool{false, true} {
		lctx, cancel := context.WithTimeout(ctx, identifyTimeout)
		list, err := p.opts.Pods.Pods(lctx, fresh)
		cancel()
		if err != nil {
			p.note("cannot read the pods bound to the node: " + err.Error())
			continue
		}
		pods = list
		if cs := p.candidates(pods, view, size); len(cs) > 0 {
			if len(cs) > 1 {
				keys := make([]string, len(cs))
				for i, c := range cs {
					keys[i] = c.key()
				}
				p.log.Debug("several pods may be the one the kubelet admits; taking the first", "pods", keys, "size", size)
			}
			p.forgetGone(pods)
			cs[0].sure = view != nil && len(cs) == 1
			return cs[0], pods
		}
	}
	p.forgetGone(pods)
	return nil, pods
}

// forgetGone drops the record of Allocate calls of pods no longer bound
// to the node.
func (p *Plugin) forgetGone(pods []PodInfo) {
	if pods == nil {
		return
	}
	live := map[string]bool{}
	for _, info := range pods {
		if info.Pod != nil {
			live[info.Pod.UID] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid := range p.given {
		if !live[uid] {
			delete(p.given, uid)
		}
	}
}

// decisionHolders returns, by GPU ID, who holds or reserves it, in words
// ("pod ns/name (its numaplace decision)", "ResourceClaim ns/name"): the
// pods admitted on the node with GPUs in their allocation, the pods bound
// to the node, not terminal, whose decision names it (decided, not yet
// started), except the pod except (a key), and the ResourceClaims the DRA
// role holds.
func (p *Plugin) decisionHolders(pods []PodInfo, except string) map[int]string {
	out := map[int]string{}
	byDecision := func(key string) string { return "pod " + key + " (its numaplace decision)" }
	for g, claim := range p.node.ClaimedGPUs() {
		out[g] = "ResourceClaim " + claim
	}
	for _, a := range p.node.Admissions() {
		if a.Pod == except {
			continue
		}
		for _, g := range a.GPUs {
			out[g.ID] = byDecision(a.Pod)
		}
	}
	for _, info := range pods {
		if info.Terminal || info.Pod == nil || info.Pod.Key() == except {
			continue
		}
		v, ok := info.Pod.Annotations[kube.AnnotationAllocation]
		if !ok {
			continue
		}
		d, err := kube.ParseDecision(v)
		if err != nil {
			continue
		}
		for _, g := range d.GPUs {
			if _, held := out[g.ID]; !held {
				out[g.ID] = byDecision(info.Pod.Key())
			}
		}
	}
	return out
}
