package scheduler

import (
	"testing"

	"github.com/numaplace/numaplace/adapters/kube"
)

// TestClassify: pods asking for the same (request and the amounts of kinds
// of the caller's own) share a request class, marked repeated from the
// second; any difference, the amounts alone included, is another class;
// classes forgotten when the memo is full are numbered afresh, never
// reusing a number.
func TestClassify(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	req := kube.PodRequest{NUMA: true, CPUs: 4, MilliCPU: 4000, GPUs: 1}
	classOf := func(r kube.PodRequest, amounts string) *podReq {
		pr := &podReq{PodRequest: r}
		pr.sh.amounts = amounts
		c.classify(pr)
		return pr
	}
	a, b := classOf(req, ""), classOf(req, "")
	if a.class == 0 || a.class != b.class || a.repeated || !b.repeated {
		t.Fatalf("the same request: classes %d and %d, repeated %v and %v", a.class, b.class, a.repeated, b.repeated)
	}
	if h := classOf(req, `"hugepages-1Gi"=2;`); h.class == a.class || h.repeated {
		t.Fatalf("other amounts: class %d (the request's is %d), repeated %v", h.class, a.class, h.repeated)
	}
	other := req
	other.MemoryMiB = 1
	if m := classOf(other, ""); m.class == a.class {
		t.Fatalf("another memory request has the request's class %d", a.class)
	}
	seen := map[uint64]bool{a.class: true}
	for i := range maxReqClasses + 10 {
		r := req
		r.CPUs = 100 + i
		pr := classOf(r, "")
		if seen[pr.class] {
			t.Fatalf("class number %d given twice", pr.class)
		}
		seen[pr.class] = true
	}
	if again := classOf(req, ""); again.class == a.class || seen[again.class] {
		t.Fatalf("a forgotten class came back as %d (was %d)", again.class, a.class)
	}
}
