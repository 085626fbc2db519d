package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNodeContainerdCDI checks the DRA cluster's containerd on its own:
// with CDI on (nodeContainerdOptions.cdi) it injects a CDI device named in
// a container's config from a spec in its CDI directory, as the kubelet
// names a prepared claim's devices: the device's node from the node's
// /dev (a stand-in RDMA node) and its environment, nothing else of the
// stand-ins.
func TestNodeContainerdCDI(t *testing.T) {
	e := startNodeContainerdWith(t, nodeContainerdOptions{cdi: true, devices: standInNICs})
	spec := `{"cdiVersion":"0.6.0","kind":"numaplace.test/nic","devices":[{"name":"one",` +
		`"containerEdits":{"env":["NUMAPLACE_TEST=cdi"],"deviceNodes":[{"path":"/dev/infiniband/uverbs1"}]}}]}`
	require.NoError(t, os.WriteFile(filepath.Join(e.cdiDir, "numaplace-test.json"), []byte(spec), 0o644))
	p, err := e.runPod(t, "cdi", nil)
	require.NoError(t, err)
	cfg, err := json.Marshal(map[string]any{
		"metadata":    map[string]any{"name": "main"},
		"image":       map[string]any{"image": e2eImage},
		"command":     []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"},
		"log_path":    "main.log",
		"CDI_devices": []map[string]string{{"name": "numaplace.test/nic=one"}},
	})
	require.NoError(t, err)
	path := filepath.Join(e.dir, "ctr-cdi.json")
	require.NoError(t, os.WriteFile(path, cfg, 0o600))
	out, err := e.crictl("create", p.id, path, filepath.Join(e.dir, "pod-cdi.json"))
	require.NoError(t, err, "crictl create: %s", out)
	ctr := lastLine(out)
	out, err = e.crictl("start", ctr)
	require.NoError(t, err, "crictl start: %s", out)
	require.Equal(t, "cdi", e.envOf(t, ctr)["NUMAPLACE_TEST"])
	out, err = e.crictl("exec", ctr, "ls", "/dev/infiniband")
	require.NoError(t, err, out)
	require.Equal(t, []string{"uverbs1"}, strings.Fields(out), "the container's /dev/infiniband")
	require.Equal(t, "1:3 character special file", e.exec(t, ctr, "stat", "-c", "%t:%T %F", "/dev/infiniband/uverbs1"))
	e.removePod(t, p)
}
