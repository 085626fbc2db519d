package nri

import (
	"context"
	"log/slog"
)

// Event types, as Kubernetes names them.
const (
	// EventTypeNormal is an event about something that went as expected.
	EventTypeNormal = "Normal"
	// EventTypeWarning is an event about something that went wrong.
	EventTypeWarning = "Warning"
)

// Event reasons the plugin records.
const (
	// ReasonTopologyAffinityError: the pod's decision conflicts with what
	// the node holds (CPUs or GPUs held by another pod, unhealthy, reserved
	// or not on this node). It is the kubelet's reason for the same refusal.
	ReasonTopologyAffinityError = "TopologyAffinityError"
	// ReasonInvalidPlacement: the pod cannot be placed as written (a
	// malformed decision or NUMA spec, a NUMA spec without a decision, or a
	// pod already admitted with another placement).
	ReasonInvalidPlacement = "NUMAPlacementInvalid"
	// ReasonUnmanaged: a running pod found at synchronisation could not be
	// admitted; its containers are confined to the shared pool (their
	// environment, such as NVIDIA_VISIBLE_DEVICES, cannot be changed).
	ReasonUnmanaged = "NUMAPlacementUnmanaged"
	// ReasonResized: an in-place resize changed the pod's exclusive CPUs
	// (a Normal event naming the new cpuset).
	ReasonResized = "NUMAPlacementResized"
	// ReasonResizeRefused: an in-place resize of the pod was refused (its
	// memory, a fraction of a CPU, or CPUs the node cannot give under the
	// pod's policy); the kubelet shows the same message in the pod's
	// PodResizeInProgress condition.
	ReasonResizeRefused = "NUMAResizeRefused"
	// ReasonGPUsNotApplied: a running container found at synchronisation
	// does not have its decision's GPUs (it started while the agent was
	// away); the pod must be restarted to get them.
	ReasonGPUsNotApplied = "NUMAPlacementGPUsNotApplied"
)

// Event is something about a pod that its owners should see, shaped like a
// Kubernetes event on the pod (involvedObject kind Pod).
type Event struct {
	// Namespace, Name and UID identify the pod.
	Namespace, Name, UID string
	// Type is [EventTypeNormal] or [EventTypeWarning].
	Type string
	// Reason is a short CamelCase reason, such as
	// [ReasonTopologyAffinityError].
	Reason string
	// Message says what happened in words, naming the conflict.
	Message string
}

// EventSink records events. Implementations must be safe for concurrent
// use and should not block for long: the plugin calls Record while it
// answers the runtime.
//
// The default, [LogEvents], writes them to the log. A deployment that wants
// them as Kubernetes events implements Record with client-go's
// record.EventRecorder (from a record.NewBroadcaster whose sink is the
// clientset's CoreV1().Events("")), which sends asynchronously:
//
//	func (s k8sSink) Record(_ context.Context, e nri.Event) {
//		ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1",
//			Namespace: e.Namespace, Name: e.Name, UID: types.UID(e.UID)}
//		s.recorder.Event(ref, e.Type, e.Reason, e.Message)
//	}
//
// The node agent's service account then needs create and patch on events.
// This module does not import client-go, to stay light.
type EventSink interface {
	// Record records the event.
	Record(ctx context.Context, e Event)
}

// LogEvents is the default [EventSink]: it logs each event, warnings at
// level Warn and the others at Info.
type LogEvents struct {
	// Logger receives the events; nil means slog.Default().
	Logger *slog.Logger
}

// Record implements [EventSink].
func (l LogEvents) Record(ctx context.Context, e Event) {
	log := l.Logger
	if log == nil {
		log = slog.Default()
	}
	level := slog.LevelInfo
	if e.Type == EventTypeWarning {
		level = slog.LevelWarn
	}
	log.Log(ctx, level, "event", "pod", e.Namespace+"/"+e.Name, "uid", e.UID,
		"type", e.Type, "reason", e.Reason, "message", e.Message)
}

var _ EventSink = LogEvents{}
