package topology_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/internal/strictjson"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

// designExample is the topology JSON example of docs/design.md, verbatim.
const designExample = `{
  "name": "example",
  "numaNodes": [
    {"id": 0, "socket": 0, "cpus": "0-3,8-11", "memoryMiB": 65536},
    {"id": 2, "socket": 1, "cpus": "4-7,12-15", "memoryMiB": 65536},
    {"id": 5, "socket": 1, "cpus": "", "memoryMiB": 16384}
  ],
  "distances": [[10, 21, 31], [21, 10, 13], [31, 13, 10]],
  "numaSets": [[0], [2, 5]],
  "cores": ["0,8", "1,9", "2,10", "3,11", "4,12", "5,13", "6,14", "7,15"],
  "reservedCPUs": "0,8",
  "gpus": [{"id": 0, "numaNode": 0, "busID": "0000:1b:00.0", "pcieSwitch": "sw0", "uuid": "GPU-..."}],
  "devices": [{"id": "mlx5_0", "class": "rdma", "numaNode": 0, "pcieSwitch": "sw0"}],
  "nvlinks": [[0, 1, 12]]
}`

// designExampleTwoGPUs is designExample with the GPU its NVLink names: the
// example as printed links GPU 0 to a GPU 1 it does not list.
var designExampleTwoGPUs = strings.Replace(designExample,
	`"uuid": "GPU-..."}]`,
	`"uuid": "GPU-..."}, {"id": 1, "numaNode": 2, "pcieSwitch": "sw1"}]`, 1)

func TestParseJSONDesignExampleVerbatim(t *testing.T) {
	// docs/design.md's example names GPU 1 in an NVLink but lists only GPU 0:
	// the link is kept (GPU 1 may be hidden from this view of the machine)
	// and round-trips, and GPU 1 does not appear.
	m, err := topology.ParseJSON([]byte(designExample))
	require.NoError(t, err)
	require.Equal(t, 1, m.NumGPUs())
	require.Equal(t, []topology.NVLink{{A: 0, B: 1, Links: 12}}, m.NVLinks())
	require.Equal(t, 12, m.NVLinkCount(1, 0))
	var buf bytes.Buffer
	require.NoError(t, m.WriteJSON(&buf))
	back, err := topology.ParseJSON(buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, m.Spec(), back.Spec())
}

func TestParseJSONDesignExample(t *testing.T) {
	m, err := topology.ParseJSON([]byte(designExampleTwoGPUs))
	require.NoError(t, err)

	require.Equal(t, "example", m.Name())
	require.Equal(t, []numa.NodeID{0, 2, 5}, m.NodeIDs())
	nodes := m.Nodes()
	require.Equal(t, []string{"0-3,8-11", "4-7,12-15", ""},
		[]string{nodes[0].CPUs.String(), nodes[1].CPUs.String(), nodes[2].CPUs.String()})
	require.Equal(t, []int{0, 1, 1}, []int{nodes[0].Socket, nodes[1].Socket, nodes[2].Socket})
	require.Equal(t, []int64{65536, 65536, 16384}, []int64{nodes[0].MemoryMiB, nodes[1].MemoryMiB, nodes[2].MemoryMiB})
	require.True(t, nodes[2].CPUs.IsEmpty(), "node 5 is CPU-less")

	d, ok := m.Distances().Distance(2, 5)
	require.True(t, ok)
	require.Equal(t, 13, d)
	d, ok = m.Distances().Distance(5, 0)
	require.True(t, ok)
	require.Equal(t, 31, d)

	require.Equal(t, []numa.Mask{numa.MaskOf(0), numa.MaskOf(1, 2)}, m.NUMASets())
	sets := m.Spec().NUMASets
	require.Equal(t, [][]int{{0}, {2, 5}}, sets)

	require.Equal(t, 8, m.NumCores())
	require.Equal(t, 2, m.ThreadsPerCore())
	require.Equal(t, "3,11", m.CoreCPUs(3).String())
	require.Equal(t, 1, m.CoreNode(4))
	require.Equal(t, "0,8", m.ReservedCPUs().String())

	require.Equal(t, []topology.GPU{
		{ID: 0, NUMANode: 0, BusID: "0000:1b:00.0", PCIeSwitch: "sw0", UUID: "GPU-..."},
		{ID: 1, NUMANode: 2, PCIeSwitch: "sw1"},
	}, m.GPUs())
	require.Equal(t, []topology.Device{
		{ID: "mlx5_0", Class: "rdma", NUMANode: 0, PCIeSwitch: "sw0"},
	}, m.Devices())
	require.Equal(t, []topology.NVLink{{A: 0, B: 1, Links: 12}}, m.NVLinks())
	require.Equal(t, 12, m.NVLinkCount(1, 0))

	// The example is already in canonical form: the machine writes it back
	// field for field.
	var want, got any
	require.NoError(t, json.Unmarshal([]byte(designExampleTwoGPUs), &want))
	out, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, want, got)
}

