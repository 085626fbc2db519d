package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/internal/strictjson"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

var placeCommand = &command{
	name:     "place",
	synopsis: "place [--preset NAME | --topology FILE | --root DIR] [--show]",
	summary:  "place and release workloads read as JSON Lines on standard input",
	details: `Each line of standard input is one operation; each gets one JSON line on standard
output, in order:

  {"op":"allocate","id":"a","cpus":4,"gpus":1,"memoryMiB":0,"policy":"SingleNUMANode",
   "exclusive":"Required","fullPCPUs":false}
  -> {"id":"a","ok":true,"cpus":"0-3","gpus":[0],"numaNodes":[0]}
  {"op":"release","id":"a"}                -> {"id":"a","ok":true}
  {"op":"resize","id":"a","cpus":8}        -> answered like an allocation
  {"op":"health","gpu":3,"healthy":false}  -> {"ok":true,"affected":["a"]}

Only op and id are required besides the amounts; policy defaults to None and exclusive to
Required; "devices":{"rdma":1} asks for devices of other classes. Field names are
case-sensitive; an unknown field, one the op does not read, a repeated field or a string
that is not valid UTF-8 makes the line invalid (the error suggests the field meant). numaNodes is the span
(NUMA node IDs). A refused or invalid line gets {"id":...,"ok":false,"error":"..."} and
processing goes on; nothing already allocated is lost. The exit status is 0 once
standard input has been read to its end. --show prints the machine with the
allocations marked on standard error at the end.`,
	setup: func(fs *flag.FlagSet) func(*env) error {
		var src machineSource
		src.register(fs)
		show := fs.Bool("show", false, "print the machine picture with the allocations marked on standard error at the end")
		return func(e *env) error {
			if src.file == "-" {
				return usagef("--topology - is not possible here: standard input carries the operations")
			}
			m, err := src.load(e.stdin)
			if err != nil {
				return err
			}
			p, err := newPlacer(m)
			if err != nil {
				return err
			}
			if err := p.serve(e.stdin, e.stdout); err != nil {
				return err
			}
			if *show {
				if err := m.Picture(e.stderr, p.marks()); err != nil {
					return fmt.Errorf("writing the picture: %w", err)
				}
			}
			return nil
		}
	},
}

// maxLine is the longest input line place reads whole; a longer line gets an
// error answer and is skipped.
const maxLine = 1 << 20

// placer plays operations on one machine's state.
type placer struct {
	m     *topology.Machine
	state *allocator.State
}

func newPlacer(m *topology.Machine) (*placer, error) {
	st, err := allocator.New(m, allocator.Options{})
	if err != nil {
		return nil, err
	}
	return &placer{m: m, state: st}, nil
}

// serve answers every line of r on w. It fails only when reading or writing
// fails.
func (p *placer) serve(r io.Reader, w io.Writer) error {
	in := bufio.NewReaderSize(r, 64<<10)
	out := bufio.NewWriter(w)
	for {
		line, tooLong, err := readLine(in)
		if err == io.EOF && line == nil {
			return out.Flush()
		}
		if err != nil && err != io.EOF {
			out.Flush()
			return fmt.Errorf("reading standard input: %w", err)
		}
		var ans []byte
		if tooLong {
			ans = marshal(answer{Error: fmt.Sprintf("line longer than %d bytes", maxLine)})
		} else {
			ans = p.handle(line)
		}
		out.Write(ans)
		out.WriteByte('\n')
		// Flush per answer so an interactive driver sees it at once.
		if err := out.Flush(); err != nil {
			return fmt.Errorf("writing standard output: %w", err)
		}
		if err == io.EOF {
			return nil
		}
	}
}

// readLine returns the next line without its end ("\n" or "\r\n"); nil at
// the end of input. A line longer than maxLine is consumed and reported as
// too long.
func readLine(in *bufio.Reader) (line []byte, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, err := in.ReadSlice('\n')
		if len(buf)+len(chunk) > maxLine {
			tooLong = true
		} else {
			buf = append(buf, chunk...)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			if len(buf) == 0 && !tooLong {
				return nil, false, io.EOF
			}
			return trimEOL(buf), tooLong, io.EOF
		case err != nil:
			return nil, false, err
		}
		return trimEOL(buf), tooLong, nil
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if b == nil {
		b = []byte{}
	}
	return b
}

