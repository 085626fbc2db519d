// Command numaplace-agent is numaplace's node daemon, run on every
// numaplace node (a DaemonSet). Over one node state (adapters/kubelet) and
// one checkpoint it runs three roles, each of which a flag turns off:
//
//   - the NRI agent (--nri): a containerd NRI plugin that gives each
//     container the CPUs, NUMA nodes and GPUs (NVIDIA_VISIBLE_DEVICES and
//     device nodes) of its pod's numaplace.io/allocation decision, and
//     refuses a pod whose decision conflicts with what the node holds;
//   - the topology reporter (--reporter): the numaplace.io/topology Node
//     annotation and the node's NodeResourceTopology object, updated after
//     every admission, removal and health change (at most once per
//     --report-interval, retried with backoff);
//   - the device plugin (--device-plugin): the node's GPUs as
//     --resource-name through the kubelet's device-plugin API;
//   - the DRA driver (--dra, off by default): the node's GPUs and RDMA NICs
//     as ResourceSlices of the driver --dra-driver-name (gpu.numaplace.io),
//     and the claims the kubelet prepares through CDI specs in --cdi-root.
//     With the device plugin on too, --dra-gpus must say which GPUs the
//     DRA driver serves (the device plugin serves the others).
//
// Usage:
//
//	numaplace-agent [--topology FILE | --preset NAME | --sysfs-root DIR]
//	                [--proc-root DIR] [--checkpoint FILE] [--node-name NAME] [--kubeconfig FILE]
//	                [--nri=BOOL] [--name NAME] [--index NN] [--socket PATH]
//	                [--reporter=BOOL] [--report-interval D]
//	                [--device-plugin=BOOL] [--kubelet-socket-dir DIR]
//	                [--resource-name NAME] [--dev-root DIR] [--health-interval D]
//	                [--pod-resources-socket PATH] [--metrics-address ADDR]
//	                [--dra=BOOL] [--dra-driver-name NAME] [--dra-gpus LIST]
//	                [--dra-list-attributes=BOOL] [--kubelet-plugins-dir DIR]
//	                [--kubelet-registry-dir DIR] [--cdi-root DIR]
//	                [--log-level LEVEL]
//
// The exit status is 2 for bad flags, 1 when the machine, the checkpoint,
// the Kubernetes client or a role cannot start (or the runtime's NRI
// socket cannot be reached at start), and 0 after SIGINT or SIGTERM. A
// runtime that goes away later is reconnected to.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/containerd/nri/pkg/stub"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	cdiparser "tags.cncf.io/container-device-interface/pkg/parser"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/plugins/agent/cluster"
	"github.com/numaplace/numaplace/plugins/agent/deviceplugin"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/plugins/agent/dra"
	"github.com/numaplace/numaplace/plugins/agent/nri"
	"github.com/numaplace/numaplace/plugins/agent/reporter"
	"github.com/numaplace/numaplace/topology"
)

// Defaults of the flags.
const (
	defaultCheckpoint = "/var/lib/numaplace/checkpoint.json"
	defaultName       = "numaplace"
	defaultIndex      = "10"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr, os.Getenv))
}

// config is what the flags say.
type config struct {
	topology, preset, sysfsRoot string
	// procRoot is the host's /proc ("" means sysfsRoot's proc/).
	procRoot             string
	checkpoint           string
	nodeName, kubeconfig string

	nri                 bool
	name, index, socket string
	// nameSet and indexSet say whether --name and --index were given.
	nameSet, indexSet bool

	reporter       bool
	reportInterval time.Duration

	devicePlugin     bool
	kubeletSocketDir string
	resourceName     string
	devRoot          string
	gpuDeviceNodes   bool
	healthInterval   time.Duration
	podResources     string
	metricsAddress   string

	dra               bool
	draDriverName     string
	draGPUs           []int // nil: every GPU
	draListAttributes bool
	kubeletPluginsDir string
	kubeletRegistry   string
	cdiRoot           string

	logLevel slog.Level
}

