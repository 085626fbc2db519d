package numaplace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	kubescheduler "k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/profile"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/plugins/kube-scheduler/internal/trialpods"
	"github.com/numaplace/numaplace/topology"

	numaplace "github.com/numaplace/numaplace/plugins/kube-scheduler"
)

// schedulerName is the profile's name in deploy/scheduler-config.yaml.
const schedulerName = "numaplace-scheduler"

// waitTimeout bounds every wait for the scheduler.
const waitTimeout = 30 * time.Second

// cluster is an API server that schedulers can be started and stopped
// over: client-go's fake clientset (with binding implemented), or a real
// kube-apiserver and etcd (controlplane_test.go).
type cluster struct {
	t      *testing.T
	client kubernetes.Interface
	fake   bool // client-go's fake clientset: no admission; graceful deletion only once kubelet() runs
	// graceful, on the fake clientset, makes a delete of a bound pod without
	// a zero grace period mark the pod terminating (a deletionTimestamp), as
	// the API server does, instead of removing it at once; kubelet() sets it
	// and removes terminating pods as a kubelet would.
	graceful *atomic.Bool
	config   *rest.Config // a real API server's (the scheduler's KubeConfig), nil on the fake clientset
	// editProfile, if set, changes the profile before each start.
	editProfile func(*schedconfig.KubeSchedulerProfile)
}

// newFakeCluster returns a cluster over client-go's fake clientset.
func newFakeCluster(t *testing.T) *cluster {
	t.Helper()
	client := fake.NewClientset()
	// The fake clientset does not implement pods/binding: set the node
	// name, as the API server does.
	client.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(clienttesting.CreateAction)
		if !ok || ca.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b, ok := ca.GetObject().(*v1.Binding)
		if !ok {
			return true, nil, fmt.Errorf("binding: got %T", ca.GetObject())
		}
		gvr := v1.SchemeGroupVersion.WithResource("pods")
		obj, err := client.Tracker().Get(gvr, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		if pod.Spec.NodeName != "" {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), b.Name,
				fmt.Errorf("pod %s is already bound to %s", b.Name, pod.Spec.NodeName))
		}
		if b.UID != "" && b.UID != pod.UID {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), b.Name,
				fmt.Errorf("binding names UID %s, the pod has %s", b.UID, pod.UID))
		}
		pod.Spec.NodeName = b.Target.Name
		// The API server copies the binding's annotations onto the pod in
		// the same update.
		for k, v := range b.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		return true, b, client.Tracker().Update(gvr, pod, b.Namespace)
	})
	graceful := new(atomic.Bool)
	// Graceful deletion, as the API server does it for a bound pod: the pod
	// is marked terminating and stays until its kubelet (kubelet()) deletes
	// it with a zero grace period. Without it, preemption's victims vanish at
	// once, which no real cluster does, and kube-scheduler's asynchronous
	// preemption can start a second eviction of a victim the first one is
	// still deleting.
	client.PrependReactor("delete", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		da, ok := action.(clienttesting.DeleteAction)
		if !ok || !graceful.Load() || da.GetSubresource() != "" {
			return false, nil, nil
		}
		if g := da.GetDeleteOptions().GracePeriodSeconds; g != nil && *g == 0 {
			return false, nil, nil
		}
		gvr := v1.SchemeGroupVersion.WithResource("pods")
		obj, err := client.Tracker().Get(gvr, da.GetNamespace(), da.GetName())
		if err != nil {
			return false, nil, nil
		}
		pod := obj.(*v1.Pod).DeepCopy()
		if pod.Spec.NodeName == "" {
			return false, nil, nil
		}
		if pod.DeletionTimestamp != nil {
			return true, nil, nil
		}
		now := metav1.Now()
		pod.DeletionTimestamp = &now
		pod.DeletionGracePeriodSeconds = ptr.To[int64](30)
		return true, nil, client.Tracker().Update(gvr, pod, pod.Namespace)
	})
	return &cluster{t: t, client: client, fake: true, graceful: graceful}
}

// running is a started scheduler.
type running struct {
	plugin *numaplace.Plugin
	stop   func()
}

// profiles returns the profiles of deploy/scheduler-config.yaml; edit, if
// given, changes the plugin's args.
func profiles(t *testing.T, args *numaplace.Args) []schedconfig.KubeSchedulerProfile {
	t.Helper()
	cfg, err := options.LoadConfigFromFile(klog.Background(), "deploy/scheduler-config.yaml")
	require.NoError(t, err)
	require.Len(t, cfg.Profiles, 1)
	require.Equal(t, schedulerName, cfg.Profiles[0].SchedulerName)
	if args != nil {
		for i := range cfg.Profiles[0].PluginConfig {
			if cfg.Profiles[0].PluginConfig[i].Name == numaplace.Name {
				cfg.Profiles[0].PluginConfig[i].Args = args
			}
		}
	}
	return cfg.Profiles
}

