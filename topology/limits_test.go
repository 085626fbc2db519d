package topology_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/topology"
)

func oneNode() *topology.Builder {
	return topology.NewBuilder("one").AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, 3)})
}

// Descriptions above the caps are refused with a *LimitError naming what
// there is too much of; at the caps they build.
func TestBuildLimits(t *testing.T) {
	gpus := func(n int) *topology.Builder {
		b := oneNode()
		for g := range n {
			b.AddGPU(topology.GPU{ID: g, NUMANode: 0})
		}
		return b
	}
	mixed := func(n int) *topology.Builder { // half GPUs, half RDMA devices
		b := gpus(n / 2)
		for d := range n - n/2 {
			b.AddDevice(topology.Device{ID: strconv.Itoa(d), Class: "rdma", NUMANode: 0})
		}
		return b
	}
	links := func(n int) *topology.Builder {
		b := oneNode()
		for l := range n {
			b.AddNVLink(l, l+1, 1)
		}
		return b
	}
	cpus := func(n int) *topology.Builder {
		return topology.NewBuilder("cpus").
			AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.CPURange(0, n/2-1)}).
			AddNode(topology.Node{ID: 1, Socket: 1, CPUs: numa.CPURange(n/2, n-1)})
	}
	cores := func(n int) *topology.Builder {
		b := oneNode()
		for range n {
			b.AddCore(numa.NewCPUSet(0))
		}
		return b
	}
	for _, c := range []struct {
		name  string
		b     func(int) *topology.Builder
		limit int
		what  string
	}{
		{"gpus", gpus, topology.MaxDevices, "devices (GPUs and other devices)"},
		{"gpus and devices", mixed, topology.MaxDevices, "devices (GPUs and other devices)"},
		{"nvlinks", links, topology.MaxNVLinks, "NVLinks"},
		{"cpus", cpus, topology.MaxCPUs, "CPUs"},
		{"cores", cores, topology.MaxCPUs, "cores"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := c.b(c.limit + 1).Build()
			require.Nil(t, m)
			require.ErrorIs(t, err, topology.ErrTooLarge)
			require.NotErrorIs(t, err, topology.ErrInvalid)
			var le *topology.LimitError
			require.ErrorAs(t, err, &le)
			require.Equal(t, topology.LimitError{What: c.what, Count: c.limit + 1, Limit: c.limit}, *le)
			require.Contains(t, err.Error(), fmt.Sprintf("%d %s, at most %d", c.limit+1, c.what, c.limit))
			if c.name != "cores" { // the cap's worth of cores on 4 CPUs overlap
				_, err = c.b(c.limit).Build()
				require.NoError(t, err)
			}
		})
	}
}

// Memory totals that would overflow an int64 are refused, naming the node
// that makes them overflow; the largest total that fits is accepted.
func TestBuildMemoryOverflow(t *testing.T) {
	two := func(a, b int64) *topology.Builder {
		return topology.NewBuilder("mem").
			AddNode(topology.Node{ID: 0, Socket: 0, CPUs: numa.NewCPUSet(0), MemoryMiB: a}).
			AddNode(topology.Node{ID: 1, Socket: 0, CPUs: numa.NewCPUSet(1), MemoryMiB: b})
	}
	_, err := two(math.MaxInt64/2, math.MaxInt64-math.MaxInt64/2).Build()
	require.NoError(t, err)
	_, err = two(math.MaxInt64/2+1, math.MaxInt64-math.MaxInt64/2).Build()
	require.ErrorIs(t, err, topology.ErrInvalid)
	var ve *topology.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "numaNodes[1] (id 1)", ve.Item)
	require.Contains(t, err.Error(), "overflow")
	_, err = two(math.MaxInt64, math.MaxInt64).Build()
	require.ErrorContains(t, err, "overflow")
}

