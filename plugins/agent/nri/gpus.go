package nri

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/containerd/nri/pkg/api"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
)

// PodLookup finds the pod of a sandbox, with its containers' requests
// (which NRI does not pass), such as cluster.PodInformer.
type PodLookup interface {
	// Pod returns the pod namespace/name with UID uid ("": any), and
	// whether it was found. It may ask the API server and must give up
	// within ctx.
	Pod(ctx context.Context, namespace, name, uid string) (*kube.Pod, bool)
}

// kubeletGPUs returns the GPUs (by ID) the kubelet gave the container
// through the device plugin, as NVIDIA_VISIBLE_DEVICES names them (the
// last entry wins, as when containerd merges environments), and whether
// the value names only this machine's GPUs, by UUID or index ("all",
// "void", another plugin's names, or no value: false). GPUs that the
// ResourceClaims of the pod hold (see claimGPUs) are not the kubelet's:
// the DRA role's CDI spec named them; they are left out, and a value that
// names only them gives false.
func (p *Plugin) kubeletGPUs(ctr *api.Container, pod claimant) ([]int, bool) {
	ids, ok := p.namedGPUs(ctr)
	if !ok {
		return nil, false
	}
	claimed := p.claimGPUs(pod)
	if len(claimed) == 0 {
		return ids, true
	}
	ids = slices.DeleteFunc(ids, func(id int) bool { return claimed[id] })
	return ids, len(ids) > 0
}

