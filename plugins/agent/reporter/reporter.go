package reporter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
)

// Defaults of [Options].
const (
	DefaultInterval   = time.Second
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = time.Minute
	DefaultResync     = 10 * time.Minute
)

// Writer writes the node's publications to the API server. Its calls may
// block on the network; the reporter makes them from its own goroutine.
type Writer interface {
	// Annotate sets the given annotations on the Node named node and
	// returns the Node's UID.
	Annotate(ctx context.Context, node string, annotations map[string]string) (uid string, err error)
	// ApplyNRT creates the NodeResourceTopology object r or updates it to
	// r (r.Metadata.Name names it).
	ApplyNRT(ctx context.Context, r *kube.NodeResourceTopology) error
}

// Options tune a [Reporter]. The zero value is the default, except for
// NodeName, which is required.
type Options struct {
	// NodeName is the Kubernetes node's name: the Node annotated and the
	// NodeResourceTopology object's name.
	NodeName string
	// ResourceName is the GPU resource's name in the report's zones; ""
	// is kube.ResourceAliyunGPU.
	ResourceName string
	// Interval is the shortest time between two writes: changes within it
	// are coalesced into the next write; 0 is [DefaultInterval].
	Interval time.Duration
	// MinBackoff and MaxBackoff bound the wait after a failed write, which
	// doubles from MinBackoff up to MaxBackoff while the API server fails;
	// 0 is [DefaultMinBackoff] and [DefaultMaxBackoff].
	MinBackoff, MaxBackoff time.Duration
	// Resync is how often everything is written again even without a
	// change (repairing an annotation or object someone changed); 0 is
	// [DefaultResync], negative never.
	Resync time.Duration
	// Logger receives the reporter's log; nil is slog.Default().
	Logger *slog.Logger
}

// Stats counts a reporter's writes.
type Stats struct {
	// Writes counts the successful writes of the report.
	Writes int
	// Failures counts the failed attempts.
	Failures int
	// LastError is the last failure's message ("" after a success).
	LastError string
	// LastFingerprint is the pod fingerprint of the last report written.
	LastFingerprint string
}

// Reporter publishes a node's machine and its NUMA resources: the
// kube.AnnotationTopology annotation on the Node (the machine in
// numaplace's topology JSON) and the NodeResourceTopology object
// (kubelet.Node.Report: zones with capacity, allocatable and available
// amounts, costs, the Topology Manager attributes and the pod
// fingerprint). [Reporter.Notify] says that the node's state changed; it
// never blocks. Run writes, at most once per Interval, the state as it is
// when the write starts, so a burst of changes makes one write; a failed
// write is retried with exponential backoff, and the changes that arrive
// meanwhile are in the retry.
type Reporter struct {
	node *kubelet.Node
	w    Writer
	opts Options
	log  *slog.Logger
	kick chan struct{}

	mu    sync.Mutex
	stats Stats
	uid   string
}

