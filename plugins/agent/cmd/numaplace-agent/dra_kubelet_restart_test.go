package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// killKubelet stops the kubelet with SIGKILL (its process group: nothing
// of its own cleanup runs) and starts it again with the same arguments,
// as restartKubelet does after a SIGTERM; it waits until the new kubelet
// renews the node's lease.
func (c *kubeletCluster) killKubelet(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(-c.kubelet.cmd.Process.Pid, syscall.SIGKILL)
	<-c.kubelet.done
	c.kubeletRuns++
	since := time.Now()
	c.kubelet = startHostProcess(t, c.e.dir, fmt.Sprintf("kubelet-%d", c.kubeletRuns), exec.Command(c.e.nsenter, c.e.kubeletArgs...))
	require.Eventually(t, func() bool {
		l, err := c.client.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), kubeletNode, metav1.GetOptions{})
		return err == nil && !c.kubelet.exited() && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since)
	}, 90*time.Second, 200*time.Millisecond, "the kubelet started after kill -9 does not renew the node's lease (log: %s)", c.kubelet.log)
}

// TestDRAKubeletRestart restarts the kubelet while a pod with a claim
// (2 GPUs and 1 NIC aligned by numaNode) runs, first stopped (SIGTERM),
// then killed (SIGKILL), then killed with the agent (both SIGKILL, the
// agent started after the kubelet). After each restart: the pod keeps its container
// (same ID, no restart), the claim its allocation and reservation, the
// container exactly its devices and the claim its CDI spec; the new
// kubelet's pod-resources API names the same devices; the driver is
// registered with the new kubelet, once (it is never unregistered), and a
// pod with a claim for the two other GPUs runs and is unprepared when
// deleted; a claim for all four GPUs
// is not allocated; the agent's checkpoint still holds the claim and the
// node refuses to prepare a claim given one of its GPUs by hand, naming
// it. Last, deleting the pod unprepares its claim (its CDI spec goes, the
// checkpoint forgets it) and frees its devices: a pod for all four GPUs
// runs on them.
func TestDRAKubeletRestart(t *testing.T) {
	d := startDRACluster(t, draClusterOptions{agent: true})
	client, e := d.client, d.e
	ctx := context.Background()
	devs := d.draDevices(t)

	createTemplate(t, client, "aligned", resourcev1.DeviceClaim{
		Requests:    []resourcev1.DeviceRequest{exactly("gpu", draGPUClass, 2), exactly("nic", draNICClass, 1)},
		Constraints: []resourcev1.DeviceConstraint{matchAttribute(attrNUMANode, "gpu", "nic")},
	})
	pod, claim := d.runDRAPod(t, draPod("held", fromTemplate("devices", "aligned")), "devices")
	got := allocated(claim, draDriver)
	require.Len(t, got["gpu"], 2, "claim %s: %v", claim.Name, got)
	require.Len(t, got["nic"], 1, "claim %s: %v", claim.Name, got)
	numa := *devs[got["nic"][0]].Attributes[attrNUMANode].IntValue
	for _, g := range got["gpu"] {
		require.Equal(t, numa, *devs[g].Attributes[attrNUMANode].IntValue, "claim %s's GPU %s is not on its NIC's NUMA node", claim.Name, g)
	}
	ctr := d.checkDRAContainer(t, pod, devs, allDevices(claim))
	resources := podDynamicResources(t, e, "held")
	require.Equal(t, claimResources(claim), resources, "the kubelet's pod-resources List for held")
	specs := cdiSpecsOf(t, e, claim)
	require.NotEmpty(t, specs, "no CDI spec names claim %s in %s", claim.Name, e.cdiDir)
	pool := claim.Status.Allocation.Devices.Results[0].Pool
	t.Logf("held: claim %s on NUMA node %d: %v; pod-resources: %v; CDI specs: %v", claim.Name, numa, got, resources, specs)
	d.stage("held runs with its claim")

	// Claims the scheduler cannot allocate while held holds its devices,
	// and the other NUMA node's two GPUs, free.
	createTemplate(t, client, "all-gpus", resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{exactly("gpu", draGPUClass, 4)}})
	createTemplate(t, client, "two-gpus", resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{exactly("gpu", draGPUClass, 2)}})

	// The intruders (claims given one of held's GPUs by hand) stay until
	// held is about to go: the kube-scheduler keeps the allocated devices
	// as a set, so deallocating a claim that shares a device with held's
	// would make it forget that held's claim has the device (a double
	// allocation only a hand-made claim can make).
	var intruders []string
	check := func(round string, gpu string) {
		// The pod keeps its container, not restarted.
		now := waitRunning(t, client, "held")
		require.Equal(t, pod.UID, now.UID)
		require.Equal(t, ctr, containerIDs(t, now)["main"], "held's container after the kubelet's %s", round)
		require.Zero(t, now.Status.ContainerStatuses[0].RestartCount, "held's restarts after the kubelet's %s", round)
		// The claim: the same allocation, reserved for held.
		c, err := client.ResourceV1().ResourceClaims("default").Get(ctx, claim.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, c.Status.Allocation, "claim %s after the kubelet's %s", claim.Name, round)
		require.Equal(t, claim.Status.Allocation.Devices.Results, c.Status.Allocation.Devices.Results,
			"claim %s's allocation after the kubelet's %s", claim.Name, round)
		require.Len(t, c.Status.ReservedFor, 1)
		require.Equal(t, pod.UID, c.Status.ReservedFor[0].UID)
		// The container sees the same devices; its CDI spec is kept.
		require.Equal(t, ctr, d.checkDRAContainer(t, now, devs, allDevices(claim)))
		require.Equal(t, specs, cdiSpecsOf(t, e, claim), "claim %s's CDI specs after the kubelet's %s", claim.Name, round)
		// The pod-resources API of the new kubelet names the same devices.
		var after []string
		require.Eventually(t, func() bool {
			after = podDynamicResources(t, e, "held")
			return len(after) == len(resources)
		}, 60*time.Second, 200*time.Millisecond, "pod-resources after the kubelet's %s: %v", round, after)
		require.Equal(t, resources, after, "pod-resources List for held after the kubelet's %s", round)

		// The driver is registered with the new kubelet: a new claim (the
		// two free GPUs) is prepared, and unprepared when its pod goes.
		d.waitDriverConnected(t)
		name := "fresh-" + round
		fresh, fc := d.runDRAPod(t, draPod(name, fromTemplate("devices", "two-gpus")), "devices")
		require.Empty(t, intersect(allDevices(claim), allDevices(fc)), "%s's claim shares held's devices", name)
		d.checkDRAContainer(t, fresh, devs, allDevices(fc))
		require.Equal(t, claimResources(fc), podDynamicResources(t, e, name), "pod-resources List for %s", name)
		t.Logf("%s after the kubelet's %s: claim %s: %v", name, round, fc.Name, allDevices(fc))
		deleteDRAPod(t, client, name, fc)
		require.Eventually(t, func() bool { return len(cdiSpecsOf(t, e, fc)) == 0 }, 30*time.Second, 100*time.Millisecond,
			"claim %s's CDI spec is still in %s", fc.Name, e.cdiDir)

		// A claim for the four GPUs is not allocated while held runs.
		name = "all-gpus-" + round
		_, err = client.CoreV1().Pods("default").Create(ctx, draPod(name, fromTemplate("devices", "all-gpus")), metav1.CreateOptions{})
		require.NoError(t, err)
		msg := waitEvent(t, client, name, "FailedScheduling", "cannot allocate all claims")
		t.Logf("%s after the kubelet's %s: %s", name, round, msg)
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, p.Spec.NodeName, "%s is bound with held running", name)
		deletePod(t, client, name, 0)

		// The agent's node state holds the claim: in its checkpoint, and a
		// claim given one of held's GPUs by hand is refused at prepare,
		// held's claim named.
		cp, err := os.ReadFile(filepath.Join(e.dir, "checkpoint.json"))
		require.NoError(t, err)
		require.Contains(t, string(cp), string(claim.UID), "the agent's checkpoint holds claim %s", claim.Name)
		intruder := "intruder-" + round
		d.handAllocated(t, intruder, pool, gpu)
		intruders = append(intruders, intruder)
		msg = waitEvent(t, client, intruder, "FailedPrepareDynamicResources", "ResourceClaim default/"+claim.Name)
		t.Logf("%s (given %s, held's GPU, by hand): %s", intruder, gpu, msg)
		p, err = client.CoreV1().Pods("default").Get(ctx, intruder, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, corev1.PodPending, p.Status.Phase)
		require.Empty(t, cdiSpecsOf(t, e, claimNamed(t, d, intruder)), "the refused claim %s has a CDI spec", intruder)

		// The new kubelet registered the driver once: it never
		// unregistered it (after kill -9 of both, a kubelet that found
		// the old registration socket reached the new agent through it
		// and unregistered and registered the driver again a second
		// later, failing a prepare in between, until the agent listened
		// on a new socket name each run).
		kubeletLog, err := os.ReadFile(d.kubelet.log)
		require.NoError(t, err)
		require.NotContains(t, string(kubeletLog), "OperationExecutor.UnregisterPlugin started",
			"the kubelet unregistered a plugin after the kubelet's %s (its log: %s)", round, d.kubelet.log)
	}

	d.restartKubelet(t)
	d.stage("kubelet stopped (SIGTERM) and started again")
	check("sigterm", got["gpu"][0])
	d.stage("checks after the SIGTERM restart passed")

	d.killKubelet(t)
	d.stage("kubelet killed (SIGKILL) and started again")
	check("sigkill", got["gpu"][1])
	d.stage("checks after the SIGKILL restart passed")

	// Both killed at once, the agent started after the kubelet.
	d.agentProc.kill9()
	d.killKubelet(t)
	d.agentProc = d.startAgentProcess(t)
	d.stage("agent and kubelet killed (SIGKILL), both started again")
	check("both", got["gpu"][0])
	d.stage("checks after both restarts passed")

	// Deleting held unprepares its claim (its CDI spec goes, the
	// checkpoint forgets it) and frees its devices: a pod for the four
	// GPUs gets them and runs.
	for _, name := range intruders {
		deletePod(t, client, name, 0)
		require.NoError(t, client.ResourceV1().ResourceClaims("default").Delete(ctx, name, metav1.DeleteOptions{}))
		waitGone(t, "claim "+name, func() error {
			_, err := client.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
			return err
		})
	}
	deleteDRAPod(t, client, "held", claim)
	require.Eventually(t, func() bool { return len(cdiSpecsOf(t, e, claim)) == 0 }, 30*time.Second, 100*time.Millisecond,
		"claim %s's CDI spec is still in %s", claim.Name, e.cdiDir)
	require.Eventually(t, func() bool {
		cp, err := os.ReadFile(filepath.Join(e.dir, "checkpoint.json"))
		return err == nil && !strings.Contains(string(cp), string(claim.UID))
	}, 30*time.Second, 100*time.Millisecond, "the agent's checkpoint still holds claim %s", claim.Name)
	allPod, all := d.runDRAPod(t, draPod("all-gpus", fromTemplate("devices", "all-gpus")), "devices")
	require.Len(t, allDevices(all), 4, "all-gpus's claim %s", all.Name)
	require.Subset(t, allDevices(all), got["gpu"], "all-gpus gets held's freed GPUs")
	d.checkDRAContainer(t, allPod, devs, allDevices(all))
	require.Equal(t, claimResources(all), podDynamicResources(t, e, "all-gpus"), "pod-resources List for all-gpus")
	d.stage("held deleted: unprepared, all-gpus runs on its GPUs")
	deleteDRAPod(t, client, "all-gpus", all)
}

