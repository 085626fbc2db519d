package topology

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/numa"
)

// ErrUnknownPreset is returned (wrapped) by [Preset] for a name it does not
// know.
var ErrUnknownPreset = errors.New("unknown topology preset")

// presets maps each preset's name to its builder, wrapped so that every
// machine is built once, on first use. Machines are immutable, so the same
// *Machine is shared by every caller.
var presets = map[string]func() (*Machine, error){
	"dgx-h100":          sync.OnceValues(dgxH100),
	"dgx-a100":          sync.OnceValues(dgxA100),
	"epyc-2s-nps4":      sync.OnceValues(epyc2sNPS4),
	"xeon-2s-snc2-8gpu": sync.OnceValues(xeon2sSNC2),
	"small-1s":          sync.OnceValues(small1s),
	"xeon-max-snc4":     sync.OnceValues(xeonMaxSNC4),
	"numa64":            sync.OnceValues(numa64),
	"gh200":             sync.OnceValues(gh200),
	"gb200-tray":        sync.OnceValues(gb200Tray),
}

// PresetNames returns the names of the built-in machines, sorted.
func PresetNames() []string { return slices.Sorted(maps.Keys(presets)) }

// Preset returns the built-in machine with the given name. The machines are
// described from the vendors' public documentation (each preset's source is
// cited in this file); they reserve no CPU and mark no GPU unhealthy. The
// returned machine is shared and immutable. An unknown name gives an error
// wrapping [ErrUnknownPreset] that lists the known names.
func Preset(name string) (*Machine, error) {
	build, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("%w %s (known presets: %s)", ErrUnknownPreset, quote.Short(name),
			strings.Join(PresetNames(), ", "))
	}
	m, err := build()
	if err != nil {
		return nil, fmt.Errorf("topology: preset %s: %w", quote.Short(name), err)
	}
	return m, nil
}

// smtNodes adds nodes numbered the way Linux numbers x86 CPUs with SMT on:
// the first thread of every core of the machine comes first (CPUs 0 to
// totalCores-1, node after node), then the second threads (totalCores
// upwards, in the same order), and so on. Node n (in nodeSockets' order, ID
// n) gets coresPerNode consecutive cores and memMiB of memory; every core
// becomes a Core of threads CPUs {c, c+totalCores, ...}.
func smtNodes(b *Builder, nodeSockets []int, coresPerNode, threads int, memMiB int64) {
	totalCores := len(nodeSockets) * coresPerNode
	for n, socket := range nodeSockets {
		var cpus numa.CPUSet
		for c := n * coresPerNode; c < (n+1)*coresPerNode; c++ {
			var core numa.CPUSet
			for t := 0; t < threads; t++ {
				core.Add(c + t*totalCores)
			}
			cpus.UnionWith(core)
			if threads > 1 {
				b.AddCore(core)
			}
		}
		b.AddNode(Node{ID: numa.NodeID(n), Socket: socket, CPUs: cpus, MemoryMiB: memMiB})
	}
}

// socketDistances returns the distance table of nodes in nodeSockets' order:
// local for a node to itself, sameSocket within a socket, otherSocket
// across sockets.
func socketDistances(nodeSockets []int, local, sameSocket, otherSocket int) [][]int {
	rows := make([][]int, len(nodeSockets))
	for i, si := range nodeSockets {
		rows[i] = make([]int, len(nodeSockets))
		for j, sj := range nodeSockets {
			switch {
			case i == j:
				rows[i][j] = local
			case si == sj:
				rows[i][j] = sameSocket
			default:
				rows[i][j] = otherSocket
			}
		}
	}
	return rows
}

// repeatSockets returns the socket of each of sockets*perSocket nodes,
// numbered socket after socket.
func repeatSockets(sockets, perSocket int) []int {
	out := make([]int, 0, sockets*perSocket)
	for s := 0; s < sockets; s++ {
		for range perSocket {
			out = append(out, s)
		}
	}
	return out
}

