package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answers decodes the JSON Lines of stdout.
func answers(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var a map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &a), "answer %q", line)
		out = append(out, a)
	}
	return out
}

func TestPlaceProtocol(t *testing.T) {
	in := strings.Join([]string{
		`{"op":"allocate","id":"a","cpus":4,"gpus":1,"memoryMiB":0,"policy":"SingleNUMANode","exclusive":"Required","fullPCPUs":false}`,
		`{"op":"allocate","id":"a","cpus":1}`,
		`{"op":"allocate","id":"b","cpus":16,"gpus":8,"policy":"Restricted"}`,
		`{"op":"release","id":"a"}`,
		`{"op":"release","id":"a"}`,
		`{"op":"allocate","id":"b","cpus":16,"gpus":8,"policy":"Restricted"}`,
		`not json`,
		`{"op":"allocate","id":"c","cpus":-1}`,
		`{"op":"allocate","id":"c"}`,
		`{"op":"allocate","id":"c","cpus":1,"policy":"Sideways"}`,
		`{"op":"allocate","id":"c","cpus":1,"exclusive":"Maybe"}`,
		`{"op":"fly","id":"c"}`,
		`{"id":"c","cpus":1}`,
		`{"op":"allocate","cpus":1}`,
		``,
		`{"op":"health","gpu":3,"healthy":false}`,
		`{"op":"health","gpu":42,"healthy":false}`,
		`{"op":"allocate","id":"m","cpus":2,"memoryMiB":1024,"policy":"SingleNUMANode"}`,
		`{"op":"allocate","id":"m","cpus":2,"memoryMiB":1024,"policy":"SingleNUMANode","exclusive":"Preferred"}`,
	}, "\n") + "\n"
	r := runWith(t, in, "place", "--preset", "dgx-h100")
	require.Equal(t, exitOK, r.status, r.stderr)
	assert.Empty(t, r.stderr)
	got := answers(t, r.stdout)
	require.Len(t, got, 19, "one answer per line")

	assert.Equal(t, map[string]any{"id": "a", "ok": true, "cpus": "0-1,112-113", "gpus": []any{0.0},
		"numaNodes": []any{0.0}}, got[0])
	assert.Equal(t, false, got[1]["ok"])
	assert.Contains(t, got[1]["error"], "already live")
	assert.Equal(t, false, got[2]["ok"], "7 GPUs free")
	assert.Contains(t, got[2]["error"], "8 GPUs wanted, 7 GPUs free")
	assert.Equal(t, map[string]any{"id": "a", "ok": true}, got[3])
	assert.Equal(t, false, got[4]["ok"])
	assert.Contains(t, got[4]["error"], "unknown allocation ID")
	assert.Equal(t, true, got[5]["ok"])
	assert.Equal(t, []any{0.0, 1.0}, got[5]["numaNodes"])
	assert.Len(t, got[5]["gpus"], 8)
	assert.Equal(t, "0-3,56-59,112-115,168-171", got[5]["cpus"])
	for i, want := range map[int]string{
		6: "bad JSON", 7: "cpus: cannot be negative (-1 CPUs)", 8: "every amount is zero",
		9: `unknown policy "Sideways"`, 10: `unknown exclusive "Maybe"`, 11: `unknown op "fly"`,
		12: `missing "op"`, 13: `missing "id"`, 14: "empty line",
	} {
		assert.Equal(t, false, got[i]["ok"], "line %d", i+1)
		assert.Contains(t, got[i]["error"], want, "line %d", i+1)
	}
	assert.Equal(t, "c", got[7]["id"], "the id of a bad line is echoed")
	assert.NotContains(t, got[6], "id", "no id when the line had none")
	assert.NotContains(t, got[13], "id")
	assert.Equal(t, map[string]any{"ok": true, "affected": []any{"b"}}, got[15])
	assert.Equal(t, false, got[16]["ok"])
	assert.Contains(t, got[16]["error"], "GPU 42 does not exist")
	// b spans both nodes, so both are shared: a SingleNUMANode pod is
	// refused under Required and admitted under Preferred, its memory
	// reported per NUMA node ID.
	assert.Equal(t, false, got[17]["ok"])
	assert.Contains(t, got[17]["error"], "NUMA node(s) 0,1 are shared by multi-node allocations")
	assert.Equal(t, true, got[18]["ok"], got[18])
	assert.Equal(t, map[string]any{"0": 1024.0}, got[18]["memoryMiB"])
}

