package dra_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/fstest"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/plugins/agent/dra"
	"github.com/numaplace/numaplace/topology"
)

// testMachine is 2 NUMA nodes, 4 GPUs (UUIDs GPU-a..d, driver minors 10-13
// from proc), 2 NICs with PCI addresses.
const testMachine = `{
  "numaNodes": [{"id": 0, "socket": 0, "cpus": "0-3"}, {"id": 1, "socket": 1, "cpus": "4-7"}],
  "gpus": [
    {"id": 0, "numaNode": 0, "busID": "0000:1b:00.0", "pcieSwitch": "sw0", "uuid": "GPU-a"},
    {"id": 1, "numaNode": 0, "busID": "0000:1c:00.0", "pcieSwitch": "sw0", "uuid": "GPU-b"},
    {"id": 2, "numaNode": 1, "busID": "0000:9b:00.0", "pcieSwitch": "sw1", "uuid": "GPU-c"},
    {"id": 3, "numaNode": 1, "busID": "0000:9c:00.0", "pcieSwitch": "sw1", "uuid": "GPU-d"}],
  "devices": [
    {"id": "mlx5_0", "class": "rdma", "numaNode": 0, "busID": "0000:18:00.0", "pcieSwitch": "sw0"},
    {"id": "mlx5_1", "class": "rdma", "numaNode": 1, "busID": "0000:98:00.0", "pcieSwitch": "sw1"}]
}`

// env is a driver over a node with stand-in device nodes.
type env struct {
	m                   *topology.Machine
	node                *kubelet.Node
	gpus                *devices.GPUs
	nics                *devices.NICs
	d                   *dra.Driver
	dev, cdiDir, cpPath string
}

func mknod(t *testing.T, path string, major, minor uint32) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(major, minor))); err != nil {
		t.Skipf("cannot make device nodes here (run as root): %v", err)
	}
	require.NoError(t, os.Chmod(path, 0o666))
}

func newEnv(t *testing.T) *env {
	t.Helper()
	m, err := topology.ParseJSON([]byte(testMachine))
	require.NoError(t, err)
	e := &env{m: m, dev: t.TempDir(), cdiDir: filepath.Join(t.TempDir(), "cdi"), cpPath: filepath.Join(t.TempDir(), "checkpoint.json")}
	proc := fstest.MapFS{}
	sys := fstest.MapFS{}
	for _, g := range m.GPUs() {
		minor := 10 + g.ID
		proc["proc/driver/nvidia/gpus/"+g.BusID+"/information"] = &fstest.MapFile{Data: []byte("Device Minor: " + itoa(minor) + "\n")}
		mknod(t, filepath.Join(e.dev, "nvidia"+itoa(minor)), 195, uint32(minor))
	}
	mknod(t, filepath.Join(e.dev, "nvidiactl"), 195, 255)
	for i, d := range m.Devices() {
		sys["sys/bus/pci/devices/"+d.BusID+"/infiniband_verbs/uverbs"+itoa(i)+"/ibdev"] = &fstest.MapFile{Data: []byte(d.ID)}
		mknod(t, filepath.Join(e.dev, "infiniband", "uverbs"+itoa(i)), 231, uint32(192+i))
	}
	mknod(t, filepath.Join(e.dev, "infiniband", "rdma_cm"), 10, 58)
	e.gpus, err = devices.New(m, e.dev, proc)
	require.NoError(t, err)
	e.nics, err = devices.NewNICs(m, e.dev, sys)
	require.NoError(t, err)
	e.open(t)
	return e
}

// open opens the node from the checkpoint and a new driver over it (an
// agent start).
func (e *env) open(t *testing.T) {
	t.Helper()
	var err error
	e.node, err = kubelet.Open(e.m, e.cpPath, kubelet.NodeOptions{})
	require.NoError(t, err)
	e.d, err = dra.New(e.node, e.gpus, e.nics, dra.Options{NodeName: "node-a", CDIRoot: e.cdiDir, HealthInterval: 1})
	require.NoError(t, err)
}

func itoa(i int) string { return strconv.Itoa(i) }

// claim is an allocated claim of the driver's devices in node-a's pool,
// reserved for pod <name>-pod, each device under request "req".
func claim(name string, devs ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devs {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "req", Driver: dra.DriverName, Pool: "node-a", Device: d})
	}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name + "-pod", UID: types.UID("pod-uid-" + name)}}
	return c
}

// inject applies CDI devices to an empty OCI spec with the CDI module's
// own cache, as containerd does.
func inject(t *testing.T, dir string, ids ...string) *oci.Spec {
	t.Helper()
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	require.NoError(t, err)
	require.NoError(t, cache.Refresh())
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	unresolved, err := cache.InjectDevices(spec, ids...)
	require.NoError(t, err, "unresolved %v", unresolved)
	return spec
}

