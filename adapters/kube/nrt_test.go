package kube_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// sparseMachine has sparse node IDs, a CPU-less node, reserved CPUs and GPUs
// on two nodes.
func sparseMachine(t testing.TB) *topology.Machine {
	t.Helper()
	m, err := topology.NewBuilder("sparse").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.MustParseCPUSet("0-3,8-11"), MemoryMiB: 4096}).
		AddNode(topology.Node{ID: 2, Socket: 1, CPUs: numa.MustParseCPUSet("4-7,12-15"), MemoryMiB: 4096}).
		AddNode(topology.Node{ID: 5, Socket: 1, CPUs: numa.CPUSet{}, MemoryMiB: 1024}).
		SetDistances([][]int{{10, 21, 31}, {21, 10, 13}, {31, 13, 10}}).
		SetReservedCPUs(numa.MustParseCPUSet("0,8")).
		AddGPU(topology.GPU{ID: 0, NUMANode: 0, UUID: "GPU-a"}).
		AddGPU(topology.GPU{ID: 1, NUMANode: 2, UUID: "GPU-b"}).
		AddGPU(topology.GPU{ID: 3, NUMANode: 2, UUID: "GPU-c"}).
		Build()
	require.NoError(t, err)
	return m
}

// roundTrip writes the report as JSON and reads it back.
func roundTrip(t *testing.T, r *kube.NodeResourceTopology) *kube.NodeResourceTopology {
	t.Helper()
	b, err := json.Marshal(r)
	require.NoError(t, err)
	got, err := kube.ParseNRT(b)
	require.NoError(t, err)
	return got
}

func dropAttributes(r *kube.NodeResourceTopology, names ...string) {
	keep := func(attrs []kube.NRTAttribute) []kube.NRTAttribute {
		var out []kube.NRTAttribute
		for _, a := range attrs {
			drop := false
			for _, n := range names {
				drop = drop || a.Name == n || (n == "numaplace.io/" && strings.HasPrefix(a.Name, n))
			}
			if !drop {
				out = append(out, a)
			}
		}
		return out
	}
	r.Attributes = keep(r.Attributes)
	for i := range r.Zones {
		r.Zones[i].Attributes = keep(r.Zones[i].Attributes)
	}
}

// gpusPerNode returns the GPU IDs by NUMA node ID.
func gpusPerNode(m *topology.Machine) map[numa.NodeID][]int {
	out := map[numa.NodeID][]int{}
	for _, g := range m.GPUs() {
		out[g.NUMANode] = append(out[g.NUMANode], g.ID)
	}
	return out
}

func machines(t *testing.T) map[string]*topology.Machine {
	out := map[string]*topology.Machine{"sparse": sparseMachine(t)}
	for _, name := range topology.PresetNames() {
		out[name] = preset(t, name)
	}
	return out
}

func TestNRTRoundTripExact(t *testing.T) {
	for name, m := range machines(t) {
		t.Run(name, func(t *testing.T) {
			r, err := kube.NRTFromState(m, nil)
			require.NoError(t, err)
			got, err := kube.MachineFromNRT(roundTrip(t, r))
			require.NoError(t, err)
			want, _ := json.Marshal(m)
			have, _ := json.Marshal(got)
			require.JSONEq(t, string(want), string(have))
		})
	}
}

func TestNRTRoundTripZoneAttributes(t *testing.T) {
	for name, m := range machines(t) {
		if unzoned(m) {
			continue // the zones are a part of the machine: TestNRTGraceZones
		}
		t.Run(name, func(t *testing.T) {
			r, err := kube.NRTFromState(m, nil)
			require.NoError(t, err)
			dropAttributes(r, kube.NRTAttributeTopology)
			got, err := kube.MachineFromNRT(roundTrip(t, r))
			require.NoError(t, err)
			require.Equal(t, m.NodeIDs(), got.NodeIDs())
			for i := range m.NumNodes() {
				require.True(t, m.NodeCPUs(i).Equal(got.NodeCPUs(i)), "node %d", m.NodeID(i))
				require.Equal(t, m.Node(i).Socket, got.Node(i).Socket)
				require.Equal(t, m.Node(i).MemoryMiB, got.Node(i).MemoryMiB)
			}
			require.True(t, m.ReservedCPUs().Equal(got.ReservedCPUs()))
			require.Equal(t, m.Distances().Rows(), got.Distances().Rows())
			require.Equal(t, m.NUMASets(), got.NUMASets())
			want := gpusPerNode(m)
			delete(want, topology.UnknownNode) // not in any zone
			require.Equal(t, want, gpusPerNode(got))
		})
	}
}

