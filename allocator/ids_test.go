package allocator_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// changedMachine draws another description of m: every NUMA node kept
// with its ID, renumbered to another (sparse) ID, or dropped with its CPUs
// and cores; nodes added with new IDs and new CPUs; memory per node
// changed; GPUs and devices kept on their node's new ID, moved to another
// node, of unknown node or dropped; reserved CPUs kept where they still
// exist. Distances, NUMA sets and NVLinks are the defaults.
func changedMachine(t *rapid.T, m *topology.Machine) *topology.Machine {
	b := topology.NewBuilder("changed")
	used := map[numa.NodeID]bool{}
	newID := map[numa.NodeID]numa.NodeID{} // old ID -> new ID; absent: dropped
	var kept []numa.NodeID                 // new IDs
	socket := map[numa.NodeID]int{}
	var cpus numa.CPUSet
	// Renumbered IDs must not take an ID a kept node still has.
	fate := make([]int, m.NumNodes())
	for i := range m.NumNodes() {
		fate[i] = rapid.SampledFrom([]int{0, 0, 1, 2}).Draw(t, fmt.Sprintf("fate%d", m.NodeID(i))) // 0 keep, 1 renumber, 2 drop
		if fate[i] == 0 {
			used[m.NodeID(i)] = true
		}
	}
	freshID := func(label string) numa.NodeID {
		for {
			id := numa.NodeID(rapid.IntRange(0, 120).Draw(t, label))
			if !used[id] {
				used[id] = true
				return id
			}
		}
	}
	for i, n := range m.Nodes() {
		var id numa.NodeID
		switch fate[i] {
		case 0:
			id = n.ID
		case 1:
			id = freshID(fmt.Sprintf("renumber%d", n.ID))
		default:
			continue
		}
		newID[n.ID] = id
		kept = append(kept, id)
		socket[id] = n.Socket
		mem := n.MemoryMiB
		if rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("changeMem%d", n.ID)) == 0 {
			mem = rapid.Int64Range(0, 4096).Draw(t, fmt.Sprintf("mem%d", n.ID))
		}
		b.AddNode(topology.Node{ID: id, Socket: n.Socket, CPUs: n.CPUs, MemoryMiB: mem})
		cpus.UnionWith(n.CPUs)
	}
	next := max(m.CPUs().Max(), 0) + 1
	for k := range rapid.IntRange(0, 2).Draw(t, "extraNodes") {
		id := freshID(fmt.Sprintf("extra%d", k))
		c := rapid.IntRange(0, 4).Draw(t, fmt.Sprintf("extraCPUs%d", k))
		var set numa.CPUSet
		if c > 0 {
			set = numa.CPURange(next, next+c-1)
		}
		next += c
		s := m.Node(0).Socket
		b.AddNode(topology.Node{ID: id, Socket: s, CPUs: set,
			MemoryMiB: rapid.Int64Range(0, 4096).Draw(t, fmt.Sprintf("extraMem%d", k))})
		kept = append(kept, id)
		socket[id] = s
	}
	if len(kept) == 0 {
		t.Skip("every node dropped")
	}
	for _, c := range m.Cores() {
		if c.CPUs.Size() > 1 && c.CPUs.IsSubsetOf(cpus) {
			b.AddCore(c.CPUs)
		}
	}
	// A device goes with its node, to another kept node, to an unknown node
	// or away.
	where := func(label string, old numa.NodeID) (numa.NodeID, bool) {
		switch rapid.SampledFrom([]int{0, 0, 0, 1, 2, 3}).Draw(t, label) {
		case 0:
			id, ok := newID[old]
			if old == topology.UnknownNode {
				return topology.UnknownNode, true
			}
			return id, ok
		case 1:
			return rapid.SampledFrom(kept).Draw(t, label+"To"), true
		case 2:
			return topology.UnknownNode, true
		}
		return 0, false
	}
	for _, g := range m.GPUs() {
		if node, ok := where(fmt.Sprintf("gpu%d", g.ID), g.NUMANode); ok {
			g.NUMANode = node
			b.AddGPU(g)
		}
	}
	for _, d := range m.Devices() {
		if node, ok := where("dev"+d.ID, d.NUMANode); ok {
			d.NUMANode = node
			b.AddDevice(d)
		}
	}
	b.SetReservedCPUs(m.ReservedCPUs().Intersection(cpus))
	out, err := b.Build()
	if err != nil {
		t.Skipf("the changed machine is not valid: %v", err)
	}
	return out
}

