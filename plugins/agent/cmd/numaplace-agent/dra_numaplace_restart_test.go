package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNUMAPlaceDRARestarts restarts numaplace-scheduler (SIGTERM, then
// SIGKILL), the agent (SIGKILL) and the kubelet (SIGTERM, then SIGKILL)
// while a pod placed by numaplace-scheduler runs with two claims (2 GPUs
// and the NIC of NUMA node 1, 1 CPU, SingleNUMANode). After each restart
// the pod keeps its container (same ID, no restart), its decision, its
// claims their allocations and reservations, and its container and the
// kubelet's pod-resources API exactly what they showed before; then a new
// SingleNUMANode pod with a claim for 2 GPUs is placed by the restarted
// components on the two other GPUs of node 1's other switch (6 and 7),
// none of the held pod's, and no device is in two claims.
//
// With the default kube-scheduler the test fails at once: the held pod's
// claims get GPUs 0 and 1 (first fit).
func TestNUMAPlaceDRARestarts(t *testing.T) {
	d := startDRACluster(t, draClusterOptions{agent: true, tree: splitTree(), numaplace: true})
	client := d.client
	ctx := context.Background()
	devs := d.treeDevices(t)
	gpuTemplate(t, d, "held-gpus", 2)
	nicTemplate(t, d, "held-nic", 1)
	gpuTemplate(t, d, "next-gpus", 2)

	pod, claims := d.runNUMAPod(t, numaDRAPod("held", "SingleNUMANode", 1,
		fromTemplate("gpus", "held-gpus"), fromTemplate("nic", "held-nic")), "gpus", "nic")
	gpus, nics := claimedGPUs(t, devs, claims...)
	require.Equal(t, []int{4, 5}, gpus, "held's GPUs: node 1's under the NIC's switch (first fit: 0 and 1)")
	dec, view := d.checkDecided(t, pod, devs, gpus, nics, claims...)
	ctr := containerIDs(t, pod)["main"]
	d.stage("held runs with its claims")

	check := func(round string) {
		now := waitRunning(t, client, "held")
		require.Equal(t, pod.UID, now.UID)
		require.Equal(t, ctr, containerIDs(t, now)["main"], "held's container after the %s", round)
		require.Zero(t, now.Status.ContainerStatuses[0].RestartCount, "held's restarts after the %s", round)
		require.Equal(t, pod.Annotations["numaplace.io/allocation"], now.Annotations["numaplace.io/allocation"],
			"held's decision after the %s", round)
		for _, c := range claims {
			got := claimNamed(t, d, c.Name)
			require.NotNil(t, got.Status.Allocation, "claim %s after the %s", c.Name, round)
			require.Equal(t, c.Status.Allocation.Devices.Results, got.Status.Allocation.Devices.Results,
				"claim %s's allocation after the %s", c.Name, round)
			require.Len(t, got.Status.ReservedFor, 1, "claim %s's reservations after the %s", c.Name, round)
			require.Equal(t, pod.UID, got.Status.ReservedFor[0].UID, "claim %s's reservation after the %s", c.Name, round)
		}
		// The new kubelet lists the pod's claims once it has read them
		// back; the view is then what it was.
		var after containerView
		require.Eventually(t, func() bool {
			after = d.viewOf(t, now)
			return len(after.ListDynamic) == len(view.ListDynamic)
		}, 60*time.Second, 200*time.Millisecond, "held's pod-resources after the %s: %+v", round, after)
		require.Equal(t, view, after, "held's container and pod-resources after the %s", round)
		again, againView := d.checkDecided(t, now, devs, gpus, nics, claims...)
		require.Equal(t, dec, again)
		require.Equal(t, view, againView)

		name := "next-" + round
		next, nextClaims := d.runNUMAPod(t, numaDRAPod(name, "SingleNUMANode", 0, fromTemplate("gpus", "next-gpus")), "gpus")
		nextGPUs, _ := claimedGPUs(t, devs, nextClaims...)
		require.Equal(t, []int{6, 7}, nextGPUs, "%s's GPUs: node 1's other switch, none of held's", name)
		d.checkDecided(t, next, devs, nextGPUs, nil, nextClaims...)
		d.requireNoDoubleAllocation(t)
		d.deleteNUMAPod(t, name, nextClaims...)
		d.stage(fmt.Sprintf("checks after the %s passed", round))
	}

	d.restartNUMAPlaceScheduler(t, false)
	check("scheduler-sigterm")
	d.restartNUMAPlaceScheduler(t, true)
	check("scheduler-sigkill")

	d.agentProc.kill9()
	d.agentProc = d.startAgentProcess(t)
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(d.agentProc.log)
		return strings.Contains(string(data), "DRA driver registered")
	}, 60*time.Second, 100*time.Millisecond, "the restarted agent's DRA driver did not register (log: %s)", d.agentProc.log)
	d.waitDriverConnected(t)
	d.treeDevices(t) // its slices published again
	check("agent-sigkill")

	// The kubelet's restart has the driver's slices published again; the
	// next pod is made once they are (finding 7 of i24-e2e: a pod refused
	// while they were gone was not tried again within a minute).
	d.restartKubelet(t)
	d.waitDriverConnected(t)
	d.treeDevices(t)
	check("kubelet-sigterm")
	d.killKubelet(t)
	d.waitDriverConnected(t)
	d.treeDevices(t)
	check("kubelet-sigkill")

	// Deleted, its claims go and their devices are free: a pod for all 8
	// GPUs runs.
	d.deleteNUMAPod(t, "held", claims...)
	gpuTemplate(t, d, "all-gpus", 8)
	all, allClaims := d.runNUMAPod(t, numaDRAPod("all", "Restricted", 0, fromTemplate("gpus", "all-gpus")), "gpus")
	allGPUs, _ := claimedGPUs(t, devs, allClaims...)
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, allGPUs)
	d.checkDecided(t, all, devs, allGPUs, nil, allClaims...)
	d.deleteNUMAPod(t, "all", allClaims...)
	_, err := client.CoreV1().Pods("default").Get(ctx, "held", metav1.GetOptions{})
	require.Error(t, err)
}
