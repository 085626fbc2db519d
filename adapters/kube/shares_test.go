package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/adapters/kube"
)

func gpusOf(ids ...int) []kube.DecisionGPU {
	out := []kube.DecisionGPU{}
	for _, id := range ids {
		out = append(out, kube.DecisionGPU{ID: id})
	}
	return out
}

func TestGPUShares(t *testing.T) {
	ctr := func(name string, gpus string) kube.Container {
		c := kube.Container{Name: name, Limits: res("cpu", "1")}
		if gpus != "" {
			c.Limits["aliyun.com/gpu"] = gpus
		}
		return c
	}
	initCtr := func(name, gpus string, sidecar bool) kube.InitContainer {
		return kube.InitContainer{Container: ctr(name, gpus), RestartPolicyAlways: sidecar}
	}
	type share struct {
		name string
		gpus []int
	}
	for _, tc := range []struct {
		name  string
		pod   kube.Pod
		gpus  []kube.DecisionGPU
		want  []share
		error string
	}{
		{name: "one container takes all", pod: kube.Pod{Containers: []kube.Container{ctr("main", "3")}},
			gpus: gpusOf(1, 4, 6), want: []share{{"main", []int{1, 4, 6}}}},
		{name: "containers in order", pod: kube.Pod{Containers: []kube.Container{ctr("a", "1"), ctr("b", ""), ctr("c", "2")}},
			gpus: gpusOf(0, 3, 5), want: []share{{"a", []int{0}}, {"b", []int{}}, {"c", []int{3, 5}}}},
		{name: "an init container's GPUs are reused by the app containers",
			pod:  kube.Pod{InitContainers: []kube.InitContainer{initCtr("setup", "2", false)}, Containers: []kube.Container{ctr("a", "1"), ctr("b", "2")}},
			gpus: gpusOf(2, 3, 7), want: []share{{"setup", []int{2, 3}}, {"a", []int{2}}, {"b", []int{3, 7}}}},
		{name: "a sidecar keeps its GPUs",
			pod:  kube.Pod{InitContainers: []kube.InitContainer{initCtr("setup", "1", false), initCtr("side", "1", true)}, Containers: []kube.Container{ctr("a", "1")}},
			gpus: gpusOf(4, 6), want: []share{{"setup", []int{4}}, {"side", []int{4}}, {"a", []int{6}}}},
		{name: "the request when there is one", pod: kube.Pod{Containers: []kube.Container{{Name: "m",
			Requests: res("aliyun.com/gpu", "1"), Limits: res("aliyun.com/gpu", "2")}}},
			gpus: gpusOf(1, 2), want: []share{{"m", []int{1}}}},
		{name: "too few GPUs", pod: kube.Pod{Namespace: "ns", Name: "p", Containers: []kube.Container{ctr("a", "1"), ctr("b", "2")}},
			gpus: gpusOf(0, 1), error: `pod ns/p: its 2 GPUs do not cover container "b"'s 2 aliyun.com/gpu`},
		{name: "not a whole number", pod: kube.Pod{Namespace: "ns", Name: "p", Containers: []kube.Container{ctr("a", "500m")}},
			gpus: gpusOf(0), error: "GPUs are whole devices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := kube.GPUShares(&tc.pod, "aliyun.com/gpu", tc.gpus)
			if tc.error != "" {
				require.ErrorContains(t, err, tc.error)
				return
			}
			require.NoError(t, err)
			var have []share
			for _, s := range got {
				ids := []int{}
				for _, g := range s.GPUs {
					ids = append(ids, g.ID)
				}
				require.Len(t, ids, s.Count, "container %s", s.Name)
				have = append(have, share{s.Name, ids})
			}
			require.Equal(t, tc.want, have)
		})
	}
	_, err := kube.GPUShares(nil, "aliyun.com/gpu", nil)
	require.ErrorIs(t, err, kube.ErrInvalidPod)
	_, err = kube.GPUShares(&kube.Pod{Containers: []kube.Container{ctr("a", "2")}}, "aliyun.com/gpu", gpusOf(0))
	require.ErrorIs(t, err, kube.ErrInvalidDecision)
}