func devicePaths(s *oci.Spec) []string {
	var out []string
	for _, d := range s.Linux.Devices {
		out = append(out, d.Path)
	}
	return out
}

func TestPrepareUnprepare(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := claim("train", "gpu-3", "gpu-2", "nic-mlx5-1")
	res, err := e.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c})
	require.NoError(t, err)
	r := res[c.UID]
	require.NoError(t, r.Err)
	require.Equal(t, []kubeletplugin.Device{
		{Requests: []string{"req"}, PoolName: "node-a", DeviceName: "gpu-3", CDIDeviceIDs: []string{"gpu.numaplace.io/claim=uid-train-gpu-3"}},
		{Requests: []string{"req"}, PoolName: "node-a", DeviceName: "gpu-2", CDIDeviceIDs: []string{"gpu.numaplace.io/claim=uid-train-gpu-2"}},
		{Requests: []string{"req"}, PoolName: "node-a", DeviceName: "nic-mlx5-1", CDIDeviceIDs: []string{"gpu.numaplace.io/claim=uid-train-nic-mlx5-1"}},
	}, r.Devices)

	// The node state holds the claim for its pod.
	h, ok := e.node.Claim("uid-train")
	require.True(t, ok)
	require.Equal(t, []int{2, 3}, h.GPUs)
	require.Equal(t, map[string][]string{"rdma": {"mlx5_1"}}, h.Devices)
	require.Equal(t, []kubelet.ClaimConsumer{{Name: "train-pod", UID: "pod-uid-train"}}, h.Pods)

	// The spec, read and validated by the CDI module, gives a container
	// exactly the claim's devices.
	path := filepath.Join(e.cdiDir, "gpu.numaplace.io-claim_uid-train.json")
	spec, err := cdi.ReadSpec(path, 0)
	require.NoError(t, err)
	require.Equal(t, "gpu.numaplace.io/claim", spec.Kind)
	oc := inject(t, e.cdiDir, r.Devices[0].CDIDeviceIDs[0], r.Devices[1].CDIDeviceIDs[0], r.Devices[2].CDIDeviceIDs[0])
	require.Contains(t, oc.Process.Env, "NVIDIA_VISIBLE_DEVICES=GPU-c,GPU-d", "by UUID in ascending index")
	require.Contains(t, oc.Process.Env, "NUMAPLACE_RDMA_DEVICES=mlx5_1")
	require.Contains(t, oc.Process.Env, "NUMAPLACE_RDMA_MLX5_1=mlx5_1")
	require.ElementsMatch(t, []string{"/dev/nvidia13", "/dev/nvidia12", "/dev/infiniband/uverbs1", "/dev/nvidiactl", "/dev/infiniband/rdma_cm"}, devicePaths(oc))
	for _, d := range oc.Linux.Devices {
		if d.Path == "/dev/nvidia12" {
			require.Equal(t, int64(195), d.Major)
			require.Equal(t, int64(12), d.Minor, "the driver's minor for GPU 2")
			require.Equal(t, "c", d.Type)
		}
	}
	first, err := os.ReadFile(path)
	require.NoError(t, err)

	// Idempotent: the same result and the same spec again.
	again, err := e.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c})
	require.NoError(t, err)
	require.Equal(t, r, again[c.UID])
	second, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, first, second)

	// Unprepare removes the spec and frees the devices; again is fine,
	// and so is an unknown claim.
	un, err := e.d.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{
		{NamespacedName: types.NamespacedName{Namespace: "team", Name: "train"}, UID: "uid-train"},
		{NamespacedName: types.NamespacedName{Namespace: "team", Name: "never"}, UID: "uid-never"}})
	require.NoError(t, err)
	require.Equal(t, map[types.UID]error{"uid-train": nil, "uid-never": nil}, un)
	_, err = os.Stat(path)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Empty(t, e.node.Claims())
	require.NoError(t, e.d.Unprepare("uid-train"))

	// A NIC without a device node of its own (no infiniband_verbs in
	// sysfs) still makes a valid spec: its CDI device sets its variable.
	bare, err := devices.NewNICs(e.m, e.dev, nil)
	require.NoError(t, err)
	d2, err := dra.New(e.node, e.gpus, bare, dra.Options{NodeName: "node-a", CDIRoot: e.cdiDir})
	require.NoError(t, err)
	nicOnly := claim("nic-only", "nic-mlx5-0")
	res, err = d2.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{nicOnly})
	require.NoError(t, err)
	require.NoError(t, res[nicOnly.UID].Err)
	oc = inject(t, e.cdiDir, res[nicOnly.UID].Devices[0].CDIDeviceIDs...)
	require.Equal(t, []string{"/dev/infiniband/rdma_cm"}, devicePaths(oc))
	require.Contains(t, oc.Process.Env, "NUMAPLACE_RDMA_MLX5_0=mlx5_0")
	require.NoError(t, d2.Unprepare(string(nicOnly.UID)))

	// Devices of other drivers are not this driver's business; a claim
	// with none of ours prepares to nothing.
	other := claim("other")
	other.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "cpu", Driver: "dra.cpu", Pool: "node-a", Device: "cpu-0"}}
	res, err = e.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{other})
	require.NoError(t, err)
	require.NoError(t, res[other.UID].Err)
	require.Empty(t, res[other.UID].Devices)
}