func TestParseJSONDefaults(t *testing.T) {
	m, err := topology.ParseJSON([]byte(`{"numaNodes": [
		{"id": 3, "socket": -1, "cpus": "0-1"},
		{"id": 1, "socket": -1, "cpus": "2-3\n"}
	], "gpus": [{"numaNode": -1}, {"numaNode": 3}, {"id": 7, "numaNode": -1}],
	"devices": [{"id": "nvme0", "class": "nvme", "numaNode": -1}]}`))
	require.NoError(t, err)
	require.Equal(t, "", m.Name())
	require.Equal(t, []numa.NodeID{1, 3}, m.NodeIDs())
	require.Equal(t, topology.UnknownSocket, m.Node(0).Socket)
	require.Empty(t, m.Sockets())
	require.Equal(t, []numa.Mask{numa.MaskOf(0, 1)}, m.NUMASets(), "no socket information: one set")
	require.Equal(t, [][]int{{10, 20}, {20, 10}}, m.Distances().Rows())
	require.Equal(t, 4, m.NumCores(), "one CPU per core")
	require.Equal(t, 1, m.ThreadsPerCore())
	require.True(t, m.ReservedCPUs().IsEmpty())
	require.Equal(t, []topology.GPU{
		{ID: 0, NUMANode: topology.UnknownNode}, // a missing id is the position
		{ID: 1, NUMANode: 3},
		{ID: 7, NUMANode: topology.UnknownNode},
	}, m.GPUs())
	require.Equal(t, topology.UnknownNode, m.Devices()[0].NUMANode)

	// The Spec writes the defaults out, and cores only with SMT.
	s := m.Spec()
	require.Nil(t, s.Cores)
	require.Equal(t, [][]int{{10, 20}, {20, 10}}, s.Distances)
	require.Equal(t, [][]int{{1, 3}}, s.NUMASets)
	require.Equal(t, topology.UnknownSocket, *s.NUMANodes[0].Socket, "an unknown socket is written as -1")
}