// op is one input line.
type op struct {
	Op        string         `json:"op"`
	ID        *string        `json:"id"`
	CPUs      *int           `json:"cpus"`
	GPUs      int            `json:"gpus"`
	MemoryMiB int64          `json:"memoryMiB"`
	Devices   map[string]int `json:"devices"`
	Policy    string         `json:"policy"`
	Exclusive string         `json:"exclusive"`
	FullPCPUs bool           `json:"fullPCPUs"`
	// health
	GPU     *int    `json:"gpu"`
	Class   string  `json:"class"`
	Device  *string `json:"device"`
	Healthy *bool   `json:"healthy"`
}

// answer is one output line. ID is a pointer so that a line without an id
// is answered without one.
type answer struct {
	ID        *string             `json:"id,omitempty"`
	OK        bool                `json:"ok"`
	CPUs      *string             `json:"cpus,omitempty"`
	GPUs      *[]int              `json:"gpus,omitempty"`
	Devices   map[string][]string `json:"devices,omitempty"`
	MemoryMiB map[string]int64    `json:"memoryMiB,omitempty"`
	NUMANodes *[]int              `json:"numaNodes,omitempty"`
	Affected  *[]string           `json:"affected,omitempty"`
	Error     string              `json:"error,omitempty"`
}

func marshal(a answer) []byte {
	b, err := json.Marshal(a)
	if err != nil { // cannot happen: every field marshals
		return []byte(`{"ok":false,"error":"internal error: cannot encode the answer"}`)
	}
	return b
}

// opFields are the fields each op reads; a line with another field is
// refused, naming it.
var opFields = map[string][]string{
	"allocate": {"op", "id", "cpus", "gpus", "memoryMiB", "devices", "policy", "exclusive", "fullPCPUs"},
	"release":  {"op", "id"},
	"resize":   {"op", "id", "cpus"},
	"health":   {"op", "id", "gpu", "class", "device", "healthy"},
}

// opAliases are names people write for the fields of a line (the pod
// annotation's, Kubernetes resource names, ...): an unknown field so named
// gets the real one suggested.
var opAliases = map[string]string{
	"numaTopologyPolicy": "policy", "singleNUMANodeExclusive": "exclusive", "exclusivity": "exclusive",
	"aliyun.com/gpu": "gpus", "nvidia.com/gpu": "gpus", "cpu": "cpus", "memory": "memoryMiB",
	"fullPCPUsOnly": "fullPCPUs", "full-pcpus-only": "fullPCPUs", "operation": "op", "action": "op",
	"name": "id", "key": "id", "pod": "id",
}

// rawOp is an input line with its fields undecoded: the first pass reads
// the line's syntax, its field names, repetitions and UTF-8, so that a
// field the op does not read is named (with its suggestion) whatever the
// type of its value.
type rawOp struct {
	Op        json.RawMessage `json:"op"`
	ID        json.RawMessage `json:"id"`
	CPUs      json.RawMessage `json:"cpus"`
	GPUs      json.RawMessage `json:"gpus"`
	MemoryMiB json.RawMessage `json:"memoryMiB"`
	Devices   json.RawMessage `json:"devices"`
	Policy    json.RawMessage `json:"policy"`
	Exclusive json.RawMessage `json:"exclusive"`
	FullPCPUs json.RawMessage `json:"fullPCPUs"`
	GPU       json.RawMessage `json:"gpu"`
	Class     json.RawMessage `json:"class"`
	Device    json.RawMessage `json:"device"`
	Healthy   json.RawMessage `json:"healthy"`
}

