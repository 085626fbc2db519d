package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/plugins/agent/nri"
)

// Decisions writes the new decisions of pods resized in place on the pods'
// numaplace.io/allocation annotation, so that numaplace-scheduler accounts
// what the node holds. [Decisions.Write] (the NRI role's Options.OnResize)
// queues and returns at once; [Decisions.Run] patches in the background: a
// JSON merge patch of that one annotation, with the pod's UID as a
// precondition, which deploy/agent.yaml lets the agent's service account
// make only on pods bound to its own node. A failed patch is retried after
// 1 s, doubling to 1 min; a newer decision of the same pod replaces a
// queued one; a pod that is gone, or was recreated under the same name
// (another UID), is dropped with a log line.
type Decisions struct {
	client kubernetes.Interface
	log    *slog.Logger
	// minBackoff and maxBackoff bound the wait after a failed patch.
	minBackoff, maxBackoff time.Duration

	mu      sync.Mutex
	pending map[string]nri.Resized // by namespace/name
	kick    chan struct{}
}

// NewDecisions returns the decision writer for the API server of cfg,
// logging to log (nil: slog.Default()).
func NewDecisions(cfg *rest.Config, log *slog.Logger) (*Decisions, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return newDecisions(client, log), nil
}

func newDecisions(client kubernetes.Interface, log *slog.Logger) *Decisions {
	if log == nil {
		log = slog.Default()
	}
	return &Decisions{client: client, log: log, minBackoff: time.Second, maxBackoff: time.Minute,
		pending: map[string]nri.Resized{}, kick: make(chan struct{}, 1)}
}

// Write queues the pod's new decision and returns at once.
func (d *Decisions) Write(r nri.Resized) {
	d.mu.Lock()
	d.pending[r.Namespace+"/"+r.Name] = r
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Pending returns the decisions not written yet, by pod key.
func (d *Decisions) Pending() map[string]nri.Resized {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.pending)
}

// Run writes the queued decisions until ctx is done, then returns nil.
func (d *Decisions) Run(ctx context.Context) error {
	backoff := time.Duration(0)
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.kick:
		case <-retry:
		}
		if d.flush(ctx) {
			backoff, retry = 0, nil
			continue
		}
		backoff = min(max(2*backoff, d.minBackoff), d.maxBackoff)
		retry = time.After(backoff)
	}
}

// flush patches every queued decision once; it reports whether none is
// left to retry.
func (d *Decisions) flush(ctx context.Context) bool {
	d.mu.Lock()
	queued := maps.Clone(d.pending)
	d.mu.Unlock()
	done := true
	for _, key := range slices.Sorted(maps.Keys(queued)) {
		r := queued[key]
		err := d.patch(ctx, r)
		switch {
		case err == nil:
			d.log.InfoContext(ctx, "wrote the decision of a pod resized in place", "pod", key, "decision", r.Decision)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err):
			d.log.WarnContext(ctx, "the decision of a pod resized in place is not written: the pod is gone or was recreated",
				"pod", key, "uid", r.UID, "error", err)
		default:
			d.log.ErrorContext(ctx, "cannot write the decision of a pod resized in place; retrying", "pod", key, "error", err)
			done = false
			continue
		}
		d.mu.Lock()
		if d.pending[key] == r {
			delete(d.pending, key)
		}
		d.mu.Unlock()
	}
	return done
}

// patch writes one decision.
func (d *Decisions) patch(ctx context.Context, r nri.Resized) error {
	meta := map[string]any{"annotations": map[string]string{kube.AnnotationAllocation: r.Decision}}
	if r.UID != "" {
		meta["uid"] = r.UID // a precondition: a recreated pod is not written
	}
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return fmt.Errorf("the patch of pod %s/%s: %w", r.Namespace, r.Name, err)
	}
	_, err = d.client.CoreV1().Pods(r.Namespace).Patch(ctx, r.Name, types.MergePatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager})
	return err
}