// waitDriverConnected waits until the running kubelet's log says it is
// connected to the agent's DRA driver (its last "Connection changed" for
// the driver says connected=true). A pod whose claim the kubelet prepares
// before then fails with "DRA driver gpu.numaplace.io is not registered",
// and the kubelet retries only at its next sync of the pod, a minute or so
// later.
func (d *draCluster) waitDriverConnected(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		data, _ := os.ReadFile(d.kubelet.log)
		last := ""
		for _, l := range strings.Split(string(data), "\n") {
			if strings.Contains(l, `"Connection changed"`) && strings.Contains(l, `driverName="`+draDriver+`"`) {
				last = l
			}
		}
		return strings.HasSuffix(strings.TrimSpace(last), "connected=true")
	}, 60*time.Second, 100*time.Millisecond, "the kubelet is not connected to the DRA driver (its log: %s)", d.kubelet.log)
}

// claimNamed returns the ResourceClaim of the name in namespace default.
func claimNamed(t *testing.T, d *draCluster, name string) *resourcev1.ResourceClaim {
	t.Helper()
	c, err := d.client.ResourceV1().ResourceClaims("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return c
}

// intersect returns the names in both sorted lists.
func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		for _, y := range b {
			if x == y {
				out = append(out, x)
			}
		}
	}
	return out
}
