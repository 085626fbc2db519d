package numaplace

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/workqueue"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

// ConditionMisfit is the type of the Node condition the plugin keeps on the
// nodes it accounts: True while the node's accounting is not exactly its
// pods' decisions (pods misfit the current machine, or cannot be read, or
// request more than it has) or its topology annotation is malformed, with
// the pods and reasons in the message; False once that is over. The plugin
// writes it with a strategic merge patch of nodes/status (the scheduler's
// service account needs "patch" on nodes/status, as the repository's
// deploy/scheduler.yaml grants).
const ConditionMisfit v1.NodeConditionType = "NUMAPlaceMisfit"

// Reasons of the [ConditionMisfit] condition.
const (
	// MarkTopologyMalformed: the node's topology annotation cannot be read.
	MarkTopologyMalformed = "TopologyMalformed"
	// MarkNodeInvalid: the cache refuses the node as it is labelled (such
	// as numaplace.io/memory-alignment with a value other than "true" or
	// "false").
	MarkNodeInvalid = "NodeInvalid"
	// MarkMisfit: bound pods misfit the node's current machine or cannot
	// be read, or request more than the machine has.
	MarkMisfit = "PodsMisfit"
	// MarkAllFit: the condition is over.
	MarkAllFit = "AllFit"
)

// Event reasons of the plugin's Events on Nodes.
const (
	// EventTopologyMalformed: a topology annotation cannot be read (once
	// per value).
	EventTopologyMalformed = "NUMAPlaceTopologyMalformed"
	// EventNodeInvalid: the node's labels make it unusable (once per
	// reason).
	EventNodeInvalid = "NUMAPlaceNodeInvalid"
	// EventPodMisfit: a bound pod's accounting is not exactly its decision
	// (a scheduler.Misfit), once per pod and reason.
	EventPodMisfit = "NUMAPlacePodMisfit"
	// EventPodUnaccounted: a bound pod cannot be read at all; what it holds
	// is not accounted.
	EventPodUnaccounted = "NUMAPlacePodUnaccounted"
	// EventOvercommitted: the node's pods request more than its machine
	// has.
	EventOvercommitted = "NUMAPlaceOvercommitted"
)

// maxMarkMessage bounds the condition's message.
const maxMarkMessage = 1024

// mark is what a node's [ConditionMisfit] condition should say; nil means
// False (nothing to report).
type mark struct {
	reason, message string
}

// markOf is the mark of a node's record.
func markOf(rec *nodeRecord) *mark {
	switch {
	case rec.parseErr != nil:
		return &mark{reason: MarkTopologyMalformed, message: truncate(Prefix + rec.err.Error())}
	case rec.err != nil:
		return &mark{reason: MarkNodeInvalid, message: truncate(Prefix + rec.err.Error())}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(rec.misfits)) {
		parts = append(parts, misfitText(rec.misfits[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(rec.unaccounted)) {
		parts = append(parts, fmt.Sprintf("%s (%s): %s", k, MisfitUnaccounted, rec.unaccounted[k]))
	}
	parts = append(parts, rec.overcommit...)
	if len(parts) == 0 {
		return nil
	}
	return &mark{reason: MarkMisfit, message: truncate("numaplace: " + joinSemi(parts))}
}

func joinSemi(parts []string) string { return strings.Join(parts, "; ") }

// misfitText is how the condition's message names a misfit.
func misfitText(m scheduler.Misfit) string {
	return fmt.Sprintf("%s (%s): %s", m.Pod, m.Kind, m.Reason)
}

// marked reports whether the node's NUMAPlaceMisfit condition is True and
// its message says text: what an earlier scheduler process reported (and
// emitted its Event for), which a restarted one does not emit again.
func marked(n *v1.Node, text string) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == ConditionMisfit {
			return c.Status == v1.ConditionTrue && strings.Contains(c.Message, text)
		}
	}
	return false
}

func truncate(s string) string {
	if len(s) <= maxMarkMessage {
		return s
	}
	cut := maxMarkMessage - len(" ...")
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + " ..."
}

// marker keeps the nodes' [ConditionMisfit] conditions as the plugin's
// records say, on its own goroutine (a patch is an API call, never made
// under the plugin's locks), retrying with backoff. It writes nothing until
// its gate (the plugin's informer handlers have seen every node and pod) is
// open, so that a restarted scheduler does not write a node's condition
// from a partial view (False before the node's pods are seen, then True
// with a new lastTransitionTime).
type marker struct {
	pl     *Plugin
	nodes  corelisters.NodeLister
	queue  workqueue.TypedRateLimitingInterface[string]
	cancel context.CancelFunc
	done   chan struct{}
	gate   atomic.Pointer[func() bool] // nil: open

	mu   sync.Mutex
	want map[string]*mark
	// seen are, by node, the mark the node's condition was last found to
	// say already (no write needed) and the node's resourceVersion then:
	// update asks for no check again while both stay so.
	seen map[string]seenMark
}

// seenMark is a mark a node's condition said at a resourceVersion.
type seenMark struct {
	mk *mark
	rv string
}

// sameMark reports whether two marks say the same (nil: all pods fit, or
// never marked).
func sameMark(a, b *mark) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func newMarker(ctx context.Context, pl *Plugin, nodes corelisters.NodeLister) *marker {
	ctx, cancel := context.WithCancel(ctx)
	m := &marker{pl: pl, nodes: nodes, cancel: cancel, done: make(chan struct{}), want: map[string]*mark{}, seen: map[string]seenMark{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "numaplace-node-marks"})}
	go m.run(ctx)
	return m
}

