package deviceplugin_test

import (
	"context"
	"fmt"
	"log/slog"

	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/topology"
)

// The kubelet offers every GPU of a DGX A100 and asks for two: numaplace's
// chooser answers two GPUs on one NUMA node, under one PCIe switch.
func ExamplePlugin_GetPreferredAllocation() {
	m, _ := topology.Preset("dgx-a100")
	node, _ := kubelet.Open(m, "", kubelet.NodeOptions{})
	devs, _ := devices.New(m, "/dev", nil)
	p, _ := deviceplugin.New(node, devs, deviceplugin.Options{Logger: slog.New(slog.DiscardHandler)})

	var all []string
	for _, d := range p.Devices() {
		all = append(all, d.ID)
	}
	resp, err := p.GetPreferredAllocation(context.Background(), &api.PreferredAllocationRequest{
		ContainerRequests: []*api.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: all, AllocationSize: 2}}})
	fmt.Println(resp.GetContainerResponses()[0].GetDeviceIDs(), err)
	fmt.Println(p.Devices()[0].GetTopology().GetNodes()[0].GetID(), p.Devices()[0].GetHealth())
	// Output:
	// [0 1] <nil>
	// 3 Healthy
}
