package sim

import (
	"fmt"
	"time"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// blindSetup is setups a and b: a NUMA-blind scheduler that sees node
// totals only, and on every node a kubelet whose Topology Manager runs
// policy (single-numa-node or best-effort) with the static CPU manager and
// the device manager.
type blindSetup struct {
	policy topologymanager.Policy
	cl     *cluster
	// free totals, shared with the engine (its usedCPUs and usedGPUs).
	usedCPUs, usedGPUs []int
	states             []*allocator.State // the kubelets' resource managers
	gpuHeld            []uint64           // held GPU IDs by node
	want               int                // feasible nodes to find per cycle
	next               int                // kube-scheduler's rotation
	opts               topologymanager.PredictOptions
}

func newBlindSetup(pol topologymanager.Policy, cl *cluster, e *engine, pct int) *blindSetup {
	n := len(cl.names)
	b := &blindSetup{policy: pol, cl: cl, usedCPUs: e.usedCPUs, usedGPUs: e.usedGPUs,
		states: make([]*allocator.State, n), gpuHeld: make([]uint64, n),
		want: numFeasibleToFind(n, pct),
		opts: topologymanager.PredictOptions{GPUResource: kube.ResourceAliyunGPU}}
	for i, mi := range cl.infos {
		b.states[i] = allocator.MustNew(mi.m, allocator.Options{}) // the cluster's machines are built and valid
	}
	return b
}

// fits is the scheduler's filter: the node's free CPUs and free GPUs
// cover the request (kube-scheduler's NodeResourcesFit).
func (b *blindSetup) fits(p *PodSpec, x int) (bool, error) {
	mi := b.cl.infos[x]
	return mi.gpus-b.usedGPUs[x] >= p.GPUs && mi.cpus-b.usedCPUs[x] >= p.CPUs, nil
}

// score is kube-scheduler's NodeResourcesFit MostAllocated score on CPU and
// GPUs (equal weights): the share of each in use after the placement, in
// integer percent, averaged.
func (b *blindSetup) score(p *PodSpec, x int) int {
	mi := b.cl.infos[x]
	c := (b.usedCPUs[x] + p.CPUs) * 100 / mi.cpus
	g := (b.usedGPUs[x] + p.GPUs) * 100 / mi.gpus
	return (c + g) / 2
}

// schedule is one NUMA-blind scheduling cycle: filter the nodes in
// rotation order until want are feasible, pick the best score (ties: the
// lowest node index), as kube-scheduler does with percentageOfNodesToScore.
func (b *blindSetup) schedule(p *PodSpec) int {
	n := len(b.cl.names)
	start := 0
	if b.want < n {
		start = b.next
	}
	best, bestScore, found, last := -1, -1, 0, -1
	for k := 0; k < n && found < b.want; k++ {
		x := (start + k) % n
		if ok, _ := b.fits(p, x); !ok {
			continue
		}
		found++
		last = k
		if s := b.score(p, x); s > bestScore || (s == bestScore && x < best) {
			best, bestScore = x, s
		}
	}
	if b.want < n && last >= 0 {
		b.next = (start + last + 1) % n
	}
	return best
}

func (b *blindSetup) attempt(p *PodSpec) (attemptResult, error) {
	t0 := time.Now()
	x := b.schedule(p)
	lat := time.Since(t0)
	if x < 0 {
		return attemptResult{outcome: unschedulable, latency: lat}, nil
	}
	mi := b.cl.infos[x]
	st := b.states[x]
	req := allocator.Request{CPUs: p.CPUs, GPUs: p.GPUs}
	hint, admit, err := topologymanager.Predict(b.policy, b.opts, mi.m, st, &req)
	if err != nil {
		return attemptResult{}, fmt.Errorf("kubelet %s on %s: %w", b.policy, b.cl.names[x], err)
	}
	if !admit {
		return attemptResult{outcome: refused, node: x, latency: lat}, nil
	}
	a, err := b.allocate(p, x, hint)
	if err != nil {
		return attemptResult{}, fmt.Errorf("kubelet %s on %s: %w", b.policy, b.cl.names[x], err)
	}
	shape := mi.shapeOf(a.CPUs, a.GPUs)
	if b.policy == topologymanager.PolicySingleNUMANode && shape.span().Count() != 1 {
		return attemptResult{}, fmt.Errorf("kubelet single-numa-node on %s admitted %s on NUMA nodes %v (hint %s)",
			b.cl.names[x], p.Name, a.NUMANodes(), hint)
	}
	return attemptResult{outcome: placed, node: x, shape: shape, latency: lat}, nil
}

// allocate takes the pod's CPUs and GPUs on node x as the kubelet's
// managers would for the merged hint and claims them in the node's state:
// GPUs on the hint's NUMA nodes first (ascending ID), then elsewhere; CPUs
// on the hint's nodes first (whole free cores, then threads), then
// elsewhere. A hint without affinity means every node.
func (b *blindSetup) allocate(p *PodSpec, x int, hint topologymanager.TopologyHint) (allocator.Allocation, error) {
	mi := b.cl.infos[x]
	st := b.states[x]
	all := mi.m.AllNodes()
	nodes := all
	if !hint.Any {
		d, err := hint.NUMANodeAffinity.Dense(mi.m)
		if err != nil {
			return allocator.Allocation{}, err
		}
		nodes = d
	}
	gpus := mi.pickGPUs(b.gpuHeld[x], nodes, p.GPUs, make([]int, 0, p.GPUs))
	if len(gpus) < p.GPUs {
		gpus = mi.pickGPUs(b.gpuHeld[x]|gpuMask(gpus), all.Difference(nodes), p.GPUs-len(gpus), gpus)
	}
	free := st.FreeCPUs()
	var cpus numa.CPUSet
	n := mi.pickCPUs(free, nodes, p.CPUs, &cpus)
	if n < p.CPUs {
		n += mi.pickCPUs(free, all.Difference(nodes), p.CPUs-n, &cpus)
	}
	if n < p.CPUs || len(gpus) < p.GPUs {
		return allocator.Allocation{}, fmt.Errorf("admitted %s but found only %d CPUs and %d GPUs free", p.Name, n, len(gpus))
	}
	a, err := st.Claim(allocator.Allocation{ID: p.Name, Policy: policy.None, CPUs: cpus, GPUs: gpus})
	if err != nil {
		return allocator.Allocation{}, err
	}
	b.gpuHeld[x] |= gpuMask(gpus)
	return a, nil
}

func (b *blindSetup) release(p *PodSpec, x int) error {
	a, ok := b.states[x].Get(p.Name)
	if !ok {
		return fmt.Errorf("pod %s is not on %s", p.Name, b.cl.names[x])
	}
	b.gpuHeld[x] &^= gpuMask(a.GPUs)
	return b.states[x].Release(p.Name)
}

func (b *blindSetup) verify(x int, running map[string]*PodSpec) error {
	mi := b.cl.infos[x]
	live := b.states[x].Live()
	view := make(map[string]held, len(live))
	for _, a := range live {
		view[a.ID] = held{cpus: a.CPUs, gpus: a.GPUs}
	}
	if err := checkView(mi, "kubelet", view, running, func(*PodSpec) bool { return true }); err != nil {
		return err
	}
	var g uint64
	for _, h := range view {
		g |= gpuMask(h.gpus)
	}
	if g != b.gpuHeld[x] {
		return fmt.Errorf("held GPUs %b, the state holds %b", b.gpuHeld[x], g)
	}
	if b.states[x].FreeCPUs().Size()+sumCPUs(view) != mi.cpus {
		return fmt.Errorf("free and held CPUs do not add up to the %d allocatable", mi.cpus)
	}
	if b.policy == topologymanager.PolicySingleNUMANode {
		for id, h := range view {
			if s := mi.shapeOf(h.cpus, h.gpus); s.span().Count() != 1 {
				return fmt.Errorf("pod %s spans NUMA nodes %v under single-numa-node", id, s.span())
			}
		}
	}
	return nil
}

// held is what one pod holds on a node, as one view of the node says.
type held struct {
	cpus numa.CPUSet
	gpus []int
}

func sumCPUs(view map[string]held) int {
	n := 0
	for _, h := range view {
		n += h.cpus.Size()
	}
	return n
}

// checkView checks one view of a node: the pods it holds are exactly the
// running ones that hold resources, each holds exactly its GPUs and, when
// exclusive says its CPUs are exclusive, its CPUs (else none), every CPU
// and GPU exists and is allocatable, and none is held twice.
func checkView(mi *machineInfo, name string, view map[string]held, running map[string]*PodSpec, exclusive func(*PodSpec) bool) error {
	var seenCPUs numa.CPUSet
	var seenGPUs uint64
	for id, h := range view {
		p, ok := running[id]
		if !ok {
			return fmt.Errorf("the %s holds %s, which is not running there", name, id)
		}
		if len(h.gpus) != p.GPUs {
			return fmt.Errorf("the %s gives %s %d GPUs, it asked for %d", name, id, len(h.gpus), p.GPUs)
		}
		want := 0
		if exclusive(p) {
			want = p.CPUs
		}
		if n := h.cpus.Size(); n != want {
			return fmt.Errorf("the %s gives %s %d exclusive CPUs, want %d", name, id, n, want)
		}
		for cpu := range h.cpus.All() {
			if cpu >= len(mi.cpuNode) || mi.cpuNode[cpu] < 0 {
				return fmt.Errorf("the %s gives %s CPU %d, which is not allocatable", name, id, cpu)
			}
		}
		if h.cpus.Intersects(seenCPUs) {
			return fmt.Errorf("the %s hands out CPUs %s twice (%s among them)", name, h.cpus.Intersection(seenCPUs), id)
		}
		seenCPUs.UnionWith(h.cpus)
		for _, g := range h.gpus {
			if g < 0 || g >= 64 || mi.gpuAll&(1<<uint(g)) == 0 {
				return fmt.Errorf("the %s gives %s GPU %d, which does not exist", name, id, g)
			}
			if seenGPUs&(1<<uint(g)) != 0 {
				return fmt.Errorf("the %s hands out GPU %d twice (%s among them)", name, g, id)
			}
			seenGPUs |= 1 << uint(g)
		}
	}
	for id, p := range running {
		if _, ok := view[id]; !ok && (p.GPUs > 0 || exclusive(p)) {
			return fmt.Errorf("%s runs on the node but the %s does not hold it", id, name)
		}
	}
	return nil
}
