package numaplace

// The side-by-side benchmark of issue 24 (item 6): NUMAPlace's Filter and
// Score for a pod whose GPUs come from a ResourceClaim of gpu.numaplace.io,
// beside the in-tree DynamicResources plugin's Filter for the same pod, node
// and ResourceSlices, in one run. It lives here rather than in the
// benchmarks module because NUMAPlace's DRA path (dra.go) is unexported
// state of this package (the plugin's SharedDRAManager, features and CEL
// cache are set by New from a framework handle), and this module already
// builds k8s.io/kubernetes's scheduler at the version numaplace-scheduler
// ships (v1.37.2): both plugins are built from the same code the binary
// runs, over one DRA manager.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	k8sevents "k8s.io/client-go/tools/events"
	resourceslicetracker "k8s.io/dynamic-resource-allocation/resourceslice/tracker"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/util/assumecache"
	"k8s.io/utils/ptr"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/plugins/kube-scheduler/internal/draslices"
	"github.com/numaplace/numaplace/topology"
)

// benchGPUClass is deploy/dra.yaml's gpu.numaplace.io DeviceClass.
func benchGPUClass() *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: ClassGPU},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.driver == "gpu.numaplace.io" && device.attributes["gpu.numaplace.io"].type == "gpu"`}}}}}
}

// benchDRAPod is the benchmarks' pod: one container of cpus CPUs (requests
// = limits) with the ACK annotations for policy, using the ResourceClaim
// "gpus" (ExactCount gpus of gpu.numaplace.io), which it returns too.
func benchDRAPod(policy string, cpus, gpus int) (*v1.Pod, *resourceapi.ResourceClaim) {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpus", UID: "uid-claim-gpus"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpus",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: ClassGPU, AllocationMode: resourceapi.DeviceAllocationModeExactCount,
				Count: int64(gpus)}}}}}}
	res := v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(cpus), resource.DecimalSI), v1.ResourceMemory: resource.MustParse("1Gi")}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: types.UID("uid-p"), Annotations: map[string]string{
		kube.AnnotationCPUSetScheduler: "required",
		kube.AnnotationSpecAlibaba:     fmt.Sprintf(`{"numaTopologyPolicy":%q}`, policy)}},
		Spec: v1.PodSpec{
			ResourceClaims: []v1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To("gpus")}},
			Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Requests: res, Limits: res.DeepCopy(),
				Claims: []v1.ResourceClaim{{Name: "gpus"}}}}}}}
	return p, claim
}

// draBench is one node's DRA world, built as DynamicResources' own tests
// build theirs (dynamicresources_test.go's setup): a fake clientset with
// the DeviceClass, the claim and the node's ResourceSlices, its informers,
// the ResourceSlice tracker, the claims' assume cache, the DRA manager and
// a framework handle holding it; NUMAPlace (newTestEvents' plugin with the
// manager, the features and the CEL cache New gives it) and the in-tree
// DynamicResources plugin over it.
type draBench struct {
	numaplace *Plugin
	upstream  *dynamicresources.DynamicResources
	nodeInfo  fwk.NodeInfo
}

func newDRABench(b testing.TB, preset string, claim *resourceapi.ResourceClaim) *draBench {
	b.Helper()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	b.Cleanup(cancel) // the informers' Shutdown below waits for this
	m, err := topology.Preset(preset)
	require.NoError(b, err)
	const nodeName = "gpu-1"
	objs := []apiruntime.Object{benchGPUClass(), claim}
	for _, s := range draslices.Published(DRADriver, nodeName, m) {
		objs = append(objs, s)
	}
	client := fake.NewClientset()
	for _, o := range objs {
		require.NoError(b, client.Tracker().Add(o))
	}
	inf := informers.NewSharedInformerFactory(client, 0)
	tracker, err := resourceslicetracker.StartTracker(ctx, resourceslicetracker.Options{
		EnableDeviceTaintRules: true,
		SliceInformer:          inf.Resource().V1().ResourceSlices(),
		TaintInformer:          inf.Resource().V1().DeviceTaintRules(),
		KubeClient:             client,
	})
	require.NoError(b, err)
	claims := assumecache.NewAssumeCache(logr.Discard(), inf.Resource().V1().ResourceClaims().Informer(), "resource claim", "", nil)
	done := []cache.DoneChecker{tracker.HasSyncedChecker(), claims.AddEventHandler(cache.ResourceEventHandlerFuncs{}).HasSyncedChecker()}
	mgr := dynamicresources.NewDRAManager(ctx, claims, tracker, inf)
	fh, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(inf),
		frameworkruntime.WithEventRecorder(&k8sevents.FakeRecorder{}),
		frameworkruntime.WithSharedDRAManager(mgr))
	require.NoError(b, err)
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	args := &config.DynamicResourcesArgs{
		FilterTimeout:  &metav1.Duration{Duration: config.DynamicResourcesFilterTimeoutDefault},
		BindingTimeout: &metav1.Duration{Duration: config.DynamicResourcesBindingTimeoutDefault},
	}
	up, err := dynamicresources.New(ctx, args, fh, fts)
	require.NoError(b, err)
	inf.Start(ctx.Done())
	b.Cleanup(func() { cancel(); inf.Shutdown() })
	inf.WaitForCacheSync(ctx.Done())
	require.True(b, cache.WaitFor(ctx, "event handlers", done...))

	e := newTestEvents(b)
	pl := e.pl
	pl.dra = mgr
	pl.draFeatures = dynamicresources.AllocatorFeatures(fts)
	pl.celCache = newCELCache(pl.draFeatures)
	n := testNode(b, nodeName, preset, true)
	e.nodeChanged(n)
	ni := framework.NewNodeInfo()
	ni.SetNode(n)
	return &draBench{numaplace: pl, upstream: up.(*dynamicresources.DynamicResources), nodeInfo: ni}
}

// BenchmarkDRAFilter is the cost per node of deciding a DRA pod (a claim
// for 4 gpu.numaplace.io GPUs, 24 CPUs, the ACK annotations of the policy)
// on an empty node, side by side: "numaplace" is NUMAPlace's Filter and
// Score (the decision, then the claims checked against the decision's
// devices: claimsFit, or the structured allocator over the node's slices
// cut down to them; as numaplace-scheduler runs them for every feasible
// node); "dynamicresources" is the in-tree
// DynamicResources plugin's Filter for the same pod, node and slices (the
// built-in allocator's first fit; it does not score). PreFilter runs once,
// outside the loop, for both. A SingleNUMANode pod of 4 GPUs does not fit
// dgx-a100 or numa64 (2 GPUs per NUMA node): NUMAPlace refuses it, which
// DynamicResources, knowing no policy, does not; the Restricted pod is
// admitted by both. "Restricted-selector" is the Restricted pod whose
// request has a CEL selector of its own (the class's test again), which
// claimsFit evaluates itself; "Restricted-match" the Restricted pod whose
// claim has a matchAttribute constraint (on the type, which all GPUs
// share), so that NUMAPlace runs the structured allocator over the
// cut-down slices (claimsFit decides no claim with a constraint).
func BenchmarkDRAFilter(b *testing.B) {
	for _, preset := range []string{"dgx-a100", "numa64"} {
		for _, pol := range []string{"SingleNUMANode", "Restricted", "Restricted-selector", "Restricted-match"} {
			policy, variant, _ := strings.Cut(pol, "-")
			pod, claim := benchDRAPod(policy, 24, 4)
			switch variant {
			case "selector":
				claim.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
					Expression: `device.attributes["gpu.numaplace.io"].type == "gpu"`}}}
			case "match":
				claim.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{
					MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(DRADriver + "/type"))}}
			}
			b.Run(preset+"/"+pol+"/numaplace", func(b *testing.B) {
				w := newDRABench(b, preset, claim)
				pl := w.numaplace
				state := framework.NewCycleState()
				_, st := pl.PreFilter(context.Background(), state, pod, []fwk.NodeInfo{w.nodeInfo})
				require.True(b, st.IsSuccess(), st.Message())
				s, err := pl.podState(state, pod)
				require.NoError(b, err)
				require.NotNil(b, s.dra, "NUMAPlace did not take the pod's claim")
				fits := policy == "Restricted"
				st = pl.Filter(context.Background(), state, pod, w.nodeInfo)
				require.Equal(b, fits, st.IsSuccess(), st.Message())
				b.ReportAllocs()
				cpu0, cpuOK := processCPU()
				for b.Loop() {
					if st := pl.Filter(context.Background(), state, pod, w.nodeInfo); st.IsSuccess() != fits {
						b.Fatal(st.Message())
					}
					if fits {
						if _, st := pl.Score(context.Background(), state, pod, w.nodeInfo); !st.IsSuccess() {
							b.Fatal(st.Message())
						}
					}
				}
				reportCPU(b, cpu0, cpuOK)
			})
			b.Run(preset+"/"+pol+"/dynamicresources", func(b *testing.B) {
				w := newDRABench(b, preset, claim)
				up := w.upstream
				state := framework.NewCycleState()
				_, st := up.PreFilter(context.Background(), state, pod, []fwk.NodeInfo{w.nodeInfo})
				require.True(b, st.IsSuccess(), st.Message())
				st = up.Filter(context.Background(), state, pod, w.nodeInfo)
				require.True(b, st.IsSuccess(), st.Message())
				b.ReportAllocs()
				cpu0, cpuOK := processCPU()
				for b.Loop() {
					if st := up.Filter(context.Background(), state, pod, w.nodeInfo); !st.IsSuccess() {
						b.Fatal(st.Message())
					}
				}
				reportCPU(b, cpu0, cpuOK)
			})
		}
	}
}

// reportCPU reports the process's CPU time per op since cpu0 (all its
// threads: the garbage collector's work too), which on a loaded machine
// moves less than the wall clock, which counts the waits for a CPU.
func reportCPU(b *testing.B, cpu0 time.Duration, ok bool) {
	if cpu1, ok1 := processCPU(); ok && ok1 && b.N > 0 {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}
