package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/cmd/numaplan/internal/sim"
)

func TestSimulate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out", "sim")
	r := runArgs(t, "simulate", "--nodes", "20", "--pods", "300", "--seed", "3", "--out", dir)
	require.Equal(t, exitOK, r.status, r.stderr)
	lines := strings.Split(r.stdout, "\n")
	require.GreaterOrEqual(t, len(lines), 6, r.stdout)
	assert.True(t, strings.HasPrefix(lines[0], "| setup | placed | AdmissionErrors (pods) | cross-NUMA |"), lines[0])
	assert.True(t, strings.HasPrefix(lines[2], "| a: NUMA-blind + kubelet single-numa-node | "), lines[2])
	assert.True(t, strings.HasPrefix(lines[3], "| b: NUMA-blind + kubelet best-effort | "), lines[3])
	assert.True(t, strings.HasPrefix(lines[4], "| c: numaplace | "), lines[4])
	// numaplace's node agent never refuses the scheduler's decision.
	assert.Equal(t, "0 (0)", strings.TrimSpace(strings.Split(lines[4], "|")[3]))
	assert.Contains(t, r.stdout, "Wrote summary.md, series.csv and the plots gpu-allocation.png/.svg and admission-crossnuma.png/.svg in "+dir+"\n")
	for _, f := range []string{"summary.md", "series.csv", "gpu-allocation.png", "gpu-allocation.svg",
		"admission-crossnuma.png", "admission-crossnuma.svg"} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, f)
		assert.Positive(t, st.Size(), f)
	}
	summary, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	require.NoError(t, err)
	assert.Contains(t, string(summary), "Trace (seed 3): 300 pods")
	// Progress and the end of each setup on standard error.
	for _, s := range sim.AllSetups {
		assert.Contains(t, r.stderr, "simulate: "+s.String()+": done, 300/300 pods arrived")
	}

	// The same flags give the same table, but for the latencies (the last
	// column).
	again := runArgs(t, "simulate", "--nodes", "20", "--pods", "300", "--seed", "3", "--out", dir, "--setups", "c")
	require.Equal(t, exitOK, again.status, again.stderr)
	cut := func(line string) string { return line[:strings.LastIndex(strings.TrimSuffix(line, " |"), "|")] }
	assert.Equal(t, cut(lines[4]), cut(strings.Split(again.stdout, "\n")[2]))
}

func TestSimulateDefaultFolder(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	r := runArgs(t, "simulate", "--nodes", "4", "--pods", "20", "--setups", "b")
	require.Equal(t, exitOK, r.status, r.stderr)
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.True(t, strings.HasPrefix(entries[0].Name(), "numaplan-simulate-"), entries[0].Name())
	assert.Contains(t, r.stdout, " in "+filepath.Join(tmp, entries[0].Name())+"\n")
	assert.FileExists(t, filepath.Join(tmp, entries[0].Name(), "summary.md"))
}

func TestSimulateBadFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "0"}, "--nodes 0: want 1 to"},
		{[]string{"--pods", "-3"}, "--pods -3: want 1 to"},
		{[]string{"--nodes", "x"}, `invalid value "x" for flag -nodes`},
		{[]string{"--seed", "-1"}, `invalid value "-1" for flag -seed`},
		{[]string{"--setups", "a,d"}, `--setups "a,d": unknown setup "d" (want a, b or c)`},
		{[]string{"--setups", "c,c"}, `--setups "c,c": setup "c" given twice`},
		{[]string{"--setups", ""}, `--setups "": unknown setup ""`},
		{[]string{"--frobnicate"}, "flag provided but not defined: -frobnicate"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			r := runArgs(t, append([]string{"simulate", "--out", dir}, tt.args...)...)
			assert.Equal(t, exitUsage, r.status)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, tt.want)
			assert.NoDirExists(t, dir, "nothing is written for bad flags")
		})
	}
}

func TestSimulateUnwritableFolder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	r := runArgs(t, "simulate", "--nodes", "2", "--pods", "5", "--out", filepath.Join(file, "sub"))
	assert.Equal(t, exitFailure, r.status)
	assert.Contains(t, r.stderr, "numaplan simulate: creating the output folder "+filepath.Join(file, "sub")+": ")
}

func TestSimulateHelp(t *testing.T) {
	r := runArgs(t, "help", "simulate")
	require.Equal(t, exitOK, r.status)
	assert.True(t, strings.HasPrefix(r.stdout,
		"Usage: numaplan simulate [--out DIR] [--nodes N] [--pods P] [--seed S] [--setups a,b,c]\n"), r.stdout)
	for _, f := range []string{"-out DIR", "-nodes N", "-pods P", "-seed S", "-setups a,b,c"} {
		assert.Contains(t, r.stdout, f)
	}
}