// A file with fields this version does not know is refused by default,
// naming the field and suggesting the known one it may mean; the lenient
// mode ignores such fields (a file written by a newer version), but not one
// that differs from a known field only in case.
func TestParseJSONUnknownFields(t *testing.T) {
	newer := `{
		"apiVersion": "v9", "comment": {"nested": [1, 2, {"x": null}]},
		"numaNodes": [{"id": 0, "socket": 0, "cpus": "0-3", "vendor": "acme", "hugepages": {"2048kB": 4}}],
		"gpus": [{"id": 0, "numaNode": 0, "model": "H100", "memoryMiB": 81559}],
		"devices": [{"id": "mlx5_0", "class": "rdma", "numaNode": 0, "ports": 2}]
	}`
	_, err := topology.ParseJSON([]byte(newer))
	require.ErrorIs(t, err, topology.ErrInvalid)
	require.ErrorIs(t, err, strictjson.ErrUnknownField)
	require.ErrorContains(t, err, `unknown field "apiVersion"`)
	m, err := topology.ParseJSONWith([]byte(newer), topology.JSONOptions{IgnoreUnknownFields: true})
	require.NoError(t, err)
	require.Equal(t, 4, m.NumCPUs())
	require.Equal(t, 1, m.NumGPUs())

	node := func(fields string) string {
		return `{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0-3"` + fields + `}], "gpus": [{"id": 0, "numaNode": 0}]}`
	}
	for _, c := range []struct{ in, msg string }{
		{node(`, "memoryMB": 4`), `unknown field "memoryMB" in numaNodes[0]; did you mean "memoryMiB"?`},
		{node(`, "sockets": 4`), `unknown field "sockets" in numaNodes[0]; did you mean "socket"?`},
		{node(`, "Socket": 4`), `unknown field "Socket" in numaNodes[0]; did you mean "socket"?`},
		{node(`, "package": 4`), `unknown field "package" in numaNodes[0]; did you mean "socket"?`},
		{strings.Replace(node(""), `"gpus"`, `"gpu"`, 1), `unknown field "gpu"; did you mean "gpus"?`},
		{strings.Replace(node(""), `"gpus"`, `"GPUs"`, 1), `unknown field "GPUs"; did you mean "gpus"?`},
		{strings.Replace(node(""), `"numaNode": 0`, `"numanode": 0`, 1), `unknown field "numanode" in gpus[0]; did you mean "numaNode"?`},
		{strings.Replace(node(""), `"numaNode": 0`, `"node": 0`, 1), `unknown field "node" in gpus[0]; did you mean "numaNode"?`},
	} {
		_, err := topology.ParseJSON([]byte(c.in))
		require.ErrorIs(t, err, strictjson.ErrUnknownField, c.in)
		require.ErrorContains(t, err, c.msg, c.in)
	}
	_, err = topology.ParseJSONWith([]byte(node(`, "Socket": 4`)), topology.JSONOptions{IgnoreUnknownFields: true})
	require.ErrorContains(t, err, `unknown field "Socket" in numaNodes[0]; did you mean "socket"?`)
}

// Duplicate fields and strings that are not valid UTF-8 are refused.
func TestParseJSONDuplicatesAndUTF8(t *testing.T) {
	for in, msg := range map[string]string{
		`{"numaNodes": [{"id": 0, "socket": 0, "id": 1, "cpus": "0"}]}`:                                                       `duplicate field "id" in numaNodes[0]`,
		`{"name": "a", "numaNodes": [{"id": 0, "socket": 0, "cpus": "0"}], "name": "b"}`:                                      `duplicate field "name"`,
		"{\"name\": \"a\xffb\", \"numaNodes\": [{\"id\": 0, \"socket\": 0, \"cpus\": \"0\"}]}":                                "a string at name is not valid UTF-8",
		`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0"}], "devices": [{"id": "\udc00", "class": "rdma", "numaNode": 0}]}`: "a string at devices[0].id is not valid UTF-8",
		`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0"}], "gpus": [{"numaNode": 0, "uuid": "GPU-\ud800"}]}`:               "a string at gpus[0].uuid is not valid UTF-8",
	} {
		_, err := topology.ParseJSON([]byte(in))
		require.ErrorIs(t, err, topology.ErrInvalid, in)
		require.ErrorContains(t, err, msg, in)
	}
}

