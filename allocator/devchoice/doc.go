// Package devchoice is numaplace's one device chooser: which devices (GPUs,
// RDMA NICs, any PCI class) of one machine to give a request, out of the
// free ones. The allocator uses it for the devices inside the span it has
// decided (allocator.Devices), and kubelet.PreferredAllocator for the device
// plugin API's GetPreferredAllocation (and so the node agent's device
// plugin), so the two prefer the same devices.
//
// An [Index] describes the machine's devices once (classes, NUMA nodes,
// PCIe switches, NVLinks; immutable, linear in the devices and NVLinks); a
// [Chooser] holds the working memory of one call at a time; a [Request]
// names the allowed NUMA nodes and, per class, a count, the free devices
// and the must-include ones, as [Set]s of dense indices. [Chooser.Choose]
// returns the best choice under [Rank] (the preference order).
//
// Pairing: when a request asks for GPUs and devices of another class (RDMA
// NICs), GPUs are its first class and another device counts as paired when
// a chosen GPU sits under its PCIe switch, as GPUDirect RDMA needs: pairing
// ranks before the switch count in the one joint choice, so a GPU is chosen
// where a NIC can join it (Koordinator's deviceshare plugin puts NICs under
// the switches of GPUs chosen first). The devices of one NUMA node whose
// switch is not described count as under one switch of their own.
//
// Complexity and exactness are stated on [Chooser.Choose]: the search goes
// level by level (NUMA nodes, switches, devices) with bounds and fixed
// budgets, never over subsets of devices; below the budgets, which real
// servers stay under, the node and distance criteria are exact, and the
// tests compare it with a search over every subset on small machines.
// Classes of at most 64 devices take a path on single words that makes the
// same choices (also tested), and [Chooser.ChooseWord] asks for such a class
// with its sets as words, without a Request or a Result (the device plugin's
// entry).
package devchoice
