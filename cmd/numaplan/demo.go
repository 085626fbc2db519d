package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/numaplace/numaplace/topology"
)

// demoPreset is the machine the demo plays on.
const demoPreset = "dgx-h100"

var demoCommand = &command{
	name:     "demo",
	synopsis: "demo",
	summary:  "play the placement demo on the " + demoPreset + " preset",
	details: `The demo shows the machine, then (as the allocator lands) places and releases
pods with different policies on it, saying why each is admitted or refused.`,
	setup: func(*flag.FlagSet) func(*env) error {
		return func(e *env) error {
			m, err := topology.Preset(demoPreset)
			if err != nil {
				return err
			}
			if err := playDemo(e.stdout, m, demoScenario()); err != nil {
				return fmt.Errorf("writing the output: %w", err)
			}
			return nil
		}
	},
}

// demo is the state a demo scenario plays on: the machine and the marks
// the picture shows (the allocations made so far).
type demo struct {
	out   io.Writer
	m     *topology.Machine
	marks topology.Marks
}

// demoStep is one step of the scenario: a title and what it does. A step
// returns an error only when the output cannot be written.
type demoStep struct {
	title string
	run   func(d *demo) error
}

// demoScenario returns the steps of the demo in order. For now it shows the
// machine; the allocation steps (two SingleNUMANode pods, a refused third,
// an 8-GPU Restricted pod, a BestEffort fallback) are added here when the
// allocator exists.
func demoScenario() []demoStep {
	return []demoStep{
		{title: "The machine", run: (*demo).showMachine},
	}
}

// playDemo runs the steps on m, numbering their titles.
func playDemo(w io.Writer, m *topology.Machine, steps []demoStep) error {
	d := &demo{out: w, m: m}
	if _, err := fmt.Fprintf(w, "numaplan demo on %s (%s)\n", m.Name(), summary(m)); err != nil {
		return err
	}
	for i, s := range steps {
		if _, err := fmt.Fprintf(w, "\n== %d. %s ==\n\n", i+1, s.title); err != nil {
			return err
		}
		if err := s.run(d); err != nil {
			return err
		}
	}
	return nil
}

// showMachine prints the picture of the machine with the current marks.
func (d *demo) showMachine() error { return d.m.Picture(d.out, &d.marks) }