func TestNRTRoundTripCountsOnly(t *testing.T) {
	for name, m := range machines(t) {
		if unzoned(m) {
			continue // the zones are a part of the machine: TestNRTGraceZones
		}
		t.Run(name, func(t *testing.T) {
			r, err := kube.NRTFromState(m, nil)
			require.NoError(t, err)
			dropAttributes(r, "numaplace.io/")
			got, err := kube.MachineFromNRT(roundTrip(t, r))
			require.NoError(t, err)
			require.Equal(t, m.NodeIDs(), got.NodeIDs())
			next := 0
			for i := range m.NumNodes() {
				n := m.NodeCPUs(i).Size()
				require.Equal(t, n, got.NodeCPUs(i).Size(), "node %d", m.NodeID(i))
				if n > 0 {
					// Synthetic IDs: consecutive blocks in zone order.
					require.Equal(t, numa.CPURange(next, next+n-1).String(), got.NodeCPUs(i).String())
					next += n
				}
				require.Equal(t, m.NodeCPUs(i).IntersectionCount(m.ReservedCPUs()),
					got.NodeCPUs(i).IntersectionCount(got.ReservedCPUs()))
				require.Equal(t, m.Node(i).Socket, got.Node(i).Socket, "the parent names the socket")
			}
			require.Equal(t, m.Distances().Rows(), got.Distances().Rows())
			want, have := gpusPerNode(m), gpusPerNode(got)
			delete(want, topology.UnknownNode)
			for id, g := range want {
				require.Len(t, have[id], len(g), "GPUs of node %d", id)
			}
		})
	}
}