// allPairs links every pair of the GPUs 0..n-1 with the same number of
// links, as an NVSwitch fabric does.
func allPairs(b *Builder, n, links int) {
	for a := 0; a < n; a++ {
		for c := a + 1; c < n; c++ {
			b.AddNVLink(a, c, links)
		}
	}
}

// dgxH100 is the NVIDIA DGX H100 (NVIDIA DGX H100/H200 User Guide, "System
// Topology" and "Network Modules").
//
//   - CPUs: 2 x Intel Xeon Platinum 8480C, 56 cores each with Hyper-Threading;
//     one NUMA node per socket, so node 0 is CPUs 0-55,112-167 and node 1 is
//     56-111,168-223 (SMT siblings n and n+112).
//   - Memory: 2 TB, 1 TiB per node. Distances: 10 local, 21 remote, the SLIT
//     of a 2-socket 4th-generation Xeon without sub-NUMA clustering.
//   - GPUs: 8 x H100 SXM5 at PCI buses 1b, 43, 52, 61 (socket 0, GPUs 0-3)
//     and 9d, c3, d1, df (socket 1, GPUs 4-7). Each GPU sits under its own
//     PCIe Gen5 switch together with one ConnectX-7 (the guide pairs every
//     GPU with one InfiniBand port: GPU 0 with mlx5_0 at bus 18, GPU 1 with
//     mlx5_3 at 40, ..., GPU 7 with mlx5_11 at dc), so the preset has eight
//     switches sw0-sw7 of one GPU and one "rdma" device each.
//   - NVLink: every GPU has 18 NVLink 4 links to the four NVSwitches, so
//     every pair of GPUs reaches every other at full bandwidth; nvidia-smi
//     topo -m reports NV18 for every pair, and so does this preset (every
//     pair listed with 18 links).
//   - GPU memory: 80 GB of HBM3 per H100 SXM5 (DGX H100 User Guide,
//     "Hardware Overview": 640 GB GPU memory in total); nvidia-smi reports
//     81559 MiB of total memory on an H100 80GB HBM3, the figure given here.
func dgxH100() (*Machine, error) {
	sockets := []int{0, 1}
	b := NewBuilder("dgx-h100")
	smtNodes(b, sockets, 56, 2, 1<<20)
	b.SetDistances(socketDistances(sockets, 10, 12, 21))
	gpuBus := []int{0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf}
	nicBus := []int{0x18, 0x40, 0x4f, 0x5e, 0x9a, 0xc0, 0xce, 0xdc}
	nicName := []string{"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"}
	for g := range gpuBus {
		node := numa.NodeID(g / 4)
		sw := fmt.Sprintf("sw%d", g)
		b.AddGPU(GPU{ID: g, NUMANode: node, BusID: fmt.Sprintf("0000:%02x:00.0", gpuBus[g]), PCIeSwitch: sw,
			MemoryMiB: 81559})
		b.AddDevice(Device{ID: nicName[g], Class: "rdma", NUMANode: node,
			BusID: fmt.Sprintf("0000:%02x:00.0", nicBus[g]), PCIeSwitch: sw})
	}
	allPairs(b, 8, 18)
	return b.Build()
}