// parseFlags reads the command line. It returns flag.ErrHelp for -h, and
// an error naming the flag for anything else wrong.
func parseFlags(args []string, stderr io.Writer, getenv func(string) string) (config, error) {
	var c config
	fs := flag.NewFlagSet("numaplace-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.topology, "topology", "", "read the machine from this topology JSON `file` (numaplan topology --json)")
	fs.StringVar(&c.preset, "preset", "", "use this built-in machine `name` ("+strings.Join(topology.PresetNames(), ", ")+")")
	fs.StringVar(&c.sysfsRoot, "sysfs-root", "/", "discover the live machine from sys/ and proc/ under this `dir` (when neither --topology nor --preset is given); GPU device minors are read under it too")
	fs.StringVar(&c.procRoot, "proc-root", "", "the host's /proc as the agent sees it (`dir`), where the NRI agent checks whether the pod sandboxes it found running at (re)connection still run (default: proc/ under --sysfs-root)")
	fs.StringVar(&c.checkpoint, "checkpoint", defaultCheckpoint, "the node's checkpoint `file` (\"\" keeps the state in memory only)")
	fs.StringVar(&c.nodeName, "node-name", getenv("NODE_NAME"), "the Kubernetes node's `name` (default: the NODE_NAME environment variable)")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "the kubeconfig `file` to reach the API server with (default: the pod's service account, in-cluster)")

	fs.BoolVar(&c.nri, "nri", true, "run the NRI agent: apply the pods' decisions to their containers")
	fs.StringVar(&c.name, "name", defaultName, "the NRI plugin `name` (NRI_PLUGIN_NAME wins when the runtime starts the plugin and the flag is not given)")
	fs.StringVar(&c.index, "index", defaultIndex, "the NRI plugin `index`, two digits (NRI_PLUGIN_IDX wins when the runtime starts the plugin)")
	fs.StringVar(&c.socket, "socket", api.DefaultSocketPath, "the NRI socket `path` to connect to")

	fs.BoolVar(&c.reporter, "reporter", true, "run the topology reporter: the numaplace.io/topology annotation and the NodeResourceTopology object")
	fs.DurationVar(&c.reportInterval, "report-interval", reporter.DefaultInterval, "the shortest `time` between two writes of the report (changes within it are coalesced)")

	fs.BoolVar(&c.devicePlugin, "device-plugin", true, "run the device plugin: advertise the GPUs to the kubelet")
	fs.StringVar(&c.kubeletSocketDir, "kubelet-socket-dir", deviceplugin.DefaultSocketDir, "the kubelet's device-plugin `dir` (kubelet.sock and the plugin's socket)")
	fs.StringVar(&c.resourceName, "resource-name", deviceplugin.DefaultResourceName, "the extended resource `name` the GPUs are advertised as")
	fs.StringVar(&c.devRoot, "dev-root", "/dev", "the host's /dev as the agent sees it (`dir`), where the GPUs' device nodes are looked up")
	fs.BoolVar(&c.gpuDeviceNodes, "gpu-device-nodes", true, "give containers their decision's GPU device nodes through NRI (false: NVIDIA_VISIBLE_DEVICES only)")
	fs.DurationVar(&c.healthInterval, "health-interval", deviceplugin.DefaultHealthInterval, "how often each GPU's device node is checked (`time`; 0 turns the checks off)")

	fs.StringVar(&c.podResources, "pod-resources-socket", deviceplugin.PodResourcesSocket, "the kubelet's pod-resources API socket `path`, which tells the device plugin which pod the kubelet is admitting (\"\": guess it from the API server's pods alone)")
	fs.StringVar(&c.metricsAddress, "metrics-address", "", "serve the agent's Prometheus metrics on http://`addr`/metrics, such as :9464 (\"\": not served)")
	fs.BoolVar(&c.dra, "dra", false, "run the DRA driver: publish the GPUs and RDMA NICs as ResourceSlices and prepare the claims allocated them")
	fs.StringVar(&c.draDriverName, "dra-driver-name", dra.DriverName, "the DRA driver `name` (the DeviceClasses' selectors and the CDI vendor name it)")
	draGPUs := fs.String("dra-gpus", "", "the GPUs (a `list` of indices such as 0-3,6) the DRA driver serves, the device plugin serving the others (default: every GPU; required when both roles run)")
	fs.BoolVar(&c.draListAttributes, "dra-list-attributes", false, "publish resource.kubernetes.io/numaNode as a list (the node first, then its same-socket nodes at the least distance); only when the cluster's DRAListTypeAttributes feature gate is on")
	fs.StringVar(&c.kubeletPluginsDir, "kubelet-plugins-dir", "/var/lib/kubelet/plugins", "the kubelet's plugin `dir`; the DRA driver's socket goes in <dir>/<driver name>/")
	fs.StringVar(&c.kubeletRegistry, "kubelet-registry-dir", "/var/lib/kubelet/plugins_registry", "the kubelet's plugin registration `dir`")
	fs.StringVar(&c.cdiRoot, "cdi-root", dra.DefaultCDIRoot, "the `dir` where the DRA driver writes the claims' CDI specs (one of the runtime's CDI spec directories)")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: numaplace-agent [flags]\n\n"+
			"numaplace's node daemon: the NRI agent that applies the pods' numaplace.io/allocation decisions,\n"+
			"the topology reporter (node annotation and NodeResourceTopology), the GPU device plugin and the DRA driver.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, reportedError{err} // the flag package has printed it with the usage
	}
	draGPUsSet := false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "name":
			c.nameSet = true
		case "index":
			c.indexSet = true
		case "dra-gpus":
			draGPUsSet = true
		}
	})
	if draGPUsSet {
		set, err := numa.ParseCPUSet(*draGPUs) // a list of small integers
		if err != nil {
			return c, fmt.Errorf("--dra-gpus %q: not a list of GPU indices such as 0-3,6: %w", *draGPUs, err)
		}
		c.draGPUs = []int{}
		for id := range set.All() {
			c.draGPUs = append(c.draGPUs, id)
		}
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q (numaplace-agent takes flags only)", fs.Arg(0))
	case !c.nri && !c.reporter && !c.devicePlugin && !c.dra:
		return c, errors.New("--nri, --reporter, --device-plugin and --dra are all false: nothing to run")
	case c.dra && c.devicePlugin && c.draGPUs == nil:
		return c, errors.New("--dra and --device-plugin would both serve the node's GPUs: turn the device plugin off " +
			"(--device-plugin=false) or say which GPUs the DRA driver serves with --dra-gpus LIST (the device plugin serves the others)")
	case c.draGPUs != nil && !c.dra:
		return c, errors.New("--dra-gpus is given but --dra is not on")
	case c.dra && c.nodeName == "":
		return c, errors.New("the DRA driver needs the node's name (its pool): set --node-name or NODE_NAME")
	case c.dra && (c.kubeletPluginsDir == "" || c.kubeletRegistry == "" || c.cdiRoot == ""):
		return c, errors.New("--kubelet-plugins-dir, --kubelet-registry-dir and --cdi-root must not be empty with --dra")
	case c.topology != "" && c.preset != "":
		return c, errors.New("--topology and --preset both name the machine; give one")
	case c.preset != "" && !slices.Contains(topology.PresetNames(), c.preset):
		return c, fmt.Errorf("--preset %q: unknown preset (known: %s)", c.preset, strings.Join(topology.PresetNames(), ", "))
	case c.sysfsRoot == "":
		return c, errors.New("--sysfs-root is empty (use / for the live machine)")
	case c.reporter && c.nodeName == "":
		return c, errors.New("the reporter needs the node's name: set --node-name or NODE_NAME (or turn it off with --reporter=false)")
	case c.reportInterval <= 0:
		return c, fmt.Errorf("--report-interval %s: must be positive", c.reportInterval)
	case c.healthInterval < 0:
		return c, fmt.Errorf("--health-interval %s: must not be negative", c.healthInterval)
	case c.devicePlugin && c.kubeletSocketDir == "":
		return c, errors.New("--kubelet-socket-dir is empty")
	case c.devRoot == "":
		return c, errors.New("--dev-root is empty (use /dev)")
	}
	if c.devicePlugin || c.reporter {
		if err := checkResourceName(c.resourceName); err != nil {
			return c, fmt.Errorf("--resource-name %q: %w", c.resourceName, err)
		}
	}
	if c.dra {
		if err := checkDriverName(c.draDriverName); err != nil {
			return c, fmt.Errorf("--dra-driver-name %q: %w", c.draDriverName, err)
		}
	}
	if err := api.CheckPluginName(c.name); err != nil {
		return c, fmt.Errorf("--name: %w", err)
	}
	if err := api.CheckPluginIndex(c.index); err != nil {
		return c, fmt.Errorf("--index: %w", err)
	}
	return c, nil
}

