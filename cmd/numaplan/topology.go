package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/numaplace/numaplace/internal/readfile"
	"github.com/numaplace/numaplace/topology"
)

var topologyCommand = &command{
	name:     "topology",
	synopsis: "topology [--preset NAME | --topology FILE | --root DIR] [--json]",
	summary:  "show a machine as a picture, or convert it to the topology JSON",
	details: `The machine is a built-in preset (--preset, see 'numaplan presets'), a topology JSON
file (--topology, "-" for standard input), the Linux system tree under a directory
(--root DIR reads DIR/sys as if it were a live system; DIR may also be a sys directory
itself, such as /sys or a copy of one) or, with none of these, this
machine (the tree under /). The picture is printed by default; --json prints the
interchange JSON instead, which --topology reads back.`,
	setup: func(fs *flag.FlagSet) func(*env) error {
		var src machineSource
		src.register(fs)
		asJSON := fs.Bool("json", false, "print the topology JSON instead of the picture")
		return func(e *env) error {
			m, err := src.load(e.stdin)
			if err != nil {
				return err
			}
			if *asJSON {
				err = m.WriteJSON(e.stdout)
			} else {
				err = m.Picture(e.stdout, nil)
			}
			if err != nil {
				return fmt.Errorf("writing the output: %w", err)
			}
			return nil
		}
	},
}

// machineSource holds the flags that choose a machine; commands that work
// on one machine (topology now, place later) share them.
type machineSource struct {
	preset, file, root string
}

func (s *machineSource) register(fs *flag.FlagSet) {
	fs.StringVar(&s.preset, "preset", "", "use the built-in machine `NAME` (see 'numaplan presets')")
	fs.StringVar(&s.file, "topology", "", "read the machine from the topology JSON `FILE` (\"-\" for standard input)")
	fs.StringVar(&s.root, "root", "", "discover the machine from the Linux system tree under `DIR` (DIR/sys, or DIR itself when it is a sys directory)")
}

// load returns the chosen machine. A bad choice (two sources, an unknown
// preset) is a *usageError; a source that cannot be read is an error that
// names it and says why.
func (s *machineSource) load(stdin io.Reader) (*topology.Machine, error) {
	n := 0
	for _, v := range []string{s.preset, s.file, s.root} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		return nil, usagef("choose one of --preset, --topology and --root")
	}
	switch {
	case s.preset != "":
		m, err := topology.Preset(s.preset)
		if errors.Is(err, topology.ErrUnknownPreset) {
			return nil, usagef("%v", err)
		}
		return m, err
	case s.file != "":
		return loadFile(s.file, stdin)
	case s.root != "":
		return discover(s.root, "the system tree under "+s.root)
	default:
		return discover("/", "this machine (the system tree under /)")
	}
}

// loadFile reads a topology file, or standard input for "-": at most
// topology.MaxJSONBytes, and only a regular file (a FIFO or a device such
// as /dev/zero is refused, never read without end).
func loadFile(name string, stdin io.Reader) (*topology.Machine, error) {
	var data []byte
	var err error
	what := "topology file " + name
	if name == "-" {
		what = "topology JSON on standard input"
		data, err = readfile.Bounded(stdin, "standard input", topology.MaxJSONBytes)
	} else {
		data, err = readfile.Regular(name, topology.MaxJSONBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the %s: %w", what, reason(err))
	}
	m, err := topology.ParseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("the %s is not a usable topology: %w", what, err)
	}
	return m, nil
}

func discover(root, what string) (*topology.Machine, error) {
	info, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", what, reason(err))
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("cannot read %s: %s is not a directory", what, root)
	}
	m, err := topology.Discover(root)
	if err != nil {
		return nil, fmt.Errorf("cannot discover the topology of %s: %w", what, err)
	}
	if m == nil {
		return nil, fmt.Errorf("cannot discover the topology of %s: no machine found", what)
	}
	return m, nil
}

// reason strips the operation and path from a *fs.PathError, whose path the
// caller's message already names ("open x: no such file" -> "no such file").
func reason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