// New returns the reporter of the node, writing through w.
func New(node *kubelet.Node, w Writer, opts Options) (*Reporter, error) {
	switch {
	case node == nil || w == nil:
		return nil, errors.New("reporter.New: nil node or writer")
	case opts.NodeName == "":
		return nil, errors.New("reporter: no node name (set --node-name or the NODE_NAME environment variable)")
	}
	if opts.ResourceName == "" {
		opts.ResourceName = kube.ResourceAliyunGPU
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.Resync == 0 {
		opts.Resync = DefaultResync
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Reporter{node: node, w: w, opts: opts, log: opts.Logger.With("role", "reporter"),
		kick: make(chan struct{}, 1)}, nil
}

// Notify says that the node's state changed. It returns at once: the next
// write (after Interval, or the backoff) carries the change.
func (r *Reporter) Notify() {
	select {
	case r.kick <- struct{}{}:
	default: // a write is already due
	}
}

// Stats returns the reporter's counts.
func (r *Reporter) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Annotations returns the Node annotations the reporter writes: the
// machine in numaplace's topology JSON under kube.AnnotationTopology.
func (r *Reporter) Annotations() (map[string]string, error) {
	js, err := json.Marshal(r.node.Machine())
	if err != nil {
		return nil, fmt.Errorf("reporter: the machine as JSON: %w", err)
	}
	return map[string]string{kube.AnnotationTopology: string(js)}, nil
}

// Report returns the NodeResourceTopology object as the reporter would
// write it now: the node's report named after the node, its GPU resource
// named Options.ResourceName, owned by the Node once the reporter knows
// the Node's UID.
func (r *Reporter) Report() (*kube.NodeResourceTopology, error) {
	nrt, err := r.node.Report(r.opts.NodeName)
	if err != nil {
		return nil, err
	}
	if r.opts.ResourceName != kube.ResourceAliyunGPU {
		for i := range nrt.Zones {
			for j := range nrt.Zones[i].Resources {
				if res := &nrt.Zones[i].Resources[j]; res.Name == kube.ResourceAliyunGPU {
					res.Name = r.opts.ResourceName
				}
			}
		}
	}
	r.mu.Lock()
	uid := r.uid
	r.mu.Unlock()
	if uid != "" {
		nrt.Metadata.OwnerReferences = []kube.NRTOwnerReference{{APIVersion: "v1", Kind: "Node", Name: r.opts.NodeName, UID: uid}}
	}
	return nrt, nil
}

// Run writes until ctx is done, then returns nil: once at start, then
// after every Notify (at most once per Interval) and every Resync, retrying
// failures with backoff.
func (r *Reporter) Run(ctx context.Context) error {
	dirty, annotated := true, false
	var next time.Time // no write before this
	backoff := time.Duration(0)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if now := time.Now(); dirty && !now.Before(next) {
			err := r.write(ctx, &annotated)
			now = time.Now()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				backoff = min(max(2*backoff, r.opts.MinBackoff), r.opts.MaxBackoff)
				next = now.Add(backoff)
				r.log.Error("cannot publish the node's topology; retrying", "in", backoff, "error", err)
			} else {
				dirty, backoff = false, 0
				next = now.Add(r.opts.Interval)
			}
		}
		wait := time.Until(next)
		if !dirty {
			wait = r.opts.Resync
		}
		if !dirty && r.opts.Resync < 0 {
			wait = time.Duration(1<<63 - 1)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return nil
		case <-r.kick:
			dirty = true
		case <-timer.C:
			if !dirty { // the resync
				dirty, annotated = true, false
			}
		}
	}
}

// write publishes the annotation (until it has been written once since the
// last resync) and the report.
func (r *Reporter) write(ctx context.Context, annotated *bool) error {
	fail := func(err error) error {
		r.mu.Lock()
		r.stats.Failures++
		r.stats.LastError = err.Error()
		r.mu.Unlock()
		return err
	}
	if !*annotated {
		ann, err := r.Annotations()
		if err != nil {
			return fail(err)
		}
		uid, err := r.w.Annotate(ctx, r.opts.NodeName, ann)
		if err != nil {
			return fail(fmt.Errorf("annotate node %s: %w", r.opts.NodeName, err))
		}
		r.mu.Lock()
		r.uid = uid
		r.mu.Unlock()
		*annotated = true
	}
	nrt, err := r.Report()
	if err != nil {
		return fail(err)
	}
	if err := r.w.ApplyNRT(ctx, nrt); err != nil {
		return fail(fmt.Errorf("write NodeResourceTopology %s: %w", nrt.Metadata.Name, err))
	}
	fp, _ := nrt.Attribute(kube.NRTAttributePodFingerprint)
	r.mu.Lock()
	r.stats.Writes++
	r.stats.LastError = ""
	r.stats.LastFingerprint = fp
	n := r.stats.Writes
	r.mu.Unlock()
	r.log.Debug("published the node's topology", "node", r.opts.NodeName, "write", n, "fingerprint", fp)
	return nil
}