func TestNRTFromStateAvailable(t *testing.T) {
	m := preset(t, "dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	_, err := s.Allocate(&allocator.Request{ID: "a", CPUs: 24, GPUs: 4, MemoryMiB: 1024, Policy: policy.SingleNUMANode})
	require.NoError(t, err)
	_, err = s.SetDeviceHealth(allocator.GPUClass, "7", false)
	require.NoError(t, err)
	r, err := kube.NRTFromState(m, s)
	require.NoError(t, err)
	r.Metadata.Name = "node-a"
	r = roundTrip(t, r)

	require.Equal(t, kube.NRTAPIVersion, r.APIVersion)
	require.Equal(t, kube.NRTKind, r.Kind)
	v, ok := r.Attribute(kube.NRTAttributeTopologyManagerPolicy)
	require.True(t, ok)
	require.Equal(t, "none", v)
	require.Len(t, r.Zones, 2)
	z0, z1 := r.Zones[0], r.Zones[1]
	require.Equal(t, "node-0", z0.Name)
	require.Equal(t, kube.NRTZoneTypeNode, z0.Type)
	require.Equal(t, []kube.NRTCost{{Name: "node-0", Value: 10}, {Name: "node-1", Value: 21}}, z0.Costs)

	cpu, _ := z0.Resource(kube.ResourceCPU)
	require.Equal(t, kube.NRTResource{Name: "cpu", Capacity: "112", Allocatable: "112", Available: "88"}, cpu)
	gpu, _ := z0.Resource(kube.ResourceAliyunGPU)
	require.Equal(t, kube.NRTResource{Name: kube.ResourceAliyunGPU, Capacity: "4", Allocatable: "4", Available: "0"}, gpu)
	gpu, _ = z1.Resource(kube.ResourceAliyunGPU)
	require.Equal(t, kube.NRTResource{Name: kube.ResourceAliyunGPU, Capacity: "4", Allocatable: "3", Available: "3"}, gpu)
	mem, _ := z0.Resource(kube.ResourceMemory)
	require.Equal(t, kube.NRTQuantity("1048576Mi"), mem.Capacity)
	require.Equal(t, kube.NRTQuantity("1047552Mi"), mem.Available)
	cpus, _ := z1.Attribute(kube.NRTAttributeCPUs)
	require.Equal(t, "56-111,168-223", cpus)
	gpus, _ := z1.Attribute(kube.NRTAttributeGPUs)
	require.Equal(t, "4-7", gpus)

	// The machine read back holds the same; the name is the machine's own.
	got, err := kube.MachineFromNRT(r)
	require.NoError(t, err)
	require.Equal(t, "dgx-h100", got.Name())

	// A state of another machine is refused.
	_, err = kube.NRTFromState(preset(t, "dgx-a100"), s)
	require.ErrorIs(t, err, kube.ErrInvalidNRT)
	_, err = kube.NRTFromState(nil, nil)
	require.ErrorIs(t, err, kube.ErrInvalidNRT)
}

func TestMachineFromNRTWithoutAttributes(t *testing.T) {
	// A report as a generic exporter writes it: numbers only, quantities as
	// strings or numbers, a zone of another type, reserved CPUs as
	// allocatable < capacity.
	js := `{"metadata":{"name":"worker-1"},"zones":[
	  {"name":"node-1","type":"Node","costs":[{"name":"node-0","value":21},{"name":"node-1","value":10}],
	   "resources":[{"name":"cpu","capacity":"8","allocatable":"8","available":"8"},
	                {"name":"nvidia.com/gpu","capacity":2,"allocatable":2,"available":1}]},
	  {"name":"node-0","type":"Node","costs":[{"name":"node-0","value":10},{"name":"node-1","value":21}],
	   "resources":[{"name":"cpu","capacity":"8","allocatable":"6","available":"2"},
	                {"name":"memory","capacity":"64Gi","allocatable":"60Gi","available":"10Gi"},
	                {"name":"aliyun.com/gpu","capacity":"2","allocatable":"2","available":"2"}]},
	  {"name":"cache-0","type":"Cache"}]}`
	r, err := kube.ParseNRT([]byte(js))
	require.NoError(t, err)
	m, err := kube.MachineFromNRT(r)
	require.NoError(t, err)
	require.Equal(t, "worker-1", m.Name())
	require.Equal(t, []numa.NodeID{0, 1}, m.NodeIDs())
	require.Equal(t, "0-7", m.NodeCPUs(0).String())
	require.Equal(t, "8-15", m.NodeCPUs(1).String())
	require.Equal(t, "0-1", m.ReservedCPUs().String())
	require.Equal(t, int64(64<<10), m.Node(0).MemoryMiB)
	require.Equal(t, map[numa.NodeID][]int{0: {0, 1}, 1: {2, 3}}, gpusPerNode(m))
	require.Equal(t, [][]int{{10, 21}, {21, 10}}, m.Distances().Rows())
	require.Equal(t, topology.UnknownSocket, m.Node(0).Socket)
}

func TestMachineFromNRTErrors(t *testing.T) {
	zone := func(name string, extra string) string {
		return `{"name":"` + name + `","type":"Node","resources":[{"name":"cpu","capacity":"4","allocatable":"4"}]` + extra + `}`
	}
	report := func(zones ...string) string {
		return `{"zones":[` + strings.Join(zones, ",") + `]}`
	}
	m := sparseMachine(t)
	exact, err := kube.NRTFromState(m, nil)
	require.NoError(t, err)
	topo, _ := exact.Attribute(kube.NRTAttributeTopology)

	tests := []struct {
		name, in, want string
	}{
		{"no zone", report(), "no zone"},
		{"bad zone name", report(zone("numa0", "")), `"numa0"`},
		{"zone name with a sign", report(zone("node-+1", "")), `"node-+1"`},
		{"zone listed twice", report(zone("node-0", ""), zone("node-0", "")), "listed twice"},
		{"cost to an unknown zone", report(zone("node-0", `,"costs":[{"name":"node-9","value":20}]`)), `"node-9"`},
		{"cost out of range", report(zone("node-0", `,"costs":[{"name":"node-0","value":0}]`)), "1-255"},
		{"bad capacity", report(`{"name":"node-0","type":"Node","resources":[{"name":"cpu","capacity":"four"}]}`), "cpu capacity"},
		{"fraction of a CPU", report(`{"name":"node-0","type":"Node","resources":[{"name":"cpu","capacity":"3500m"}]}`), "not a whole number"},
		{"allocatable above capacity", report(`{"name":"node-0","type":"Node","resources":[{"name":"cpu","capacity":"2","allocatable":"3"}]}`), "above the capacity"},
		{"huge capacity", report(`{"name":"node-0","type":"Node","resources":[{"name":"cpu","capacity":"1e15"}]}`), "above"},
		{"huge GPU capacity", report(`{"name":"node-0","type":"Node","resources":[{"name":"aliyun.com/gpu","capacity":"1e9"}]}`), "GPUs"},
		{"cpus attribute of the wrong size", report(zone("node-0", `,"attributes":[{"name":"numaplace.io/cpus","value":"0-2"}]`)), "lists 3 CPUs"},
		{"bad cpus attribute", report(zone("node-0", `,"attributes":[{"name":"numaplace.io/cpus","value":"x"}]`)), "numaplace.io/cpus"},
		{"reserved CPUs of another zone", report(zone("node-0", `,"attributes":[{"name":"numaplace.io/reserved-cpus","value":"9"}]`)), "not the zone's"},
		{"bad socket", report(zone("node-0", `,"attributes":[{"name":"numaplace.io/socket","value":"-1"}]`)), "socket"},
		{"bad parent", report(zone("node-0", `,"parent":"socket-x"`)), "socket-x"},
		{"GPU list of the wrong size", report(zone("node-0", `,"attributes":[{"name":"numaplace.io/gpus","value":"0-1"}]`)), "lists 2 GPUs"},
		{"overlapping CPUs", report(zone("node-0", `,"attributes":[{"name":"numaplace.io/cpus","value":"0-3"}]`), zone("node-1", "")), "two NUMA nodes"},
		{"bad topology attribute", `{"attributes":[{"name":"numaplace.io/topology","value":"{}"}],"zones":[]}`, "numaplace.io/topology"},
		{"topology attribute disagreeing with the zones", `{"attributes":[{"name":"numaplace.io/topology","value":` +
			jsonString(topo) + `}],"zones":[` + zone("node-0", "") + `]}`, "zones"},
		{"quantity of another type", report(`{"name":"node-0","type":"Node","resources":[{"name":"cpu","capacity":true}]}`), "quantity"},
		{"trailing data", report(zone("node-0", "")) + "{}", "data after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := kube.ParseNRT([]byte(tt.in))
			if err == nil {
				_, err = kube.MachineFromNRT(r)
			}
			require.ErrorIs(t, err, kube.ErrInvalidNRT)
			require.Contains(t, err.Error(), tt.want)
		})
	}
	_, err = kube.MachineFromNRT(nil)
	require.ErrorIs(t, err, kube.ErrInvalidNRT)

	// The exact report with one zone's CPU count changed is inconsistent.
	exact.Zones[1].Resources[0].Capacity = "5"
	exact.Zones[1].Resources[0].Allocatable = "5"
	_, err = kube.MachineFromNRT(exact)
	require.ErrorIs(t, err, kube.ErrInvalidNRT)
	require.Contains(t, err.Error(), "zone node-2: cpu capacity 5")
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestKoordinatorCPUTopologyRoundTrip(t *testing.T) {
	for name, m := range machines(t) {
		t.Run(name, func(t *testing.T) {
			ann := kube.KoordinatorCPUTopology(m)
			got, err := kube.MachineFromKoordinatorCPUTopology(ann, m.GPUs())
			require.NoError(t, err)
			// CPU-less nodes have no CPU to be listed by.
			var ids []numa.NodeID
			for i := range m.NumNodes() {
				if m.NodeCPUs(i).Size() == 0 {
					continue
				}
				ids = append(ids, m.NodeID(i))
				j, ok := got.NodeIndex(m.NodeID(i))
				require.True(t, ok)
				require.True(t, m.NodeCPUs(i).Equal(got.NodeCPUs(j)))
				require.Equal(t, max(m.Node(i).Socket, 0), got.Node(j).Socket)
			}
			require.Equal(t, ids, got.NodeIDs())
			require.Equal(t, len(m.Cores()), len(got.Cores()))
			for i, c := range m.Cores() {
				require.True(t, c.CPUs.Equal(got.CoreCPUs(i)))
			}
			if _, unknownCPULess := gpusPerNode(m)[topology.UnknownNode]; !unknownCPULess {
				require.Equal(t, m.GPUs(), got.GPUs())
			}
		})
	}
}

func TestMachineFromKoordinatorCPUTopology(t *testing.T) {
	ann := `{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":1,"core":1,"socket":0,"node":0},
	  {"id":2,"core":0,"socket":0,"node":0},{"id":3,"core":1,"socket":0,"node":0},
	  {"id":4,"core":0,"socket":1,"node":1},{"id":5,"core":0,"socket":1,"node":1}]}`
	m, err := kube.MachineFromKoordinatorCPUTopology(ann, []topology.GPU{{ID: 0, NUMANode: 1}})
	require.NoError(t, err)
	require.Equal(t, "0-3", m.NodeCPUs(0).String())
	require.Equal(t, "4-5", m.NodeCPUs(1).String())
	require.Equal(t, 2, m.ThreadsPerCore())
	require.Len(t, m.Cores(), 3, "core 0 of socket 1 is not core 0 of socket 0")
	require.Equal(t, []int{0, 1}, m.Sockets())
	require.Equal(t, 1, m.NumGPUs())

	tests := []struct{ name, in, want string }{
		{"not JSON", `x`, "invalid character"},
		{"empty", `{"detail":[]}`, "no CPU"},
		{"negative CPU", `{"detail":[{"id":-1,"core":0,"socket":0,"node":0}]}`, "out of range"},
		{"CPU listed twice", `{"detail":[{"id":1,"core":0,"socket":0,"node":0},{"id":1,"core":0,"socket":0,"node":0}]}`, "listed twice"},
		{"node on two sockets", `{"detail":[{"id":0,"core":0,"socket":0,"node":0},{"id":1,"core":1,"socket":1,"node":0}]}`, "sockets 0 and 1"},
		{"negative node", `{"detail":[{"id":0,"core":0,"socket":0,"node":-2}]}`, "negative"},
		{"trailing data", `{"detail":[{"id":0,"core":0,"socket":0,"node":0}]} 1`, "data after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kube.MachineFromKoordinatorCPUTopology(tt.in, nil)
			require.ErrorIs(t, err, kube.ErrInvalidNRT)
			require.Contains(t, err.Error(), tt.want)
		})
	}
	// A GPU on a node the annotation does not have is refused.
	_, err = kube.MachineFromKoordinatorCPUTopology(ann, []topology.GPU{{ID: 0, NUMANode: 7}})
	require.ErrorIs(t, err, kube.ErrInvalidNRT)
	require.ErrorIs(t, err, topology.ErrInvalid)
}