// handle answers one line. Lines are read strictly (see docs/design.md,
// "Strict JSON"): field names are case-sensitive, an unknown field (or one
// its op does not read, whatever its value) is refused with a suggestion,
// and a duplicate field or a string that is not valid UTF-8 is refused.
// Every error answer carries the line's id when the id itself can be read
// (a string, valid UTF-8, given once).
func (p *placer) handle(line []byte) []byte {
	if len(bytes.TrimSpace(line)) == 0 {
		return marshal(answer{Error: "bad JSON: empty line"})
	}
	var raw rawOp
	if err := strictjson.Decode(line, &raw, strictjson.Options{Aliases: opAliases}); err != nil {
		return marshal(answer{ID: idOf(line), Error: "bad JSON: " + jsonReason(err)})
	}
	id := idOf(line)
	var opName string
	if err := json.Unmarshal(orNull(raw.Op), &opName); err != nil {
		return marshal(answer{ID: id, Error: `bad JSON: field "op": want a string (allocate, release, resize or health)`})
	}
	fields, ok := opFields[opName]
	if !ok {
		if opName == "" {
			return marshal(answer{ID: id, Error: `missing "op"`})
		}
		return marshal(answer{ID: id, Error: fmt.Sprintf("unknown op %s (want allocate, release, resize or health)", quote.Short(opName))})
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(line, &keys) // cannot fail: the line decoded strictly
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if slices.Contains(fields, k) {
			continue
		}
		msg := fmt.Sprintf("field %s is not read by op %q", quote.Short(k), opName)
		if sugg := strictjson.Suggest(k, fields, opAliases); len(sugg) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", sugg[0])
		}
		return marshal(answer{ID: id, Error: msg})
	}
	var o op
	if err := json.Unmarshal(line, &o); err != nil {
		return marshal(answer{ID: id, Error: "bad JSON: " + jsonReason(err)})
	}
	switch o.Op {
	case "allocate":
		return marshal(p.allocate(&o))
	case "release":
		return marshal(p.release(&o))
	case "health":
		return marshal(p.health(&o))
	default:
		return marshal(p.resize(&o))
	}
}

func orNull(b json.RawMessage) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

// idOf returns the id of a line, also of one that did not decode as a
// whole, so that the error answer can name it when the id itself is
// readable (a string, valid UTF-8, given once); nil otherwise.
func idOf(line []byte) *string {
	if id, ok := strictjson.TopString(line, "id"); ok {
		return &id
	}
	return nil
}

func jsonReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q: want %s, got %s", te.Field, te.Type, te.Value)
	}
	return err.Error()
}

func (p *placer) allocate(o *op) answer {
	if o.ID == nil {
		return answer{Error: `missing "id"`}
	}
	if *o.ID == "" {
		return answer{ID: o.ID, Error: `"id" is empty`}
	}
	pol, err := policy.ParsePolicy(o.Policy)
	if err != nil {
		return answer{ID: o.ID, Error: fmt.Sprintf("unknown policy %s (want SingleNUMANode, Restricted, BestEffort or None)", quote.Short(o.Policy))}
	}
	excl, err := policy.ParseExclusivity(o.Exclusive)
	if err != nil {
		return answer{ID: o.ID, Error: fmt.Sprintf("unknown exclusive %s (want Required or Preferred)", quote.Short(o.Exclusive))}
	}
	cpus := 0
	if o.CPUs != nil {
		cpus = *o.CPUs
	}
	r := allocator.Request{ID: *o.ID, CPUs: cpus, GPUs: o.GPUs, MemoryMiB: o.MemoryMiB, Devices: o.Devices,
		Policy: pol, Exclusive: excl, FullPCPUs: o.FullPCPUs}
	a, err := p.state.Allocate(&r)
	if err != nil {
		return answer{ID: o.ID, Error: err.Error()}
	}
	return p.granted(o.ID, &a)
}

// granted is the answer for a live allocation.
func (p *placer) granted(id *string, a *allocator.Allocation) answer {
	cpus := a.CPUs.String()
	gpus := append([]int{}, a.GPUs...)
	nodes := []int{}
	for _, n := range a.NUMANodes() {
		nodes = append(nodes, int(n))
	}
	ans := answer{ID: id, OK: true, CPUs: &cpus, GPUs: &gpus, NUMANodes: &nodes}
	if len(a.Devices) > 0 {
		ans.Devices = a.Devices
	}
	if len(a.Memory) > 0 {
		ans.MemoryMiB = map[string]int64{}
		for _, x := range a.Memory {
			ans.MemoryMiB[strconv.Itoa(int(x.Node))] = x.MiB
		}
	}
	return ans
}

