package kube_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

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
func requireSameAllocation(t *testing.T, want, got allocator.Allocation) {
	t.Helper()
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

			// The span is the decision's NUMA nodes; memory names each of them.
			var ids []int
			for _, id := range a.NUMANodes() {
				ids = append(ids, int(id))
			}
			require.Equal(t, ids, d.NUMANodes)
			require.Len(t, d.MemoryMiB, len(ids))
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
		{"an array", `[]`, "cannot unmarshal"},
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
		{"unknown memory node", `{"cpuset":"0","memoryMiB":{"7":10}}`, "NUMA node 7 does not exist"},
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
