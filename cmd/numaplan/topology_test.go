package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/topology"
)

func presetPicture(t *testing.T, name string) string {
	t.Helper()
	m, err := topology.Preset(name)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, m.Picture(&buf, nil))
	return buf.String()
}

func presetJSON(t *testing.T, name string) string {
	t.Helper()
	m, err := topology.Preset(name)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, m.WriteJSON(&buf))
	return buf.String()
}

func TestTopologyPreset(t *testing.T) {
	for _, name := range topology.PresetNames() {
		r := runArgs(t, "topology", "--preset", name)
		require.Equal(t, exitOK, r.status, "%s: %s", name, r.stderr)
		assert.Empty(t, r.stderr)
		assert.Equal(t, presetPicture(t, name), r.stdout, name)
	}
	r := runArgs(t, "topology", "-preset=dgx-a100")
	require.Equal(t, exitOK, r.status)
	assert.Contains(t, r.stdout, "  node 3: 128 GiB, 16 cores, CPUs 48-63,176-191\n")
}

func TestTopologyJSON(t *testing.T) {
	r := runArgs(t, "topology", "--preset", "dgx-a100", "--json")
	require.Equal(t, exitOK, r.status, r.stderr)
	m, err := topology.ParseJSON([]byte(r.stdout))
	require.NoError(t, err)
	want, _ := topology.Preset("dgx-a100")
	assert.Equal(t, want.Spec(), m.Spec())
	assert.Equal(t, presetJSON(t, "dgx-a100"), r.stdout)
}

func TestTopologyFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "h100.json")
	require.NoError(t, os.WriteFile(file, []byte(presetJSON(t, "dgx-h100")), 0o600))

	r := runArgs(t, "topology", "--topology", file)
	require.Equal(t, exitOK, r.status, r.stderr)
	assert.Equal(t, presetPicture(t, "dgx-h100"), r.stdout)

	r = runArgs(t, "topology", "--topology", file, "--json")
	require.Equal(t, exitOK, r.status, r.stderr)
	assert.Equal(t, presetJSON(t, "dgx-h100"), r.stdout, "JSON round trip through a file")

	r = runWith(t, presetJSON(t, "small-1s"), "topology", "--topology", "-")
	require.Equal(t, exitOK, r.status, r.stderr)
	assert.Equal(t, presetPicture(t, "small-1s"), r.stdout)

	// A hand-written file with the minimum the format requires.
	minimal := filepath.Join(dir, "minimal.json")
	require.NoError(t, os.WriteFile(minimal, []byte(`{"numaNodes":[{"id":0,"socket": -1, "cpus":"0-3"},{"id":2,"socket": -1, "cpus":""}]}`), 0o600))
	r = runArgs(t, "topology", "--topology", minimal)
	require.Equal(t, exitOK, r.status, r.stderr)
	assert.Contains(t, r.stdout, "NUMA placeholders (no CPUs, no memory): 2\n", "no CPUs and no memory: a placeholder")
}

