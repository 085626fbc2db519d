// Command scheduler plays the product's motivating case on a small cluster:
// a text-generation Deployment whose pods want 4 GPUs and 24 CPUs each,
// once without the NUMA topology spec and once with it (SingleNUMANode).
//
// The cluster is four DGX H100 nodes (two NUMA nodes of 4 GPUs each)
// labelled ack.node.gpu.schedule=topology, already running a few GPU pods
// placed without regard to NUMA, so that two nodes have 4 GPUs free split
// 2+2 over their NUMA nodes. For each pod it prints where numaplace's
// scheduler side puts it, the decision annotation it writes, and what a
// kubelet with the single-numa-node Topology Manager policy would do with
// the pod on that node (adapters/topologymanager.Predict, the kubelet's own hint
// generation and merge). Each Deployment starts from the same cluster so
// that the two runs compare.
//
// Run it with: go run ./examples/scheduler
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/topology"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// running is a pod the cluster runs before the Deployments arrive: GPU
// pods without a NUMA spec whose GPUs the device plugin spread over both
// NUMA nodes.
var running = []struct {
	node, name string
	gpus       []int
}{
	{"gpu-1", "infer-a", []int{0, 1}},
	{"gpu-1", "infer-b", []int{4, 5}},
	{"gpu-2", "infer-c", []int{2, 3}},
	{"gpu-2", "infer-d", []int{6, 7}},
	{"gpu-3", "train-a", []int{0, 1, 2, 3}},
}

const replicas = 3

