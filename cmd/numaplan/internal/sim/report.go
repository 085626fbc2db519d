package sim

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The files WriteFiles writes into the output folder.
const (
	SummaryFile    = "summary.md"
	SeriesFile     = "series.csv"
	GPUPlotBase    = "gpu-allocation"      // .png and .svg
	EventsPlotBase = "admission-crossnuma" // .png and .svg
)

// Table returns the headline table in Markdown: one row per setup.
func (r *Report) Table() string {
	var b strings.Builder
	b.WriteString("| setup | placed | AdmissionErrors (pods) | cross-NUMA | unschedulable | still queued | GPU allocation (mean, peak) | mean wait | latency p50 / p99 |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %s | %d | %d (%d) | %d | %d | %d | %.1f%%, %.1f%% | %s | %s / %s |\n",
			res.Setup, res.Placed, res.AdmissionErrors, res.PodsRefused, res.CrossNUMA,
			res.Unschedulable, res.StillQueued, 100*res.GPUAllocationMean, 100*res.GPUAllocationPeak,
			minutes(res.MeanWait), latency(res.LatencyP50), latency(res.LatencyP99))
	}
	return b.String()
}

func minutes(d time.Duration) string { return fmt.Sprintf("%.1f min", d.Minutes()) }

// latency writes a duration in µs below a millisecond (with a decimal
// below 10 µs), else in ms.
func latency(d time.Duration) string {
	if d < 10*time.Microsecond {
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	}
	if d < time.Millisecond {
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// Summary returns the whole Markdown report: the run's parameters, the
// table, the definitions and the files.
func (r *Report) Summary() string {
	var b strings.Builder
	c := r.Config
	t := r.Trace
	b.WriteString("# numaplan simulate\n\n")
	var nodes []string
	for _, name := range slices.Sorted(maps.Keys(r.NodesByPreset)) {
		nodes = append(nodes, fmt.Sprintf("%d %s", r.NodesByPreset[name], name))
	}
	fmt.Fprintf(&b, "Cluster: %d nodes (%s), %d GPUs, %d CPUs, every node labelled for numaplace.\n\n",
		c.Nodes, strings.Join(nodes, ", "), r.GPUs, r.CPUs)
	var byGPUs []string
	for _, g := range slices.Sorted(maps.Keys(t.ByGPUs)) {
		byGPUs = append(byGPUs, fmt.Sprintf("%d with %d GPU%s", t.ByGPUs[g], g, plural(g)))
	}
	var byPol []string
	for _, p := range slices.Sorted(maps.Keys(t.ByPolicy)) {
		byPol = append(byPol, fmt.Sprintf("%d %s", t.ByPolicy[p], p))
	}
	fmt.Fprintf(&b, "Trace (seed %d): %d pods (%s; 6-24 CPUs per GPU), %s and %d without a NUMA spec; "+
		"%.0f arrivals per hour (Poisson) over %.1f hours, lognormal run times with mean %s; offered GPU load %.2f; "+
		"%d pods fit on no single NUMA node of either machine.\n\n",
		c.Seed, t.Pods, strings.Join(byGPUs, ", "), strings.Join(byPol, ", "), t.NoSpec,
		t.ArrivalsPerHour, t.Hours, t.MeanDuration.Round(time.Second), c.Load, t.NeverOneNode)
	fmt.Fprintf(&b, "Queue: a pod that cannot be placed waits up to %s, then counts as unschedulable; "+
		"each departure runs at most %d scheduling cycles for waiting pods. Scheduling: %s.\n\n",
		c.Patience, c.RetriesPerDeparture, scoringText(c))
	b.WriteString(r.Table())
	b.WriteString(`
- placed: pods admitted by their node; AdmissionErrors: admissions refused by the chosen node
  (TopologyAffinityError), with the number of distinct pods refused in parentheses; such a pod
  waits and is scheduled again at a later departure, as a Deployment would recreate it.
- cross-NUMA: placed pods with a NUMA spec whose CPUs and GPUs span more NUMA nodes than
  width_cap (the narrowest the hardware allows), or whose CPUs sit on NUMA nodes without
  their GPUs although the GPUs' nodes have the CPUs for the whole pod.
- unschedulable: pods that waited longer than the patience; still queued: waiting at the last arrival.
- GPU allocation: GPUs held by running pods over all GPUs, the mean over the second half of the run and the peak.
- latency: wall time of each scheduling cycle (filter, score, choice of a node; not the
  admission), over every cycle, placed or not. It varies from run to run.
`)
	fmt.Fprintf(&b, "\n| setup | scheduling cycles | pods refused then placed | cross-NUMA by policy | multi-NUMA spans | wall time |\n|---|--:|--:|--:|--:|--:|\n")
	for _, res := range r.Results {
		var by []string
		for _, p := range slices.Sorted(maps.Keys(res.CrossNUMAByPolicy)) {
			by = append(by, fmt.Sprintf("%d %s", res.CrossNUMAByPolicy[p], p))
		}
		if len(by) == 0 {
			by = []string{"none"}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %d | %s |\n", res.Setup, res.Attempts, res.PlacedAfterRefusal,
			strings.Join(by, ", "), res.MultiNUMA, res.Wall.Round(time.Millisecond))
	}
	b.WriteString("\nmulti-NUMA spans: placed pods whose CPUs and GPUs use more than one NUMA node, as some shapes must.\n")
	fmt.Fprintf(&b, "\nFiles: %s (the time series), %s.png/.svg, %s.png/.svg.\n", SeriesFile, GPUPlotBase, EventsPlotBase)
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func scoringText(c Config) string {
	find := numFeasibleToFind(c.Nodes, c.PercentageOfNodesToScore)
	if find >= c.Nodes {
		return "every node is filtered and scored"
	}
	pct := c.PercentageOfNodesToScore
	if pct == 0 {
		pct = adaptivePercentage(c.Nodes)
	}
	return fmt.Sprintf("each cycle filters nodes until %d (%d%%, kube-scheduler's percentageOfNodesToScore) are feasible, "+
		"starting where the previous one stopped, and scores those", find, pct)
}

// WriteFiles writes the summary, the time series and the plots into dir,
// which must exist.
func (r *Report) WriteFiles(dir string) error {
	if err := writeFile(filepath.Join(dir, SummaryFile), func(w *bufio.Writer) error {
		_, err := w.WriteString(r.Summary())
		return err
	}); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, SeriesFile), r.writeSeries); err != nil {
		return err
	}
	return r.writePlots(dir)
}

func (r *Report) writeSeries(w *bufio.Writer) error {
	w.WriteString("setup,hours,gpu_allocation,admission_errors,cross_numa,waiting\n")
	for _, res := range r.Results {
		for _, s := range res.Series {
			fmt.Fprintf(w, "%s,%.4f,%.4f,%d,%d,%d\n", res.Setup.Letter(), s.Hours, s.GPUAllocation,
				s.AdmissionErrors, s.CrossNUMA, s.Waiting)
		}
	}
	return nil
}

// writeFile writes a file through a buffered writer, reporting any error
// with the path.
func writeFile(path string, write func(w *bufio.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