// update records what the node's condition should say and has it written,
// unless the node (at resourceVersion rv, "" if unknown) was last found
// saying exactly that: then there is nothing to check or write (a bound
// pod that changes nothing of the node's mark costs no trip through the
// queue).
func (m *marker) update(node, rv string, mk *mark) {
	m.mu.Lock()
	m.want[node] = mk
	seen, ok := m.seen[node]
	m.mu.Unlock()
	if ok && rv != "" && seen.rv == rv && sameMark(seen.mk, mk) {
		return
	}
	m.queue.Add(node)
}

// sawMarked records that the node, at resourceVersion rv, says mk already,
// if mk is still what the plugin wants of it.
func (m *marker) sawMarked(node, rv string, mk *mark) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.want[node]; ok && cur == mk && rv != "" {
		m.seen[node] = seenMark{mk: mk, rv: rv}
	} else {
		delete(m.seen, node)
	}
}

// forget drops what the plugin wanted of a node that is gone.
func (m *marker) forget(node string) {
	m.mu.Lock()
	delete(m.want, node)
	delete(m.seen, node)
	m.mu.Unlock()
}

// wanted returns the node's mark and whether the plugin has one.
func (m *marker) wanted(node string) (*mark, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mk, ok := m.want[node]
	return mk, ok
}

func (m *marker) stop() {
	m.cancel()
	m.queue.ShutDown()
	<-m.done
}

func (m *marker) run(ctx context.Context) {
	defer close(m.done)
	go func() {
		<-ctx.Done()
		m.queue.ShutDown()
	}()
	for {
		name, quit := m.queue.Get()
		if quit {
			return
		}
		if g := m.gate.Load(); g != nil && !(*g)() {
			m.queue.Done(name)
			m.queue.AddAfter(name, 100*time.Millisecond)
			continue
		}
		err := m.write(ctx, name)
		if err != nil && ctx.Err() == nil {
			m.pl.logger.Error(err, "Writing the node's condition", "node", name, "condition", ConditionMisfit)
			m.queue.AddRateLimited(name)
		} else {
			m.queue.Forget(name)
		}
		m.queue.Done(name)
	}
}

// write patches the node's condition when it differs from the mark.
func (m *marker) write(ctx context.Context, name string) error {
	mk, ok := m.wanted(name)
	if !ok || m.pl.handle == nil || m.pl.handle.ClientSet() == nil {
		return nil
	}
	n, err := m.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		m.mu.Lock()
		delete(m.want, name)
		m.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	var cur *v1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == ConditionMisfit {
			cur = &n.Status.Conditions[i]
		}
	}
	want := v1.NodeCondition{Type: ConditionMisfit, Status: v1.ConditionFalse, Reason: MarkAllFit,
		Message: "numaplace: every bound pod is accounted exactly by its decision on the node's machine"}
	if mk != nil {
		want.Status, want.Reason, want.Message = v1.ConditionTrue, mk.reason, mk.message
	}
	switch {
	case cur == nil && mk == nil:
		m.sawMarked(name, n.ResourceVersion, mk)
		return nil // never marked: nothing to say
	case cur != nil && cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message:
		m.sawMarked(name, n.ResourceVersion, mk)
		return nil
	}
	m.mu.Lock()
	delete(m.seen, name)
	m.mu.Unlock()
	now := metav1.NewTime(time.Now())
	want.LastHeartbeatTime, want.LastTransitionTime = now, now
	if cur != nil && cur.Status == want.Status {
		want.LastTransitionTime = cur.LastTransitionTime
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.NodeCondition{want}}})
	if err != nil {
		return err
	}
	_, err = m.pl.handle.ClientSet().CoreV1().Nodes().PatchStatus(ctx, name, patch)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// event records an Event on the node (with the pod, if any, as the related
// object) through the framework's recorder, its note cut to 1 KiB.
func (pl *Plugin) event(n *v1.Node, related *v1.Pod, eventtype, reason, action, note string, args ...any) {
	if pl.handle == nil || n == nil {
		return
	}
	rec := pl.handle.EventRecorder()
	if rec == nil {
		return
	}
	var rel runtime.Object
	if related != nil {
		rel = related
	}
	// events.k8s.io/v1 refuses notes longer than 1 KiB.
	rec.Eventf(n, rel, eventtype, reason, action, "%s", truncate(fmt.Sprintf(note, args...)))
}

// misfitKinds are the kinds of the numaplace_misfit_pods gauge.
var misfitKinds = []string{string(scheduler.MisfitLost), string(scheduler.MisfitUnplaced), string(scheduler.MisfitInvalid), MisfitUnaccounted}