// profiles are profiles(t, args) changed by editProfile.
func (c *cluster) profiles(args *numaplace.Args) []schedconfig.KubeSchedulerProfile {
	ps := profiles(c.t, args)
	if c.editProfile != nil {
		for i := range ps {
			c.editProfile(&ps[i])
		}
	}
	return ps
}

// start runs kube-scheduler (scheduler.New with the plugin registered)
// over the cluster with deploy/scheduler-config.yaml's profile; args, if
// not nil, replace the plugin's args. The scheduler is stopped at the end
// of the test if stop was not called.
func (c *cluster) start(args *numaplace.Args) *running {
	t := c.t
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))

	var mu sync.Mutex
	var plugin *numaplace.Plugin
	registry := frameworkruntime.Registry{numaplace.Name: func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := numaplace.New(ctx, obj, h)
		if err == nil {
			mu.Lock()
			plugin = p.(*numaplace.Plugin)
			mu.Unlock()
		}
		return p, err
	}, numaplace.DRAName: numaplace.NewDRA}
	factory := kubescheduler.NewInformerFactory(c.client, 0, nil)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: c.client.EventsV1()})
	opts := []kubescheduler.Option{
		kubescheduler.WithProfiles(c.profiles(args)...),
		kubescheduler.WithFrameworkOutOfTreeRegistry(registry),
		kubescheduler.WithPodInitialBackoffSeconds(1),
		kubescheduler.WithPodMaxBackoffSeconds(1),
	}
	if c.config != nil {
		opts = append(opts, kubescheduler.WithKubeConfig(c.config))
	}
	sched, err := kubescheduler.New(ctx, c.client, factory, nil, profile.NewRecorderFactory(broadcaster), opts...)
	require.NoError(t, err)
	require.NotNil(t, plugin, "the plugin was not built")
	broadcaster.StartRecordingToSink(ctx.Done())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	require.NoError(t, sched.WaitForHandlersSync(ctx))
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, waitTimeout, true,
		func(context.Context) (bool, error) { return plugin.HasSynced(), nil }))
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			broadcaster.Shutdown()
			factory.Shutdown()
		})
	}
	t.Cleanup(stop)
	return &running{plugin: plugin, stop: stop}
}

// node returns a node whose machine is the preset, written into the
// numaplace.io/topology annotation (or, with nrt, as a
// NodeResourceTopology report in numaplace.io/node-resource-topology),
// with the matching capacity; optIn adds the opt-in label.
func node(t *testing.T, name, preset string, optIn, nrt bool) *v1.Node {
	t.Helper()
	m, err := topology.Preset(preset)
	require.NoError(t, err)
	ann := map[string]string{}
	if nrt {
		r, err := kube.NRTFromState(m, nil)
		require.NoError(t, err)
		r.Metadata.Name = name
		b, err := json.Marshal(r)
		require.NoError(t, err)
		ann[numaplace.AnnotationNRT] = string(b)
	} else {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		ann[numaplace.AnnotationTopology] = string(b)
	}
	labels := map[string]string{v1.LabelHostname: name}
	if optIn {
		labels[kube.DefaultOptInLabel] = kube.DefaultOptInValue
	}
	var memMiB int64
	for _, n := range m.Nodes() {
		memMiB += n.MemoryMiB
	}
	res := v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(m.NumCPUs()), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(memMiB<<20, resource.BinarySI),
		v1.ResourcePods:             resource.MustParse("110"),
		kube.ResourceAliyunGPU:      *resource.NewQuantity(int64(m.NumGPUs()), resource.DecimalSI),
		v1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: ann, UID: types.UID("node-" + name)},
		Status:     v1.NodeStatus{Capacity: res, Allocatable: res},
	}
}

// pod is a pod for the numaplace scheduler (trialpods.Pod in namespace
// default, with a UID of its name): one container asking for cpus CPUs
// (request = limit), 1 GiB and gpus aliyun.com/gpu; policy "" means no
// NUMA spec.
func pod(name, policy string, cpus, gpus int) *v1.Pod {
	p := trialpods.Pod("default", name, policy, cpus, gpus)
	p.UID = types.UID("uid-" + name)
	return p
}

func (c *cluster) create(objs ...runtime.Object) {
	c.t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Node:
			_, err = c.client.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *v1.Pod:
			_, err = c.client.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("cannot create %T", o)
		}
		require.NoError(c.t, err)
	}
}

