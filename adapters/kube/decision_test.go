package kube_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

func preset(t testing.TB, name string) *topology.Machine {
	t.Helper()
	m, err := topology.Preset(name)
	require.NoError(t, err)
	return m
}

// requireSameAllocation compares what two allocations hold.
func requireSameAllocation(t require.TestingT, want, got allocator.Allocation) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	require.Equal(t, want.ID, got.ID)
	require.Equal(t, want.Policy, got.Policy)
	require.Equal(t, want.Exclusive, got.Exclusive)
	require.Equal(t, want.FullPCPUs, got.FullPCPUs)
	require.True(t, want.CPUs.Equal(got.CPUs), "cpus %s, want %s", got.CPUs, want.CPUs)
	require.Equal(t, want.GPUs, got.GPUs)
	require.Equal(t, want.Devices, got.Devices)
	require.Equal(t, want.Memory, got.Memory)
}

func TestDecisionRoundTrip(t *testing.T) {
	tests := []struct {
		preset string
		req    allocator.Request
	}{
		{"dgx-h100", allocator.Request{CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode}},
		{"dgx-h100", allocator.Request{CPUs: 16, GPUs: 8, Policy: policy.Restricted, Exclusive: policy.Preferred}},
		{"dgx-h100", allocator.Request{CPUs: 8, GPUs: 1, MemoryMiB: 4096, Devices: map[string]int{"rdma": 1},
			Policy: policy.BestEffort}},
		{"dgx-a100", allocator.Request{CPUs: 8, FullPCPUs: true, Policy: policy.SingleNUMANode}},
		{"dgx-a100", allocator.Request{GPUs: 3, MemoryMiB: 300 << 10, Policy: policy.BestEffort}},
		{"small-1s", allocator.Request{CPUs: 2, Policy: policy.None}},
	}
	for _, tt := range tests {
		t.Run(tt.preset+"/"+tt.req.String(), func(t *testing.T) {
			m := preset(t, tt.preset)
			s := allocator.MustNew(m, allocator.Options{})
			tt.req.ID = "ns/p"
			a, err := s.Allocate(&tt.req)
			require.NoError(t, err)

			d := kube.NewDecision(m, &a)
			got, err := kube.ParseDecision(d.String())
			require.NoError(t, err)
			require.Equal(t, d, got)
			b, err := got.Allocation(m, "ns/p")
			require.NoError(t, err)
			requireSameAllocation(t, a, b)

			// The node side claims exactly the same on a fresh state.
			node := allocator.MustNew(m, allocator.Options{})
			c, err := node.Claim(b)
			require.NoError(t, err)
			require.Equal(t, a.DenseSpan, c.DenseSpan)
			require.True(t, node.FreeCPUs().Equal(s.FreeCPUs()))

			// The span is the decision's NUMA nodes; memory names each of them
			// (under None, only those where some is reserved).
			var ids []int
			for _, id := range a.NUMANodes() {
				ids = append(ids, int(id))
			}
			require.Equal(t, ids, d.NUMANodes)
			if tt.req.Policy != policy.None {
				require.Len(t, d.MemoryMiB, len(ids))
			}
		})
	}
}