// holding is what an allocation holds, by ID: its CPUs, GPUs, devices and
// memory per NUMA node ID.
func holding(a allocator.Allocation) string {
	c := a.Clone()
	return fmt.Sprintf("%s/%s full=%t cpus %s gpus %v devices %v memory %v", c.Policy, c.Exclusive, c.FullPCPUs,
		c.CPUs, c.GPUs, c.Devices, c.Memory)
}

// claimFails says why a claim of a on m fails, given the memory memUsed
// already claimed per node ID, in the order the engine checks (CPUs, GPUs,
// devices, memory): "" when it succeeds; "node <id>" when its memory is on
// a node m does not have.
func claimFails(m *topology.Machine, a allocator.Allocation, memUsed map[numa.NodeID]int64) string {
	allocatable := m.CPUs().Difference(m.ReservedCPUs())
	if !a.CPUs.IsSubsetOf(allocatable) {
		return "cpus"
	}
	for _, g := range a.GPUs {
		if _, ok := m.GPU(g); !ok {
			return "gpus"
		}
	}
	for class, ids := range a.Devices {
		for _, id := range ids {
			if !slices.ContainsFunc(m.Devices(), func(d topology.Device) bool { return d.Class == class && d.ID == id }) {
				return "devices"
			}
		}
	}
	need := map[numa.NodeID]int64{}
	for _, x := range a.Memory {
		i, ok := m.NodeIndex(x.Node)
		if !ok {
			return fmt.Sprintf("node %d", x.Node)
		}
		need[x.Node] += x.MiB
		if memUsed[x.Node]+need[x.Node] > m.Node(i).MemoryMiB {
			return "memory"
		}
	}
	for id, k := range need {
		memUsed[id] += k
	}
	return ""
}

