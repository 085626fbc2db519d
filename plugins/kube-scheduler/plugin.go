package numaplace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/metrics"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
)

// Name is the plugin's name in a KubeSchedulerConfiguration profile.
const Name = "NUMAPlace"

// syncTimeout bounds how long PreFilter waits for the plugin's informer
// handlers to have seen every node and pod once.
const syncTimeout = 30 * time.Second

// stateKey is where PreFilter keeps the parsed pod in the CycleState.
const stateKey fwk.StateKey = Name

// Prefix starts every reason of the plugin's refusals, so that an operator
// tells them from the other plugins' (NodeResourcesFit says "Insufficient
// cpu").
const Prefix = "numaplace: "

// Reasons of the plugin's own refusals (the others are the FilterError's,
// after [Prefix]).
const (
	// ReasonTextNoTopology is the status reason of a node without a
	// topology annotation refusing a pod with a NUMA spec.
	ReasonTextNoTopology = Prefix + "node(s) without a numaplace topology (annotation or NodeResourceTopology)"
	// ReasonTextMoreVictims is the refusal, in a preemption dry-run, of a
	// set of victims that leaves out one of the pods whose eviction makes
	// the pod fit in kube-scheduler's order (scheduler.PreparedPod.Victims):
	// it steers kube-scheduler's DefaultPreemption to evict exactly those.
	ReasonTextMoreVictims = Prefix + "the victims that make the pod fit (lowest priorities first, then fewest) are not all evicted"
)

// podState is the pod as PreFilter read it; immutable, so Clone shares it.
type podState struct {
	pod      *kube.Pod
	req      kube.PodRequest
	prepared *scheduler.PreparedPod // parsed once for Filter and Score
	policy   string                 // the metrics' policy label
	// dra is set for a pod whose ResourceClaims ask for numaplace's
	// DeviceClasses (dra.go): numaplace allocates them.
	dra *draPod
	// orig is the pod as converted, before podForDecision added its
	// claims' GPUs; gpus are the numaplace GPUs each node publishes in
	// its ResourceSlices (drawithhold.go), nil when the pod's decision
	// need not be kept from some GPUs.
	orig *kube.Pod
	gpus map[string]nodeGPUs
	// nics are the numaplace NICs each node publishes and offers the pod
	// (drawithholdnic.go), nil when the pod asks for none.
	nics map[string]nodeNICs
	// whatIf is set once PreFilterExtensions changed a node in some clone
	// of the cycle's state (shared by the clones): only then does Filter
	// look for a dry-run's changes.
	whatIf atomic.Bool
	// filters counts the cycle's Filter calls, to time one in
	// filterSample.
	filters atomic.Uint32
	// refused are the last refusals' reasons as a status carries them
	// (see Plugin.refusal), refusedNext the slot the next one goes to.
	refused     [refusalSlots]atomic.Pointer[refusalReasons]
	refusedNext atomic.Uint32
}

// refusalSlots is how many refusals' reasons a pod's state remembers (as
// many as scheduler.PreparedPod remembers refusals).
const refusalSlots = 4

// refusalReasons are a FilterError's reasons after [Prefix] (clipped, so
// that the statuses sharing them copy them on an append) and the counter
// of numaplace_refusals_total they count in.
type refusalReasons struct {
	from     []string // the FilterError's Reasons they were made from
	reasons  []string
	refusals metrics.CounterMetric
}

// filterSample: Filter times one call in filterSample (the first of each
// cycle, then every filterSample-th) for numaplace_filter_duration_seconds,
// so that the clock is not read twice for every node.
const filterSample = 16

// Clone implements fwk.StateData.
func (s *podState) Clone() fwk.StateData { return s }

// holdsAllocation reports whether the pod gets CPUs or GPUs from the
// allocator (a NUMA spec, or GPUs), that is whether numaplace decides
// anything for it.
func (s *podState) holdsAllocation() bool { return s.req.NUMA || s.req.GPUs > 0 }

