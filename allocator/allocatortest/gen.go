package allocatortest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// RDMAClass is the device class of the RDMA NICs that [Machine] sometimes
// adds and [Request] sometimes asks for.
const RDMAClass = "rdma"

// Machine generates small random machines, built with topology.NewBuilder,
// small enough that the [Model] enumerates every NUMA mask instantly:
//
//   - 1-6 NUMA nodes with sparse IDs drawn from 0..80, added sorted or not;
//   - 1-3 sockets, or no socket information; sometimes random distances;
//   - sometimes a CPU-less node with memory only;
//   - SMT on (2 threads per core, siblings paired; a node with an odd number
//     of CPUs has one single-thread core) or off; 0-8 CPUs per node, CPU
//     numbers sometimes shuffled across the machine, sometimes sparse (numbers
//     in the hundreds);
//   - 0-4 GPUs per node with optional PCIe switch names and IDs sometimes
//     sparse, sometimes a GPU of unknown NUMA node (topology.UnknownNode);
//   - sometimes 1-2 devices of class [RDMAClass], of a known or unknown node;
//   - 0-4096 MiB of memory per node; sometimes reserved CPUs; sometimes
//     explicit NUMA sets.
func Machine() *rapid.Generator[*topology.Machine] { return machine(shape{minNodes: 1, maxNodes: 6}) }

// SmallMachine generates machines like [Machine] with 2 to [MaxPreferNodes]
// NUMA nodes, always with SMT, random distances and named PCIe switches
// on nodes with GPUs, so that every criterion of the preference order
// ([Rank]) comes into play where [Model.Check] checks the preferred span.
func SmallMachine() *rapid.Generator[*topology.Machine] {
	return machine(shape{minNodes: 2, maxNodes: MaxPreferNodes, varied: true})
}

// shape bounds what machine generates: the number of nodes and, when
// varied, SMT, distances and switches always.
type shape struct {
	minNodes, maxNodes int
	varied             bool
}

