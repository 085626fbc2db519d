// Package deviceplugin is numaplace's device plugin for GPUs: it serves
// the kubelet's device-plugin API v1beta1
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1) on a unix socket in the
// kubelet's device-plugin directory and advertises the node's GPUs as one
// extended resource (aliyun.com/gpu by default), so that the kubelet admits
// pods that ask for it.
//
//   - Register: the plugin registers with the kubelet's kubelet.sock, and
//     again whenever the kubelet restarts (it removes the plugin's socket
//     and recreates its own; the plugin notices within WatchInterval).
//   - ListAndWatch sends each GPU (by UUID, else index) with its NUMA node
//     in TopologyInfo and its health, and again when a GPU's health
//     changes ([Plugin.SetHealth], or the periodic [Plugin.CheckHealth]:
//     healthy while its device node exists).
//   - GetPreferredAllocation finds the pod the kubelet is admitting (the
//     pods bound to the node from [Options.Pods], narrowed by the kubelet's
//     pod-resources API from [Options.KubeletPods]) and answers the
//     container's share of its decision (kube.GPUShares), so that the
//     kubelet records the decided GPUs; for a pod without a decision, the
//     node's chooser (adapters/kubelet) among the GPUs no decision holds
//     or reserves.
//   - Allocate gives the kubelet's GPUs as NVIDIA_VISIBLE_DEVICES and
//     their device nodes (the NRI role gives a decided pod's containers
//     their shares); with [Options.NoDeviceNodes] (the NRI role on) the
//     nodes only when the GPUs are the container's share of its decision,
//     or its pod has none, the pod known through the kubelet's
//     pod-resources API. It reports a container given other GPUs than
//     its share (an event, [Plugin.WriteMetrics]) and refuses a pod without
//     a decision a GPU a decision holds or reserves.
//
// The common calls:
//
//	devs, err := devices.New(machine, "/dev", os.DirFS("/"))
//	p, err := deviceplugin.New(node, devs, deviceplugin.Options{OnChange: reporter.Notify,
//		Pods: podInformer, KubeletPods: deviceplugin.PodResources{}})
//	err = p.Run(ctx) // until ctx is done
package deviceplugin
