package numaplace

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"

	"github.com/numaplace/numaplace/adapters/kube"
)

// nodeGPUs is what a node publishes of numaplace's GPUs in its
// ResourceSlices (driver gpu.numaplace.io, devices of type "gpu"), by GPU
// index: all of them (dra), and those the pod's GPU requests may be given
// (offered: not tainted NoSchedule or NoExecute, or tolerated by every
// numaplace GPU request of the pod).
type nodeGPUs struct {
	dra, offered sets.Set[int]
}

// publishedGPUs reads the node's numaplace GPUs from its slices; tols are
// the tolerations of each numaplace GPU request of the pod (nil for a
// device-plugin pod, whose offered set is not used).
func publishedGPUs(slices []*resourceapi.ResourceSlice, tols [][]resourceapi.DeviceToleration, taints bool) nodeGPUs {
	g := nodeGPUs{dra: sets.New[int](), offered: sets.New[int]()}
	for _, s := range slices {
		if s.Spec.Driver != DRADriver {
			continue
		}
		for i := range s.Spec.Devices {
			dev := &s.Spec.Devices[i]
			if attrString(dev, attrType) != "gpu" {
				continue
			}
			idx, ok := attrInt(dev, attrIndex)
			if !ok {
				continue
			}
			g.dra.Insert(int(idx))
			if !taints || tolerated(dev.Taints, tols) {
				g.offered.Insert(int(idx))
			}
		}
	}
	return g
}

// tolerated reports whether every request (its tolerations) tolerates
// every taint that keeps a device from being allocated (effects NoSchedule
// and NoExecute, as the structured allocator reads them).
func tolerated(taints []resourceapi.DeviceTaint, tols [][]resourceapi.DeviceToleration) bool {
	for _, t := range taints {
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		if len(tols) == 0 {
			return false
		}
		for _, ts := range tols {
			ok := false
			for _, tol := range ts {
				if resourceclaim.ToleratesTaint(tol, t) {
					ok = true
					break
				}
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

// gpuTolerations returns the tolerations of each request of the pod's
// unallocated claims for a numaplace GPU class (the extended resource
// claim has none).
func (d *draPod) gpuTolerations() [][]resourceapi.DeviceToleration {
	var out [][]resourceapi.DeviceToleration
	for _, k := range d.toAllocate {
		for _, r := range d.claims[k].Spec.Devices.Requests {
			if r.Exactly == nil {
				continue
			}
			if _, gpu := numaplaceClass(r.Exactly.DeviceClassName); gpu {
				out = append(out, r.Exactly.Tolerations)
			}
		}
	}
	if d.extended != nil {
		out = append(out, nil)
	}
	return out
}

// containerGPUs reports whether the pod's containers ask for aliyun.com/gpu.
func containerGPUs(p *kube.Pod) bool {
	for _, c := range p.Containers {
		if v, ok := c.Requests[kube.ResourceAliyunGPU]; ok && v != "" && v != "0" {
			return true
		}
	}
	return false
}

// withholdOn returns the GPUs of the node that the pod may not be given
// there, or nil: a pod whose GPUs all come from DRA on the node (claims
// for a numaplace GPU class, or its aliyun.com/gpu through the
// extendedResourceName where no device plugin advertises it) gets only
// the GPUs the node publishes and offers it; a pod whose GPUs all come
// from the device plugin gets only the GPUs the node does not publish
// (a node split by the agent's --dra-gpus). A pod with both, and a node
// with no numaplace slices for a device-plugin pod, withhold nothing.
func (pl *Plugin) withholdOn(s *podState, node *v1.Node) func(int) bool {
	if s.gpus == nil {
		return nil
	}
	g, ok := s.gpus[node.Name]
	d := s.dra
	plugin := containerGPUs(s.orig) && !extendedOn(d, node) // GPUs from the device plugin
	fromDRA := d != nil && (d.gpus > 0 || extendedOn(d, node))
	switch {
	case fromDRA && !plugin:
		offered := g.offered
		if !ok {
			offered = nil
		}
		return func(id int) bool { return !offered.Has(id) }
	case plugin && !fromDRA && ok && g.dra.Len() > 0:
		dra := g.dra
		return func(id int) bool { return dra.Has(id) }
	}
	return nil
}

// readGPUs fills s.gpus, per node, from the ResourceSlices: for a DRA pod
// from the slices PreFilter read (draPod.byNode, with DeviceTaintRules
// applied), for a device-plugin pod with GPUs from the slice lister.
func (pl *Plugin) readGPUs(s *podState) error {
	if pl.dra == nil {
		return nil
	}
	taints := pl.draFeatures.DeviceTaints
	if s.dra != nil {
		if s.dra.gpus == 0 && s.dra.extended == nil && !containerGPUs(s.orig) {
			return nil
		}
		tols := s.dra.gpuTolerations()
		s.gpus = make(map[string]nodeGPUs, len(s.dra.byNode))
		for n, sl := range s.dra.byNode {
			s.gpus[n] = publishedGPUs(sl, tols, taints)
		}
		return nil
	}
	if s.req.GPUs == 0 {
		return nil
	}
	all, err := pl.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return err
	}
	byNode := map[string][]*resourceapi.ResourceSlice{}
	for _, sl := range all {
		if sl.Spec.Driver == DRADriver && sl.Spec.NodeName != nil && *sl.Spec.NodeName != "" {
			byNode[*sl.Spec.NodeName] = append(byNode[*sl.Spec.NodeName], sl)
		}
	}
	if len(byNode) == 0 {
		return nil
	}
	s.gpus = make(map[string]nodeGPUs, len(byNode))
	for n, sl := range byNode {
		s.gpus[n] = publishedGPUs(sl, nil, false)
	}
	if v := pl.logger.V(5); v.Enabled() {
		v.Info("Nodes publishing numaplace GPUs", "pod", klog.KRef(s.pod.Namespace, s.pod.Name), "nodes", len(byNode))
	}
	return nil
}
