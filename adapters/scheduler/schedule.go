package scheduler

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
)

// Result is where ScheduleOne placed a pod.
type Result struct {
	// Node is the node the pod is reserved on.
	Node string
	// Annotations are PreBind's: write them on the pod before binding it.
	Annotations map[string]string
	// Score is the node's score (0-100).
	Score int
	// Feasible is the number of feasible nodes found, Evaluated the number
	// of nodes filtered (fewer than all with PercentageOfNodesToScore).
	Feasible, Evaluated int
}

// ReasonCount is how many nodes refused a pod for one reason.
type ReasonCount struct {
	// Reason is a FilterError reason, such as "fewer than 24 free CPUs now".
	Reason string
	// Nodes is how many nodes gave the reason.
	Nodes int
}

// FitError says that no node can take a pod, in kube-scheduler's form:
// "0/5000 nodes are available: 3120 no NUMA node has 4 free GPUs now, 1880
// fewer than 24 free CPUs now." It unwraps to [ErrUnschedulable].
type FitError struct {
	// Pod is the pod's "namespace/name".
	Pod string
	// NumNodes is the number of nodes in the cache when the pod was
	// scheduled (the "5000" of "0/5000 nodes are available"); 0 when the
	// cache had none.
	NumNodes int
	// Reasons counts the nodes by reason, most nodes first, then by text. A
	// node refusing for several reasons (several short resources) counts
	// under each.
	Reasons []ReasonCount

	c  *Cache
	pr *podReq
}

// Node returns the named node's refusal with its details, as Filter gives
// it now (the cluster may have changed since the error was made), or nil
// when the node takes the pod now. Building every node's details for
// thousands of nodes on each failed cycle would cost more than the search.
func (e *FitError) Node(name string) *FilterError {
	if e == nil || e.c == nil || e.pr == nil {
		return nil
	}
	ni, err := e.c.node(name)
	if err != nil {
		return &FilterError{Pod: e.Pod, Node: name, Err: err, Reasons: []string{err.Error()}, Detail: err.Error()}
	}
	if v := e.c.evaluate(ni, e.pr, false, nil); v.why != fits {
		return e.c.refusalError(ni.name, e.pr, v)
	}
	return nil
}

// Error implements error.
func (e *FitError) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.NumNodes == 0 {
		return "0/0 nodes are available: the cache has no node."
	}
	parts := make([]string, len(e.Reasons))
	for i, r := range e.Reasons {
		parts[i] = fmt.Sprintf("%d %s", r.Nodes, r.Reason)
	}
	return fmt.Sprintf("0/%d nodes are available: %s.", e.NumNodes, strings.Join(parts, ", "))
}

// Unwrap returns [ErrUnschedulable].
func (e *FitError) Unwrap() error { return ErrUnschedulable }

// minFeasibleNodesToFind is kube-scheduler's: a partial search still finds
// at least this many feasible nodes.
const minFeasibleNodesToFind = 100

// numFeasibleToFind is kube-scheduler's numFeasibleNodesToFind for a fixed
// percentage.
func (c *Cache) numFeasibleToFind(n int) int {
	pct := c.cfg.PercentageOfNodesToScore
	if n < minFeasibleNodesToFind || pct >= 100 {
		return n
	}
	k := n * pct / 100
	return max(k, minFeasibleNodesToFind)
}