// TestRestoreOntoChangedMachine: a snapshot restored onto another machine
// (sparse or renumbered node IDs, missing nodes, extra nodes, moved or
// missing devices, other memory) keeps every allocation exactly, by ID
// (same CPUs, GPUs, devices and memory per NUMA node ID), or is refused
// changing nothing; it is refused exactly when something an allocation
// names is missing or short on the new machine, with a *NodeError naming
// the node when that is its memory's node. ReplaceMachine onto the same
// machine keeps exactly the allocations that survive it and refuses,
// changing nothing, when some do not, naming exactly those.
func TestRestoreOntoChangedMachine(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := allocatortest.Machine().Draw(t, "machine")
		s := allocator.MustNew(m, allocator.Options{})
		for _, op := range allocatortest.StreamWithHealth(m).Draw(t, "ops") {
			apply(s, op)
		}
		snap := s.Snapshot()
		m2 := changedMachine(t, m)
		t.Logf("machine:\n%s\nchanged:\n%s", allocatortest.MachineJSON(m), allocatortest.MachineJSON(m2))

		// What must happen: every allocation must claim, in order; the
		// health of a device the new machine has is kept, that of a device
		// it lacks is dropped (as ReplaceMachine drops it).
		want := ""
		var wantUnhealthy map[string][]string
		for class, ids := range snap.Unhealthy {
			for _, id := range ids {
				exists := false
				if class == allocator.GPUClass {
					g := 0
					_, _ = fmt.Sscan(id, &g)
					_, exists = m2.GPU(g)
				} else {
					exists = slices.ContainsFunc(m2.Devices(), func(d topology.Device) bool { return d.Class == class && d.ID == id })
				}
				if exists {
					if wantUnhealthy == nil {
						wantUnhealthy = map[string][]string{}
					}
					wantUnhealthy[class] = append(wantUnhealthy[class], id)
				}
			}
		}
		memUsed := map[numa.NodeID]int64{}
		wantID := ""
		for _, a := range snap.Allocations {
			if want != "" {
				break
			}
			if why := claimFails(m2, a, memUsed); why != "" {
				want, wantID = why, a.ID
			}
		}

		fresh := allocator.MustNew(m2, allocator.Options{})
		err := fresh.Restore(snap)
		if want != "" {
			require.Error(t, err, "restore must be refused (%s of %q)", want, wantID)
			require.Empty(t, fresh.Live(), "a refused restore changes nothing")
			require.Empty(t, fresh.Snapshot().Unhealthy, "a refused restore changes nothing")
			var re *allocator.RestoreError
			require.ErrorAs(t, err, &re)
			require.Equal(t, wantID, re.ID)
			require.ErrorIs(t, err, allocator.ErrConflict)
			var ne *allocator.NodeError
			if id, ok := cutPrefix(want, "node "); ok {
				require.ErrorAs(t, err, &ne, "%v", err)
				require.Equal(t, id, ne.Node.String())
				require.ErrorIs(t, err, allocator.ErrUnknownNode)
				require.Contains(t, err.Error(), "NUMA node "+id)
			} else {
				require.False(t, errors.As(err, &ne), "%s, not a missing node: %v", want, err)
			}
			return
		}
		require.NoError(t, err)
		got := fresh.Snapshot()
		require.Len(t, got.Allocations, len(snap.Allocations))
		for i, a := range snap.Allocations {
			require.Equal(t, a.ID, got.Allocations[i].ID)
			require.Equal(t, holding(a), holding(got.Allocations[i]), "restored on the changed machine")
			// The span is recomputed on the new machine, by ID.
			require.Equal(t, allocatortest.SpanOf(m2, a), got.Allocations[i].DenseSpan)
		}
		require.Equal(t, wantUnhealthy, got.Unhealthy, "the health of the devices the machine has, by ID")

		// ReplaceMachine: the allocations that do not survive, in ID order.
		var wantAffected []string
		memUsed = map[numa.NodeID]int64{}
		for _, a := range snap.Allocations {
			if claimFails(m2, a, memUsed) != "" {
				wantAffected = append(wantAffected, a.ID)
			}
		}
		before := snapText(s)
		err = s.ReplaceMachine(m2)
		if wantAffected != nil {
			var tc *allocator.TopologyChangeError
			require.ErrorAs(t, err, &tc)
			require.Equal(t, wantAffected, tc.Affected())
			require.Equal(t, before, snapText(s), "a refused replacement changes nothing")
			return
		}
		require.NoError(t, err)
		for _, a := range snap.Allocations {
			after, ok := s.Get(a.ID)
			require.True(t, ok)
			require.Equal(t, holding(a), holding(after), "kept exactly by the replacement")
		}
		require.Equal(t, wantUnhealthy, s.Snapshot().Unhealthy, "ReplaceMachine keeps the health Restore keeps")
	})
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

