package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/plugins/agent/devices"
)

// DefaultCDIRoot is where the claims' CDI specs are written by default.
const DefaultCDIRoot = "/var/run/cdi"

// Options configure a [Driver].
type Options struct {
	// DriverName is the DRA driver name; "" means [DriverName].
	DriverName string
	// NodeName is the Kubernetes node's name, the name of the driver's
	// pool (required).
	NodeName string
	// CDIRoot is the directory of the claims' CDI specs; "" means
	// [DefaultCDIRoot].
	CDIRoot string
	// ListAttributes publishes resource.kubernetes.io/numaNode as a list
	// (turn it on only when the cluster's DRAListTypeAttributes feature
	// is: the driver cannot tell).
	ListAttributes bool
	// PCIeRoots are the devices' PCIe root complexes by bus ID (see
	// [PCIeRoots]); nil publishes no pcieRoot attribute.
	PCIeRoots map[string]string
	// GPUs restricts the published GPUs to these IDs (nil: every GPU), so
	// that the device plugin can serve the others.
	GPUs []int
	// HealthInterval is how often the published devices' nodes are
	// checked by [Driver.Run] (0 or less: never).
	HealthInterval time.Duration
	// OnChange, if not nil, is called after every change of the node state
	// the driver makes (a claim held or released, a device's health).
	OnChange func()
	// Logger receives the driver's log; nil discards it.
	Logger *slog.Logger
}

