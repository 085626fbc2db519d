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
	"strings"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/internal/strictjson"
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
	// Under policy None, which the rule does not bind, it is left out of
	// the JSON when Required (the default it reads back as).
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
	// none is reserved; under policy None, whose pods have no NUMA-aligned
	// memory to speak of, only the nodes where some is).
	MemoryMiB map[string]int64 `json:"memoryMiB"`
	// FullPCPUs is set when only whole cores were handed out.
	FullPCPUs bool `json:"fullPCPUs,omitempty"`
}

// NewDecision describes allocation a on machine m.
func NewDecision(m *topology.Machine, a *allocator.Allocation) Decision {
	if a == nil {
		a = &allocator.Allocation{}
	}
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
	return d.canonical()
}

// String returns the annotation value (compact JSON). Missing lists and
// maps are written empty ([] and {}), never null, so that the value always
// reads back with ParseDecision.
func (d Decision) String() string {
	d = d.canonical()
	var b []byte
	var err error
	if d.Policy == policy.None && d.Exclusive == policy.Required {
		b, err = json.Marshal(noneDecision(d))
	} else {
		b, err = json.Marshal(d)
	}
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return string(b)
}

// decisionFields and decisionGPUFields are the JSON names of a decision
// and of one of its GPUs, exactly (keys are case-sensitive).
var (
	decisionFields    = []string{"policy", "exclusive", "cpuset", "numaNodes", "gpus", "devices", "memoryMiB", "fullPCPUs"}
	decisionGPUFields = []string{"id", "uuid"}
)

// ParseDecision reads an annotation value strictly: one JSON object with
// only the fields of [Decision], spelt exactly (keys are case-sensitive),
// no key twice in any object, no null values, nothing after the object; a
// valid cpulist and policy names; NUMA node IDs ascending without
// repetition, GPUs by ascending ID without repetition, devices (left out
// when there are none) with a non-empty class other than "gpu" and
// distinct non-empty IDs; memoryMiB
// keyed by NUMA node IDs written canonically ("3", not "03" or "+3"), each
// one of numaNodes, with amounts >= 0. Missing lists and maps read as
// empty, a missing exclusive as Required, and under policy None entries of
// memoryMiB that are 0 are dropped, so that String of the result is the
// canonical form and reads back equal. It checks the form only; Allocation checks the decision against a
// machine. Errors wrap [ErrInvalidDecision] and name the field.
func ParseDecision(s string) (Decision, error) {
	bad := func(format string, args ...any) (Decision, error) {
		return Decision{}, fmt.Errorf("%w: %s", ErrInvalidDecision, fmt.Sprintf(format, args...))
	}
	if err := checkDecisionKeys([]byte(s)); err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrInvalidDecision, err)
	}
	var d Decision
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrInvalidDecision, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return bad("data after the JSON object")
	}
	// The shared strict reader adds what the checks above leave: strings
	// (a GPU's UUID, a device ID) must be valid UTF-8.
	if err := strictjson.Decode([]byte(s), new(Decision), strictjson.Options{}); err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrInvalidDecision, err)
	}
	if _, err := numa.ParseCPUSet(d.CPUSet); err != nil {
		return Decision{}, fmt.Errorf("%w: cpuset: %w", ErrInvalidDecision, err)
	}
	for i, n := range d.NUMANodes {
		switch {
		case n < 0:
			return bad("numaNodes: negative NUMA node ID %d", n)
		case i > 0 && n <= d.NUMANodes[i-1]:
			return bad("numaNodes %v: not ascending without repetition", d.NUMANodes)
		}
	}
	for i, g := range d.GPUs {
		switch {
		case g.ID < 0:
			return bad("gpus: negative GPU ID %d", g.ID)
		case i > 0 && g.ID <= d.GPUs[i-1].ID:
			return bad("gpus: GPU %d after GPU %d: not ascending without repetition", g.ID, d.GPUs[i-1].ID)
		}
	}
	if d.Devices != nil && len(d.Devices) == 0 {
		return bad("devices: an empty object (leave the field out when there are no devices)")
	}
	for _, class := range slices.Sorted(maps.Keys(d.Devices)) {
		ids := d.Devices[class]
		switch {
		case class == "":
			return bad("devices: an empty class name")
		case class == allocator.GPUClass:
			return bad(`devices: class "gpu": GPUs are listed under "gpus"`)
		case len(ids) == 0:
			return bad("devices: class %s lists no device", quote.Short(class))
		}
		seen := make(map[string]bool, len(ids))
		for _, id := range ids {
			if id == "" || seen[id] {
				return bad("devices: class %s: device ID %s empty or repeated", quote.Short(class), quote.Short(id))
			}
			seen[id] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(d.MemoryMiB)) {
		v := d.MemoryMiB[k]
		n, err := strconv.Atoi(k)
		switch {
		case err != nil || n < 0 || strconv.Itoa(n) != k:
			return bad("memoryMiB: key %s is not a NUMA node ID (a non-negative integer written without sign or leading zeros)", quote.Short(k))
		case v < 0:
			return bad("memoryMiB: %d MiB on NUMA node %s is negative", v, k)
		case !slices.Contains(d.NUMANodes, n):
			return bad("memoryMiB: NUMA node %s is not one of numaNodes %v", k, d.NUMANodes)
		}
	}
	return d.canonical(), nil
}

