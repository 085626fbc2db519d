package kube

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// ErrInvalidDecision is the category of malformed decision annotations.
var ErrInvalidDecision = errors.New("invalid numaplace.io/allocation annotation")

// DecisionGPU is one GPU of a decision.
type DecisionGPU struct {
	// ID is the GPU's ID on the node's machine (JSON "id", non-negative).
	ID int `json:"id"`
	// UUID is the GPU's UUID as the machine describes it (JSON "uuid");
	// empty when unknown. When both it and the machine's are set, they must
	// match for the decision to apply.
	UUID string `json:"uuid,omitempty"`
}

// Decision is the numaplace.io/allocation annotation: what the scheduler
// decided for a pod, pod-level (all containers share the cpuset), such as
// {"policy":"SingleNUMANode","cpuset":"0-23","numaNodes":[0],
// "gpus":[{"id":0,"uuid":"GPU-..."}],"memoryMiB":{"0":0}}.
type Decision struct {
	// Policy is the placement policy the pod was placed under (JSON
	// "policy"), by its annotation name such as "SingleNUMANode".
	Policy policy.Policy `json:"policy"`
	// Exclusive is the request's singleNUMANodeExclusive (informational).
	Exclusive policy.Exclusivity `json:"exclusive"`
	// CPUSet is the exclusive CPUs in Linux cpulist form.
	CPUSet string `json:"cpuset"`
	// NUMANodes is the span, by NUMA node ID, ascending.
	NUMANodes []int `json:"numaNodes"`
	// GPUs are the GPUs, ascending ID.
	GPUs []DecisionGPU `json:"gpus"`
	// Devices are the devices of other classes by class (such as "rdma").
	Devices map[string][]string `json:"devices,omitempty"`
	// MemoryMiB is the memory reserved per NUMA node ID of the span (0 where
	// none is reserved).
	MemoryMiB map[string]int64 `json:"memoryMiB"`
	// FullPCPUs is set when only whole cores were handed out.
	FullPCPUs bool `json:"fullPCPUs,omitempty"`
}

// NewDecision describes allocation a on machine m.
func NewDecision(m *topology.Machine, a *allocator.Allocation) Decision {
	d := Decision{Policy: a.Policy, Exclusive: a.Exclusive, CPUSet: a.CPUs.String(), FullPCPUs: a.FullPCPUs,
		NUMANodes: []int{}, GPUs: []DecisionGPU{}, MemoryMiB: map[string]int64{}}
	for _, id := range a.NUMANodes() {
		d.NUMANodes = append(d.NUMANodes, int(id))
		d.MemoryMiB[strconv.Itoa(int(id))] = 0
	}
	for _, x := range a.Memory {
		d.MemoryMiB[strconv.Itoa(int(x.Node))] = x.MiB
	}
	for _, g := range a.GPUs {
		gpu, _ := m.GPU(g)
		d.GPUs = append(d.GPUs, DecisionGPU{ID: g, UUID: gpu.UUID})
	}
	if len(a.Devices) > 0 {
		d.Devices = make(map[string][]string, len(a.Devices))
		for c, ids := range a.Devices {
			d.Devices[c] = slices.Clone(ids)
		}
	}
	return d
}

// String returns the annotation value (compact JSON).
func (d Decision) String() string {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return string(b)
}

// ParseDecision reads an annotation value. It checks the form only (a
// cpulist, policy names, non-negative IDs and amounts); Allocation checks
// it against a machine. Errors wrap [ErrInvalidDecision].
func ParseDecision(s string) (Decision, error) {
	var d Decision
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	if err := dec.Decode(&d); err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrInvalidDecision, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Decision{}, fmt.Errorf("%w: data after the JSON object", ErrInvalidDecision)
	}
	if _, err := numa.ParseCPUSet(d.CPUSet); err != nil {
		return Decision{}, fmt.Errorf("%w: cpuset: %w", ErrInvalidDecision, err)
	}
	for _, g := range d.GPUs {
		if g.ID < 0 {
			return Decision{}, fmt.Errorf("%w: negative GPU ID %d", ErrInvalidDecision, g.ID)
		}
	}
	for k, v := range d.MemoryMiB {
		if _, err := strconv.Atoi(k); err != nil || v < 0 {
			return Decision{}, fmt.Errorf("%w: memoryMiB entry %q: %d", ErrInvalidDecision, k, v)
		}
	}
	return d, nil
}