// Publisher publishes the driver's ResourceSlices: a
// *kubeletplugin.Helper, or a stand-in in tests.
type Publisher interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// Driver is numaplace-agent's DRA role: it publishes the node's GPUs and
// RDMA NICs and prepares the claims allocated them, holding each claim's
// devices in the node state (kubelet.Node.HoldClaim). It implements
// kubeletplugin.DRAPlugin; its methods are safe for concurrent use.
type Driver struct {
	node *kubelet.Node
	gpus *devices.GPUs
	nics *devices.NICs
	opts Options
	cat  *Catalog
	cdi  *cdiStore
	log  *slog.Logger

	mu        sync.Mutex
	pub       Publisher
	published chan struct{} // closed and replaced at every change of the devices' health
	fatal     func(error)   // stops Run, when it runs
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// New returns the DRA role over node, whose devices' nodes gpus and nics
// give (nics may be nil: no NIC has nodes of its own).
func New(node *kubelet.Node, gpus *devices.GPUs, nics *devices.NICs, opts Options) (*Driver, error) {
	if node == nil || gpus == nil {
		return nil, errors.New("dra: New needs the node and its GPUs")
	}
	if opts.NodeName == "" {
		return nil, errors.New("dra: the node's name is required (it names the driver's pool)")
	}
	if opts.DriverName == "" {
		opts.DriverName = DriverName
	}
	if opts.CDIRoot == "" {
		opts.CDIRoot = DefaultCDIRoot
	}
	if nics == nil {
		var err error
		if nics, err = devices.NewNICs(node.Machine(), "/dev", nil); err != nil {
			return nil, err
		}
	}
	minors := map[int]int{}
	for _, g := range node.Machine().GPUs() {
		if m, ok := gpus.Minor(g.ID); ok {
			minors[g.ID] = m
		}
	}
	cat, err := NewCatalog(Inventory{Machine: node.Machine(), DriverName: opts.DriverName, Pool: opts.NodeName,
		Minors: minors, PCIeRoots: opts.PCIeRoots, ListAttributes: opts.ListAttributes, GPUs: opts.GPUs})
	if err != nil {
		return nil, err
	}
	store, err := newCDIStore(opts.CDIRoot, opts.DriverName)
	if err != nil {
		return nil, fmt.Errorf("dra: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{node: node, gpus: gpus, nics: nics, opts: opts, cat: cat, cdi: store, log: log,
		published: make(chan struct{})}, nil
}

// Catalog returns the published devices.
func (d *Driver) Catalog() *Catalog { return d.cat }

// Resources returns the node's pool as it is now: the catalog's devices,
// the unhealthy ones tainted.
func (d *Driver) Resources() resourceslice.DriverResources {
	return d.cat.Resources(d.node.Unhealthy())
}

// SetPublisher sets where [Driver.Publish] publishes (Run sets the
// kubelet plugin helper).
func (d *Driver) SetPublisher(p Publisher) {
	d.mu.Lock()
	d.pub = p
	d.mu.Unlock()
}

// Publish publishes the node's pool as it is now. Without a publisher it
// does nothing.
func (d *Driver) Publish(ctx context.Context) error {
	d.mu.Lock()
	p := d.pub
	d.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.PublishResources(ctx, d.Resources())
}

// CheckHealth checks the device nodes of every published device once and
// records each change in the node state (kubelet.Node.SetDeviceHealth: an
// unhealthy device is given to no new claim or pod). It reports whether
// anything changed; the caller republishes then (Run does).
func (d *Driver) CheckHealth() bool {
	sick := map[DeviceRef]bool{}
	for class, ids := range d.node.Unhealthy() {
		for _, id := range ids {
			if class == allocator.GPUClass {
				if g, err := strconv.Atoi(id); err == nil {
					sick[DeviceRef{Class: class, GPU: g}] = true
				}
			} else {
				sick[DeviceRef{Class: class, ID: id}] = true
			}
		}
	}
	changed := false
	for _, name := range d.cat.Names() {
		ref, _ := d.cat.Lookup(name)
		var present bool
		id := ref.ID
		if ref.Class == allocator.GPUClass {
			present, id = d.gpus.Present(ref.GPU), strconv.Itoa(ref.GPU)
		} else {
			present = d.nics.Present(ref.ID)
		}
		if present == !sick[ref] {
			continue
		}
		if _, err := d.node.SetDeviceHealth(ref.Class, id, present); err != nil {
			d.log.Error("cannot record a device's health", "device", name, "healthy", present, "error", err)
			continue
		}
		changed = true
		if present {
			d.log.Info("device healthy again: its taint is removed", "device", name)
		} else {
			d.log.Warn("device unhealthy (its device node is missing): tainted NoSchedule", "device", name)
		}
	}
	if changed {
		d.changed()
	}
	return changed
}

// changed tells the health watchers and Options.OnChange that the state
// changed.
func (d *Driver) changed() {
	d.mu.Lock()
	close(d.published)
	d.published = make(chan struct{})
	d.mu.Unlock()
	if d.opts.OnChange != nil {
		d.opts.OnChange()
	}
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin: for each claim
// it holds the devices allocated to the driver in this node's pool
// (kubelet.Node.HoldClaim) and writes the claim's CDI spec, and returns
// each device's CDI device ID (see [Driver.Prepare]).
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		if c == nil {
			continue
		}
		out[c.UID] = d.Prepare(c)
		if err := out[c.UID].Err; err != nil {
			d.log.Error("claim not prepared", "claim", c.Namespace+"/"+c.Name, "uid", c.UID, "error", err)
		} else {
			d.log.Info("claim prepared", "claim", c.Namespace+"/"+c.Name, "uid", c.UID, "devices", len(out[c.UID].Devices))
		}
	}
	return out, nil
}

// Prepare prepares one claim. The devices allocated to the driver in this
// node's pool are held in the node state for the claim and its pods (its
// status.reservedFor); a device another pod or claim holds, or that is
// unhealthy, is refused with an error naming the holder, which the kubelet
// shows on the pod. The claim's CDI spec (kind <driver>/claim, file
// <driver>-claim_<uid>.json in the CDI directory) gets one CDI device per
// allocated device, "<claim UID>-<device name>", with its device nodes
// (/dev/nvidiaN by the driver's minor; a NIC's /dev/infiniband/uverbsN),
// and for the whole claim NVIDIA_VISIBLE_DEVICES (the GPUs by UUID, else
// index, in ascending index), the NVIDIA control nodes and
// /dev/infiniband/rdma_cm that exist. Preparing a claim again (the kubelet
// retries) writes the same spec and returns the same result.
func (d *Driver) Prepare(c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	fail := func(format string, args ...any) kubeletplugin.PrepareResult {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("numaplace: ResourceClaim %s/%s: "+format, append([]any{c.Namespace, c.Name}, args...)...)}
	}
	if c.Status.Allocation == nil {
		return fail("not allocated")
	}
	hold := kubelet.ClaimHold{UID: string(c.UID), Namespace: c.Namespace, Name: c.Name}
	for _, r := range c.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" {
			hold.Pods = append(hold.Pods, kubelet.ClaimConsumer{Name: r.Name, UID: string(r.UID)})
		}
	}
	var result kubeletplugin.PrepareResult
	nics := map[string]bool{}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != d.opts.DriverName {
			continue
		}
		if r.Pool != d.opts.NodeName {
			return fail("device %s of pool %s is not this node's (pool %s)", r.Device, r.Pool, d.opts.NodeName)
		}
		ref, ok := d.cat.Lookup(r.Device)
		if !ok {
			return fail("device %s is not a device this node publishes", r.Device)
		}
		if ref.Class == allocator.GPUClass {
			if !slices.Contains(hold.GPUs, ref.GPU) {
				hold.GPUs = append(hold.GPUs, ref.GPU)
			}
		} else {
			nics[ref.ID] = true
		}
		result.Devices = append(result.Devices, kubeletplugin.Device{Requests: []string{r.Request},
			PoolName: r.Pool, DeviceName: r.Device, CDIDeviceIDs: []string{d.cdi.DeviceID(string(c.UID), r.Device)}})
	}
	if len(result.Devices) == 0 {
		return result
	}
	if len(nics) > 0 {
		hold.Devices = map[string][]string{"rdma": slices.Sorted(maps.Keys(nics))}
	}
	slices.Sort(hold.GPUs)
	_, held := d.node.Claim(hold.UID)
	if err := d.node.HoldClaim(hold); err != nil {
		var te *kubelet.TopologyAffinityError
		if errors.As(err, &te) {
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("numaplace: ResourceClaim %s cannot be prepared: %s: %w", hold.Key(), te.Reason, kubelet.ErrTopologyAffinity)}
		}
		return fail("%w", err)
	}
	if err := d.writeSpec(hold); err != nil {
		if !held {
			if rerr := d.node.ReleaseClaim(hold.UID); rerr != nil {
				err = fmt.Errorf("%w (and releasing its devices failed: %w)", err, rerr)
			}
		}
		return fail("%w", err)
	}
	if !held {
		d.changed()
	}
	return result
}

