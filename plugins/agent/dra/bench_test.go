package dra_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/devices"
	"github.com/numaplace/numaplace/plugins/agent/dra"
	"github.com/numaplace/numaplace/topology"
)

// cpuTime returns the CPU time the process has used (user and system, of
// every thread, the garbage collector's included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per operation since start as
// cpu-ns/op: unlike ns/op (wall time), it does not grow when other
// processes share the machine's cores.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkSlices measures what the driver does to publish a node's
// devices: building every device with its attributes from the machine
// (NewCatalog), the pool with one GPU unhealthy (Resources) and handing it
// to a publisher that keeps it in memory (the kubelet plugin helper's
// controller then writes it to the API server in the background: that is
// not measured). "republish" is what a health change costs: the catalog
// is kept, only the pool is built again.
func BenchmarkSlices(b *testing.B) {
	for _, name := range []string{"dgx-a100", "numa64"} {
		m, err := topology.Preset(name)
		if err != nil {
			b.Fatal(err)
		}
		inv := dra.Inventory{Machine: m, Pool: "node-a"}
		sick := map[string][]string{"gpu": {"1"}}
		pub := &fakePublisher{}
		ctx := context.Background()
		b.Run(name+"/build+publish", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b, cpuTime())
			for b.Loop() {
				c, err := dra.NewCatalog(inv)
				if err != nil {
					b.Fatal(err)
				}
				_ = pub.PublishResources(ctx, c.Resources(sick))
				pub.got = pub.got[:0]
			}
		})
		c, _ := dra.NewCatalog(inv)
		b.Run(name+"/republish", func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b, cpuTime())
			for b.Loop() {
				_ = pub.PublishResources(ctx, c.Resources(sick))
				pub.got = pub.got[:0]
			}
		})
	}
}

// BenchmarkPrepare measures PrepareResourceClaims of one claim of the 8
// GPUs of a dgx-a100 (stand-in device nodes in a temporary /dev): holding
// them in the node state and writing the CDI spec to a temporary directory.
// "cycle" is a prepare and an unprepare (a claim's life on the node),
// with the node state's checkpoint written (and fsynced) to a temporary
// file at each; "cycle/memory" the same with the state in memory only;
// "again" a repeated prepare of the prepared claim (the kubelet's retry).
func BenchmarkPrepare(b *testing.B) {
	m, err := topology.Preset("dgx-a100")
	if err != nil {
		b.Fatal(err)
	}
	dev := b.TempDir()
	proc := fstest.MapFS{}
	for _, g := range m.GPUs() {
		if err := unix.Mknod(filepath.Join(dev, "nvidia"+strconv.Itoa(g.ID)), unix.S_IFCHR|0o666, int(unix.Mkdev(195, uint32(g.ID)))); err != nil {
			b.Skipf("cannot make device nodes here (run as root): %v", err)
		}
	}
	_ = unix.Mknod(filepath.Join(dev, "nvidiactl"), unix.S_IFCHR|0o666, int(unix.Mkdev(195, 255)))
	gpus, err := devices.New(m, dev, proc)
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	for _, g := range m.GPUs() {
		names = append(names, "gpu-"+strconv.Itoa(g.ID))
	}
	c := claim("eight", names...)
	claims := []*resourceapi.ResourceClaim{c}
	ctx := context.Background()
	driver := func(b *testing.B, checkpoint string) *dra.Driver {
		node, err := kubelet.Open(m, checkpoint, kubelet.NodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		d, err := dra.New(node, gpus, nil, dra.Options{NodeName: "node-a", CDIRoot: filepath.Join(b.TempDir(), "cdi")})
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	prepare := func(b *testing.B, d *dra.Driver) {
		res, err := d.PrepareResourceClaims(ctx, claims)
		if err != nil || res[c.UID].Err != nil || len(res[c.UID].Devices) != 8 {
			b.Fatal(err, res[c.UID].Err)
		}
	}
	for _, tc := range []struct {
		name, checkpoint string
	}{{"cycle", filepath.Join(b.TempDir(), "checkpoint.json")}, {"cycle/memory", ""}} {
		b.Run("8-gpu/"+tc.name, func(b *testing.B) {
			d := driver(b, tc.checkpoint)
			b.ReportAllocs()
			defer reportCPU(b, cpuTime())
			for b.Loop() {
				prepare(b, d)
				if err := d.Unprepare(string(c.UID)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("8-gpu/again", func(b *testing.B) {
		d := driver(b, filepath.Join(b.TempDir(), "checkpoint.json"))
		prepare(b, d)
		b.ReportAllocs()
		defer reportCPU(b, cpuTime())
		for b.Loop() {
			prepare(b, d)
		}
	})
	_ = os.RemoveAll(dev)
}
