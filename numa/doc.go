// Package numa is the leaf vocabulary of numaplace: NUMA node identifiers,
// sets of NUMA nodes ([Mask]), sets of logical CPUs ([CPUSet], in the Linux
// cpulist format) and the NUMA distance table ([Distances], the ACPI SLIT).
//
// A [Mask] bit i stands for the machine's i-th NUMA node in ascending ID
// order (a dense index), never for the raw [NodeID]: real machines have node
// IDs such as 0,1,2,33,34,45,72,73. The topology package translates between
// the two; [Distances] is keyed by ID so sparse IDs never shift a row.
//
// All set types have an empty zero value and value semantics for their
// read-only methods. Methods that allocate or mutate say so.
//
// The common calls:
//
//	cpus, err := numa.ParseCPUSet("0-3,8-11") // Linux cpulist
//	free := cpus.Difference(numa.NewCPUSet(0, 8))
//	n := cpus.IntersectionCount(free) // allocates nothing
//	m := numa.MaskOf(0, 1)            // NUMA nodes at dense indices 0 and 1
//	for s := range m.Subsets(1) { ... }
package numa
