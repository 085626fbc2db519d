package numaplace

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

// whatIfKey is where AddPod and RemovePod keep a preemption dry-run's
// changes in the CycleState.
const whatIfKey fwk.StateKey = Name + "/what-if"

// errMoreVictims refuses, in a dry-run, a victim set that leaves out one of
// the victims the cache chose (scheduler.PreparedPod.Victims).
var errMoreVictims = errors.New(ReasonTextMoreVictims)

// whatIf is the CycleState data of a preemption dry-run: per node, the pods
// taken off it and the pods put on it.
type whatIf struct {
	nodes map[string]*nodeWhatIf
}

// nodeWhatIf is one node's changes.
type nodeWhatIf struct {
	removed map[string]bool      // pods of the node taken off, by key
	added   map[string]*podState // pods put on the node (nominated ones), by key
	memo    *victimMemo          // shared by the clones of one node's dry-run
}

// victimMemo is the victims that make the pod fit on the node in
// kube-scheduler's order (scheduler.PreparedPod.Victims), computed once per
// node and dry-run, among the pods the dry-run first took off.
type victimMemo struct {
	once    sync.Once
	victims []string
	ok      bool
}

// Clone implements fwk.StateData: the changes are copied, the memo shared.
func (w *whatIf) Clone() fwk.StateData {
	c := &whatIf{nodes: make(map[string]*nodeWhatIf, len(w.nodes))}
	for name, n := range w.nodes {
		c.nodes[name] = &nodeWhatIf{removed: maps.Clone(n.removed), added: maps.Clone(n.added), memo: n.memo}
	}
	return c
}

// nodeWhatIfOf returns the node's dry-run changes, or nil when there are
// none (a plain Filter, which costs an atomic load).
func nodeWhatIfOf(s *podState, state fwk.CycleState, node string) *nodeWhatIf {
	if state == nil || !s.whatIf.Load() {
		return nil
	}
	d, err := state.Read(whatIfKey)
	if err != nil {
		return nil
	}
	w, ok := d.(*whatIf)
	if !ok {
		return nil
	}
	n := w.nodes[node]
	if n == nil || len(n.removed) == 0 && len(n.added) == 0 {
		return nil
	}
	return n
}

// nodeWhatIfFor returns the node's changes, creating them, and tells the
// pod's state that a dry-run is under way.
func (pl *Plugin) nodeWhatIfFor(state fwk.CycleState, pod *v1.Pod, node string) *nodeWhatIf {
	if s, err := pl.podState(state, pod); err == nil {
		s.whatIf.Store(true)
	}
	var w *whatIf
	if d, err := state.Read(whatIfKey); err == nil {
		w, _ = d.(*whatIf)
	}
	if w == nil {
		w = &whatIf{nodes: map[string]*nodeWhatIf{}}
		state.Write(whatIfKey, w)
	}
	n := w.nodes[node]
	if n == nil {
		n = &nodeWhatIf{removed: map[string]bool{}, added: map[string]*podState{}, memo: &victimMemo{}}
		w.nodes[node] = n
	}
	return n
}

// AddPod implements fwk.PreFilterExtensions: in a dry-run, a pod put on the
// node (a victim given back, or a pod nominated to the node).
func (pl *Plugin) AddPod(_ context.Context, state fwk.CycleState, podToSchedule *v1.Pod, podInfoToAdd fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	p := podInfoToAdd.GetPod()
	node := nodeName(p, nodeInfo)
	if node == "" {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	n := pl.nodeWhatIfFor(state, podToSchedule, node)
	key := podKey(p)
	if n.removed[key] {
		delete(n.removed, key)
		return nil
	}
	if st, ok := pl.cache.Pod(key); ok && st.Node == node {
		return nil // already there
	}
	s, err := pl.readPod(p)
	if err != nil {
		// A pod the plugin cannot read holds nothing it could account.
		return nil
	}
	n.added[key] = s
	return nil
}

// RemovePod implements fwk.PreFilterExtensions: in a dry-run, a pod taken
// off the node (a victim tried).
func (pl *Plugin) RemovePod(_ context.Context, state fwk.CycleState, podToSchedule *v1.Pod, podInfoToRemove fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status {
	p := podInfoToRemove.GetPod()
	node := nodeName(p, nodeInfo)
	if node == "" {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	n := pl.nodeWhatIfFor(state, podToSchedule, node)
	key := podKey(p)
	if _, ok := n.added[key]; ok {
		delete(n.added, key)
		return nil
	}
	n.removed[key] = true
	return nil
}

func nodeName(p *v1.Pod, nodeInfo fwk.NodeInfo) string {
	if nodeInfo != nil && nodeInfo.Node() != nil {
		return nodeInfo.Node().Name
	}
	return p.Spec.NodeName
}

// filterWhatIf is Filter in a dry-run. With pods taken off and none put
// on, it steers DefaultPreemption to the victims the cache chooses: the
// first time it sees the node's victims (every lower-priority pod, as
// DefaultPreemption starts) it asks the cache for the set among them that
// makes the pod fit and comes first in kube-scheduler's order (the lowest
// highest priority, then the fewest victims of it, then the fewest
// victims: scheduler.PreparedPod.Victims, exact), and from then on a set of
// victims fits when it includes that one; DefaultPreemption then gives back
// every other pod, one at a time. Otherwise (pods nominated to the node, or
// no set found within the search budget) the node so changed is judged
// exactly (scheduler.PreparedPod.FilterWhatIf).
func (pl *Plugin) filterWhatIf(s *podState, node string, w *nodeWhatIf, withhold func(int) bool) error {
	removed := slices.Sorted(maps.Keys(w.removed))
	if len(w.added) == 0 && len(removed) > 0 && withhold == nil {
		m := w.memo
		m.once.Do(func() {
			pe, err := s.prepared.Victims(node, removed)
			m.victims, m.ok = pe.Victims, err == nil
		})
		if m.ok {
			for _, v := range m.victims {
				if !w.removed[v] {
					return errMoreVictims
				}
			}
			return nil
		}
	}
	added := make([]*scheduler.PreparedPod, 0, len(w.added))
	for _, k := range slices.Sorted(maps.Keys(w.added)) {
		added = append(added, w.added[k].prepared)
	}
	return s.prepared.FilterWhatIf(node, scheduler.WhatIf{Removed: removed, Added: added, WithholdGPU: withhold})
}
