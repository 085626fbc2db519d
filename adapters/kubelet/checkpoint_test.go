package kubelet

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/internal/readfile"
	"github.com/numaplace/numaplace/internal/strictjson"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// resign returns the checkpoint file with its data replaced by data and a
// valid checksum: what a tool that knows the format would write.
func resign(t testing.TB, version int, data []byte) []byte {
	t.Helper()
	sum := sha256.Sum256(data)
	return fmt.Appendf(nil, `{"version":%d,"checksum":"sha256:%s","data":%s}`, version, hex.EncodeToString(sum[:]), data)
}

// dataOf returns the data object of a checkpoint file, decoded.
func dataOf(t testing.TB, file []byte) map[string]any {
	t.Helper()
	var f checkpointFile
	require.NoError(t, json.Unmarshal(file, &f))
	var d map[string]any
	require.NoError(t, json.Unmarshal(f.Data, &d))
	return d
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// writtenCheckpoint returns a checkpoint of smallMachine holding a local
// pod, a pod by decision, a shared-pool pod and an unhealthy GPU.
func writtenCheckpoint(t *testing.T) []byte {
	m := smallMachine(t)
	n, path := openTemp(t, m)
	_, err := n.Admit(numaPod("a", 2, 1, "SingleNUMANode"))
	require.NoError(t, err)
	d := kube.Decision{CPUSet: "0", NUMANodes: []int{0}, GPUs: []kube.DecisionGPU{{ID: 0}},
		Devices: map[string][]string{"rdma": {"mlx5_0"}}, MemoryMiB: map[string]int64{"0": 256}}
	b := numaPod("b", 1, 1, "SingleNUMANode")
	b.Containers[0].Requests[kube.ResourceMemory] = "256Mi"
	b.Containers[0].Limits[kube.ResourceMemory] = "256Mi"
	_, err = n.Admit(withDecision(b, d))
	require.NoError(t, err)
	_, err = n.Admit(sharedPod("web"))
	require.NoError(t, err)
	_, err = n.SetDeviceHealth("gpu", "2", false)
	require.NoError(t, err)
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	return file
}

func TestCheckpointFormat(t *testing.T) {
	file := writtenCheckpoint(t)
	var f checkpointFile
	require.NoError(t, json.Unmarshal(file, &f))
	require.Equal(t, CheckpointVersion, f.Version)
	sum := sha256.Sum256(f.Data)
	require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), f.Checksum)

	d := dataOf(t, file)
	require.Equal(t, "small-test", d["machine"])
	require.Equal(t, map[string]any{"gpu": []any{"2"}}, d["unhealthy"])
	pods := d["pods"].([]any)
	require.Len(t, pods, 3)
	b := pods[1].(map[string]any)
	require.Equal(t, "default/b", b["pod"])
	require.Equal(t, "uid-b", b["uid"])
	require.Equal(t, "decision", b["source"])
	require.Equal(t, map[string]any{"policy": "None", "exclusive": "Required", "cpus": "0", "gpus": []any{0.0},
		"devices": map[string]any{"rdma": []any{"mlx5_0"}}, "memoryMiB": map[string]any{"0": 256.0},
		"numaNodes": []any{0.0}}, b["allocation"])
	require.Equal(t, map[string]any{"pod": "default/web", "uid": "uid-web", "source": "shared"}, pods[2])
	require.Equal(t, "local", pods[0].(map[string]any)["source"])
}

func TestOpenMissingStartsEmptyAndWrites(t *testing.T) {
	m := smallMachine(t)
	path := filepath.Join(t.TempDir(), "cp.json")
	n, err := Open(m, path, NodeOptions{})
	require.NoError(t, err)
	require.Empty(t, n.Admissions())
	require.Equal(t, path, n.CheckpointPath())
	_, err = os.Stat(path)
	require.NoError(t, err, "the empty state is written at once")

	_, err = Open(m, filepath.Join(t.TempDir(), "missing-dir", "cp.json"), NodeOptions{})
	require.ErrorIs(t, err, ErrCheckpoint, "an unwritable location fails at start")
}

// badCheckpoint is a checkpoint file that cannot be used, with the problem
// Open names and the cause its error wraps (nil: none checked).
type badCheckpoint struct {
	name    string
	file    []byte
	problem string
	cause   error
}