func TestPrepareRefusals(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// A pod with a numaplace decision holds GPU 1.
	d := kube.Decision{Policy: 0, NUMANodes: []int{}, GPUs: []kube.DecisionGPU{{ID: 1, UUID: "GPU-b"}}, MemoryMiB: map[string]int64{}}
	pod := &kube.Pod{Namespace: "default", Name: "holder", UID: "u-holder",
		Annotations: map[string]string{kube.AnnotationAllocation: d.String()},
		Containers:  []kube.Container{{Name: "main", Requests: map[string]string{"cpu": "1"}, Limits: map[string]string{"cpu": "1"}}}}
	_, err := e.node.Admit(pod)
	require.NoError(t, err)

	c := claim("wants-1", "gpu-0", "gpu-1")
	res, err := e.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c})
	require.NoError(t, err)
	require.ErrorIs(t, res[c.UID].Err, kubelet.ErrTopologyAffinity)
	require.EqualError(t, res[c.UID].Err, "numaplace: ResourceClaim team/wants-1 cannot be prepared: GPU 1 is held by pod default/holder: "+kubelet.ErrTopologyAffinity.Error())
	require.Empty(t, e.node.Claims(), "nothing held")
	_, err = os.Stat(filepath.Join(e.cdiDir, "gpu.numaplace.io-claim_uid-wants-1.json"))
	require.ErrorIs(t, err, os.ErrNotExist, "no spec")

	// A claim's GPU is refused to another claim, naming it.
	ok := claim("first", "gpu-2")
	res, err = e.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{ok})
	require.NoError(t, err)
	require.NoError(t, res[ok.UID].Err)
	second := claim("second", "gpu-2")
	res, _ = e.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{second})
	require.ErrorContains(t, res[second.UID].Err, "GPU 2 is held by ResourceClaim team/first")

	// An unhealthy GPU (its node gone, found by the health check).
	require.NoError(t, os.Remove(filepath.Join(e.dev, "nvidia13")))
	require.True(t, e.d.CheckHealth())
	sick := claim("sick", "gpu-3")
	res, _ = e.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{sick})
	require.ErrorContains(t, res[sick.UID].Err, "GPU 3 is unhealthy")

	// Another node's device, an unknown device, an unallocated claim.
	wrong := claim("wrong", "gpu-0")
	wrong.Status.Allocation.Devices.Results[0].Pool = "node-b"
	unknown := claim("unknown", "gpu-9")
	none := claim("none")
	none.Status.Allocation = nil
	res, _ = e.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{wrong, unknown, none})
	require.ErrorContains(t, res[wrong.UID].Err, "device gpu-0 of pool node-b is not this node's (pool node-a)")
	require.ErrorContains(t, res[unknown.UID].Err, "device gpu-9 is not a device this node publishes")
	require.ErrorContains(t, res[none.UID].Err, "not allocated")
}

// fakePublisher records what was published.
type fakePublisher struct {
	got []resourceslice.DriverResources
}

func (f *fakePublisher) PublishResources(_ context.Context, r resourceslice.DriverResources) error {
	f.got = append(f.got, r)
	return nil
}