// Plugin is the NUMAPlace scheduling framework plugin. Build it with [New]
// (the framework does, from a profile that enables it).
type Plugin struct {
	handle fwk.Handle
	args   Args
	cache  *scheduler.Cache
	logger klog.Logger
	ev     *events

	pathOnce sync.Once
	path     writePath // how the profile writes decisions (writePath)

	// dra is the framework's DRA state (claims with the scheduler's
	// assumed and pending allocations, slices, classes); draFeatures and
	// celCache are the structured allocator's (dra.go).
	dra         fwk.SharedDRAManager
	draFeatures structured.Features
	celCache    *cel.Cache
	// cuts indexes numaplace's devices in the nodes' slices (dracut.go).
	cuts sliceCuts

	// cycle is what the last PreFilter kept, with the CycleState and pod
	// it kept it for: Filter and Score of that cycle (hundreds of calls a
	// pod) find their podState here rather than in the CycleState's map.
	cycle atomic.Pointer[cycleMemo]

	// refs finds the cache's handle of a node object (noderefs.go).
	refs nodeRefs
}

// cycleMemo is a podState with the CycleState and pod PreFilter wrote it
// for.
type cycleMemo struct {
	state *framework.CycleState
	pod   *v1.Pod
	s     *podState
}

// Compile-time checks of the extension points.
var (
	_ fwk.PreFilterPlugin     = (*Plugin)(nil)
	_ fwk.PreFilterExtensions = (*Plugin)(nil)
	_ fwk.FilterPlugin        = (*Plugin)(nil)
	_ fwk.PreScorePlugin      = (*Plugin)(nil)
	_ fwk.ScorePlugin         = (*Plugin)(nil)
	_ fwk.ScoreExtensions     = (*Plugin)(nil)
	_ fwk.ReservePlugin       = (*Plugin)(nil)
	_ fwk.PreBindPlugin       = (*Plugin)(nil)
	_ fwk.BindPlugin          = (*Plugin)(nil)
	_ fwk.PostBindPlugin      = (*Plugin)(nil)
	_ fwk.EnqueueExtensions   = (*Plugin)(nil)
)

// New builds the plugin, the framework's PluginFactory: it decodes the
// arguments ([DecodeArgs]), creates the adapters/scheduler Cache, registers
// the metrics and adds event handlers to the handle's node and pod
// informers (they run once the scheduler starts the informer factory).
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := DecodeArgs(obj)
	if err != nil {
		return nil, err
	}
	cfg, err := args.Config()
	if err != nil {
		return nil, err
	}
	cache, err := scheduler.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if h == nil || h.SharedInformerFactory() == nil {
		return nil, fmt.Errorf("%s: the framework handle has no shared informer factory", Name)
	}
	if h.ClientSet() == nil {
		return nil, fmt.Errorf("%s: the framework handle has no clientset (Bind posts the decision with it)", Name)
	}
	if err := RegisterMetrics(); err != nil {
		return nil, fmt.Errorf("%s: registering metrics: %w", Name, err)
	}
	pl := &Plugin{handle: h, args: args, cache: cache, logger: klog.FromContext(ctx).WithName(Name), dra: h.SharedDRAManager()}
	pl.draFeatures = dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	pl.celCache = newCELCache(pl.draFeatures)
	ev, err := startEvents(ctx, pl, h.SharedInformerFactory(), h.KubeConfig())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	pl.ev = ev
	collected.Store(pl)
	return pl, nil
}

// Name returns [Name].
func (pl *Plugin) Name() string { return Name }

// Args returns the plugin's arguments.
func (pl *Plugin) Args() Args { return pl.args }

// Cache returns the plugin's adapters/scheduler cache (for inspection:
// changing it behind the informers' back breaks their bookkeeping).
func (pl *Plugin) Cache() *scheduler.Cache { return pl.cache }

// HasSynced reports whether the plugin's informer handlers have seen
// every node and pod of the informers' initial lists (after which its
// cache holds the cluster's state).
func (pl *Plugin) HasSynced() bool { return pl.ev.hasSynced() }

// Close removes the plugin's informer event handlers. The scheduler
// closes its plugins when it stops.
func (pl *Plugin) Close() error {
	collected.CompareAndSwap(pl, nil)
	if pl.ev == nil {
		return nil
	}
	return pl.ev.close()
}

