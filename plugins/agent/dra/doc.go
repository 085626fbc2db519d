// Package dra is numaplace-agent's DRA role: a Dynamic Resource Allocation
// driver (resource.k8s.io/v1, built on k8s.io/dynamic-resource-allocation's
// kubeletplugin) named gpu.numaplace.io by default.
//
// It publishes the node's GPUs and RDMA NICs as one pool named after the
// node ([Catalog.Resources]): device gpu-<index> per GPU and nic-<ibdev>
// per NIC, with the standard attributes resource.kubernetes.io/numaNode
// (the NUMA node whose CPUs are closest, [NUMANodeValue]; a list with the
// same-socket nodes at the least SLIT distance when list-type attributes
// are on), pcieRoot and pciBusID, numaplace's own (type, uuid, index,
// minor, pcieSwitch, nvlinkGroup, nvlinks, ibDevice), the GPU's memory as
// capacity "memory", and a NoSchedule taint on each unhealthy device.
//
// It prepares the claims the kubelet hands it ([Driver.Prepare]): their
// devices are held in the node state shared with the NRI and device-plugin
// roles (kubelet.Node.HoldClaim), so that no decision, pod or other claim
// gets them, and a CDI spec per claim gives the containers their device
// nodes and NVIDIA_VISIBLE_DEVICES. [Driver.Run] registers it with the
// kubelet and keeps the slices in step with the devices' health.
//
// The common call, in the agent:
//
//	d, err := dra.New(node, gpus, nics, dra.Options{NodeName: name, HealthInterval: 10 * time.Second})
//	...
//	err = d.Run(ctx, dra.RunOptions{Client: client})
package dra