func TestPlaceShow(t *testing.T) {
	in := `{"op":"allocate","id":"pod-1","cpus":2,"gpus":1,"policy":"SingleNUMANode"}` + "\n"
	r := runWith(t, in, "place", "--preset", "small-1s", "--show")
	require.Equal(t, exitOK, r.status, r.stderr)
	assert.Equal(t, `{"id":"pod-1","ok":true,"cpus":"0,8","gpus":[0],"numaNodes":[0]}`+"\n", r.stdout,
		"stdout stays JSON Lines")
	assert.Contains(t, r.stderr, "a = pod-1: SingleNUMANode, 2 CPUs 0,8, GPUs [0], NUMA nodes [0]")
	assert.Contains(t, r.stderr, "[aa][..]")
	assert.Contains(t, r.stderr, "[a] GPU 0")
}

func TestPlaceTopologyFileAndSparseIDs(t *testing.T) {
	topo := `{"numaNodes":[{"id":0,"socket":0,"cpus":"0-3"},{"id":33,"socket":0,"cpus":"4-7"}],
		"gpus":[{"id":0,"numaNode":33},{"id":1,"numaNode":-1}],"reservedCPUs":"0"}`
	file := filepath.Join(t.TempDir(), "m.json")
	require.NoError(t, os.WriteFile(file, []byte(topo), 0o644))
	in := strings.Join([]string{
		`{"op":"allocate","id":"a","cpus":4,"gpus":1,"policy":"SingleNUMANode"}`,
		`{"op":"allocate","id":"b","cpus":3,"policy":"SingleNUMANode"}`,
		`{"op":"allocate","id":"c","gpus":1,"policy":"SingleNUMANode"}`,
		`{"op":"allocate","id":"d","gpus":1}`,
	}, "\n")
	r := runWith(t, in, "place", "--topology", file)
	require.Equal(t, exitOK, r.status, r.stderr)
	got := answers(t, r.stdout)
	require.Len(t, got, 4, "the last line has no newline and is still answered")
	assert.Equal(t, map[string]any{"id": "a", "ok": true, "cpus": "4-7", "gpus": []any{0.0}, "numaNodes": []any{33.0}}, got[0])
	assert.Equal(t, "1-3", got[1]["cpus"], "reserved CPU 0 is never handed out")
	assert.Equal(t, false, got[2]["ok"], "the GPU of unknown node goes to None requests only")
	assert.Equal(t, map[string]any{"id": "d", "ok": true, "cpus": "", "gpus": []any{1.0}, "numaNodes": []any{}}, got[3])
}

func TestPlaceBadFlags(t *testing.T) {
	r := runArgs(t, "place", "--topology", "-")
	assert.Equal(t, exitUsage, r.status)
	assert.Contains(t, r.stderr, "standard input carries the operations")

	r = runArgs(t, "place", "--preset", "nope")
	assert.Equal(t, exitUsage, r.status)

	r = runArgs(t, "place", "--topology", filepath.Join(t.TempDir(), "missing.json"))
	assert.Equal(t, exitFailure, r.status)
	assert.Contains(t, r.stderr, "missing.json")
}

func TestPlaceLongLineAndCRLF(t *testing.T) {
	long := `{"op":"allocate","id":"x","pad":"` + strings.Repeat("a", maxLine) + `"}`
	in := long + "\r\n" + `{"op":"allocate","id":"y","cpus":1}` + "\r\n"
	r := runWith(t, in, "place", "--preset", "small-1s")
	require.Equal(t, exitOK, r.status, r.stderr)
	got := answers(t, r.stdout)
	require.Len(t, got, 2)
	assert.Contains(t, got[0]["error"], "line longer than")
	assert.Equal(t, true, got[1]["ok"])
}

