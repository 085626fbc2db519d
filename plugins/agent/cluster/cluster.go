package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/plugins/agent/nri"
	"github.com/numaplace/numaplace/plugins/agent/reporter"
)

// FieldManager is the agent's name in server-side apply and in the
// managed fields of what it writes.
const FieldManager = "numaplace-agent"

// NRTResource is the NodeResourceTopology custom resource
// (topology.node.k8s.io/v1alpha2, cluster-scoped).
var NRTResource = schema.GroupVersionResource{Group: "topology.node.k8s.io", Version: "v1alpha2", Resource: "noderesourcetopologies"}

// Config returns the client configuration: from the kubeconfig file when
// one is named, else the in-cluster configuration (the pod's service
// account). Errors say which was tried.
func Config(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
	}
	return cfg, nil
}

// Writer is the reporter's [reporter.Writer] on a Kubernetes API server.
type Writer struct {
	client kubernetes.Interface
	dyn    dynamic.Interface
}

var _ reporter.Writer = (*Writer)(nil)

// NewWriter returns the writer for the API server of cfg.
func NewWriter(cfg *rest.Config) (*Writer, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Writer{client: client, dyn: dyn}, nil
}

// Annotate implements [reporter.Writer] with a JSON merge patch of the
// Node's annotations (which needs only the patch verb on nodes; a missing
// Node is an error, never created) and returns the patched Node's UID.
func (w *Writer) Annotate(ctx context.Context, node string, annotations map[string]string) (string, error) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if err != nil {
		return "", err
	}
	n, err := w.client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if err != nil {
		return "", err
	}
	return string(n.UID), nil
}

// ApplyNRT implements [reporter.Writer] with a server-side apply of the
// whole object as field manager [FieldManager], forcing ownership of its
// fields: the object is created when missing and replaced by what the
// agent says otherwise (another writer of the same object, such as NFD's
// topology-updater on the same node, loses its fields).
func (w *Writer) ApplyNRT(ctx context.Context, r *kube.NodeResourceTopology) error {
	obj, err := Unstructured(r)
	if err != nil {
		return err
	}
	_, err = w.dyn.Resource(NRTResource).Apply(ctx, r.Metadata.Name, obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	return err
}

// Unstructured returns the report as an unstructured object, as it goes
// on the wire.
func Unstructured(r *kube.NodeResourceTopology) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("the NodeResourceTopology as JSON: %w", err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("the NodeResourceTopology as an object: %w", err)
	}
	return obj, nil
}

// Events is an [nri.EventSink] that records each event as a Kubernetes
// event on its pod, from component numaplace-agent on the node. Record
// hands the event to client-go's broadcaster and returns: the event is
// sent in the background (and dropped, with a log line from client-go,
// when the API server cannot be reached for long).
type Events struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

var _ nri.EventSink = (*Events)(nil)

// NewEvents returns the event sink for the API server of cfg, naming node
// as the events' source host.
func NewEvents(cfg *rest.Config, node string) (*Events, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: FieldManager, Host: node})
	return &Events{broadcaster: b, recorder: rec}, nil
}

// Record implements [nri.EventSink].
func (e *Events) Record(_ context.Context, ev nri.Event) {
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ev.Namespace, Name: ev.Name, UID: types.UID(ev.UID)}
	e.recorder.Event(ref, ev.Type, ev.Reason, ev.Message)
}

// RecordNode records an event on the Node named node (as the kubelet
// does: kind Node, the node's name as its UID, in the default namespace),
// sent in the background like Record's.
func (e *Events) RecordNode(node, eventType, reason, message string) {
	ref := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)}
	e.recorder.Event(ref, eventType, reason, message)
}

// Shutdown stops sending events (those queued may be lost).
func (e *Events) Shutdown() { e.broadcaster.Shutdown() }
