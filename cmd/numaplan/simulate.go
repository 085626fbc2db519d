package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/numaplace/numaplace/cmd/numaplan/internal/sim"
)

var simulateCommand = &command{
	name:     "simulate",
	synopsis: "simulate [--out DIR] [--nodes N] [--pods P] [--seed S] [--setups a,b,c]",
	summary:  "run the cluster simulation: NUMA-blind scheduling with the kubelet's policies against numaplace",
	details: `One seeded GPU workload (pods of 1, 2, 4 and 8 GPUs with 6-24 CPUs per GPU, a mix of
policies, Poisson arrivals, lognormal run times, offered near saturation) goes through
three setups on the same cluster of dgx-h100 and dgx-a100 nodes:

  a  a NUMA-blind scheduler (node totals) and the kubelet's single-numa-node policy
  b  the same scheduler and the kubelet's best-effort policy
  c  numaplace's scheduler adapter and node agent

The kubelet baselines use the kubelet-compatible hints and merge of adapters/topologymanager.
The table (pods placed, AdmissionErrors, cross-NUMA placements, unschedulable pods,
GPU allocation, scheduling latency) is printed and written with the time series and
the plots (PNG and SVG) into the output folder: DIR, created if needed, or a new
folder under the system's temporary directory. Progress goes to standard error.
Everything but the latencies is the same for the same flags.`,
	setup: func(fs *flag.FlagSet) func(*env) error {
		out := fs.String("out", "", "write the reports into `DIR` (default: a new folder under the temporary directory)")
		nodes := fs.Int("nodes", sim.DefaultNodes, "simulate `N` nodes, alternately dgx-h100 and dgx-a100")
		pods := fs.Int("pods", sim.DefaultPods, "the trace has `P` pods")
		seed := fs.Uint64("seed", 1, "the trace's seed `S`")
		setups := fs.String("setups", "a,b,c", "the setups to run, in order (`a,b,c`)")
		return func(e *env) error {
			switch {
			case *nodes < 1 || *nodes > sim.MaxNodes:
				return usagef("--nodes %d: want 1 to %d", *nodes, sim.MaxNodes)
			case *pods < 1 || *pods > sim.MaxPods:
				return usagef("--pods %d: want 1 to %d", *pods, sim.MaxPods)
			}
			list, err := sim.ParseSetups(*setups)
			if err != nil {
				return usagef("--setups %q: %s", *setups, strings.TrimPrefix(err.Error(), sim.ErrConfig.Error()+": "))
			}
			cfg := sim.Config{Nodes: *nodes, Pods: *pods, Seed: *seed, Setups: list, Progress: e.stderr}
			dir, err := outDir(*out)
			if err != nil {
				return err
			}
			rep, err := sim.Run(cfg)
			if err != nil {
				if *out == "" {
					os.Remove(dir) // the new folder is still empty
				}
				if errors.Is(err, sim.ErrConfig) {
					return usagef("%v", err)
				}
				return err
			}
			if err := rep.WriteFiles(dir); err != nil {
				return err
			}
			if _, err := fmt.Fprintf(e.stdout, "%s\nWrote %s, %s and the plots %s.png/.svg and %s.png/.svg in %s\n",
				rep.Table(), sim.SummaryFile, sim.SeriesFile, sim.GPUPlotBase, sim.EventsPlotBase, dir); err != nil {
				return fmt.Errorf("writing the output: %w", err)
			}
			return nil
		}
	},
}

// outDir creates the output folder: dir (with its parents) when given,
// else a new folder under the temporary directory.
func outDir(dir string) (string, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "numaplan-simulate-")
		if err != nil {
			return "", fmt.Errorf("creating the output folder: %w", err)
		}
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating the output folder %s: %w", dir, err)
	}
	return filepath.Clean(dir), nil
}
