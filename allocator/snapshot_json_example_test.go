package allocator_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// Saving a machine's allocations in one process and restoring them in
// another: the snapshot's JSON form goes to a file, and a fresh state of
// the same machine (a restarted process) reads it back.
func ExampleSnapshot_MarshalJSON() {
	m, _ := topology.Preset("dgx-h100")
	s := allocator.MustNew(m, allocator.Options{})
	_, _ = s.Allocate(&allocator.Request{ID: "train", CPUs: 8, GPUs: 2, MemoryMiB: 4096, Policy: policy.SingleNUMANode})
	_, _ = s.Allocate(&allocator.Request{ID: "serve", CPUs: 4, GPUs: 1, Policy: policy.BestEffort})
	_, _ = s.SetDeviceHealth("gpu", "7", false)

	// The first process saves its state.
	data, err := json.Marshal(s.Snapshot())
	if err != nil {
		fmt.Println(err)
		return
	}
	path := filepath.Join(os.TempDir(), "numaplace-example-snapshot.json")
	defer os.Remove(path)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(data))

	// The next process reads it into a fresh state of the same machine.
	saved, err := os.ReadFile(path)
	if err != nil {
		fmt.Println(err)
		return
	}
	var snap allocator.Snapshot
	if err := json.Unmarshal(saved, &snap); err != nil {
		fmt.Println(err)
		return
	}
	restarted := allocator.MustNew(m, allocator.Options{})
	if err := restarted.Restore(snap); err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range restarted.Live() {
		fmt.Println(a.String())
	}
	fmt.Println("same free CPUs:", restarted.FreeCPUs().Equal(s.FreeCPUs()))
	// Output:
	// {"version":1,"allocations":[{"id":"serve","policy":"BestEffort","exclusive":"Required","cpus":"4-5,116-117","gpus":[2]},{"id":"train","policy":"SingleNUMANode","exclusive":"Required","cpus":"0-3,112-115","gpus":[0,1],"memory":[{"numaNode":0,"mib":4096}]}],"unhealthy":{"gpu":["7"]}}
	// "serve" cpus 4-5,116-117 gpus [2] nodes [0]
	// "train" cpus 0-3,112-115 gpus [0 1] nodes [0] memory 4096 MiB on node 0
	// same free CPUs: true
}
