package numaplace

import (
	"errors"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
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
	ReasonInsufficient = "Insufficient" // the node's free resources do not cover the pod
	ReasonNoNUMAFit    = "NoNUMAFit"    // not on NUMA nodes the policy allows
	ReasonExclusivity  = "Exclusivity"  // singleNUMANodeExclusive forbids every placement
	ReasonNotOptedIn   = "NotOptedIn"   // the node lacks the opt-in label
	ReasonSharedPool   = "SharedPool"   // exclusive CPUs would starve the shared pool
	ReasonNoTopology   = "NoTopology"   // the node has no topology annotation
	ReasonNodeRemoved  = "NodeRemoved"  // the node left the cache meanwhile
	ReasonInvalidPod   = "InvalidPod"   // the pod is written wrongly (PreFilter)
	ReasonOther        = "Other"
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
		Help:           "Latency of the NUMAPlace plugin's Filter for one pod and one node, by policy.",
		Buckets:        metrics.ExponentialBuckets(1e-6, 4, 10), // 1us to 0.26s
		StabilityLevel: metrics.ALPHA,
	}, []string{"policy"})

	registerOnce sync.Once
	registerErr  error
)

// RegisterMetrics registers the plugin's metrics in kube-scheduler's
// registry (k8s.io/component-base/metrics/legacyregistry), which the
// scheduler serves on /metrics:
//
//   - numaplace_placements_total{policy}
//   - numaplace_refusals_total{policy,reason}
//   - numaplace_filter_duration_seconds{policy} (histogram)
//
// It runs once; later calls return the first call's error. New calls it.
func RegisterMetrics() error {
	registerOnce.Do(func() {
		registerErr = errors.Join(
			legacyregistry.Register(placementsTotal),
			legacyregistry.Register(refusalsTotal),
			legacyregistry.Register(filterDuration),
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
