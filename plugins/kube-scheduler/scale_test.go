package numaplace_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/numaplace/numaplace/plugins/kube-scheduler/internal/trialpods"
)

// testMixed is the operator's trial: 200 pods of every kind (the four
// policies, GPU pods without a spec, plain pods) on 20 DGX nodes, the
// scheduler restarted halfway, then every pod bound with no CPU or GPU
// given twice.
func testMixed(t *testing.T, c *cluster) {
	for i := range 20 {
		preset := "dgx-h100"
		if i%2 == 1 {
			preset = "dgx-a100"
		}
		c.create(node(t, fmt.Sprintf("gpu-%02d", i), preset, true, false))
	}
	rng := rand.New(rand.NewPCG(13, 1))
	mk := func(i int) *v1.Pod {
		name := fmt.Sprintf("mixed-%03d", i)
		// About 100 GPUs in all of the 160: every pod fits somewhere.
		policy, cpus, gpus := trialpods.Mix(rng)
		return pod(name, policy, cpus, gpus)
	}
	start := time.Now()
	first := c.start(nil)
	for i := range 100 {
		c.create(mk(i))
	}
	waitAllBound(t, c, 100)
	first.stop()
	c.start(nil)
	for i := 100; i < 200; i++ {
		c.create(mk(i))
	}
	waitAllBound(t, c, 200)
	t.Logf("200 mixed pods on 20 nodes bound in %s, a restart included", time.Since(start).Round(time.Millisecond))
	c.requireNoDoubleHandout()
}

func waitAllBound(t *testing.T, c *cluster, n int) {
	t.Helper()
	var bound, total int
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		bound, total = 0, len(pods.Items)
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return total == n && bound == n, nil
	})
	require.NoError(t, err, "%d of %d pods bound", bound, total)
}

func TestMixedPodsWithARestart(t *testing.T) { testMixed(t, newFakeCluster(t)) }

func TestControlPlaneMixedPodsWithARestart(t *testing.T) { testMixed(t, newControlPlaneCluster(t)) }
