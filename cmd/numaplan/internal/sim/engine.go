package sim

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/numaplace/numaplace/policy"
)

// outcome is what a scheduling attempt did with a pod.
type outcome uint8

const (
	placed        outcome = iota
	unschedulable         // no node fits
	refused               // the chosen node refused it at admission
)

// attemptResult is a scheduling attempt's answer.
type attemptResult struct {
	outcome outcome
	node    int
	// shape is where the placed pod's CPUs and GPUs sit.
	shape placementShape
	// latency is the wall time of the scheduling decision.
	latency time.Duration
}

// setupRunner is one setup's cluster.
type setupRunner interface {
	// attempt runs one scheduling cycle for the pod and, when a node is
	// chosen, the node's admission.
	attempt(p *PodSpec) (attemptResult, error)
	// release gives back what the placed pod holds on node.
	release(p *PodSpec, node int) error
	// fits is the setup's own filter for the pod on one node (the
	// queueing hint of a departure).
	fits(p *PodSpec, node int) (bool, error)
	// verify checks the node's invariants against the pods the engine
	// has placed there.
	verify(node int, running map[string]*PodSpec) error
}

// event kinds, in the order simultaneous events are processed.
const (
	evDeparture = iota
	evArrival
	evExpiry
)

type event struct {
	t    float64
	kind int
	pod  int
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.t != b.t {
		return a.t < b.t
	}
	if a.kind != b.kind {
		return a.kind < b.kind
	}
	return a.pod < b.pod
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// podStatus is where a pod of the trace is.
type podStatus uint8

const (
	notArrived podStatus = iota
	waiting
	running
	departed
	gaveUp
)

// shapeKey groups pods that every filter treats alike.
type shapeKey struct {
	gpus, cpus int
	spec       bool
	pol        policy.Policy
}

// shapeQueue is the waiting pods of one shape, in arrival order. Pods
// leave it from the head only: a retry takes the head, and with one
// patience for all, the head is also the first to expire.
type shapeQueue struct {
	key  shapeKey
	pods []int
	head int
	// infeasible is set when a scheduling cycle found no node for the
	// shape; it is cleared by a departure from a node the shape fits.
	// While it is set, arrivals of the shape wait without a cycle: no
	// placement can make a node feasible, only a departure can.
	infeasible bool
	// Per-departure scratch: stale when a placement on the departed node
	// came after the filter ran; tried when a cycle failed.
	stale, tried bool
}

func (q *shapeQueue) len() int { return len(q.pods) - q.head }

func (q *shapeQueue) push(i int) {
	if q.head > 0 && q.head == len(q.pods) {
		q.pods, q.head = q.pods[:0], 0
	}
	q.pods = append(q.pods, i)
}

func (q *shapeQueue) pop() {
	q.head++
	if q.head > 1024 && q.head*2 > len(q.pods) {
		q.pods = append(q.pods[:0], q.pods[q.head:]...)
		q.head = 0
	}
}

// engine plays a trace through one setup.
type engine struct {
	cfg    Config
	setup  Setup
	run    setupRunner
	cl     *cluster
	trace  []PodSpec
	end    float64
	status []podStatus
	node   []int32 // the node of a running pod
	// Node totals in use (the engine's own bookkeeping, a necessary
	// condition checked before the setups' filters).
	usedCPUs, usedGPUs []int
	gpusInUse          int
	queues             map[shapeKey]*shapeQueue
	order              []*shapeQueue // in order of first appearance
	cands              []*shapeQueue // retry scratch
	events             eventHeap
	clock              float64 // the current simulated time
	res                *Result
	nextSample         int
	lastProgress       time.Time
	started            time.Time
	arrived            int
	// running pods by node, kept only when verifying.
	onNode []map[string]*PodSpec
}

func newEngine(cfg Config, setup Setup, run setupRunner, cl *cluster, trace []PodSpec) *engine {
	e := &engine{cfg: cfg, setup: setup, run: run, cl: cl, trace: trace,
		status: make([]podStatus, len(trace)), node: make([]int32, len(trace)),
		usedCPUs: make([]int, len(cl.names)), usedGPUs: make([]int, len(cl.names)),
		queues: map[shapeKey]*shapeQueue{},
		res:    &Result{Setup: setup, Arrivals: len(trace), CrossNUMAByPolicy: map[string]int{}}}
	if len(trace) > 0 {
		e.end = trace[len(trace)-1].Arrival
	}
	if cfg.Verify {
		e.onNode = make([]map[string]*PodSpec, len(cl.names))
		for i := range e.onNode {
			e.onNode[i] = map[string]*PodSpec{}
		}
	}
	e.res.Series = make([]Sample, 0, cfg.Samples+1)
	return e
}

// sampleTime is the simulated time of sample k.
func (e *engine) sampleTime(k int) float64 { return e.end * float64(k) / float64(e.cfg.Samples) }

// sampleUpTo records the samples due before time t.
func (e *engine) sampleUpTo(t float64, inclusive bool) {
	for e.nextSample <= e.cfg.Samples {
		st := e.sampleTime(e.nextSample)
		if st > t || (!inclusive && st == t) {
			return
		}
		e.res.Series = append(e.res.Series, Sample{
			Hours:           st / 3600,
			GPUAllocation:   float64(e.gpusInUse) / float64(e.cl.gpus),
			AdmissionErrors: e.res.AdmissionErrors,
			CrossNUMA:       e.res.CrossNUMA,
			Waiting:         e.waitingCount(),
		})
		e.nextSample++
	}
}

func (e *engine) waitingCount() int {
	n := 0
	for _, q := range e.order {
		n += q.len()
	}
	return n
}

func (e *engine) queue(p *PodSpec) *shapeQueue {
	k := shapeKey{gpus: p.GPUs, cpus: p.CPUs, spec: p.NUMASpec, pol: p.Policy}
	q := e.queues[k]
	if q == nil {
		q = &shapeQueue{key: k}
		e.queues[k] = q
		e.order = append(e.order, q)
	}
	return q
}

// play runs the trace to its last arrival.
func (e *engine) play() (*Result, error) {
	e.started = time.Now()
	e.lastProgress = e.started
	if len(e.trace) > 0 {
		heap.Push(&e.events, event{t: e.trace[0].Arrival, kind: evArrival, pod: 0})
	}
	steps := 0
	for len(e.events) > 0 {
		ev := e.events[0]
		if ev.t > e.end {
			break
		}
		heap.Pop(&e.events)
		e.sampleUpTo(ev.t, false)
		e.clock = ev.t
		var err error
		switch ev.kind {
		case evArrival:
			err = e.arrival(ev.pod)
		case evDeparture:
			err = e.departure(ev.pod)
		case evExpiry:
			err = e.expiry(ev.pod)
		}
		if err != nil {
			return nil, err
		}
		steps++
		if steps&255 == 0 && e.cfg.Progress != nil && time.Since(e.lastProgress) >= e.cfg.ProgressEvery {
			e.progress(false)
		}
	}
	e.sampleUpTo(e.end, true)
	e.res.StillQueued = e.waitingCount()
	e.res.Wall = time.Since(e.started)
	e.res.summarise()
	if e.cfg.Progress != nil {
		e.progress(true)
	}
	return e.res, nil
}

func (e *engine) progress(done bool) {
	e.lastProgress = time.Now()
	el := time.Since(e.started)
	rate := float64(e.arrived) / max(el.Seconds(), 1e-9)
	what := "done"
	if !done {
		what = "running"
	}
	fmt.Fprintf(e.cfg.Progress, "simulate: %s: %s, %d/%d pods arrived (%.0f/s), %d placed, GPU allocation %.0f%%, %s\n",
		e.setup, what, e.arrived, len(e.trace), rate, e.res.Placed,
		100*float64(e.gpusInUse)/float64(e.cl.gpus), el.Round(time.Millisecond))
}

func (e *engine) arrival(i int) error {
	p := &e.trace[i]
	e.arrived++
	if i+1 < len(e.trace) {
		heap.Push(&e.events, event{t: e.trace[i+1].Arrival, kind: evArrival, pod: i + 1})
	}
	q := e.queue(p)
	if !q.infeasible {
		ok, err := e.try(i, q)
		if err != nil || ok {
			return err
		}
	}
	e.status[i] = waiting
	q.push(i)
	heap.Push(&e.events, event{t: p.Arrival + e.cfg.Patience.Seconds(), kind: evExpiry, pod: i})
	return nil
}

// try runs a scheduling attempt for pod i and records its outcome; it
// reports whether the pod was placed.
func (e *engine) try(i int, q *shapeQueue) (bool, error) {
	p := &e.trace[i]
	r, err := e.run.attempt(p)
	if err != nil {
		return false, fmt.Errorf("setup %s, pod %s: %w", e.setup.Letter(), p.Name, err)
	}
	e.res.latencies = append(e.res.latencies, r.latency)
	e.res.Attempts++
	switch r.outcome {
	case unschedulable:
		q.infeasible = true
		return false, nil
	case refused:
		e.res.AdmissionErrors++
		if !e.res.refusedPods[i] {
			if e.res.refusedPods == nil {
				e.res.refusedPods = map[int]bool{}
			}
			e.res.refusedPods[i] = true
			e.res.PodsRefused++
		}
		return false, nil
	}
	e.status[i] = running
	e.node[i] = int32(r.node)
	e.usedCPUs[r.node] += p.CPUs
	e.usedGPUs[r.node] += p.GPUs
	e.gpusInUse += p.GPUs
	e.res.Placed++
	if e.res.refusedPods[i] {
		e.res.PlacedAfterRefusal++
	}
	e.res.waitSum += e.clock - p.Arrival
	if r.shape.span().Count() > 1 {
		e.res.MultiNUMA++
	}
	if p.NUMASpec && e.cl.infos[r.node].crossNUMA(r.shape) {
		e.res.CrossNUMA++
		e.res.CrossNUMAByPolicy[p.Policy.String()]++
	}
	heap.Push(&e.events, event{t: e.clock + p.Duration, kind: evDeparture, pod: i})
	if e.onNode != nil {
		e.onNode[r.node][p.Name] = p
		if err := e.run.verify(r.node, e.onNode[r.node]); err != nil {
			return false, fmt.Errorf("setup %s, after placing %s on %s: %w", e.setup.Letter(), p.Name, e.cl.names[r.node], err)
		}
	}
	return true, nil
}

func (e *engine) departure(i int) error {
	p := &e.trace[i]
	x := int(e.node[i])
	if err := e.run.release(p, x); err != nil {
		return fmt.Errorf("setup %s, releasing pod %s: %w", e.setup.Letter(), p.Name, err)
	}
	e.status[i] = departed
	e.usedCPUs[x] -= p.CPUs
	e.usedGPUs[x] -= p.GPUs
	e.gpusInUse -= p.GPUs
	if e.onNode != nil {
		delete(e.onNode[x], p.Name)
		if err := e.run.verify(x, e.onNode[x]); err != nil {
			return fmt.Errorf("setup %s, after releasing %s from %s: %w", e.setup.Letter(), p.Name, e.cl.names[x], err)
		}
	}
	return e.retry(x)
}

// fitsTotals is the engine's necessary condition: node x's free totals
// cover the shape.
func (e *engine) fitsTotals(k shapeKey, x int) bool {
	mi := e.cl.infos[x]
	return mi.gpus-e.usedGPUs[x] >= k.gpus && mi.cpus-e.usedCPUs[x] >= k.cpus
}

// retry runs the scheduling cycles a departure from node x triggers (see
// the package documentation): waiting pods whose shape the setup's filter
// accepts on x, the oldest first, at most RetriesPerDeparture cycles; a
// shape whose cycle fails is not tried again in this departure.
func (e *engine) retry(x int) error {
	cands := e.cands[:0]
	for _, q := range e.order {
		q.tried, q.stale = false, false
		if q.len() == 0 {
			q.infeasible = false
			continue
		}
		if !e.fitsTotals(q.key, x) {
			continue
		}
		ok, err := e.run.fits(&e.trace[q.pods[q.head]], x)
		if err != nil {
			return err
		}
		if ok {
			q.infeasible = false
			cands = append(cands, q)
		}
	}
	e.cands = cands
	for cycles := 0; cycles < e.cfg.RetriesPerDeparture; {
		var q *shapeQueue
		for _, c := range cands {
			if !c.tried && c.len() > 0 && (q == nil || c.pods[c.head] < q.pods[q.head]) {
				q = c
			}
		}
		if q == nil {
			return nil
		}
		i := q.pods[q.head]
		if q.stale {
			// A placement on x since the filter ran: ask again.
			ok := e.fitsTotals(q.key, x)
			if ok {
				var err error
				if ok, err = e.run.fits(&e.trace[i], x); err != nil {
					return err
				}
			}
			q.stale = false
			if !ok {
				q.tried = true
				continue
			}
		}
		cycles++
		placed, err := e.try(i, q)
		if err != nil {
			return err
		}
		if !placed {
			q.tried = true
			continue
		}
		q.pop()
		if int(e.node[i]) == x {
			for _, c := range cands {
				c.stale = true
			}
		}
	}
	return nil
}

func (e *engine) expiry(i int) error {
	if e.status[i] != waiting {
		return nil
	}
	q := e.queue(&e.trace[i])
	if q.len() == 0 || q.pods[q.head] != i {
		// Pods leave their queue from the head and expire in arrival
		// order, so this is a bug of the engine.
		return fmt.Errorf("setup %s: pod %s expires but is not at the head of its queue", e.setup.Letter(), e.trace[i].Name)
	}
	q.pop()
	e.status[i] = gaveUp
	e.res.Unschedulable++
	return nil
}