// ScheduleOne places a pod: it filters every node (or, with
// PercentageOfNodesToScore, nodes until enough are feasible) and scores the
// feasible ones, in parallel on Config.Parallelism workers; reserves the
// pod on the best (the highest score, ties broken by the lowest node name);
// and returns the node with PreBind's annotations. If a concurrent change
// made the best node refuse the reservation, the next best is tried.
//
// When no node fits, the error is a *[FitError] counting the nodes by
// reason. An invalid pod returns its *kube.PodError; a pod already placed,
// an error wrapping [ErrPodPlaced].
//
// With PercentageOfNodesToScore below 100 the search starts where the
// previous one stopped (kube-scheduler's rotation) and keeps the first
// feasible nodes in that order, so the answer does not depend on how the
// workers interleave.
func (c *Cache) ScheduleOne(p *kube.Pod) (Result, error) {
	if p == nil {
		return Result{}, fmt.Errorf("%w: no pod (nil)", kube.ErrInvalidPod)
	}
	pr, err := c.parse(p)
	if err != nil {
		return Result{}, err
	}
	c.podsMu.Lock()
	old, placed := c.pods[pr.key]
	c.podsMu.Unlock()
	if placed {
		return Result{}, fmt.Errorf("%w: %s is on node %s", ErrPodPlaced, pr.key, old.node.name)
	}
	c.classify(pr)
	nodes := c.sortedNodes()
	n := len(nodes)
	if n == 0 {
		return Result{}, &FitError{Pod: pr.key}
	}
	want := c.numFeasibleToFind(n)
	start := 0
	if want < n {
		start = int(c.nextStart.Load() % int64(n))
	}
	vs := c.getResults(n)
	defer c.putResults(vs)
	done := c.filterAll(nodes, pr, start, want, *vs)

	// The first want feasible nodes in rotation order, the best of them.
	feasible, last := 0, -1
	res := (*vs)[:done]
	for i := range res {
		if res[i].why == fits {
			if feasible == want {
				break
			}
			feasible++
			last = i
		}
	}
	if want < n && last >= 0 {
		c.nextStart.Store(int64((start + last + 1) % n))
	}
	if feasible == 0 {
		return Result{}, c.fitError(nodes, pr, start, *vs)
	}
	considered := (*vs)[:last+1]
	for {
		best, bestJ, bestScore := -1, 0, int32(math.MinInt32)
		for i := range considered {
			v := &considered[i]
			if v.why != fits || v.score < bestScore {
				continue
			}
			j := start + i // the node's index, (start+i) mod n
			if j >= n {
				j -= n
			}
			if v.score > bestScore || j < bestJ {
				best, bestJ, bestScore = i, j, v.score
			}
		}
		if best < 0 {
			// Every feasible node refused the reservation meanwhile.
			return Result{}, c.fitError(nodes, pr, start, *vs)
		}
		ni := nodes[bestJ]
		v, err := c.reserve(ni, pr, p.Priority, nil)
		if err != nil {
			return Result{}, err
		}
		if v.why != fits {
			considered[best] = v
			continue
		}
		c.podsMu.Lock()
		pi := c.pods[pr.key]
		c.podsMu.Unlock()
		if pi == nil || pi.node != ni {
			return Result{}, fmt.Errorf("%w: %s was removed or moved while being scheduled", ErrPodPlaced, pr.key)
		}
		ann, err := c.annotations(pi)
		if errors.Is(err, allocator.ErrUnknownID) { // dropped meanwhile (a machine change, RemovePod)
			return Result{}, fmt.Errorf("%w: %s was removed or moved while being scheduled", ErrPodPlaced, pr.key)
		}
		if err != nil {
			return Result{}, err
		}
		return Result{Node: ni.name, Annotations: ann, Score: int(bestScore), Feasible: feasible, Evaluated: done}, nil
	}
}

// filterAll evaluates the nodes in rotation order from start into vs
// (vs[i] is node (start+i) mod n) on the configured workers, each taking
// chunks in order; it stops handing out chunks once want nodes are
// feasible. Every chunk handed out is finished, so the nodes evaluated are
// a prefix of the rotation; it returns its length.
func (c *Cache) filterAll(nodes []*nodeInfo, pr *podReq, start, want int, vs []verdict) int {
	n := len(nodes)
	workers := min(c.cfg.Parallelism, n)
	chunk := max(1, int(math.Sqrt(float64(n))))
	if want >= n {
		// No early stop: fewer, larger chunks cost less coordination.
		chunk = max(chunk, (n+workers*4-1)/(workers*4))
	}
	if workers <= 1 {
		f := filtering{c: c, nodes: nodes, pr: pr, start: start, want: int64(want), chunk: chunk, vs: vs}
		f.work()
		return int(f.doneTo.Load())
	}
	f := &filtering{c: c, nodes: nodes, pr: pr, start: start, want: int64(want), chunk: chunk, vs: vs}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(f.work)
	}
	f.work()
	wg.Wait()
	return int(f.doneTo.Load())
}

// filtering is one filterAll: its inputs and the workers' shared counters.
type filtering struct {
	c           *Cache
	nodes       []*nodeInfo
	pr          *podReq
	start       int
	want        int64
	chunk       int
	vs          []verdict
	next, found atomic.Int64 // the next chunk's start, the feasible nodes found
	doneTo      atomic.Int64 // the end of the prefix of finished chunks
}

// work is one worker of f: it evaluates chunks until none is left or want
// nodes are feasible.
func (f *filtering) work() {
	var memo classMemo
	n, chunk := len(f.nodes), f.chunk
	for f.found.Load() < f.want {
		lo := int(f.next.Add(int64(chunk))) - chunk
		if lo >= n {
			return
		}
		hi := min(lo+chunk, n)
		k := 0
		j := f.start + lo // the node's index, (start+i) mod n
		if j >= n {
			j -= n
		}
		for i := lo; i < hi; i++ {
			v := &f.vs[i]
			if kept := f.nodes[j].kept(f.pr.class); kept != nil { // evaluateGrouped, inlined
				*v = kept.v
			} else {
				f.c.evaluateAlone(f.nodes[j], f.pr, &memo, false, v)
			}
			if v.why == fits {
				k++
			}
			if j++; j == n {
				j = 0
			}
		}
		f.found.Add(int64(k))
		for {
			cur := f.doneTo.Load()
			if int64(hi) <= cur || f.doneTo.CompareAndSwap(cur, int64(hi)) {
				break
			}
		}
	}
}