func TestHealthTaintsAndRepublish(t *testing.T) {
	e := newEnv(t)
	pub := &fakePublisher{}
	e.d.SetPublisher(pub)
	ctx := context.Background()
	require.False(t, e.d.CheckHealth(), "every node present")
	require.NoError(t, e.d.Publish(ctx))
	tainted := func() []string {
		var out []string
		for _, s := range pub.got[len(pub.got)-1].Pools["node-a"].Slices {
			for _, d := range s.Devices {
				if len(d.Taints) > 0 {
					out = append(out, d.Name)
				}
			}
		}
		return out
	}
	require.Empty(t, tainted())

	require.NoError(t, os.Remove(filepath.Join(e.dev, "nvidia11")))
	require.NoError(t, os.Remove(filepath.Join(e.dev, "infiniband", "uverbs0")))
	require.True(t, e.d.CheckHealth())
	require.NoError(t, e.d.Publish(ctx))
	require.Equal(t, []string{"gpu-1", "nic-mlx5-0"}, tainted())
	require.Equal(t, map[string][]string{"gpu": {"1"}, "rdma": {"mlx5_0"}}, e.node.Unhealthy())

	mknod(t, filepath.Join(e.dev, "nvidia11"), 195, 11)
	mknod(t, filepath.Join(e.dev, "infiniband", "uverbs0"), 231, 192)
	require.True(t, e.d.CheckHealth())
	require.NoError(t, e.d.Publish(ctx))
	require.Empty(t, tainted(), "recovered: the taints go")
	require.False(t, e.d.CheckHealth(), "no change")

	// The kubelet's health stream: every device, the sick one Unhealthy.
	require.NoError(t, os.Remove(filepath.Join(e.dev, "nvidia10")))
	e.d.CheckHealth()
	reports := make(chan kubeletplugin.DeviceHealthReport, 1)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- e.d.WatchHealthStatus(wctx, reports) }()
	rep := <-reports
	cancel()
	require.NoError(t, <-done)
	health := map[string]kubeletplugin.HealthStatus{}
	for _, h := range rep.Devices {
		health[h.DeviceName] = h.Health
	}
	require.Equal(t, map[string]kubeletplugin.HealthStatus{"gpu-0": "Unhealthy", "gpu-1": "Healthy", "gpu-2": "Healthy", "gpu-3": "Healthy",
		"nic-mlx5-0": "Healthy", "nic-mlx5-1": "Healthy"}, health)
}

// TestRestartReconcile: prepared claims survive a restart of the agent (a
// new node from the checkpoint, a new driver); reconciling with the API
// server releases those gone or deallocated and removes stray specs.
func TestRestartReconcile(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	keep, gone, dealloc, moved := claim("keep", "gpu-0", "nic-mlx5-0"), claim("gone", "gpu-1"), claim("dealloc", "gpu-2"), claim("moved", "gpu-3")
	res, err := e.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{keep, gone, dealloc, moved})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	stray := filepath.Join(e.cdiDir, "gpu.numaplace.io-claim_uid-stray.json")
	require.NoError(t, os.WriteFile(stray, []byte("{}"), 0o644))
	other := filepath.Join(e.cdiDir, "vendor.example-gpu.json")
	require.NoError(t, os.WriteFile(other, []byte("{}"), 0o644))
	// The kill -9: nothing is unprepared; a lost spec of a kept claim.
	require.NoError(t, os.Remove(filepath.Join(e.cdiDir, "gpu.numaplace.io-claim_uid-keep.json")))
	e.open(t)
	require.Len(t, e.node.Claims(), 4, "the checkpoint has them")

	keepNow := keep.DeepCopy()
	keepNow.Status.ReservedFor = append(keepNow.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "second", UID: "pod-uid-2"})
	deallocNow := dealloc.DeepCopy()
	deallocNow.Status.Allocation = nil
	movedNow := claim("moved", "gpu-0") // allocated other devices since
	api := map[string]*resourceapi.ResourceClaim{"keep": keepNow, "dealloc": deallocNow, "moved": movedNow}
	get := func(_ context.Context, ns, name string) (*resourceapi.ResourceClaim, error) {
		if c, ok := api[name]; ok && ns == "team" {
			return c, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
	}
	require.NoError(t, e.d.Reconcile(ctx, get))
	held := e.node.Claims()
	require.Len(t, held, 1)
	require.Equal(t, "uid-keep", held[0].UID)
	require.Len(t, held[0].Pods, 2, "reservedFor updated")
	left, err := os.ReadDir(e.cdiDir)
	require.NoError(t, err)
	var names []string
	for _, f := range left {
		names = append(names, f.Name())
	}
	require.Equal(t, []string{"gpu.numaplace.io-claim_uid-keep.json", "vendor.example-gpu.json"}, names,
		"the kept claim's spec written again; the others' and the stray one removed; another vendor's left alone")
	_, err = cdi.ReadSpec(filepath.Join(e.cdiDir, "gpu.numaplace.io-claim_uid-keep.json"), 0)
	require.NoError(t, err)

	// An API server that cannot be reached keeps the claims.
	down := func(context.Context, string, string) (*resourceapi.ResourceClaim, error) {
		return nil, errors.New("connection refused")
	}
	require.ErrorContains(t, e.d.Reconcile(ctx, down), "connection refused")
	require.Len(t, e.node.Claims(), 1)

	// The GPUs of released claims are free again.
	res, err = e.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim("new", "gpu-1", "gpu-2", "gpu-3")})
	require.NoError(t, err)
	require.NoError(t, res["uid-new"].Err)
}
