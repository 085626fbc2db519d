package benchmarks

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/adapters/scheduler"
	numaplacetm "github.com/numaplace/numaplace/adapters/topologymanager"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// The hot paths of every package of the core module in one place, so that
// `go test -run '^$' -bench Hot ./...` here measures numa, topology,
// allocator and the adapters side by side (each package also has its own,
// more detailed benchmarks next to it).

var sinkInt int

func BenchmarkHotNuma(b *testing.B) {
	a, c := numa.MustParseCPUSet("0-55,112-167"), numa.MustParseCPUSet("28-83,140-195")
	m := numa.FirstN(64)
	b.Run("Mask/Subsets64choose2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			for s := range m.Subsets(2) {
				n += int(s & 1)
			}
			sinkInt = n
		}
	})
	b.Run("CPUSet/IntersectionCount", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkInt = a.IntersectionCount(c)
		}
	})
	b.Run("CPUSet/Parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, _ := numa.ParseCPUSet("0-55,112-167")
			sinkInt = s.Size()
		}
	})
}

func BenchmarkHotTopology(b *testing.B) {
	m, err := topology.Preset("dgx-a100")
	if err != nil {
		b.Fatal(err)
	}
	data, err := m.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ParseJSON/dgx-a100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := topology.ParseJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func halfFullState(b *testing.B, preset string) (*topology.Machine, *allocator.State) {
	b.Helper()
	m, err := topology.Preset(preset)
	if err != nil {
		b.Fatal(err)
	}
	s := allocator.MustNew(m, allocator.Options{})
	for i := 0; i < m.NumGPUs()/2; i++ {
		r := allocator.Request{ID: fmt.Sprintf("fill-%d", i), CPUs: 8, GPUs: 1, Policy: policy.SingleNUMANode}
		if _, err := s.Allocate(&r); err != nil {
			b.Fatal(err)
		}
	}
	return m, s
}

func BenchmarkHotAllocator(b *testing.B) {
	for _, preset := range []string{"dgx-h100", "dgx-a100", "numa64"} {
		_, s := halfFullState(b, preset)
		r := allocator.Request{ID: "bench", CPUs: 24, GPUs: 2, Policy: policy.SingleNUMANode}
		if preset == "numa64" {
			r.CPUs = 12 // 16 CPUs per NUMA node there
		}
		b.Run("Fit/"+preset, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = s.Fit(&r)
			}
		})
		b.Run("AllocateRelease/"+preset, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Allocate(&r); err != nil {
					b.Fatal(err)
				}
				_ = s.Release(r.ID)
			}
		})
	}
}

func BenchmarkHotAdapters(b *testing.B) {
	optIn := map[string]string{kube.DefaultOptInLabel: kube.DefaultOptInValue}
	c, err := scheduler.New(scheduler.Config{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		preset := []string{"dgx-h100", "dgx-a100"}[i%2]
		m, _ := topology.Preset(preset)
		if err := c.AddNode(scheduler.Node{Name: "n" + strconv.Itoa(i), Labels: optIn, Machine: m}); err != nil {
			b.Fatal(err)
		}
	}
	res := map[string]string{kube.ResourceCPU: "24", kube.ResourceAliyunGPU: "2"}
	pod := &kube.Pod{Namespace: "default", Name: "bench", Annotations: map[string]string{
		kube.AnnotationSpecAlibaba:     `{"numaTopologyPolicy":"SingleNUMANode"}`,
		kube.AnnotationCPUSetScheduler: "required",
	}, Containers: []kube.Container{{Name: "main", Requests: res, Limits: res}}}
	b.Run("scheduler/ScheduleOne/nodes200", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.ScheduleOne(pod); err != nil {
				b.Fatal(err)
			}
			if err := c.Unreserve(pod); err != nil {
				b.Fatal(err)
			}
		}
	})
	m, st := halfFullState(b, "dgx-a100")
	r := allocator.Request{CPUs: 24, GPUs: 2}
	b.Run("kubelet/Predict/dgx-a100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := numaplacetm.Predict(numaplacetm.PolicySingleNUMANode, numaplacetm.PredictOptions{}, m, st, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	node, err := kubelet.Open(m, "", kubelet.NodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("kubelet/GetPreferredAllocation/dgx-a100", func(b *testing.B) {
		avail := []string{"0", "1", "2", "3", "4", "5", "6", "7"}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := node.GetPreferredAllocation(avail, nil, 4); err != nil {
				b.Fatal(err)
			}
		}
	})
}