// TestMemoryNamesNodesByID: memory is recorded by NUMA node ID, so a
// snapshot of a machine with IDs 0 and 5 restored on one with IDs 0 and 6
// (node 5 gone, a new node 6 in its place) is refused naming node 5, and
// never moves the memory to node 6 (the dense index 1 of both machines).
func TestMemoryNamesNodesByID(t *testing.T) {
	build := func(second numa.NodeID) *topology.Machine {
		b := topology.NewBuilder("box")
		b.AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 4096})
		b.AddNode(topology.Node{ID: second, Socket: 0, CPUs: numa.CPURange(4, 7), MemoryMiB: 4096})
		m, err := b.Build()
		require.NoError(t, err)
		return m
	}
	s := allocator.MustNew(build(5), allocator.Options{})
	a, err := s.Allocate(&allocator.Request{ID: "a", CPUs: 2, MemoryMiB: 3000})
	require.NoError(t, err)
	b, err := s.Allocate(&allocator.Request{ID: "b", CPUs: 4, MemoryMiB: 3000})
	require.NoError(t, err)
	require.Equal(t, []allocator.NodeMemory{{Node: 0, MiB: 3000}}, a.Memory, "by ID")
	require.Equal(t, []allocator.NodeMemory{{Node: 5, MiB: 3000}}, b.Memory, "by ID")
	require.Contains(t, b.String(), "3000 MiB on node 5")

	other := allocator.MustNew(build(6), allocator.Options{})
	err = other.Restore(s.Snapshot())
	var ne *allocator.NodeError
	require.ErrorAs(t, err, &ne)
	require.Equal(t, numa.NodeID(5), ne.Node)
	require.Equal(t, []numa.NodeID{0, 6}, ne.IDs)
	require.ErrorContains(t, err, "NUMA node 5 does not exist on this machine (its NUMA nodes: 0,6)")
	require.Empty(t, other.Live())

	_, err = other.Claim(b)
	require.ErrorAs(t, err, &ne)
	require.ErrorIs(t, err, allocator.ErrUnknownNode)
	require.Empty(t, other.Live())

	err = s.ReplaceMachine(build(6))
	require.ErrorAs(t, err, &ne)
	var tc *allocator.TopologyChangeError
	require.ErrorAs(t, err, &tc)
	require.Equal(t, []string{"b"}, tc.Affected())
	got, _ := s.Get("b")
	require.Equal(t, []allocator.NodeMemory{{Node: 5, MiB: 3000}}, got.Memory, "nothing changed")
}

// TestClaimMemoryEntries: a claim's memory is sorted by node ID, keeps its
// 0 MiB entries (they count in no span) and refuses a node listed twice or
// a negative amount, changing nothing.
func TestClaimMemoryEntries(t *testing.T) {
	b := topology.NewBuilder("box")
	b.AddNode(topology.Node{ID: 2, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 4096})
	b.AddNode(topology.Node{ID: 7, Socket: 0, CPUs: numa.CPURange(4, 7), MemoryMiB: 4096})
	m, err := b.Build()
	require.NoError(t, err)
	s := allocator.MustNew(m, allocator.Options{})
	a, err := s.Claim(allocator.Allocation{ID: "a", CPUs: numa.NewCPUSet(0),
		Memory: []allocator.NodeMemory{{Node: 7}, {Node: 2, MiB: 100}}})
	require.NoError(t, err)
	require.Equal(t, []allocator.NodeMemory{{Node: 2, MiB: 100}, {Node: 7}}, a.Memory)
	require.Equal(t, []numa.NodeID{2}, a.NUMANodes(), "0 MiB counts in no span")
	before := snapText(s)
	for name, mem := range map[string][]allocator.NodeMemory{
		"twice":    {{Node: 2, MiB: 10}, {Node: 2, MiB: 10}},
		"negative": {{Node: 7, MiB: -1}},
		"too much": {{Node: 7, MiB: 5000}},
	} {
		_, err := s.Claim(allocator.Allocation{ID: "b", CPUs: numa.NewCPUSet(1), Memory: mem})
		require.ErrorIs(t, err, allocator.ErrConflict, name)
		require.Equal(t, before, snapText(s), "%s: a refused claim changes nothing (its CPUs are not kept)", name)
	}
	require.True(t, s.FreeCPUs().Contains(1), "the CPU the refused claims named is free")
}

