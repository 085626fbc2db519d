//go:build cgo

package benchmarks

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-gpuallocator/gpuallocator"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/adapters/kubelet/kubelettest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// NVIDIA's go-gpuallocator (the GPU chooser of NVIDIA's Kubernetes device
// plugin, whose GetPreferredAllocation calls its best-effort policy) side
// by side with numaplace's adapters/kubelet PreferredAllocator.
//
// go-gpuallocator reads the machine through NVML (gpuallocator.NewDevices),
// which needs libnvidia-ml and GPUs. Its best-effort policy reads only
// Device.Index, Device.Links (the P2P link types to every other GPU, keyed
// by that GPU's Index) and the devices' identity (pointers; DeviceSet keys
// by UUID), so peerDevices builds those values by hand from the numaplace
// machine, without NVML, the way its NewDevices fills them: for every
// ordered pair of GPUs, one PCIe link (NVML's common ancestor) and, when
// the pair has NVLinks, one NVLink link whose type is the link count.

// The values of go-gpuallocator's link types (internal/links.P2PLinkType,
// an internal package: its constants cannot be named from here, so they
// are written out, and TestPeerLinkTypes checks them against the type's
// own String method).
const (
	peerCrossCPU     uint = 1 // NVML_TOPOLOGY_SYSTEM: 10 points
	peerSameCPU      uint = 2 // NVML_TOPOLOGY_NODE (formerly _CPU): 20 points
	peerHostBridge   uint = 3 // NVML_TOPOLOGY_HOSTBRIDGE: 30 points
	peerSingleSwitch uint = 5 // NVML_TOPOLOGY_SINGLE: 50 points
	peerNVLink1      uint = 7 // SingleNVLINKLink: 100 points per link
	peerMaxNVLinks        = 18
)

// setLinkType sets a link's type (whose type name is internal to
// go-gpuallocator) to v.
func setLinkType[T ~uint](dst *T, v uint) { *dst = T(v) }

// peerPCIe is the PCIe link type go-gpuallocator gets for GPUs a and b,
// from what numaplace knows of them:
//
//   - under one PCIe switch as numaplace counts switches (the same named
//     switch, or both without a described switch on one NUMA node, which
//     numaplace's chooser counts as one switch): P2PLinkSingleSwitch;
//   - on one NUMA node under different switches: P2PLinkHostBridge;
//   - on different NUMA nodes of one socket: P2PLinkSameCPU (numaplace
//     prefers them by their SLIT distance; NVML reports NODE only within one
//     NUMA node and SYS across, so a real NPS4 EPYC gives SYS here: this
//     tells the peer more than NVML would);
//   - otherwise (other socket, unknown node or socket): P2PLinkCrossCPU.
func peerPCIe(m *topology.Machine, a, b topology.GPU) uint {
	known := a.NUMANode != topology.UnknownNode && b.NUMANode != topology.UnknownNode
	switch {
	case a.PCIeSwitch != "" && a.PCIeSwitch == b.PCIeSwitch,
		known && a.NUMANode == b.NUMANode && a.PCIeSwitch == "" && b.PCIeSwitch == "":
		return peerSingleSwitch
	case known && a.NUMANode == b.NUMANode:
		return peerHostBridge
	case known && socketOf(m, a.NUMANode) != topology.UnknownSocket && socketOf(m, a.NUMANode) == socketOf(m, b.NUMANode):
		return peerSameCPU
	}
	return peerCrossCPU
}

func socketOf(m *topology.Machine, id numa.NodeID) int {
	i, ok := m.NodeIndex(id)
	if !ok {
		return topology.UnknownSocket
	}
	return m.Node(i).Socket
}