// The format has no missing socket or NUMA node, as the Builder has none:
// an unknown one is written -1 (topology.UnknownSocket, topology.UnknownNode)
// in both, never taken as 0.
func TestParseJSONSocketAndNUMANodeRequired(t *testing.T) {
	for in, msg := range map[string]string{
		`{"numaNodes": [{"id": 0, "cpus": "0"}]}`:                                                              `numaNodes[0] (id 0): "socket" is required (-1 when unknown)`,
		`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0"}], "gpus": [{"id": 3}]}`:                            `gpus[0] (id 3): "numaNode" is required (-1 when unknown)`,
		`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0"}], "devices": [{"id": "mlx5_0", "class": "rdma"}]}`: `devices[0] (id "mlx5_0"): "numaNode" is required (-1 when unknown)`,
		`{"numaNodes": [{"id": 0, "socket": null, "cpus": "0"}]}`:                                              `"socket" is required`,
	} {
		_, err := topology.ParseJSON([]byte(in))
		require.ErrorIs(t, err, topology.ErrInvalid, in)
		require.ErrorContains(t, err, msg, in)
	}
	viaJSON := mustParse(t, `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0-1"}, {"id": 1, "socket": 0, "cpus": "2-3"}],
		"gpus": [{"id": 0, "numaNode": -1}, {"id": 1, "numaNode": 0}], "devices": [{"id": "d", "class": "rdma", "numaNode": -1}]}`)
	viaBuilder := mustBuild(t, topology.NewBuilder("").
		AddNode(topology.Node{ID: 0, Socket: topology.UnknownSocket, CPUs: numa.CPURange(0, 1)}).
		AddNode(topology.Node{ID: 1, Socket: 0, CPUs: numa.CPURange(2, 3)}).
		AddGPU(topology.GPU{ID: 0, NUMANode: topology.UnknownNode}).
		AddGPU(topology.GPU{ID: 1, NUMANode: 0}).
		AddDevice(topology.Device{ID: "d", Class: "rdma", NUMANode: topology.UnknownNode}))
	require.Equal(t, viaBuilder.Spec(), viaJSON.Spec())
	require.Equal(t, topology.UnknownSocket, viaJSON.Node(0).Socket)
	require.Equal(t, topology.UnknownNode, viaJSON.GPUs()[0].NUMANode)
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		item    string // the ValidationError's Item
		mention string
		tooMany bool
	}{
		{"malformed", `{"numaNodes": [`, "topology JSON", "cannot decode", false},
		{"not an object", `[1, 2]`, "topology JSON", "cannot decode", false},
		{"wrong type", `{"numaNodes": [{"id": "0", "cpus": "0"}]}`, "topology JSON", "cannot decode", false},
		{"empty input", ``, "topology JSON", "cannot decode", false},
		{"trailing garbage", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}]} x`, "topology JSON", "data after the JSON value", false},
		{"second object", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}]} {}`, "topology JSON", "data after the JSON value", false},
		{"null", `null`, "numaNodes", "required", false},
		{"missing numaNodes", `{"name": "x"}`, "numaNodes", "required", false},
		{"empty numaNodes", `{"numaNodes": []}`, "numaNodes", "no NUMA node", false},
		{"missing id", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}, {"socket": -1, "cpus": "1"}]}`, "numaNodes[1]", `"id" is required`, false},
		{"missing cpus", `{"numaNodes": [{"id": 4, "socket": -1}]}`, "numaNodes[0] (id 4)", `"cpus" is required`, false},
		{"bad cpulist", `{"numaNodes": [{"id": 4, "socket": -1, "cpus": "0-3,x"}]}`, "numaNodes[0] (id 4)", `"x"`, false},
		{"reversed range", `{"numaNodes": [{"id": 4, "socket": -1, "cpus": "3-1"}]}`, "numaNodes[0] (id 4)", `"3-1"`, false},
		{"negative id", `{"numaNodes": [{"id": -2, "socket": -1, "cpus": ""}]}`, "numaNodes[0] (id -2)", "negative", false},
		{"CPU twice", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0-3"}, {"id": 1, "socket": -1, "cpus": "3-5"}]}`, "cpu 3", "two NUMA nodes", false},
		{"bad distances", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}, {"id": 1, "socket": -1, "cpus": "1"}], "distances": [[10, 20]]}`,
			"distances", "1 rows for 2 nodes", false},
		{"bad core", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0-3"}], "cores": ["0,1", "2,,3"]}`, "cores[1]", "empty item", false},
		{"core of unknown CPU", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0-3"}], "cores": ["3-4"]}`, "cores[0] (3-4)", "CPUs 4", false},
		{"bad l3", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0-3"}], "l3Groups": ["a"]}`, "l3Groups[0]", `"a"`, false},
		{"bad reservedCPUs", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0-3"}], "reservedCPUs": "0-"}`, "reservedCPUs", `"0-"`, false},
		{"unknown reservedCPUs", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0-3"}], "reservedCPUs": "4"}`, "reservedCPUs", "CPUs 4", false},
		{"unknown GPU node", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "gpus": [{"id": 0, "numaNode": 0}, {"id": 3, "numaNode": 1}]}`,
			"gpus[1] (id 3)", "NUMA node 1 does not exist", false},
		{"duplicate GPU by position", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "gpus": [{"id": 1, "numaNode": -1}, {"numaNode": -1}]}`,
			"gpus[1] (id 1)", "also used by gpus[0]", false},
		{"unknown device node", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "devices": [{"id": "d", "class": "rdma", "numaNode": 9}]}`,
			`devices[0] (id "d")`, "NUMA node 9", false},
		{"device without class", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "devices": [{"id": "d", "numaNode": -1}]}`,
			`devices[0] (id "d")`, "no class", false},
		{"nvlink arity", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "gpus": [{"numaNode": -1}, {"numaNode": -1}], "nvlinks": [[0, 1]]}`,
			"nvlinks[0]", "got 2 numbers", false},
		{"nvlink negative GPU", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "gpus": [{"numaNode": -1}], "nvlinks": [[0, -1, 2]]}`,
			"nvlinks[0] (0--1)", "must not be negative", false},
		{"unknown node in a set", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "numaSets": [[0, 1]]}`,
			"numaSets[0]", "NUMA node 1 does not exist", false},
		{"empty set", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "numaSets": [[0], []]}`, "numaSets[1]", "empty", false},
		{"node in no set", `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}, {"id": 1, "socket": -1, "cpus": "1"}], "numaSets": [[1]]}`,
			"numaSets", "NUMA node 0 is in no set", false},
		{"too many nodes", tooManyNodesJSON(), "", "65 NUMA nodes", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := topology.ParseJSON([]byte(tt.in))
			require.Nil(t, m)
			require.ErrorContains(t, err, tt.mention)
			if tt.tooMany {
				var tm *topology.TooManyNodesError
				require.ErrorAs(t, err, &tm)
				require.ErrorIs(t, err, topology.ErrTooManyNodes)
				return
			}
			require.ErrorIs(t, err, topology.ErrInvalid)
			var ve *topology.ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tt.item, ve.Item)
			require.ErrorContains(t, err, tt.item)
		})
	}
}

