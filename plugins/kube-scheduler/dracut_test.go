package numaplace

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/allocator"
	"k8s.io/dynamic-resource-allocation/structured"
)

// TestClaimsFitAgreesWithAllocator plays random claims (one to three
// requests of gpu.numaplace.io, sometimes with selectors, a constraint,
// allocationMode All, firstAvailable or adminAccess), random taints and
// tolerations, devices held by other claims and decisions on a dgx-a100
// node, and requires that claimsFit admits only what the structured
// allocator over the cut-down slices admits, and, for plain claims whose
// requests select and tolerate alike, exactly that.
func TestClaimsFitAgreesWithAllocator(t *testing.T) {
	ctx := context.Background()
	pod, claim := benchDRAPod("Restricted", 24, 4)
	w := newDRABench(t, "dgx-a100", claim)
	pl := w.numaplace
	state := framework.NewCycleState()
	_, st := pl.PreFilter(ctx, state, pod, []fwk.NodeInfo{w.nodeInfo})
	require.True(t, st.IsSuccess(), st.Message())
	s, err := pl.podState(state, pod)
	require.NoError(t, err)
	d := s.dra
	require.NotNil(t, d)
	node := w.nodeInfo.Node()
	published := d.byNode[node.Name]
	decided, err := s.prepared.Decide(node.Name, nil)
	require.NoError(t, err)

	rng := rand.New(rand.NewPCG(24, 6))
	var fastYes, allocYes, plainCases, fastConstrained, allocConstrained int
	for i := range 1500 {
		c := claim.DeepCopy()
		c.Spec.Devices.Requests = nil
		tolerate := rng.IntN(3) == 0
		alike := true
		for r := range 1 + rng.IntN(3) {
			x := &resourceapi.ExactDeviceRequest{DeviceClassName: ClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount,
				Count: int64(1 + rng.IntN(3))}
			if tolerate || rng.IntN(8) == 0 {
				x.Tolerations = []resourceapi.DeviceToleration{{Key: "k", Operator: resourceapi.DeviceTolerationOpExists}}
				alike = alike && tolerate
			} else {
				alike = alike && !tolerate
			}
			c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: fmt.Sprintf("r%d", r), Exactly: x})
		}
		plain, constrained := true, false
		switch rng.IntN(8) {
		case 0: // a selector on every request: still plain
			for r := range c.Spec.Devices.Requests {
				c.Spec.Devices.Requests[r].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: `device.attributes["resource.kubernetes.io"].numaNode <= 3`}}}
			}
		case 5: // a selector on the first request only: plain, requests not alike
			c.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: `device.attributes["resource.kubernetes.io"].numaNode == 0`}}}
			alike = alike && len(c.Spec.Devices.Requests) == 1
		case 1, 6: // a constraint: plain when it applies to every request
			attrs := []string{"resource.kubernetes.io/numaNode", "resource.kubernetes.io/pcieRoot", "gpu.numaplace.io/type",
				"gpu.numaplace.io/index", "gpu.numaplace.io/uuid", "example.com/missing"}
			attr := resourceapi.FullyQualifiedName(attrs[rng.IntN(len(attrs))])
			k := resourceapi.DeviceConstraint{MatchAttribute: &attr}
			if rng.IntN(2) == 0 {
				k = resourceapi.DeviceConstraint{DistinctAttribute: &attr}
			}
			if rng.IntN(3) == 0 {
				for _, r := range c.Spec.Devices.Requests {
					k.Requests = append(k.Requests, r.Name)
				}
				if rng.IntN(2) == 0 {
					k.Requests = k.Requests[:1] // only the first request
					plain = len(c.Spec.Devices.Requests) == 1
				}
			}
			c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, k)
			constrained = true
		case 2:
			c.Spec.Devices.Requests[0].Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
			c.Spec.Devices.Requests[0].Exactly.Count = 0
			plain = false
		case 3:
			r := &c.Spec.Devices.Requests[0]
			r.FirstAvailable = []resourceapi.DeviceSubRequest{{Name: "a", DeviceClassName: ClassGPU,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: r.Exactly.Count}}
			r.Exactly = nil
			plain = false
		case 4:
			c.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr.To(false)
			plain = false
		}
		d.claims, d.toAllocate = []*resourceapi.ResourceClaim{c}, []int{0}
		d.plain, d.plainOK = plainRequests(d.claims)
		require.Equal(t, plain, d.plainOK, "case %d", i)

		// Taint some GPUs (new slice objects: the cut's index reads them anew).
		cut := make([]*resourceapi.ResourceSlice, len(published))
		for k, sl := range published {
			cut[k] = sl
			if rng.IntN(2) == 0 {
				continue
			}
			sl = sl.DeepCopy()
			for j := range sl.Spec.Devices {
				if rng.IntN(4) == 0 {
					sl.Spec.Devices[j].Taints = []resourceapi.DeviceTaint{{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
				}
			}
			cut[k] = sl
		}
		d.byNode[node.Name] = cut
		held := sets.New[structured.DeviceID]()
		for g := range 8 {
			if rng.IntN(5) == 0 {
				held.Insert(structured.MakeDeviceID(DRADriver, node.Name, fmt.Sprintf("gpu-%d", g)))
			}
		}
		d.allocated.AllocatedDevices = held
		var freed sets.Set[structured.DeviceID]
		if rng.IntN(4) == 0 {
			freed = sets.New[structured.DeviceID]()
			for id := range held {
				if rng.IntN(2) == 0 {
					freed.Insert(id)
				}
			}
		}
		a := decided
		if rng.IntN(2) == 0 {
			a = allocator.Allocation{}
			for g := range 8 {
				if rng.IntN(2) == 0 {
					a.GPUs = append(a.GPUs, g)
				}
			}
		}

		d.plainCons, _ = plainConstraints(d.claims)
		fast := pl.claimsFit(ctx, d, node, a, freed)
		res, err := pl.allocateClaims(ctx, d, node, a, freed)
		ok := err == nil && res != nil
		if fast {
			fastYes++
			require.True(t, ok, "case %d: claimsFit admits what the allocator does not (err %v, constraints %+v)", i, err, c.Spec.Devices.Constraints)
			if constrained {
				fastConstrained++
			}
		}
		if ok {
			allocYes++
			if constrained && plain {
				allocConstrained++
			}
		}
		if plain && alike && !constrained {
			plainCases++
			require.Equal(t, ok, fast, "case %d: a plain claim, the allocator says %v (err %v)", i, ok, err)
		}
	}
	t.Logf("claimsFit admitted %d, the allocator %d of 1500 cases (%d plain, requests alike); with a constraint on every request claimsFit admitted %d, the allocator %d",
		fastYes, allocYes, plainCases, fastConstrained, allocConstrained)
	require.NotZero(t, fastYes)
	require.NotZero(t, fastConstrained, "claimsFit judges no constraint itself")
	require.Less(t, fastYes, allocYes) // the non-plain claims the allocator admits
}