func machine(sh shape) *rapid.Generator[*topology.Machine] {
	return rapid.Custom(func(t *rapid.T) *topology.Machine {
		n := rapid.IntRange(sh.minNodes, sh.maxNodes).Draw(t, "nodes")
		ids := rapid.SliceOfNDistinct(rapid.IntRange(0, 80), n, n, rapid.ID[int]).Draw(t, "ids")
		if rapid.Bool().Draw(t, "sortIDs") {
			slices.Sort(ids)
		}
		sockets := rapid.IntRange(0, 3).Draw(t, "sockets") // 0: no socket information
		smt := sh.varied || rapid.Bool().Draw(t, "smt")
		memOnly := -1
		if n > 1 && rapid.IntRange(0, 3).Draw(t, "hasMemOnly") == 0 {
			memOnly = rapid.IntRange(0, n-1).Draw(t, "memOnly")
		}
		memory := rapid.OneOf(rapid.SampledFrom([]int64{0, 512, 1024, 2048, 4096}), rapid.Int64Range(0, 4096))

		b := topology.NewBuilder("gen")
		type nodeCPUs struct{ first, count int }
		cpus := make([]nodeCPUs, n)
		total := 0
		for k := range n {
			c := 0
			if k != memOnly {
				c = rapid.IntRange(0, 8).Draw(t, fmt.Sprintf("cpus%d", k))
			}
			cpus[k] = nodeCPUs{total, c}
			total += c
		}
		// perm renumbers the CPUs, so that siblings and nodes need not be
		// contiguous, and sometimes sparsely (offline CPUs), across the
		// 64-bit words of a CPU set.
		perm := make([]int, total)
		for i := range perm {
			perm[i] = i
		}
		if total > 1 && rapid.IntRange(0, 3).Draw(t, "shuffleCPUs") == 0 {
			perm = rapid.Permutation(perm).Draw(t, "cpuOrder")
		}
		if rapid.IntRange(0, 3).Draw(t, "sparseCPUs") == 0 {
			base, stride := rapid.IntRange(0, 70).Draw(t, "cpuBase"), rapid.IntRange(1, 5).Draw(t, "cpuStride")
			for i := range perm {
				perm[i] = base + perm[i]*stride
			}
		}
		gpuStride := 1 + rapid.IntRange(0, 3).Draw(t, "gpuGap")
		gpuID := 0
		for k, id := range ids {
			socket := topology.UnknownSocket
			if sockets > 0 && !(k == memOnly && rapid.Bool().Draw(t, "memOnlySocketUnknown")) {
				socket = rapid.IntRange(0, sockets-1).Draw(t, fmt.Sprintf("socket%d", k))
			}
			var set numa.CPUSet
			for j := range cpus[k].count {
				set.Add(perm[cpus[k].first+j])
			}
			if smt {
				for j := 0; j < cpus[k].count; j += 2 {
					core := numa.NewCPUSet(perm[cpus[k].first+j])
					if j+1 < cpus[k].count {
						core.Add(perm[cpus[k].first+j+1])
					}
					b.AddCore(core)
				}
			}
			mem := memory.Draw(t, fmt.Sprintf("mem%d", k))
			if k == memOnly && mem == 0 {
				mem = 1024
			}
			b.AddNode(topology.Node{ID: numa.NodeID(id), Socket: socket, CPUs: set, MemoryMiB: mem})
			if k == memOnly {
				continue
			}
			gpus := rapid.IntRange(0, 4).Draw(t, fmt.Sprintf("gpus%d", k))
			switches := rapid.IntRange(0, 2).Draw(t, fmt.Sprintf("switches%d", k)) // 0: none named
			if sh.varied {
				switches = rapid.IntRange(1, 3).Draw(t, fmt.Sprintf("switchesNamed%d", k))
			}
			for j := range gpus {
				sw := ""
				if switches > 0 {
					sw = fmt.Sprintf("n%d-sw%d", id, j%switches)
				}
				b.AddGPU(topology.GPU{ID: gpuID, NUMANode: numa.NodeID(id), PCIeSwitch: sw})
				gpuID += gpuStride
			}
		}
		if rapid.IntRange(0, 4).Draw(t, "hasUnknownGPU") == 0 {
			b.AddGPU(topology.GPU{ID: gpuID, NUMANode: topology.UnknownNode})
		}
		if rapid.IntRange(0, 2).Draw(t, "hasRDMA") == 0 {
			for j := range rapid.IntRange(1, 2).Draw(t, "rdma") {
				node := topology.UnknownNode
				if k := rapid.IntRange(-1, n-1).Draw(t, fmt.Sprintf("rdmaNode%d", j)); k >= 0 {
					node = numa.NodeID(ids[k])
				}
				b.AddDevice(topology.Device{ID: fmt.Sprintf("mlx5_%d", j), Class: RDMAClass, NUMANode: node})
			}
		}
		if total > 0 && rapid.IntRange(0, 3).Draw(t, "hasReserved") == 0 {
			res := rapid.SliceOfNDistinct(rapid.IntRange(0, total-1), 1, min(total, 3), rapid.ID[int]).Draw(t, "reserved")
			var set numa.CPUSet
			for _, i := range res {
				set.Add(perm[i])
			}
			b.SetReservedCPUs(set)
		}
		if n > 1 && (sh.varied || rapid.IntRange(0, 3).Draw(t, "hasDistances") == 0) {
			rows := make([][]int, n)
			for i := range rows {
				rows[i] = make([]int, n)
				rows[i][i] = 10
			}
			for i := range n {
				for j := i + 1; j < n; j++ {
					d := rapid.IntRange(11, 40).Draw(t, fmt.Sprintf("dist%d-%d", i, j))
					rows[i][j], rows[j][i] = d, d
				}
			}
			b.SetDistances(rows)
		}
		if rapid.IntRange(0, 3).Draw(t, "hasSets") == 0 {
			groups := map[int][]numa.NodeID{}
			for k, id := range ids {
				g := rapid.IntRange(0, n-1).Draw(t, fmt.Sprintf("set%d", k))
				groups[g] = append(groups[g], numa.NodeID(id))
			}
			var sets [][]numa.NodeID
			for _, g := range slices.Sorted(maps.Keys(groups)) {
				sets = append(sets, groups[g])
			}
			b.SetNUMASets(sets)
		}
		m, err := b.Build()
		if err != nil {
			t.Fatalf("allocatortest.Machine built an invalid machine: %v", err)
		}
		return m
	})
}

