package kube

import (
	"errors"
	"fmt"
	"strings"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// Annotation keys, labels and resource names.
const (
	// AnnotationSpecAlibaba and AnnotationSpecKoordinator carry the
	// pod-level spec {"numaTopologyPolicy": ..., "singleNUMANodeExclusive": ...}.
	AnnotationSpecAlibaba     = "scheduling.alibabacloud.com/numa-topology-spec"
	AnnotationSpecKoordinator = "scheduling.koordinator.sh/numa-topology-spec"
	// AnnotationCPUSetScheduler must be "required" on a pod with a NUMA
	// spec; "true" is the legacy standalone CPU topology-aware scheduling,
	// which cannot be combined with a NUMA spec.
	AnnotationCPUSetScheduler = "cpuset-scheduler"
	// AnnotationAllocation is the decision the scheduler side writes.
	AnnotationAllocation = "numaplace.io/allocation"
	// AnnotationKoordResourceStatus and AnnotationKoordDeviceAllocated are
	// Koordinator's, written optionally so its node agent can apply the
	// decision.
	AnnotationKoordResourceStatus  = "scheduling.koordinator.sh/resource-status"
	AnnotationKoordDeviceAllocated = "scheduling.koordinator.sh/device-allocated"
	// DefaultLegacyGPUTopologyAnnotation marks a pod of the legacy
	// standalone GPU topology-aware scheduling (configurable in Config).
	DefaultLegacyGPUTopologyAnnotation = "scheduling.alibabacloud.com/gpu-topology-spec"

	// DefaultOptInLabel and DefaultOptInValue: only nodes with this label
	// take NUMA-aware pods.
	DefaultOptInLabel = "ack.node.gpu.schedule"
	DefaultOptInValue = "topology"

	ResourceCPU       = "cpu"
	ResourceMemory    = "memory"
	ResourceAliyunGPU = "aliyun.com/gpu"
	ResourceNvidiaGPU = "nvidia.com/gpu"
)

// Config holds the adapters' choices about pods. The zero value is the
// default of docs/design.md.
type Config struct {
	// AcceptNvidiaGPU counts nvidia.com/gpu as GPUs on pods with a NUMA spec
	// (by default such a pod is refused with an error saying to use
	// aliyun.com/gpu).
	AcceptNvidiaGPU bool
	// LegacyGPUTopologyAnnotations mark pods of the legacy standalone GPU
	// topology-aware scheduling; nil means
	// [DefaultLegacyGPUTopologyAnnotation].
	LegacyGPUTopologyAnnotations []string
}

func (c Config) legacyGPUKeys() []string {
	if c.LegacyGPUTopologyAnnotations == nil {
		return []string{DefaultLegacyGPUTopologyAnnotation}
	}
	return c.LegacyGPUTopologyAnnotations
}

// ErrInvalidPod is the category of every pod the adapters refuse to place
// because of how it is written.
var ErrInvalidPod = errors.New("invalid pod")

// PodError names what is wrong with a pod and what to change. It unwraps to
// [ErrInvalidPod] (and to the cause, such as a policy.SpecError).
type PodError struct {
	// Pod is the pod's key, namespace/name.
	Pod string
	// Field is the annotation, container or resource at fault.
	Field string
	// Reason says what is wrong and, where it helps, what to change.
	Reason string
	// Cause is the underlying error, such as a policy.SpecError or a
	// quantity parse error; nil when there is none.
	Cause error
}

// Error implements error.
func (e *PodError) Error() string {
	if e == nil {
		return "<nil>"
	}
	s := fmt.Sprintf("%s %s: %s: %s", ErrInvalidPod, e.Pod, e.Field, e.Reason)
	if e.Cause != nil && !strings.Contains(e.Reason, e.Cause.Error()) {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns ErrInvalidPod and the cause.
func (e *PodError) Unwrap() []error {
	if e == nil {
		return nil
	}
	if e.Cause != nil {
		return []error{ErrInvalidPod, e.Cause}
	}
	return []error{ErrInvalidPod}
}

// PodRequest is what a pod asks for, as the adapters read it.
type PodRequest struct {
	// NUMA is true for a pod with a NUMA spec: its CPUs are exclusive and
	// placed by Spec.
	NUMA bool
	// Spec is the pod-level spec (the zero Spec, None/Required, without one).
	Spec policy.Spec
	// CPUs is the pod's effective CPU request in whole CPUs (NUMA pods).
	CPUs int
	// MilliCPU is the pod's effective CPU request in thousandths (every
	// pod; for pods without a NUMA spec it is accounted against the shared
	// pool).
	MilliCPU int64
	// GPUs is the number of whole GPUs.
	GPUs int
	// MemoryMiB is the pod's effective memory request.
	MemoryMiB int64
	// NvidiaGPUs counts nvidia.com/gpu of a pod without a NUMA spec: not
	// numaplace's GPUs on an opt-in node (those are aliyun.com/gpu), but
	// the GPUs a node running the kubelet's own Topology Manager hands out.
	NvidiaGPUs int
	// Guaranteed is Kubernetes' Guaranteed QoS class: every container has
	// CPU and memory limits, and its requests (when given) equal them. On
	// a node whose kubelet runs the static CPU manager, a Guaranteed pod
	// with whole CPUs gets exclusive ones.
	Guaranteed bool
}

// Request returns the allocator request of a NUMA pod, with the given ID:
// its CPUs, GPUs and memory request (MiB, reserved per NUMA node jointly
// with the CPUs and GPUs, so that cpuset.mems can follow it) under its
// spec. A node that does not align memory (see [MemoryAligned]) uses
// [PodRequest.RequestWithoutMemory] instead.
func (r PodRequest) Request(id string) allocator.Request {
	return allocator.Request{ID: id, CPUs: r.CPUs, GPUs: r.GPUs, MemoryMiB: r.MemoryMiB,
		Policy: r.Spec.Policy, Exclusive: r.Spec.Exclusive}
}

// RequestWithoutMemory is [PodRequest.Request] with the memory left out:
// the request of a NUMA pod on a node that does not align memory, where the
// pod's memory is counted against the node's total only and cpuset.mems is
// the span of its CPUs and GPUs.
func (r PodRequest) RequestWithoutMemory(id string) allocator.Request {
	a := r.Request(id)
	a.MemoryMiB = 0
	return a
}

// LabelMemoryAlignment is the node label that turns the alignment of NUMA
// pods' memory on ("true") or off ("false") on one node, whatever the
// scheduler's (or the node agent's) configured default says.
const LabelMemoryAlignment = "numaplace.io/memory-alignment"

// MemoryAligned says whether a node aligns the memory of NUMA pods: the
// value of its [LabelMemoryAlignment] label when it has one ("true" or
// "false"; any other value is an error naming the label and the values
// meant), otherwise def (the configured default, normally true). It does
// not look at the machine: a machine that describes no memory cannot
// align memory whatever this says (see [MachineAlignsMemory]).
func MemoryAligned(labels map[string]string, def bool) (bool, error) {
	v, ok := labels[LabelMemoryAlignment]
	if !ok {
		return def, nil
	}
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("label %s=%s: want \"true\" (align NUMA pods' memory with their CPUs and GPUs) or \"false\" (do not)",
		LabelMemoryAlignment, quote.Short(v))
}

// MachineAlignsMemory reports whether memory can be aligned on machine m:
// whether it describes its memory (some NUMA node has memoryMiB > 0). A
// machine whose every node has 0 MiB (a topology source that does not
// report memory) cannot: NUMA pods are placed there by their CPUs and GPUs
// alone, as with alignment turned off.
func MachineAlignsMemory(m *topology.Machine) bool {
	if m == nil {
		return false
	}
	for _, n := range m.Nodes() {
		if n.MemoryMiB > 0 {
			return true
		}
	}
	return false
}

// resources is the effective request of a pod, per resource, in
// thousandths (CPU), whole units (GPUs) or MiB (memory).
type resources struct {
	milliCPU  int64
	gpus      int64
	nvidia    int64
	memoryMiB int64
}

// ParsePod reads and validates a pod as docs/design.md says:
//   - the spec from either annotation key (both present with different
//     contents is an error naming both; an empty policy is None), read as
//     strict JSON (docs/design.md): one object with only the fields
//     numaTopologyPolicy and singleNUMANodeExclusive, spelt exactly (an
//     unknown key is named with the field it may mean), each at most once,
//     each a string or null (as if absent), valid UTF-8, nothing after it;
//   - a NUMA spec needs cpuset-scheduler: required (absent or another value
//     is an error that says so; "true", the legacy standalone CPU
//     topology-aware scheduling, cannot be combined with it), and cannot be
//     combined with the legacy GPU topology-aware annotations;
//   - cpuset-scheduler "required" or "true" without a NUMA spec is an error
//     that says a spec is needed (never silently the shared pool);
//   - with a NUMA spec, every container's CPU request is a whole number of
//     cores equal to its limit;
//   - GPUs are whole aliyun.com/gpu; nvidia.com/gpu with a NUMA spec is an
//     error that says to use aliyun.com/gpu or set the acceptNvidiaGPU
//     option, unless Config.AcceptNvidiaGPU;
//   - the effective request follows Kubernetes: the larger of the largest
//     init container (plus the sidecars started before it) and the sum of
//     the app containers and the sidecars.
//
// Errors are *[PodError] naming the annotation, container or resource.
func ParsePod(p *Pod, cfg Config) (PodRequest, error) {
	if p == nil {
		return PodRequest{}, &PodError{Field: "pod", Reason: "no pod (nil)"}
	}
	fail := func(field, format string, args ...any) (PodRequest, error) {
		return PodRequest{}, &PodError{Pod: p.Key(), Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	spec, has, err := parseSpec(p)
	if err != nil {
		return PodRequest{}, err
	}
	req := PodRequest{NUMA: has, Spec: spec}
	switch v := p.Annotations[AnnotationCPUSetScheduler]; {
	case !has && v == "required":
		return fail(AnnotationCPUSetScheduler, `"required" asks for exclusive CPUs placed by a NUMA topology spec, but the pod has none: `+
			`add %s (such as {"numaTopologyPolicy":"None"} for exclusive CPUs without NUMA alignment) or remove %s`,
			AnnotationSpecAlibaba, AnnotationCPUSetScheduler)
	case !has && v == "true":
		return fail(AnnotationCPUSetScheduler, `"true" is the legacy standalone CPU topology-aware scheduling, which numaplace does not implement: `+
			`for exclusive CPUs add %s with %s: "required", or remove %s`,
			AnnotationSpecAlibaba, AnnotationCPUSetScheduler, AnnotationCPUSetScheduler)
	}
	if has {
		switch v, ok := p.Annotations[AnnotationCPUSetScheduler]; {
		case !ok:
			return fail(AnnotationCPUSetScheduler, `a NUMA topology spec needs the annotation %s: "required"`, AnnotationCPUSetScheduler)
		case v == "true":
			return fail(AnnotationCPUSetScheduler, `"true" is the legacy standalone CPU topology-aware scheduling, which cannot be combined with a NUMA topology spec; use "required"`)
		case v != "required":
			return fail(AnnotationCPUSetScheduler, `%s is not supported with a NUMA topology spec; the only supported value is "required"`, quote.Short(v))
		}
		for _, k := range cfg.legacyGPUKeys() {
			if _, ok := p.Annotations[k]; ok {
				return fail(k, "the legacy standalone GPU topology-aware scheduling cannot be combined with a NUMA topology spec (%s); remove one of them", specKey(p))
			}
		}
	}
	res, qos, err := effective(p, has)
	if err != nil {
		return PodRequest{}, err
	}
	if has && res.nvidia > 0 && !cfg.AcceptNvidiaGPU {
		return fail(ResourceNvidiaGPU, "a pod with a NUMA topology spec asks for GPUs as %s: use %s instead, or set the option "+
			"acceptNvidiaGPU: true (numaplace-scheduler's NUMAPlace args; Config.AcceptNvidiaGPU) to count %s as GPUs",
			ResourceNvidiaGPU, ResourceAliyunGPU, ResourceNvidiaGPU)
	}
	req.MilliCPU = res.milliCPU
	req.GPUs = int(res.gpus)
	if has && cfg.AcceptNvidiaGPU {
		req.GPUs += int(res.nvidia)
	}
	if !has {
		req.NvidiaGPUs = int(res.nvidia)
	}
	req.Guaranteed = qos
	req.MemoryMiB = res.memoryMiB
	if has {
		req.CPUs = int(res.milliCPU / 1000)
		if req.CPUs == 0 && req.GPUs == 0 && p.ResourceClaims == 0 {
			return fail("containers", "a pod with a NUMA topology spec asks for no CPUs and no GPUs and has no ResourceClaims")
		}
	}
	return req, nil
}

func specKey(p *Pod) string {
	if _, ok := p.Annotations[AnnotationSpecAlibaba]; ok {
		return AnnotationSpecAlibaba
	}
	return AnnotationSpecKoordinator
}

// parseSpec reads the spec from either key (see parseSpecAnnotation).
func parseSpec(p *Pod) (policy.Spec, bool, error) {
	var specs [2]policy.Spec
	var keys [2]string
	n := 0
	for _, k := range [...]string{AnnotationSpecAlibaba, AnnotationSpecKoordinator} {
		v, ok := p.Annotations[k]
		if !ok {
			continue
		}
		s, err := parseSpecAnnotation(v)
		if err != nil {
			return policy.Spec{}, false, &PodError{Pod: p.Key(), Field: k, Reason: err.Error(), Cause: err}
		}
		specs[n], keys[n] = s, k
		n++
	}
	switch n {
	case 0:
		return policy.Spec{}, false, nil
	case 2:
		if specs[0] != specs[1] {
			return policy.Spec{}, false, &PodError{Pod: p.Key(), Field: keys[0] + ", " + keys[1],
				Reason: fmt.Sprintf("the two NUMA topology spec annotations differ (%s: %s, %s: %s); keep one or make them equal",
					keys[0], specs[0], keys[1], specs[1])}
		}
	}
	return specs[0], true, nil
}

// effective computes the pod's effective request, checking each container,
// and whether the pod is of Kubernetes' Guaranteed QoS class: it has app
// containers, and every container, init containers included, has CPU and
// memory limits, and its CPU and memory requests, when given, equal them.
func effective(p *Pod, numa bool) (resources, bool, error) {
	var app, sidecars, initMax resources
	guaranteed := len(p.Containers) > 0
	for i := range p.Containers {
		c := &p.Containers[i]
		q := readQuantities(c)
		r, err := containerResources(p, c, &q, numa)
		if err != nil {
			return resources{}, false, err
		}
		app = app.plus(r)
		guaranteed = guaranteed && q.guaranteed()
	}
	for i := range p.InitContainers {
		ic := &p.InitContainers[i]
		q := readQuantities(&ic.Container)
		r, err := containerResources(p, &ic.Container, &q, numa)
		if err != nil {
			return resources{}, false, err
		}
		if ic.RestartPolicyAlways {
			sidecars = sidecars.plus(r)
			initMax = initMax.max(sidecars)
		} else {
			initMax = initMax.max(sidecars.plus(r))
		}
		guaranteed = guaranteed && q.guaranteed()
	}
	return initMax.max(app.plus(sidecars)), guaranteed, nil
}

func (a resources) plus(b resources) resources {
	return resources{a.milliCPU + b.milliCPU, a.gpus + b.gpus, a.nvidia + b.nvidia, a.memoryMiB + b.memoryMiB}
}

func (a resources) max(b resources) resources {
	return resources{max(a.milliCPU, b.milliCPU), max(a.gpus, b.gpus), max(a.nvidia, b.nvidia), max(a.memoryMiB, b.memoryMiB)}
}

// The resources ParsePod reads, as indexes of containerQuantities.
const (
	resCPU = iota
	resMemory
	resAliyunGPU
	resNvidiaGPU
	numResources
)

var resourceNames = [numResources]string{ResourceCPU, ResourceMemory, ResourceAliyunGPU, ResourceNvidiaGPU}

// containerQuantities is a container's requests and limits of the
// resources ParsePod reads, each looked up once.
type containerQuantities struct {
	req, lim       [numResources]string
	hasReq, hasLim [numResources]bool
}

// readQuantities looks up c's requests and limits; once it has found as
// many resources in a map as the map holds, it looks no further in it.
func readQuantities(c *Container) containerQuantities {
	var q containerQuantities
	read := func(m map[string]string, vals *[numResources]string, has *[numResources]bool) {
		found := 0
		for i, name := range resourceNames {
			if found == len(m) {
				return
			}
			if vals[i], has[i] = m[name]; has[i] {
				found++
			}
		}
	}
	read(c.Requests, &q.req, &q.hasReq)
	read(c.Limits, &q.lim, &q.hasLim)
	return q
}

// get returns the request of resource i, or its limit when there is no
// request (as in Kubernetes).
func (q *containerQuantities) get(i int) (string, bool) {
	if q.hasReq[i] {
		return q.req[i], true
	}
	return q.lim[i], q.hasLim[i]
}

// guaranteed reports whether the container meets the Guaranteed QoS class:
// CPU and memory limits, and the requests, when given, equal to them. It is
// called once containerResources has read q without error, so a request
// is a valid quantity: one written as its limit is the same amount.
func (q *containerQuantities) guaranteed() bool {
	for _, i := range [...]int{resCPU, resMemory} {
		if !q.hasLim[i] || q.hasReq[i] && q.req[i] != q.lim[i] && !sameQuantity(q.req[i], q.lim[i]) {
			return false
		}
	}
	return true
}

// containerResources reads one container's requests q (a limit stands for
// a missing request, as in Kubernetes).
func containerResources(p *Pod, c *Container, q *containerQuantities, numa bool) (resources, error) {
	field := func(res string) string { return fmt.Sprintf("container %s %s", quote.Short(c.Name), res) }
	var r resources
	if v, ok := q.get(resCPU); ok {
		m, err := ParseMilli(v)
		if err != nil {
			return r, &PodError{Pod: p.Key(), Field: field("cpu request"), Reason: "not a quantity", Cause: err}
		}
		r.milliCPU = m
	}
	if numa {
		req, hasReq := q.req[resCPU], q.hasReq[resCPU]
		lim, hasLim := q.lim[resCPU], q.hasLim[resCPU]
		switch {
		case !hasReq && !hasLim:
			// A container without CPUs (a GPU-only helper) asks for none.
		case !hasLim:
			return r, &PodError{Pod: p.Key(), Field: field("cpu limit"),
				Reason: fmt.Sprintf("a pod with a NUMA topology spec needs a CPU limit equal to the request %s", req)}
		case hasReq && req != lim && !sameQuantity(req, lim): // req is a valid quantity: read above
			return r, &PodError{Pod: p.Key(), Field: field("cpu"),
				Reason: fmt.Sprintf("request %s differs from limit %s; a pod with a NUMA topology spec needs them equal", req, lim)}
		}
		if r.milliCPU%1000 != 0 {
			return r, &PodError{Pod: p.Key(), Field: field("cpu request"),
				Reason: fmt.Sprintf("%s is not a whole number of cores; a pod with a NUMA topology spec gets whole CPUs", cmpOr(req, lim))}
		}
	}
	gpus := func(i int) (int64, error) {
		v, ok := q.get(i)
		if !ok {
			return 0, nil
		}
		n, err := ParseWhole(v)
		if err != nil {
			return 0, &PodError{Pod: p.Key(), Field: field(resourceNames[i]), Reason: "GPUs are whole devices", Cause: err}
		}
		return n, nil
	}
	var err error
	if r.gpus, err = gpus(resAliyunGPU); err != nil {
		return r, err
	}
	if r.nvidia, err = gpus(resNvidiaGPU); err != nil {
		return r, err
	}
	if v, ok := q.get(resMemory); ok {
		n, err := ParseMiB(v)
		if err != nil {
			return r, &PodError{Pod: p.Key(), Field: field("memory request"), Reason: "not a quantity", Cause: err}
		}
		r.memoryMiB = n
	}
	return r, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// OptedIn reports whether a node with these labels takes NUMA-aware pods:
// it carries label key=value (key "" means the defaults).
func OptedIn(labels map[string]string, key, value string) bool {
	if key == "" {
		key, value = DefaultOptInLabel, DefaultOptInValue
	}
	v, ok := labels[key]
	return ok && v == value
}