// dgxA100 is the NVIDIA DGX A100 (NVIDIA DGX A100 User Guide, "Network
// Connections, Cables, and Adaptors" and the GPU/CPU affinity table).
//
//   - CPUs: 2 x AMD EPYC 7742 (64 cores, SMT2) set to NPS4: 8 NUMA nodes,
//     node n holds CPUs 16n..16n+15 and 128+16n..128+16n+15 (SMT siblings c
//     and c+128); nodes 0-3 are socket 0, 4-7 socket 1.
//   - Memory: 1 TB, 128 GiB per node. Distances: 10 local, 12 within a
//     socket, 32 across sockets, as numactl --hardware prints on 2-socket
//     EPYC Rome/Milan in NPS4 (AMD's NPS documentation describes the four
//     quadrants per socket).
//   - GPUs: 8 x A100 SXM4. GPUs 0,1 (buses 07, 0f) are on node 3; 2,3 (47,
//     4e) on node 1; 4,5 (87, 90) on node 7; 6,7 (b7, bd) on node 5: the
//     CPU affinity nvidia-smi topo -m reports (48-63,176-191 for GPUs 0 and
//     1, and so on). Each pair shares one PCIe switch with two of the eight
//     HDR InfiniBand ConnectX-6 adapters used for compute: mlx5_0,1 with
//     GPUs 0,1; mlx5_2,3 with 2,3; mlx5_6,7 with 4,5; mlx5_8,9 with 6,7
//     (mlx5_4,5 are the storage adapters, left out). The adapters' bus
//     numbers follow their interface names (ibp12s0 is bus 0c, ...).
//   - NVLink: 12 NVLink 3 links per GPU to six NVSwitches; nvidia-smi
//     reports NV12 for every pair, and so does this preset.
//   - GPU memory: the 1 TB system above is the DGX A100 320GB, whose eight
//     A100 SXM4 have 40 GB of HBM2 each (DGX A100 User Guide, "Hardware
//     Overview"); nvidia-smi reports 40960 MiB for an A100-SXM4-40GB.
func dgxA100() (*Machine, error) {
	sockets := repeatSockets(2, 4)
	b := NewBuilder("dgx-a100")
	smtNodes(b, sockets, 16, 2, 128<<10)
	b.SetDistances(socketDistances(sockets, 10, 12, 32))
	gpuBus := []int{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd}
	gpuNode := []numa.NodeID{3, 3, 1, 1, 7, 7, 5, 5}
	nicBus := []int{0x0c, 0x12, 0x4b, 0x54, 0x8d, 0x94, 0xba, 0xcc}
	nicName := []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"}
	for g := range gpuBus {
		sw := fmt.Sprintf("sw%d", g/2)
		b.AddGPU(GPU{ID: g, NUMANode: gpuNode[g], BusID: fmt.Sprintf("0000:%02x:00.0", gpuBus[g]), PCIeSwitch: sw,
			MemoryMiB: 40960})
		b.AddDevice(Device{ID: nicName[g], Class: "rdma", NUMANode: gpuNode[g],
			BusID: fmt.Sprintf("0000:%02x:00.0", nicBus[g]), PCIeSwitch: sw})
	}
	allPairs(b, 8, 12)
	return b.Build()
}

// epyc2sNPS4 is a 2-socket AMD EPYC server without GPUs, such as 2 x EPYC
// 7763 (Milan, 64 cores, SMT2) in NPS4 (AMD's "NUMA Topology for AMD EPYC"
// and EPYC 7003 tuning guides: NPS4 splits each socket into four NUMA nodes
// of two memory channels each). 8 nodes of 16 cores, numbered as Linux does
// (node n = CPUs 16n..16n+15 and 128+16n..128+16n+15); 512 GiB per socket
// (eight 64 GB DIMMs), so 128 GiB per node; distances 10/12/32 as
// numactl --hardware reports on such machines.
func epyc2sNPS4() (*Machine, error) {
	sockets := repeatSockets(2, 4)
	b := NewBuilder("epyc-2s-nps4")
	smtNodes(b, sockets, 16, 2, 128<<10)
	b.SetDistances(socketDistances(sockets, 10, 12, 32))
	return b.Build()
}

// xeon2sSNC2 is a 2-socket Intel server with 8 GPUs and sub-NUMA clustering
// in SNC2 mode (Intel's "Sub-NUMA Clustering" documentation for 4th
// generation Xeon Scalable: SNC2 splits each socket into two NUMA nodes).
// 2 x Xeon Platinum 8480+ (56 cores, SMT2): node n = CPUs 28n..28n+27 and
// 112+28n..112+28n+27; nodes 0,1 are socket 0, nodes 2,3 socket 1; 512 GiB
// per socket, 256 GiB per node; distances 10 local, 12 within a socket, 21
// across (the SLIT such machines report). Eight GPUs as on an HGX 8-GPU
// board, two per NUMA node under one PCIe switch each (GPUs 2n, 2n+1 on node
// n, switch sw<n>); the bus IDs are illustrative, not a specific vendor's,
// and the GPU model (so its memory) is not given.
func xeon2sSNC2() (*Machine, error) {
	sockets := repeatSockets(2, 2)
	b := NewBuilder("xeon-2s-snc2-8gpu")
	smtNodes(b, sockets, 28, 2, 256<<10)
	b.SetDistances(socketDistances(sockets, 10, 12, 21))
	gpuBus := []int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}
	for g := range gpuBus {
		b.AddGPU(GPU{ID: g, NUMANode: numa.NodeID(g / 2), BusID: fmt.Sprintf("0000:%02x:00.0", gpuBus[g]),
			PCIeSwitch: fmt.Sprintf("sw%d", g/2)})
	}
	return b.Build()
}

