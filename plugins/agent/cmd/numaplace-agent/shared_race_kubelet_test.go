package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/numaplace/numaplace/numa"
)

// handCPUPod is a SingleNUMANode pod of one CPU bound by hand to the node
// (no scheduler) with a decision of CPU cpu on NUMA node cpu (the fake
// machine's CPU i is node i's), so that the kubelet starts it at once.
func handCPUPod(name string, cpu int) *corev1.Pod {
	pod := cpuPod(name)
	pod.Spec.SchedulerName, pod.Spec.NodeName = "", kubeletNode
	pod.Annotations = decisionPod(strconv.Itoa(cpu), []int{cpu})
	return pod
}

// TestSharedPodsCreatedWithAnExclusivePod: an exclusive pod and shared-pool
// pods created at the same time, several times over, the kubelet creating
// and starting their containers concurrently. containerd drops (while
// reporting success) the update of a container whose creation is in
// flight, and applies that of a container being started to its spec only;
// still, every shared container must end on the shared pool (the CPU the
// exclusive pod does not hold), never on the exclusive pod's CPU. Whether
// a round hits those windows depends on the machine's speed: the test
// fails on a defect only in the rounds that do (the offsets spread the
// exclusive pod's arrival over the shared containers' creation and start),
// and passes on a correct agent whatever the timing; the agent's
// corrections at PostStartContainer are logged.
func TestSharedPodsCreatedWithAnExclusivePod(t *testing.T) {
	c := startKubeletCluster(t)
	e, client := c.e, c.client
	ctx := context.Background()
	t.Cleanup(func() {
		// What the agent did with the shared pool: where the exclusive
		// pods' arrival fell, and the containers it corrected at
		// PostStartContainer.
		var lines []string
		fixed := 0
		for _, line := range strings.Split(c.agent.log.String(), "\n") {
			for _, m := range []string{"shared pool changed", "container placed", "shared-pool containers", "no longer its own"} {
				if strings.Contains(line, m) {
					lines = append(lines, line)
					break
				}
			}
			if strings.Contains(line, "no longer its own") {
				fixed++
			}
		}
		t.Logf("containers corrected at PostStartContainer: %d; the agent's log of the shared pool:\n%s", fixed, strings.Join(lines, "\n"))
	})
	const rounds, shared = 8, 4
	for round := range rounds {
		cpu := round % 2
		names := []string{fmt.Sprintf("ex-%d", round)}
		pods := []*corev1.Pod{handCPUPod(names[0], cpu)}
		for i := range shared {
			name := fmt.Sprintf("sh-%d-%d", round, i)
			names = append(names, name)
			pods = append(pods, opsSharedPod(name))
		}
		// The shared pods first, the exclusive one after an offset that
		// differs from round to round, so that its sandbox (which takes
		// its CPU from the shared pool) arrives while the shared
		// containers are being created or started in some round.
		var wg sync.WaitGroup
		errs := make([]error, len(pods))
		for i, pod := range pods[1:] {
			wg.Go(func() {
				_, errs[i+1] = client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			})
		}
		time.Sleep(time.Duration(round) * 100 * time.Millisecond)
		_, errs[0] = client.CoreV1().Pods("default").Create(ctx, pods[0], metav1.CreateOptions{})
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		for _, name := range names {
			waitRunning(t, client, name)
		}
		pool := numa.NewCPUSet(0, 1)
		pool.Remove(cpu)
		for _, name := range names[1:] {
			pod, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			ctr := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
			// Its CPUs as the container's processes see them; waited for
			// (the correction is asynchronous), the last ones named.
			var got string
			deadline := time.Now().Add(30 * time.Second)
			for got = e.status(t, ctr, "Cpus_allowed_list"); got != pool.String() && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
				got = e.status(t, ctr, "Cpus_allowed_list")
			}
			require.Equal(t, pool.String(), got, "round %d: shared pod %s must run on the shared pool beside %s's CPU %d (for 30 s)",
				round, name, names[0], cpu)
		}
		c.checkNodeInvariants(t)
		c.stage(fmt.Sprintf("round %d: %s holds CPU %d, %d shared pods on %s", round, names[0], cpu, shared, pool))
		for _, name := range names {
			require.NoError(t, client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(1))}))
		}
		for _, name := range names {
			require.Eventually(t, func() bool {
				_, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}, 60*time.Second, 100*time.Millisecond, "pod %s was not removed: %s", name, describe(client, name))
		}
	}
	c.checkNodeInvariants(t)
}