func TestDecisionFormat(t *testing.T) {
	m := preset(t, "dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	a, err := s.Allocate(&allocator.Request{ID: "ns/p", CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	d := kube.NewDecision(m, &a)
	require.Equal(t, `{"policy":"SingleNUMANode","exclusive":"Required","cpuset":"0-11,112-123","numaNodes":[0],`+
		`"gpus":[{"id":0},{"id":1},{"id":2},{"id":3}],"memoryMiB":{"0":0}}`, d.String())
}

// TestDecisionOfAPlainGPUPod: the decision of a pod without a NUMA spec
// (policy None, which the exclusivity rule does not bind) says neither
// "exclusive":"Required" nor 0 MiB on its NUMA node; it reads back equal,
// and a None decision written with them still reads.
func TestDecisionOfAPlainGPUPod(t *testing.T) {
	m := preset(t, "dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	a, err := s.Allocate(&allocator.Request{ID: "ns/p", GPUs: 1, Policy: policy.None})
	require.NoError(t, err)
	d := kube.NewDecision(m, &a)
	require.Equal(t, `{"policy":"None","cpuset":"","numaNodes":[0],"gpus":[{"id":0}],"memoryMiB":{}}`, d.String())
	got, err := kube.ParseDecision(d.String())
	require.NoError(t, err)
	require.Equal(t, d, got)
	require.Equal(t, policy.Required, got.Exclusive)
	old, err := kube.ParseDecision(`{"policy":"None","exclusive":"Required","cpuset":"","numaNodes":[0],"gpus":[{"id":0}],"memoryMiB":{"0":0}}`)
	require.NoError(t, err)
	require.Equal(t, d, old)
	// Preferred is kept; memory reserved is kept.
	p, err := kube.ParseDecision(`{"policy":"None","exclusive":"Preferred","cpuset":"0","numaNodes":[0,1],"gpus":[],"memoryMiB":{"0":0,"1":64}}`)
	require.NoError(t, err)
	require.Equal(t, `{"policy":"None","exclusive":"Preferred","cpuset":"0","numaNodes":[0,1],"gpus":[],"memoryMiB":{"1":64}}`, p.String())
}

func TestDecisionUUIDs(t *testing.T) {
	b := topology.NewBuilder("uuids").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3)}).
		AddNode(topology.Node{ID: 3, Socket: 1, CPUs: numa.CPURange(4, 7)}).
		AddGPU(topology.GPU{ID: 0, NUMANode: 0, UUID: "GPU-aaa"}).
		AddGPU(topology.GPU{ID: 1, NUMANode: 3, UUID: "GPU-bbb"})
	m, err := b.Build()
	require.NoError(t, err)
	s := allocator.MustNew(m, allocator.Options{})
	a, err := s.Allocate(&allocator.Request{ID: "x", CPUs: 2, GPUs: 1, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	d := kube.NewDecision(m, &a)
	require.Equal(t, []kube.DecisionGPU{{ID: 0, UUID: "GPU-aaa"}}, d.GPUs)

	// Another node whose GPU 0 is a different device refuses the decision.
	other, err := topology.NewBuilder("other").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3)}).
		AddGPU(topology.GPU{ID: 0, NUMANode: 0, UUID: "GPU-zzz"}).Build()
	require.NoError(t, err)
	_, err = d.Allocation(other, "x")
	require.ErrorIs(t, err, kube.ErrInvalidDecision)
	require.Contains(t, err.Error(), "GPU-zzz")
	require.Contains(t, err.Error(), "GPU-aaa")

	// Sparse node IDs are written as IDs, not dense indices.
	a, err = s.Allocate(&allocator.Request{ID: "y", CPUs: 2, GPUs: 1, MemoryMiB: 0, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	d = kube.NewDecision(m, &a)
	require.Equal(t, []int{3}, d.NUMANodes)
	require.Equal(t, map[string]int64{"3": 0}, d.MemoryMiB)
}

func TestParseDecisionMalformed(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, "EOF"},
		{"not JSON", `cpuset=0-3`, "invalid character"},
		{"trailing data", `{"cpuset":"0-3"} {}`, "data after the JSON object"},
		{"bad cpuset", `{"cpuset":"3-1"}`, "cpuset"},
		{"cpuset not a string", `{"cpuset":3}`, "cpuset"},
		{"unknown policy", `{"policy":"Strict","cpuset":""}`, "Strict"},
		{"unknown exclusivity", `{"exclusive":"Sometimes","cpuset":""}`, "Sometimes"},
		{"negative GPU", `{"cpuset":"","gpus":[{"id":-1}]}`, "negative GPU ID -1"},
		{"memory key not a node", `{"cpuset":"","memoryMiB":{"zero":1}}`, `"zero"`},
		{"negative memory", `{"cpuset":"","memoryMiB":{"0":-5}}`, "-5"},
		{"an array", `[]`, "want a JSON object, got an array"},
		{"null", `null`, "want a JSON object, got null"},
		{"unknown field", `{"cpuset":"0","memoryMB":{"0":1}}`, `unknown field "memoryMB"`},
		{"unknown field of a GPU", `{"cpuset":"0","numaNodes":[0],"gpus":[{"id":0,"minor":0}]}`, `unknown field "gpus[0].minor"`},
		{"key in another case", `{"CPUSet":"0"}`, `unknown field "CPUSet" (keys are case-sensitive: "cpuset")`},
		{"GPU key in another case", `{"cpuset":"0","gpus":[{"ID":0}]}`, `"gpus[0].ID" (keys are case-sensitive: "id")`},
		{"duplicate key", `{"cpuset":"0","cpuset":"1"}`, `field "cpuset" appears twice`},
		{"duplicate memory key", `{"cpuset":"0","numaNodes":[0],"memoryMiB":{"0":1,"0":2}}`, `"memoryMiB.0" appears twice`},
		{"duplicate GPU key", `{"cpuset":"0","gpus":[{"id":0,"id":1}]}`, `"gpus[0].id" appears twice`},
		{"null field", `{"cpuset":"0","gpus":null}`, `field "gpus" is null`},
		{"null memory", `{"cpuset":"0","numaNodes":[0],"memoryMiB":{"0":null}}`, `"memoryMiB.0" is null`},
		{"fractional memory", `{"cpuset":"0","numaNodes":[0],"memoryMiB":{"0":1.5}}`, "memoryMiB"},
		{"memory key with a leading zero", `{"cpuset":"0","numaNodes":[0],"memoryMiB":{"00":1}}`, `key "00" is not a NUMA node ID`},
		{"memory key with a sign", `{"cpuset":"0","numaNodes":[3],"memoryMiB":{"+3":1}}`, `key "+3"`},
		{"memory key negative", `{"cpuset":"0","numaNodes":[0],"memoryMiB":{"-1":1}}`, `key "-1"`},
		{"memory outside the span", `{"cpuset":"0","numaNodes":[0],"memoryMiB":{"1":1}}`, "NUMA node 1 is not one of numaNodes [0]"},
		{"nodes not ascending", `{"cpuset":"0","numaNodes":[1,0]}`, "not ascending"},
		{"nodes repeated", `{"cpuset":"0","numaNodes":[0,0]}`, "not ascending"},
		{"negative node", `{"cpuset":"0","numaNodes":[-1]}`, "negative NUMA node ID -1"},
		{"GPUs repeated", `{"cpuset":"0","gpus":[{"id":0},{"id":0}]}`, "GPU 0 after GPU 0"},
		{"GPUs not ascending", `{"cpuset":"0","gpus":[{"id":2},{"id":1}]}`, "GPU 1 after GPU 2"},
		{"GPU class among devices", `{"cpuset":"0","devices":{"gpu":["0"]}}`, `class "gpu"`},
		{"empty device class", `{"cpuset":"0","devices":{"":["x"]}}`, "empty class"},
		{"empty devices", `{"cpuset":"0","devices":{}}`, "devices: an empty object"},
		{"class without devices", `{"cpuset":"0","devices":{"rdma":[]}}`, `class "rdma" lists no device`},
		{"device repeated", `{"cpuset":"0","devices":{"rdma":["a","a"]}}`, `device ID "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kube.ParseDecision(tt.in)
			require.ErrorIs(t, err, kube.ErrInvalidDecision)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestDecisionAllocationRefusals(t *testing.T) {
	m := preset(t, "dgx-h100")
	tests := []struct {
		name, in, want string
	}{
		{"unknown GPU", `{"cpuset":"0","gpus":[{"id":8}]}`, "GPU 8 does not exist"},
		{"unknown NUMA node", `{"cpuset":"0","numaNodes":[2]}`, "NUMA node 2 does not exist"},
		{"unknown memory node", `{"cpuset":"0","numaNodes":[7],"memoryMiB":{"7":10}}`, "NUMA node 7 does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := kube.ParseDecision(tt.in)
			require.NoError(t, err)
			_, err = d.Allocation(m, "x")
			require.ErrorIs(t, err, kube.ErrInvalidDecision)
			require.Contains(t, err.Error(), tt.want)
		})
	}

	// A well-formed decision naming CPUs the machine lacks is for Claim to
	// refuse.
	d, err := kube.ParseDecision(`{"policy":"SingleNUMANode","cpuset":"500-501","numaNodes":[0]}`)
	require.NoError(t, err)
	a, err := d.Allocation(m, "x")
	require.NoError(t, err)
	_, err = allocator.MustNew(m, allocator.Options{}).Claim(a)
	require.ErrorIs(t, err, allocator.ErrConflict)
}

func TestKoordinatorAnnotations(t *testing.T) {
	m := preset(t, "dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	a, err := s.Allocate(&allocator.Request{ID: "ns/p", CPUs: 16, GPUs: 6, MemoryMiB: 2048,
		Policy: policy.Restricted})
	require.NoError(t, err)
	d := kube.NewDecision(m, &a)
	ann, err := d.KoordinatorAnnotations(m)
	require.NoError(t, err)
	require.Len(t, ann, 2)

	var status struct {
		CPUSet            string `json:"cpuset"`
		NUMANodeResources []struct {
			Node      int               `json:"node"`
			Resources map[string]string `json:"resources"`
		} `json:"numaNodeResources"`
	}
	require.NoError(t, json.Unmarshal([]byte(ann[kube.AnnotationKoordResourceStatus]), &status))
	require.Equal(t, a.CPUs.String(), status.CPUSet)
	require.Len(t, status.NUMANodeResources, 2)
	total := 0
	var mem int64
	for i, nr := range status.NUMANodeResources {
		require.Equal(t, i, nr.Node)
		n, err := kube.ParseWhole(nr.Resources["cpu"])
		require.NoError(t, err)
		require.Equal(t, int64(a.CPUs.IntersectionCount(m.NodeCPUs(i))), n)
		total += int(n)
		if v, ok := nr.Resources["memory"]; ok {
			mib, err := kube.ParseMiB(v)
			require.NoError(t, err)
			mem += mib
		}
	}
	require.Equal(t, 16, total)
	require.Equal(t, int64(2048), mem)

	var dev map[string][]struct {
		Minor     int               `json:"minor"`
		Resources map[string]string `json:"resources"`
	}
	require.NoError(t, json.Unmarshal([]byte(ann[kube.AnnotationKoordDeviceAllocated]), &dev))
	require.Len(t, dev["gpu"], 6)
	for i, g := range dev["gpu"] {
		require.Equal(t, a.GPUs[i], g.Minor)
		require.Equal(t, "100", g.Resources["koordinator.sh/gpu-core"])
		require.Equal(t, "100", g.Resources["koordinator.sh/gpu-memory-ratio"])
	}

	// Without GPUs only the resource status is written.
	a2, err := allocator.MustNew(m, allocator.Options{}).Allocate(&allocator.Request{ID: "ns/q", CPUs: 4,
		Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	d2 := kube.NewDecision(m, &a2)
	ann, err = d2.KoordinatorAnnotations(m)
	require.NoError(t, err)
	require.Len(t, ann, 1)
	require.Contains(t, ann[kube.AnnotationKoordResourceStatus], `"cpuset":"`+a2.CPUs.String()+`"`)

	// Malformed decisions are refused.
	_, err = kube.Decision{CPUSet: "x"}.KoordinatorAnnotations(m)
	require.ErrorIs(t, err, kube.ErrInvalidDecision)
	_, err = kube.Decision{CPUSet: "0", NUMANodes: []int{9}}.KoordinatorAnnotations(m)
	require.ErrorIs(t, err, kube.ErrInvalidDecision)
}

// Every decision the scheduler writes, on machines with sparse NUMA node
// IDs, CPU-less nodes and memory in every policy, reads back equal (the
// value is canonical: writing it again gives the same text), names memory
// by NUMA node ID on nodes of its span, and converts back to exactly the
// allocation it describes.
func TestDecisionRoundTripProperty(t *testing.T) {
	sparse, err := topology.NewBuilder("sparse").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 7), MemoryMiB: 4096}).
		AddNode(topology.Node{ID: 5, Socket: 0, CPUs: numa.CPURange(8, 15), MemoryMiB: 4096}).
		AddNode(topology.Node{ID: 33, Socket: 1, CPUs: numa.CPURange(16, 23), MemoryMiB: 4096}).
		AddNode(topology.Node{ID: 72, Socket: 1, MemoryMiB: 8192}). // CPU-less (HBM)
		AddGPU(topology.GPU{ID: 0, NUMANode: 0, UUID: "GPU-a"}).
		AddGPU(topology.GPU{ID: 3, NUMANode: 33, UUID: "GPU-b"}).
		AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: 5}).
		Build()
	require.NoError(t, err)
	machines := []*topology.Machine{sparse, preset(t, "dgx-a100"), preset(t, "xeon-max-snc4")}
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(machines).Draw(t, "machine")
		s := allocator.MustNew(m, allocator.Options{})
		for i := range rapid.IntRange(1, 8).Draw(t, "n") {
			r := allocator.Request{ID: "p" + string(rune('a'+i)), CPUs: rapid.IntRange(0, 12).Draw(t, "cpus"),
				GPUs: rapid.IntRange(0, 2).Draw(t, "gpus"), MemoryMiB: rapid.Int64Range(0, 12000).Draw(t, "mib"),
				Policy: policy.Policy(rapid.IntRange(0, 3).Draw(t, "pol"))}
			if rapid.Bool().Draw(t, "rdma") {
				r.Devices = map[string]int{"rdma": 1}
			}
			a, err := s.Allocate(&r)
			if err != nil {
				continue
			}
			d := kube.NewDecision(m, &a)
			text := d.String()
			got, err := kube.ParseDecision(text)
			require.NoError(t, err, text)
			require.Equal(t, d, got)
			require.Equal(t, text, got.String(), "canonical")
			var mem int64
			for k, v := range got.MemoryMiB {
				id, err := strconv.Atoi(k)
				require.NoError(t, err)
				require.Contains(t, got.NUMANodes, id)
				mem += v
			}
			require.Equal(t, a.MemoryMiB(), mem)
			b, err := got.Allocation(m, a.ID)
			require.NoError(t, err)
			requireSameAllocation(t, a, b)
			c, err := allocator.MustNew(m, allocator.Options{}).Claim(b)
			require.NoError(t, err)
			require.Equal(t, a.DenseSpan, c.DenseSpan)
		}
	})
}

// TestNilArguments: nil machines and allocations are empty answers, never
// a panic.
func TestNilArguments(t *testing.T) {
	require.False(t, kube.MachineAlignsMemory(nil))
	require.Contains(t, kube.KoordinatorCPUTopology(nil), "error")
	d := kube.NewDecision(nil, nil)
	require.Empty(t, d.NUMANodes)
	require.Equal(t, "<nil>", (*kube.PodError)(nil).Error())
}
