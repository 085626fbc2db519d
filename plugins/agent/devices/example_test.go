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
