package sim

import (
	"bufio"
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// setupColors are the line colours of the setups (colour-blind safe).
var setupColors = map[Setup]color.Color{
	KubeletSingleNUMANode: color.RGBA{R: 0xd5, G: 0x5e, B: 0x00, A: 0xff},
	KubeletBestEffort:     color.RGBA{R: 0x56, G: 0xb4, B: 0xe9, A: 0xff},
	Numaplace:             color.RGBA{R: 0x00, G: 0x9e, B: 0x73, A: 0xff},
}

// lineWidth draws setup b wider than the others, so that where a later
// line covers it (b and c often allocate the same GPUs) it shows as a
// band around that line.
func lineWidth(s Setup) vg.Length {
	if s == KubeletBestEffort {
		return vg.Points(4)
	}
	return vg.Points(1.5)
}

// Plot sizes.
const (
	plotWidth  = 8 * vg.Inch
	plotHeight = 4.5 * vg.Inch
)

// writePlots writes the two plots as PNG and SVG.
func (r *Report) writePlots(dir string) error {
	gpu, err := r.gpuPlot()
	if err != nil {
		return err
	}
	events, err := r.eventsPlot()
	if err != nil {
		return err
	}
	for _, f := range []struct {
		p    *plot.Plot
		base string
	}{{gpu, GPUPlotBase}, {events, EventsPlotBase}} {
		for _, ext := range []string{"png", "svg"} {
			wt, err := f.p.WriterTo(plotWidth, plotHeight, ext)
			if err != nil {
				return fmt.Errorf("drawing %s.%s: %w", f.base, ext, err)
			}
			if err := writeFile(filepath.Join(dir, f.base+"."+ext), func(w *bufio.Writer) error {
				_, err := wt.WriteTo(w)
				return err
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Report) title(what string) string {
	return fmt.Sprintf("%s: %d nodes, %d pods, seed %d", what, r.Config.Nodes, r.Config.Pods, r.Config.Seed)
}

// gpuPlot is the GPU allocation over time, one line per setup.
func (r *Report) gpuPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = r.title("GPU allocation")
	p.X.Label.Text = "simulated time (hours)"
	p.Y.Label.Text = "GPUs allocated (%)"
	p.Y.Min, p.Y.Max = 0, 100
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	for _, res := range r.Results {
		xy := make(plotter.XYs, len(res.Series))
		for i, s := range res.Series {
			xy[i] = plotter.XY{X: s.Hours, Y: 100 * s.GPUAllocation}
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("plotting setup %s: %w", res.Setup.Letter(), err)
		}
		l.Color = setupColors[res.Setup]
		l.Width = lineWidth(res.Setup)
		p.Add(l)
		p.Legend.Add(res.Setup.String(), l)
	}
	return p, nil
}

// eventsPlot is the cumulative AdmissionErrors (solid) and cross-NUMA
// placements (dashed) over time, per setup.
func (r *Report) eventsPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = r.title("AdmissionErrors and cross-NUMA placements")
	p.X.Label.Text = "simulated time (hours)"
	p.Y.Label.Text = "cumulative count"
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	for _, res := range r.Results {
		for _, kind := range []string{"AdmissionErrors", "cross-NUMA"} {
			xy := make(plotter.XYs, len(res.Series))
			for i, s := range res.Series {
				v := s.AdmissionErrors
				if kind == "cross-NUMA" {
					v = s.CrossNUMA
				}
				xy[i] = plotter.XY{X: s.Hours, Y: float64(v)}
			}
			l, err := plotter.NewLine(xy)
			if err != nil {
				return nil, fmt.Errorf("plotting setup %s: %w", res.Setup.Letter(), err)
			}
			l.Color = setupColors[res.Setup]
			l.Width = lineWidth(res.Setup)
			if kind == "cross-NUMA" {
				l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			p.Add(l)
			p.Legend.Add(fmt.Sprintf("%s: %s", res.Setup.Letter(), kind), l)
		}
	}
	return p, nil
}
