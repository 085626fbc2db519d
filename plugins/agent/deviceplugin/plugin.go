package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/plugins/agent/nri"
	"github.com/numaplace/numaplace/topology"
)

// Defaults of [Options].
const (
	DefaultSocketDir      = "/var/lib/kubelet/device-plugins"
	DefaultResourceName   = "aliyun.com/gpu"
	DefaultEndpoint       = "numaplace-gpu.sock"
	DefaultWatchInterval  = time.Second
	DefaultHealthInterval = 10 * time.Second
	// KubeletSocket is the kubelet's registration socket in the socket
	// directory.
	KubeletSocket = "kubelet.sock"
)

// Options tune a [Plugin]. The zero value is the default.
type Options struct {
	// SocketDir is the kubelet's device-plugin directory, where its
	// kubelet.sock is and the plugin's socket goes; "" is
	// [DefaultSocketDir].
	SocketDir string
	// ResourceName is the extended resource advertised; "" is
	// [DefaultResourceName].
	ResourceName string
	// Endpoint is the plugin's socket file name in SocketDir; "" is
	// [DefaultEndpoint].
	Endpoint string
	// WatchInterval is how often the plugin checks that its socket and the
	// kubelet's are the ones it registered with (a restarted kubelet
	// removes the first and recreates the second); 0 is
	// [DefaultWatchInterval].
	WatchInterval time.Duration
	// HealthInterval is how often each GPU's health is checked (its device
	// node exists, see [Plugin.CheckHealth]); 0 is
	// [DefaultHealthInterval], negative turns the checks off (health then
	// changes only through [Plugin.SetHealth]).
	HealthInterval time.Duration
	// NoDeviceNodes gives the GPUs' device nodes in Allocate's answers only
	// for GPUs known to be the container's own (its share of its pod's
	// decision, or the kubelet's for a pod without a decision, the pod
	// known through the kubelet's pod-resources API; see [Plugin.Allocate]), and NVIDIA_VISIBLE_DEVICES alone otherwise, for a
	// node whose NRI role adds the device nodes of each container's GPUs
	// itself (or whose NVIDIA container runtime does, from the
	// environment): a device node the kubelet's allocation adds cannot be
	// taken out of the container again through NRI (containerd's NRI drops
	// a plugin's removal of a device it did not add, containerd/nri#216), so
	// a pod whose decision names other GPUs than the kubelet chose would see
	// both. The nodes of its own GPUs are given so that a container
	// containerd creates without NRI (the agent down) has them; the NRI role
	// adding the same nodes replaces them (same path), it does not add
	// them twice.
	NoDeviceNodes bool
	// OnChange, if set, is called (without locks held) after a GPU's health
	// changed, so that the node's report can be refreshed. It must not
	// block for long.
	OnChange func()
	// Pods lists the pods bound to the node (an informer on spec.nodeName,
	// cluster.PodInformer). With it, GetPreferredAllocation answers with
	// the GPUs of the decision of the pod the kubelet is admitting, and
	// Allocate compares what the kubelet gives with the decision and
	// refuses a pod outside numaplace's decisions a GPU a decision holds.
	// Nil: the pods are not known; preferences come from the node's
	// chooser, avoiding only the GPUs of the pods admitted on the node.
	Pods Pods
	// KubeletPods reads the kubelet's pod-resources API, which tells
	// which pod the kubelet is admitting (see [Plugin.GetPreferredAllocation]);
	// nil: the plugin guesses it from Pods alone.
	KubeletPods KubeletPods
	// Events records the differences and refusals of Allocate on the pods;
	// nil is nri.LogEvents on Logger.
	Events nri.EventSink
	// Logger receives the plugin's log; nil is slog.Default().
	Logger *slog.Logger
	// GPUs restricts the advertised GPUs to these IDs (nil: every GPU of
	// the machine), so that another role (the DRA driver) serves the
	// others.
	GPUs []int
}

// gpu is one GPU as the kubelet sees it.
type gpu struct {
	topo topology.GPU
	// name is the device ID given to the kubelet: the UUID when known,
	// else the index.
	name string
}