// noneDecision is a [Decision] under policy None with the default
// exclusivity as JSON: the same fields in the same order, without
// "exclusive".
type noneDecision struct {
	Policy    policy.Policy       `json:"policy"`
	Exclusive policy.Exclusivity  `json:"-"`
	CPUSet    string              `json:"cpuset"`
	NUMANodes []int               `json:"numaNodes"`
	GPUs      []DecisionGPU       `json:"gpus"`
	Devices   map[string][]string `json:"devices,omitempty"`
	MemoryMiB map[string]int64    `json:"memoryMiB"`
	FullPCPUs bool                `json:"fullPCPUs,omitempty"`
}

// canonical returns d as String writes it and ParseDecision returns it:
// empty lists and maps where missing, and under policy None no memoryMiB
// entry of 0.
func (d Decision) canonical() Decision {
	d = d.withEmptyLists()
	if d.Policy == policy.None && slices.Contains(slices.Collect(maps.Values(d.MemoryMiB)), 0) {
		mem := make(map[string]int64, len(d.MemoryMiB))
		for k, v := range d.MemoryMiB {
			if v != 0 {
				mem[k] = v
			}
		}
		d.MemoryMiB = mem
	}
	return d
}

// withEmptyLists returns d with empty, non-nil numaNodes, gpus and
// memoryMiB where they are missing.
func (d Decision) withEmptyLists() Decision {
	if d.NUMANodes == nil {
		d.NUMANodes = []int{}
	}
	if d.GPUs == nil {
		d.GPUs = []DecisionGPU{}
	}
	if d.MemoryMiB == nil {
		d.MemoryMiB = map[string]int64{}
	}
	return d
}

// checkDecisionKeys checks what encoding/json lets through: the value is an
// object whose keys (and those of each GPU) are exactly the known names,
// no object repeats a key, and no value is null.
func checkDecisionKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("want a JSON object, got %s", describeToken(tok))
	}
	return walkObject(dec, "", decisionFields)
}

// walkObject reads the rest of an object (after its "{") whose keys must be
// among known (any key when known is nil), refusing repeated keys and null
// values at any depth; path names the object in errors.
func walkObject(dec *json.Decoder, path string, known []string) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		field := key
		if path != "" {
			field = path + "." + key
		}
		if known != nil && !slices.Contains(known, key) {
			if i := slices.IndexFunc(known, func(k string) bool { return strings.EqualFold(k, key) }); i >= 0 {
				return fmt.Errorf("unknown field %s (keys are case-sensitive: %s)", quote.Short(field), quote.Short(known[i]))
			}
			return fmt.Errorf("unknown field %s", quote.Short(field))
		}
		if seen[key] {
			return fmt.Errorf("field %s appears twice", quote.Short(field))
		}
		seen[key] = true
		var sub []string
		if path == "" && key == "gpus" {
			sub = decisionGPUFields
		}
		if err := walkValue(dec, field, sub); err != nil {
			return err
		}
	}
	_, err := dec.Token() // "}"
	return err
}

// walkValue reads one value; the objects of an array (and an object itself)
// are checked with known.
func walkValue(dec *json.Decoder, path string, known []string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		return fmt.Errorf("field %s is null", quote.Short(path))
	case json.Delim('{'):
		return walkObject(dec, path, known)
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkValue(dec, fmt.Sprintf("%s[%d]", path, i), known); err != nil {
				return err
			}
		}
		_, err := dec.Token() // "]"
		return err
	}
	return nil
}

func describeToken(tok json.Token) string {
	switch tok {
	case nil:
		return "null"
	case json.Delim('['):
		return "an array"
	}
	return fmt.Sprintf("%T", tok)
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