// FuzzPlace feeds arbitrary input to place: it never panics, answers one
// valid JSON line per input line, and never loses an allocation it granted.
func FuzzPlace(f *testing.F) {
	f.Add([]byte(`{"op":"allocate","id":"a","cpus":4,"gpus":1,"policy":"SingleNUMANode"}` + "\n" + `{"op":"release","id":"a"}`))
	f.Add([]byte(`{"op":"allocate","id":"b","cpus":1,"devices":{"rdma":1},"memoryMiB":5,"fullPCPUs":true}`))
	f.Add([]byte(`{"op":"health","gpu":1,"healthy":false}` + "\n" + `{"op":"resize","id":"a","cpus":2}`))
	f.Add([]byte("\n\n{\"op\":\n[]\n{\"op\":\"allocate\",\"id\":\"\",\"cpus\":1e9}"))
	// Strictness: unknown, misplaced, miscased and duplicate fields, invalid UTF-8.
	f.Add([]byte(`{"op":"allocate","id":"a","cpus":1,"gpu":1}` + "\n" + `{"op":"allocate","id":"a","memoryMB":1}`))
	f.Add([]byte(`{"OP":"allocate","id":"a","cpus":1}` + "\n" + `{"op":"allocate","id":"a","cpus":1,"cpus":2}`))
	f.Add([]byte("{\"op\":\"allocate\",\"id\":\"\xff\",\"cpus\":1}\n{\"op\":\"release\",\"id\":\"\\ud800\"}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out, errOut bytes.Buffer
		status := run([]string{"place", "--preset", "dgx-a100"}, bytes.NewReader(in), &out, &errOut)
		if status != exitOK {
			t.Fatalf("status %d: %s", status, errOut.String())
		}
		lines := 0
		if len(in) > 0 {
			lines = bytes.Count(in, []byte("\n"))
			if in[len(in)-1] != '\n' {
				lines++
			}
		}
		got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if out.Len() == 0 {
			got = nil
		}
		if len(got) != lines {
			t.Fatalf("%d answers for %d lines", len(got), lines)
		}
		for _, g := range got {
			if !json.Valid([]byte(g)) {
				t.Fatalf("invalid JSON answer %q", g)
			}
		}
	})
}

func TestPlaceResize(t *testing.T) {
	in := strings.Join([]string{
		`{"op":"allocate","id":"a","cpus":4,"gpus":4,"policy":"SingleNUMANode"}`,
		`{"op":"resize","id":"a","cpus":8}`,
		`{"op":"resize","id":"a","cpus":2}`,
		`{"op":"resize","id":"a","cpus":150}`,
		`{"op":"resize","id":"zz","cpus":2}`,
		`{"op":"resize","id":"a"}`,
		`{"op":"release","id":"a"}`,
	}, "\n") + "\n"
	r := runWith(t, in, "place", "--preset", "dgx-h100")
	require.Equal(t, exitOK, r.status, r.stderr)
	got := answers(t, r.stdout)
	require.Len(t, got, 7)
	assert.Equal(t, "0-1,112-113", got[0]["cpus"])
	assert.Equal(t, map[string]any{"id": "a", "ok": true, "cpus": "0-3,112-115", "gpus": []any{0.0, 1.0, 2.0, 3.0},
		"numaNodes": []any{0.0}}, got[1], "grown in place")
	assert.Equal(t, "0,112", got[2]["cpus"], "shrunk in place")
	assert.Equal(t, false, got[3]["ok"])
	assert.Contains(t, got[3]["error"], "keeps it on its NUMA node 0, which has 110 CPUs free besides the 2 CPUs it holds: 38 CPUs short",
		"SingleNUMANode cannot grow past its node, and the refusal says so about its own node")
	assert.Contains(t, got[4]["error"], "unknown allocation ID")
	assert.Contains(t, got[5]["error"], `missing "cpus"`)
	assert.Equal(t, true, got[6]["ok"], "the refused resize left the allocation live")
}