func (c *cluster) get(name string) *v1.Pod {
	c.t.Helper()
	p, err := c.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(c.t, err)
	return p
}

// waitFor polls the pod until cond holds, failing the test after
// waitTimeout with what the pod looked like.
func (c *cluster) waitFor(name, what string, cond func(*v1.Pod) bool) *v1.Pod {
	c.t.Helper()
	var last *v1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, waitTimeout, true,
		func(ctx context.Context) (bool, error) {
			p, err := c.client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			last = p
			return cond(p), nil
		})
	if err != nil {
		msg := "never seen"
		if last != nil {
			msg = fmt.Sprintf("node %q, annotations %v, conditions %+v", last.Spec.NodeName, last.Annotations, last.Status.Conditions)
		}
		c.t.Fatalf("pod %s: waiting for %s: %v; last seen: %s", name, what, err, msg)
	}
	return last
}

// waitBound waits until the pod is bound and returns it.
func (c *cluster) waitBound(name string) *v1.Pod {
	c.t.Helper()
	return c.waitFor(name, "binding", func(p *v1.Pod) bool { return p.Spec.NodeName != "" })
}

// waitUnschedulable waits until the scheduler has marked the pod
// unschedulable and returns the PodScheduled condition's message.
func (c *cluster) waitUnschedulable(name string) string {
	c.t.Helper()
	p := c.waitFor(name, "the PodScheduled=False condition", func(p *v1.Pod) bool {
		cond := podScheduled(p)
		return cond != nil && cond.Status == v1.ConditionFalse && cond.Reason == v1.PodReasonUnschedulable
	})
	require.Empty(c.t, p.Spec.NodeName)
	return podScheduled(p).Message
}

func podScheduled(p *v1.Pod) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.PodScheduled {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// decision reads the pod's numaplace.io/allocation annotation.
func decision(t *testing.T, p *v1.Pod) kube.Decision {
	t.Helper()
	s, ok := p.Annotations[kube.AnnotationAllocation]
	require.True(t, ok, "pod %s has no %s annotation: %v", p.Name, kube.AnnotationAllocation, p.Annotations)
	d, err := kube.ParseDecision(s)
	require.NoError(t, err)
	return d
}

func gpuIDs(d kube.Decision) []int {
	ids := make([]int, len(d.GPUs))
	for i, g := range d.GPUs {
		ids[i] = g.ID
	}
	return ids
}

// requireNoDoubleHandout checks that no CPU and no GPU is in two of the
// bound pods' decisions on one node.
func (c *cluster) requireNoDoubleHandout() {
	t := c.t
	t.Helper()
	pods, err := c.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	type held struct {
		cpus numa.CPUSet
		gpus map[int]string
	}
	byNode := map[string]*held{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Annotations[kube.AnnotationAllocation] == "" {
			continue
		}
		h := byNode[p.Spec.NodeName]
		if h == nil {
			h = &held{gpus: map[int]string{}}
			byNode[p.Spec.NodeName] = h
		}
		d := decision(t, &p)
		cpus, err := numa.ParseCPUSet(d.CPUSet)
		require.NoError(t, err)
		require.True(t, cpus.Intersection(h.cpus).IsEmpty(), "node %s: CPUs %s of pod %s are held twice",
			p.Spec.NodeName, cpus.Intersection(h.cpus), p.Name)
		h.cpus.UnionWith(cpus)
		for _, g := range gpuIDs(d) {
			require.NotContains(t, h.gpus, g, "node %s: GPU %d of pod %s is held by %s too", p.Spec.NodeName, g, p.Name, h.gpus[g])
			h.gpus[g] = p.Name
		}
	}
}

// nodeOf returns the NUMA node IDs of the given GPUs on the preset.
func gpuNUMANodes(t *testing.T, preset string, gpus []int) []int {
	t.Helper()
	m, err := topology.Preset(preset)
	require.NoError(t, err)
	set := map[int]bool{}
	for _, id := range gpus {
		g, ok := m.GPU(id)
		require.True(t, ok, "GPU %d", id)
		set[int(g.NUMANode)] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// cpuNUMANodes returns the NUMA node IDs of a cpulist on the preset.
func cpuNUMANodes(t *testing.T, preset, cpulist string) []int {
	t.Helper()
	m, err := topology.Preset(preset)
	require.NoError(t, err)
	cpus, err := numa.ParseCPUSet(cpulist)
	require.NoError(t, err)
	set := map[int]bool{}
	for c := range cpus.All() {
		i, ok := m.CPUNode(c)
		require.True(t, ok, "CPU %d", c)
		set[int(m.NodeID(i))] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func itoa(n int) string { return strconv.Itoa(n) }
