package allocator_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// hugepages is a resource kind the engine has never seen, written against
// the exported API only: 1 GiB hugepages, a number of pages per NUMA node.
// Requests ask for it in Request.Amounts["hugepages-1Gi"], allocations
// hold it in Allocation.Amounts["hugepages-1Gi"] (pages per NUMA node ID).
type hugepages struct {
	m          *topology.Machine
	capa, free []int64 // pages by dense node index
}

const hugepagesKind = "hugepages-1Gi"

var _ allocator.Resource = (*hugepages)(nil)

// newHugepages gives every NUMA node of m perNode free pages.
func newHugepages(m *topology.Machine, perNode int64) *hugepages {
	h := &hugepages{m: m, capa: make([]int64, m.NumNodes())}
	for i := range h.capa {
		h.capa[i] = perNode
	}
	h.free = slices.Clone(h.capa)
	return h
}

func (h *hugepages) Kind() string                                  { return hugepagesKind }
func (h *hugepages) Demand(r *allocator.Request) int64             { return r.Amount(hugepagesKind) }
func (h *hugepages) Capacity(_ *allocator.Request, node int) int64 { return h.capa[node] }
func (h *hugepages) Free(_ *allocator.Request, node int) int64     { return h.free[node] }
func (h *hugepages) Unplaced(*allocator.Request) int64             { return 0 }

func (h *hugepages) Describe(_ *allocator.Request, units int64) string {
	if units == 1 {
		return "1 hugepage of 1 GiB"
	}
	return strconv.FormatInt(units, 10) + " hugepages of 1 GiB"
}

// Take takes the pages the engine decided, node by node.
func (h *hugepages) Take(_ *allocator.Request, amounts []int64, _ int64, a *allocator.Allocation) {
	var held []allocator.NodeUnits
	for i, k := range amounts {
		if k > 0 {
			h.free[i] -= k
			held = append(held, allocator.NodeUnits{Node: h.m.NodeID(i), Units: k})
		}
	}
	if held != nil {
		if a.Amounts == nil {
			a.Amounts = map[string][]allocator.NodeUnits{}
		}
		a.Amounts[hugepagesKind] = held
	}
}

// Give returns the pages a holds.
func (h *hugepages) Give(a *allocator.Allocation) {
	for _, u := range a.Amounts[hugepagesKind] {
		if i, ok := h.m.NodeIndex(u.Node); ok {
			h.free[i] += u.Units
		}
	}
}

// Claim takes exactly the pages a names, or changes nothing.
func (h *hugepages) Claim(a *allocator.Allocation) error {
	want := make([]int64, len(h.free))
	for _, u := range a.Amounts[hugepagesKind] {
		i, ok := h.m.NodeIndex(u.Node)
		if !ok {
			return fmt.Errorf("%w: no NUMA node %d for %s", allocator.ErrConflict, u.Node, hugepagesKind)
		}
		want[i] += u.Units
		if u.Units < 0 || want[i] > h.free[i] {
			return fmt.Errorf("%w: NUMA node %d has %d free %s, not %d", allocator.ErrConflict, u.Node, h.free[i], hugepagesKind, want[i])
		}
	}
	for i, k := range want {
		h.free[i] -= k
	}
	return nil
}

// Nodes returns the nodes of a's pages.
func (h *hugepages) Nodes(a *allocator.Allocation) numa.Mask {
	var m numa.Mask
	for _, u := range a.Amounts[hugepagesKind] {
		if i, ok := h.m.NodeIndex(u.Node); ok && u.Units > 0 {
			m = m.With(i)
		}
	}
	return m
}

func (h *hugepages) Clone() allocator.Resource {
	c := *h
	c.free = slices.Clone(h.free)
	return &c
}

// pages prints the free pages of every node.
func pages(s *allocator.State) string {
	var parts []string
	for i := range s.Machine().NumNodes() {
		parts = append(parts, fmt.Sprintf("node %d: %d", s.Machine().NodeID(i), s.NodeFree(i)[hugepagesKind]))
	}
	return strings.Join(parts, ", ")
}