// small1s is a small 1-socket machine: 8 cores with SMT2 (CPUs 0-7, siblings
// c and c+8, as Linux numbers a desktop or small server CPU), one NUMA node
// with 64 GiB and one GPU directly under the root port (no PCIe switch), at
// bus 01 (the usual address of a GPU in the first x16 slot).
func small1s() (*Machine, error) {
	b := NewBuilder("small-1s")
	smtNodes(b, []int{0}, 8, 2, 64<<10)
	b.AddGPU(GPU{ID: 0, NUMANode: 0, BusID: "0000:01:00.0"})
	return b.Build()
}

// xeonMaxSNC4 is a 2-socket Intel Xeon CPU Max 9480 server in HBM flat mode
// with SNC4 (Intel Xeon CPU Max Series Configuration and Tuning Guide:
// in flat mode the 64 GB of in-package HBM appear as CPU-less NUMA nodes;
// with SNC4 each socket has four DDR nodes with CPUs and four HBM nodes).
// Linux numbers the DDR nodes 0-7 (0-3 socket 0, 4-7 socket 1) and the HBM
// nodes 8-15 (HBM node 8+k sits in the quadrant of DDR node k).
//
//   - CPUs: 56 cores per socket with SMT2, 14 cores per DDR node: node n
//     holds CPUs 14n..14n+13 and 112+14n..112+14n+13.
//   - Memory: 128 GiB DDR5 per socket (32 GiB per DDR node), 64 GB HBM per
//     socket (16 GiB per HBM node).
//   - Distances (the SLIT of a real 2-socket Xeon Max in flat SNC4, as
//     reproduced in Intel's unified-memory-framework test configurations):
//     DDR to itself 10, to a DDR node of the same socket 12, of the other
//     socket 21; DDR to the HBM of its own quadrant 13, to another HBM of
//     its socket 14, to an HBM of the other socket 23; HBM to itself 10, to
//     another HBM of its socket 14, of the other socket 23.
//   - NUMA sets: one per socket, holding its DDR and HBM nodes (0-3,8-11 and
//     4-7,12-15). HBM nodes are given their socket here; Linux itself gives
//     a CPU-less node no socket.
func xeonMaxSNC4() (*Machine, error) {
	ddrSockets := repeatSockets(2, 4)
	b := NewBuilder("xeon-max-snc4")
	smtNodes(b, ddrSockets, 14, 2, 32<<10)
	for k := range 8 {
		b.AddNode(Node{ID: numa.NodeID(8 + k), Socket: k / 4, MemoryMiB: 16 << 10})
	}
	rows := make([][]int, 16)
	for i := range rows {
		rows[i] = make([]int, 16)
		for j := range rows[i] {
			iHBM, jHBM := i >= 8, j >= 8
			qi, qj := i%8, j%8 // quadrant: DDR node k and HBM node 8+k share k
			same := qi/4 == qj/4
			switch {
			case i == j:
				rows[i][j] = 10
			case !same && (iHBM || jHBM):
				rows[i][j] = 23
			case !same:
				rows[i][j] = 21
			case !iHBM && !jHBM:
				rows[i][j] = 12
			case iHBM != jHBM && qi == qj:
				rows[i][j] = 13
			default:
				rows[i][j] = 14
			}
		}
	}
	b.SetDistances(rows)
	b.SetNUMASets([][]numa.NodeID{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}})
	return b.Build()
}

