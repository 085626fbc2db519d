package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/numaplace/numaplace/internal/quote"
)

// Defaults of a Config's zero fields.
const (
	// DefaultNodes and DefaultPods are the small default run: it finishes
	// in seconds on two cores.
	DefaultNodes = 200
	DefaultPods  = 5000
	// DefaultLoad is the offered GPU load: the GPU-hours the trace asks for
	// per hour, as a share of the cluster's GPUs. Above 1 the cluster
	// saturates and a queue builds, so the allocation rate climbs to what
	// each setup can reach.
	DefaultLoad = 1.1
	// DefaultMeanDuration is the mean of the pods' run times (lognormal).
	DefaultMeanDuration = time.Hour
	// DefaultPatience is how long a pod waits to be placed before it is
	// counted as unschedulable.
	DefaultPatience = time.Hour
	// DefaultRetriesPerDeparture bounds the scheduling cycles a departure
	// triggers for waiting pods.
	DefaultRetriesPerDeparture = 8
	// DefaultSamples is the number of intervals of the time series.
	DefaultSamples = 240
	// DefaultProgressEvery is the interval between two progress lines.
	DefaultProgressEvery = 5 * time.Second
)

// MaxNodes and MaxPods bound a run (a larger one would not finish in
// reasonable time on a small machine; the limits are far above the scale
// run).
const (
	MaxNodes = 1_000_000
	MaxPods  = 10_000_000
)

// ErrConfig is the category of invalid configurations.
var ErrConfig = errors.New("invalid simulation configuration")

// Setup is one way of running the cluster: who schedules and who admits.
type Setup byte

// The setups, named by their letter in the reports and the --setups flag.
const (
	// KubeletSingleNUMANode (a): a NUMA-blind scheduler (node totals only)
	// and the kubelet's Topology Manager policy single-numa-node on every
	// node, which refuses pods at admission (AdmissionError).
	KubeletSingleNUMANode Setup = 'a'
	// KubeletBestEffort (b): the same scheduler and the kubelet's
	// best-effort policy, which admits every pod whose totals fit and
	// aligns it as far as it can.
	KubeletBestEffort Setup = 'b'
	// Numaplace (c): numaplace's scheduler adapter (adapters/scheduler)
	// and node agent (adapters/kubelet) with each pod's own policy.
	Numaplace Setup = 'c'
)

// AllSetups lists the setups in report order.
var AllSetups = []Setup{KubeletSingleNUMANode, KubeletBestEffort, Numaplace}

// String returns the setup's letter and description, such as
// "c: numaplace".
func (s Setup) String() string {
	switch s {
	case KubeletSingleNUMANode:
		return "a: NUMA-blind + kubelet single-numa-node"
	case KubeletBestEffort:
		return "b: NUMA-blind + kubelet best-effort"
	case Numaplace:
		return "c: numaplace"
	}
	return fmt.Sprintf("Setup(%q)", byte(s))
}

// Letter returns the setup's letter ("a", "b" or "c").
func (s Setup) Letter() string { return string(rune(s)) }

// valid reports whether s is one of the declared setups.
func (s Setup) valid() bool { return slices.Contains(AllSetups, s) }

// ParseSetups reads a comma-separated list of setup letters, such as "a,c".
// The setups run in the order given; a letter may appear once.
func ParseSetups(list string) ([]Setup, error) {
	var out []Setup
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if len(f) != 1 || !Setup(f[0]).valid() {
			return nil, fmt.Errorf("%w: unknown setup %s (want a, b or c)", ErrConfig, quote.Short(f))
		}
		s := Setup(f[0])
		if slices.Contains(out, s) {
			return nil, fmt.Errorf("%w: setup %s given twice", ErrConfig, quote.Short(f))
		}
		out = append(out, s)
	}
	return out, nil
}