// Request generates requests for machine m with small amounts: often
// fitting, sometimes not (up to a little more than the machine has); every
// policy and both exclusivity values; fullPCPUs sometimes (usually with a
// multiple of the threads per core); memory sometimes; [RDMAClass] devices
// sometimes (even on machines without any). About one request in eight is
// invalid: every amount zero, a negative amount, fullPCPUs with a count that
// is not a multiple of the threads per core, an undeclared policy or
// exclusivity value, or GPUs asked for as Devices["gpu"]. The ID is "r"
// and a number; [Stream] replaces it.
func Request(m *topology.Machine) *rapid.Generator[allocator.Request] {
	tpc := m.ThreadsPerCore()
	var nodeCPUs, nodeGPUs int
	var nodeMem, totalMem int64
	for i := range m.NumNodes() {
		nodeCPUs = max(nodeCPUs, m.NodeCPUs(i).Size())
		nodeMem = max(nodeMem, m.Node(i).MemoryMiB)
		totalMem += m.Node(i).MemoryMiB
	}
	perNode := map[numa.NodeID]int{}
	for _, g := range m.GPUs() {
		perNode[g.NUMANode]++
		nodeGPUs = max(nodeGPUs, perNode[g.NUMANode])
	}
	rdma := 0
	for _, d := range m.Devices() {
		if d.Class == RDMAClass {
			rdma++
		}
	}
	return rapid.Custom(func(t *rapid.T) allocator.Request {
		r := allocator.Request{ID: fmt.Sprintf("r%d", rapid.IntRange(0, 99).Draw(t, "id"))}
		big := rapid.IntRange(0, 3).Draw(t, "big") == 0 // bounded by the machine, not by one node
		cpuMax, gpuMax, memMax := nodeCPUs, nodeGPUs, nodeMem
		if big {
			cpuMax, gpuMax, memMax = m.NumCPUs()+2, m.NumGPUs()+1, totalMem+512
		}
		if rapid.IntRange(0, 3).Draw(t, "wantCPUs") != 0 {
			r.CPUs = rapid.IntRange(0, max(cpuMax, 2)).Draw(t, "cpus")
		}
		if rapid.Bool().Draw(t, "wantGPUs") {
			r.GPUs = rapid.IntRange(0, max(gpuMax, 1)).Draw(t, "gpus")
		}
		if rapid.IntRange(0, 2).Draw(t, "wantMemory") == 0 {
			r.MemoryMiB = rapid.OneOf(rapid.SampledFrom([]int64{256, 512, 1024, 2048}),
				rapid.Int64Range(0, max(memMax, 1))).Draw(t, "memoryMiB")
		}
		if (rdma > 0 && rapid.IntRange(0, 2).Draw(t, "wantRDMA") == 0) ||
			(rdma == 0 && rapid.IntRange(0, 15).Draw(t, "wantAbsentRDMA") == 0) {
			r.Devices = map[string]int{RDMAClass: rapid.IntRange(0, rdma+1).Draw(t, RDMAClass)}
		}
		r.Policy = rapid.SampledFrom(policy.Policies).Draw(t, "policy")
		r.Exclusive = rapid.SampledFrom([]policy.Exclusivity{policy.Required, policy.Preferred}).Draw(t, "exclusive")
		if rapid.IntRange(0, 3).Draw(t, "wantFullPCPUs") == 0 {
			r.FullPCPUs = true
			r.CPUs -= r.CPUs % tpc
		}
		if r.CPUs == 0 && r.GPUs == 0 && r.MemoryMiB == 0 && (r.Devices == nil || r.Devices[RDMAClass] == 0) {
			r.CPUs = tpc
		}
		if rapid.IntRange(0, 9).Draw(t, "invalid") == 0 {
			switch rapid.IntRange(0, 8).Draw(t, "how") {
			case 0:
				r.CPUs, r.GPUs, r.MemoryMiB, r.Devices = 0, 0, 0, nil
			case 1:
				r.CPUs = -rapid.IntRange(1, 4).Draw(t, "negCPUs")
			case 2:
				r.GPUs = -1
			case 3:
				r.MemoryMiB = -1
			case 4:
				r.Devices = map[string]int{RDMAClass: -1}
			case 5:
				if tpc > 1 {
					r.FullPCPUs, r.CPUs = true, r.CPUs-r.CPUs%tpc+1
				} else {
					r.CPUs, r.GPUs, r.MemoryMiB, r.Devices = 0, 0, 0, map[string]int{RDMAClass: 0}
				}
			case 6:
				r.Policy = policy.Policy(len(policy.Policies) + 3)
			case 7:
				r.Exclusive = policy.Exclusivity(9)
			case 8:
				r.Devices = map[string]int{allocator.GPUClass: 1}
			}
		}
		return r
	})
}

