package main

import (
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/numaplace/numaplace/topology"
)

var presetsCommand = &command{
	name:     "presets",
	synopsis: "presets",
	summary:  "list the built-in machines, with their NUMA nodes, CPUs and GPUs",
	details: `Each name can be given to --preset. 'numaplan topology --preset NAME' shows the
machine; its source (a vendor's guide or documentation) is cited in the topology
package's presets.go.`,
	setup: func(*flag.FlagSet) func(*env) error {
		return func(e *env) error {
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
			for _, name := range topology.PresetNames() {
				m, err := topology.Preset(name)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%s\t%s\n", name, summary(m))
			}
			if err := tw.Flush(); err != nil {
				return fmt.Errorf("writing the output: %w", err)
			}
			return nil
		}
	},
}

// summary describes a machine in one line: "8 NUMA nodes, 2 sockets, 256
// CPUs, 8 GPUs, 8 rdma".
func summary(m *topology.Machine) string {
	parts := []string{
		count(m.NumNodes(), "NUMA node"),
		count(len(m.Sockets()), "socket"),
		count(m.NumCPUs(), "CPU"),
		count(m.NumGPUs(), "GPU"),
	}
	classes := map[string]int{}
	var order []string
	for _, d := range m.Devices() {
		if classes[d.Class] == 0 {
			order = append(order, d.Class)
		}
		classes[d.Class]++
	}
	for _, c := range order {
		parts = append(parts, fmt.Sprintf("%d %s", classes[c], c))
	}
	return strings.Join(parts, ", ")
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