// TestRestoreHealthOfMissingDevice: the health of a device the machine
// does not have is dropped by Restore as by ReplaceMachine (the two agree),
// an allocation holding such a device is refused naming the allocation,
// and a GPU ID that names no device of any machine is refused naming it.
func TestRestoreHealthOfMissingDevice(t *testing.T) {
	build := func(gpus int, rdma bool) *topology.Machine {
		b := topology.NewBuilder("box")
		b.AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3), MemoryMiB: 1024})
		for g := range gpus {
			b.AddGPU(topology.GPU{ID: g, NUMANode: 0})
		}
		if rdma {
			b.AddDevice(topology.Device{ID: "mlx5_0", Class: "rdma", NUMANode: 0})
		}
		m, err := b.Build()
		require.NoError(t, err)
		return m
	}
	big, small := build(2, true), build(1, false)
	s := allocator.MustNew(big, allocator.Options{})
	_, err := s.Allocate(&allocator.Request{ID: "a", CPUs: 1})
	require.NoError(t, err)
	for _, d := range [][2]string{{"gpu", "0"}, {"gpu", "1"}, {"rdma", "mlx5_0"}} {
		_, err := s.SetDeviceHealth(d[0], d[1], false)
		require.NoError(t, err)
	}

	restored := allocator.MustNew(small, allocator.Options{})
	require.NoError(t, restored.Restore(s.Snapshot()))
	replaced := s.Clone()
	require.NoError(t, replaced.ReplaceMachine(small))
	want := map[string][]string{"gpu": {"0"}}
	require.Equal(t, want, restored.Snapshot().Unhealthy, "GPU 0 stays unhealthy; GPU 1 and the rdma class are gone")
	require.Equal(t, want, replaced.Snapshot().Unhealthy, "ReplaceMachine keeps what Restore keeps")
	require.Equal(t, []string{"a"}, ids(restored.Live()))

	// An allocation holding the missing GPU is refused, naming it.
	h := allocator.MustNew(big, allocator.Options{})
	_, err = h.Claim(allocator.Allocation{ID: "holder", GPUs: []int{1}})
	require.NoError(t, err)
	_, err = h.SetDeviceHealth("gpu", "1", false)
	require.NoError(t, err)
	fresh := allocator.MustNew(small, allocator.Options{})
	err = fresh.Restore(h.Snapshot())
	var re *allocator.RestoreError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "holder", re.ID)
	require.ErrorIs(t, err, allocator.ErrConflict)
	require.Contains(t, err.Error(), "GPU 1")
	require.Empty(t, fresh.Live(), "a refused restore changes nothing")
	require.Empty(t, fresh.Snapshot().Unhealthy, "a refused restore changes nothing")
	var tc *allocator.TopologyChangeError
	require.ErrorAs(t, h.ReplaceMachine(small), &tc)
	require.Equal(t, []string{"holder"}, tc.Affected())

	// A GPU ID no machine can have is refused (not dropped), named.
	err = fresh.Restore(allocator.Snapshot{Unhealthy: map[string][]string{"gpu": {"0x1"}}})
	require.ErrorIs(t, err, allocator.ErrUnknownDevice)
	require.ErrorIs(t, err, allocator.ErrConflict)
	require.Contains(t, err.Error(), `"0x1"`)
	require.Empty(t, fresh.Snapshot().Unhealthy)
	// Misspellings are refused, not dropped: classes and device IDs are
	// case-sensitive.
	for _, u := range []map[string][]string{{"GPU": {"0"}}, {"Rdma": {"mlx5_0"}}, {"rdma": {"MLX5_0"}}} {
		fresh := allocator.MustNew(big, allocator.Options{})
		err := fresh.Restore(allocator.Snapshot{Unhealthy: u})
		require.ErrorIs(t, err, allocator.ErrUnknownDevice, "%v", u)
		require.ErrorContains(t, err, "did you mean", "%v", u)
		require.Empty(t, fresh.Snapshot().Unhealthy)
	}
}

func ids(live []allocator.Allocation) []string {
	var out []string
	for _, a := range live {
		out = append(out, a.ID)
	}
	return out
}