// peerDevices returns go-gpuallocator's devices for the GPUs of m, in the
// machine's GPU order: Index is the GPU's ID (NVML's index), UUID its UUID
// (or "GPU-<ID>" when it has none), PCI.BusID its bus ID as
// go-gpuallocator spells NVML's (lower case, "0000:07:00.0": NVML's
// eight-digit domain less its leading "0000"), CPUAffinity its
// NUMA node (nil when unknown), and Links, for every other GPU, the PCIe
// link of peerPCIe and the pair's NVLink count (capped at the 18 links the
// type can say), in both directions (the policy panics on one-sided links).
func peerDevices(m *topology.Machine) []*gpuallocator.Device {
	gpus := m.GPUs()
	devs := make([]*gpuallocator.Device, len(gpus))
	for i, g := range gpus {
		d := &gpuallocator.Device{Index: g.ID, Links: map[int][]gpuallocator.P2PLink{}}
		d.UUID = g.UUID
		if d.UUID == "" {
			d.UUID = "GPU-" + strconv.Itoa(g.ID)
		}
		d.PCI.BusID = strings.ToLower(g.BusID)
		if g.NUMANode != topology.UnknownNode {
			node := uint(g.NUMANode)
			d.CPUAffinity = &node
		}
		devs[i] = d
	}
	for i, a := range gpus {
		for j, b := range gpus {
			if i == j {
				continue
			}
			pcie := gpuallocator.P2PLink{GPU: devs[j]}
			setLinkType(&pcie.Type, peerPCIe(m, a, b))
			links := []gpuallocator.P2PLink{pcie}
			if n := m.NVLinkCount(a.ID, b.ID); n > 0 {
				nv := gpuallocator.P2PLink{GPU: devs[j]}
				setLinkType(&nv.Type, peerNVLink1+uint(min(n, peerMaxNVLinks))-1)
				links = append(links, nv)
			}
			devs[i].Links[b.ID] = links
		}
	}
	return devs
}

// peerSide is one machine for go-gpuallocator: its devices by GPU ID.
type peerSide struct {
	devs []*gpuallocator.Device
	byID map[int]*gpuallocator.Device
}

func newPeerSide(m *topology.Machine) peerSide {
	p := peerSide{devs: peerDevices(m), byID: map[int]*gpuallocator.Device{}}
	for _, d := range p.devs {
		p.byID[d.Index] = d
	}
	return p
}

// list returns the devices of the GPU IDs in ids (decimal strings), in
// ascending index (the best-effort policy keeps the first partition and
// set of equal scores, so the order decides its ties).
func (p peerSide) list(tb testing.TB, ids []string) []*gpuallocator.Device {
	tb.Helper()
	var out []*gpuallocator.Device
	for _, s := range ids {
		id, err := strconv.Atoi(s)
		d := p.byID[id]
		if err != nil || d == nil {
			tb.Fatalf("no GPU %q", s)
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *gpuallocator.Device) int { return a.Index - b.Index })
	return out
}

// indices returns the devices' indices, ascending (-1 for a nil device,
// which the best-effort policy can return as padding).
func indices(devs []*gpuallocator.Device) []int {
	out := make([]int, 0, len(devs))
	for _, d := range devs {
		if d == nil {
			out = append(out, -1)
			continue
		}
		out = append(out, d.Index)
	}
	slices.Sort(out)
	return out
}

// gpuIDs is ids(from, to, except...) of adapters/kubelet's tests: the GPU
// IDs from..to as decimal strings, without except.
func gpuIDs(from, to int, except ...int) []string {
	var out []string
	for i := from; i <= to; i++ {
		if !slices.Contains(except, i) {
			out = append(out, strconv.Itoa(i))
		}
	}
	return out
}

// prefCase is one GetPreferredAllocation question.
type prefCase struct {
	name      string
	m         *topology.Machine
	available []string
	must      []string
	size      int
}