// writeSpec writes the CDI spec of a held claim.
func (d *Driver) writeSpec(hold kubelet.ClaimHold) error {
	var devs []claimDevice
	var shared []devices.Node
	if len(hold.GPUs) > 0 {
		nodes, err := d.gpus.For(hold.GPUs)
		if err != nil {
			return err
		}
		for i, g := range hold.GPUs {
			name, _ := d.cat.NameOf(DeviceRef{Class: allocator.GPUClass, GPU: g})
			devs = append(devs, claimDevice{name: name, nodes: nodes[i : i+1]})
		}
		shared = append(shared, nodes[len(hold.GPUs):]...)
	}
	for _, id := range hold.Devices["rdma"] {
		name, _ := d.cat.NameOf(DeviceRef{Class: "rdma", ID: id})
		own, _ := d.nics.Paths(id)
		nodes, err := d.nics.For([]string{id})
		if err != nil {
			return err
		}
		devs = append(devs, claimDevice{name: name, nodes: nodes[:len(own)], env: []string{rdmaEnv(id)}})
		if len(nodes) > len(own) && !slices.ContainsFunc(shared, func(n devices.Node) bool { return n.Path == devices.RDMACM }) {
			shared = append(shared, nodes[len(own):]...)
		}
	}
	var env []string
	if len(hold.GPUs) > 0 {
		m := d.node.Machine()
		env = append(env, EnvVisibleDevices+"="+visibleDevices(hold.GPUs, func(id int) string { g, _ := m.GPU(id); return g.UUID }))
	}
	if nics := hold.Devices["rdma"]; len(nics) > 0 {
		env = append(env, EnvRDMADevices+"="+strings.Join(nics, ","))
	}
	spec, err := d.cdi.buildSpec(hold.UID, devs, env, shared)
	if err != nil {
		return err
	}
	return d.cdi.write(hold.UID, spec)
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin: for each
// claim it removes its CDI spec and releases its devices in the node
// state. A claim that is not prepared succeeds (the kubelet retries).
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		out[c.UID] = d.Unprepare(string(c.UID))
		if out[c.UID] != nil {
			d.log.Error("claim not unprepared", "claim", c.String(), "error", out[c.UID])
		} else {
			d.log.Info("claim unprepared", "claim", c.String())
		}
	}
	return out, nil
}

