package kubelet

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCheckpointBeforeRDMADiscovery: a version-1 checkpoint written on a
// node before discovery found its RDMA NICs opens on the machine with them,
// pods and all; a version-2 file (written by a build that knew the NICs)
// whose fingerprint lacks them is another machine's, and so is a version-1
// file whose nodes or GPUs differ.
func TestCheckpointBeforeRDMADiscovery(t *testing.T) {
	before := smallMachineWith(t, false) // as discovery saw it before it found RDMA NICs
	n, path := openTemp(t, before)
	_, err := n.Admit(numaPod("a", 2, 1, "SingleNUMANode"))
	require.NoError(t, err)
	_, err = n.Admit(gpuPod("plain"))
	require.NoError(t, err)
	file, err := os.ReadFile(path)
	require.NoError(t, err)
	var f checkpointFile
	require.NoError(t, json.Unmarshal(file, &f))

	after := smallMachine(t)
	require.NotEqual(t, fingerprint(before), fingerprint(after), "the NICs change the fingerprint")

	p := filepath.Join(t.TempDir(), "v1.json")
	require.NoError(t, os.WriteFile(p, resign(t, 1, f.Data), 0o600))
	up, err := Open(after, p, NodeOptions{})
	require.NoError(t, err, "a version-1 file of the node before RDMA discovery")
	require.Equal(t, summary(n.Admissions()), summary(up.Admissions()))

	p = filepath.Join(t.TempDir(), "v2.json")
	require.NoError(t, os.WriteFile(p, resign(t, 2, f.Data), 0o600))
	_, err = Open(after, p, NodeOptions{})
	var ce *CheckpointError
	require.ErrorAs(t, err, &ce, "a version-2 file whose fingerprint lacks the NICs")
	require.Contains(t, ce.Problem, "written for another machine")

	// A version-1 file of a machine whose GPUs sit elsewhere stays refused.
	d := dataOf(t, resign(t, 1, f.Data))
	d["fingerprint"] = fingerprint(smallMachine(t)) + "00"
	p = filepath.Join(t.TempDir(), "other.json")
	require.NoError(t, os.WriteFile(p, resign(t, 1, mustJSON(t, d)), 0o600))
	_, err = Open(after, p, NodeOptions{})
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Problem, "written for another machine")
}
