package reporter_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/reporter"
	"github.com/numaplace/numaplace/topology"
)

// fakeWriter records the writes; fail makes the next calls fail, block
// holds them until released.
type fakeWriter struct {
	mu        sync.Mutex
	annotated []map[string]string
	reports   []*kube.NodeResourceTopology
	times     []time.Time
	failures  []time.Time
	fail      int
	block     chan struct{}
}

func (w *fakeWriter) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail > 0 {
		w.fail--
		w.failures = append(w.failures, time.Now())
		return errors.New("the API server is away")
	}
	return nil
}

func (w *fakeWriter) Annotate(ctx context.Context, node string, ann map[string]string) (string, error) {
	if err := w.err(); err != nil {
		return "", err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.annotated = append(w.annotated, ann)
	return "uid-" + node, nil
}

func (w *fakeWriter) ApplyNRT(ctx context.Context, r *kube.NodeResourceTopology) error {
	if b := w.block; b != nil {
		select {
		case <-b:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := w.err(); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reports = append(w.reports, r)
	w.times = append(w.times, time.Now())
	return nil
}

func (w *fakeWriter) snapshot() ([]*kube.NodeResourceTopology, []time.Time, []time.Time, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*kube.NodeResourceTopology(nil), w.reports...), append([]time.Time(nil), w.times...),
		append([]time.Time(nil), w.failures...), len(w.annotated)
}

func node(t *testing.T) *kubelet.Node {
	t.Helper()
	m, err := topology.ParseJSON([]byte(`{"name":"r","numaNodes":[{"id":0,"socket":0,"cpus":"0-3","memoryMiB":1024},
		{"id":1,"socket":1,"cpus":"4-7","memoryMiB":1024}],"gpus":[{"id":0,"numaNode":0},{"id":1,"numaNode":1}]}`))
	require.NoError(t, err)
	n, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	require.NoError(t, err)
	return n
}

func sharedPod(name string) *kube.Pod {
	return &kube.Pod{Namespace: "default", Name: name, Containers: []kube.Container{{Name: "c",
		Requests: map[string]string{"cpu": "1"}}}}
}

func run(t *testing.T, r *reporter.Reporter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, msg)
}

func TestReporterCoalescesBursts(t *testing.T) {
	n := node(t)
	w := &fakeWriter{}
	const interval = 50 * time.Millisecond
	r, err := reporter.New(n, w, reporter.Options{NodeName: "n1", Interval: interval, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	run(t, r)
	eventually(t, func() bool { rs, _, _, _ := w.snapshot(); return len(rs) == 1 }, "the first write")

	// A burst of 200 changes.
	var want kube.PodFingerprint
	for i := range 200 {
		pod := sharedPod("p" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		_, err := n.Admit(pod)
		require.NoError(t, err)
		want.Add(pod.Namespace, pod.Name)
		r.Notify()
	}
	eventually(t, func() bool { return r.Stats().LastFingerprint == want.Sign() }, "the last state written")
	reports, times, _, annotations := w.snapshot()
	require.Equal(t, 1, annotations, "the annotation is written once")
	// Writes are at least an interval apart, so a burst of 200 changes is
	// far fewer writes.
	for i := 1; i < len(times); i++ {
		require.GreaterOrEqual(t, times[i].Sub(times[i-1]), interval, "writes %d and %d", i-1, i)
	}
	require.Less(t, len(reports), 200)
	last := reports[len(reports)-1]
	require.Equal(t, "n1", last.Metadata.Name)
	require.Equal(t, []kube.NRTOwnerReference{{APIVersion: "v1", Kind: "Node", Name: "n1", UID: "uid-n1"}}, last.Metadata.OwnerReferences)
	require.Equal(t, want.Sign(), last.Metadata.Annotations[kube.AnnotationPodFingerprint])
}

func TestReporterRetriesWithBackoff(t *testing.T) {
	n := node(t)
	w := &fakeWriter{fail: 4}
	const minBackoff = 20 * time.Millisecond
	r, err := reporter.New(n, w, reporter.Options{NodeName: "n1", Interval: time.Millisecond, MinBackoff: minBackoff,
		MaxBackoff: 80 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	run(t, r)
	eventually(t, func() bool { return r.Stats().Writes == 1 }, "a write after the failures")
	_, _, failures, annotations := w.snapshot()
	require.Len(t, failures, 4)
	require.Equal(t, 1, annotations)
	// 20, 40, 80, 80 ms between attempts: doubling up to the maximum.
	for i, want := range []time.Duration{minBackoff, 2 * minBackoff, 4 * minBackoff} {
		require.GreaterOrEqual(t, failures[i+1].Sub(failures[i]), want, "wait after failure %d", i)
	}
	st := r.Stats()
	require.Equal(t, 4, st.Failures)
	require.Empty(t, st.LastError)
}

func TestReporterNeverBlocksTheCaller(t *testing.T) {
	n := node(t)
	w := &fakeWriter{block: make(chan struct{})}
	r, err := reporter.New(n, w, reporter.Options{NodeName: "n1", Interval: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	run(t, r)
	// The API server hangs; changes keep coming and Notify returns.
	done := make(chan struct{})
	go func() {
		for range 10000 {
			r.Notify()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Notify blocked while the writer hung")
	}
	close(w.block)
	eventually(t, func() bool { rs, _, _, _ := w.snapshot(); return len(rs) >= 2 }, "the writes after the API server came back")
}

func TestReporterResourceNameAndErrors(t *testing.T) {
	n := node(t)
	_, err := reporter.New(n, &fakeWriter{}, reporter.Options{})
	require.ErrorContains(t, err, "no node name")
	_, err = reporter.New(nil, &fakeWriter{}, reporter.Options{NodeName: "x"})
	require.Error(t, err)

	r, err := reporter.New(n, &fakeWriter{}, reporter.Options{NodeName: "n1", ResourceName: "example.com/gpu"})
	require.NoError(t, err)
	rep, err := r.Report()
	require.NoError(t, err)
	for _, z := range rep.Zones {
		_, ok := z.Resource("example.com/gpu")
		require.True(t, ok, z.Name)
		_, ok = z.Resource(kube.ResourceAliyunGPU)
		require.False(t, ok, z.Name)
	}
	ann, err := r.Annotations()
	require.NoError(t, err)
	back, err := topology.ParseJSON([]byte(ann[kube.AnnotationTopology]))
	require.NoError(t, err)
	require.Equal(t, n.Machine().NumCPUs(), back.NumCPUs())
	require.Equal(t, n.Machine().GPUs(), back.GPUs())
}