// Unprepare removes claim uid's CDI spec and releases its devices; an
// unknown claim is no error.
func (d *Driver) Unprepare(uid string) error {
	if err := d.cdi.remove(uid); err != nil {
		return err
	}
	err := d.node.ReleaseClaim(uid)
	if errors.Is(err, allocator.ErrUnknownID) {
		return nil
	}
	if err == nil {
		d.changed()
	}
	return err
}

// HandleError implements kubeletplugin.DRAPlugin: errors of the
// background work (publishing the slices, the gRPC servers) are logged; an
// error that is not recoverable stops [Driver.Run]. A slice the API server
// stored without some fields is logged with the features it lacks; a
// list-type numaNode the API server refuses (its DRAListTypeAttributes gate
// off) is logged saying to run without --dra-list-attributes.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	var dropped *resourceslice.DroppedFieldsError
	if d.opts.ListAttributes && strings.Contains(err.Error(), string(AttrNUMANode)+"]: Invalid value") {
		d.log.Error("the API server refuses the ResourceSlices' list-type numaNode: its DRAListTypeAttributes feature gate is off; "+
			"run the agent without --dra-list-attributes", "message", msg, "error", err)
	} else if errors.As(err, &dropped) {
		d.log.Error("the API server dropped fields of a ResourceSlice", "message", msg, "missingFeatures", dropped.DisabledFeatures(),
			"listAttributes", d.opts.ListAttributes, "error", err)
	} else {
		d.log.Error("DRA background error", "message", msg, "error", err)
	}
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.mu.Lock()
		stop := d.fatal
		d.mu.Unlock()
		if stop != nil {
			stop(fmt.Errorf("%s: %w", msg, err))
		}
	}
}

// WatchHealthStatus implements kubeletplugin.DRAPlugin: it sends the
// kubelet the health of every published device, at once, at every change
// and at least every 20 seconds (the kubelet forgets a report after 30),
// until ctx is done. Without health checks (Options.HealthInterval not
// positive) it returns kubeletplugin.ErrHealthNotSupported.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	if d.opts.HealthInterval <= 0 {
		return kubeletplugin.ErrHealthNotSupported
	}
	tick := time.NewTicker(min(d.opts.HealthInterval, 20*time.Second))
	defer tick.Stop()
	for {
		d.mu.Lock()
		next := d.published
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case reports <- d.healthReport():
		}
		select {
		case <-ctx.Done():
			return nil
		case <-next:
		case <-tick.C:
		}
	}
}

// healthReport is the health of every published device now.
func (d *Driver) healthReport() kubeletplugin.DeviceHealthReport {
	res := d.Resources()
	now := time.Now()
	var r kubeletplugin.DeviceHealthReport
	for _, s := range res.Pools[d.opts.NodeName].Slices {
		for _, dev := range s.Devices {
			h := kubeletplugin.DeviceHealth{PoolName: d.opts.NodeName, DeviceName: dev.Name, Health: kubeletplugin.HealthStatusHealthy,
				LastUpdated: now, HealthCheckTimeout: 30 * time.Second}
			if len(dev.Taints) > 0 {
				h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, "device node missing"
			}
			r.Devices = append(r.Devices, h)
		}
	}
	return r
}