func (c *Cache) getResults(n int) *[]verdict {
	if p, ok := c.results.Get().(*[]verdict); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]verdict, n)
	return &s
}

func (c *Cache) putResults(p *[]verdict) {
	clear(*p) // drop the errors
	c.results.Put(p)
}

// fitError counts the refusals by reason.
func (c *Cache) fitError(nodes []*nodeInfo, pr *podReq, start int, vs []verdict) *FitError {
	n := len(nodes)
	e := &FitError{Pod: pr.key, NumNodes: n, c: c, pr: pr}
	counts := map[string]int{}
	// Nodes refusing in the same way give the same reasons: build them once
	// per kind of refusal, not once per node. Nodes of one group (or one
	// machine class) refuse with the very same verdict, so the verdict is
	// looked up first, then what its reasons depend on.
	type tally struct {
		reasons []string
		nodes   int
	}
	same := map[verdictKey]*tally{}
	memo := map[reasonKey]*tally{}
	// The last few verdicts met (nodes of a few kinds alternate).
	var recent [4]struct {
		key verdictKey
		t   *tally
	}
	next := 0
scan:
	for i := range vs {
		if vs[i].why == fits {
			continue // taken meanwhile by a concurrent reservation: not a refusal of this filter
		}
		vk, fast := verdictKeyOf(&vs[i])
		if fast {
			for j := range recent {
				if recent[j].t != nil && recent[j].key == vk {
					recent[j].t.nodes++
					continue scan
				}
			}
		}
		t := same[vk]
		if !fast || t == nil {
			key, ok := keyOf(&vs[i])
			if t = memo[key]; !ok || t == nil {
				t = &tally{reasons: c.refusalError(nodes[(start+i)%n].name, pr, vs[i]).Reasons}
				if ok {
					memo[key] = t
				}
				if !ok { // reasons of their own: counted at once
					for _, r := range t.reasons {
						counts[r]++
					}
					continue
				}
			}
			if fast {
				same[vk] = t
			}
		}
		t.nodes++
		if fast {
			recent[next].key, recent[next].t = vk, t
			next = (next + 1) % len(recent)
		}
	}
	for _, t := range memo {
		for _, r := range t.reasons {
			counts[r] += t.nodes
		}
	}
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		e.Reasons = append(e.Reasons, ReasonCount{Reason: r, Nodes: counts[r]})
	}
	slices.SortStableFunc(e.Reasons, func(a, b ReasonCount) int { return cmp.Compare(b.Nodes, a.Nodes) })
	return e
}

// verdictKey is a verdict whose error is none or a placement error, by
// identity: equal keys are equal verdicts as far as their reasons go.
type verdictKey struct {
	why     why
	kubelet bool
	short   uint8
	never   bool
	nshort  uint8
	pe      *allocator.PlacementError
}

// verdictKeyOf returns v's verdict key, or false when its error is of
// another kind.
func verdictKeyOf(v *verdict) (verdictKey, bool) {
	k := verdictKey{why: v.why, kubelet: v.kubelet, short: v.short, never: v.never, nshort: v.neverShort}
	if v.err == nil {
		return k, true
	}
	var pe *allocator.PlacementError
	ok := errors.As(v.err, &pe) // a Fit refusal explains itself here (allocator's refusal)
	k.pe = pe
	return k, ok
}

// reasonKey is what a refusal's reasons depend on.
type reasonKey struct {
	why     why
	kubelet bool
	short   uint8
	never   bool
	nshort  uint8
	cat     error
	width   int
	inSet   bool
	shortK  string
}

// keyOf returns v's reason key, or false when its reasons are not
// determined by one (an error of another kind than a PlacementError).
func keyOf(v *verdict) (reasonKey, bool) {
	k := reasonKey{why: v.why, kubelet: v.kubelet, short: v.short, never: v.never, nshort: v.neverShort}
	if v.why != allocRefused {
		return k, true
	}
	var pe *allocator.PlacementError
	if !errors.As(v.err, &pe) {
		return k, false
	}
	k.cat, k.width, k.inSet = errors.Unwrap(pe), pe.Width, pe.InSet
	for _, s := range pe.Short {
		k.shortK += s.Resource + "=" + strconv.FormatInt(s.Need, 10) + ";"
	}
	return k, true
}
