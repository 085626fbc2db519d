package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/numaplace/numaplace/adapters/topologymanager"
)

// Sample is the state of a setup's cluster at one simulated time.
type Sample struct {
	// Hours is the simulated time since the first arrival's clock zero.
	Hours float64
	// GPUAllocation is the share of the cluster's GPUs held by running pods
	// (0-1).
	GPUAllocation float64
	// AdmissionErrors and CrossNUMA are the cumulative counts so far.
	AdmissionErrors, CrossNUMA int
	// Waiting is the number of pods waiting to be placed.
	Waiting int
}

// Result is what one setup did with the trace.
type Result struct {
	// Setup is the setup.
	Setup Setup
	// Arrivals is the number of pods of the trace; each ends the run
	// placed, unschedulable or still queued.
	Arrivals int
	// Placed counts the pods placed (admitted by their node).
	Placed int
	// Unschedulable counts the pods that waited longer than the patience.
	Unschedulable int
	// StillQueued counts the pods waiting when the last pod arrived.
	StillQueued int
	// Attempts counts the scheduling cycles.
	Attempts int
	// AdmissionErrors counts the admissions refused by the chosen node
	// (the kubelet's TopologyAffinityError); PodsRefused the pods refused
	// at least once, PlacedAfterRefusal those of them placed later.
	AdmissionErrors, PodsRefused, PlacedAfterRefusal int
	// CrossNUMA counts the placed pods with a NUMA spec whose placement is
	// cross-NUMA (see the package documentation).
	CrossNUMA int
	// CrossNUMAByPolicy splits CrossNUMA by the pods' policy names.
	CrossNUMAByPolicy map[string]int
	// MultiNUMA counts the placed pods whose CPUs and GPUs span more than
	// one NUMA node (necessary for some shapes; not a fault by itself).
	MultiNUMA int
	// GPUAllocationMean is the mean GPU allocation over the second half of
	// the run, GPUAllocationPeak the highest sample.
	GPUAllocationMean, GPUAllocationPeak float64
	// MeanWait is the mean time from arrival to placement of the placed
	// pods.
	MeanWait time.Duration
	// LatencyP50 and LatencyP99 are percentiles of the wall time of the
	// scheduling cycles (filter, score and choice of a node; not the
	// admission). They vary from run to run.
	LatencyP50, LatencyP99 time.Duration
	// Wall is the wall time of the whole setup.
	Wall time.Duration
	// Series is the state at Samples+1 evenly spaced times from 0 to the
	// last arrival.
	Series []Sample

	latencies   []time.Duration
	refusedPods map[int]bool
	waitSum     float64
}

// summarise computes the summary fields from the raw ones.
func (r *Result) summarise() {
	if n := len(r.latencies); n > 0 {
		slices.Sort(r.latencies)
		r.LatencyP50 = r.latencies[(n-1)*50/100]
		r.LatencyP99 = r.latencies[(n-1)*99/100]
	}
	r.latencies = nil
	if r.Placed > 0 {
		r.MeanWait = time.Duration(r.waitSum / float64(r.Placed) * float64(time.Second))
	}
	if len(r.Series) > 0 {
		half := r.Series[len(r.Series)-1].Hours / 2
		sum, k := 0.0, 0
		for _, s := range r.Series {
			r.GPUAllocationPeak = max(r.GPUAllocationPeak, s.GPUAllocation)
			if s.Hours >= half {
				sum += s.GPUAllocation
				k++
			}
		}
		r.GPUAllocationMean = sum / float64(k)
	}
}

// Report is a whole run: the configuration, the cluster and each setup's
// result.
type Report struct {
	// Config is the configuration with its defaults filled in.
	Config Config
	// NodesByPreset counts the nodes of each machine.
	NodesByPreset map[string]int
	// GPUs and CPUs are the cluster's totals.
	GPUs, CPUs int
	// Trace summarises the workload.
	Trace TraceSummary
	// Results are the setups' results, in the order they ran.
	Results []*Result
}