// badCheckpoints returns the good checkpoint of writtenCheckpoint, the
// helper that edits its data and re-signs it, and every kind of unusable
// checkpoint made from it.
func badCheckpoints(t *testing.T) ([]byte, func(change func(d map[string]any)) []byte, []badCheckpoint) {
	good := writtenCheckpoint(t)
	var f checkpointFile
	require.NoError(t, json.Unmarshal(good, &f))
	edit := func(change func(d map[string]any)) []byte {
		d := dataOf(t, good)
		change(d)
		return resign(t, CheckpointVersion, mustJSON(t, d))
	}
	pod := func(d map[string]any, i int) map[string]any { return d["pods"].([]any)[i].(map[string]any) }
	alloc := func(d map[string]any, i int) map[string]any { return pod(d, i)["allocation"].(map[string]any) }

	return good, edit, []badCheckpoint{
		{"empty file", []byte{}, "not a valid checkpoint (truncated or corrupted JSON)", nil},
		{"truncated", good[:len(good)/2], "not a valid checkpoint (truncated or corrupted JSON)", nil},
		{"bad JSON", []byte(`{"version":1,`), "not a valid checkpoint", nil},
		{"data after the object", append(append([]byte{}, good...), []byte(`{}`)...), "data after the JSON object", nil},
		{"flipped byte", bytes.Replace(good, []byte(`"default/web"`), []byte(`"default/wob"`), 1), "checksum mismatch", nil},
		{"tampered CPUs, old checksum", bytes.Replace(good, []byte(`"cpus": "0"`), []byte(`"cpus": "1"`), 1), "checksum mismatch", nil},
		{"no checksum", bytes.Replace(good, []byte(f.Checksum), []byte(""), 1), "checksum mismatch", nil},
		{"unknown version", resign(t, 3, f.Data), "unknown format version 3 (this build reads versions 1 to 2)", nil},
		{"no version", bytes.Replace(good, []byte(`"version": 2,`), nil, 1), "unknown format version 0", nil},
		{"unknown field", edit(func(d map[string]any) { d["extra"] = 1 }), "malformed data", nil},
		// Read strictly, as every other reader (internal/strictjson).
		{"repeated key in the file", bytes.Replace(good, []byte(`"version": 2,`), []byte(`"version": 2, "version": 2,`), 1), "not a valid checkpoint", strictjson.ErrDuplicateField},
		{"repeated key in data", resign(t, 1, bytes.Replace(f.Data, []byte(`"machine":`), []byte(`"machine": "x", "machine":`), 1)), "not a valid checkpoint", strictjson.ErrDuplicateField},
		{"repeated key in an allocation", resign(t, 1, bytes.Replace(f.Data, []byte(`"policy":`), []byte(`"policy": "None", "policy":`), 1)), "not a valid checkpoint", strictjson.ErrDuplicateField},
		{"repeated memory key", resign(t, 1, bytes.Replace(f.Data, []byte(`"cpus":`), []byte(`"memoryMiB": {"0": 1, "0": 1}, "cpus":`), 1)), "not a valid checkpoint", strictjson.ErrDuplicateField},
		{"miscased key", resign(t, 1, bytes.Replace(f.Data, []byte(`"machine":`), []byte(`"Machine":`), 1)), "malformed data", strictjson.ErrUnknownField},
		{"invalid UTF-8", resign(t, 1, bytes.Replace(f.Data, []byte(`"default/web"`), []byte("\"default/w\xffb\""), 1)), "not a valid checkpoint", strictjson.ErrInvalidUTF8},
		{"memory key 00", edit(func(d map[string]any) { alloc(d, 1)["memoryMiB"] = map[string]any{"00": 5} }), `memoryMiB key "00" is not a NUMA node ID`, nil},
		{"memory key +0", edit(func(d map[string]any) { alloc(d, 1)["memoryMiB"] = map[string]any{"+0": 5} }), `memoryMiB key "+0" is not a NUMA node ID`, nil},
		{"memory key -1", edit(func(d map[string]any) { alloc(d, 1)["memoryMiB"] = map[string]any{"-1": 5} }), `memoryMiB key "-1" is not a NUMA node ID`, nil},
		{"bad cpulist", edit(func(d map[string]any) { alloc(d, 0)["cpus"] = "3-1" }), "malformed data", numa.ErrInvalidCPUSet},
		{"bad source", edit(func(d map[string]any) { pod(d, 0)["source"] = "guess" }), "malformed data", nil},
		{"no source", edit(func(d map[string]any) { delete(pod(d, 0), "source") }), "pods[0] (default/a): no source", nil},
		{"another machine", edit(func(d map[string]any) { d["fingerprint"] = "0000" }), "written for another machine", nil},
		{"pod listed twice", edit(func(d map[string]any) { d["pods"] = append(d["pods"].([]any), pod(d, 2)) }), "the pod is listed twice", nil},
		{"bad pod key", edit(func(d map[string]any) { pod(d, 2)["pod"] = "web" }), "not a namespace/name pod key", nil},
		{"shared pod with an allocation", edit(func(d map[string]any) { pod(d, 2)["allocation"] = alloc(d, 0) }), "a shared-pool pod with an allocation", nil},
		{"exclusive pod without one", edit(func(d map[string]any) { delete(pod(d, 0), "allocation") }), "an exclusive pod without an allocation", nil},
		{"overlapping CPUs", edit(func(d map[string]any) { alloc(d, 1)["cpus"] = alloc(d, 0)["cpus"] }), "inconsistent with this machine", allocator.ErrConflict},
		{"overlapping GPUs", edit(func(d map[string]any) { alloc(d, 1)["gpus"] = alloc(d, 0)["gpus"] }), "inconsistent with this machine", allocator.ErrConflict},
		{"unknown CPU", edit(func(d map[string]any) { alloc(d, 1)["cpus"] = "40" }), "inconsistent with this machine", allocator.ErrConflict},
		{"reserved CPU", edit(func(d map[string]any) { alloc(d, 1)["cpus"] = "7" }), "inconsistent with this machine", allocator.ErrConflict},
		{"unknown GPU", edit(func(d map[string]any) { alloc(d, 1)["gpus"] = []any{12} }), "inconsistent with this machine", allocator.ErrConflict},
		{"unknown device", edit(func(d map[string]any) { alloc(d, 1)["devices"] = map[string]any{"rdma": []any{"mlx5_7"}} }), "inconsistent with this machine", allocator.ErrConflict},
		{"unknown unhealthy GPU", edit(func(d map[string]any) { d["unhealthy"] = map[string]any{"gpu": []any{"9"}} }), "inconsistent with this machine", allocator.ErrUnknownDevice},
		{"memory on an unknown node", edit(func(d map[string]any) { alloc(d, 1)["memoryMiB"] = map[string]any{"1": 5} }), "memory on NUMA node \"1\"", nil},
		{"too much memory", edit(func(d map[string]any) { alloc(d, 1)["memoryMiB"] = map[string]any{"0": 5000} }), "inconsistent with this machine", allocator.ErrConflict},
		{"span recorded wrong", edit(func(d map[string]any) { alloc(d, 1)["numaNodes"] = []any{2} }), "pod default/b is recorded on NUMA nodes [2] but what it holds lies on [0]", nil},
	}
}