// PreFilter brings the plugin's cache up to the cycle's snapshot (every
// node whose framework NodeInfo changed since the plugin last looked is
// synced from the informers' stores, so that a pod retried because a
// blocking pod was deleted or a node joined sees it, whichever informer
// handler ran first), reads the pod (kube.ParsePod over [PodFromV1]) and
// keeps it in the CycleState for the later extension points. An invalid
// pod is rejected as UnschedulableAndUnresolvable with the parser's
// message after [Prefix], which names the annotation, container or
// resource at fault. The first cycles wait (at most 30 seconds) until the
// informers have delivered every node and pod to the plugin, so that a
// restarted scheduler decides on the whole state. Claims of numaplace's
// devices that an earlier attempt allocated for the pod and did not bind
// it are deallocated first (draleftover.go), so that the pod is decided
// afresh.
func (pl *Plugin) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if err := pl.ev.waitSynced(ctx, syncTimeout); err != nil {
		return nil, fwk.AsStatus(err)
	}
	pl.ev.catchUp(nodes)
	pl.refs.size(len(nodes))
	if _, err := pl.releaseLeftovers(ctx, pod); err != nil {
		return nil, fwk.AsStatus(err)
	}
	s, err := pl.readPod(pod)
	if err != nil {
		refusalsTotal.WithLabelValues(PolicyInvalid, ReasonInvalidPod).Inc()
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, Prefix+err.Error())
	}
	state.Write(stateKey, s)
	if cs, ok := state.(*framework.CycleState); ok && cs != nil {
		pl.cycle.Store(&cycleMemo{state: cs, pod: pod, s: s})
	}
	return nil, nil
}

// readPod converts and parses the pod once.
func (pl *Plugin) readPod(pod *v1.Pod) (*podState, error) {
	d, err := pl.readDRA(pod)
	if err != nil {
		return nil, err
	}
	kp := PodFromV1(pod)
	ckp := kp
	if d != nil {
		ckp = podForDecision(kp, d.gpus)
	}
	var pp *scheduler.PreparedPod
	if d != nil && d.nics > 0 {
		// The NICs of the claims are in the joint decision (devices.rdma).
		pp, err = pl.cache.PrepareWithDevices(ckp, map[string]int{rdmaClass: d.nics})
	} else {
		pp, err = pl.cache.Prepare(ckp)
	}
	if err != nil {
		return nil, err
	}
	req := pp.Request()
	s := &podState{pod: ckp, req: req, prepared: pp, policy: policyLabel(req), dra: d, orig: kp}
	if err := pl.readGPUs(s); err != nil {
		return nil, err
	}
	pl.readNICs(s)
	return s, nil
}

// PreFilterExtensions returns the plugin, whose AddPod and RemovePod keep
// in the CycleState the pods a preemption dry-run takes off a node or puts
// on it (see whatif.go), so that DefaultPreemption evaluates victims with
// NUMA placement in mind.
func (pl *Plugin) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// podState returns what PreFilter kept, or reads the pod again when the
// CycleState has nothing (an extension point run without PreFilter).
func (pl *Plugin) podState(state fwk.CycleState, pod *v1.Pod) (*podState, error) {
	if cs, ok := state.(*framework.CycleState); ok && cs != nil {
		if m := pl.cycle.Load(); m != nil && m.state == cs && m.pod == pod {
			return m.s, nil
		}
	}
	if state != nil {
		if d, err := state.Read(stateKey); err == nil {
			if s, ok := d.(*podState); ok {
				return s, nil
			}
			return nil, fmt.Errorf("%s: cycle state %q holds %T", Name, stateKey, d)
		}
	}
	return pl.readPod(pod)
}