// Plugin is numaplace's device plugin for the GPUs of one node: it serves
// the kubelet's device-plugin API v1beta1 on a unix socket, registers with
// the kubelet, and keeps doing so as the kubelet restarts. Its preferred
// allocations are the decided GPUs of the pod the kubelet admits (see
// [Plugin.GetPreferredAllocation]), else the node's chooser's
// (kubelet.PreferredAllocator); its health comes from the node's device nodes.
// Run serves; the other methods are safe for concurrent use.
type Plugin struct {
	api.UnimplementedDevicePluginServer

	node *kubelet.Node
	devs *devices.GPUs
	opts Options
	log  *slog.Logger
	gpus []gpu
	byID map[string]int // kubelet device ID (name, UUID or index) -> index in gpus

	// healthMu serialises health changes (which write the checkpoint); mu
	// guards the fields below it and is never held across I/O.
	healthMu  sync.Mutex
	mu        sync.Mutex
	healthy   []bool
	watchers  map[chan struct{}]struct{}
	regs      int // successful registrations, for tests and logs
	lastError string
	// given records, by pod UID, the containers the kubelet has given
	// GPUs to through Allocate (the init containers the pod-resources API
	// does not list among them).
	given map[string]map[string]bool
	// expect is what the last GetPreferredAllocation answered, for the
	// Allocate that follows it; nil when there is none.
	expect *expectation
	// metrics are the counters WriteMetrics writes.
	metrics counters
}

// expectation is what a GetPreferredAllocation found: the pod and
// container the kubelet gives size GPUs to, for the Allocate that follows.
type expectation struct {
	size int
	c    *candidate
	pods []PodInfo
	at   time.Time
}

// New returns the device plugin of the node's GPUs, whose device nodes
// devs finds. The GPUs' health starts as the node's checkpoint has it.
func New(node *kubelet.Node, devs *devices.GPUs, opts Options) (*Plugin, error) {
	if node == nil || devs == nil {
		return nil, errors.New("deviceplugin.New: nil node or devices")
	}
	if opts.SocketDir == "" {
		opts.SocketDir = DefaultSocketDir
	}
	if opts.ResourceName == "" {
		opts.ResourceName = DefaultResourceName
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	if strings.ContainsRune(opts.Endpoint, '/') {
		return nil, fmt.Errorf("deviceplugin: endpoint %q must be a file name in the socket directory", opts.Endpoint)
	}
	if opts.WatchInterval <= 0 {
		opts.WatchInterval = DefaultWatchInterval
	}
	if opts.HealthInterval == 0 {
		opts.HealthInterval = DefaultHealthInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	p := &Plugin{node: node, devs: devs, opts: opts, log: opts.Logger.With("role", "device-plugin"),
		byID: map[string]int{}, watchers: map[chan struct{}]struct{}{}, given: map[string]map[string]bool{}}
	if opts.Events == nil {
		p.opts.Events = nri.LogEvents{Logger: opts.Logger}
	}
	unhealthy := node.Unhealthy()[allocator.GPUClass]
	for _, id := range opts.GPUs {
		if _, ok := node.Machine().GPU(id); !ok {
			return nil, fmt.Errorf("deviceplugin: GPU %d is not a GPU of this machine", id)
		}
	}
	for _, g := range node.Machine().GPUs() {
		if opts.GPUs != nil && !slices.Contains(opts.GPUs, g.ID) {
			continue
		}
		i := len(p.gpus)
		name := strconv.Itoa(g.ID)
		if g.UUID != "" {
			name = g.UUID
			p.byID[g.UUID] = i
		}
		p.byID[strconv.Itoa(g.ID)] = i
		p.gpus = append(p.gpus, gpu{topo: g, name: name})
		p.healthy = append(p.healthy, !slices.Contains(unhealthy, strconv.Itoa(g.ID)))
	}
	return p, nil
}

// index returns the position in p.gpus of the GPU the kubelet names id: its
// UUID, or its index in any spelling allocator.CanonicalDeviceID accepts
// ("+3", "03" and "0000000003" are GPU 3), as the node's chooser and health
// read it.
func (p *Plugin) index(id string) (int, bool) {
	if i, ok := p.byID[id]; ok {
		return i, true
	}
	g, ok := allocator.ParseGPUID(id)
	if !ok {
		return 0, false
	}
	i, ok := p.byID[strconv.Itoa(g)]
	return i, ok
}

// SocketPath returns the path of the plugin's socket.
func (p *Plugin) SocketPath() string { return filepath.Join(p.opts.SocketDir, p.opts.Endpoint) }

// Registrations returns how often the plugin has registered with a
// kubelet.
func (p *Plugin) Registrations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.regs
}

// Devices returns the devices as ListAndWatch sends them now: each GPU by
// its UUID (else its index), with its health and its NUMA node (none when
// unknown).
func (p *Plugin) Devices() []*api.Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devicesLocked()
}

