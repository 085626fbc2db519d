package topology_test

import (
	"errors"
	"fmt"
	"os"
	"testing/fstest"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

func ExampleBuilder() {
	m, err := topology.NewBuilder("lab-box").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 65536}).
		AddNode(topology.Node{ID: 2, Socket: 1, CPUs: numa.CPURange(4, 7), MemoryMiB: 65536}).
		AddCore(numa.NewCPUSet(0, 1)).
		AddGPU(topology.GPU{ID: 0, NUMANode: 2, BusID: "0000:81:00.0"}).
		SetReservedCPUs(numa.NewCPUSet(0)).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Name(), m.NodeIDs(), m.NumCPUs(), m.NumCores(), m.ThreadsPerCore())
	mask, _ := m.MaskOf(2) // node ID 2 is dense index 1
	fmt.Println(mask, m.IDsOf(numa.MaskOf(0, 1)), m.NUMASets())
	node, _ := m.CPUNode(5)
	fmt.Println(m.NodeID(node), m.ReservedCPUs())

	// Validation names the offending item.
	_, err = topology.NewBuilder("bad").
		AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3)}).
		AddGPU(topology.GPU{ID: 0, NUMANode: 1}).
		Build()
	fmt.Println(err)
	// Output:
	// lab-box [0 2] 8 7 2
	// 1 [0 2] [0 1]
	// 2 0
	// invalid topology: gpus[0] (id 0): NUMA node 1 does not exist (use -1 when it is unknown)
}