// FuzzMachineFromNRT checks that reading any report never panics and that
// every error wraps ErrInvalidNRT.
func FuzzMachineFromNRT(f *testing.F) {
	m := sparseMachine(f)
	r, err := kube.NRTFromState(m, nil)
	if err != nil {
		f.Fatal(err)
	}
	b, _ := json.Marshal(r)
	f.Add(string(b))
	dropAttributes(r, "numaplace.io/")
	b, _ = json.Marshal(r)
	f.Add(string(b))
	f.Add(`{"zones":[{"name":"node-0","type":"Node","resources":[{"name":"cpu","capacity":"4"}]}]}`)
	f.Add(`{"detail":[{"id":0,"core":0,"socket":0,"node":0}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := kube.ParseNRT([]byte(s)); err == nil {
			if _, err := kube.MachineFromNRT(r); err != nil && !strings.Contains(err.Error(), kube.ErrInvalidNRT.Error()) {
				t.Fatalf("error %v does not wrap ErrInvalidNRT", err)
			}
		}
		if _, err := kube.MachineFromKoordinatorCPUTopology(s, nil); err != nil && !strings.Contains(err.Error(), kube.ErrInvalidNRT.Error()) {
			t.Fatalf("error %v does not wrap ErrInvalidNRT", err)
		}
	})
}

func TestNRTSetAttribute(t *testing.T) {
	r := &kube.NodeResourceTopology{Attributes: []kube.NRTAttribute{{Name: "a", Value: "1"}}}
	r.SetAttribute("a", "2")
	r.SetAttribute("b", "3")
	require.Equal(t, []kube.NRTAttribute{{Name: "a", Value: "2"}, {Name: "b", Value: "3"}}, r.Attributes)
	v, ok := r.Attribute("b")
	require.True(t, ok)
	require.Equal(t, "3", v)
}

func TestNRTMetadataWireNames(t *testing.T) {
	r := kube.NodeResourceTopology{APIVersion: kube.NRTAPIVersion, Kind: kube.NRTKind, Metadata: kube.NRTObjectMeta{
		Name: "n1", Labels: map[string]string{"l": "v"},
		OwnerReferences: []kube.NRTOwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "u1"}}}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.JSONEq(t, `{"apiVersion":"topology.node.k8s.io/v1alpha2","kind":"NodeResourceTopology","zones":null,
		"metadata":{"name":"n1","labels":{"l":"v"},"ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n1","uid":"u1"}]}}`, string(b))
}