func (p *Plugin) devicesLocked() []*api.Device {
	out := make([]*api.Device, len(p.gpus))
	for i, g := range p.gpus {
		d := &api.Device{ID: g.name, Health: api.Healthy}
		if !p.healthy[i] {
			d.Health = api.Unhealthy
		}
		if g.topo.NUMANode != topology.UnknownNode {
			d.Topology = &api.TopologyInfo{Nodes: []*api.NUMANode{{ID: int64(g.topo.NUMANode)}}}
		}
		out[i] = d
	}
	return out
}

// SetHealth marks GPU id healthy or not: in the node (an unhealthy GPU is
// never handed out to new pods, and the change is checkpointed), in what
// ListAndWatch sends the kubelet, and through Options.OnChange. It returns
// the pods that hold the GPU. An unknown GPU is an error; setting the
// health a GPU already has changes nothing.
func (p *Plugin) SetHealth(id int, healthy bool) (affected []string, err error) {
	i, ok := p.byID[strconv.Itoa(id)]
	if _, onMachine := p.node.Machine().GPU(id); !ok && onMachine {
		return nil, fmt.Errorf("deviceplugin: GPU %d is not one this plugin serves (Options.GPUs)", id)
	}
	if !ok {
		return nil, fmt.Errorf("deviceplugin: GPU %d is not a GPU of this machine", id)
	}
	p.healthMu.Lock()
	defer p.healthMu.Unlock()
	p.mu.Lock()
	same := p.healthy[i] == healthy
	p.mu.Unlock()
	if same {
		return nil, nil
	}
	affected, err = p.node.SetDeviceHealth(allocator.GPUClass, strconv.Itoa(id), healthy)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.healthy[i] = healthy
	for w := range p.watchers {
		select {
		case w <- struct{}{}:
		default: // an update is already due
		}
	}
	p.mu.Unlock()
	p.log.Info("GPU health changed", "gpu", id, "device", p.gpus[i].name, "healthy", healthy, "pods", affected)
	if p.opts.OnChange != nil {
		p.opts.OnChange()
	}
	return affected, nil
}

// CheckHealth checks every GPU once: a GPU is healthy while its device
// node (/dev/nvidiaN under the device root) exists as a character device.
// Without NVML this is what the node can see of a GPU the driver lost.
func (p *Plugin) CheckHealth() {
	for _, g := range p.gpus {
		if _, err := p.SetHealth(g.topo.ID, p.devs.Present(g.topo.ID)); err != nil {
			p.log.Error("cannot record a GPU's health", "gpu", g.topo.ID, "error", err)
		}
	}
}

// GetDevicePluginOptions implements the device-plugin API: the plugin
// answers GetPreferredAllocation and needs no PreStartContainer.
func (p *Plugin) GetDevicePluginOptions(context.Context, *api.Empty) (*api.DevicePluginOptions, error) {
	return &api.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// ListAndWatch implements the device-plugin API: it sends the devices at
// once and again after every health change, until the kubelet hangs up or
// the plugin stops.
func (p *Plugin) ListAndWatch(_ *api.Empty, stream grpc.ServerStreamingServer[api.ListAndWatchResponse]) error {
	w := make(chan struct{}, 1)
	p.mu.Lock()
	p.watchers[w] = struct{}{}
	devs := p.devicesLocked()
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watchers, w)
		p.mu.Unlock()
	}()
	for {
		if err := stream.Send(&api.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-w:
			devs = p.Devices()
		}
	}
}

// PreStartContainer implements the device-plugin API; the plugin does not
// ask for it, so it does nothing.
func (p *Plugin) PreStartContainer(context.Context, *api.PreStartContainerRequest) (*api.PreStartContainerResponse, error) {
	return &api.PreStartContainerResponse{}, nil
}