// refusal is the status of a refusal by the cache: the FilterError's short
// reasons after [Prefix] (node-independent, so kube-scheduler's summary
// counts nodes by reason). A refusal that no release of pods can resolve
// (FilterError.Never: the machine cannot hold the pod even empty, the node
// is not opted in, it has no usable topology) is UnschedulableAndUnresolvable,
// so that preemption skips the node; the others are code (Unschedulable).
func (pl *Plugin) refusal(code fwk.Code, s *podState, node string, err error) *fwk.Status {
	fe, _ := err.(*scheduler.FilterError) // most refusals: no unwrapping (it allocates)
	if fe == nil {
		if errors.Is(err, errMoreVictims) {
			return fwk.NewStatus(fwk.Unschedulable, ReasonTextMoreVictims)
		}
		var wrapped *scheduler.FilterError
		if errors.As(err, &wrapped) {
			fe = wrapped
		}
	}
	switch {
	case fe != nil:
		// The nodes of a cycle refusing for the same reasons share their
		// FilterError's Reasons (scheduler.PreparedPod.Filter), and the
		// reasons and counter made from them here.
		var r *refusalReasons
		for i := range s.refused {
			if m := s.refused[i].Load(); m != nil && len(m.from) == len(fe.Reasons) && len(fe.Reasons) > 0 && &m.from[0] == &fe.Reasons[0] {
				r = m
				break
			}
		}
		if r == nil {
			r = &refusalReasons{from: fe.Reasons, reasons: make([]string, len(fe.Reasons)),
				refusals: refusalsTotal.WithLabelValues(s.policy, reasonLabel(fe.Err))}
			for i, reason := range fe.Reasons {
				r.reasons[i] = Prefix + reason
			}
			s.refused[s.refusedNext.Add(1)%refusalSlots].Store(r)
		}
		r.refusals.Inc()
		if v := pl.logger.V(5); v.Enabled() {
			v.Info("Node refuses pod", "pod", s.pod.Key(), "node", node, "detail", fe.Detail)
		}
		if fe.Never {
			code = fwk.UnschedulableAndUnresolvable
		}
		return fwk.NewStatus(code, r.reasons...)
	case errors.Is(err, scheduler.ErrUnknownNode):
		if why := pl.ev.malformed(node); why != "" {
			refusalsTotal.WithLabelValues(s.policy, ReasonMalformed).Inc()
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
		}
		refusalsTotal.WithLabelValues(s.policy, ReasonNoTopology).Inc()
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ReasonTextNoTopology)
	case errors.Is(err, kube.ErrInvalidPod):
		refusalsTotal.WithLabelValues(PolicyInvalid, ReasonInvalidPod).Inc()
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, Prefix+err.Error())
	}
	return fwk.AsStatus(fmt.Errorf("%s: pod %s on node %s: %w", Name, s.pod.Key(), node, err))
}

// Filter says whether the node can take the pod now (Cache.Filter): the
// opt-in label, the allocator's admission under the pod's policy, the
// shared pool, memory. In a preemption dry-run (pods taken off the node or
// nominated to it by PreFilterExtensions) it judges the node so changed
// (see whatif.go). A node without a topology annotation, or with a
// malformed one, refuses pods with a NUMA spec and accepts the others
// (their resources are the other plugins' business there).
func (pl *Plugin) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := pl.podState(state, pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return fwk.NewStatus(fwk.Error, "node not found")
	}
	if s.filters.Add(1)%filterSample == 1 {
		defer observeFilter(s.policy, time.Now())
	}
	w := nodeWhatIfOf(s, state, node.Name)
	withhold := pl.withholdOn(s, node)
	switch {
	case w != nil:
		err = pl.filterWhatIf(s, node.Name, w, withhold)
	case withhold != nil && s.dra == nil:
		err = s.prepared.FilterWhatIf(node.Name, scheduler.WhatIf{WithholdGPU: withhold})
	default:
		if r, ok := pl.refs.get(pl.cache, node); ok {
			err = s.prepared.FilterRef(r)
		} else {
			err = s.prepared.Filter(node.Name)
		}
	}
	if fe, _ := err.(*scheduler.FilterError); fe != nil { // most refusals: no unwrapping (it allocates)
		if w == nil {
			if st := pl.waitForReleasing(s, node.Name); st != nil {
				return st
			}
		}
		return pl.refusal(fwk.Unschedulable, s, node.Name, err)
	}
	switch {
	case err == nil && s.dra != nil:
		return pl.filterDRA(ctx, s, node, schedulerWhatIf(w), withhold)
	case err == nil:
		return nil
	case errors.Is(err, scheduler.ErrUnknownNode) && !s.req.NUMA && s.dra == nil:
		return nil
	}
	if w == nil {
		if st := pl.waitForReleasing(s, node.Name); st != nil {
			return st
		}
	}
	return pl.refusal(fwk.Unschedulable, s, node.Name, err)
}