// Allocation converts the decision into the allocation to claim on machine
// m under the given ID (the pod's key). It refuses NUMA node IDs the machine
// does not have and GPUs whose UUID does not match the machine's; whether
// the CPUs and devices are free is for the state's Claim to say.
func (d Decision) Allocation(m *topology.Machine, id string) (allocator.Allocation, error) {
	cpus, err := numa.ParseCPUSet(d.CPUSet)
	if err != nil {
		return allocator.Allocation{}, fmt.Errorf("%w: cpuset: %w", ErrInvalidDecision, err)
	}
	a := allocator.Allocation{ID: id, Policy: d.Policy, Exclusive: d.Exclusive, FullPCPUs: d.FullPCPUs, CPUs: cpus}
	for _, g := range d.GPUs {
		gpu, ok := m.GPU(g.ID)
		if !ok {
			return allocator.Allocation{}, fmt.Errorf("%w: GPU %d does not exist on this node", ErrInvalidDecision, g.ID)
		}
		if g.UUID != "" && gpu.UUID != "" && g.UUID != gpu.UUID {
			return allocator.Allocation{}, fmt.Errorf("%w: GPU %d is %s on this node, the decision says %s",
				ErrInvalidDecision, g.ID, gpu.UUID, g.UUID)
		}
		a.GPUs = append(a.GPUs, g.ID)
	}
	for _, k := range slices.Sorted(maps.Keys(d.MemoryMiB)) {
		v := d.MemoryMiB[k]
		n, _ := strconv.Atoi(k)
		if _, ok := m.NodeIndex(numa.NodeID(n)); !ok {
			return allocator.Allocation{}, fmt.Errorf("%w: NUMA node %d does not exist on this node", ErrInvalidDecision, n)
		}
		if v > 0 {
			a.Memory = append(a.Memory, allocator.NodeMemory{Node: numa.NodeID(n), MiB: v})
		}
	}
	slices.SortFunc(a.Memory, func(x, y allocator.NodeMemory) int { return cmp.Compare(x.Node, y.Node) })
	for _, n := range d.NUMANodes {
		if _, ok := m.NodeIndex(numa.NodeID(n)); !ok {
			return allocator.Allocation{}, fmt.Errorf("%w: NUMA node %d does not exist on this node", ErrInvalidDecision, n)
		}
	}
	if len(d.Devices) > 0 {
		a.Devices = make(map[string][]string, len(d.Devices))
		for c, ids := range d.Devices {
			a.Devices[c] = slices.Clone(ids)
		}
	}
	return a, nil
}

// KoordinatorAnnotations returns Koordinator's
// scheduling.koordinator.sh/resource-status (the cpuset and the NUMA nodes
// with their share of the CPUs) and, when the decision has GPUs,
// scheduling.koordinator.sh/device-allocated (each GPU by minor number,
// whole), so that Koordinator's node agent can apply the decision.
func (d Decision) KoordinatorAnnotations(m *topology.Machine) (map[string]string, error) {
	cpus, err := numa.ParseCPUSet(d.CPUSet)
	if err != nil {
		return nil, fmt.Errorf("%w: cpuset: %w", ErrInvalidDecision, err)
	}
	type numaRes struct {
		Node      int               `json:"node"`
		Resources map[string]string `json:"resources,omitempty"`
	}
	status := struct {
		CPUSet            string    `json:"cpuset,omitempty"`
		NUMANodeResources []numaRes `json:"numaNodeResources,omitempty"`
	}{CPUSet: d.CPUSet}
	for _, n := range d.NUMANodes {
		i, ok := m.NodeIndex(numa.NodeID(n))
		if !ok {
			return nil, fmt.Errorf("%w: NUMA node %d does not exist on this node", ErrInvalidDecision, n)
		}
		res := map[string]string{ResourceCPU: strconv.Itoa(cpus.IntersectionCount(m.NodeCPUs(i)))}
		if v := d.MemoryMiB[strconv.Itoa(n)]; v > 0 {
			res[ResourceMemory] = strconv.FormatInt(v, 10) + "Mi"
		}
		status.NUMANodeResources = append(status.NUMANodeResources, numaRes{Node: n, Resources: res})
	}
	out := map[string]string{}
	b, err := json.Marshal(status)
	if err != nil {
		return nil, err
	}
	out[AnnotationKoordResourceStatus] = string(b)
	if len(d.GPUs) > 0 {
		type devAlloc struct {
			Minor     int               `json:"minor"`
			Resources map[string]string `json:"resources"`
		}
		var gpus []devAlloc
		for _, g := range d.GPUs {
			gpus = append(gpus, devAlloc{Minor: g.ID, Resources: map[string]string{
				"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"}})
		}
		b, err := json.Marshal(map[string][]devAlloc{"gpu": gpus})
		if err != nil {
			return nil, err
		}
		out[AnnotationKoordDeviceAllocated] = string(b)
	}
	return out, nil
}
