// Package numaplace is numaplace's cluster side as a plugin of the real
// kube-scheduler (the scheduling framework of k8s.io/kubernetes v1.37):
// the plugin [Name] ("NUMAPlace") runs adapters/scheduler's Cache at the
// framework's extension points, so that a pod is only bound to a node
// whose NUMA nodes can hold it under the pod's policy, and the node side
// learns from the pod's numaplace.io/allocation annotation which CPUs and
// GPUs to give it.
//
// Extension points and the flow of state:
//
//   - PreFilter converts the pod ([PodFromV1]), reads it with
//     kube.ParsePod and keeps the result in the CycleState; an invalid pod
//     (say, a NUMA spec without cpuset-scheduler: required) is rejected as
//     UnschedulableAndUnresolvable with the parser's message.
//   - Filter asks Cache.Filter; a refusal carries the FilterError's short
//     reasons, so that kube-scheduler's summary counts nodes by reason
//     ("0/4 nodes are available: 3 no NUMA node with 8 free GPUs, ...").
//     A node without a topology annotation refuses pods with a NUMA spec
//     and leaves the others to the other plugins.
//   - PreScore skips pods that hold no allocation (no NUMA spec and no
//     GPUs); Score asks Cache.Score (0-100: alignment first, then the
//     packing strategy) and NormalizeScore scales it to
//     framework.MaxNodeScore.
//   - Reserve and Unreserve call the Cache's, so the next pod's Filter
//     sees what this one holds before it is bound.
//   - PreBind writes the decision (numaplace.io/allocation, and
//     Koordinator's annotations when configured) on the pod with a merge
//     patch through the framework handle's clientset; PostBind counts the
//     placement.
//   - Informers (the handle's SharedInformerFactory) keep the Cache in
//     step with the cluster: nodes come from their topology annotation
//     ([MachineFromNode]: [AnnotationTopology], [AnnotationNRT] or
//     Koordinator's node.koordinator.sh/cpu-topology) with their labels;
//     bound pods are added with Cache.AddPod, which claims exactly what a
//     decision annotation names, so a restarted scheduler rebuilds the
//     state; deleted and finished pods are removed.
//
// The plugin's arguments are [Args], decoded from the profile's
// pluginConfig. Metrics ([RegisterMetrics]) go to kube-scheduler's
// legacy registry and are served on its /metrics endpoint.
//
// A scheduler binary with the plugin built in is cmd/numaplace-scheduler:
//
//	command := app.NewSchedulerCommand(app.WithPlugin(numaplace.Name, numaplace.New))
package numaplace
