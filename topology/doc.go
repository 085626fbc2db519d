// Package topology describes one machine as numaplace sees it: its sockets,
// NUMA nodes (with their CPUs and memory), SMT cores, GPUs and other PCI
// devices (with their NUMA node and PCIe switch), NVLinks, the NUMA distance
// table, the NUMA sets and the reserved CPUs. A [Machine] is immutable once
// built and safe for concurrent use.
//
// NUMA nodes are kept in ascending ID order: a node's position is its dense
// index, the bit that stands for it in a numa.Mask. IDs may be sparse (real
// machines have IDs such as 0,1,2,33,34); use [Machine.NodeIndex],
// [Machine.MaskOf] and [Machine.IDsOf] to translate. A machine with more
// than 64 NUMA nodes is refused with a [TooManyNodesError].
//
// A machine comes from one of four places:
//
//	m, err := topology.Preset("dgx-h100")       // a built-in server; see PresetNames
//	m, err := topology.ParseJSON(data)          // the interchange JSON (ReadJSON for a reader)
//	m, err := topology.Discover("/")            // Linux sysfs under a root (DiscoverFS for an fs.FS)
//	m, err := topology.NewBuilder("lab-box").   // by hand
//		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 7), MemoryMiB: 65536}).
//		AddCore(numa.NewCPUSet(0, 4)).
//		AddGPU(topology.GPU{ID: 0, NUMANode: 0, BusID: "0000:01:00.0"}).
//		Build()
//
// and goes back out as JSON ([Machine.WriteJSON], [Machine.Spec]) or as a
// text picture for people, optionally with allocations marked:
//
//	err = m.Picture(os.Stdout, &topology.Marks{CPUs: map[int]rune{0: 'a'}, GPUs: map[int]rune{0: 'a'}})
//
// Validation errors are *[ValidationError] values naming the offending item
// (such as "gpus[3] (id 3)") and unwrap to [ErrInvalid]; discovery errors
// unwrap to [ErrDiscovery]; an unknown preset to [ErrUnknownPreset].
package topology