// Duplicates are found in O(n log n) on large lists and reported as before:
// the first item (in input order) that repeats an earlier one, naming that
// earlier one; a per-item error before a duplicate wins, and one after it
// loses.
func TestBuildDuplicatesLarge(t *testing.T) {
	const n = 60_000
	b := oneNode()
	for g := range n {
		b.AddGPU(topology.GPU{ID: g, NUMANode: 0})
		b.AddDevice(topology.Device{ID: "d" + strconv.Itoa(g), Class: "rdma", NUMANode: 0})
		b.AddNVLink(g, g+1, 1)
	}
	_, err := b.Build()
	require.NoError(t, err)

	dupGPU := oneNode()
	for g := range n {
		dupGPU.AddGPU(topology.GPU{ID: g % (n - 5), NUMANode: 0})
	}
	_, err = dupGPU.Build()
	require.ErrorContains(t, err, fmt.Sprintf("gpus[%d] (id 0): GPU ID 0 is also used by gpus[0]", n-5))

	dupDev := oneNode()
	for d := range n {
		dupDev.AddDevice(topology.Device{ID: "d" + strconv.Itoa(d%(n-1)), Class: "rdma", NUMANode: 0})
	}
	_, err = dupDev.Build()
	require.ErrorContains(t, err, fmt.Sprintf(`devices[%d] (id "d0"): device rdma/d0 is also listed as devices[0]`, n-1))

	dupLink := oneNode()
	for l := range n {
		dupLink.AddNVLink(l, l+1, 1)
	}
	dupLink.AddNVLink(n/2+1, n/2, 3) // the reverse of an earlier pair
	_, err = dupLink.Build()
	require.ErrorContains(t, err, fmt.Sprintf("nvlinks[%d] (%d-%d): the pair is listed twice", n, n/2+1, n/2))

	// Order: GPU 1 repeated at index 3, a GPU on a missing node at 5.
	order := oneNode()
	for _, g := range []topology.GPU{{ID: 0}, {ID: 1}, {ID: 2}, {ID: 1}, {ID: 4}, {ID: 5, NUMANode: 9}} {
		order.AddGPU(g)
	}
	_, err = order.Build()
	require.ErrorContains(t, err, "gpus[3] (id 1): GPU ID 1 is also used by gpus[1]")
	order = oneNode()
	for _, g := range []topology.GPU{{ID: 0}, {ID: 1, NUMANode: 9}, {ID: 0}} {
		order.AddGPU(g)
	}
	_, err = order.Build()
	require.ErrorContains(t, err, "gpus[1] (id 1): NUMA node 9 does not exist")
}

// NVLinkCount finds a pair among many in either order.
func TestNVLinkCountLarge(t *testing.T) {
	b := oneNode()
	for l := range 10_000 {
		b.AddNVLink(l+1, l, 1+l%7)
	}
	m := mustBuild(t, b)
	require.Equal(t, 1+4321%7, m.NVLinkCount(4321, 4322))
	require.Equal(t, 1+4321%7, m.NVLinkCount(4322, 4321))
	require.Zero(t, m.NVLinkCount(4321, 4323))
	require.Zero(t, m.NVLinkCount(-1, 0))
}

// Names and IDs must be valid UTF-8, as the JSON format can carry only
// those: a machine built by hand means what its JSON means.
func TestBuildInvalidUTF8(t *testing.T) {
	for _, c := range []struct {
		b    *topology.Builder
		item string
	}{
		{topology.NewBuilder("a\xff").AddNode(topology.Node{ID: 0, CPUs: numa.NewCPUSet(0)}), "name"},
		{oneNode().AddGPU(topology.GPU{ID: 2, NUMANode: 0, UUID: "GPU-\xc3"}), "gpus[0] (id 2)"},
		{oneNode().AddDevice(topology.Device{ID: "mlx5_\xff", Class: "rdma", NUMANode: 0}), `devices[0] (id "mlx5_\xff")`},
		{oneNode().AddDevice(topology.Device{ID: "d", Class: "rd\xffma", NUMANode: 0}), `devices[0] (id "d")`},
	} {
		_, err := c.b.Build()
		require.ErrorIs(t, err, topology.ErrInvalid)
		var ve *topology.ValidationError
		require.ErrorAs(t, err, &ve)
		require.Equal(t, c.item, ve.Item)
		require.Contains(t, err.Error(), "is not valid UTF-8")
	}
}

// Errors that list CPUs from outside stay short.
func TestBuildErrorsShort(t *testing.T) {
	var sparse numa.CPUSet
	for c := 100; c < 40_000; c += 2 {
		sparse.Add(c)
	}
	for _, b := range []*topology.Builder{oneNode().AddCore(sparse), oneNode().AddL3(sparse), oneNode().SetReservedCPUs(sparse)} {
		_, err := b.Build()
		require.ErrorIs(t, err, topology.ErrInvalid)
		require.Less(t, len(err.Error()), 400, err.Error())
		require.Contains(t, err.Error(), "... (")
	}
}