// checkResourceName checks that name is an extended resource name, as the
// kubelet requires of a device plugin: domain/name, outside kubernetes.io.
func checkResourceName(name string) error {
	domain, res, ok := strings.Cut(name, "/")
	switch {
	case !ok || domain == "" || res == "" || strings.Contains(res, "/"):
		return errors.New("not an extended resource name of the form domain/name, such as aliyun.com/gpu")
	case domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io"):
		return errors.New("the kubernetes.io domain is reserved for Kubernetes' own resources")
	}
	return nil
}

// checkDriverName checks that name can be a DRA driver name (a DNS
// subdomain of at most 63 characters, lower case) and a CDI vendor name.
func checkDriverName(name string) error {
	if len(name) > 63 {
		return errors.New("longer than 63 characters")
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	if err := cdiparser.ValidateVendorName(name); err != nil {
		return err
	}
	return nil
}

// reportedError is a flag error the flag package has already printed.
type reportedError struct{ err error }

func (e reportedError) Error() string { return e.err.Error() }

// loadMachine returns the machine the configuration names.
func loadMachine(c config) (*topology.Machine, error) {
	switch {
	case c.topology != "":
		// A regular file of at most topology.MaxJSONBytes: a FIFO or a link
		// to /dev/zero is refused, never read without end. Errors name it.
		m, err := topology.ReadJSONFile(c.topology)
		if err != nil {
			return nil, fmt.Errorf("--topology %w", err) // "--topology PATH: why"
		}
		return m, nil
	case c.preset != "":
		return topology.Preset(c.preset)
	default:
		m, err := topology.Discover(c.sysfsRoot)
		if err != nil {
			return nil, fmt.Errorf("discovering the machine under %s: %w (or name it with --topology or --preset)", c.sysfsRoot, err)
		}
		return m, nil
	}
}

// stubOptions returns the NRI stub's options. When the runtime starts the
// plugin it passes the name and index in the environment: they are kept,
// and an explicit --index that differs is an error (the stub cannot take
// both).
func stubOptions(c config, getenv func(string) string, log *slog.Logger) ([]stub.Option, error) {
	opts := []stub.Option{stub.WithSocketPath(c.socket), stub.WithLogger(nriLogger{log})}
	if c.nameSet || getenv(api.PluginNameEnvVar) == "" {
		opts = append(opts, stub.WithPluginName(c.name))
	}
	switch env := getenv(api.PluginIdxEnvVar); {
	case env == "":
		opts = append(opts, stub.WithPluginIdx(c.index))
	case c.indexSet && c.index != env:
		return nil, fmt.Errorf("--index %s conflicts with %s=%s set by the runtime that started the plugin", c.index, api.PluginIdxEnvVar, env)
	}
	return opts, nil
}

// run is the program; it returns the exit status.
func run(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string) int {
	c, err := parseFlags(args, stderr, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var reported reportedError
	if errors.As(err, &reported) {
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "numaplace-agent: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.logLevel}))
	var nriOpts []stub.Option
	if c.nri {
		if nriOpts, err = stubOptions(c, getenv, log); err != nil {
			fmt.Fprintf(stderr, "numaplace-agent: %v\n", err)
			return 2
		}
	}
	fail := func(msg string, err error) int {
		log.Error(msg, "error", err)
		return 1
	}

	m, err := loadMachine(c)
	if err != nil {
		return fail("cannot use the machine", err)
	}
	gpus, err := devices.New(m, c.devRoot, os.DirFS(c.sysfsRoot))
	if err != nil {
		return fail("cannot read the GPUs' device minors", err)
	}
	var dpGPUs []int // the GPUs the device plugin serves; nil: all
	if c.draGPUs != nil {
		dpGPUs = []int{}
		for _, g := range m.GPUs() {
			if !slices.Contains(c.draGPUs, g.ID) {
				dpGPUs = append(dpGPUs, g.ID)
			}
		}
		for _, id := range c.draGPUs {
			if _, ok := m.GPU(id); !ok {
				fmt.Fprintf(stderr, "numaplace-agent: --dra-gpus: GPU %d is not a GPU of this machine (it has %d)\n", id, m.NumGPUs())
				return 2
			}
		}
	}
	if c.checkpoint == "" {
		log.Warn("no checkpoint: the state is kept in memory only and rebuilt from the running pods' decisions at every start")
	} else if err := os.MkdirAll(filepath.Dir(c.checkpoint), 0o755); err != nil {
		return fail("cannot create the checkpoint's directory", err)
	}
	// With the NRI role, a checkpoint whose content is unusable is set aside
	// and the state rebuilt from the running pods at Synchronize, as for a
	// missing file; without it nothing would rebuild the state, so such a
	// file stops the start.
	node, err := kubelet.Open(m, c.checkpoint, kubelet.NodeOptions{SetAsideUnusableCheckpoint: c.nri})
	if err != nil {
		return fail("cannot open the node's checkpoint (move a refused file away only after draining the node)", err)
	}
	aside := node.SetAside()
	if aside != nil {
		log.Error("the checkpoint cannot be used: it is kept aside for inspection, and the state is rebuilt from the running pods and their decisions",
			"checkpoint", c.checkpoint, "keptAs", aside.Path, "problem", aside.Err.Error())
	}
	log.Info("node agent ready", "machine", m.Name(), "numaNodes", m.NumNodes(), "cpus", m.NumCPUs(),
		"gpus", m.NumGPUs(), "checkpoint", c.checkpoint, "admitted", len(node.Admissions()),
		"sharedPool", node.SharedPool().String(), "nri", c.nri, "reporter", c.reporter, "devicePlugin", c.devicePlugin,
		"dra", c.dra, "claims", len(node.Claims()))

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	// The Kubernetes client, for the reporter, the NRI role's and the
	// device plugin's events, and the pods bound to the node.
	var events nri.EventSink
	var rep *reporter.Reporter
	var decisions *cluster.Decisions
	var pods *cluster.PodInformer
	notify := func() {}
	if c.reporter {
		cfg, err := cluster.Config(c.kubeconfig)
		if err != nil {
			return fail("cannot build the Kubernetes client (or turn the reporter off with --reporter=false)", err)
		}
		w, err := cluster.NewWriter(cfg)
		if err != nil {
			return fail("cannot build the Kubernetes client", err)
		}
		if rep, err = reporter.New(node, w, reporter.Options{NodeName: c.nodeName, ResourceName: c.resourceName,
			Interval: c.reportInterval, Logger: log}); err != nil {
			return fail("cannot create the reporter", err)
		}
		notify = rep.Notify
		ev, err := cluster.NewEvents(cfg, c.nodeName)
		if err != nil {
			return fail("cannot build the Kubernetes event recorder", err)
		}
		defer ev.Shutdown()
		events = ev
		// The decisions of pods resized in place, written on the pods.
		if decisions, err = cluster.NewDecisions(cfg, log); err != nil {
			return fail("cannot build the Kubernetes client", err)
		}
		if aside != nil {
			ev.RecordNode(c.nodeName, nri.EventTypeWarning, ReasonCheckpointSetAside, checkpointSetAsideMessage(aside))
		}
		if pods, err = cluster.NewPodInformer(cfg, c.nodeName); err != nil {
			return fail("cannot build the informer of the node's pods", err)
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, 5)
	start := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	if rep != nil {
		start("reporter", rep.Run)
	}
	if decisions != nil {
		start("decision writer", decisions.Run)
	}
	if pods != nil {
		start("pod informer", pods.Run)
	}
	var dp *deviceplugin.Plugin
	if c.devicePlugin {
		health := c.healthInterval
		if health == 0 {
			health = -1
		}
		// With the NRI role on, it gives containers their GPUs' device
		// nodes (or the NVIDIA runtime does, from the environment, with
		// --gpu-device-nodes=false): the kubelet's allocation must not add
		// nodes that NRI could not take out again for a decision naming
		// other GPUs.
		opts := deviceplugin.Options{SocketDir: c.kubeletSocketDir, ResourceName: c.resourceName,
			NoDeviceNodes: c.nri, HealthInterval: health, OnChange: notify, Events: events, Logger: log, GPUs: dpGPUs}
		if pods != nil {
			opts.Pods = pods
			if c.podResources != "" {
				opts.KubeletPods = deviceplugin.PodResources{Socket: c.podResources}
			}
		}
		var err error
		dp, err = deviceplugin.New(node, gpus, opts)
		if err != nil {
			return fail("cannot create the device plugin", err)
		}
		start("device plugin", dp.Run)
	}
	if c.dra {
		d, client, err := newDRA(c, m, node, gpus, notify, log)
		if err != nil {
			stop()
			wg.Wait()
			return fail("cannot create the DRA driver", err)
		}
		start("DRA driver", func(ctx context.Context) error {
			return d.Run(ctx, dra.RunOptions{Client: client, PluginDir: c.kubeletPluginsDir, RegistryDir: c.kubeletRegistry})
		})
	}
	var plugin *nri.Plugin
	if c.nri {
		memNodes, err := memoryNodes(c.sysfsRoot)
		if err != nil {
			return fail("cannot read the host's memory nodes", err)
		}
		procRoot := c.procRoot
		if procRoot == "" {
			procRoot = filepath.Join(c.sysfsRoot, "proc")
		}
		opts := nri.Options{Logger: log, Events: events, OnChange: notify, MemoryNodes: memNodes, ResourceName: c.resourceName, ProcRoot: procRoot}
		if decisions != nil {
			opts.OnResize = decisions.Write
		}
		if pods != nil {
			opts.Pods = pods
		}
		if c.gpuDeviceNodes {
			opts.GPUs = gpus
		}
		if plugin, err = nri.New(node, opts); err != nil {
			return fail("cannot create the NRI plugin", err)
		}
		defer plugin.Close()
		if err := runNRI(ctx, plugin, nriOpts, log); err != nil {
			stop()
			wg.Wait()
			return fail("the NRI agent cannot start", err)
		}
	}
	if c.metricsAddress != "" {
		if err := serveMetrics(ctx, c.metricsAddress, dp, log); err != nil {
			stop()
			wg.Wait()
			return fail("cannot serve the metrics", err)
		}
	}
	select {
	case <-ctx.Done():
		wg.Wait()
		log.Info("stopped by a signal")
		return 0
	case err := <-errs:
		stop()
		wg.Wait()
		return fail("a role stopped", err)
	}
}

// newDRA returns the DRA role over the node and its Kubernetes client.
func newDRA(c config, m *topology.Machine, node *kubelet.Node, gpus *devices.GPUs, notify func(), log *slog.Logger) (*dra.Driver, kubernetes.Interface, error) {
	cfg, err := cluster.Config(c.kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	nics, err := devices.NewNICs(m, c.devRoot, os.DirFS(c.sysfsRoot))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the RDMA NICs' device nodes: %w", err)
	}
	var roots map[string]string
	if sys, ok := os.DirFS(filepath.Join(c.sysfsRoot, "sys")).(fs.ReadLinkFS); ok {
		roots = dra.PCIeRoots(m, sys)
	}
	health := c.healthInterval
	if health == 0 {
		health = -1
	}
	d, err := dra.New(node, gpus, nics, dra.Options{DriverName: c.draDriverName, NodeName: c.nodeName, CDIRoot: c.cdiRoot,
		ListAttributes: c.draListAttributes, PCIeRoots: roots, GPUs: c.draGPUs, HealthInterval: health,
		OnChange: notify, Logger: log.With("role", "dra")})
	if err != nil {
		return nil, nil, err
	}
	return d, client, nil
}

// ReasonCheckpointSetAside is the reason of the Warning event on the Node
// when the agent set an unusable checkpoint aside and started from the
// running pods.
const ReasonCheckpointSetAside = "NUMAPlaceCheckpointSetAside"

// checkpointSetAsideMessage is the event's message: where the file went and
// why it could not be used.
func checkpointSetAsideMessage(a *kubelet.SetAsideCheckpoint) string {
	return fmt.Sprintf("the node's checkpoint cannot be used (%v); it is kept as %s for inspection, "+
		"and the state is rebuilt from the running pods and their decisions", a.Err, a.Path)
}

// serveMetrics serves the agent's metrics (the device plugin's counters,
// deviceplugin.Plugin.WriteMetrics) in Prometheus' text format on
// http://addr/metrics until ctx is done. It returns an error when addr
// cannot be listened on.
func serveMetrics(ctx context.Context, addr string, dp *deviceplugin.Plugin, log *slog.Logger) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if dp != nil {
			_ = dp.WriteMetrics(w)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("the metrics server stopped", "error", err)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("serving metrics", "address", l.Addr().String(), "path", "/metrics")
	return nil
}

// hasMemory is where the kernel lists the NUMA nodes that have memory.
const hasMemory = "sys/devices/system/node/has_memory"

// memoryNodes returns the NUMA nodes of the host that have memory, read
// from sys/devices/system/node/has_memory under root; nil (every node)
// when the kernel has no such file.
func memoryNodes(root string) ([]numa.NodeID, error) {
	p := filepath.Join(root, hasMemory)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	set, err := numa.ParseCPUSet(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	ids := []numa.NodeID{}
	for id := range set.All() {
		ids = append(ids, numa.NodeID(id))
	}
	return ids, nil
}

// runNRI connects the plugin to the runtime and keeps it connected: the
// first connection must succeed (else the error is returned); a connection
// lost later is made again, with backoff, in the background, until ctx is
// done.
func runNRI(ctx context.Context, p *nri.Plugin, opts []stub.Option, log *slog.Logger) error {
	connect := func() (stub.Stub, <-chan struct{}, error) {
		lost := make(chan struct{})
		var once sync.Once
		s, err := stub.New(p, append(slices.Clone(opts), stub.WithOnClose(func() { once.Do(func() { close(lost) }) }))...)
		if err != nil {
			return nil, nil, err
		}
		p.SetUpdater(s)
		if err := s.Start(ctx); err != nil {
			return nil, nil, err
		}
		return s, lost, nil
	}
	s, lost, err := connect()
	if err != nil {
		return err
	}
	go func() {
		backoff := time.Duration(0)
		for {
			select {
			case <-ctx.Done():
				s.Stop()
				return
			case <-lost:
			}
			log.Error("the connection to the runtime was lost; connecting again")
			for {
				backoff = min(max(2*backoff, time.Second), 30*time.Second)
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				if s, lost, err = connect(); err == nil {
					log.Info("connected to the runtime again")
					backoff = 0
					break
				}
				log.Error("cannot connect to the runtime", "retry", backoff, "error", err)
			}
		}
	}()
	return nil
}

// nriLogger sends the NRI stub's log to slog.
type nriLogger struct{ l *slog.Logger }

var _ nrilog.Logger = nriLogger{}

// Debugf logs at level Debug.
func (n nriLogger) Debugf(ctx context.Context, format string, args ...any) {
	n.l.DebugContext(ctx, "nri: "+fmt.Sprintf(format, args...))
}

// Infof logs at level Info.
func (n nriLogger) Infof(ctx context.Context, format string, args ...any) {
	n.l.InfoContext(ctx, "nri: "+fmt.Sprintf(format, args...))
}

// Warnf logs at level Warn.
func (n nriLogger) Warnf(ctx context.Context, format string, args ...any) {
	n.l.WarnContext(ctx, "nri: "+fmt.Sprintf(format, args...))
}

// Errorf logs at level Error.
func (n nriLogger) Errorf(ctx context.Context, format string, args ...any) {
	n.l.ErrorContext(ctx, "nri: "+fmt.Sprintf(format, args...))
}