// A kind of the caller's own, 1 GiB hugepages per NUMA node, through
// Allocate, Resize, Snapshot and Restore, Release, and the scheduler
// adapter: Options.NewResources makes it for each machine, Request.Amounts
// asks for it, Allocation.Amounts holds it.
func ExampleOptions_hugepages() {
	m, _ := topology.Preset("dgx-h100")
	opts := allocator.Options{NewResources: func(m *topology.Machine) ([]allocator.Resource, error) {
		return []allocator.Resource{newHugepages(m, 16)}, nil
	}}
	s := allocator.MustNew(m, opts)

	db := allocator.Request{ID: "db", CPUs: 8, Amounts: map[string]int64{hugepagesKind: 12}}
	a, _ := s.Allocate(&db)
	fmt.Println(a)
	a, _ = s.Resize("db", 16)
	fmt.Println("resized:", a.CPUs.Size(), "CPUs,", a.Units(hugepagesKind), "pages")

	// Only 4 pages are left on node 0: 12 more pages on one node go to node 1.
	big := allocator.Request{ID: "big", CPUs: 4, GPUs: 1, Amounts: map[string]int64{hugepagesKind: 12}}
	a, _ = s.Allocate(&big)
	fmt.Println(a)
	fmt.Println("free:", pages(s))
	// 6 pages are free in all, but on no one node.
	var pe *allocator.PlacementError
	err := s.Fit(&allocator.Request{CPUs: 1, Amounts: map[string]int64{hugepagesKind: 6}, Policy: policy.SingleNUMANode})
	fmt.Println(errors.Is(err, allocator.ErrNoNUMAFit), errors.As(err, &pe) && pe.Never)

	// A restart: the snapshot carries the pages, a fresh state takes them.
	restarted := allocator.MustNew(m, opts)
	fmt.Println("restore:", restarted.Restore(s.Snapshot()), "free:", pages(restarted))
	_ = restarted.Release("db")
	fmt.Println("released db:", pages(restarted))

	// The scheduler adapter: NewResources makes the kind for every node,
	// Amounts reads a pod's pages (here from its hugepages-1Gi requests).
	c, _ := scheduler.New(scheduler.Config{Allocator: opts,
		Amounts: func(p *kube.Pod) (map[string]int64, error) {
			var n int64
			for _, ct := range p.Containers {
				if q, ok := ct.Requests[hugepagesKind]; ok {
					gi, err := strconv.ParseInt(strings.TrimSuffix(q, "Gi"), 10, 64)
					if err != nil {
						return nil, fmt.Errorf("%s %q is not a whole number of Gi", hugepagesKind, q)
					}
					n += gi
				}
			}
			return map[string]int64{hugepagesKind: n}, nil
		}})
	_ = c.AddNode(scheduler.Node{Name: "gpu-1", Machine: m, Labels: map[string]string{"ack.node.gpu.schedule": "topology"}})
	pod := func(name, gi string) *kube.Pod {
		res := map[string]string{"cpu": "4", hugepagesKind: gi}
		return &kube.Pod{Namespace: "default", Name: name,
			Annotations: map[string]string{kube.AnnotationSpecAlibaba: `{"numaTopologyPolicy":"SingleNUMANode"}`,
				kube.AnnotationCPUSetScheduler: "required"},
			Containers: []kube.Container{{Name: "c", Requests: res, Limits: res}}}
	}
	for _, p := range []*kube.Pod{pod("p0", "12Gi"), pod("p1", "12Gi"), pod("p2", "12Gi")} {
		if err := c.Reserve(p, "gpu-1"); err != nil {
			fmt.Println(p.Name, err)
			continue
		}
		st, _ := c.Pod(p.Key())
		fmt.Println(p.Name, st.Allocation.Amounts[hugepagesKind])
	}
	// Output:
	// "db" cpus 0-3,112-115 gpus [] nodes [0] hugepages-1Gi 12 on node 0
	// resized: 16 CPUs, 12 pages
	// "big" cpus 56-57,168-169 gpus [4] nodes [1] hugepages-1Gi 12 on node 1
	// free: node 0: 4, node 1: 4
	// true false
	// restore: <nil> free: node 0: 4, node 1: 4
	// released db: node 0: 16, node 1: 4
	// p0 [{0 12}]
	// p1 [{1 12}]
	// p2 pod default/p2 does not fit on node gpu-1: not enough free on the whole machine now: 12 hugepages of 1 GiB wanted, 8 hugepages of 1 GiB free (32 hugepages of 1 GiB in all)
}