// namedGPUs returns the GPUs (by ID) the container's NVIDIA_VISIBLE_DEVICES
// names, and whether it names only this machine's GPUs (see kubeletGPUs).
func (p *Plugin) namedGPUs(ctr *api.Container) ([]int, bool) {
	value := envValue(ctr.GetEnv(), kubelet.EnvVisibleDevices)
	if value == "" {
		return nil, false
	}
	byName := map[string]int{}
	for _, g := range p.node.Machine().GPUs() {
		byName[strconv.Itoa(g.ID)] = g.ID
		if g.UUID != "" {
			byName[g.UUID] = g.ID
		}
	}
	var ids []int
	for _, name := range strings.Split(value, ",") {
		id, ok := byName[strings.TrimSpace(name)]
		if !ok {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}

// claimant is a pod as the claims know it: its UID and namespace.
type claimant struct{ uid, namespace string }

// claimantOf returns the claimant of a sandbox.
func claimantOf(sb *api.PodSandbox) claimant {
	return claimant{uid: sb.GetUid(), namespace: sb.GetNamespace()}
}

// claimantOfAdmission returns the claimant of an admitted pod.
func claimantOfAdmission(adm kubelet.Admission) claimant {
	ns, _, _ := strings.Cut(adm.Pod, "/")
	return claimant{uid: adm.UID, namespace: ns}
}

// claimGPUs returns the GPUs that the ResourceClaims the DRA role holds
// for the pod hold, nil for none: those reserved for it (by UID,
// kubelet.Node.ClaimsOfPod) and those of its namespace, since the kubelet
// prepares a claim shared by several pods once, for the first of them.
// A GPU a claim holds is in no container but through the claim's CDI
// devices (decisions, the device plugin and the kubelet's GPUs are refused
// it), so naming it means having it from the claim.
func (p *Plugin) claimGPUs(pod claimant) map[int]bool {
	var out map[int]bool
	for _, c := range p.node.Claims() {
		if c.Namespace != pod.namespace && !slices.ContainsFunc(c.Pods, func(r kubelet.ClaimConsumer) bool { return pod.uid != "" && r.UID == pod.uid }) {
			continue
		}
		for _, g := range c.GPUs {
			if out == nil {
				out = map[int]bool{}
			}
			out[g] = true
		}
	}
	return out
}

// containerClaimGPUs returns the GPUs of the pod's claims that the
// container got from the DRA role's CDI spec (ascending): those whose
// device node the container has, or, when the plugin does not know the
// GPUs' nodes, those its NVIDIA_VISIBLE_DEVICES names.
func (p *Plugin) containerClaimGPUs(ctr *api.Container, pod claimant) []int {
	claimed := p.claimGPUs(pod)
	if len(claimed) == 0 {
		return nil
	}
	var out []int
	if p.gpus != nil {
		has := map[string]bool{}
		for _, d := range ctr.GetLinux().GetDevices() {
			has[d.GetPath()] = true
		}
		for g := range claimed {
			if path, ok := p.gpus.Path(g); ok && has[path] {
				out = append(out, g)
			}
		}
	}
	if ids, ok := p.namedGPUs(ctr); ok {
		for _, g := range ids {
			if claimed[g] && !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	slices.Sort(out)
	return out
}

// containerShare returns the admission of a container of a pod with
// exclusive resources with its GPUs narrowed to the container's share of
// the decision's (what it is given, see [Plugin.CreateContainer]) and a
// word saying where the share came from: "spec" (kube.GPUShares on the
// pod's containers, which spec is when found), "kubelet" (the GPUs the
// kubelet gave it, when the spec is not known and they are all the
// decision's), or "decision" (all of the decision's GPUs, when neither
// applies).
func (p *Plugin) containerShare(adm kubelet.Admission, spec *kube.Pod, ctr *api.Container) (kubelet.Admission, string) {
	if len(adm.GPUs) == 0 {
		return adm, "decision"
	}
	if spec != nil {
		if shares, err := kube.GPUShares(spec, p.resource, adm.GPUs); err == nil {
			if s, ok := kube.ShareOf(shares, ctr.GetName()); ok {
				adm.GPUs = s.GPUs
				return adm, "spec"
			}
		}
	}
	if ids, ok := p.kubeletGPUs(ctr, claimantOfAdmission(adm)); ok {
		var share []kube.DecisionGPU
		for _, g := range adm.GPUs {
			if slices.Contains(ids, g.ID) {
				share = append(share, g)
			}
		}
		if len(share) == len(slices.Compact(slices.Sorted(slices.Values(ids)))) {
			adm.GPUs = share
			return adm, "kubelet"
		}
	}
	return adm, "decision"
}

// lookupSpec returns the sandbox's pod from Options.Pods when the pod has
// a decision naming GPUs (nil otherwise, or when it is not found). It is
// called without the plugin's lock: it may ask the API server.
func (p *Plugin) lookupSpec(ctx context.Context, sb *api.PodSandbox) *kube.Pod {
	if p.pods == nil {
		return nil
	}
	v, ok := sb.GetAnnotations()[kube.AnnotationAllocation]
	if !ok {
		return nil
	}
	if d, err := kube.ParseDecision(v); err != nil || len(d.GPUs) == 0 {
		return nil
	}
	pod, ok := p.pods.Pod(ctx, sb.GetNamespace(), sb.GetName(), sb.GetUid())
	if !ok {
		return nil
	}
	return pod
}

// withinDecision reports whether the container's NVIDIA_VISIBLE_DEVICES
// names only GPUs of its pod's decision (its share, as
// [Plugin.CreateContainer] gives it).
func (p *Plugin) withinDecision(ctr *api.Container, adm kubelet.Admission) bool {
	ids, ok := p.kubeletGPUs(ctr, claimantOfAdmission(adm))
	if !ok {
		return false
	}
	for _, id := range ids {
		if !slices.ContainsFunc(adm.GPUs, func(g kube.DecisionGPU) bool { return g.ID == id }) {
			return false
		}
	}
	return true
}

// lookupClaimSpec returns the sandbox's pod from Options.Pods, with its
// containers' requests, when the pod has a NUMA spec, no decision, and
// ResourceClaims the node holds GPUs for, reserved for it (by UID): the
// node can then place it by its policy aligned with those GPUs
// (kubelet.Node.Admit), which it cannot do from the sandbox alone. nil
// otherwise, or when the pod is not found (it is then refused for want of
// a decision, as before). It is called without the plugin's lock: it may
// ask the API server.
func (p *Plugin) lookupClaimSpec(ctx context.Context, sb *api.PodSandbox) *kube.Pod {
	ann := sb.GetAnnotations()
	if p.pods == nil || sb.GetUid() == "" {
		return nil
	}
	if _, ok := ann[kube.AnnotationAllocation]; ok {
		return nil
	}
	_, alibaba := ann[kube.AnnotationSpecAlibaba]
	_, koordinator := ann[kube.AnnotationSpecKoordinator]
	if !alibaba && !koordinator {
		return nil
	}
	if !slices.ContainsFunc(p.node.ClaimsOfPod(sb.GetUid()), func(c kubelet.ClaimHold) bool { return len(c.GPUs) > 0 }) {
		return nil
	}
	pod, ok := p.pods.Pod(ctx, sb.GetNamespace(), sb.GetName(), sb.GetUid())
	if !ok || pod.Namespace != sb.GetNamespace() || pod.Name != sb.GetName() || (pod.UID != "" && pod.UID != sb.GetUid()) {
		return nil
	}
	found := *pod // the lookup's pod may be shared: not changed here
	found.UID = sb.GetUid()
	return &found
}

// claimShare returns the admission of a container of a pod the node
// placed with its claims' GPUs (kubelet.Admission.Claims) with its GPUs
// narrowed to those of the claims' GPUs the container got from the DRA
// role's CDI spec (got): a container that uses no claim gets none.
func claimShare(adm kubelet.Admission, got []int) kubelet.Admission {
	var share []kube.DecisionGPU
	for _, g := range adm.GPUs {
		if slices.Contains(got, g.ID) {
			share = append(share, g)
		}
	}
	adm.GPUs = share
	return adm
}
