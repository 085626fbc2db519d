package numaplace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
)

// Scoring strategies of [Args].ScoringStrategy.
const (
	// MostAllocated favours fuller nodes (bin packing; the default).
	MostAllocated = "MostAllocated"
	// LeastAllocated favours emptier nodes.
	LeastAllocated = "LeastAllocated"
)

// Args are the plugin's arguments, the args of its entry in the profile's
// pluginConfig:
//
//	pluginConfig:
//	- name: NUMAPlace
//	  args:
//	    optInLabel: ack.node.gpu.schedule
//	    optInValue: topology
//	    acceptNvidiaGPU: false
//	    koordinatorAnnotations: false
//	    scoringStrategy: MostAllocated
//	    minSharedCPUs: 1
//	    numaMetrics: true
//
// Every field is optional; the zero value is docs/design.md's default. Unknown
// fields are refused, so that a misspelt option is not silently ignored.
type Args struct {
	// OptInLabel is the key of the node label that opts a node in: only
	// nodes whose label OptInLabel has the value OptInValue take pods with
	// a NUMA spec. Empty means the default, ack.node.gpu.schedule=topology
	// (OptInValue must then be empty too).
	OptInLabel string `json:"optInLabel,omitempty"`
	// OptInValue is the value the OptInLabel label must have for the node
	// to take pods with a NUMA spec; with OptInLabel set, empty means the
	// label must be present with an empty value.
	OptInValue string `json:"optInValue,omitempty"`
	// AcceptNvidiaGPU counts nvidia.com/gpu as GPUs on pods with a NUMA
	// spec (by default such a pod is refused with a message saying to use
	// aliyun.com/gpu).
	AcceptNvidiaGPU bool `json:"acceptNvidiaGPU,omitempty"`
	// KoordinatorAnnotations makes PreBind also write Koordinator's
	// scheduling.koordinator.sh/resource-status and
	// scheduling.koordinator.sh/device-allocated, so that Koordinator's
	// node agent can apply the decision.
	KoordinatorAnnotations bool `json:"koordinatorAnnotations,omitempty"`
	// ScoringStrategy is [MostAllocated] (default) or [LeastAllocated].
	ScoringStrategy string `json:"scoringStrategy,omitempty"`
	// MinSharedCPUs is the smallest shared CPU pool an exclusive placement
	// may leave on a node: 0 means 1 CPU, a negative value no minimum.
	MinSharedCPUs int `json:"minSharedCPUs,omitempty"`
	// NUMAMetrics exports numaplace_numa_free_cpus and
	// numaplace_numa_free_gpus, one series per NUMA node of every node
	// (nil: true; false turns them off in clusters where that is too many
	// series).
	NUMAMetrics *bool `json:"numaMetrics,omitempty"`
}

// numaMetrics is NUMAMetrics with its default.
func (a Args) numaMetrics() bool { return a.NUMAMetrics == nil || *a.NUMAMetrics }

// ErrArgs is the category of invalid plugin arguments.
var ErrArgs = errors.New("invalid NUMAPlace plugin args")

// DecodeArgs reads the plugin's arguments as the framework hands them to
// the plugin factory: nil (no pluginConfig entry: the defaults), a
// *runtime.Unknown holding JSON or YAML (what kube-scheduler's config
// loader gives for a plugin outside its scheme), an [Args] or *[Args]. It
// checks them (see [Args.Config]). Errors wrap [ErrArgs].
func DecodeArgs(obj runtime.Object) (Args, error) {
	var a Args
	switch o := obj.(type) {
	case nil:
	case *runtime.Unknown:
		if o == nil || len(o.Raw) == 0 {
			break
		}
		var err error
		switch o.ContentType {
		case runtime.ContentTypeJSON, "":
			err = decodeStrictJSON(o.Raw, &a)
		case runtime.ContentTypeYAML:
			err = yaml.UnmarshalStrict(o.Raw, &a)
		default:
			err = fmt.Errorf("content type %q is neither JSON nor YAML", o.ContentType)
		}
		if err != nil {
			return Args{}, fmt.Errorf("%w: %w", ErrArgs, err)
		}
	case *Args:
		if o != nil {
			a = *o
		}
	default:
		return Args{}, fmt.Errorf("%w: got %T, want JSON or YAML args", ErrArgs, obj)
	}
	if _, err := a.Config(); err != nil {
		return Args{}, err
	}
	return a, nil
}

// GetObjectKind lets *Args stand where the framework wants a
// runtime.Object (tests and programs that build a profile in Go).
func (a *Args) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (a *Args) DeepCopyObject() runtime.Object {
	if a == nil {
		return nil
	}
	c := *a
	if a.NUMAMetrics != nil {
		v := *a.NUMAMetrics
		c.NUMAMetrics = &v
	}
	return &c
}

func decodeStrictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON object")
	}
	return nil
}

// Config returns the adapters/scheduler configuration the arguments stand
// for, or an error wrapping [ErrArgs] that names the bad field.
func (a Args) Config() (scheduler.Config, error) {
	cfg := scheduler.Config{
		OptInLabel:             a.OptInLabel,
		OptInValue:             a.OptInValue,
		Pods:                   kube.Config{AcceptNvidiaGPU: a.AcceptNvidiaGPU},
		MinSharedCPUs:          a.MinSharedCPUs,
		KoordinatorAnnotations: a.KoordinatorAnnotations,
	}
	switch a.ScoringStrategy {
	case "", MostAllocated:
		cfg.Allocator.Scoring = allocator.MostAllocated
	case LeastAllocated:
		cfg.Allocator.Scoring = allocator.LeastAllocated
	default:
		return scheduler.Config{}, fmt.Errorf("%w: scoringStrategy %q: want %s or %s",
			ErrArgs, a.ScoringStrategy, MostAllocated, LeastAllocated)
	}
	if a.OptInLabel == "" && a.OptInValue != "" {
		return scheduler.Config{}, fmt.Errorf("%w: optInValue %q without optInLabel", ErrArgs, a.OptInValue)
	}
	return cfg, nil
}
