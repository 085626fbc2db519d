// Package policy holds numaplace's per-pod NUMA placement policies and the
// singleNUMANodeExclusive rule as pure functions over NUMA masks, and the
// parsing of the pod-level spec
// {"numaTopologyPolicy": ..., "singleNUMANodeExclusive": ...}.
//
// The semantics are those of docs/design.md:
//
//   - SingleNUMANode: the span is exactly one NUMA node.
//   - Restricted: the span is exactly width_cap nodes, inside one NUMA set
//     whenever width_cap was found inside one.
//   - BestEffort: the span is exactly width_free nodes; never refused for
//     topology reasons.
//   - None: anywhere.
//
// A NUMA node is shared when a live allocation whose span has more than one
// node uses it, else single when any live allocation uses it, else idle.
// Under [Required] exclusivity a one-node span may not use a shared node and a
// multi-node span may not use a single node ([Allowed]).
//
// The common call:
//
//	spec, err := policy.ParseSpec([]byte(pod.Annotations[key]))
//	if err != nil { ... } // names the bad field and value
//	ok := policy.Allowed(span, single, shared)
package policy
