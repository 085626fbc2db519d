package numaplace

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

// Metric label values besides the policies' names ("SingleNUMANode",
// "Restricted", "BestEffort", "None").
const (
	// PolicyShared labels pods without a NUMA spec (placed on the shared
	// CPU pool).
	PolicyShared = "shared"
	// PolicyInvalid labels pods refused at PreFilter as invalid.
	PolicyInvalid = "invalid"
)

// Refusal reasons, the "reason" label of numaplace_refusals_total: the
// category of the refusal, not its text (whose numbers would make the
// label unbounded).
const (
	ReasonInsufficient = "Insufficient"      // the node's free resources do not cover the pod
	ReasonNoNUMAFit    = "NoNUMAFit"         // not on NUMA nodes the policy allows
	ReasonExclusivity  = "Exclusivity"       // singleNUMANodeExclusive forbids every placement
	ReasonNotOptedIn   = "NotOptedIn"        // the node lacks the opt-in label
	ReasonSharedPool   = "SharedPool"        // exclusive CPUs would starve the shared pool
	ReasonNoTopology   = "NoTopology"        // the node has no topology annotation
	ReasonMalformed    = "TopologyMalformed" // the node's topology annotation cannot be read
	ReasonNodeRemoved  = "NodeRemoved"       // the node left the cache meanwhile
	ReasonInvalidPod   = "InvalidPod"        // the pod is written wrongly (PreFilter)
	ReasonOther        = "Other"
)

// Results of a topology annotation change, the "result" label of
// numaplace_topology_updates_total.
const (
	// UpdateApplied: the new machine is in use and every bound pod fits it.
	UpdateApplied = "applied"
	// UpdateMisfit: the new machine is in use; some bound pods misfit it
	// (or cannot be read, or request more than it has) and stay accounted
	// on what exists: the node is marked.
	UpdateMisfit = "misfit"
	// UpdateMalformed: the annotation cannot be read; the node takes no
	// NUMA-aware pods until it is fixed (refused).
	UpdateMalformed = "malformed"
)

// allSources are the values of numaplace_nodes_by_source's label.
var allSources = []string{SourceTopology, SourceNRTAnnot, SourceKoordinator, SourceNRT, SourceNRTZones}

// MisfitUnaccounted is the "kind" of a bound pod that cannot be read at all
// (its holdings are not accounted), besides scheduler.MisfitKind's.
const MisfitUnaccounted = "Unaccounted"

// States of a node with a topology annotation, the "state" label of
// numaplace_nodes.
const (
	NodeOK        = "ok"        // every bound pod accounted exactly
	NodeMisfit    = "misfit"    // marked: misfits, unaccounted pods or overcommit
	NodeMalformed = "malformed" // the topology annotation (or a label the plugin reads) cannot be read
)