// TestParseJSONLimitsWhileReading: a JSON description over a cap is
// refused while it is read, before its lists are decoded: the memory spent
// on refusing it stays a fraction of the input, whatever list is over, and
// the error is the typed one (ErrTooLarge or ErrTooManyNodes, "at least").
func TestParseJSONLimitsWhileReading(t *testing.T) {
	list := func(field, item string, n int) []byte {
		var sb strings.Builder
		sb.WriteString(`{"numaNodes":[{"id":0,"socket":0,"cpus":"0"}],"` + field + `":[`)
		for i := range n {
			if i > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(strings.ReplaceAll(item, "#", strconv.Itoa(i)))
		}
		sb.WriteString(`]}`)
		return []byte(sb.String())
	}
	nodes := func(n int) []byte {
		var sb strings.Builder
		sb.WriteString(`{"numaNodes":[`)
		for i := range n {
			if i > 0 {
				sb.WriteString(",")
			}
			fmt.Fprintf(&sb, `{"id":%d,"socket":0,"cpus":""}`, i)
		}
		sb.WriteString(`]}`)
		return []byte(sb.String())
	}
	mixed := append(list("gpus", `{"numaNode":0}`, topology.MaxDevices/2)[:0:0], list("gpus", `{"numaNode":0}`, topology.MaxDevices/2)...)
	mixed = append(mixed[:len(mixed)-1], []byte(`,"devices":`)...)
	devs := list("devices", `{"id":"d#","class":"rdma","numaNode":0}`, topology.MaxDevices/2+1)
	mixed = append(mixed, devs[strings.Index(string(devs), `"devices":`)+len(`"devices":`):]...)
	for _, c := range []struct {
		name string
		data []byte
		want error
		what string
	}{
		{"GPUs", list("gpus", `{"numaNode":0}`, 600000), topology.ErrTooLarge, "devices"},
		{"GPUs and devices", mixed, topology.ErrTooLarge, "devices"},
		{"NVLinks", list("nvlinks", `[0,1,1]`, topology.MaxNVLinks+50000), topology.ErrTooLarge, "NVLinks"},
		{"cores", list("cores", `"0"`, topology.MaxCPUs+50000), topology.ErrTooLarge, "cores"},
		{"L3 groups", list("l3Groups", `"0"`, topology.MaxCPUs+50000), topology.ErrTooLarge, "L3 groups"},
		{"NUMA nodes", nodes(100000), topology.ErrTooManyNodes, "NUMA nodes"},
		{"distance rows", list("distances", `[10]`, 100000), topology.ErrTooManyNodes, "NUMA nodes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := topology.ParseJSON(c.data)
			runtime.ReadMemStats(&after)
			require.ErrorIs(t, err, c.want)
			require.Contains(t, err.Error(), "at least")
			require.Contains(t, err.Error(), c.what)
			spent := after.TotalAlloc - before.TotalAlloc
			require.Less(t, spent, uint64(len(c.data)), "refusing %d bytes of JSON allocated %d bytes: the cap is not checked while reading", len(c.data), spent)
			t.Logf("refusing %d bytes of JSON allocated %d bytes", len(c.data), spent)
		})
	}
	// At the caps the description is read (the Builder checks the rest).
	_, err := topology.ParseJSON(list("gpus", `{"numaNode":0}`, 1000))
	require.NoError(t, err)
}

// TestReadJSONBounded: ReadJSON reads at most MaxJSONBytes, and
// ReadJSONFile only regular files, so /dev/zero, a FIFO or an endless
// stream is refused instead of read without end.
func TestReadJSONBounded(t *testing.T) {
	_, err := topology.ReadJSON(endless{})
	require.ErrorIs(t, err, topology.ErrTooLarge)
	require.Contains(t, err.Error(), "MaxJSONBytes")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	zero := filepath.Join(dir, "zero")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	for _, p := range []string{fifo, zero, dir} {
		_, err := topology.ReadJSONFile(p)
		require.Error(t, err, p)
		require.Contains(t, err.Error(), p)
		require.Contains(t, err.Error(), "not a regular file")
	}
	good := filepath.Join(dir, "m.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"numaNodes":[{"id":3,"socket":0,"cpus":"0-1"}]}`), 0o600))
	m, err := topology.ReadJSONFile(good)
	require.NoError(t, err)
	require.Equal(t, 2, m.NumCPUs())
	require.NoError(t, os.WriteFile(good, []byte(`{"numaNodes":[]`), 0o600))
	_, err = topology.ReadJSONFile(good)
	require.ErrorIs(t, err, topology.ErrInvalid)
	require.Contains(t, err.Error(), good)
}

// endless is a reader of spaces without end.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// TestNilMachineAndBuilder: a nil *Machine, *Builder or *Spec is an error
// (or an empty answer), never a panic, where a caller can reach it.
func TestNilMachineAndBuilder(t *testing.T) {
	var m *topology.Machine
	require.Equal(t, "", m.Name())
	require.Zero(t, m.NumNodes()+m.NumCPUs()+m.NumGPUs()+m.NumCores())
	require.ErrorIs(t, m.WriteJSON(&strings.Builder{}), topology.ErrInvalid)
	_, err := m.MarshalJSON()
	require.ErrorIs(t, err, topology.ErrInvalid)
	require.ErrorIs(t, m.Picture(&strings.Builder{}, nil), topology.ErrInvalid)
	require.Equal(t, topology.Spec{}, m.Spec())
	var b *topology.Builder
	_, err = b.Build()
	require.ErrorIs(t, err, topology.ErrInvalid)
	var s *topology.Spec
	_, err = s.Build()
	require.ErrorIs(t, err, topology.ErrInvalid)
	good, err := oneNode().Build()
	require.NoError(t, err)
	require.ErrorIs(t, good.Picture(nil, nil), topology.ErrInvalid)
	for _, e := range []error{(*topology.ValidationError)(nil), (*topology.LimitError)(nil), (*topology.TooManyNodesError)(nil)} {
		require.Equal(t, "<nil>", e.Error(), "%T", e)
	}
}