// Lines are read strictly: an unknown field (or one its op does not read)
// is refused, naming it and suggesting the field one edit away or named by
// an alias; field names are case-sensitive; a duplicate field and a string
// that is not valid UTF-8 are refused. Nothing allocated before is lost.
func TestPlaceStrictLines(t *testing.T) {
	cases := []struct {
		line, want string
		id         any // the id echoed, nil for none
	}{
		{`{"op":"allocate","id":"s","cpus":1,"gpu":1}`, `field "gpu" is not read by op "allocate"; did you mean "gpus"?`, "s"},
		{`{"op":"allocate","id":"s","cpus":1,"memoryMB":5}`, `unknown field "memoryMB"; did you mean "memoryMiB"?`, "s"},
		{`{"op":"allocate","id":"s","cpus":1,"numaTopologyPolicy":"SingleNUMANode"}`, `unknown field "numaTopologyPolicy"; did you mean "policy"?`, "s"},
		{`{"op":"allocate","id":"s","cpus":1,"singleNUMANodeExclusive":"Preferred"}`, `unknown field "singleNUMANodeExclusive"; did you mean "exclusive"?`, "s"},
		{`{"op":"allocate","id":"s","cpus":1,"aliyun.com/gpu":1}`, `unknown field "aliyun.com/gpu"; did you mean "gpus"?`, "s"},
		{`{"op":"allocate","id":"s","CPUs":1}`, `unknown field "CPUs"; did you mean "cpus"?`, "s"},
		{`{"OP":"allocate","id":"s","cpus":1}`, `unknown field "OP"; did you mean "op"?`, "s"},
		{`{"op":"allocate","ID":"s","cpus":1}`, `unknown field "ID"; did you mean "id"?`, nil},
		{`{"op":"allocate","id":"s","cpus":1,"colour":"red"}`, `unknown field "colour"`, "s"},
		{`{"op":"release","id":"s","cpus":1}`, `field "cpus" is not read by op "release"`, "s"},
		{`{"op":"resize","id":"a","cpus":2,"gpus":1}`, `field "gpus" is not read by op "resize"`, "a"},
		{`{"op":"health","gpus":1,"healthy":false}`, `field "gpus" is not read by op "health"; did you mean "gpu"?`, nil},
		{`{"op":"allocate","id":"s","cpus":1,"cpus":2}`, `duplicate field "cpus"`, "s"},
		{`{"op":"allocate","op":"release","id":"s","cpus":1}`, `duplicate field "op"`, "s"},
		{`{"op":"allocate","id":"s","cpus":1,"devices":{"rdma":1,"rdma":1}}`, `duplicate field "rdma" in devices`, "s"},
		{"{\"op\":\"allocate\",\"id\":\"s\",\"cpus\":1,\"policy\":\"None\xc3\"}", `a string at policy is not valid UTF-8`, "s"},
		{`{"op":"allocate","id":"s","cpus":1,"policy":"\ud83d"}`, `a string at policy is not valid UTF-8`, "s"},
		{`{"op":"allocate","id":"s","cpus":"one"}`, `field "cpus": want int, got string`, "s"},
		{`{"op":"allocate","id":"s","cpus":}`, `malformed JSON`, "s"},
		{`{"op":7,"id":"s"}`, `field "op": want a string`, "s"},
		{`{"op":"allocate","id":7,"cpus":1}`, `field "id": want string`, nil},
		{`{"op":"allocate","id":{"x":"s"},"cpus":1}`, `field "id"`, nil},
		// A misplaced field is named with its suggestion whatever its value.
		{`{"op":"allocate","id":"s","cpus":1,"gpu":"two"}`, `field "gpu" is not read by op "allocate"; did you mean "gpus"?`, "s"},
		{`{"op":"allocate","id":"s","cpus":1,"gpu":{"n":1}}`, `field "gpu" is not read by op "allocate"; did you mean "gpus"?`, "s"},
		{`{"op":"health","id":"s","gpus":[3],"healthy":false}`, `field "gpus" is not read by op "health"; did you mean "gpu"?`, "s"},
		{`{"op":"resize","id":"s","gpus":"x","cpus":2}`, `field "gpus" is not read by op "resize"`, "s"},
		{`{"op":"release","id":"s","cpu":null}`, `unknown field "cpu"; did you mean "cpus" or "gpu"?`, "s"},
		{`{"op":"allocate","id":"s","id":"t","cpus":1}`, `duplicate field "id"`, nil},
		{"{\"op\":\"allocate\",\"id\":\"s\xff\",\"cpus\":1}", `a string at id is not valid UTF-8`, nil},
		{`{"op":"allocate","id":"s\udc00","cpus":1}`, `a string at id is not valid UTF-8`, nil},
		{"{\"op\":\"allocate\",\"id\":\"s\",\"cpus\":1,\"devices\":{\"rd\xffma\":1}}", `is not valid UTF-8`, "s"},
		{`{"op":"allocate","id":"s","cpus":1,"policy":"` + strings.Repeat("x", 500) + `"}`,
			`unknown policy "` + strings.Repeat("x", 64) + `"... (500 bytes)`, "s"},
	}
	lines := []string{`{"op":"allocate","id":"a","cpus":4,"gpus":1,"policy":"SingleNUMANode"}`}
	for _, c := range cases {
		lines = append(lines, c.line)
	}
	lines = append(lines, `{"op":"release","id":"a"}`)
	r := runWith(t, strings.Join(lines, "\n")+"\n", "place", "--preset", "dgx-h100")
	require.Equal(t, exitOK, r.status, r.stderr)
	got := answers(t, r.stdout)
	require.Len(t, got, len(cases)+2)
	require.Equal(t, true, got[0]["ok"])
	for i, c := range cases {
		a := got[i+1]
		assert.Equal(t, false, a["ok"], c.line)
		assert.Contains(t, a["error"], c.want, c.line)
		assert.Equal(t, c.id, a["id"], c.line)
	}
	assert.Equal(t, map[string]any{"id": "a", "ok": true}, got[len(got)-1], "the allocation made before survived")
}