// newCluster returns the cluster as it stands before the Deployments.
func newCluster(m *topology.Machine) (*scheduler.Cache, error) {
	c, err := scheduler.New(scheduler.Config{})
	if err != nil {
		return nil, err
	}
	labels := map[string]string{kube.DefaultOptInLabel: kube.DefaultOptInValue}
	for i := 1; i <= 4; i++ {
		if err := c.AddNode(scheduler.Node{Name: fmt.Sprintf("gpu-%d", i), Labels: labels, Machine: m}); err != nil {
			return nil, err
		}
	}
	for _, r := range running {
		ids := make([]string, len(r.gpus))
		for i, g := range r.gpus {
			ids[i] = fmt.Sprintf(`{"id":%d}`, g)
		}
		p := pod(r.name, 8, len(r.gpus), false)
		p.NodeName = r.node
		p.Annotations[kube.AnnotationAllocation] = fmt.Sprintf(`{"policy":"None","cpuset":"","gpus":[%s]}`, strings.Join(ids, ","))
		if err := c.AddPod(p); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// pod is a Guaranteed pod of one container with cpus CPUs and gpus
// aliyun.com/gpu, with or without the NUMA spec.
func pod(name string, cpus, gpus int, numaSpec bool) *kube.Pod {
	res := map[string]string{kube.ResourceCPU: fmt.Sprint(cpus), kube.ResourceAliyunGPU: fmt.Sprint(gpus)}
	p := &kube.Pod{Namespace: "default", Name: name, Annotations: map[string]string{},
		Containers: []kube.Container{{Name: "server", Requests: res, Limits: res}}}
	if numaSpec {
		p.Annotations[kube.AnnotationSpecAlibaba] = `{"numaTopologyPolicy":"SingleNUMANode"}`
		p.Annotations[kube.AnnotationCPUSetScheduler] = "required"
	}
	return p
}

// freePerNUMANode describes a node's free GPUs per NUMA node, such as
// "2+2 GPUs free on NUMA nodes 0,1".
func freePerNUMANode(st scheduler.NodeStatus) string {
	m := st.Machine
	held := map[int]bool{}
	for _, a := range st.Allocations {
		for _, g := range a.GPUs {
			held[g] = true
		}
	}
	free := make([]string, m.NumNodes())
	ids := make([]string, m.NumNodes())
	for i := range m.NumNodes() {
		n := 0
		for _, g := range m.GPUs() {
			if g.NUMANode == m.NodeID(i) && !held[g.ID] {
				n++
			}
		}
		free[i] = fmt.Sprint(n)
		ids[i] = m.NodeID(i).String()
	}
	return fmt.Sprintf("%s GPUs free on NUMA nodes %s", strings.Join(free, "+"), strings.Join(ids, ","))
}

// kubeletAlone says what a kubelet running the single-numa-node policy
// (static CPU manager, device manager) would do with the request on the
// node as it was before the pod: the node's other allocations stand for
// what its resource managers hold (the pod's own allocation, key, is left
// out).
func kubeletAlone(st scheduler.NodeStatus, key string, r allocator.Request) (string, error) {
	s, err := allocator.New(st.Machine, allocator.Options{})
	if err != nil {
		return "", err
	}
	for _, a := range st.Allocations {
		if a.ID == key {
			continue
		}
		if _, err := s.Claim(a); err != nil {
			return "", err
		}
	}
	hint, admit, err := topologymanager.Predict(topologymanager.PolicySingleNUMANode,
		topologymanager.PredictOptions{GPUResource: kube.ResourceAliyunGPU}, st.Machine, s, &r)
	if err != nil {
		return "", err
	}
	if !admit {
		return fmt.Sprintf("refused with TopologyAffinityError (best merged hint %s): the pod would stay in AdmissionError", hint), nil
	}
	return fmt.Sprintf("admitted on NUMA node %s (merged hint %s)", hint.NUMANodeAffinity, hint), nil
}

func run(w io.Writer) error {
	m, err := topology.Preset("dgx-h100")
	if err != nil {
		return err
	}
	c, err := newCluster(m)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "Cluster: 4 x %s labelled %s=%s, before the Deployments:\n", m.Name(), kube.DefaultOptInLabel, kube.DefaultOptInValue)
	for _, name := range c.Nodes() {
		st, _ := c.Node(name)
		fmt.Fprintf(w, "  %s: %s\n", name, freePerNUMANode(st))
	}
	req := allocator.Request{CPUs: 24, GPUs: 4}

	for _, numaSpec := range []bool{false, true} {
		c, err := newCluster(m)
		if err != nil {
			return err
		}
		name, what := "textgen", "without the NUMA spec: placed by node totals, as a NUMA-blind scheduler does"
		if numaSpec {
			name, what = "textgen-numa", `with {"numaTopologyPolicy":"SingleNUMANode"}: placed by numaplace`
		}
		fmt.Fprintf(w, "\nDeployment %s, %d replicas of 4 GPUs + 24 CPUs, %s:\n", name, replicas, what)
		refused := 0
		for i := range replicas {
			p := pod(fmt.Sprintf("%s-%d", name, i), 24, 4, numaSpec)
			res, err := c.ScheduleOne(p)
			var fe *scheduler.FitError
			if errors.As(err, &fe) {
				fmt.Fprintf(w, "  %s: pending, %v\n", p.Name, err)
				continue
			}
			if err != nil {
				return err
			}
			// The node with the pod: kubeletAlone leaves the pod out.
			node, _ := c.Node(res.Node)
			ps, _ := c.Pod(p.Key())
			fmt.Fprintf(w, "  %s -> %s, GPUs %v on NUMA node(s) %v\n", p.Name, res.Node, ps.Allocation.GPUs, ps.Allocation.NUMANodes())
			if ann, ok := res.Annotations[kube.AnnotationAllocation]; ok {
				fmt.Fprintf(w, "    %s: %s\n", kube.AnnotationAllocation, ann)
			}
			verdict, err := kubeletAlone(node, p.Key(), req)
			if err != nil {
				return err
			}
			if strings.HasPrefix(verdict, "refused") {
				refused++
			}
			fmt.Fprintf(w, "    kubelet alone (single-numa-node) on %s: %s\n", res.Node, verdict)
			if numaSpec {
				// The nodes numaplace refused, which a NUMA-blind scheduler
				// would have taken by their totals.
				for _, other := range c.Nodes() {
					if err := c.Filter(p, other); err != nil && other != res.Node {
						var ferr *scheduler.FilterError
						if errors.As(err, &ferr) && errors.Is(err, allocator.ErrNoNUMAFit) {
							fmt.Fprintf(w, "    refused %s: %s\n", other, ferr.Detail)
						}
					}
				}
			}
		}
		fmt.Fprintf(w, "  => %d of %d pods would be refused by a kubelet running single-numa-node\n", refused, replicas)
	}
	fmt.Fprintln(w, "\nWithout the spec, the pods land by node totals and a kubelet running single-numa-node refuses",
		"those whose GPUs are split over NUMA nodes; with it, numaplace sends each pod where one NUMA node holds",
		"its GPUs and CPUs, and writes the decision the node side applies.")
	return nil
}