// TestNodeSlicesCut compares the cut of a node's slices with the devices
// the cut is meant to keep, read straight from the published slices:
// the decision's GPUs by index, its NICs by InfiniBand name when it names
// some, else the NICs on its span's NUMA nodes, every slice of the pool
// kept (perhaps empty), the published slices untouched.
func TestNodeSlicesCut(t *testing.T) {
	ctx := context.Background()
	for _, preset := range []string{"dgx-a100", "numa64"} {
		pod, claim := benchDRAPod("Restricted", 24, 4)
		w := newDRABench(t, preset, claim)
		pl := w.numaplace
		state := framework.NewCycleState()
		_, st := pl.PreFilter(ctx, state, pod, []fwk.NodeInfo{w.nodeInfo})
		require.True(t, st.IsSuccess(), st.Message())
		s, err := pl.podState(state, pod)
		require.NoError(t, err)
		node := w.nodeInfo.Node()
		published := s.dra.byNode[node.Name]
		before := make([]*resourceapi.ResourceSlice, len(published))
		for i, sl := range published {
			before[i] = sl.DeepCopy()
		}
		decided, err := s.prepared.Decide(node.Name, nil)
		require.NoError(t, err)
		span := sets.New[int64]()
		for _, id := range decided.NUMANodes() {
			span.Insert(int64(id))
		}
		require.NotZero(t, span.Len())
		rng := rand.New(rand.NewPCG(6, 24))
		keptSeen := 0
		for i := range 50 {
			a := decided
			a.GPUs = nil
			for g := range 8 {
				if rng.IntN(2) == 0 {
					a.GPUs = append(a.GPUs, g)
				}
			}
			var names []string
			if i%2 == 1 {
				a.Devices = map[string][]string{rdmaClass: {"mlx5_0", "mlx5_3"}}
				names = []string{"mlx5_0", "mlx5_3"}
			}
			got := s.dra.nodeSlices(node.Name, a)
			require.Len(t, got, len(published))
			for k, sl := range published {
				var want []string
				for _, dev := range sl.Spec.Devices {
					typ := dev.Attributes["type"].StringValue
					switch {
					case typ == nil:
					case *typ == "gpu" && slices.Contains(a.GPUs, int(*dev.Attributes["index"].IntValue)):
						want = append(want, dev.Name)
					case *typ == "nic" && names != nil:
						if slices.Contains(names, *dev.Attributes["ibDevice"].StringValue) {
							want = append(want, dev.Name)
						}
					case *typ == "nic" && span.Has(*dev.Attributes["resource.kubernetes.io/numaNode"].IntValue):
						want = append(want, dev.Name)
					}
				}
				keptSeen += len(want)
				var have []string
				for _, dev := range got[k].Spec.Devices {
					have = append(have, dev.Name)
				}
				require.Equal(t, want, have, "%s case %d slice %s", preset, i, sl.Name)
				require.Equal(t, sl.Name, got[k].Name)
				require.Equal(t, sl.Spec.Pool, got[k].Spec.Pool)
			}
		}
		require.NotZero(t, keptSeen)
		require.Equal(t, before, published, "the published slices were written to")
	}
}