// Run serves the plugin until ctx is done: it listens on its socket,
// registers with the kubelet, and checks every WatchInterval that its
// socket is still there and the kubelet's is the one it registered with;
// when not (the kubelet restarted and cleaned the directory), it serves on
// a new socket and registers again. A kubelet that is not there yet is
// waited for. Health is checked every HealthInterval. Run returns nil when
// ctx is done, and an error only when the socket directory cannot be used.
func (p *Plugin) Run(ctx context.Context) error {
	if err := os.MkdirAll(p.opts.SocketDir, 0o755); err != nil {
		return fmt.Errorf("deviceplugin: socket directory: %w", err)
	}
	var srv *grpc.Server
	stopServer := func() {
		if srv != nil {
			srv.Stop()
			srv = nil
		}
		_ = os.Remove(p.SocketPath())
	}
	defer stopServer()

	var (
		registeredWith fileID
		ours           fileID
	)
	watch := time.NewTicker(p.opts.WatchInterval)
	defer watch.Stop()
	var health <-chan time.Time
	if p.opts.HealthInterval > 0 {
		p.CheckHealth()
		t := time.NewTicker(p.opts.HealthInterval)
		defer t.Stop()
		health = t.C
	}
	for {
		kubeletID, kubeletUp := statID(filepath.Join(p.opts.SocketDir, KubeletSocket))
		ourID, ourUp := statID(p.SocketPath())
		switch {
		case srv != nil && ourUp && ourID == ours && kubeletUp && kubeletID == registeredWith:
			// Registered with the kubelet that runs.
		case !kubeletUp:
			p.note("waiting for the kubelet: no " + KubeletSocket + " in " + p.opts.SocketDir)
		default:
			if srv == nil || !ourUp || ourID != ours {
				stopServer()
				var err error
				if srv, err = p.serve(); err != nil {
					return err
				}
				ours, _ = statID(p.SocketPath())
			}
			if err := p.register(ctx); err != nil {
				p.note(err.Error())
				break
			}
			registeredWith = kubeletID
			p.mu.Lock()
			p.regs++
			n := p.regs
			p.lastError = ""
			p.mu.Unlock()
			p.log.Info("registered with the kubelet", "resource", p.opts.ResourceName, "socket", p.SocketPath(),
				"gpus", len(p.gpus), "registration", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-watch.C:
		case <-health:
			p.CheckHealth()
		}
	}
}

// note logs a problem once until it changes.
func (p *Plugin) note(msg string) {
	p.mu.Lock()
	same := p.lastError == msg
	p.lastError = msg
	p.mu.Unlock()
	if !same {
		p.log.Warn(msg)
	}
}

// serve listens on the plugin's socket and serves the API on it.
func (p *Plugin) serve() (*grpc.Server, error) {
	_ = os.Remove(p.SocketPath())
	l, err := net.Listen("unix", p.SocketPath())
	if err != nil {
		return nil, fmt.Errorf("deviceplugin: listen on %s: %w", p.SocketPath(), err)
	}
	srv := grpc.NewServer()
	api.RegisterDevicePluginServer(srv, p)
	go func() {
		if err := srv.Serve(l); err != nil {
			p.log.Error("the device plugin's server stopped", "error", err)
		}
	}()
	return srv, nil
}

// register registers the plugin with the kubelet.
func (p *Plugin) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kubeletSock := filepath.Join(p.opts.SocketDir, KubeletSocket)
	conn, err := grpc.NewClient("unix://"+kubeletSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("cannot reach the kubelet at %s: %w", kubeletSock, err)
	}
	defer conn.Close()
	_, err = api.NewRegistrationClient(conn).Register(ctx, &api.RegisterRequest{
		Version:      api.Version,
		Endpoint:     p.opts.Endpoint,
		ResourceName: p.opts.ResourceName,
		Options:      &api.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	})
	if err != nil {
		return fmt.Errorf("the kubelet at %s refused the registration of %s: %w", kubeletSock, p.opts.ResourceName, err)
	}
	return nil
}

// fileID identifies a file: a recreated file has another.
type fileID struct {
	dev, ino uint64
	ctime    int64
}

func statID(path string) (fileID, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{ctime: st.ModTime().UnixNano()}, true
	}
	return fileID{dev: sys.Dev, ino: sys.Ino, ctime: sys.Ctim.Nano()}, true
}