func tooManyNodesJSON() string {
	var sb strings.Builder
	sb.WriteString(`{"numaNodes": [`)
	for i := range 65 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"id": %d, "socket": -1, "cpus": "%d"}`, i, i)
	}
	sb.WriteString("]}")
	return sb.String()
}

func TestParseJSONCauseIsKept(t *testing.T) {
	_, err := topology.ParseJSON([]byte(`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "a"}]}`))
	require.ErrorIs(t, err, numa.ErrInvalidCPUSet)
	_, err = topology.ParseJSON([]byte(`{"numaNodes": [`))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = topology.ParseJSON([]byte(`{"numaNodes" 1}`))
	var syntax *json.SyntaxError
	require.ErrorAs(t, err, &syntax)
	_, err = topology.ParseJSON([]byte(`{"numaNodes": [{"id": 1.5, "cpus": ""}]}`))
	var typeErr *json.UnmarshalTypeError
	require.ErrorAs(t, err, &typeErr)
	require.ErrorContains(t, err, "numaNodes.id", "the decoder names the field")
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestReadJSON(t *testing.T) {
	m, err := topology.ReadJSON(strings.NewReader(designExampleTwoGPUs))
	require.NoError(t, err)
	require.Equal(t, 3, m.NumNodes())

	_, err = topology.ReadJSON(failingReader{})
	require.ErrorIs(t, err, topology.ErrInvalid)
	require.ErrorContains(t, err, "disk on fire")
}

func TestWriteJSON(t *testing.T) {
	m, err := topology.ParseJSON([]byte(designExampleTwoGPUs))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, m.WriteJSON(&buf))
	out := buf.String()
	require.True(t, strings.HasSuffix(out, "}\n"), "ends with a newline")
	require.Contains(t, out, "\n  \"numaNodes\": [", "indented by two spaces")
	again, err := topology.ParseJSON(buf.Bytes())
	require.NoError(t, err)
	require.Equal(t, m.Spec(), again.Spec())

	compact, err := json.Marshal(m)
	require.NoError(t, err)
	var c bytes.Buffer
	require.NoError(t, json.Compact(&c, buf.Bytes()))
	require.Equal(t, string(compact), c.String(), "WriteJSON is MarshalJSON indented")
}

func TestSpecRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *topology.Machine
	}{
		{"design example", mustParse(t, designExampleTwoGPUs)},
		{"builder sample", mustBuild(t, sampleBuilder().AddL3(numa.CPURange(0, 3)).AddL3(numa.NewCPUSet(8)))},
		{"defaults", mustParse(t, `{"numaNodes": [{"id": 9, "socket": -1, "cpus": ""}, {"id": 4, "socket": -1, "cpus": "0-1"}]}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.m.Spec()
			data, err := json.Marshal(spec)
			require.NoError(t, err)
			m2, err := topology.ParseJSON(data)
			require.NoError(t, err)
			require.Equal(t, spec, m2.Spec())
			data2, err := json.Marshal(m2)
			require.NoError(t, err)
			require.Equal(t, string(data), string(data2))

			// Spec.Build gives the same machine without going through JSON.
			m3, err := spec.Build()
			require.NoError(t, err)
			require.Equal(t, spec, m3.Spec())
		})
	}
}

