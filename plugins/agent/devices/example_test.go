package devices_test

import (
	"fmt"
	"testing/fstest"

	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/topology"
)

// The driver numbers the GPU at 0000:1b:00.0 as /dev/nvidia2; the other
// GPU has no driver file and keeps its index.
func ExampleGPUs_Path() {
	m, _ := topology.ParseJSON([]byte(`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7"}],
		"gpus":[{"id":0,"numaNode":0,"busID":"0000:1b:00.0"},{"id":1,"numaNode":0,"busID":"0000:2b:00.0"}]}`))
	proc := fstest.MapFS{"proc/driver/nvidia/gpus/0000:1b:00.0/information": {Data: []byte("Device Minor: 2\n")}}
	g, _ := devices.New(m, "/dev", proc)
	fmt.Println(g.Paths())
	fmt.Println(devices.IsGPUNode("/dev/nvidia2"), devices.IsGPUNode("/dev/nvidiactl"))
	// Output:
	// [/dev/nvidia2 /dev/nvidia1]
	// true false
}

// The RDMA NIC mlx5_0's verbs device is uverbs0, as its PCI device's
// infiniband_verbs directory in sysfs says.
func ExampleNewNICs() {
	m, _ := topology.ParseJSON([]byte(`{"numaNodes":[{"id":0,"socket":0,"cpus":"0-7"}],
		"devices":[{"id":"mlx5_0","class":"rdma","numaNode":0,"busID":"0000:18:00.0"}]}`))
	sys := fstest.MapFS{"sys/bus/pci/devices/0000:18:00.0/infiniband_verbs/uverbs0/ibdev": {Data: []byte("mlx5_0\n")}}
	n, _ := devices.NewNICs(m, "/dev", sys)
	fmt.Println(n.IDs())
	fmt.Println(n.Paths("mlx5_0"))
	// Output:
	// [mlx5_0]
	// [/dev/infiniband/uverbs0] true
}
