package scheduler

import (
	"fmt"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

// ScoreWhatIf is [PreparedPod.Score] on the node changed by w, as
// [PreparedPod.FilterWhatIf] and [PreparedPod.Decide] change it (pods
// removed and added, GPUs withheld): the node rated as the pod would be
// placed there, on a copy of its state. A scheduler that withholds some of
// a node's GPUs from a pod (WhatIf.WithholdGPU) scores the node with the
// same view its Filter decided on, so that a node whose offered GPUs
// cannot hold the pod aligned is not rated as if the whole machine were
// offered. A refusal is Filter's *[FilterError]; nothing in the cache
// changes.
func (pp *PreparedPod) ScoreWhatIf(node string, w WhatIf) (int, error) {
	ni, err := pp.c.node(node)
	if err != nil {
		return 0, err
	}
	if len(w.Removed) == 0 && len(w.Added) == 0 && !w.withholds(ni.m) {
		return pp.Score(node) // nothing changes: no copy of the state
	}
	ni.mu.RLock()
	s := pp.c.scratchLocked(ni, w)
	ni.mu.RUnlock()
	v := pp.c.evaluate(s, pp.pr, true, nil)
	if v.why != fits {
		return 0, pp.c.refusalError(ni.name, pp.pr, v)
	}
	return int(v.score), nil
}

// ReserveWithholding is [PreparedPod.Reserve] with the GPUs and devices of
// other classes that w's WithholdGPU and WithholdDevice name kept from the
// pod: the decision is made on a copy of the node's state where they are
// unhealthy and claimed on the node, so it is the decision
// [PreparedPod.Decide] made with the same w. w must change nothing else
// (no Removed, no Added: an error). On a node running the kubelet's own
// Topology Manager nothing is withheld.
func (pp *PreparedPod) ReserveWithholding(node string, w WhatIf) error {
	if len(w.Removed) > 0 || len(w.Added) > 0 {
		return fmt.Errorf("scheduler: reserving pod %s on node %s: a reservation withholds devices only, it takes no pods off or on", pp.pr.key, node)
	}
	ni, err := pp.c.node(node)
	if err != nil {
		return err
	}
	var wp *WhatIf
	if w.withholds(ni.m) {
		wp = &w
	}
	v, err := pp.c.reserve(ni, pp.pr, pp.prio, wp)
	if err != nil {
		return err
	}
	if v.why != fits {
		return pp.c.refusalError(ni.name, pp.pr, v)
	}
	return nil
}

// withholds reports whether w's WithholdGPU or WithholdDevice names any
// GPU or device of m (when neither does, the node needs no copy).
func (w *WhatIf) withholds(m *topology.Machine) bool {
	if w.WithholdGPU != nil {
		for _, g := range m.GPUs() {
			if w.WithholdGPU(g.ID) {
				return true
			}
		}
	}
	if w.WithholdDevice != nil {
		for _, d := range m.Devices() {
			if w.WithholdDevice(d.Class, d.ID) {
				return true
			}
		}
	}
	return false
}

// withholdDevices marks unhealthy, in st, the machine's devices (other than
// GPUs) that f names.
func withholdDevices(st *allocator.State, m *topology.Machine, f func(class, id string) bool) {
	for _, d := range m.Devices() {
		if f(d.Class, d.ID) {
			_, _ = st.SetDeviceHealth(d.Class, d.ID, false)
		}
	}
}