func mustParse(t testing.TB, s string) *topology.Machine {
	t.Helper()
	m, err := topology.ParseJSON([]byte(s))
	require.NoError(t, err)
	return m
}

// genSpec draws a valid Spec in the canonical form Machine.Spec writes:
// nodes by ascending ID (sparse), distances and NUMA sets always present,
// cores listed (all of them, by lowest CPU) only when some core has two CPUs,
// GPUs, devices and NVLinks sorted with every optional node spelled out.
func genSpec(t *rapid.T) topology.Spec {
	var s topology.Spec
	s.Name = rapid.SampledFrom([]string{"", "box", "dgx <α&β>"}).Draw(t, "name")

	n := rapid.IntRange(1, 8).Draw(t, "nodes")
	ids := rapid.SliceOfNDistinct(rapid.IntRange(0, 200), n, n, rapid.ID[int]).Draw(t, "ids")
	slices.Sort(ids)
	nodeCPUs := make([]numa.CPUSet, n)
	ncpu := rapid.IntRange(0, 48).Draw(t, "cpus")
	for c := range ncpu {
		if k := rapid.IntRange(-1, n-1).Draw(t, "cpu node"); k >= 0 { // -1 leaves a gap
			nodeCPUs[k].Add(c)
		}
	}
	sockets := rapid.Bool().Draw(t, "sockets")
	for i, id := range ids {
		ns := topology.NodeSpec{ID: ptrTo(id), Socket: ptrTo(topology.UnknownSocket), CPUs: ptrTo(nodeCPUs[i].String())}
		if sockets {
			ns.Socket = ptrTo(rapid.IntRange(-1, 2).Draw(t, "socket"))
		}
		ns.MemoryMiB = rapid.SampledFrom([]int64{0, 1024, 65536, 1 << 40}).Draw(t, "memory")
		s.NUMANodes = append(s.NUMANodes, ns)
	}

	s.Distances = make([][]int, n)
	random := rapid.Bool().Draw(t, "random distances")
	for i := range n {
		s.Distances[i] = make([]int, n)
		for j := range n {
			switch {
			case i == j:
				s.Distances[i][j] = 10
			case random:
				s.Distances[i][j] = rapid.IntRange(10, 255).Draw(t, "distance")
			default:
				s.Distances[i][j] = 20
			}
		}
	}

	// NUMA sets: a random partition, ordered by lowest node, IDs ascending.
	label := make([]int, n)
	for i := range label {
		label[i] = rapid.IntRange(0, n-1).Draw(t, "set")
	}
	seen := map[int]int{}
	for i, l := range label {
		if k, ok := seen[l]; ok {
			s.NUMASets[k] = append(s.NUMASets[k], ids[i])
			continue
		}
		seen[l] = len(s.NUMASets)
		s.NUMASets = append(s.NUMASets, []int{ids[i]})
	}

	// SMT: pair neighbouring CPUs of each node.
	var all numa.CPUSet
	for _, c := range nodeCPUs {
		all.UnionWith(c)
	}
	if rapid.Bool().Draw(t, "smt") {
		var cores []numa.CPUSet
		pairs := false
		for _, c := range nodeCPUs {
			list := c.List()
			for len(list) > 0 {
				if len(list) >= 2 && rapid.Bool().Draw(t, "pair") {
					cores = append(cores, numa.NewCPUSet(list[0], list[1]))
					list = list[2:]
					pairs = true
					continue
				}
				cores = append(cores, numa.NewCPUSet(list[0]))
				list = list[1:]
			}
		}
		if pairs {
			slices.SortFunc(cores, func(a, b numa.CPUSet) int { return a.Min() - b.Min() })
			for _, c := range cores {
				s.Cores = append(s.Cores, c.String())
			}
		}
	}
	if rapid.Bool().Draw(t, "l3") {
		for _, c := range nodeCPUs { // one L3 group per node with CPUs
			if !c.IsEmpty() {
				s.L3Groups = append(s.L3Groups, c.String())
			}
		}
		slices.SortFunc(s.L3Groups, func(a, b string) int {
			return numa.MustParseCPUSet(a).Min() - numa.MustParseCPUSet(b).Min()
		})
	}
	var reserved numa.CPUSet
	for c := range all.All() {
		if rapid.IntRange(0, 9).Draw(t, "reserve") == 0 {
			reserved.Add(c)
		}
	}
	s.ReservedCPUs = reserved.String()

	gpuNode := func(label string) *int {
		if rapid.IntRange(0, 3).Draw(t, label) == 0 {
			return ptrTo(int(topology.UnknownNode))
		}
		return ptrTo(rapid.SampledFrom(ids).Draw(t, label))
	}
	ng := rapid.IntRange(0, 8).Draw(t, "gpus")
	gpuIDs := rapid.SliceOfNDistinct(rapid.IntRange(0, 20), ng, ng, rapid.ID[int]).Draw(t, "gpu ids")
	slices.Sort(gpuIDs)
	for _, id := range gpuIDs {
		s.GPUs = append(s.GPUs, topology.GPUSpec{
			ID: ptrTo(id), NUMANode: gpuNode("gpu node"),
			BusID:      rapid.SampledFrom([]string{"", fmt.Sprintf("0000:%02x:00.0", id)}).Draw(t, "bus"),
			PCIeSwitch: rapid.SampledFrom([]string{"", "sw0", "sw1"}).Draw(t, "switch"),
			UUID:       rapid.SampledFrom([]string{"", fmt.Sprintf("GPU-%d", id)}).Draw(t, "uuid"),
			MemoryMiB:  rapid.SampledFrom([]int64{0, 40960, 81559}).Draw(t, "gpu memory"),
		})
	}
	for a := 0; a < len(gpuIDs); a++ {
		for b := a + 1; b < len(gpuIDs); b++ {
			if rapid.IntRange(0, 3).Draw(t, "nvlink") == 0 {
				s.NVLinks = append(s.NVLinks, []int{gpuIDs[a], gpuIDs[b], rapid.IntRange(1, 18).Draw(t, "links")})
			}
		}
	}
	for _, d := range []struct{ class, id string }{{"nvme", "nvme0"}, {"rdma", "mlx5_0"}, {"rdma", "mlx5_1"}} {
		if rapid.Bool().Draw(t, "device") {
			s.Devices = append(s.Devices, topology.DevSpec{ID: d.id, Class: d.class, NUMANode: gpuNode("device node"),
				PCIeSwitch: rapid.SampledFrom([]string{"", "sw0"}).Draw(t, "device switch")})
		}
	}
	return s
}

