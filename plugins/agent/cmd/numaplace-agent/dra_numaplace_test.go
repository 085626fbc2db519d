package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/numaplace/numaplace/internal/controlplane"
)

// numaplace-scheduler deciding DRA claims on real components (issue 24,
// item 5): startDRACluster with splitTree, the agent's DRA role and
// numaplace-scheduler; pods with the ACK annotations and ResourceClaims
// (from templates, or the claim the scheduler makes for aliyun.com/gpu
// through aliyun-gpu.numaplace.io) name numaplace-scheduler, and what
// their claims, containers and the kubelet's pod-resources API show is
// compared with numaplace's decision. On splitTree the built-in
// allocator's first fit picks other GPUs than numaplace, so each scenario
// first checks where the devices are: run with
// NUMAPLACE_E2E_DRA_SCHEDULER=default-scheduler, the pods go to the
// default kube-scheduler and the scenarios fail there (named in each
// test's comment).

// scenarios runs f as a subtest named name, logs its time and stops the
// test when it failed (later scenarios build on the cluster's state).
func (d *draCluster) scenario(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	start := time.Now()
	ok := t.Run(name, f)
	d.stage(fmt.Sprintf("scenario %s: passed=%t in %.1fs", name, ok, time.Since(start).Seconds()))
	if !ok {
		t.FailNow()
	}
}

// oneOf fails unless got is one of the wanted lists.
func oneOf(t *testing.T, got []int, want [][]int, msg string, args ...any) {
	t.Helper()
	for _, w := range want {
		if slices.Equal(got, w) {
			return
		}
	}
	require.Failf(t, "not one of the expected", "%s: got %v, want one of %v", fmt.Sprintf(msg, args...), got, want)
}

