package koordinator

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	nrtfake "github.com/k8stopologyawareschedwg/noderesourcetopology-api/pkg/generated/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/koordinator-sh/koordinator/apis/extension"
	schedulingv1alpha1 "github.com/koordinator-sh/koordinator/apis/scheduling/v1alpha1"
	koordfake "github.com/koordinator-sh/koordinator/pkg/client/clientset/versioned/fake"
	koordinatorinformers "github.com/koordinator-sh/koordinator/pkg/client/informers/externalversions"
	schedulingconfig "github.com/koordinator-sh/koordinator/pkg/scheduler/apis/config"
	_ "github.com/koordinator-sh/koordinator/pkg/scheduler/apis/config/scheme"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/apis/config/v1beta3"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/frameworkext"
	frameworkexttesting "github.com/koordinator-sh/koordinator/pkg/scheduler/frameworkext/testing"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/deviceshare"
	"github.com/koordinator-sh/koordinator/pkg/scheduler/plugins/nodenumaresource"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// koordNode is one node of a scheduler running Koordinator's
// NodeNUMAResource and DeviceShare plugins as koord-scheduler builds them
// (one framework extender, over a scheduler framework with fake API
// clients): the node's CPU and memory topology given to NodeNUMAResource
// directly (as its NodeResourceTopology event handler would from
// koordlet's report), its GPUs as the Device object koordlet reports
// (read by DeviceShare's informer), and the node's NodeInfo.
type koordNode struct {
	pl   *nodenumaresource.Plugin
	ds   *deviceshare.Plugin
	info *framework.NodeInfo
	name string
}

// lister is the scheduler's snapshot of the one node.
type lister struct{ info *framework.NodeInfo }

func (l *lister) NodeInfos() framework.NodeInfoLister                      { return l }
func (l *lister) StorageInfos() framework.StorageInfoLister                { return l }
func (l *lister) IsPVCUsedByPods(string) bool                              { return false }
func (l *lister) List() ([]*framework.NodeInfo, error)                     { return []*framework.NodeInfo{l.info}, nil }
func (l *lister) HavePodsWithAffinityList() ([]*framework.NodeInfo, error) { return nil, nil }
func (l *lister) HavePodsWithRequiredAntiAffinityList() ([]*framework.NodeInfo, error) {
	return nil, nil
}
func (l *lister) Get(name string) (*framework.NodeInfo, error) {
	if l.info.Node().Name != name {
		return nil, fmt.Errorf("no node %q", name)
	}
	return l.info, nil
}

// handleExtender is the handle the plugin wants: Koordinator's framework
// extender plus a NodeResourceTopology client.
type handleExtender struct {
	frameworkext.FrameworkExtender
	*nrtfake.Clientset
}

// koordTopology is the topology Koordinator's plugin reads for m: the CPU
// topology (socket, NUMA node and core of every allocatable CPU) and each
// NUMA node's CPUs and memory.
func koordTopology(m *topology.Machine) nodenumaresource.TopologyOptions {
	b := nodenumaresource.NewCPUTopologyBuilder()
	for c := range m.NumCores() {
		node := m.Node(m.CoreNode(c))
		for _, cpu := range m.CoreCPUs(c).List() {
			b.AddCPUInfo(node.Socket, int(node.ID), c, cpu)
		}
	}
	opts := nodenumaresource.TopologyOptions{CPUTopology: b.Result(), MaxRefCount: 1}
	for i := range m.NumNodes() {
		node := m.Node(i)
		opts.NUMANodeResources = append(opts.NUMANodeResources, nodenumaresource.NUMANodeResource{
			Node: int(node.ID),
			Resources: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(int64(node.CPUs.Size()), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(node.MemoryMiB<<20, resource.BinarySI),
			},
		})
	}
	return opts
}

// koordDevices is the Device object koordlet reports for m's GPUs: each
// whole (gpu-core and gpu-memory-ratio 100), healthy, with its socket,
// NUMA node, PCIe switch and bus.
func koordDevices(m *topology.Machine) *schedulingv1alpha1.Device {
	d := &schedulingv1alpha1.Device{ObjectMeta: metav1.ObjectMeta{Name: m.Name()}}
	for _, g := range m.GPUs() {
		i, _ := m.NodeIndex(g.NUMANode)
		minor := int32(g.ID)
		d.Spec.Devices = append(d.Spec.Devices, schedulingv1alpha1.DeviceInfo{
			UUID: g.UUID, Minor: &minor, Health: true, Type: schedulingv1alpha1.GPU,
			Resources: corev1.ResourceList{
				extension.ResourceGPUCore:        resource.MustParse("100"),
				extension.ResourceGPUMemoryRatio: resource.MustParse("100"),
				extension.ResourceGPUMemory:      resource.MustParse("80Gi"),
			},
			Topology: &schedulingv1alpha1.DeviceTopology{SocketID: int32(m.Node(i).Socket), NodeID: int32(g.NUMANode),
				PCIEID: g.PCIeSwitch, BusID: g.BusID},
		})
	}
	return d
}