// OpKind is the kind of an [Op].
type OpKind uint8

const (
	// OpAllocate allocates Op.Request (whose ID is Op.ID).
	OpAllocate OpKind = iota
	// OpRelease releases Op.ID.
	OpRelease
	// OpHealth marks device Op.ID of class Op.Class healthy or not
	// (Op.Healthy); only [StreamWithHealth] generates it.
	OpHealth
)

// Op is one operation of a [Stream].
type Op struct {
	// Kind says what the operation does: allocate, release or change a
	// device's health.
	Kind OpKind
	// ID is the allocation's ID (the request's for OpAllocate), or the
	// device's for OpHealth (a GPU's in decimal).
	ID string
	// Request is the request of an OpAllocate.
	Request allocator.Request
	// Class is the device class of an OpHealth (allocator.GPUClass for
	// GPUs).
	Class string
	// Healthy is the device's new health in an OpHealth: true for healthy.
	Healthy bool
}

// opLine is an Op in the JSON Lines format of `numaplan place`.
type opLine struct {
	Op        string         `json:"op"`
	ID        string         `json:"id"`
	CPUs      *int           `json:"cpus,omitempty"`
	GPUs      *int           `json:"gpus,omitempty"`
	MemoryMiB *int64         `json:"memoryMiB,omitempty"`
	Devices   map[string]int `json:"devices,omitempty"`
	Policy    string         `json:"policy,omitempty"`
	Exclusive string         `json:"exclusive,omitempty"`
	FullPCPUs *bool          `json:"fullPCPUs,omitempty"`
}