// Every checkpoint that cannot be used stops the start with an error that
// names the file and the problem, and the file is left exactly as it was.
func TestOpenRefusesBadCheckpoint(t *testing.T) {
	good, edit, tests := badCheckpoints(t)
	m := smallMachine(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "cp.json")
			require.NoError(t, os.WriteFile(path, tt.file, 0o600))

			n, err := Open(m, path, NodeOptions{})
			require.Nil(t, n)
			require.ErrorIs(t, err, ErrCheckpoint)
			var ce *CheckpointError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, path, ce.Path)
			require.Contains(t, err.Error(), path)
			require.Contains(t, err.Error(), tt.problem)
			if tt.cause != nil {
				require.ErrorIs(t, err, tt.cause)
			}
			after, rerr := os.ReadFile(path)
			require.NoError(t, rerr)
			require.Equal(t, tt.file, after, "the file is left untouched")
			entries, rerr := os.ReadDir(dir)
			require.NoError(t, rerr)
			require.Len(t, entries, 1, "no other file was written")
		})
	}
	// The good file opens, and the edit helper alone (re-signing an
	// unchanged decode) does too: the refusals above are the edits'.
	for _, file := range [][]byte{good, edit(func(map[string]any) {})} {
		path := filepath.Join(t.TempDir(), "cp.json")
		require.NoError(t, os.WriteFile(path, file, 0o600))
		n, err := Open(m, path, NodeOptions{})
		require.NoError(t, err)
		require.Len(t, n.Admissions(), 3)
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	require.NoError(t, writeFileAtomic(path, []byte("one")))
	require.NoError(t, writeFileAtomic(path, []byte("two")))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "two", string(b))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left")

	// Renaming over a directory fails: the temporary file is removed.
	require.NoError(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "d", "x"), nil, 0o600))
	require.Error(t, writeFileAtomic(filepath.Join(dir, "d"), []byte("x")))
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2)
}

