package sim

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/numaplace/numaplace/policy"
)

// PodSpec is one pod of the trace.
type PodSpec struct {
	// Name is the pod's name, unique in the trace ("pod-0000042").
	Name string
	// Arrival is when the pod is created, Duration how long it runs once
	// placed, both in simulated seconds.
	Arrival, Duration float64
	// GPUs and CPUs are the pod's request (whole GPUs, whole CPUs; requests
	// equal limits).
	GPUs, CPUs int
	// NUMASpec is true when the pod carries a NUMA topology spec with
	// Policy; a pod without one has no NUMA wish (numaplace runs it on the
	// shared CPU pool with GPUs anywhere).
	NUMASpec bool
	// Policy is the spec's numaTopologyPolicy (None without a spec).
	Policy policy.Policy
}

// The trace's shapes. The weights are percentages.
var (
	gpuCounts  = [...]int{1, 2, 4, 8}
	gpuWeights = [...]int{40, 25, 25, 10}
)

// Trace shape parameters.
const (
	minCPUsPerGPU = 6
	maxCPUsPerGPU = 24
	// noSpecPercent of the pods carry no NUMA spec.
	noSpecPercent = 15
	// durationSigma is the lognormal durations' sigma.
	durationSigma = 1.0
)

// meanGPUsPerPod is the expectation of the GPU count.
func meanGPUsPerPod() float64 {
	sum, w := 0, 0
	for i, g := range gpuCounts {
		sum += g * gpuWeights[i]
		w += gpuWeights[i]
	}
	return float64(sum) / float64(w)
}

// NewTrace returns the seeded workload of cfg for a cluster of totalGPUs
// GPUs (see the package documentation for its shape). The same
// configuration always gives the same trace.
func NewTrace(cfg Config, totalGPUs int) ([]PodSpec, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if totalGPUs < 1 {
		return nil, fmt.Errorf("%w: the cluster has no GPU", ErrConfig)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e756d61706c6163)) // "numaplac"
	mean := cfg.MeanDuration.Seconds()
	// GPU-seconds asked per second = rate * meanGPUs * mean = load * GPUs.
	rate := cfg.Load * float64(totalGPUs) / (meanGPUsPerPod() * mean)
	mu := math.Log(mean) - durationSigma*durationSigma/2
	width := len(fmt.Sprint(cfg.Pods - 1))
	pods := make([]PodSpec, cfg.Pods)
	t := 0.0
	for i := range pods {
		// The draws are made in a fixed order, one set per pod.
		t += rng.ExpFloat64() / rate
		p := &pods[i]
		p.Name = fmt.Sprintf("pod-%0*d", width, i)
		p.Arrival = t
		p.GPUs = drawGPUs(rng)
		p.CPUs = p.GPUs * (minCPUsPerGPU + rng.IntN(maxCPUsPerGPU-minCPUsPerGPU+1))
		p.NUMASpec = rng.IntN(100) >= noSpecPercent
		pol := drawPolicy(rng, p.GPUs)
		if p.NUMASpec {
			p.Policy = pol
		}
		p.Duration = math.Exp(mu + durationSigma*rng.NormFloat64())
	}
	return pods, nil
}

func drawGPUs(rng *rand.Rand) int {
	x := rng.IntN(100)
	for i, w := range gpuWeights {
		if x < w {
			return gpuCounts[i]
		}
		x -= w
	}
	return gpuCounts[len(gpuCounts)-1]
}

// drawPolicy draws the policy of a pod with a NUMA spec: 8-GPU training
// pods, which no NUMA node of the presets holds, ask for Restricted (70%)
// or BestEffort; the others for SingleNUMANode (65%), Restricted (20%) or
// BestEffort (15%).
func drawPolicy(rng *rand.Rand, gpus int) policy.Policy {
	x := rng.IntN(100)
	if gpus >= 8 {
		if x < 70 {
			return policy.Restricted
		}
		return policy.BestEffort
	}
	switch {
	case x < 65:
		return policy.SingleNUMANode
	case x < 85:
		return policy.Restricted
	}
	return policy.BestEffort
}