// PreScore skips scoring for pods that hold no allocation (no NUMA spec
// and no GPUs): their CPUs come from the shared pool, which the default
// resource scoring already weighs.
func (pl *Plugin) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	s, err := pl.podState(state, pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if !s.holdsAllocation() {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score rates the node for the pod on 0-100 (Cache.Score: alignment
// first, then the packing strategy). On a node that withholds some GPUs
// or NICs from the pod (drawithhold.go, drawithholdnic.go) it rates the
// node as Filter decided it, without those devices
// (PreparedPod.ScoreWhatIf). A node that has come to
// refuse the pod since Filter, or that has no topology annotation, scores
// 0.
func (pl *Plugin) Score(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := pl.podState(state, pod)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found")
	}
	var score int
	if w, ok := pl.withheldWhatIf(s, node.Name, pl.withholdOn(s, node)); ok {
		score, err = s.prepared.ScoreWhatIf(node.Name, w)
	} else if r, ok := pl.refs.get(pl.cache, node); ok {
		score, err = s.prepared.ScoreRef(r)
	} else {
		score, err = s.prepared.Score(node.Name)
	}
	if err == nil {
		return int64(score), nil
	}
	var fe *scheduler.FilterError
	if errors.As(err, &fe) || errors.Is(err, scheduler.ErrUnknownNode) {
		return 0, nil
	}
	return 0, fwk.AsStatus(fmt.Errorf("%s: scoring node %s for pod %s: %w", Name, node.Name, s.pod.Key(), err))
}

// ScoreExtensions returns the plugin, whose NormalizeScore scales the
// scores.
func (pl *Plugin) ScoreExtensions() fwk.ScoreExtensions { return pl }

// NormalizeScore maps the cache's 0-100 scale onto 0 to
// framework.MaxNodeScore (clamping anything outside).
func (pl *Plugin) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *v1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	for i := range scores {
		s := min(max(scores[i].Score, 0), 100)
		scores[i].Score = s * fwk.MaxNodeScore / 100
	}
	return nil
}

// Reserve places the pod on the node in the cache (Cache.Reserve), so
// that the following pods' Filter sees what it holds before it is bound.
// A refusal (the node changed since Filter) is Unschedulable with the
// reason; the scheduler then tries again. In a profile that neither binds
// with NUMAPlace nor runs its PreBind, a pod that needs a decision is an
// error (it would be bound without one).
func (pl *Plugin) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	s, err := pl.podState(state, pod)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if s.holdsAllocation() && pl.writePath() == writeNone {
		return fwk.NewStatus(fwk.Error, Name+": the profile has no way to write the decision: enable NUMAPlace at bind "+
			"(before any other bind plugin) or at preBind")
	}
	var withhold func(int) bool
	if s.gpus != nil && pl.handle != nil && pl.handle.SnapshotSharedLister() != nil {
		if ni, gerr := pl.handle.SnapshotSharedLister().NodeInfos().Get(nodeName); gerr == nil && ni.Node() != nil {
			withhold = pl.withholdOn(s, ni.Node())
		}
	}
	if w, ok := pl.withheldWhatIf(s, nodeName, withhold); ok && w.WithholdDevice != nil {
		err = s.prepared.ReserveWithholding(nodeName, w)
	} else {
		err = s.prepared.Reserve(nodeName, withhold)
	}
	switch {
	case err == nil:
		if pl.ev != nil {
			pl.ev.noteReserved(nodeName, podKey(pod))
		}
		if s.dra != nil {
			if st := pl.reserveDRA(ctx, state, s, pod, nodeName); st != nil {
				pl.Unreserve(ctx, state, pod, nodeName)
				return st
			}
		}
		return nil
	case errors.Is(err, scheduler.ErrUnknownNode) && !s.req.NUMA && s.dra == nil:
		return nil
	}
	return pl.refusal(fwk.Unschedulable, s, nodeName, err)
}

// Unreserve gives back what Reserve took (Cache.Unreserve). It is
// idempotent: a pod the cache does not hold, or already knows as bound,
// is left alone.
func (pl *Plugin) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	pl.unreserveDRA(ctx, state, pod)
	err := pl.cache.Unreserve(&kube.Pod{Namespace: pod.Namespace, Name: pod.Name})
	if pl.ev != nil {
		pl.ev.forgetReserved(nodeName, podKey(pod))
	}
	switch {
	case err == nil, errors.Is(err, allocator.ErrUnknownID), errors.Is(err, scheduler.ErrBound):
	default:
		pl.logger.Error(err, "Unreserve", "pod", klog.KObj(pod), "node", nodeName)
	}
}

// writePath is how the profile gets a pod's decision onto it.
type writePath int

const (
	// writeByBind: NUMAPlace is the profile's first bind plugin, and its
	// Bind posts the Binding with the decision in its annotations (one
	// write per pod).
	writeByBind writePath = iota + 1
	// writeByPreBind: another plugin binds, and NUMAPlace's PreBind
	// patches the decision on the pod before (two more writes per pod:
	// the patch, and kube-scheduler's nominatedNodeName patch that a
	// PreBind with work to do brings).
	writeByPreBind
	// writeNone: the profile neither binds with NUMAPlace nor runs its
	// PreBind; Reserve refuses pods that need a decision.
	writeNone
)

