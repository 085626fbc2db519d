package scheduler

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
)

// DefaultMinSharedCPUs is the smallest shared pool, in CPUs, that an
// exclusive placement may leave on a node when Config.MinSharedCPUs is 0
// (the kubelet keeps at least one CPU in its shared pool too).
const DefaultMinSharedCPUs = 1

// Config is the cache's configuration. The zero value is docs/design.md's
// default.
type Config struct {
	// OptInLabel and OptInValue: only nodes whose label OptInLabel has the
	// value OptInValue take pods with a NUMA spec. An empty OptInLabel means
	// kube.DefaultOptInLabel=kube.DefaultOptInValue
	// (ack.node.gpu.schedule=topology).
	OptInLabel, OptInValue string
	// Pods is how pods are read (kube.ParsePod).
	Pods kube.Config
	// Allocator is the options of every node's allocator.State: Scoring
	// chooses MostAllocated (default) or LeastAllocated for Score, for pods
	// with and without a NUMA spec alike. Resources must be empty (a
	// Resource holds one machine's state and cannot be shared by nodes);
	// kinds of the caller's own come from NewResources, made for each
	// node's machine, and pods ask for them through Amounts.
	Allocator allocator.Options
	// Amounts, when set, reads what a pod with a NUMA spec asks for of the
	// allocator's kinds of the caller's own (Allocator.NewResources), by
	// kind (allocator.Request.Amounts), such as its 1 GiB hugepages from
	// its containers' hugepages-1Gi requests; an error refuses the pod.
	// Those amounts are placed jointly with the pod's CPUs, GPUs and
	// memory in Filter, Score, Reserve, ScheduleOne and the preemption
	// dry-runs. The decision annotation does not carry them: a bound pod
	// that AddPod claims from its decision (a restarted scheduler) is
	// accounted without its holdings of those kinds.
	Amounts func(p *kube.Pod) (map[string]int64, error)
	// MinSharedCPUs is the smallest shared pool, in CPUs, that an exclusive
	// placement may leave on a node: 0 means [DefaultMinSharedCPUs], a
	// negative value means no minimum.
	MinSharedCPUs int
	// PercentageOfNodesToScore is kube-scheduler's percentageOfNodesToScore:
	// with 1-99, ScheduleOne stops filtering once it has found that
	// percentage of the nodes feasible (but at least 100 nodes, or all when
	// there are fewer), starting each search where the previous one stopped.
	// 0 and 100 mean every node (unlike kube-scheduler, whose 0 is an
	// adaptive percentage).
	PercentageOfNodesToScore int
	// Parallelism is the number of workers that filter and score nodes in
	// ScheduleOne (0: GOMAXPROCS).
	Parallelism int
	// DisableMemoryAlignment turns off, on every node whose label
	// kube.LabelMemoryAlignment (numaplace.io/memory-alignment) does not
	// say "true", the alignment of NUMA pods' memory: by default a NUMA
	// pod's memory request is reserved per NUMA node jointly with its CPUs
	// and GPUs (its decision carries the amounts and cpuset.mems follows
	// them); with alignment off it is counted against the node's total
	// only. The label, "true" or "false", overrides this per node.
	DisableMemoryAlignment bool
	// KoordinatorAnnotations makes PreBind also return Koordinator's
	// scheduling.koordinator.sh/resource-status and
	// scheduling.koordinator.sh/device-allocated, so that Koordinator's node
	// agent can apply the decision.
	KoordinatorAnnotations bool
}

// ErrConfig is the category of invalid configurations.
var ErrConfig = errors.New("invalid scheduler configuration")

// normalise fills in the defaults or says what is wrong.
func (c Config) normalise() (Config, error) {
	if c.OptInLabel == "" {
		if c.OptInValue != "" {
			return c, fmt.Errorf("%w: OptInValue %q without OptInLabel", ErrConfig, c.OptInValue)
		}
		c.OptInLabel, c.OptInValue = kube.DefaultOptInLabel, kube.DefaultOptInValue
	}
	if len(c.Allocator.Resources) > 0 {
		return c, fmt.Errorf("%w: Allocator.Resources must be empty (a resource holds one machine's state)", ErrConfig)
	}
	switch {
	case c.MinSharedCPUs == 0:
		c.MinSharedCPUs = DefaultMinSharedCPUs
	case c.MinSharedCPUs < 0:
		c.MinSharedCPUs = 0
	}
	if c.PercentageOfNodesToScore < 0 || c.PercentageOfNodesToScore > 100 {
		return c, fmt.Errorf("%w: PercentageOfNodesToScore %d is not in 0-100", ErrConfig, c.PercentageOfNodesToScore)
	}
	if c.PercentageOfNodesToScore == 0 {
		c.PercentageOfNodesToScore = 100
	}
	if c.Parallelism < 0 {
		return c, fmt.Errorf("%w: Parallelism %d is negative", ErrConfig, c.Parallelism)
	}
	if c.Parallelism == 0 {
		c.Parallelism = runtime.GOMAXPROCS(0)
	}
	return c, nil
}
