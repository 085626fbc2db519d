package reporter_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/plugins/agent/reporter"
	"github.com/numaplace/numaplace/topology"
)

// printer is a Writer that prints what it would write and stops after the
// first report.
type printer struct{ done chan struct{} }

func (p printer) Annotate(_ context.Context, node string, ann map[string]string) (string, error) {
	fmt.Println("annotate node", node, "with", slices.Sorted(func(yield func(string) bool) {
		for k := range ann {
			if !yield(k) {
				return
			}
		}
	}))
	return "uid-1", nil
}

func (p printer) ApplyNRT(_ context.Context, r *kube.NodeResourceTopology) error {
	fmt.Println("apply NodeResourceTopology", r.Metadata.Name, "owned by", r.Metadata.OwnerReferences[0].Kind, r.Metadata.OwnerReferences[0].UID)
	for _, z := range r.Zones {
		var res []string
		for _, x := range z.Resources {
			res = append(res, fmt.Sprintf("%s %s/%s/%s", x.Name, x.Capacity, x.Allocatable, x.Available))
		}
		fmt.Println(" ", z.Name, strings.Join(res, ", "))
	}
	fp, _ := r.Attribute(kube.NRTAttributePodFingerprint)
	fmt.Println("  fingerprint", fp)
	close(p.done)
	return nil
}

// The reporter of a DGX H100 node publishes its annotation and its
// NodeResourceTopology (capacity/allocatable/available per NUMA node).
func ExampleReporter() {
	m, _ := topology.Preset("dgx-h100")
	node, _ := kubelet.Open(m, "", kubelet.NodeOptions{})
	w := printer{done: make(chan struct{})}
	r, _ := reporter.New(node, w, reporter.Options{NodeName: "gpu-1", Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = r.Run(ctx) }()
	<-w.done
	cancel()
	// Output:
	// annotate node gpu-1 with [numaplace.io/topology]
	// apply NodeResourceTopology gpu-1 owned by Node uid-1
	//   node-0 cpu 112/112/112, aliyun.com/gpu 4/4/4, memory 1048576Mi/1048576Mi/1048576Mi
	//   node-1 cpu 112/112/112, aliyun.com/gpu 4/4/4, memory 1048576Mi/1048576Mi/1048576Mi
	//   fingerprint pfp0v001ef46db3751d8e999
}
