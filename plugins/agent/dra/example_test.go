package dra_test

import (
	"fmt"

	"github.com/numaplace/numaplace/plugins/agent/dra"
	"github.com/numaplace/numaplace/topology"
)

// Two GPUs: GPU 0 on NUMA node 0; GPU 1 on node 2, a CPU-less memory node
// nearer node 1 than node 0, so its numaNode is 1. GPU 1 is unhealthy and
// tainted.
func ExampleBuildResources() {
	m, _ := topology.ParseJSON([]byte(`{
	  "numaNodes": [{"id": 0, "socket": 0, "cpus": "0-3"}, {"id": 1, "socket": 0, "cpus": "4-7"},
	                {"id": 2, "socket": 0, "cpus": ""}],
	  "distances": [[10, 12, 20], [12, 10, 11], [20, 11, 10]],
	  "gpus": [{"id": 0, "numaNode": 0, "busID": "0000:1b:00.0", "uuid": "GPU-a", "memoryMiB": 81559},
	           {"id": 1, "numaNode": 2, "busID": "0000:2b:00.0", "uuid": "GPU-b"}],
	  "devices": [{"id": "mlx5_0", "class": "rdma", "numaNode": 0}]}`))
	res, err := dra.BuildResources(dra.Inventory{Machine: m, Pool: "node-a"}, map[string][]string{"gpu": {"1"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range res.Pools["node-a"].Slices[0].Devices {
		mem := d.Capacity[dra.CapacityMemory]
		fmt.Println(d.Name, *d.Attributes[dra.AttrType].StringValue, *d.Attributes[dra.AttrNUMANode].IntValue,
			mem.Value.String(), len(d.Taints))
	}
	// Output:
	// gpu-0 gpu 0 81559Mi 0
	// gpu-1 gpu 1 0 1
	// nic-mlx5-0 nic 0 0 0
}