// numa64 is a synthetic machine at the limit of a numa.Mask, for scale tests
// and benchmarks: 8 sockets of 8 NUMA nodes, 8 cores with SMT2 per node
// (node n = CPUs 8n..8n+7 and 512+8n..512+8n+7), 64 GiB per node, distances
// 10 local, 12 within a socket, 32 across sockets (the EPYC NPS4 pattern),
// and 2 GPUs on every node (GPUs 2n and 2n+1 on node n, under switch
// s<socket>n<node>, bus IDs in PCI domain <socket>): 1024 CPUs, 128 GPUs.
func numa64() (*Machine, error) {
	sockets := repeatSockets(8, 8)
	b := NewBuilder("numa64")
	smtNodes(b, sockets, 8, 2, 64<<10)
	b.SetDistances(socketDistances(sockets, 10, 12, 32))
	for n, s := range sockets {
		for k := range 2 {
			b.AddGPU(GPU{ID: 2*n + k, NUMANode: numa.NodeID(n),
				BusID:      fmt.Sprintf("%04x:%02x:00.0", s, 0x10*(n%8+1)+k),
				PCIeSwitch: fmt.Sprintf("s%dn%d", s, n)})
		}
	}
	return b.Build()
}

// graceGPUNodes is how many NUMA nodes the NVIDIA driver gives each GPU of
// a Grace machine: one that onlines the GPU's memory and seven placeholders
// (no CPUs, no memory) for MIG instances, numbered right after it.
const graceGPUNodes = 8

// graceMemMiB is the memory of one Grace CPU: 480 GB of LPDDR5X, taken as
// 480 GiB.
const graceMemMiB = 480 << 10

// graceBuilder returns a builder holding the nodes, GPUs and distances of a
// Grace machine: CPU node s (ID s) with the 72 Neoverse V2 cores of Grace
// s (CPUs 72s..72s+71, no SMT, one shared L3 each) and graceMemMiB; then,
// for GPU g (in order, on socket gpuSocket[g], at PCI address busIDs[g],
// attached to node gpuSocket[g]), its memory node of gpuMemMiB (socket
// gpuSocket[g], as discovery gives it; the GPU's MemoryMiB is the same, as
// discovery reads it) and its seven placeholders (socket
// unknown, as Linux gives them), node IDs from the number of sockets
// upwards. Distances: 10 local, cpuCPU between Grace nodes, 80 between a
// GPU's nodes and the other nodes of the same socket, 120 across sockets.
func graceBuilder(name string, sockets int, gpuSocket []int, gpuMemMiB int64, cpuCPU int, busIDs []string) *Builder {
	b := NewBuilder(name)
	var nodeSocket []int // socket of each node, in ID order
	for s := range sockets {
		cpus := numa.CPURange(72*s, 72*s+71)
		b.AddNode(Node{ID: numa.NodeID(s), Socket: s, CPUs: cpus, MemoryMiB: graceMemMiB})
		b.AddL3(cpus)
		nodeSocket = append(nodeSocket, s)
	}
	for g, s := range gpuSocket {
		first := sockets + g*graceGPUNodes
		b.AddNode(Node{ID: numa.NodeID(first), Socket: s, MemoryMiB: gpuMemMiB, GPUMemory: true, GPU: g})
		for k := 1; k < graceGPUNodes; k++ {
			b.AddNode(Node{ID: numa.NodeID(first + k), Socket: UnknownSocket})
		}
		for range graceGPUNodes {
			nodeSocket = append(nodeSocket, s)
		}
		b.AddGPU(GPU{ID: g, NUMANode: numa.NodeID(s), BusID: busIDs[g], MemoryMiB: gpuMemMiB})
	}
	rows := make([][]int, len(nodeSocket))
	for i, si := range nodeSocket {
		rows[i] = make([]int, len(nodeSocket))
		for j, sj := range nodeSocket {
			switch {
			case i == j:
				rows[i][j] = 10
			case i < sockets && j < sockets:
				rows[i][j] = cpuCPU
			case si == sj:
				rows[i][j] = 80
			default:
				rows[i][j] = 120
			}
		}
	}
	b.SetDistances(rows)
	return b
}