func ptrTo[T any](v T) *T { return &v }

func TestSpecRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := genSpec(t)
		data, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		m, err := topology.ParseJSON(data)
		if err != nil {
			t.Fatalf("ParseJSON(%s): %v", data, err)
		}
		got := m.Spec()
		out, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != string(data) {
			t.Fatalf("round trip changed the spec:\n in: %s\nout: %s", data, out)
		}
		require.Equal(t, spec, got)

		// Spot checks that the machine means what the spec says.
		for i, ns := range spec.NUMANodes {
			require.Equal(t, numa.NodeID(*ns.ID), m.NodeID(i))
			require.Equal(t, *ns.CPUs, m.NodeCPUs(i).String())
			for c := range m.NodeCPUs(i).All() {
				k, ok := m.CPUNode(c)
				require.True(t, ok)
				require.Equal(t, i, k)
			}
		}
		for _, g := range spec.GPUs {
			gpu, ok := m.GPU(*g.ID)
			require.True(t, ok)
			require.Equal(t, numa.NodeID(*g.NUMANode), gpu.NUMANode)
		}
		for _, l := range spec.NVLinks {
			require.Equal(t, l[2], m.NVLinkCount(l[1], l[0]))
		}
		var union numa.Mask
		for _, set := range m.NUMASets() {
			require.Zero(t, union&set, "sets are disjoint")
			union |= set
		}
		require.Equal(t, m.AllNodes(), union, "sets cover the nodes")
	})
}