// Random admissions, removals and health changes survive a checkpoint and a
// restart exactly: a node opened from the file holds the same pods with the
// same CPUs, GPUs, devices, spans and health, and the restarted node then
// behaves like the original one.
func TestCheckpointRestoreProperty(t *testing.T) {
	machines := []*topology.Machine{smallMachine(t), preset(t, "dgx-a100")}
	policies := []string{"SingleNUMANode", "Restricted", "BestEffort", "None"}
	rapid.Check(t, func(rt *rapid.T) {
		m := machines[rapid.IntRange(0, len(machines)-1).Draw(rt, "machine")]
		dir, err := os.MkdirTemp("", "kubelet-prop-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "cp.json")
		n, err := Open(m, path, NodeOptions{})
		if err != nil {
			rt.Fatal(err)
		}
		// The format is under test here, not the fsyncs (TestWriteFileAtomic
		// and the others cover them): skip them to keep the runs quick.
		n.write = func(p string, data []byte) error { return os.WriteFile(p, data, 0o600) }
		// A scheduler-side state to write decisions from.
		sched := allocator.MustNew(m, allocator.Options{})
		pods := map[string]*kube.Pod{}
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for i := range steps {
			switch op := rapid.IntRange(0, 5).Draw(rt, "op"); op {
			case 0, 1: // a pod deciding locally, or a shared-pool pod
				name := fmt.Sprintf("p%d", i)
				var pod *kube.Pod
				if op == 0 {
					pod = numaPod(name, rapid.IntRange(0, 8).Draw(rt, "cpus"), rapid.IntRange(0, 3).Draw(rt, "gpus"),
						rapid.SampledFrom(policies).Draw(rt, "policy"))
					if pod.Containers[0].Requests["cpu"] == "0" && pod.Containers[0].Requests[kube.ResourceAliyunGPU] == "" {
						pod = sharedPod(name)
					}
				} else {
					pod = sharedPod(name)
				}
				if _, err := n.Admit(pod); err == nil {
					pods[name] = pod
				}
			case 2: // a pod by decision of the scheduler-side state
				name := fmt.Sprintf("p%d", i)
				pod := numaPod(name, rapid.IntRange(1, 8).Draw(rt, "cpus"), rapid.IntRange(0, 2).Draw(rt, "gpus"), "SingleNUMANode")
				req, _ := kube.ParsePod(pod, kube.Config{})
				r := req.Request(pod.Key())
				a, err := sched.Allocate(&r)
				if err != nil {
					continue
				}
				pod = withDecision(pod, kube.NewDecision(m, &a))
				if _, err := n.Admit(pod); err == nil {
					pods[name] = pod
				} else {
					_ = sched.Release(pod.Key())
				}
			case 3, 4: // remove a random admitted pod
				if len(pods) == 0 {
					continue
				}
				keys := sortedKeys(pods)
				name := rapid.SampledFrom(keys).Draw(rt, "remove")
				if err := n.Remove(pods[name]); err != nil {
					rt.Fatalf("remove %s: %v", name, err)
				}
				_ = sched.Release(pods[name].Key())
				delete(pods, name)
			case 5: // a GPU's health
				if m.NumGPUs() == 0 {
					continue
				}
				g := rapid.IntRange(0, m.NumGPUs()-1).Draw(rt, "gpu")
				if _, err := n.SetDeviceHealth("gpu", fmt.Sprint(g), rapid.Bool().Draw(rt, "healthy")); err != nil {
					rt.Fatal(err)
				}
				_, _ = sched.SetDeviceHealth("gpu", fmt.Sprint(g), !n.unhealthy["gpu"][fmt.Sprint(g)])
			}
		}
		re, err := Open(m, path, NodeOptions{})
		if err != nil {
			rt.Fatalf("restart: %v", err)
		}
		if got, want := summary(re.Admissions()), summary(n.Admissions()); !equalStrings(got, want) {
			rt.Fatalf("after restart:\n%s\nbefore:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if got, want := snapSummary(re.s.Snapshot()), snapSummary(n.s.Snapshot()); !equalStrings(got, want) {
			rt.Fatalf("state after restart:\n%s\nbefore:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if !re.SharedPool().Equal(n.SharedPool()) {
			rt.Fatalf("shared pool %s after restart, %s before", re.SharedPool(), n.SharedPool())
		}
		// The restarted node decides the next pod as the original would.
		next := numaPod("next", 2, 1, "BestEffort")
		a1, err1 := n.Admit(next)
		a2, err2 := re.Admit(next)
		if (err1 == nil) != (err2 == nil) || err1 == nil && describeAdmission(a1) != describeAdmission(a2) {
			rt.Fatalf("next pod: %v %v / %v %v", a1.CPUs, err1, a2.CPUs, err2)
		}
	})
}

func sortedKeys(m map[string]*kube.Pod) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzDecodeCheckpoint feeds arbitrary bytes to the checkpoint reader, both
// as a whole file and as the data of a correctly signed file, so that the
// fuzzer gets past the checksum. The reader must never panic, and whatever
// it accepts must restore or be refused with an error, never half-applied.
func FuzzDecodeCheckpoint(f *testing.F) {
	m := smallMachine(f)
	n, err := Open(m, "", NodeOptions{})
	if err != nil {
		f.Fatal(err)
	}
	if _, err := n.Admit(numaPod("a", 2, 1, "SingleNUMANode")); err != nil {
		f.Fatal(err)
	}
	if _, err := n.Admit(sharedPod("web")); err != nil {
		f.Fatal(err)
	}
	good, err := encodeCheckpoint(m, n.pods, n.claims, n.s.Snapshot())
	if err != nil {
		f.Fatal(err)
	}
	var cf checkpointFile
	if err := json.Unmarshal(good, &cf); err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(cf.Data))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"version":1,"checksum":"","data":null}`))
	f.Add([]byte(`{"pods":[{"pod":"a/b","source":"local","allocation":{"cpus":"0-3","gpus":[0,0]}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, file := range [][]byte{b, resign(t, CheckpointVersion, b)} {
			d, problem, _ := decodeCheckpoint(file, m)
			if problem != "" {
				if d != nil {
					t.Fatal("a refused checkpoint returned data")
				}
				continue
			}
			s := allocator.MustNew(m, allocator.Options{})
			if err := s.Restore(d.snap); err != nil {
				if len(s.Live()) != 0 {
					t.Fatal("a refused restore left allocations")
				}
				continue
			}
			// What restored encodes back and decodes to the same state.
			again, err := encodeCheckpoint(m, d.pods, d.claims, s.Snapshot())
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			d2, problem, err := decodeCheckpoint(again, m)
			if problem != "" {
				t.Fatalf("re-decode: %s: %v", problem, err)
			}
			s2 := allocator.MustNew(m, allocator.Options{})
			if err := s2.Restore(d2.snap); err != nil {
				t.Fatalf("re-restore: %v", err)
			}
			if !equalStrings(snapSummary(s.Snapshot()), snapSummary(s2.Snapshot())) {
				t.Fatalf("round trip changed the state")
			}
		}
	})
}

// TestOpenBoundsTheCheckpointRead: a checkpoint path that is not a regular
// file (a FIFO, a link to /dev/zero, a directory) or a file longer than
// MaxCheckpointBytes is refused at once with a CheckpointError naming it,
// never read without end.
func TestOpenBoundsTheCheckpointRead(t *testing.T) {
	m := smallMachine(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	zero := filepath.Join(dir, "zero")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o700))
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxCheckpointBytes+1)) // sparse: no disk used
	require.NoError(t, f.Close())
	for _, p := range []string{fifo, zero, sub, big} {
		done := make(chan error, 1)
		go func() {
			n, err := Open(m, p, NodeOptions{})
			if n != nil {
				err = fmt.Errorf("opened: %v", err)
			}
			done <- err
		}()
		select {
		case err := <-done:
			var ce *CheckpointError
			require.ErrorAs(t, err, &ce, p)
			require.Equal(t, p, ce.Path)
			require.Contains(t, err.Error(), "cannot be read")
			if p == big {
				require.ErrorIs(t, err, readfile.ErrTooLarge)
			} else {
				require.ErrorIs(t, err, readfile.ErrNotRegular)
			}
		case <-time.After(30 * time.Second): // a hang, not a speed bound
			t.Fatalf("Open(%s) hangs", p)
		}
	}
}
