package numaplace

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

// nodeNICs is what a node publishes of numaplace's NICs in its
// ResourceSlices (driver gpu.numaplace.io, devices of type "nic"), by
// InfiniBand device name (the machine's rdma device ID): those the pod's
// NIC requests may be given (offered: not tainted NoSchedule or
// NoExecute, or tolerated by every numaplace NIC request of the pod), and
// each published NIC's device ID, to see whether a claim holds it.
type nodeNICs struct {
	offered sets.Set[string]
	ids     map[string]structured.DeviceID
}

// publishedNICs reads the node's numaplace NICs from its slices; tols are
// the tolerations of each numaplace NIC request of the pod.
func publishedNICs(slices []*resourceapi.ResourceSlice, tols [][]resourceapi.DeviceToleration, taints bool) nodeNICs {
	n := nodeNICs{offered: sets.New[string](), ids: map[string]structured.DeviceID{}}
	for _, s := range slices {
		if s.Spec.Driver != DRADriver {
			continue
		}
		for i := range s.Spec.Devices {
			dev := &s.Spec.Devices[i]
			if attrString(dev, attrType) != "nic" {
				continue
			}
			ib := attrString(dev, attrIBDevice)
			if ib == "" {
				continue
			}
			n.ids[ib] = structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, dev.Name)
			if !taints || tolerated(dev.Taints, tols) {
				n.offered.Insert(ib)
			}
		}
	}
	return n
}

// nicTolerations returns the tolerations of each request of the pod's
// unallocated claims for numaplace's NIC class.
func (d *draPod) nicTolerations() [][]resourceapi.DeviceToleration {
	var out [][]resourceapi.DeviceToleration
	for _, k := range d.toAllocate {
		for _, r := range d.claims[k].Spec.Devices.Requests {
			if r.Exactly == nil {
				continue
			}
			if ours, gpu := numaplaceClass(r.Exactly.DeviceClassName); ours && !gpu {
				out = append(out, r.Exactly.Tolerations)
			}
		}
	}
	return out
}

// readNICs fills s.nics, per node, from the slices PreFilter read
// (draPod.byNode, with DeviceTaintRules applied), for a pod whose claims
// ask for numaplace NICs.
func (pl *Plugin) readNICs(s *podState) {
	if s.dra == nil || s.dra.nics == 0 {
		return
	}
	tols := s.dra.nicTolerations()
	s.nics = make(map[string]nodeNICs, len(s.dra.byNode))
	for n, sl := range s.dra.byNode {
		s.nics[n] = publishedNICs(sl, tols, pl.draFeatures.DeviceTaints)
	}
}

// withholdNICsOn returns the NICs (rdma devices) of the node that the pod
// may not be given there, or nil when the pod asks for no numaplace NIC:
// those the node does not publish or offers it tainted (all of them on a
// node without numaplace slices), and those a claim holds now (allocated
// or being allocated: a claim the default scheduler allocated, whose NICs
// the cache does not count) unless a preemption dry-run frees them
// (freed).
func (pl *Plugin) withholdNICsOn(s *podState, node string, freed sets.Set[structured.DeviceID]) func(class, id string) bool {
	if s.nics == nil {
		return nil
	}
	n, ok := s.nics[node]
	if !ok {
		return func(class, _ string) bool { return class == rdmaClass }
	}
	allocated := s.dra.allocated.AllocatedDevices
	return func(class, id string) bool {
		if class != rdmaClass {
			return false
		}
		if !n.offered.Has(id) {
			return true
		}
		dev := n.ids[id]
		return allocated.Has(dev) && !freed.Has(dev)
	}
}

// withheldWhatIf is the change of the node that keeps from the pod the
// GPUs gpus names (withholdOn) and the NICs withholdNICsOn names; ok is
// false when it withholds nothing.
func (pl *Plugin) withheldWhatIf(s *podState, node string, gpus func(int) bool) (w scheduler.WhatIf, ok bool) {
	w = scheduler.WhatIf{WithholdGPU: gpus, WithholdDevice: pl.withholdNICsOn(s, node, nil)}
	return w, w.WithholdGPU != nil || w.WithholdDevice != nil
}