func TestTopologyUnreadable(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.json")
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"numaNodes":[{"id":0,"socket": -1, "cpus":"0-3"},{"id":0,"socket": -1, "cpus":"4"}]}`), 0o600))
	notJSON := filepath.Join(dir, "notjson.json")
	require.NoError(t, os.WriteFile(notJSON, []byte("numa nodes: 2\n"), 0o600))
	plainFile := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plainFile, nil, 0o600))

	tests := []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"missing file", []string{"--topology", missing},
			[]string{"cannot read the topology file " + missing + ": no such file or directory"}},
		{"directory as file", []string{"--topology", dir},
			[]string{"cannot read the topology file " + dir + ": not a regular file (a directory)"}},
		{"invalid topology", []string{"--topology", bad},
			[]string{"topology file " + bad + " is not a usable topology", "node ID 0 is also used"}},
		{"not JSON", []string{"--topology", notJSON},
			[]string{"topology file " + notJSON + " is not a usable topology", "cannot decode"}},
		{"empty stdin", []string{"--topology", "-"},
			[]string{"topology JSON on standard input is not a usable topology"}},
		{"missing root", []string{"--root", missing},
			[]string{"cannot read the system tree under " + missing + ": no such file or directory"}},
		{"root is a file", []string{"--root", plainFile},
			[]string{"the system tree under " + plainFile, plainFile + " is not a directory"}},
		{"root without sys", []string{"--root", dir},
			[]string{"cannot discover the topology of the system tree under " + dir + ": "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runArgs(t, append([]string{"topology"}, tt.args...)...)
			assert.Equal(t, exitFailure, r.status)
			assert.Empty(t, r.stdout)
			assert.True(t, strings.HasPrefix(r.stderr, "numaplan topology: "), r.stderr)
			for _, w := range tt.want {
				assert.Contains(t, r.stderr, w)
			}
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		})
	}
}

func TestTopologySourceErrors(t *testing.T) {
	r := runArgs(t, "topology", "--preset", "dgx-h100", "--root", "/")
	assert.Equal(t, exitUsage, r.status)
	assert.Contains(t, r.stderr, "choose one of --preset, --topology and --root")

	r = runArgs(t, "topology", "--preset", "dgx-h200")
	assert.Equal(t, exitUsage, r.status)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, `unknown topology preset "dgx-h200"`)
	assert.Contains(t, r.stderr, "dgx-h100, epyc-2s-nps4")
	assert.Contains(t, r.stderr, "Run 'numaplan help topology' for usage.")
}

// writeSysfs writes a minimal Linux system tree: one NUMA node with CPUs 0-1.
func writeSysfs(t *testing.T, root string) {
	t.Helper()
	files := map[string]string{
		"sys/devices/system/node/online":                            "0\n",
		"sys/devices/system/node/possible":                          "0\n",
		"sys/devices/system/node/node0/cpulist":                     "0-1\n",
		"sys/devices/system/node/node0/distance":                    "10\n",
		"sys/devices/system/node/node0/meminfo":                     "Node 0 MemTotal:       4194304 kB\n",
		"sys/devices/system/cpu/online":                             "0-1\n",
		"sys/devices/system/cpu/possible":                           "0-1\n",
		"sys/devices/system/cpu/present":                            "0-1\n",
		"sys/devices/system/cpu/cpu0/topology/physical_package_id":  "0\n",
		"sys/devices/system/cpu/cpu1/topology/physical_package_id":  "0\n",
		"sys/devices/system/cpu/cpu0/topology/thread_siblings_list": "0-1\n",
		"sys/devices/system/cpu/cpu1/topology/thread_siblings_list": "0-1\n",
		"sys/devices/system/cpu/cpu0/topology/core_cpus_list":       "0-1\n",
		"sys/devices/system/cpu/cpu1/topology/core_cpus_list":       "0-1\n",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

func TestTopologyRoot(t *testing.T) {
	root := t.TempDir()
	writeSysfs(t, root)
	m, err := topology.Discover(root)
	r := runArgs(t, "topology", "--root", root)
	if err != nil {
		// Discovery cannot read this tree (yet): the command must say so.
		assert.Equal(t, exitFailure, r.status)
		assert.Contains(t, r.stderr, root)
		t.Skipf("topology.Discover does not read the minimal tree: %v", err)
	}
	require.Equal(t, exitOK, r.status, r.stderr)
	var buf bytes.Buffer
	require.NoError(t, m.Picture(&buf, nil))
	assert.Equal(t, buf.String(), r.stdout)
	assert.Contains(t, r.stdout, "  node 0: ")

	// The sys directory itself is accepted too, with or without a final
	// slash, and gives the same machine.
	for _, dir := range []string{filepath.Join(root, "sys"), filepath.Join(root, "sys") + "/"} {
		r = runArgs(t, "topology", "--root", dir)
		require.Equal(t, exitOK, r.status, r.stderr)
		assert.Equal(t, buf.String(), r.stdout, dir)
	}
	// A directory that holds neither is refused with a message naming it.
	empty := t.TempDir()
	r = runArgs(t, "topology", "--root", empty)
	assert.Equal(t, exitFailure, r.status)
	assert.Contains(t, r.stderr, empty)
	assert.Contains(t, r.stderr, "neither the online file nor any cpuN directory exists")
}

func TestTopologyThisMachine(t *testing.T) {
	// Without a source flag numaplan reads this machine; whatever the host
	// has, it prints a picture or a one-line error naming /.
	r := runArgs(t, "topology")
	switch r.status {
	case exitOK:
		assert.Contains(t, r.stdout, "  node ")
		assert.Empty(t, r.stderr)
	case exitFailure:
		assert.Contains(t, r.stderr, "this machine (the system tree under /)")
	default:
		t.Fatalf("status %d: %s", r.status, r.stderr)
	}
}
