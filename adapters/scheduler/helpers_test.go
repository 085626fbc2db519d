package scheduler_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/topology"
)

var optIn = map[string]string{kube.DefaultOptInLabel: kube.DefaultOptInValue}

func preset(t testing.TB, name string) *topology.Machine {
	t.Helper()
	m, err := topology.Preset(name)
	require.NoError(t, err)
	return m
}

// numaPod is a pod of one container with cpus CPUs and gpus aliyun.com/gpu
// under the given policy (Alibaba spec key, cpuset-scheduler: required).
func numaPod(name string, cpus, gpus int, pol string) *kube.Pod {
	res := map[string]string{}
	if cpus > 0 {
		res[kube.ResourceCPU] = strconv.Itoa(cpus)
	}
	if gpus > 0 {
		res[kube.ResourceAliyunGPU] = strconv.Itoa(gpus)
	}
	return &kube.Pod{Namespace: "default", Name: name, Annotations: map[string]string{
		kube.AnnotationSpecAlibaba:     fmt.Sprintf(`{"numaTopologyPolicy":%q}`, pol),
		kube.AnnotationCPUSetScheduler: "required",
	}, Containers: []kube.Container{{Name: "main", Requests: res, Limits: res}}}
}

// plainPod is a pod without a NUMA spec requesting cpu (a quantity) and
// gpus.
func plainPod(name, cpu string, gpus int) *kube.Pod {
	req := map[string]string{}
	if cpu != "" {
		req[kube.ResourceCPU] = cpu
	}
	if gpus > 0 {
		req[kube.ResourceAliyunGPU] = strconv.Itoa(gpus)
	}
	return &kube.Pod{Namespace: "default", Name: name, Containers: []kube.Container{{Name: "main", Requests: req}}}
}

// bound returns a copy of p bound to node with the given annotations added.
func bound(p *kube.Pod, node string, ann map[string]string) *kube.Pod {
	q := *p
	q.NodeName = node
	q.Annotations = map[string]string{}
	for k, v := range p.Annotations {
		q.Annotations[k] = v
	}
	for k, v := range ann {
		q.Annotations[k] = v
	}
	return &q
}

func newCache(t testing.TB, cfg scheduler.Config, nodes ...scheduler.Node) *scheduler.Cache {
	t.Helper()
	c, err := scheduler.New(cfg)
	require.NoError(t, err)
	for _, n := range nodes {
		require.NoError(t, c.AddNode(n))
	}
	return c
}