// gh200 is one NVIDIA GH200 Grace Hopper Superchip (NVIDIA Grace Hopper
// Superchip Architecture whitepaper and GH200 datasheet: one Grace CPU of
// 72 Arm Neoverse V2 cores with 480 GB LPDDR5X, joined by NVLink-C2C to one
// H100 with 96 GB HBM3). Linux shows 9 NUMA nodes, CPUs only in node 0
// (lscpu "NUMA node(s): 9, node0 CPU(s): 0-71, node1-8 CPU(s): (none)" in
// bytedance/xpu-perf#129; "8 NUMA nodes per GPU" on 4-GPU GH200 systems in
// NVIDIA/mlperf-common#16; hwloc 2.11 exposes "1 single GPU node per GPU
// slice" on Grace Hopper, commit 39fae7e "don't hide the NVIDIA GPU node on
// non-POWER platforms").
//
//   - Node 0: CPUs 0-71, socket 0, 480 GiB.
//   - Node 1: the H100's memory, 96 GiB (its numa_status says "Node: 1"),
//     socket 0. Nodes 2-8: MIG placeholders, no CPUs and no memory.
//   - GPU 0 at 0009:01:00.0 (an address as nvidia-smi shows on GH200
//     systems; not from the sources above), attached to node 0 (the GPU's
//     own PCI numa_node may say 1, its memory).
//   - Distances: 10 local and 80 between any two nodes. No published
//     GH200 SLIT was found in the sources above: 80 is a modelled value;
//     discovery does not depend on it.
func gh200() (*Machine, error) {
	return graceBuilder("gh200", 1, []int{0}, 96<<10, 0, []string{"0009:01:00.0"}).Build()
}

// gb200Tray is one compute tray of an NVIDIA GB200 NVL72 rack: two GB200
// Grace Blackwell Superchips, each one Grace CPU (72 cores, 480 GB LPDDR5X)
// and two B200 GPUs (186 GB HBM3e each, 13.4 TB over the rack's 72 GPUs),
// per NVIDIA's GB200 NVL72 product page and datasheet. Linux shows 34 NUMA
// nodes, of which 2 have CPUs (kubernetes/kubernetes#135541 and #135581,
// "GB200 with 34 NUMA nodes where only 2 NUMA nodes have CPUs, the rest
// are for HBM"); node 0 has GPUs 0 and 1 and CPUs 0-71, node 1 GPUs 2 and
// 3 and CPUs 72-143 (NVIDIA's srt-slurm#164 numa binding for GB200); each
// GPU has 8 nodes, its memory and 7 MIG placeholders, as on GH200 (34 = 2 +
// 4 x 8), and its PCI numa_node names its memory node rather than the
// Grace it is attached to (kubernetes-sigs/dra-driver-nvidia-gpu#1242).
//
//   - Nodes 0 and 1: the Grace CPUs, CPUs 0-71 and 72-143, 480 GiB each.
//   - GPU g (0-3) on socket g/2: memory node 2+8g (2, 10, 18, 26) of 186
//     GiB, placeholders 3+8g to 9+8g.
//   - GPUs at 0008:01:00.0, 0009:01:00.0, 0018:01:00.0, 0019:01:00.0
//     (addresses as on GB200 trays; not from the sources above).
//   - NVLink: each B200 has 18 NVLink 5 links into the rack's NVLink
//     switches, so every pair reports NV18.
//   - Distances: 10 local, 40 between the two Grace nodes (as on the Grace
//     CPU Superchip), 80 between a GPU's nodes and the other nodes of its
//     socket, 120 across sockets. No published GB200 SLIT was found for
//     these two values; discovery does not depend on them (a GPU's node
//     is the nearest node with CPUs, its local CPUs breaking a tie).
func gb200Tray() (*Machine, error) {
	b := graceBuilder("gb200-tray", 2, []int{0, 0, 1, 1}, 186<<10, 40,
		[]string{"0008:01:00.0", "0009:01:00.0", "0018:01:00.0", "0019:01:00.0"})
	allPairs(b, 4, 18)
	return b.Build()
}
