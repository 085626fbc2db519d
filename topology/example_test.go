package topology_test

import (
	"fmt"
	"os"

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

	_, err = topology.ParseJSON([]byte(`{"numaNodes": [{"id": 0, "cpus": "0-3"}], "gpus": [{"numaNode": 1}]}`))
	fmt.Println(err)
	// Output:
	// [0 2 5] [0 1-2] 13
	// 8 2 12
	// invalid topology: gpus[0] (id 0): NUMA node 1 does not exist (use -1 when it is unknown)
}

func ExampleMachine_WriteJSON() {
	m, err := topology.ParseJSON([]byte(`{"name": "tiny", "numaNodes": [
		{"id": 0, "socket": 0, "cpus": "0-1"},
		{"id": 1, "cpus": "", "memoryMiB": 1024}
	], "gpus": [{}]}`))
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