// Config describes a run. The zero value of every field except Seed means
// its default.
type Config struct {
	// Nodes is the number of nodes (default DefaultNodes), alternately
	// dgx-h100 (even indices) and dgx-a100 (odd indices).
	Nodes int
	// Pods is the number of pods of the trace (default DefaultPods).
	Pods int
	// Seed seeds the trace (every value, 0 included, is a seed).
	Seed uint64
	// Setups are the setups to run, in order (nil: AllSetups).
	Setups []Setup
	// Load is the offered GPU load (default DefaultLoad).
	Load float64
	// MeanDuration is the mean run time of a pod (default
	// DefaultMeanDuration).
	MeanDuration time.Duration
	// Patience is how long a pod waits before it is counted as
	// unschedulable (default DefaultPatience).
	Patience time.Duration
	// RetriesPerDeparture bounds the scheduling cycles that one departure
	// runs for waiting pods (default DefaultRetriesPerDeparture).
	RetriesPerDeparture int
	// Samples is the number of intervals of the time series (default
	// DefaultSamples).
	Samples int
	// PercentageOfNodesToScore is kube-scheduler's: 0 is its adaptive
	// default (50% minus 1% per 125 nodes, at least 5%, and at least 100
	// nodes), 100 every node. Both schedulers follow it.
	PercentageOfNodesToScore int
	// Parallelism is the number of workers of numaplace's scheduler
	// (0: GOMAXPROCS).
	Parallelism int
	// Progress, when set, receives a progress line every ProgressEvery of
	// wall time and one when a setup ends.
	Progress io.Writer
	// ProgressEvery is the interval of the progress lines (default
	// DefaultProgressEvery).
	ProgressEvery time.Duration
	// Verify checks the invariants after every placement and release: no
	// CPU or GPU held twice on a node, every held resource exists, the
	// scheduler's and the node agent's views agree, the single-numa-node
	// baseline's pods sit on one NUMA node. It is slow; tests set it.
	Verify bool
}

// withDefaults fills in the defaults, or says what is wrong.
func (c Config) withDefaults() (Config, error) {
	if c.Nodes == 0 {
		c.Nodes = DefaultNodes
	}
	if c.Pods == 0 {
		c.Pods = DefaultPods
	}
	if c.Setups == nil {
		c.Setups = AllSetups
	}
	if c.Load == 0 {
		c.Load = DefaultLoad
	}
	if c.MeanDuration == 0 {
		c.MeanDuration = DefaultMeanDuration
	}
	if c.Patience == 0 {
		c.Patience = DefaultPatience
	}
	if c.RetriesPerDeparture == 0 {
		c.RetriesPerDeparture = DefaultRetriesPerDeparture
	}
	if c.Samples == 0 {
		c.Samples = DefaultSamples
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = DefaultProgressEvery
	}
	switch {
	case c.Nodes < 1 || c.Nodes > MaxNodes:
		return c, fmt.Errorf("%w: %d nodes (want 1 to %d)", ErrConfig, c.Nodes, MaxNodes)
	case c.Pods < 1 || c.Pods > MaxPods:
		return c, fmt.Errorf("%w: %d pods (want 1 to %d)", ErrConfig, c.Pods, MaxPods)
	case len(c.Setups) == 0:
		return c, fmt.Errorf("%w: no setup", ErrConfig)
	case !(c.Load > 0) || math.IsInf(c.Load, 0):
		return c, fmt.Errorf("%w: load %v (want a positive number)", ErrConfig, c.Load)
	case c.MeanDuration < time.Second:
		return c, fmt.Errorf("%w: mean duration %v (want at least 1s)", ErrConfig, c.MeanDuration)
	case c.Patience < 0:
		return c, fmt.Errorf("%w: negative patience %v", ErrConfig, c.Patience)
	case c.RetriesPerDeparture < 0:
		return c, fmt.Errorf("%w: negative retries per departure %d", ErrConfig, c.RetriesPerDeparture)
	case c.Samples < 1:
		return c, fmt.Errorf("%w: %d samples (want at least 1)", ErrConfig, c.Samples)
	case c.PercentageOfNodesToScore < 0 || c.PercentageOfNodesToScore > 100:
		return c, fmt.Errorf("%w: percentage of nodes to score %d (want 0-100)", ErrConfig, c.PercentageOfNodesToScore)
	case c.Parallelism < 0:
		return c, fmt.Errorf("%w: negative parallelism %d", ErrConfig, c.Parallelism)
	}
	seen := map[Setup]bool{}
	for _, s := range c.Setups {
		if !s.valid() {
			return c, fmt.Errorf("%w: unknown setup %v", ErrConfig, s)
		}
		if seen[s] {
			return c, fmt.Errorf("%w: setup %s given twice", ErrConfig, s.Letter())
		}
		seen[s] = true
	}
	return c, nil
}

// numFeasibleToFind is kube-scheduler's numFeasibleNodesToFind: how many
// feasible nodes a scheduling cycle looks for before it stops filtering
// (all of them when the cluster is small or pct is 100).
func numFeasibleToFind(nodes, pct int) int {
	const minFeasible = 100
	if nodes < minFeasible || pct >= 100 {
		return nodes
	}
	if pct == 0 {
		pct = adaptivePercentage(nodes)
	}
	return max(nodes*pct/100, minFeasible)
}

// adaptivePercentage is kube-scheduler's default percentageOfNodesToScore
// for a cluster of the given size: 50 - nodes/125, at least 5.
func adaptivePercentage(nodes int) int {
	return max(50-nodes/125, 5)
}
