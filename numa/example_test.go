package numa_test

import (
	"fmt"
	"slices"

	"github.com/numaplace/numaplace/numa"
)

func ExampleParseCPUSet() {
	cpus, err := numa.ParseCPUSet("0-3,8-11\n") // as read from a sysfs cpulist file
	if err != nil {
		fmt.Println(err)
		return
	}
	reserved := numa.NewCPUSet(0, 8)
	free := cpus.Difference(reserved)
	fmt.Println(free, free.Size())
	fmt.Println(cpus.IntersectionCount(reserved)) // allocates nothing

	_, err = numa.ParseCPUSet("3-1")
	fmt.Println(err)
	// Output:
	// 1-3,9-11 6
	// 2
	// invalid CPU set "3-1": item "3-1": range end below its start
}

func ExampleParseCPUMask() {
	cpus, err := numa.ParseCPUMask("00000000,0000ff00\n") // as in /sys/.../cpumap
	fmt.Println(cpus, err)
	// Output: 8-15 <nil>
}

func ExampleCPUSet_UnionWith() {
	var free numa.CPUSet // the zero value is the empty set
	free.UnionWith(numa.CPURange(0, 7))
	free.RemoveAll(numa.NewCPUSet(2, 3))
	fmt.Println(free, free.Min(), free.Max())
	fmt.Println(free.Equal(numa.MustParseCPUSet("0-1,4-7")))
	// Output:
	// 0-1,4-7 0 7
	// true
}

func ExampleCPUSet_All() {
	for cpu := range numa.MustParseCPUSet("4-5,64").All() {
		fmt.Println(cpu)
	}
	// Output:
	// 4
	// 5
	// 64
}

func ExampleMask() {
	m := numa.MaskOf(0, 1, 5)
	fmt.Println(m, m.Count(), m.Contains(5), m.Lowest(), m.Highest())
	fmt.Println(m.Union(numa.MaskOf(2)), m.Difference(numa.MaskOf(0)))
	fmt.Println(slices.Collect(m.All()))
	// Output:
	// 0-1,5 3 true 0 5
	// 0-2,5 1,5
	// [0 1 5]
}

func ExampleMask_Subsets() {
	// Every pair of NUMA nodes among dense indices 1, 4, 6 and 9, in the
	// documented order: increasing mask value.
	for s := range numa.MaskOf(1, 4, 6, 9).Subsets(2) {
		fmt.Print(s, "  ")
	}
	fmt.Println()
	// Output:
	// 1,4  1,6  4,6  1,9  4,9  6,9
}

func ExampleMask_Submasks() {
	for s := range numa.MaskOf(0, 2, 3).Submasks() {
		fmt.Print("{", s, "} ")
	}
	fmt.Println()
	// Output:
	// {0} {2} {0,2} {3} {0,3} {2-3} {0,2-3}
}

func ExampleMask_IsNarrowerThan() {
	fmt.Println(numa.MaskOf(7).IsNarrowerThan(numa.MaskOf(0, 1)))    // fewer nodes first
	fmt.Println(numa.MaskOf(0, 5).IsNarrowerThan(numa.MaskOf(1, 2))) // then lower indices
	// Output:
	// true
	// true
}

func ExampleParseMask() {
	m, err := numa.ParseMask("0-2,63")
	fmt.Println(m.Count(), err)
	_, err = numa.ParseMask("64")
	fmt.Println(err)
	// Output:
	// 4 <nil>
	// invalid NUMA mask "64": item "64": 64 is above the limit 63
}

func ExampleNewDistances() {
	// Sparse node IDs, listed in any order; rows follow the order of ids.
	ids := []numa.NodeID{33, 0, 1}
	d, err := numa.NewDistances(ids, [][]int{
		{10, 32, 31}, // from node 33
		{32, 10, 12}, // from node 0
		{31, 12, 10}, // from node 1
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	v, _ := d.Distance(1, 33)
	fmt.Println(d.IDs(), v)
	// Masks use dense indices in ascending ID order: 0 -> 0, 1 -> 1, 2 -> 33.
	fmt.Println(d.Average(numa.MaskOf(0, 1)), d.Average(numa.MaskOf(0, 1, 2)))
	// Output:
	// [0 1 33] 31
	// 12 25
}
