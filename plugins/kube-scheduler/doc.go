// Package numaplace is numaplace's cluster side as a plugin of the real
// kube-scheduler (the scheduling framework of k8s.io/kubernetes v1.37):
// the plugin [Name] ("NUMAPlace") runs adapters/scheduler's Cache at the
// framework's extension points, so that a pod is only bound to a node
// whose NUMA nodes can hold it under the pod's policy, and the node side
// learns from the pod's numaplace.io/allocation annotation which CPUs and
// GPUs to give it.
//
// One source of truth: the cache's accounting is a function of the API
// objects, the nodes with their topology annotation and the pods bound to
// them. Every change is applied by syncing the node it concerns from the
// informers' stores (never from the notification alone), by the plugin's
// informer handlers and by PreFilter for every node whose framework
// NodeInfo changed since the plugin last looked, so that a restart, a late
// or repeated notification, or a retry triggered by another plugin's
// queueing hint all see the same state. A bound pod is always accounted
// (adapters/scheduler: what its decision names that the node's current
// machine lacks is left out, and the pod is a misfit of the node); a node
// whose accounting is not exact is marked with the [ConditionMisfit]
// condition, Events and metrics until it is.
//
// Extension points:
//
//   - PreFilter syncs the changed nodes, converts the pod ([PodFromV1]),
//     reads it with kube.ParsePod and keeps it in the CycleState; an
//     invalid pod (say, a NUMA spec without cpuset-scheduler: required)
//     is rejected as UnschedulableAndUnresolvable with the parser's
//     message.
//   - Filter asks the cache; a refusal carries the FilterError's short
//     reasons after [Prefix] ("numaplace: no NUMA node has 4 free GPUs
//     now"), so that kube-scheduler's summary counts nodes by reason. A
//     refusal that releasing pods cannot resolve ("numaplace: no NUMA node
//     can hold 8 GPUs on this machine", no opt-in label, no or a malformed
//     topology annotation) is UnschedulableAndUnresolvable; the others are
//     Unschedulable, so that DefaultPreemption considers the node.
//   - PostFilter (after DefaultPreemption) adds numaplace's never-fit
//     reasons for nodes another plugin refused first, which kube-scheduler's
//     summary would otherwise hide behind "Insufficient aliyun.com/gpu".
//   - PreFilterExtensions (AddPod, RemovePod) record a preemption dry-run's
//     changes of a node in the CycleState; Filter then judges the node so
//     changed exactly, and steers DefaultPreemption to the victims that
//     come first in kube-scheduler's order (the lowest highest priority,
//     then the fewest victims of it, then the fewest victims:
//     adapters/scheduler's PreparedPod.Victims).
//   - PreScore skips pods that hold no allocation (no NUMA spec and no
//     GPUs); Score asks Cache.Score (0-100: alignment first, then the
//     packing strategy) and NormalizeScore scales it to
//     framework.MaxNodeScore.
//   - Reserve and Unreserve call the Cache's, so the next pod's Filter
//     sees what this one holds before it is bound.
//   - Bind posts the pod's Binding with the decision (numaplace.io/allocation,
//     and Koordinator's annotations when configured) in its annotations,
//     which the API server copies onto the pod with spec.nodeName: one API
//     write per pod. PreBind then has nothing to do (PreBindPreFlight
//     skips); in a profile where another plugin binds first, PreBind writes
//     the decision with a merge patch instead. PostBind counts the
//     placement.
//
// The plugin's arguments are [Args], decoded from the profile's
// pluginConfig. Metrics ([RegisterMetrics]) go to kube-scheduler's
// legacy registry and are served on its /metrics endpoint.
//
// A scheduler binary with the plugin built in is cmd/numaplace-scheduler:
//
//	command := app.NewSchedulerCommand(app.WithPlugin(numaplace.Name, numaplace.New),
//		app.WithPlugin(numaplace.DRAName, numaplace.NewDRA))
//
// and cmd/numaplace-inspect prints a node's placement picture, as the plugin
// accounts it, from a kubeconfig.
//
// The package is named numaplace, not after its directory
// (kube-scheduler, a name that is not an identifier): importers write
// numaplace.New and numaplace.Name, and the name matches the plugin it
// registers (NUMAPlace) rather than the upstream kube-scheduler it plugs
// into, whose own packages an importer of this one imports too. Import it
// with the name spelt out, as cmd/numaplace-scheduler does:
//
//	import numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
package numaplace