var (
	placementsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "numaplace",
		Name:           "placements_total",
		Help:           "Pods bound by a profile with the NUMAPlace plugin, by policy (shared: pods without a NUMA spec).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy"})
	refusalsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "numaplace",
		Name:      "refusals_total",
		Help: "Refusals by the NUMAPlace plugin, by policy and reason: one per node that a pod's Filter (or a Reserve) refuses, " +
			"and one per scheduling attempt of a pod refused as invalid at PreFilter.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy", "reason"})
	filterDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "numaplace",
		Name:           "filter_duration_seconds",
		Help:           "Latency of the NUMAPlace plugin's Filter for one pod and one node, by policy (one call in 16 is timed).",
		Buckets:        metrics.ExponentialBuckets(1e-6, 4, 10), // 1us to 0.26s
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy"})
	topologyUpdates = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "numaplace",
		Name:      "topology_updates_total",
		Help: "Topology annotations read (a node seen with a new value), by result: applied, misfit (in use, some bound pods " +
			"misfit the new machine) or malformed (refused, as is a node whose labels cannot be read: it takes no NUMA-aware pods).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	podMisfits = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "numaplace",
		Name:      "pod_misfits_total",
		Help: "Bound pods found misfitting their node, by kind: Lost (the decision names what the machine lacks or another " +
			"pod holds), Unplaced, Invalid, Unaccounted (cannot be read at all); one per pod and reason.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})

	nodesDesc = metrics.NewDesc("numaplace_nodes",
		"Nodes with a numaplace topology annotation, by state: ok, misfit (marked with the NUMAPlaceMisfit condition) or malformed "+
			"(the annotation, or a label the plugin reads, cannot be read: the node takes no NUMA-aware pods).",
		[]string{"state"}, nil, metrics.ALPHA, "")
	sourcesDesc = metrics.NewDesc("numaplace_nodes_by_source",
		"Nodes in use by the topology source their machine is read from: annotation (numaplace.io/topology), nrt-annotation, "+
			"koordinator-annotation, noderesourcetopology (numaplace's own, exact), noderesourcetopology-zones (rebuilt from the zones, "+
			"as NFD's topology-updater writes them); with an annotation and an object, the newer.",
		[]string{"source"}, nil, metrics.ALPHA, "")
	misfitPodsDesc = metrics.NewDesc("numaplace_misfit_pods",
		"Bound pods whose accounting is not exactly their decision now, by kind (Lost, Unplaced, Invalid, Unaccounted).",
		[]string{"kind"}, nil, metrics.ALPHA, "")
	freeCPUsDesc = metrics.NewDesc("numaplace_numa_free_cpus",
		"Allocatable CPUs no exclusive allocation holds, per node and NUMA node (ID); one series per NUMA node of every node with a "+
			"usable topology (numaMetrics: false turns it off).",
		[]string{"node", "numa_node"}, nil, metrics.ALPHA, "")
	freeGPUsDesc = metrics.NewDesc("numaplace_numa_free_gpus",
		"Healthy GPUs no allocation holds, per node and NUMA node (ID; \"-1\" for GPUs of unknown NUMA node); one series per NUMA "+
			"node of every node with a usable topology (numaMetrics: false turns it off).",
		[]string{"node", "numa_node"}, nil, metrics.ALPHA, "")

	registerOnce sync.Once
	registerErr  error

	// collected is the plugin whose state the collector reports (the one
	// built last; Close clears it).
	collected atomic.Pointer[Plugin]
)

// stateCollector reports the plugin's state at each scrape: the nodes by
// state, the misfit pods by kind, and the free CPUs and GPUs per NUMA node.
type stateCollector struct {
	metrics.BaseStableCollector
}

// DescribeWithStability implements metrics.StableCollector.
func (*stateCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- nodesDesc
	ch <- sourcesDesc
	ch <- misfitPodsDesc
	ch <- freeCPUsDesc
	ch <- freeGPUsDesc
}

// CollectWithStability implements metrics.StableCollector.
func (*stateCollector) CollectWithStability(ch chan<- metrics.Metric) {
	if pl := collected.Load(); pl != nil && pl.ev != nil {
		pl.collect(ch)
	}
}

// collect writes the plugin's state metrics: the counts under the
// records' lock, the free amounts from the cache (a few counters per NUMA
// node).
func (pl *Plugin) collect(ch chan<- metrics.Metric) {
	e := pl.ev
	nodes := map[string]int{NodeOK: 0, NodeMisfit: 0, NodeMalformed: 0}
	sources := map[string]int{}
	for _, src := range allSources {
		sources[src] = 0
	}
	kinds := map[string]int{}
	for _, k := range misfitKinds {
		kinds[k] = 0
	}
	var unknownGPUs []string // nodes with GPUs of unknown NUMA node
	e.mu.Lock()
	for name, rec := range e.recs {
		if rec.machine != nil && slices.ContainsFunc(rec.machine.GPUs(), func(g topology.GPU) bool { return g.NUMANode < 0 }) {
			unknownGPUs = append(unknownGPUs, name)
		}
		switch {
		case rec.err != nil:
			nodes[NodeMalformed]++
		case markOf(rec) != nil:
			nodes[NodeMisfit]++
		default:
			nodes[NodeOK]++
		}
		if rec.inCache {
			sources[rec.source]++
		}
		for _, m := range rec.misfits {
			kinds[string(m.Kind)]++
		}
		kinds[MisfitUnaccounted] += len(rec.unaccounted)
	}
	e.mu.Unlock()
	for _, s := range []string{NodeOK, NodeMisfit, NodeMalformed} {
		ch <- metrics.NewLazyConstMetric(nodesDesc, metrics.GaugeValue, float64(nodes[s]), s)
	}
	for _, src := range allSources {
		ch <- metrics.NewLazyConstMetric(sourcesDesc, metrics.GaugeValue, float64(sources[src]), src)
	}
	for _, k := range misfitKinds {
		ch <- metrics.NewLazyConstMetric(misfitPodsDesc, metrics.GaugeValue, float64(kinds[k]), k)
	}
	if !pl.args.numaMetrics() {
		return
	}
	for _, name := range pl.cache.Nodes() {
		free, ok := pl.cache.Free(name)
		if !ok {
			continue
		}
		for _, f := range free {
			id := strconv.Itoa(int(f.ID))
			ch <- metrics.NewLazyConstMetric(freeCPUsDesc, metrics.GaugeValue, float64(f.CPUs), name, id)
			ch <- metrics.NewLazyConstMetric(freeGPUsDesc, metrics.GaugeValue, float64(f.GPUs), name, id)
		}
	}
	for _, name := range unknownGPUs {
		if st, ok := pl.cache.Node(name); ok {
			if unknown := unknownNodeFreeGPUs(st); unknown >= 0 {
				ch <- metrics.NewLazyConstMetric(freeGPUsDesc, metrics.GaugeValue, float64(unknown), name, "-1")
			}
		}
	}
}