func ExampleParseJSON() {
	m, err := topology.ParseJSON([]byte(`{
		"name": "example",
		"numaNodes": [
			{"id": 0, "socket": 0, "cpus": "0-3,8-11", "memoryMiB": 65536},
			{"id": 2, "socket": 1, "cpus": "4-7,12-15", "memoryMiB": 65536},
			{"id": 5, "socket": 1, "cpus": "", "memoryMiB": 16384}
		],
		"distances": [[10, 21, 31], [21, 10, 13], [31, 13, 10]],
		"cores": ["0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"],
		"gpus": [{"id": 0, "numaNode": 0}, {"id": 1, "numaNode": 2}],
		"nvlinks": [[0, 1, 12]]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	d, _ := m.Distances().Distance(2, 5)
	fmt.Println(m.NodeIDs(), m.NUMASets(), d)
	fmt.Println(m.NumCores(), m.ThreadsPerCore(), m.NVLinkCount(1, 0))

	_, err = topology.ParseJSON([]byte(`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0-3"}], "gpus": [{"numaNode": 1}]}`))
	fmt.Println(err)
	// Output:
	// [0 2 5] [0 1-2] 13
	// 8 2 12
	// invalid topology: gpus[0] (id 0): NUMA node 1 does not exist (use -1 when it is unknown)
}

func ExampleMachine_WriteJSON() {
	m, err := topology.ParseJSON([]byte(`{"name": "tiny", "numaNodes": [
		{"id": 0, "socket": 0, "cpus": "0-1"},
		{"id": 1, "socket": -1, "cpus": "", "memoryMiB": 1024}
	], "gpus": [{"numaNode": -1}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	// Defaults come out spelled out: distances, NUMA sets, the GPU's node.
	if err := m.WriteJSON(os.Stdout); err != nil {
		fmt.Println(err)
	}
	// Output:
	// {
	//   "name": "tiny",
	//   "numaNodes": [
	//     {
	//       "id": 0,
	//       "socket": 0,
	//       "cpus": "0-1"
	//     },
	//     {
	//       "id": 1,
	//       "socket": -1,
	//       "cpus": "",
	//       "memoryMiB": 1024
	//     }
	//   ],
	//   "distances": [
	//     [
	//       10,
	//       20
	//     ],
	//     [
	//       20,
	//       10
	//     ]
	//   ],
	//   "numaSets": [
	//     [
	//       0,
	//       1
	//     ]
	//   ],
	//   "gpus": [
	//     {
	//       "id": 0,
	//       "numaNode": -1
	//     }
	//   ]
	// }
}

func ExamplePreset() {
	m, err := topology.Preset("dgx-a100")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Name(), m.NumNodes(), "NUMA nodes,", m.NumCPUs(), "CPUs,", m.NumGPUs(), "GPUs")
	for _, g := range m.GPUs()[:2] {
		fmt.Printf("GPU %d on NUMA node %d under %s\n", g.ID, g.NUMANode, g.PCIeSwitch)
	}
	_, err = topology.Preset("dgx-z900")
	fmt.Println(errors.Is(err, topology.ErrUnknownPreset))
	// Output:
	// dgx-a100 8 NUMA nodes, 256 CPUs, 8 GPUs
	// GPU 0 on NUMA node 3 under sw0
	// GPU 1 on NUMA node 3 under sw0
	// true
}

func ExampleDiscoverFS() {
	// A two-node machine as Linux shows it under /sys, with sparse node IDs
	// 0 and 4; a real system is read with topology.Discover("/").
	sys := fstest.MapFS{
		"sys/devices/system/node/online":                            {Data: []byte("0,4\n")},
		"sys/devices/system/node/node0/cpulist":                     {Data: []byte("0-1\n")},
		"sys/devices/system/node/node0/distance":                    {Data: []byte("10 21\n")},
		"sys/devices/system/node/node0/meminfo":                     {Data: []byte("Node 0 MemTotal: 4194304 kB\n")},
		"sys/devices/system/node/node4/cpulist":                     {Data: []byte("2-3\n")},
		"sys/devices/system/node/node4/distance":                    {Data: []byte("21 10\n")},
		"sys/devices/system/node/node4/meminfo":                     {Data: []byte("Node 4 MemTotal: 4194304 kB\n")},
		"sys/devices/system/cpu/online":                             {Data: []byte("0-3\n")},
		"sys/devices/system/cpu/cpu0/topology/physical_package_id":  {Data: []byte("0\n")},
		"sys/devices/system/cpu/cpu0/topology/thread_siblings_list": {Data: []byte("0-1\n")},
		"sys/devices/system/cpu/cpu1/topology/physical_package_id":  {Data: []byte("0\n")},
		"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": {Data: []byte("0-1\n")},
		"sys/devices/system/cpu/cpu2/topology/physical_package_id":  {Data: []byte("1\n")},
		"sys/devices/system/cpu/cpu2/topology/thread_siblings_list": {Data: []byte("2-3\n")},
		"sys/devices/system/cpu/cpu3/topology/physical_package_id":  {Data: []byte("1\n")},
		"sys/devices/system/cpu/cpu3/topology/thread_siblings_list": {Data: []byte("2-3\n")},
	}
	m, err := topology.DiscoverFS(sys)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range m.Nodes() {
		fmt.Printf("node %d: socket %d, CPUs %s, %d MiB\n", n.ID, n.Socket, n.CPUs, n.MemoryMiB)
	}
	d, _ := m.Distances().Distance(0, 4)
	fmt.Println("distance 0-4:", d, "threads per core:", m.ThreadsPerCore())
	// Output:
	// node 0: socket 0, CPUs 0-1, 4096 MiB
	// node 4: socket 1, CPUs 2-3, 4096 MiB
	// distance 0-4: 21 threads per core: 2
}

func ExampleMachine_Picture() {
	m, _ := topology.Preset("small-1s")
	err := m.Picture(os.Stdout, &topology.Marks{
		CPUs:   map[int]rune{0: 'a', 8: 'a'},
		GPUs:   map[int]rune{0: 'a'},
		Legend: []string{"a = pod-1"},
	})
	fmt.Println(err)
	// Output:
	// small-1s: 1 socket, 1 NUMA node, 16 CPUs on 8 cores, 1 GPU
	// key: [..] one core, a character per CPU: . free, r reserved; [.] GPU n, . free
	//   a = pod-1
	// socket 0
	//   node 0: 64 GiB, 8 cores, CPUs 0-15
	//     0-15 [aa][..][..][..][..][..][..][..]
	//     no PCIe switch
	//       [a] GPU 0  0000:01:00.0
	// NUMA sets: {0}
	// distances
	//   node   0
	//      0  10
	// <nil>
}