// TestPlaceErrorsCutLongValues: an error answer quotes the line's values
// (an unknown ID, a class, a field) cut to 64 bytes; the id field of the
// answer itself is the id, whole.
func TestPlaceErrorsCutLongValues(t *testing.T) {
	long := strings.Repeat("L", 300)
	lines := []string{
		`{"op":"release","id":"` + long + `"}`,
		`{"op":"resize","id":"` + long + `","cpus":2}`,
		`{"op":"allocate","id":"` + long + `","cpus":100000}`,
		`{"op":"allocate","id":"` + long + `","cpus":-1}`,
		`{"op":"allocate","id":"a","cpus":1,"devices":{"` + long + `":1}}`,
		`{"op":"health","class":"` + long + `","device":"x","healthy":false}`,
		`{"op":"health","class":"rdma","device":"` + long + `","healthy":false}`,
		`{"op":"allocate","id":"a","cpus":1,"` + long + `":1}`,
		`{"op":"allocate","id":"a","cpus":1,"devices":{"x":{"` + long + `":1}}}`,
		`{"op":"` + long + `","id":"a"}`,
	}
	r := runWith(t, strings.Join(lines, "\n")+"\n", "place", "--preset", "dgx-h100")
	require.Equal(t, exitOK, r.status, r.stderr)
	got := answers(t, r.stdout)
	require.Len(t, got, len(lines))
	for i, a := range got {
		assert.Equal(t, false, a["ok"], lines[i])
		msg, _ := a["error"].(string)
		assert.NotEmpty(t, msg, lines[i])
		assert.NotContains(t, msg, strings.Repeat("L", 65), "line %d: %.200s", i+1, msg)
	}
	assert.Equal(t, long, got[0]["id"], "the answer's id is the id")
}