// pluginLister is what the framework handle offers to read the profile's
// plugins (kube-scheduler's frameworkImpl has it).
type pluginLister interface {
	ListPlugins() *schedconfig.Plugins
}

// writePath returns how the profile writes the decision, read once from the
// framework's plugin lists (at the first pod, when the framework is built).
// A handle that cannot list its plugins (a test's) is taken to run
// PreBind.
func (pl *Plugin) writePath() writePath {
	pl.pathOnce.Do(func() {
		pl.path = writeByPreBind
		l, ok := pl.handle.(pluginLister)
		if !ok || l == nil {
			return
		}
		ps := l.ListPlugins()
		if ps == nil {
			return
		}
		switch {
		case len(ps.Bind.Enabled) > 0 && ps.Bind.Enabled[0].Name == Name:
			pl.path = writeByBind
			pl.logger.V(1).Info("The decision travels in the pod's Binding (one API write per pod)")
		case slices.ContainsFunc(ps.PreBind.Enabled, func(p schedconfig.Plugin) bool { return p.Name == Name }):
			pl.logger.Info("NUMAPlace is not the profile's first bind plugin: PreBind patches the decision on the pod "+
				"before another plugin binds it, two more API writes per pod; enable NUMAPlace at bind and disable DefaultBinder "+
				"there (deploy/scheduler-config.yaml)", "bindPlugins", pluginNames(ps.Bind.Enabled))
		default:
			pl.path = writeNone
			pl.logger.Error(nil, "NUMAPlace is neither the profile's first bind plugin nor a preBind plugin: pods that need a "+
				"decision are refused at Reserve; enable NUMAPlace at bind and disable DefaultBinder there (deploy/scheduler-config.yaml)",
				"bindPlugins", pluginNames(ps.Bind.Enabled))
		}
	})
	return pl.path
}

func pluginNames(ps []schedconfig.Plugin) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// decision returns the annotations the pod's binding to the node carries:
// none for a pod that holds no allocation (no NUMA spec and no GPUs) and
// for a pod without a NUMA spec on a node the cache does not model (Reserve
// left it out of the cache); the decision ([scheduler.Cache.PreBind]) for the
// others. A pod the cache no longer holds although Reserve put it there (a
// change of the node's machine dropped its reservation, or the pod was
// removed meanwhile) is an error, so that the pod is tried again rather than
// bound without its decision.
func (pl *Plugin) decision(state fwk.CycleState, pod *v1.Pod, nodeName string) (map[string]string, error) {
	st, ok := pl.cache.Pod(podKey(pod))
	if ok && st.Allocation == nil {
		return nil, nil
	}
	if !ok {
		s, err := pl.podState(state, pod)
		if err != nil {
			return nil, err
		}
		if _, known := pl.cache.Free(nodeName); !known && !s.req.NUMA { // cheap: whether the cache has the node
			return nil, nil
		}
	}
	ann, err := pl.cache.PreBind(&kube.Pod{Namespace: pod.Namespace, Name: pod.Name})
	if err != nil {
		return nil, fmt.Errorf("%s: pod %s on node %s: %w", Name, podKey(pod), nodeName, err)
	}
	return ann, nil
}

// PreBindPreFlight says whether PreBind has anything to write: Skip when
// NUMAPlace binds (the decision travels in the Binding, see [Plugin.Bind]),
// so that kube-scheduler makes no nominatedNodeName patch for it. Where
// another plugin binds, Skip for a pod that holds no allocation and for a
// pod without a NUMA spec on a node the cache does not model; a pod whose
// reservation is gone is not skipped: PreBind fails for it.
func (pl *Plugin) PreBindPreFlight(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if pl.writePath() == writeByBind {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if reservedOf(state) != nil {
		return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
	}
	st, ok := pl.cache.Pod(podKey(pod))
	if ok && st.Allocation == nil {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if !ok {
		s, err := pl.podState(state, pod)
		if err != nil {
			return nil, fwk.AsStatus(err)
		}
		if _, known := pl.cache.Free(nodeName); !known && !s.req.NUMA {
			return nil, fwk.NewStatus(fwk.Skip)
		}
	}
	return &fwk.PreBindPreFlightResult{AllowParallel: true}, nil
}

// PreBind does nothing when NUMAPlace binds (the decision travels in the
// Binding). Where another plugin binds, it writes the decision on the pod
// before that: the numaplace.io/allocation annotation (and Koordinator's
// resource-status and device-allocated with Args.KoordinatorAnnotations),
// by a JSON merge patch through the handle's clientset. The patch names the
// pod's UID, so a pod deleted and created again under the same name is not
// written.
func (pl *Plugin) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if pl.writePath() == writeByBind {
		return nil
	}
	if err := pl.writeClaims(ctx, state, pod); err != nil {
		return fwk.AsStatus(fmt.Errorf("%s: %w", Name, err))
	}
	ann, err := pl.decision(state, pod, nodeName)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if len(ann) == 0 {
		return nil
	}
	patch, err := annotationPatch(pod.UID, ann)
	if err != nil {
		return fwk.AsStatus(err)
	}
	_, err = pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fwk.AsStatus(fmt.Errorf("%s: writing %s on pod %s: %w", Name, kube.AnnotationAllocation, podKey(pod), err))
	}
	pl.logger.V(3).Info("Decision written", "pod", klog.KObj(pod), "node", nodeName, "decision", ann[kube.AnnotationAllocation])
	return nil
}