func (p *placer) resize(o *op) answer {
	if o.ID == nil {
		return answer{Error: `missing "id"`}
	}
	if o.CPUs == nil {
		return answer{ID: o.ID, Error: `missing "cpus" (the new number of CPUs)`}
	}
	a, err := p.state.Resize(*o.ID, *o.CPUs)
	if err != nil {
		return answer{ID: o.ID, Error: err.Error()}
	}
	return p.granted(o.ID, &a)
}

func (p *placer) release(o *op) answer {
	if o.ID == nil {
		return answer{Error: `missing "id"`}
	}
	if err := p.state.Release(*o.ID); err != nil {
		return answer{ID: o.ID, Error: err.Error()}
	}
	return answer{ID: o.ID, OK: true}
}

func (p *placer) health(o *op) answer {
	if o.Healthy == nil {
		return answer{ID: o.ID, Error: `missing "healthy" (true or false)`}
	}
	class, dev := o.Class, ""
	switch {
	case o.GPU != nil && o.Device != nil:
		return answer{ID: o.ID, Error: `give "gpu" or "device", not both`}
	case o.GPU != nil:
		if class != "" && class != allocator.GPUClass {
			return answer{ID: o.ID, Error: fmt.Sprintf(`"gpu" with class %s: leave class out for GPUs`, quote.Short(class))}
		}
		class, dev = allocator.GPUClass, strconv.Itoa(*o.GPU)
	case o.Device != nil:
		if class == "" {
			return answer{ID: o.ID, Error: `"device" needs a "class", such as "rdma"`}
		}
		dev = *o.Device
	default:
		return answer{ID: o.ID, Error: `missing "gpu" (or "device" with "class")`}
	}
	affected, err := p.state.SetDeviceHealth(class, dev, *o.Healthy)
	if err != nil {
		return answer{ID: o.ID, Error: err.Error()}
	}
	if affected == nil {
		affected = []string{}
	}
	return answer{ID: o.ID, OK: true, Affected: &affected}
}

// markChars are the characters given to allocations in the picture, in
// order of their IDs; further allocations share '*'.
const markChars = "abcdefghijklmnopqrstuvwyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// marks returns the picture marks of the live allocations, with a legend.
func (p *placer) marks() *topology.Marks {
	return stateMarks(p.state)
}

// stateMarks marks each live allocation of s with a character ('x' is left
// for unhealthy GPUs) and explains them in the legend.
func stateMarks(s *allocator.State) *topology.Marks {
	mk := &topology.Marks{CPUs: map[int]rune{}, GPUs: map[int]rune{}}
	for i, a := range s.Live() {
		ch := '*'
		if i < len(markChars) {
			ch = rune(markChars[i])
		}
		for cpu := range a.CPUs.All() {
			mk.CPUs[cpu] = ch
		}
		for _, g := range a.GPUs {
			mk.GPUs[g] = ch
		}
		nodes := make([]string, 0, a.DenseSpan.Count())
		for _, id := range a.NUMANodes() {
			nodes = append(nodes, id.String())
		}
		line := fmt.Sprintf("%c = %s: %s, %d CPUs %s, GPUs %v, NUMA nodes [%s]", ch, a.ID, a.Policy,
			a.CPUs.Size(), a.CPUs.String(), a.GPUs, strings.Join(nodes, ","))
		if len(a.Devices) > 0 {
			for _, c := range slices.Sorted(maps.Keys(a.Devices)) {
				line += fmt.Sprintf(", %s %v", c, a.Devices[c])
			}
		}
		if mem := a.MemoryMiB(); mem > 0 {
			line += fmt.Sprintf(", %d MiB", mem)
		}
		mk.Legend = append(mk.Legend, line)
	}
	snap := s.Snapshot()
	for _, id := range snap.Unhealthy[allocator.GPUClass] {
		if g, err := strconv.Atoi(id); err == nil {
			mk.GPUs[g] = topology.MarkUnhealthy
		}
	}
	if len(snap.Unhealthy[allocator.GPUClass]) > 0 {
		mk.Legend = append(mk.Legend, "x = unhealthy GPU")
	}
	return mk
}
