package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// demoPreset is the machine the demo plays on.
const demoPreset = "dgx-h100"

var demoCommand = &command{
	name:     "demo",
	synopsis: "demo",
	summary:  "play the placement demo on the " + demoPreset + " preset",
	details: `The demo places and releases pods with different policies on a 2-NUMA, 8-GPU server
(dgx-h100), saying why each is admitted or refused, and ends with the machine's
picture with the last allocations marked.`,
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

// demo is the state a demo scenario plays on: the machine, its allocation
// state and the marks the picture shows.
type demo struct {
	out   io.Writer
	m     *topology.Machine
	state *allocator.State
	marks topology.Marks
}

// demoStep is one step of the scenario: a title and what it does. A step
// returns an error only when the output cannot be written or the scenario
// went off its script.
type demoStep struct {
	title string
	run   func(d *demo) error
}

// textGen is the product's motivating pod: a text-generation server with 4
// GPUs and 24 CPUs on one NUMA node.
func textGen(id string) allocator.Request {
	return allocator.Request{ID: id, CPUs: 24, GPUs: 4, Policy: policy.SingleNUMANode}
}

// demoScenario returns the steps of the demo in order.
func demoScenario() []demoStep {
	return []demoStep{
		{title: "Two text-generation pods (4 GPUs + 24 CPUs, SingleNUMANode)", run: func(d *demo) error {
			return d.place(textGen("textgen-1"), textGen("textgen-2"))
		}},
		{title: "A third one does not fit on any NUMA node", run: func(d *demo) error {
			return d.refuse(textGen("textgen-3"))
		}},
		{title: "Release both", run: func(d *demo) error {
			return d.release("textgen-1", "textgen-2")
		}},
		{title: "An 8-GPU training pod with 16 CPUs, Restricted", run: func(d *demo) error {
			if err := d.place(allocator.Request{ID: "train-8gpu", CPUs: 16, GPUs: 8, Policy: policy.Restricted}); err != nil {
				return err
			}
			return d.say(`The kubelet's restricted policy refuses this pod: its CPU manager prefers only the
narrowest mask for 16 CPUs (one NUMA node) and its device manager only the narrowest
for 8 GPUs (both nodes), so no merged hint is preferred and admission fails with
TopologyAffinityError. numaplace computes the width for the whole request (width_cap
2), so the CPUs follow the GPUs: 8 CPUs next to each group of 4 GPUs.
`)
		}},
		{title: "Release it", run: func(d *demo) error {
			return d.release("train-8gpu")
		}},
		{title: "A 2-GPU SingleNUMANode pod, then a 6-GPU BestEffort pod", run: func(d *demo) error {
			if err := d.place(
				allocator.Request{ID: "infer-2gpu", CPUs: 8, GPUs: 2, Policy: policy.SingleNUMANode},
				allocator.Request{ID: "batch-6gpu", CPUs: 12, GPUs: 6, Policy: policy.BestEffort},
			); err != nil {
				return err
			}
			return d.say(`No NUMA node has 6 free GPUs any more, so BestEffort falls back to the narrowest
set that has them (width_free 2) instead of refusing the pod, with its CPUs split
in proportion to its GPUs on each node. Its span uses node 0, which a single-node
pod holds; no set of 2 nodes would obey singleNUMANodeExclusive, and for BestEffort
the rule gives way rather than the pod being refused.
`)
		}},
		{title: "The machine", run: func(d *demo) error {
			d.marks = *stateMarks(d.state)
			return d.m.Picture(d.out, &d.marks)
		}},
	}
}

// playDemo runs the steps on m, numbering their titles.
func playDemo(w io.Writer, m *topology.Machine, steps []demoStep) error {
	st, err := allocator.New(m, allocator.Options{})
	if err != nil {
		return err
	}
	d := &demo{out: w, m: m, state: st}
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

func (d *demo) say(text string) error {
	_, err := fmt.Fprintf(d.out, "\n%s", text)
	return err
}

// place allocates each request and prints the decision; a refusal is a
// scenario error.
func (d *demo) place(reqs ...allocator.Request) error {
	for _, r := range reqs {
		a, err := d.state.Allocate(&r)
		if err != nil {
			return fmt.Errorf("demo: %s was refused: %w", r.ID, err)
		}
		if _, err := fmt.Fprintf(d.out, "%-11s %s/%s, %d GPUs + %d CPUs -> NUMA nodes %v, GPUs %v, CPUs %s\n",
			r.ID, r.Policy, r.Exclusive, r.GPUs, r.CPUs, a.NUMANodes(), a.GPUs, a.CPUs); err != nil {
			return err
		}
	}
	return nil
}

// refuse tries a request that the scenario expects to be refused and prints
// the reason.
func (d *demo) refuse(r allocator.Request) error {
	if err := d.state.Fit(&r); err == nil {
		return fmt.Errorf("demo: %s fits, the scenario expected a refusal", r.ID)
	}
	_, err := d.state.Allocate(&r)
	var pe *allocator.PlacementError
	if !errors.As(err, &pe) {
		return fmt.Errorf("demo: %s: unexpected answer %v", r.ID, err)
	}
	_, werr := fmt.Fprintf(d.out, "%-11s %s/%s, %d GPUs + %d CPUs -> refused: %s\n",
		r.ID, r.Policy, r.Exclusive, r.GPUs, r.CPUs, pe.Reason)
	return werr
}

func (d *demo) release(ids ...string) error {
	for _, id := range ids {
		if err := d.state.Release(id); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if _, err := fmt.Fprintf(d.out, "%-11s released\n", id); err != nil {
			return err
		}
	}
	return nil
}
