package sim

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/adapters/scheduler"
	"github.com/numaplace/numaplace/policy"
)

// numaplaceSetup is setup c: numaplace's scheduler adapter decides, writes
// the decision annotation, and each node's numaplace agent admits the pod
// by it.
type numaplaceSetup struct {
	cl     *cluster
	cache  *scheduler.Cache
	agents []*kubelet.Node
	index  map[string]int
	bound  map[string]*kube.Pod // the running pods as bound
	probes map[shapeKey]*kube.Pod
}

func newNumaplaceSetup(cl *cluster, pct, parallelism int) (*numaplaceSetup, error) {
	n := len(cl.names)
	if pct == 0 && n >= 100 {
		pct = adaptivePercentage(n)
	}
	c, err := scheduler.New(scheduler.Config{PercentageOfNodesToScore: pct, Parallelism: parallelism})
	if err != nil {
		return nil, err
	}
	s := &numaplaceSetup{cl: cl, cache: c, agents: make([]*kubelet.Node, n),
		index: make(map[string]int, n), bound: map[string]*kube.Pod{}, probes: map[shapeKey]*kube.Pod{}}
	labels := map[string]string{kube.DefaultOptInLabel: kube.DefaultOptInValue}
	for i, name := range cl.names {
		m := cl.infos[i].m
		if err := c.AddNode(scheduler.Node{Name: name, Labels: labels, Machine: m}); err != nil {
			return nil, err
		}
		if s.agents[i], err = kubelet.Open(m, "", kubelet.NodeOptions{}); err != nil {
			return nil, err
		}
		s.index[name] = i
	}
	return s, nil
}

// simNamespace is the namespace of the simulated pods.
const simNamespace = "sim"

// kubePod writes the pod as the cluster sees it: one container whose
// requests equal its limits (cpu, aliyun.com/gpu) and, with a NUMA spec,
// the spec annotation with cpuset-scheduler: required.
func kubePod(p *PodSpec) *kube.Pod {
	res := map[string]string{kube.ResourceCPU: strconv.Itoa(p.CPUs), kube.ResourceAliyunGPU: strconv.Itoa(p.GPUs)}
	k := &kube.Pod{Namespace: simNamespace, Name: p.Name, UID: p.Name, Annotations: map[string]string{},
		Containers: []kube.Container{{Name: "main", Requests: res, Limits: res}}}
	if p.NUMASpec {
		k.Annotations[kube.AnnotationSpecAlibaba] = `{"numaTopologyPolicy":"` + p.Policy.String() + `"}`
		k.Annotations[kube.AnnotationCPUSetScheduler] = "required"
	}
	return k
}

func (s *numaplaceSetup) attempt(p *PodSpec) (attemptResult, error) {
	pod := kubePod(p)
	t0 := time.Now()
	res, err := s.cache.ScheduleOne(pod)
	lat := time.Since(t0)
	if _, ok := errors.AsType[*scheduler.FitError](err); ok {
		return attemptResult{outcome: unschedulable, latency: lat}, nil
	}
	if err != nil {
		return attemptResult{}, err
	}
	x, ok := s.index[res.Node]
	if !ok {
		return attemptResult{}, fmt.Errorf("scheduled on unknown node %q", res.Node)
	}
	// Bind: write the annotations, set the node, tell the cache.
	maps.Copy(pod.Annotations, res.Annotations)
	pod.NodeName = res.Node
	if err := s.cache.AddPod(pod); err != nil {
		return attemptResult{}, fmt.Errorf("binding to %s: %w", res.Node, err)
	}
	adm, err := s.agents[x].Admit(pod)
	if errors.Is(err, kubelet.ErrTopologyAffinity) {
		if err := s.cache.RemovePod(pod); err != nil {
			return attemptResult{}, err
		}
		return attemptResult{outcome: refused, node: x, latency: lat}, nil
	}
	if err != nil {
		return attemptResult{}, fmt.Errorf("admission on %s: %w", res.Node, err)
	}
	s.bound[p.Name] = pod
	r := attemptResult{outcome: placed, node: x, latency: lat}
	if adm.Source != kubelet.SharedPool {
		r.shape = s.cl.infos[x].shapeOf(adm.Allocation.CPUs, adm.Allocation.GPUs)
	}
	return r, nil
}

func (s *numaplaceSetup) release(p *PodSpec, x int) error {
	pod, ok := s.bound[p.Name]
	if !ok {
		return fmt.Errorf("pod %s is not bound", p.Name)
	}
	delete(s.bound, p.Name)
	if err := s.agents[x].Remove(pod); err != nil {
		return err
	}
	return s.cache.RemovePod(pod)
}

// fits is the scheduler adapter's Filter on one node.
func (s *numaplaceSetup) fits(p *PodSpec, x int) (bool, error) {
	k := shapeKey{gpus: p.GPUs, cpus: p.CPUs, spec: p.NUMASpec, pol: p.Policy}
	probe := s.probes[k]
	if probe == nil {
		probe = kubePod(p)
		probe.Name = "probe"
		s.probes[k] = probe
	}
	err := s.cache.Filter(probe, s.cl.names[x])
	if errors.Is(err, scheduler.ErrUnschedulable) {
		return false, nil
	}
	return err == nil, err
}

func (s *numaplaceSetup) verify(x int, running map[string]*PodSpec) error {
	mi := s.cl.infos[x]
	name := s.cl.names[x]
	st, ok := s.cache.Node(name)
	if !ok {
		return fmt.Errorf("the scheduler lost node %s", name)
	}
	exclusive := func(p *PodSpec) bool { return p.NUMASpec }
	sched := map[string]held{}
	for _, a := range st.Allocations {
		sched[podName(a.ID)] = held{cpus: a.CPUs, gpus: a.GPUs}
	}
	if err := checkView(mi, "scheduler", sched, running, exclusive); err != nil {
		return err
	}
	agent := map[string]held{}
	for _, a := range s.agents[x].Admissions() {
		if a.Source == kubelet.SharedPool {
			continue
		}
		agent[podName(a.Pod)] = held{cpus: a.Allocation.CPUs, gpus: a.Allocation.GPUs}
		if !a.Allocation.CPUs.IsEmpty() && a.Policy == policy.None {
			return fmt.Errorf("pod %s without a NUMA spec holds exclusive CPUs %s", a.Pod, a.Allocation.CPUs)
		}
	}
	if err := checkView(mi, "node agent", agent, running, exclusive); err != nil {
		return err
	}
	for id, h := range sched {
		a := agent[id]
		if !a.cpus.Equal(h.cpus) || fmt.Sprint(a.gpus) != fmt.Sprint(h.gpus) {
			return fmt.Errorf("pod %s: the scheduler placed CPUs %s GPUs %v, the node agent admitted CPUs %s GPUs %v",
				id, h.cpus, h.gpus, a.cpus, a.gpus)
		}
	}
	// The shared pool the agent runs the plain pods on is every CPU no
	// exclusive allocation holds.
	if got, want := s.agents[x].SharedPool().Size(), mi.m.NumCPUs()-sumCPUs(agent); got != want {
		return fmt.Errorf("the node agent's shared pool has %d CPUs, want %d", got, want)
	}
	return nil
}

// podName returns the name of a "namespace/name" key.
func podName(key string) string {
	if len(key) > len(simNamespace)+1 && key[:len(simNamespace)+1] == simNamespace+"/" {
		return key[len(simNamespace)+1:]
	}
	return key
}