// String writes the operation as one line of the `numaplan place` input,
// such as {"op":"release","id":"p3"} or {"op":"health","gpu":3,"healthy":false};
// an allocation also carries "devices" by class when it asks for any, and
// a health operation on another class is written
// {"op":"health","class":"rdma","device":"mlx5_0","healthy":false}.
func (o Op) String() string {
	if o.Kind == OpHealth {
		if o.Class == allocator.GPUClass {
			return fmt.Sprintf(`{"op":"health","gpu":%s,"healthy":%t}`, o.ID, o.Healthy)
		}
		return fmt.Sprintf(`{"op":"health","class":%q,"device":%q,"healthy":%t}`, o.Class, o.ID, o.Healthy)
	}
	l := opLine{Op: "release", ID: o.ID}
	if o.Kind == OpAllocate {
		r := o.Request
		l = opLine{Op: "allocate", ID: o.ID, CPUs: &r.CPUs, GPUs: &r.GPUs, MemoryMiB: &r.MemoryMiB,
			Devices: r.Devices, Policy: r.Policy.String(), Exclusive: r.Exclusive.String(), FullPCPUs: &r.FullPCPUs}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return fmt.Sprintf("{%d %q %s}", o.Kind, o.ID, &o.Request)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// FormatOps writes ops one per line (see [Op.String]).
func FormatOps(ops []Op) string {
	var sb strings.Builder
	for _, o := range ops {
		sb.WriteString(o.String())
		sb.WriteByte('\n')
	}
	return sb.String()
}

// MachineJSON returns m in the topology interchange JSON, indented (for
// logging a failing case).
func MachineJSON(m *topology.Machine) string {
	var buf bytes.Buffer
	if err := m.WriteJSON(&buf); err != nil {
		return fmt.Sprintf("(cannot write the machine: %v)", err)
	}
	return buf.String()
}

// Stream generates a sequence of 1-30 operations on machine m: mostly
// allocations of [Request]s with a fresh ID ("p" and the operation's
// index), sometimes with the ID of an earlier allocation (a duplicate when
// it is still live), and about one in five asking again for the latest
// allocation's request under its own ID (a refused shape repeated);
// releases of the allocation just made, of an earlier one (live or already
// released), or of an ID never used.
func Stream(m *topology.Machine) *rapid.Generator[[]Op] { return stream(m, false) }

// StreamWithHealth is [Stream] with, now and then on a machine with
// devices, an [OpHealth] that marks a random GPU or other device unhealthy
// (usually) or healthy again.
func StreamWithHealth(m *topology.Machine) *rapid.Generator[[]Op] { return stream(m, true) }

func stream(m *topology.Machine, health bool) *rapid.Generator[[]Op] {
	req := Request(m)
	type dev struct{ class, id string }
	var devs []dev
	for _, g := range m.GPUs() {
		devs = append(devs, dev{allocator.GPUClass, fmt.Sprint(g.ID)})
	}
	for _, d := range m.Devices() {
		devs = append(devs, dev{d.Class, d.ID})
	}
	health = health && len(devs) > 0
	return rapid.Custom(func(t *rapid.T) []Op {
		n := rapid.IntRange(1, 30).Draw(t, "ops")
		var used []string
		last := -1 // the index in ops of the latest OpAllocate
		ops := make([]Op, 0, n)
		for i := range n {
			if health && rapid.IntRange(0, 7).Draw(t, "health") == 7 {
				d := rapid.SampledFrom(devs).Draw(t, "device")
				ok := rapid.IntRange(0, 2).Draw(t, "healthy") == 2
				ops = append(ops, Op{Kind: OpHealth, ID: d.id, Class: d.class, Healthy: ok})
				continue
			}
			if rapid.IntRange(0, 2).Draw(t, "release") != 0 {
				id := fmt.Sprintf("p%d", i)
				if len(used) > 0 && rapid.IntRange(0, 7).Draw(t, "duplicate") == 0 {
					id = rapid.SampledFrom(used).Draw(t, "dupID")
				}
				var r allocator.Request
				if last >= 0 && rapid.IntRange(0, 4).Draw(t, "again") == 0 {
					// The latest request's shape asked for again: refused
					// again when it was refused and nothing was freed since.
					r = ops[last].Request
					r.Devices = maps.Clone(r.Devices)
				} else {
					r = req.Draw(t, "request")
				}
				r.ID = id
				last = len(ops)
				ops = append(ops, Op{Kind: OpAllocate, ID: id, Request: r})
				used = append(used, id)
				continue
			}
			var id string
			switch {
			case len(ops) > 0 && ops[len(ops)-1].Kind == OpAllocate && rapid.Bool().Draw(t, "releaseLast"):
				id = ops[len(ops)-1].ID
			case len(used) > 0 && rapid.IntRange(0, 3).Draw(t, "unknown") != 0:
				id = rapid.SampledFrom(used).Draw(t, "releaseID")
			default:
				id = fmt.Sprintf("ghost%d", i)
			}
			ops = append(ops, Op{Kind: OpRelease, ID: id})
		}
		return ops
	})
}
