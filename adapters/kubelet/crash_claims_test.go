package kubelet

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Environment of the child process of TestClaimsSurviveCrashes.
const claimCrashChildEnv = "NUMAPLACE_CLAIM_CRASH_CHILD" // the checkpoint's path

// claimOp is step n of the claim crash sequence: claim k = n/2 is held
// (GPU k%4) at even steps and released at odd ones.
func claimOp(n *Node, step int) error {
	k := step / 2
	uid := "uid-" + strconv.Itoa(k)
	if step%2 == 0 {
		return n.HoldClaim(ClaimHold{UID: uid, Namespace: "ns", Name: "c" + strconv.Itoa(k), GPUs: []int{k % 4}})
	}
	return n.ReleaseClaim(uid)
}

// claimsAfter is what the node holds after steps 0..last.
func claimsAfter(last int) []string {
	if last < 0 || last%2 == 1 {
		return nil
	}
	return []string{"uid-" + strconv.Itoa(last/2)}
}

// TestClaimCrashChild is the child process of TestClaimsSurviveCrashes
// (it does nothing in a normal run): it plays the claim sequence on the
// checkpoint, saying each step once written and waiting for a line on
// stdin before the next, until it is killed.
func TestClaimCrashChild(t *testing.T) {
	path := os.Getenv(claimCrashChildEnv)
	if path == "" {
		t.Skip("the child process of TestClaimsSurviveCrashes")
	}
	n, err := Open(smallMachine(t), path, NodeOptions{})
	if err != nil {
		fmt.Printf("%serror %v\n", crashLine, err)
		return
	}
	in := bufio.NewReader(os.Stdin)
	for step := 0; ; step++ {
		if _, err := in.ReadString('\n'); err != nil {
			return
		}
		if err := claimOp(n, step); err != nil {
			fmt.Printf("%serror %v\n", crashLine, err)
			return
		}
		fmt.Printf("%sdone %d\n", crashLine, step)
	}
}

// TestClaimsSurviveCrashes: a process holding and releasing claims is
// killed with SIGKILL while it makes a step (the step after the last it
// reported written: it makes one step per line it reads); the checkpoint
// it leaves opens, and holds the claims of either step.
func TestClaimsSurviveCrashes(t *testing.T) {
	if os.Getenv(claimCrashChildEnv) != "" {
		t.Skip("in the child process")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	for round := range 8 {
		path := filepath.Join(t.TempDir(), "checkpoint.json")
		cmd := exec.Command(exe, "-test.run=^TestClaimCrashChild$")
		cmd.Env = append(os.Environ(), claimCrashChildEnv+"="+path)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(stdout)
		last := -1
		_, err = stdin.Write([]byte("go\n"))
		require.NoError(t, err)
		for last < 3+7*round && lines.Scan() {
			s, ok := strings.CutPrefix(lines.Text(), crashLine)
			if !ok {
				continue
			}
			require.False(t, strings.HasPrefix(s, "error"), "round %d: %s", round, s)
			last, err = strconv.Atoi(strings.TrimPrefix(s, "done "))
			require.NoError(t, err)
			_, err = stdin.Write([]byte("go\n")) // the next step, killed below once it is the last
			require.NoError(t, err)
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()

		n, err := Open(smallMachine(t), path, NodeOptions{})
		require.NoError(t, err, "round %d: the checkpoint opens after the crash", round)
		var got []string
		for _, c := range n.Claims() {
			got = append(got, c.UID)
		}
		require.Contains(t, [][]string{claimsAfter(last), claimsAfter(last + 1)}, got,
			"round %d: killed after step %d reported", round, last)
		// The node goes on from there: the claims' GPUs are held.
		for _, c := range n.Claims() {
			require.ErrorIs(t, n.HoldClaim(ClaimHold{UID: "other", Namespace: "ns", Name: "o", GPUs: c.GPUs}), ErrTopologyAffinity)
		}
	}
}