// gpuTemplate and nicTemplate are ResourceClaimTemplates of count GPUs of
// gpu.numaplace.io (request gpus) and count NICs of nic.numaplace.io
// (request nic).
func gpuTemplate(t *testing.T, d *draCluster, name string, count int64, constraints ...resourcev1.DeviceConstraint) {
	t.Helper()
	createTemplate(t, d.client, name, resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{exactly("gpus", draGPUClass, count)}, Constraints: constraints})
	t.Cleanup(func() {
		_ = d.client.ResourceV1().ResourceClaimTemplates("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

func nicTemplate(t *testing.T, d *draCluster, name string, count int64) {
	t.Helper()
	createTemplate(t, d.client, name, resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{exactly("nic", draNICClass, count)}})
	t.Cleanup(func() {
		_ = d.client.ResourceV1().ResourceClaimTemplates("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// runNUMAPod creates the pod, waits until its claims (by their names in
// the pod) are allocated and it runs, and returns it with its claims.
func (d *draCluster) runNUMAPod(t *testing.T, pod *corev1.Pod, claims ...string) (*corev1.Pod, []*resourcev1.ResourceClaim) {
	t.Helper()
	_, err := d.client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	cs := d.podClaims(t, pod.Name, claims...)
	for _, c := range cs {
		// What the scheduler allocated, before the node runs the pod.
		t.Logf("pod %s: claim %s allocated %v", pod.Name, c.Name, allDevices(c))
	}
	p := waitRunning(t, d.client, pod.Name)
	require.Equal(t, kubeletNode, p.Spec.NodeName)
	return p, cs
}

// deleteNUMAPod deletes the pod and waits until it and its generated
// claims are gone.
func (d *draCluster) deleteNUMAPod(t *testing.T, name string, claims ...*resourcev1.ResourceClaim) {
	t.Helper()
	deletePod(t, d.client, name, 5)
	for _, c := range claims {
		if len(c.OwnerReferences) > 0 {
			waitGone(t, "claim "+c.Name, func() error {
				_, err := d.client.ResourceV1().ResourceClaims("default").Get(context.Background(), c.Name, metav1.GetOptions{})
				return err
			})
		}
	}
}

// requireNoDoubleAllocation fails when two allocated claims of the
// cluster hold one device.
func (d *draCluster) requireNoDoubleAllocation(t *testing.T) {
	t.Helper()
	list, err := d.client.ResourceV1().ResourceClaims("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	holder := map[string]string{}
	for _, c := range list.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			key := r.Driver + "/" + r.Pool + "/" + r.Device
			require.Empty(t, holder[key], "device %s is allocated to claims %s and %s/%s", key, holder[key], c.Namespace, c.Name)
			holder[key] = c.Namespace + "/" + c.Name
		}
	}
}

// TestNUMAPlaceDRAClaims: on one cluster (splitTree, the agent's DRA
// role, numaplace-scheduler), each scenario leaving nothing behind:
//
//   - first-fit-disagrees: a SingleNUMANode pod with 1 CPU (the 16,
//     sized to the host's two CPUs) and a claim for 2 GPUs gets 2 GPUs of
//     one PCIe switch of NUMA node 1 and node 1's CPU, where first fit
//     gives GPUs 0 and 1 of node 0; the claim's allocation, the decision,
//     the container's GPUs, cpuset and memory nodes and the pod-resources
//     API (List and Get) agree;
//   - docs-example: docs/deploy.md's example (a pod with a claim for 2
//     GPUs and another for a NIC, SingleNUMANode) is placed in one span,
//     node 1, the NIC beside its GPUs (GPUs 4 and 5, under the NIC's
//     switch), where first fit gives GPUs 0 and 1 of node 0 and the NIC
//     of node 1;
//   - restricted-8: a claim for 8 GPUs with matchAttribute numaNode is not
//     allocated (its pod stays unscheduled), and a Restricted pod with a
//     claim for 8 GPUs is admitted with 4+4, its span nodes 0 and 1;
//   - preemption: a high-priority pod whose claim needs 2 GPUs preempts a
//     low-priority pod whose claim holds all 8 and runs on the GPUs it
//     freed.
//
// With the default kube-scheduler (NUMAPLACE_E2E_DRA_SCHEDULER=
// default-scheduler) first-fit-disagrees and docs-example fail on the
// claim's GPUs (0 and 1), restricted-8 on the missing decision and
// preemption on the pending pod (DRA pods are not preempted for).
func TestNUMAPlaceDRAClaims(t *testing.T) {
	d := startDRACluster(t, draClusterOptions{agent: true, tree: splitTree(), numaplace: true})
	devs := d.treeDevices(t)
	tree := d.tree

	d.scenario(t, "first-fit-disagrees", func(t *testing.T) {
		gpuTemplate(t, d, "two-gpus", 2)
		pod, claims := d.runNUMAPod(t, numaDRAPod("aligned", "SingleNUMANode", 1, fromTemplate("gpus", "two-gpus")), "gpus")
		gpus, _ := claimedGPUs(t, devs, claims...)
		oneOf(t, gpus, [][]int{{4, 5}, {6, 7}}, "claim %s: 2 GPUs under one switch of NUMA node 1 (first fit: 0 and 1)", claims[0].Name)
		dec, _ := d.checkDecided(t, pod, devs, gpus, nil, claims...)
		require.Equal(t, []int{1}, dec.NUMANodes, "aligned's span")
		require.Equal(t, "1", dec.CPUSet, "aligned's CPU: NUMA node 1's")
		d.requireNoDoubleAllocation(t)
		d.deleteNUMAPod(t, "aligned", claims...)
	})

	d.scenario(t, "docs-example", func(t *testing.T) {
		// docs/deploy.md's templates as they are, and its pod sized for
		// this machine.
		templates, pod := docsClaimExample(t)
		for _, tmpl := range templates {
			_, err := d.client.ResourceV1().ResourceClaimTemplates("default").Create(context.Background(), tmpl, metav1.CreateOptions{})
			require.NoError(t, err, "docs/deploy.md's ResourceClaimTemplate %s", tmpl.Name)
			t.Cleanup(func() {
				_ = d.client.ResourceV1().ResourceClaimTemplates("default").Delete(context.Background(), tmpl.Name, metav1.DeleteOptions{})
			})
		}
		pod, claims := d.runNUMAPod(t, pod, "gpus", "nic")
		gpus, nics := claimedGPUs(t, devs, claims...)
		require.Equal(t, []int{4, 5}, gpus, "claim %s: the 2 GPUs under the NIC's switch on NUMA node 1 (first fit: 0 and 1)", claims[0].Name)
		require.Equal(t, []string{"mlx5_0"}, nics, "claim %s", claims[1].Name)
		nodes, switches := tree.gpuPlaces(t, gpus)
		require.Equal(t, []int{1}, nodes)
		require.Equal(t, []string{tree.switchOf(t, tree.nics[0].bus)}, switches)
		dec, _ := d.checkDecided(t, pod, devs, gpus, nics, claims...)
		require.Equal(t, []int{1}, dec.NUMANodes, "%s's span: one node for both claims and its CPU", pod.Name)
		require.Equal(t, "1", dec.CPUSet)
		for i, want := range [][]string{{"gpu-4", "gpu-5"}, {"nic-mlx5-0"}} {
			require.Equal(t, want, allDevices(claims[i]), "claim %s's devices as docs/deploy.md prints them", claims[i].Name)
		}
		d.requireNoDoubleAllocation(t)
		d.deleteNUMAPod(t, pod.Name, claims...)
	})

	d.scenario(t, "restricted-8", func(t *testing.T) {
		// matchAttribute on numaNode cannot hold 8 GPUs on a machine of 4
		// per node: the pod is never scheduled.
		gpuTemplate(t, d, "eight-one-node", 8, matchAttribute(attrNUMANode, "gpus"))
		_, err := d.client.CoreV1().Pods("default").Create(context.Background(),
			numaDRAPod("matched", "Restricted", 1, fromTemplate("gpus", "eight-one-node")), metav1.CreateOptions{})
		require.NoError(t, err)
		msg := waitUnschedulable(t, d.client, "matched", "")
		t.Logf("matched (8 GPUs, matchAttribute numaNode): %s", msg)
		deletePod(t, d.client, "matched", 0)

		// Restricted admits them on the narrowest set, both nodes.
		gpuTemplate(t, d, "eight", 8)
		pod, claims := d.runNUMAPod(t, numaDRAPod("wide", "Restricted", 1, fromTemplate("gpus", "eight")), "gpus")
		gpus, _ := claimedGPUs(t, devs, claims...)
		require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, gpus)
		dec, _ := d.checkDecided(t, pod, devs, gpus, nil, claims...)
		require.Equal(t, []int{0, 1}, dec.NUMANodes, "wide's span: 4+4")
		d.requireNoDoubleAllocation(t)
		d.deleteNUMAPod(t, "wide", claims...)
	})

	d.scenario(t, "preemption", func(t *testing.T) {
		for name, value := range map[string]int32{"numaplace-low": 10, "numaplace-high": 1000} {
			_, err := d.client.SchedulingV1().PriorityClasses().Create(context.Background(), &schedulingv1.PriorityClass{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
			require.NoError(t, err)
			t.Cleanup(func() {
				_ = d.client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		}
		gpuTemplate(t, d, "all-eight", 8)
		gpuTemplate(t, d, "pair", 2)
		// Both ask for a CPU (the host has two, one of them the shared
		// pool's), so high needs low's CPU as well as two of its GPUs.
		low := numaDRAPod("low", "Restricted", 1, fromTemplate("gpus", "all-eight"))
		low.Spec.PriorityClassName = "numaplace-low"
		_, lowClaims := d.runNUMAPod(t, low, "gpus")
		lowGPUs, _ := claimedGPUs(t, devs, lowClaims...)
		require.Len(t, lowGPUs, 8)

		high := numaDRAPod("high", "SingleNUMANode", 1, fromTemplate("gpus", "pair"))
		high.Spec.PriorityClassName = "numaplace-high"
		_, err := d.client.CoreV1().Pods("default").Create(context.Background(), high, metav1.CreateOptions{})
		require.NoError(t, err)
		// The victim goes (its claim with it), then high runs on its GPUs.
		waitGone(t, "pod low (preempted)", func() error {
			_, err := d.client.CoreV1().Pods("default").Get(context.Background(), "low", metav1.GetOptions{})
			return err
		})
		claims := d.podClaims(t, "high", "gpus")
		pod := waitRunning(t, d.client, "high")
		gpus, _ := claimedGPUs(t, devs, claims...)
		oneOf(t, gpus, [][]int{{4, 5}, {6, 7}}, "high's claim %s", claims[0].Name)
		d.checkDecided(t, pod, devs, gpus, nil, claims...)
		d.requireNoDoubleAllocation(t)
		d.deleteNUMAPod(t, "high", claims...)
	})
}

// docsClaimExample reads docs/deploy.md's example of claims numaplace
// decides (step 6, the YAML block after the comment naming this test)
// strictly: its ResourceClaimTemplates as they are, and its pod
// sized for this machine (the imported image and draPodScript, host
// network, 1 CPU for its 16 and 64Mi of memory for its 64Gi, the scheduler
// draSchedulerName), everything else (annotations, claims, scheduler) as
// written.
func docsClaimExample(t *testing.T) ([]*resourcev1.ResourceClaimTemplate, *corev1.Pod) {
	t.Helper()
	raw, err := os.ReadFile(controlplane.RepoPath(t, "docs", "deploy.md"))
	require.NoError(t, err)
	doc := string(raw)
	const marker = "TestNUMAPlaceDRAClaims/docs-example creates these objects"
	i := strings.Index(doc, marker)
	require.GreaterOrEqual(t, i, 0, "docs/deploy.md has no block marked %q", marker)
	start := strings.Index(doc[i:], "```yaml\n")
	require.GreaterOrEqual(t, start, 0, "no YAML block after the marker")
	body := doc[i+start+len("```yaml\n"):]
	end := strings.Index(body, "\n```")
	require.GreaterOrEqual(t, end, 0, "the YAML block does not end")
	var templates []*resourcev1.ResourceClaimTemplate
	var pod *corev1.Pod
	for _, part := range strings.Split(body[:end+1], "\n---\n") {
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(part), &meta))
		switch meta.Kind {
		case "ResourceClaimTemplate":
			var tmpl resourcev1.ResourceClaimTemplate
			require.NoError(t, yaml.UnmarshalStrict([]byte(part), &tmpl), "docs/deploy.md's ResourceClaimTemplate")
			templates = append(templates, &tmpl)
		case "Pod":
			pod = &corev1.Pod{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(part), pod), "docs/deploy.md's Pod")
		default:
			t.Fatalf("docs/deploy.md's example has a %q", meta.Kind)
		}
	}
	require.Len(t, templates, 2, "docs/deploy.md's example's templates")
	require.NotNil(t, pod, "docs/deploy.md's example has no pod")
	require.Equal(t, "numaplace-scheduler", pod.Spec.SchedulerName)
	pod.Namespace = "default"
	pod.Spec.SchedulerName = draSchedulerName()
	pod.Spec.HostNetwork = true
	pod.Spec.TerminationGracePeriodSeconds = new(int64(5))
	require.Len(t, pod.Spec.Containers, 1)
	c := &pod.Spec.Containers[0]
	require.Equal(t, "16", c.Resources.Requests.Cpu().String(), "docs/deploy.md's pod's CPUs")
	c.Image, c.ImagePullPolicy, c.Command = e2eImage, corev1.PullNever, []string{"/bin/sh", "-c", draPodScript}
	for _, res := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		res[corev1.ResourceCPU] = resource.MustParse("1")
		res[corev1.ResourceMemory] = resource.MustParse("64Mi")
	}
	return templates, pod
}