// annotationPatch is the JSON merge patch that sets the annotations, with
// the UID as a precondition.
func annotationPatch(uid types.UID, ann map[string]string) ([]byte, error) {
	type meta struct {
		UID         types.UID         `json:"uid,omitempty"`
		Annotations map[string]string `json:"annotations"`
	}
	return json.Marshal(struct {
		Metadata meta `json:"metadata"`
	}{meta{UID: uid, Annotations: ann}})
}

// Bind binds the pod to the node with one API write: a Binding (with the
// pod's UID as a precondition) whose metadata.annotations carry the
// decision, which the API server copies onto the pod in the same update
// that sets spec.nodeName (pods/binding). So a pod is never bound without
// its decision, and a decision never names a pod that was not bound. Pods
// that hold no allocation get a Binding without annotations, as
// DefaultBinder posts. With the scheduler's asynchronous API calls
// (SchedulerAsyncAPICalls) the Binding goes through its API cacher, as
// DefaultBinder's does. Where another bind plugin comes first (PreBind
// writes the decision then), Bind skips.
func (pl *Plugin) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if pl.writePath() != writeByBind {
		return fwk.NewStatus(fwk.Skip)
	}
	if err := pl.writeClaims(ctx, state, pod); err != nil {
		return fwk.AsStatus(fmt.Errorf("%s: %w", Name, err))
	}
	ann, err := pl.decision(state, pod, nodeName)
	if err != nil {
		return fwk.AsStatus(err)
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: ann},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if c := pl.handle.APICacher(); c != nil {
		onFinish, err := c.BindPod(binding)
		if err == nil {
			err = c.WaitOnFinish(ctx, onFinish)
		}
		if err != nil {
			return fwk.AsStatus(fmt.Errorf("%s: binding pod %s to node %s: %w", Name, podKey(pod), nodeName, err))
		}
	} else if err := schedutil.BindPod(ctx, pl.handle.ClientSet(), binding); err != nil {
		return fwk.AsStatus(fmt.Errorf("%s: binding pod %s to node %s: %w", Name, podKey(pod), nodeName, err))
	}
	if len(ann) > 0 {
		pl.logger.V(3).Info("Pod bound with its decision", "pod", klog.KObj(pod), "node", nodeName, "decision", ann[kube.AnnotationAllocation])
	}
	return nil
}

// PostBind counts the placement (numaplace_placements_total).
func (pl *Plugin) PostBind(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ string) {
	label := PolicyShared
	if s, err := pl.podState(state, pod); err == nil {
		label = s.policy
	}
	placementsTotal.WithLabelValues(label).Inc()
}

