package kube_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/allocator"
	"github.com/numaplace/numaplace/policy"
	"github.com/numaplace/numaplace/topology"
)

// FuzzParsePod feeds arbitrary annotations and quantities to ParsePod: it
// never panics, every error is a *PodError wrapping ErrInvalidPod, and an
// accepted NUMA pod asks for something.
func FuzzParsePod(f *testing.F) {
	f.Add(specSNN, "", "required", "", "24", "24", "4")
	f.Add(specSNN, specSNN, "required", "", "4", "4", "0")
	f.Add(specSNN, specRestricted, "required", "", "4", "4", "0")
	f.Add(`{"numaTopologyPolicy":""}`, "", "true", "", "1500m", "1500m", "1")
	f.Add("", "", "", "", "250m", "", "")
	f.Add("", `{}`, "required", "{}", "1e3", "1k", "0.5")
	f.Add(`{`, `null`, "required", "", "-1", "x", "1e999999")
	f.Add(`{"numaTopologyPolicy":"Restricted","numaTopologyPolicy":"Restricted"}`, "", "required", "", "4", "4000m", "2")
	f.Add(`{"NumaTopologyPolicy":"Restricted"}`, `{"numaTopologyPolicy":"Restricted","x":1}`, "required", "", "+4", "4", "2.0")
	f.Add("{\"numaTopologyPolicy\":\"Restricted\xff\"}", "", "required", "", "4e0", "0.004k", "2000m")
	f.Add(`{"numaTopologyPolicy":null}`, `{}`, "required", "", "1Ki", "1024", "1e1")
	f.Fuzz(func(t *testing.T, alibaba, koord, cpusetScheduler, legacyGPU, cpuReq, cpuLim, gpus string) {
		ann := map[string]string{}
		for k, v := range map[string]string{kube.AnnotationSpecAlibaba: alibaba, kube.AnnotationSpecKoordinator: koord,
			kube.AnnotationCPUSetScheduler: cpusetScheduler, kube.DefaultLegacyGPUTopologyAnnotation: legacyGPU} {
			if v != "" {
				ann[k] = v
			}
		}
		c := kube.Container{Name: "c", Requests: map[string]string{}, Limits: map[string]string{}}
		if cpuReq != "" {
			c.Requests[kube.ResourceCPU] = cpuReq
		}
		if cpuLim != "" {
			c.Limits[kube.ResourceCPU] = cpuLim
		}
		if gpus != "" {
			c.Limits[kube.ResourceAliyunGPU] = gpus
		}
		p := &kube.Pod{Namespace: "ns", Name: "p", Annotations: ann, Containers: []kube.Container{c},
			InitContainers: []kube.InitContainer{{Container: c, RestartPolicyAlways: len(gpus)%2 == 1}}}
		for _, cfg := range []kube.Config{{}, {AcceptNvidiaGPU: true}} {
			r, err := kube.ParsePod(p, cfg)
			if err != nil {
				var pe *kube.PodError
				if !errors.As(err, &pe) || !errors.Is(err, kube.ErrInvalidPod) || pe.Reason == "" {
					t.Fatalf("error %v (%T) is not a *PodError wrapping ErrInvalidPod", err, err)
				}
				continue
			}
			for _, k := range []string{kube.AnnotationSpecAlibaba, kube.AnnotationSpecKoordinator} {
				// The strict read accepts only what policy.ParseSpec reads, and reads it the same.
				if v, ok := ann[k]; ok {
					if s, err := policy.ParseSpec([]byte(v)); err != nil || s != r.Spec {
						t.Fatalf("accepted %s %q as %v; policy.ParseSpec reads %v, %v", k, v, r.Spec, s, err)
					}
				}
			}
			if r.NUMA && r.CPUs == 0 && r.GPUs == 0 {
				t.Fatalf("accepted a NUMA pod asking for nothing: %+v", r)
			}
			if r.CPUs < 0 || r.GPUs < 0 || r.MilliCPU < 0 {
				t.Fatalf("negative amounts: %+v", r)
			}
			if r.NUMA && int64(r.CPUs)*1000 != r.MilliCPU {
				t.Fatalf("NUMA pod with a fraction of a CPU: %+v", r)
			}
		}
	})
}