// prefCases are the cases of adapters/kubelet's
// BenchmarkGetPreferredAllocation: dgx-a100/gpusN and devices16/gpusN ask
// for N GPUs with every GPU free; dgx-a100/fragmented has GPU 2 taken and
// asks for 4; devices16/fragmented has GPUs 1, 6 and 11 taken, must include
// 9 and asks for 6; devices16-worst asks for 8 of kubelettest.Machine16Worst's 16.
func prefCases(tb testing.TB) []prefCase {
	a100, err := topology.Preset("dgx-a100")
	if err != nil {
		tb.Fatal(err)
	}
	m16 := kubelettest.Machine16(tb)
	var cases []prefCase
	for _, size := range []int{1, 2, 4, 8} {
		cases = append(cases, prefCase{"dgx-a100/gpus" + strconv.Itoa(size), a100, gpuIDs(0, 7), nil, size})
	}
	cases = append(cases, prefCase{"dgx-a100/fragmented", a100, gpuIDs(0, 7, 2), nil, 4})
	for _, size := range []int{1, 2, 4, 8} {
		cases = append(cases, prefCase{"devices16/gpus" + strconv.Itoa(size), m16, gpuIDs(0, 15), nil, size})
	}
	return append(cases, prefCase{"devices16/fragmented", m16, gpuIDs(0, 15, 1, 6, 11), []string{"9"}, 6},
		prefCase{"devices16-worst", kubelettest.Machine16Worst(tb), gpuIDs(0, 15), nil, 8})
}

// BenchmarkGetPreferredAllocation is
// BenchmarkGetPreferredAllocation/{numaplace,gpuallocator}/CASE on the cases
// of prefCases: numaplace's kubelet.PreferredAllocator.GetPreferredAllocation
// (device ID strings in, strings out: it parses and checks the IDs on every
// call) against go-gpuallocator's NewBestEffortPolicy().Allocate on the
// devices of peerDevices, whose available and required lists are built
// once outside the timed loop (NVIDIA's device plugin builds them from the
// IDs on every call: this measures the policy alone, the peer's most
// favourable reading). Both sides' answers are checked before timing: the
// requested size, out of the available GPUs, with the must-include ones.
//
// go-gpuallocator's best-effort policy walks every partition of the
// available GPUs into sets of the requested size: 2,027,025 for 2 of 16
// and 2,627,625 for 4 of 16, so those cases take seconds per answer.
func BenchmarkGetPreferredAllocation(b *testing.B) {
	cases := prefCases(b)
	for _, c := range cases {
		p := kubelet.NewPreferredAllocator(c.m)
		got, err := p.GetPreferredAllocation(c.available, c.must, c.size)
		if err != nil {
			b.Fatal(err)
		}
		checkAnswer(b, "numaplace "+c.name, atoiAll(b, got), c)
		b.Run("numaplace/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.GetPreferredAllocation(c.available, c.must, c.size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, c := range cases {
		peer := newPeerSide(c.m)
		avail, must := peer.list(b, c.available), peer.list(b, c.must)
		policy := gpuallocator.NewBestEffortPolicy()
		b.Run("gpuallocator/"+c.name, func(b *testing.B) {
			checkAnswer(b, "gpuallocator "+c.name, indices(policy.Allocate(avail, must, c.size)), c)
			b.ReportAllocs()
			for b.Loop() {
				if len(policy.Allocate(avail, must, c.size)) != c.size {
					b.Fatal("short answer")
				}
			}
		})
	}
}

func atoiAll(tb testing.TB, ids []string) []int {
	tb.Helper()
	out := make([]int, 0, len(ids))
	for _, s := range ids {
		id, err := strconv.Atoi(s)
		if err != nil {
			tb.Fatalf("GPU ID %q", s)
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// checkAnswer fails unless got (GPU IDs, ascending) is an answer to c: size
// distinct GPUs out of the available ones, holding the must-include ones.
func checkAnswer(tb testing.TB, who string, got []int, c prefCase) {
	tb.Helper()
	avail, must := atoiAll(tb, c.available), atoiAll(tb, c.must)
	ok := len(got) == c.size && len(slices.Compact(slices.Clone(got))) == len(got)
	for _, g := range got {
		ok = ok && slices.Contains(avail, g)
	}
	for _, g := range must {
		ok = ok && slices.Contains(got, g)
	}
	if !ok {
		tb.Fatalf("%s: answer %v is not %d of %v with %v", who, got, c.size, avail, must)
	}
}