// EventsToRegister returns the cluster events that may make a pod this
// plugin refused schedulable: a node added or changing its labels or
// annotations (the topology annotation, the opt-in label), a bound pod
// deleted or changed (it frees CPUs and GPUs), and the pod itself updated
// (an invalid pod's annotations fixed). The queueing hints judge from the
// event alone; the plugin's cache is brought up to date by PreFilter in the
// cycle that retries the pod, so no retry sees the cache before the event.
func (pl *Plugin) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeLabel | fwk.UpdateNodeAnnotation},
			QueueingHintFn: pl.isSchedulableAfterNodeChange},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete},
			QueueingHintFn: pl.isSchedulableAfterPodDelete},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Update},
			QueueingHintFn: pl.isSchedulableAfterAssignedPodUpdate},
		{Event: fwk.ClusterEvent{Resource: fwk.TargetPod, ActionType: fwk.Update},
			QueueingHintFn: pl.isSchedulableAfterTargetPodUpdate},
		// A claim deallocated or deleted frees the GPUs the cache counted
		// for it (draevents.go); a claim made or changed may be what a
		// DRA pod waited for.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update | fwk.Delete}},
		// A node's ResourceSlices (re)published, or a DeviceClass made or
		// changed, may admit a pod whose claims (or GPUs on a node
		// splitting them between DRA and the device plugin) NUMAPlace
		// refused, as DynamicResources requeues its pods on them. A
		// DeviceTaintRule added, changed or deleted arrives here too: the
		// scheduler's ResourceSlice events come from the slice tracker
		// (k8s.io/dynamic-resource-allocation/resourceslice/tracker), which
		// sends an Update of each slice whose devices' taints the rule
		// changes; the framework has no DeviceTaintRule event of its own.
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update},
			QueueingHintFn: pl.isSchedulableAfterDRAChange},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update},
			QueueingHintFn: pl.isSchedulableAfterDRAChange},
	}, nil
}

// isSchedulableAfterDRAChange: Queue a pod with ResourceClaims or with
// aliyun.com/gpu (which DRA may serve, or which a node's slices keep from
// the device plugin) for a ResourceSlice or DeviceClass added or changed.
func (pl *Plugin) isSchedulableAfterDRAChange(logger klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if len(pod.Spec.ResourceClaims) > 0 {
		return fwk.Queue, nil
	}
	for i := range pod.Spec.Containers {
		if q, ok := pod.Spec.Containers[i].Resources.Requests[kube.ResourceAliyunGPU]; ok && !q.IsZero() {
			return fwk.Queue, nil
		}
	}
	logger.V(6).Info("DRA change does not concern the pod", "pod", klog.KObj(pod))
	return fwk.QueueSkip, nil
}

// isSchedulableAfterNodeChange: Queue for a node that arrives with a
// topology (an annotation, or a NodeResourceTopology object), or whose
// annotation, opt-in label or memory-alignment label changes.
func (pl *Plugin) isSchedulableAfterNodeChange(logger klog.Logger, pod *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldNode, newNode, err := schedutil.As[*v1.Node](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	_, newTopo, ok := topologySource(newNode)
	if !ok && (pl.ev == nil || pl.ev.nrt == nil) {
		return fwk.QueueSkip, nil
	}
	if !ok {
		if _, found := pl.ev.nrt.get(newNode.Name); !found {
			return fwk.QueueSkip, nil
		}
	}
	if oldNode == nil {
		return fwk.Queue, nil
	}
	_, oldTopo, _ := topologySource(oldNode)
	label := pl.cache.Config().OptInLabel
	if oldTopo != newTopo || oldNode.Labels[label] != newNode.Labels[label] ||
		oldNode.Labels[kube.LabelMemoryAlignment] != newNode.Labels[kube.LabelMemoryAlignment] {
		logger.V(5).Info("Node topology or opt-in label changed", "pod", klog.KObj(pod), "node", klog.KObj(newNode))
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterPodDelete: Queue for a deleted pod that was bound (it
// held CPUs, GPUs, memory or a share of the shared pool).
func (pl *Plugin) isSchedulableAfterPodDelete(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	deleted, _, err := schedutil.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if deleted.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// isSchedulableAfterAssignedPodUpdate: Queue for a bound pod that finished,
// whose decision changed, or whose requests changed (an in-place resize).
func (pl *Plugin) isSchedulableAfterAssignedPodUpdate(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldPod, newPod, err := schedutil.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if oldPod == nil || terminal(newPod) && !terminal(oldPod) ||
		oldPod.Annotations[kube.AnnotationAllocation] != newPod.Annotations[kube.AnnotationAllocation] {
		return fwk.Queue, nil
	}
	for i := range newPod.Spec.Containers {
		if i >= len(oldPod.Spec.Containers) || !equality.Semantic.DeepEqual(oldPod.Spec.Containers[i].Resources, newPod.Spec.Containers[i].Resources) {
			return fwk.Queue, nil
		}
	}
	return fwk.QueueSkip, nil
}

func (pl *Plugin) isSchedulableAfterTargetPodUpdate(_ klog.Logger, _ *v1.Pod, oldObj, newObj any) (fwk.QueueingHint, error) {
	oldPod, newPod, err := schedutil.As[*v1.Pod](oldObj, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	if oldPod == nil || !maps.Equal(oldPod.Annotations, newPod.Annotations) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}