// newKoordNode builds Koordinator's plugins for one node of machine m, as
// Koordinator's own plugin tests do.
func newKoordNode(tb testing.TB, m *topology.Machine) *koordNode {
	tb.Helper()
	var v1beta3args v1beta3.NodeNUMAResourceArgs
	v1beta3.SetDefaults_NodeNUMAResourceArgs(&v1beta3args)
	var args schedulingconfig.NodeNUMAResourceArgs
	if err := v1beta3.Convert_v1beta3_NodeNUMAResourceArgs_To_config_NodeNUMAResourceArgs(&v1beta3args, &args, nil); err != nil {
		tb.Fatal(err)
	}
	var dsV1beta3 v1beta3.DeviceShareArgs
	v1beta3.SetDefaults_DeviceShareArgs(&dsV1beta3)
	var dsArgs schedulingconfig.DeviceShareArgs
	if err := v1beta3.Convert_v1beta3_DeviceShareArgs_To_config_DeviceShareArgs(&dsV1beta3, &dsArgs, nil); err != nil {
		tb.Fatal(err)
	}
	koordClient := koordfake.NewSimpleClientset(koordDevices(m))
	koordInf := koordinatorinformers.NewSharedInformerFactory(koordClient, 0)
	factory, err := frameworkext.NewFrameworkExtenderFactory(
		frameworkext.WithKoordinatorClientSet(koordClient),
		frameworkext.WithKoordinatorSharedInformerFactory(koordInf),
		frameworkext.WithReservationNominator(frameworkexttesting.NewFakeReservationNominator()),
	)
	if err != nil {
		tb.Fatal(err)
	}
	name := m.Name()
	options := nodenumaresource.NewTopologyOptionsManager()
	topo := koordTopology(m)
	options.UpdateTopologyOptions(name, func(o *nodenumaresource.TopologyOptions) { *o = topo })
	nrtClient := nrtfake.NewSimpleClientset()
	newPlugin := frameworkext.PluginFactoryProxy(factory, func(cfg apiruntime.Object, h framework.Handle) (framework.Plugin, error) {
		return nodenumaresource.NewWithOptions(cfg, &handleExtender{h.(frameworkext.FrameworkExtender), nrtClient},
			nodenumaresource.WithTopologyOptionsManager(options))
	})

	var memMiB int64
	for _, n := range m.Nodes() {
		memMiB += n.MemoryMiB
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(int64(m.NumCPUs()), resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(memMiB<<20, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(1000, resource.DecimalSI),
		}},
	}
	node.Status.Capacity = node.Status.Allocatable.DeepCopy()
	info := framework.NewNodeInfo()
	info.SetNode(node)
	cs := kubefake.NewSimpleClientset(node)
	inf := informers.NewSharedInformerFactory(cs, 0)
	fh, err := st.NewFramework(context.Background(),
		[]st.RegisterPluginFunc{
			st.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
			st.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		}, "koord-scheduler",
		runtime.WithClientSet(cs), runtime.WithInformerFactory(inf), runtime.WithSnapshotSharedLister(&lister{info}))
	if err != nil {
		tb.Fatal(err)
	}
	p, err := newPlugin(&args, fh)
	if err != nil {
		tb.Fatal(err)
	}
	ds, err := frameworkext.PluginFactoryProxy(factory, deviceshare.New)(&dsArgs, fh)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	inf.Start(ctx.Done())
	inf.WaitForCacheSync(ctx.Done())
	koordInf.Start(ctx.Done())
	koordInf.WaitForCacheSync(ctx.Done())
	return &koordNode{pl: p.(*nodenumaresource.Plugin), ds: ds.(*deviceshare.Plugin), info: info, name: name}
}

// koordPod is a pod of whole CPUs bound to it (QoS LSR, priority
// koord-prod, FullPCPUs) and memory, under the NUMA topology policy p with
// singleNUMANodeExclusive Required, in Koordinator's annotations (those of
// ACK's NUMA topology-aware scheduling).
func koordPod(name string, cpus int, memMiB int64, p policy.Policy) *corev1.Pod {
	return koordPodBind(name, cpus, 0, memMiB, p, true)
}

