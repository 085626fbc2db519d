package allocator_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/allocator/allocatortest"
	"github.com/numaplace/numaplace/internal/strictjson"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
)

// TestSnapshotJSONRoundTrip: a snapshot of a random stream's state, through
// its JSON form and restored in a fresh state of the machine, is the same
// snapshot, and writes the same bytes again.
func TestSnapshotJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := allocatortest.Machine().Draw(t, "machine")
		s := allocator.MustNew(m, allocator.Options{})
		for _, op := range allocatortest.StreamWithHealth(m).Draw(t, "ops") {
			switch op.Kind {
			case allocatortest.OpAllocate:
				_, _ = s.Allocate(&op.Request)
			case allocatortest.OpRelease:
				_ = s.Release(op.ID)
			case allocatortest.OpHealth:
				_, _ = s.SetDeviceHealth(op.Class, op.ID, op.Healthy)
			}
		}
		snap := s.Snapshot()
		data, err := json.Marshal(snap)
		require.NoError(t, err)
		var back allocator.Snapshot
		require.NoError(t, json.Unmarshal(data, &back), "%s", data)
		fresh := allocator.MustNew(m, allocator.Options{})
		require.NoError(t, fresh.Restore(back), "%s", data)
		require.NoError(t, allocatortest.CompareSnapshots(snap, fresh.Snapshot()), "%s", data)
		again, err := json.Marshal(fresh.Snapshot())
		require.NoError(t, err)
		require.Equal(t, string(data), string(again))
	})
}

// TestSnapshotJSONForm: the fields and their names, the holdings of a
// caller's own kinds and devices of other classes, and nothing else (no
// dense span).
func TestSnapshotJSONForm(t *testing.T) {
	snap := allocator.Snapshot{Allocations: []allocator.Allocation{{
		ID: "a", Policy: policy.Restricted, Exclusive: policy.Preferred, FullPCPUs: true,
		DenseSpan: numa.MaskOf(0, 5), CPUs: numa.MustParseCPUSet("0-3,8"), GPUs: []int{1, 4},
		Devices: map[string][]string{"rdma": {"mlx5_1"}},
		Memory:  []allocator.NodeMemory{{Node: 0, MiB: 0}, {Node: 3, MiB: 512}},
		Amounts: map[string][]allocator.NodeUnits{"hugepages-1Gi": {{Node: 3, Units: 2}}},
	}, {ID: "b", CPUs: numa.MustParseCPUSet("")}}, Unhealthy: map[string][]string{"gpu": {"2"}}}
	data, err := json.Marshal(snap)
	require.NoError(t, err)
	require.JSONEq(t, `{"version":1,"allocations":[
		{"id":"a","policy":"Restricted","exclusive":"Preferred","fullPCPUs":true,"cpus":"0-3,8","gpus":[1,4],
		 "devices":{"rdma":["mlx5_1"]},"memory":[{"numaNode":0,"mib":0},{"numaNode":3,"mib":512}],
		 "amounts":{"hugepages-1Gi":[{"numaNode":3,"units":2}]}},
		{"id":"b","policy":"None","exclusive":"Required","cpus":""}],
		"unhealthy":{"gpu":["2"]}}`, string(data))

	var back allocator.Snapshot
	require.NoError(t, json.Unmarshal(data, &back))
	want := snap
	want.Allocations = []allocator.Allocation{snap.Allocations[0].Clone(), snap.Allocations[1].Clone()}
	want.Allocations[0].DenseSpan = 0
	require.Equal(t, want.Allocations[0].ID, back.Allocations[0].ID)
	require.NoError(t, allocatortest.CompareAllocations(want.Allocations[0], back.Allocations[0]))
	require.Equal(t, snap.Unhealthy, back.Unhealthy)

	empty, err := json.Marshal(allocator.Snapshot{})
	require.NoError(t, err)
	require.JSONEq(t, `{"version":1,"allocations":[]}`, string(empty))
}

// TestSnapshotJSONRefusesBadInput: unknown and misspelt fields, another
// version, a malformed CPU list and a wrong type are errors naming them,
// and leave the snapshot as it was.
func TestSnapshotJSONRefusesBadInput(t *testing.T) {
	for _, c := range []struct{ name, data, want string }{
		{"unknown field", `{"version":1,"allocations":[{"id":"a","cpus":"0","span":3}]}`, `unknown field "span" in allocations[0]`},
		{"misspelt field", `{"version":1,"allocations":[{"id":"a","cpus":"0","gpu":[1]}]}`, `did you mean "gpus"?`},
		{"no version", `{"allocations":[]}`, "version 0, this package reads version 1"},
		{"newer version", `{"version":2,"allocations":[]}`, "version 2, this package reads version 1"},
		{"bad cpus", `{"version":1,"allocations":[{"id":"a","cpus":"3-1"}]}`, "3-1"},
		{"bad policy", `{"version":1,"allocations":[{"id":"a","policy":"Tight","cpus":"0"}]}`, "Tight"},
		{"wrong type", `{"version":1,"allocations":[{"id":"a","cpus":"0","gpus":"0"}]}`, "gpus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := allocator.Snapshot{Unhealthy: map[string][]string{"gpu": {"0"}}}
			snap := before
			err := json.Unmarshal([]byte(c.data), &snap)
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, "allocator snapshot")
			require.Equal(t, before, snap)
		})
	}
	var unknown *strictjson.Error
	var snap allocator.Snapshot
	require.True(t, errors.As(json.Unmarshal([]byte(`{"version":1,"extra":1}`), &snap), &unknown))
}
