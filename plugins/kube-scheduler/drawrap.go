package numaplace

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
)

// DRAName is the plugin that takes DynamicResources' place in numaplace's
// profile: kube-scheduler's own DynamicResources plugin for every pod
// except those whose ResourceClaims ask for numaplace's DeviceClasses,
// which NUMAPlace allocates (dra.go). The profile disables DynamicResources
// and enables this plugin after NUMAPlace (deploy/scheduler-config.yaml).
const DRAName = "NUMAPlaceDynamicResources"

// upstreamStateKey is where DynamicResources keeps its CycleState.
const upstreamStateKey fwk.StateKey = names.DynamicResources

// DRA is the [DRAName] plugin: DynamicResources, skipping NUMAPlace's
// pods. It reads from NUMAPlace's CycleState whether a pod is NUMAPlace's,
// so NUMAPlace's PreFilter must run first.
type DRA struct {
	up *dynamicresources.DynamicResources
}

// Compile-time checks of the extension points.
var (
	_ fwk.PreEnqueuePlugin  = (*DRA)(nil)
	_ fwk.PreFilterPlugin   = (*DRA)(nil)
	_ fwk.FilterPlugin      = (*DRA)(nil)
	_ fwk.PostFilterPlugin  = (*DRA)(nil)
	_ fwk.PreScorePlugin    = (*DRA)(nil)
	_ fwk.ScorePlugin       = (*DRA)(nil)
	_ fwk.ReservePlugin     = (*DRA)(nil)
	_ fwk.PreBindPlugin     = (*DRA)(nil)
	_ fwk.EnqueueExtensions = (*DRA)(nil)
)

// NewDRA builds the [DRAName] plugin (a framework PluginFactory): the
// in-tree DynamicResources plugin with the feature gates of the binary and
// DynamicResources' default arguments (filterTimeout 10s, bindingTimeout
// 600s); it takes no arguments of its own.
func NewDRA(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	if obj != nil {
		if u, ok := obj.(*runtime.Unknown); !ok || len(u.Raw) > 0 && string(u.Raw) != "{}" && string(u.Raw) != "null" {
			return nil, fmt.Errorf("%s: takes no arguments, got %T", DRAName, obj)
		}
	}
	args := &config.DynamicResourcesArgs{
		FilterTimeout:  &metav1.Duration{Duration: config.DynamicResourcesFilterTimeoutDefault},
		BindingTimeout: &metav1.Duration{Duration: config.DynamicResourcesBindingTimeoutDefault},
	}
	p, err := dynamicresources.New(ctx, args, h, feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DRAName, err)
	}
	up, ok := p.(*dynamicresources.DynamicResources)
	if !ok {
		return nil, fmt.Errorf("%s: DynamicResources built a %T", DRAName, p)
	}
	return &DRA{up: up}, nil
}

// Name returns [DRAName].
func (pl *DRA) Name() string { return DRAName }

// ours reports whether NUMAPlace's PreFilter took the pod's claims.
func ours(state fwk.CycleState) bool {
	if state == nil {
		return false
	}
	d, err := state.Read(stateKey)
	if err != nil {
		return false
	}
	s, ok := d.(*podState)
	return ok && s.dra != nil
}

// EventsToRegister returns DynamicResources' events (claims, slices,
// classes), which NUMAPlace's DRA pods wait for too.
func (pl *DRA) EventsToRegister(ctx context.Context) ([]fwk.ClusterEventWithHint, error) {
	return pl.up.EventsToRegister(ctx)
}

// PreEnqueue is DynamicResources': a pod waits until its claims exist.
func (pl *DRA) PreEnqueue(ctx context.Context, pod *v1.Pod) *fwk.Status {
	return pl.up.PreEnqueue(ctx, pod)
}

// PreFilter skips NUMAPlace's pods and is DynamicResources' for the others.
func (pl *DRA) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if ours(state) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return pl.up.PreFilter(ctx, state, pod, nodes)
}

// PreFilterExtensions is DynamicResources'.
func (pl *DRA) PreFilterExtensions() fwk.PreFilterExtensions { return pl.up.PreFilterExtensions() }

// Filter is DynamicResources' (the framework does not call it for pods
// whose PreFilter skipped).
func (pl *DRA) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	if ours(state) {
		return nil
	}
	return pl.up.Filter(ctx, state, pod, nodeInfo)
}

// PostFilter is DynamicResources' (which may deallocate a claim to make
// room) except for NUMAPlace's pods.
func (pl *DRA) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if ours(state) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if _, err := state.Read(upstreamStateKey); err != nil {
		// DynamicResources' PreFilter did not run (an earlier plugin
		// refused the pod): it has nothing to deallocate.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	return pl.up.PostFilter(ctx, state, pod, m)
}

// PreScore skips Score for NUMAPlace's pods (which NUMAPlace scores) and
// for pods without ResourceClaims in their spec: DynamicResources' Score
// rates only the subrequests a claim's firstAvailable list chose, so it is
// 0 on every node for them (a claim made for an extended resource asks
// exactly), and the framework need not call it on every feasible node.
func (pl *DRA) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	if ours(state) || len(pod.Spec.ResourceClaims) == 0 {
		return fwk.NewStatus(fwk.Skip)
	}
	return nil
}

// Score is DynamicResources' (prioritized-list ranks); 0 for NUMAPlace's
// pods, which NUMAPlace scores.
func (pl *DRA) Score(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	if ours(state) {
		return 0, nil
	}
	return pl.up.Score(ctx, state, pod, nodeInfo)
}

// ScoreExtensions is DynamicResources'.
func (pl *DRA) ScoreExtensions() fwk.ScoreExtensions { return pl.up.ScoreExtensions() }

// Reserve is DynamicResources' except for NUMAPlace's pods.
func (pl *DRA) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if ours(state) {
		return nil
	}
	return pl.up.Reserve(ctx, state, pod, nodeName)
}

// Unreserve is DynamicResources' except for NUMAPlace's pods.
func (pl *DRA) Unreserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	if ours(state) {
		return
	}
	pl.up.Unreserve(ctx, state, pod, nodeName)
}

// PreBindPreFlight is DynamicResources'; Skip for NUMAPlace's pods.
func (pl *DRA) PreBindPreFlight(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.PreBindPreFlightResult, *fwk.Status) {
	if ours(state) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	return pl.up.PreBindPreFlight(ctx, state, pod, nodeName)
}

// PreBind is DynamicResources' (it writes the claims' allocations) except
// for NUMAPlace's pods, whose claims NUMAPlace writes.
func (pl *DRA) PreBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if ours(state) {
		return nil
	}
	return pl.up.PreBind(ctx, state, pod, nodeName)
}

// SignPod is DynamicResources' (the scheduler's batching of equal pods).
func (pl *DRA) SignPod(ctx context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return pl.up.SignPod(ctx, pod)
}