// koordPodBind is koordPod with gpus whole GPUs (nvidia.com/gpu), or
// without bind the same amounts with no CPUs bound (QoS LS): Koordinator
// then places amounts on NUMA nodes only.
func koordPodBind(name string, cpus, gpus int, memMiB int64, p policy.Policy, bind bool) *corev1.Pod {
	spec, _ := json.Marshal(extension.NUMATopologySpec{
		NUMATopologyPolicy:      extension.NUMATopologyPolicy(p.String()),
		SingleNUMANodeExclusive: extension.NumaTopologyExclusiveRequired,
	})
	prio := extension.PriorityProdValueMax
	req := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memMiB<<20, resource.BinarySI),
	}
	if gpus > 0 {
		req[extension.ResourceNvidiaGPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name),
			Labels: map[string]string{extension.LabelPodQoS: string(extension.QoSLSR)},
			Annotations: map[string]string{
				extension.AnnotationNUMATopologySpec: string(spec),
				extension.AnnotationResourceSpec:     `{"preferredCPUBindPolicy":"FullPCPUs"}`,
			}},
		Spec: corev1.PodSpec{Priority: &prio, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: req, Limits: req.DeepCopy()}}}},
	}
	if !bind {
		pod.Labels[extension.LabelPodQoS] = string(extension.QoSLS)
		delete(pod.Annotations, extension.AnnotationResourceSpec)
	}
	return pod
}

// filter is one Koordinator scheduling cycle's PreFilter and Filter of pod
// on the node, by both plugins in koord-scheduler's order (every
// PreFilter, then every Filter: NodeNUMAResource's Filter merges its own
// hints with DeviceShare's); success when the node fits. A plugin's Skip
// at PreFilter leaves it out of the Filters, as the framework does.
func (k *koordNode) filter(pod *corev1.Pod) (*framework.CycleState, *framework.Status) {
	ctx := context.Background()
	cs := framework.NewCycleState()
	_, s := k.pl.PreFilter(ctx, cs, pod)
	numaSkip := s.IsSkip()
	if !s.IsSuccess() && !numaSkip {
		return cs, s
	}
	_, s = k.ds.PreFilter(ctx, cs, pod)
	devSkip := s.IsSkip()
	if !s.IsSuccess() && !devSkip {
		return cs, s
	}
	if !numaSkip {
		if s := k.pl.Filter(ctx, cs, pod, k.info); !s.IsSuccess() {
			return cs, s
		}
	}
	if !devSkip {
		if s := k.ds.Filter(ctx, cs, pod, k.info); !s.IsSuccess() {
			return cs, s
		}
	}
	return cs, nil
}

// place filters pod and, when it fits, reserves it on the node, as the
// scheduler does before binding.
func (k *koordNode) place(tb testing.TB, pod *corev1.Pod) {
	tb.Helper()
	cs, s := k.filter(pod)
	if !s.IsSuccess() {
		tb.Fatalf("Koordinator refuses fill pod %s: %v", pod.Name, s.AsError())
	}
	pod.Spec.NodeName = k.name
	if s := k.pl.Reserve(context.Background(), cs, pod, k.name); !s.IsSuccess() {
		tb.Fatalf("Koordinator cannot reserve fill pod %s: %v", pod.Name, s.AsError())
	}
	if s := k.ds.Reserve(context.Background(), cs, pod, k.name); !s.IsSuccess() {
		tb.Fatalf("Koordinator cannot reserve the devices of fill pod %s: %v", pod.Name, s.AsError())
	}
	k.info.AddPod(pod)
}

// pair is one machine in the same state on both sides.
type pair struct {
	m     *topology.Machine
	koord *koordNode
	state *allocator.State
}

// newPair returns machine m empty on both sides, or with fill of its NUMA
// nodes taken whole (every CPU of the node and half of its memory) by
// SingleNUMANode pods. Taking whole nodes leaves the same free resources
// on both sides whichever node each side picks for a fill pod: the nodes
// of these machines have equal CPUs and memory.
func newPair(tb testing.TB, m *topology.Machine, fill int) *pair {
	tb.Helper()
	p := &pair{m: m, koord: newKoordNode(tb, m), state: newState(tb, m, fill)}
	for _, r := range fillRequests(m, fill) {
		p.koord.place(tb, koordPod(r.ID, r.CPUs, r.MemoryMiB, policy.SingleNUMANode))
	}
	return p
}

// fillRequests are the fill pods of newPair.
func fillRequests(m *topology.Machine, fill int) []allocator.Request {
	var out []allocator.Request
	for i := range fill {
		n := m.Node(i)
		out = append(out, allocator.Request{ID: fmt.Sprintf("fill-%d", i), CPUs: n.CPUs.Size(), MemoryMiB: n.MemoryMiB / 2,
			Policy: policy.SingleNUMANode, Exclusive: policy.Required})
	}
	return out
}

// newState is numaplace's side of newPair.
func newState(tb testing.TB, m *topology.Machine, fill int) *allocator.State {
	tb.Helper()
	s := allocator.MustNew(m, allocator.Options{})
	for _, r := range fillRequests(m, fill) {
		if _, err := s.Allocate(&r); err != nil {
			tb.Fatalf("numaplace refuses fill pod %s: %v", r.ID, err)
		}
	}
	return s
}
