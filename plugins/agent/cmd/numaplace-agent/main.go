// Command numaplace-nri is numaplace's node agent as a containerd NRI
// plugin: it gives each container the CPUs, NUMA nodes and GPUs that the
// scheduler's numaplace.io/allocation decision names for its pod, keeps the
// node's allocations in a checkpoint, and refuses a pod whose decision
// conflicts with what the node holds.
//
// Usage:
//
//	numaplace-nri [--topology FILE | --preset NAME | --sysfs-root DIR]
//	              [--checkpoint FILE] [--name NAME] [--index NN]
//	              [--socket PATH] [--log-level LEVEL]
//
// The machine comes from the interchange JSON (--topology), a built-in
// preset (--preset), or the live machine's sysfs under --sysfs-root
// (default "/"). The exit status is 2 for bad flags, 1 when the machine or
// the checkpoint cannot be used or the connection to the runtime is lost,
// and 0 after SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/containerd/nri/pkg/stub"
	"github.com/numaplace/numaplace/adapters/kubelet"
	nri "github.com/numaplace/numaplace/plugins/agent/nri"
	"github.com/numaplace/numaplace/topology"
)

// Defaults of the flags.
const (
	defaultCheckpoint = "/var/lib/numaplace/nri-checkpoint.json"
	defaultName       = "numaplace"
	defaultIndex      = "10"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr, os.Getenv))
}

// config is what the flags say.
type config struct {
	topology, preset, sysfsRoot string
	checkpoint                  string
	name, index, socket         string
	logLevel                    slog.Level
	// nameSet and indexSet say whether --name and --index were given.
	nameSet, indexSet bool
}

// parseFlags reads the command line. It returns flag.ErrHelp for -h, and
// an error naming the flag for anything else wrong.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("numaplace-nri", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.topology, "topology", "", "read the machine from this topology JSON `file` (numaplan topology --json)")
	fs.StringVar(&c.preset, "preset", "", "use this built-in machine `name` ("+strings.Join(topology.PresetNames(), ", ")+")")
	fs.StringVar(&c.sysfsRoot, "sysfs-root", "/", "discover the live machine from sysfs under this `dir` (when neither --topology nor --preset is given)")
	fs.StringVar(&c.checkpoint, "checkpoint", defaultCheckpoint, "the node's checkpoint `file` (\"\" keeps the state in memory only)")
	fs.StringVar(&c.name, "name", defaultName, "the NRI plugin `name` (NRI_PLUGIN_NAME wins when the runtime starts the plugin and the flag is not given)")
	fs.StringVar(&c.index, "index", defaultIndex, "the NRI plugin `index`, two digits (NRI_PLUGIN_IDX wins when the runtime starts the plugin)")
	fs.StringVar(&c.socket, "socket", api.DefaultSocketPath, "the NRI socket `path` to connect to")
	fs.TextVar(&c.logLevel, "log-level", slog.LevelInfo, "log `level`: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: numaplace-nri [flags]\n\n"+
			"numaplace's node agent as a containerd NRI plugin: it sets each container's cpuset.cpus,\n"+
			"cpuset.mems and NVIDIA_VISIBLE_DEVICES from its pod's numaplace.io/allocation decision.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, reportedError{err} // the flag package has printed it with the usage
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "name":
			c.nameSet = true
		case "index":
			c.indexSet = true
		}
	})
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q (numaplace-nri takes flags only)", fs.Arg(0))
	case c.topology != "" && c.preset != "":
		return c, errors.New("--topology and --preset both name the machine; give one")
	case c.preset != "" && !slices.Contains(topology.PresetNames(), c.preset):
		return c, fmt.Errorf("--preset %q: unknown preset (known: %s)", c.preset, strings.Join(topology.PresetNames(), ", "))
	case c.sysfsRoot == "":
		return c, errors.New("--sysfs-root is empty (use / for the live machine)")
	}
	if err := api.CheckPluginName(c.name); err != nil {
		return c, fmt.Errorf("--name: %w", err)
	}
	if err := api.CheckPluginIndex(c.index); err != nil {
		return c, fmt.Errorf("--index: %w", err)
	}
	return c, nil
}

// reportedError is a flag error the flag package has already printed.
type reportedError struct{ err error }

func (e reportedError) Error() string { return e.err.Error() }

// loadMachine returns the machine the configuration names.
func loadMachine(c config) (*topology.Machine, error) {
	switch {
	case c.topology != "":
		data, err := os.ReadFile(c.topology)
		if err != nil {
			return nil, fmt.Errorf("--topology: %w", err)
		}
		m, err := topology.ParseJSON(data)
		if err != nil {
			return nil, fmt.Errorf("--topology %s: %w", c.topology, err)
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
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var reported reportedError
	if errors.As(err, &reported) {
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "numaplace-nri: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.logLevel}))
	opts, err := stubOptions(c, getenv, log)
	if err != nil {
		fmt.Fprintf(stderr, "numaplace-nri: %v\n", err)
		return 2
	}
	fail := func(msg string, err error) int {
		log.Error(msg, "error", err)
		return 1
	}

	m, err := loadMachine(c)
	if err != nil {
		return fail("cannot use the machine", err)
	}
	if c.checkpoint == "" {
		log.Warn("no checkpoint: the state is kept in memory only and rebuilt from the running pods' decisions at every start")
	} else if err := os.MkdirAll(filepath.Dir(c.checkpoint), 0o755); err != nil {
		return fail("cannot create the checkpoint's directory", err)
	}
	node, err := kubelet.Open(m, c.checkpoint, kubelet.NodeOptions{})
	if err != nil {
		return fail("cannot open the node's checkpoint (move a refused file away only after draining the node)", err)
	}
	log.Info("node agent ready", "machine", m.Name(), "numaNodes", m.NumNodes(), "cpus", m.NumCPUs(),
		"gpus", m.NumGPUs(), "checkpoint", c.checkpoint, "admitted", len(node.Admissions()), "sharedPool", node.SharedPool().String())

	p, err := nri.New(node, nri.Options{Logger: log})
	if err != nil {
		return fail("cannot create the plugin", err)
	}
	defer p.Close()

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var lost sync.Once
	lostC := make(chan struct{})
	opts = append(opts, stub.WithOnClose(func() { lost.Do(func() { close(lostC) }) }))
	s, err := stub.New(p, opts...)
	if err != nil {
		return fail("cannot create the NRI stub", err)
	}
	p.SetUpdater(s)
	err = s.Run(ctx)
	select {
	case <-ctx.Done():
		log.Info("stopped by a signal")
		return 0
	case <-lostC:
		return fail("the connection to the runtime was lost", err)
	default:
	}
	if err != nil {
		return fail("the NRI plugin stopped", err)
	}
	return 0
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