// FuzzParseJSON: ParseJSON never panics, and what it accepts round-trips:
// the machine's Spec, marshalled and parsed again, gives an equal Spec.
// Run with go test -fuzz FuzzParseJSON ./topology.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		designExample,
		designExampleTwoGPUs,
		`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0-3"}]}`,
		`{"numaNodes": [{"id": 3, "socket": -1, "cpus": "0-1"}, {"id": 1, "socket": -1, "cpus": "2-3"}], "gpus": [{"numaNode": -1}, {"numaNode": 3}]}`,
		`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0-1"}, {"id": 7, "socket": -1, "cpus": ""}], "distances": [[10, 40], [40, 10]]}`,
		`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0-3"}], "cores": ["0,2", "1,3"], "l3Groups": ["0-3"], "reservedCPUs": "0"}`,
		`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "devices": [{"id": "d", "class": "rdma", "numaNode": -1}], "extra": [1]}`,
		`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "gpus": [{"numaNode": -1}, {"numaNode": -1}], "nvlinks": [[1, 0, 4]]}`,
		// bad
		``, `{`, `null`, `[]`, `{"numaNodes": []}`, `{"numaNodes": [{"cpus": "0"}]}`,
		`{"numaNodes": [{"id": 0}]}`, `{"numaNodes": [{"id": 0, "socket": -1, "cpus": "x"}]}`,
		`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}]} trailing`,
		`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "gpus": [{"numaNode": 4}]}`,
		`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "nvlinks": [[0]]}`,
		`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}, {"id": 0, "socket": -1, "cpus": "1"}]}`,
		`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "distances": [[0]]}`,
		`{"numaNodes": [{"id": 0, "socket": -1, "cpus": "0"}], "numaSets": [[]]}`,
		tooManyNodesJSON(),
		// strictness: unknown, miscased and repeated fields, invalid UTF-8,
		// missing socket and numaNode
		`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0", "memoryMB": 1}]}`,
		`{"NumaNodes": [{"id": 0, "socket": 0, "cpus": "0"}]}`,
		`{"numaNodes": [{"id": 0, "id": 1, "socket": 0, "cpus": "0"}]}`,
		"{\"name\": \"\xff\", \"numaNodes\": [{\"id\": 0, \"socket\": 0, \"cpus\": \"0\"}]}",
		`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0"}], "gpus": [{"numaNode": 0, "uuid": "\ud800"}]}`,
		`{"numaNodes": [{"id": 0, "cpus": "0"}]}`,
		`{"numaNodes": [{"id": 0, "socket": 0, "cpus": "0"}], "gpus": [{"id": 0}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := topology.ParseJSON(data)
		if err != nil {
			if m != nil {
				t.Fatalf("ParseJSON failed (%v) but returned a machine", err)
			}
			if !errors.Is(err, topology.ErrInvalid) && !errors.Is(err, topology.ErrTooManyNodes) &&
				!errors.Is(err, topology.ErrTooLarge) {
				t.Fatalf("error %v unwraps to none of ErrInvalid, ErrTooManyNodes, ErrTooLarge", err)
			}
			return
		}
		spec := m.Spec()
		out, err := json.Marshal(spec)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		m2, err := topology.ParseJSON(out)
		if err != nil {
			t.Fatalf("ParseJSON of its own output %s: %v", out, err)
		}
		out2, err := json.Marshal(m2.Spec())
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		if string(out) != string(out2) {
			t.Fatalf("round trip changed the spec:\n%s\n%s", out, out2)
		}
	})
}