// TraceSummary describes a trace.
type TraceSummary struct {
	// Pods is the number of pods in the trace.
	Pods int
	// ByGPUs counts the pods by the number of GPUs they ask for (0
	// included).
	ByGPUs map[int]int
	// NoSpec counts the pods without a NUMA spec.
	NoSpec int
	// ByPolicy counts the pods with a NUMA spec by policy name, such as
	// "SingleNUMANode".
	ByPolicy map[string]int
	// Hours is the simulated time of the last arrival.
	Hours float64
	// ArrivalsPerHour is the mean arrival rate: pods per simulated hour up
	// to the last arrival (0 for an empty trace or one whose last arrival
	// is at time 0).
	ArrivalsPerHour float64
	// MeanDuration is the mean run time of the trace's pods (0 for an
	// empty trace).
	MeanDuration time.Duration
	// NeverOneNode counts the pods that no single NUMA node of either
	// machine can hold (the kubelet's single-numa-node refuses them on
	// every node).
	NeverOneNode int
}

func summariseTrace(trace []PodSpec, cl *cluster) TraceSummary {
	s := TraceSummary{Pods: len(trace), ByGPUs: map[int]int{}, ByPolicy: map[string]int{}}
	dur := 0.0
	for i := range trace {
		p := &trace[i]
		s.ByGPUs[p.GPUs]++
		if p.NUMASpec {
			s.ByPolicy[p.Policy.String()]++
		} else {
			s.NoSpec++
		}
		dur += p.Duration
		fits := false
		for _, mi := range cl.infos[:min(len(cl.infos), len(presets))] {
			if mi.widthCap(p.CPUs, p.GPUs) == 1 {
				fits = true
			}
		}
		if !fits {
			s.NeverOneNode++
		}
	}
	if n := len(trace); n > 0 {
		s.Hours = trace[n-1].Arrival / 3600
		s.MeanDuration = time.Duration(dur / float64(n) * float64(time.Second))
		if s.Hours > 0 {
			s.ArrivalsPerHour = float64(n) / s.Hours
		}
	}
	return s
}

// Run plays the seeded trace of cfg through each of its setups in turn and
// returns their results. The results are the same for the same
// configuration, except the latencies and wall times.
func Run(cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cl, err := newCluster(cfg.Nodes)
	if err != nil {
		return nil, err
	}
	trace, err := NewTrace(cfg, cl.gpus)
	if err != nil {
		return nil, err
	}
	rep := &Report{Config: cfg, NodesByPreset: map[string]int{}, GPUs: cl.gpus, Trace: summariseTrace(trace, cl)}
	for _, mi := range cl.infos {
		rep.NodesByPreset[mi.m.Name()]++
		rep.CPUs += mi.cpus
	}
	for _, s := range cfg.Setups {
		res, err := runSetup(cfg, s, cl, trace)
		if err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

func runSetup(cfg Config, s Setup, cl *cluster, trace []PodSpec) (*Result, error) {
	e := newEngine(cfg, s, nil, cl, trace)
	switch s {
	case KubeletSingleNUMANode:
		e.run = newBlindSetup(topologymanager.PolicySingleNUMANode, cl, e, cfg.PercentageOfNodesToScore)
	case KubeletBestEffort:
		e.run = newBlindSetup(topologymanager.PolicyBestEffort, cl, e, cfg.PercentageOfNodesToScore)
	case Numaplace:
		n, err := newNumaplaceSetup(cl, cfg.PercentageOfNodesToScore, cfg.Parallelism)
		if err != nil {
			return nil, fmt.Errorf("setup %s: %w", s.Letter(), err)
		}
		e.run = n
	default:
		return nil, fmt.Errorf("%w: unknown setup %v", ErrConfig, s)
	}
	return e.play()
}