// unknownNodeFreeGPUs counts the free GPUs of unknown NUMA node, or -1 when
// the machine has none.
func unknownNodeFreeGPUs(st scheduler.NodeStatus) int {
	total, free := 0, 0
	held := map[int]bool{}
	for _, a := range st.Allocations {
		for _, g := range a.GPUs {
			held[g] = true
		}
	}
	for _, g := range st.Machine.GPUs() {
		if g.NUMANode >= 0 {
			continue
		}
		total++
		if !held[g.ID] {
			free++
		}
	}
	if total == 0 {
		return -1
	}
	return free
}

// RegisterMetrics registers the plugin's metrics in kube-scheduler's
// registry (k8s.io/component-base/metrics/legacyregistry), which the
// scheduler serves on /metrics:
//
//   - numaplace_placements_total{policy}
//   - numaplace_refusals_total{policy,reason}
//   - numaplace_filter_duration_seconds{policy} (histogram)
//   - numaplace_topology_updates_total{result}
//   - numaplace_pod_misfits_total{kind}
//   - numaplace_nodes{state}, numaplace_nodes_by_source{source} and
//     numaplace_misfit_pods{kind} (gauges)
//   - numaplace_numa_free_cpus{node,numa_node} and
//     numaplace_numa_free_gpus{node,numa_node} (gauges, one series per
//     NUMA node of every node: bounded by the cluster's NUMA nodes)
//
// It runs once; later calls return the first call's error. New calls it.
func RegisterMetrics() error {
	registerOnce.Do(func() {
		registerErr = errors.Join(
			legacyregistry.Register(placementsTotal),
			legacyregistry.Register(refusalsTotal),
			legacyregistry.Register(filterDuration),
			legacyregistry.Register(topologyUpdates),
			legacyregistry.Register(podMisfits),
			legacyregistry.CustomRegister(&stateCollector{}),
		)
	})
	return registerErr
}

// policyLabel is the policy label of a parsed pod.
func policyLabel(r kube.PodRequest) string {
	if !r.NUMA {
		return PolicyShared
	}
	return r.Spec.Policy.String()
}

// reasonLabel is the reason label of a refusal.
func reasonLabel(err error) string {
	switch {
	case errors.Is(err, scheduler.ErrNotOptedIn):
		return ReasonNotOptedIn
	case errors.Is(err, scheduler.ErrSharedPool):
		return ReasonSharedPool
	case errors.Is(err, scheduler.ErrNodeRemoved):
		return ReasonNodeRemoved
	case errors.Is(err, allocator.ErrExclusivity):
		return ReasonExclusivity
	case errors.Is(err, allocator.ErrNoNUMAFit):
		return ReasonNoNUMAFit
	case errors.Is(err, allocator.ErrInsufficient):
		return ReasonInsufficient
	case errors.Is(err, kube.ErrInvalidPod):
		return ReasonInvalidPod
	case errors.Is(err, ErrNoTopology):
		return ReasonNoTopology
	}
	return ReasonOther
}

func observeFilter(policy string, start time.Time) {
	filterDuration.WithLabelValues(policy).Observe(time.Since(start).Seconds())
}