// FuzzQuantity checks that the quantity parsers never panic and agree with
// each other.
func FuzzQuantity(f *testing.F) {
	for _, s := range []string{"24", "500m", "1.5", "4Gi", "1e3", "", "-1", "0x10", "1e999", "+.5", "7E"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		milli, errM := kube.ParseMilli(s)
		whole, errW := kube.ParseWhole(s)
		_, errB := kube.ParseMiB(s)
		for _, err := range []error{errM, errW, errB} {
			if err != nil && !errors.Is(err, kube.ErrQuantity) {
				t.Fatalf("%q: error %v does not wrap ErrQuantity", s, err)
			}
		}
		if errM == nil && milli < 0 {
			t.Fatalf("%q: negative %d", s, milli)
		}
		if errW == nil && errM == nil && whole*1000 != milli {
			t.Fatalf("%q: whole %d but milli %d", s, whole, milli)
		}
	})
}

// FuzzParseDecision checks that ParseDecision, Allocation, Claim and
// KoordinatorAnnotations never panic on any annotation value, that errors
// wrap ErrInvalidDecision, and that an accepted decision survives String and
// ParseDecision.
func FuzzParseDecision(f *testing.F) {
	for _, s := range []string{
		`{"policy":"SingleNUMANode","cpuset":"0-23","numaNodes":[0],"gpus":[{"id":0,"uuid":"GPU-1"}],"memoryMiB":{"0":0}}`,
		`{"policy":"Restricted","exclusive":"Preferred","cpuset":"0-3,112-115","numaNodes":[0,1],"gpus":[{"id":0},{"id":7}],"memoryMiB":{"0":10,"1":20}}`,
		`{"cpuset":"","devices":{"rdma":["mlx5_0"]}}`,
		`{"cpuset":"","devices":{"nvme":["x"]}}`,
		`{"cpuset":"0","gpus":[{"id":0},{"id":0}]}`,
		`{"cpuset":"0,0-1","memoryMiB":{"-1":1}}`,
		`{"cpuset":"65535"}`,
		`null`, `{}`, `[]`, `"x"`, ``, `{"cpuset":"0"}}`,
		`{"cpuset":"0","cpuset":"1"}`, `{"CPUSET":"0"}`, `{"cpuset":"0","numaNodes":[3],"memoryMiB":{"03":1}}`,
		`{"cpuset":"0","devices":{}}`, `{"cpuset":"0","gpus":null}`, `{"cpuset":"0","fullPCPUs":true,"exclusive":"Preferred"}`,
	} {
		f.Add(s)
	}
	m, err := topology.Preset("dgx-h100")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := kube.ParseDecision(s)
		if err != nil {
			if !errors.Is(err, kube.ErrInvalidDecision) {
				t.Fatalf("error %v does not wrap ErrInvalidDecision", err)
			}
			return
		}
		again, err := kube.ParseDecision(d.String())
		if err != nil {
			t.Fatalf("String of an accepted decision %q is refused: %v", d.String(), err)
		}
		if again.String() != d.String() || !reflect.DeepEqual(d, again) {
			t.Fatalf("round trip changed %q (%#v) into %q (%#v)", d.String(), d, again.String(), again)
		}
		_, _ = d.KoordinatorAnnotations(m)
		a, err := d.Allocation(m, "x")
		if err != nil {
			if !errors.Is(err, kube.ErrInvalidDecision) {
				t.Fatalf("Allocation error %v does not wrap ErrInvalidDecision", err)
			}
			return
		}
		s2 := allocator.MustNew(m, allocator.Options{})
		if c, err := s2.Claim(a); err == nil {
			if err := s2.Release(c.ID); err != nil {
				t.Fatalf("release of a claimed allocation: %v", err)
			}
		}
	})
}
