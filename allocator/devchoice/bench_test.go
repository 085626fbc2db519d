package devchoice_test

import (
	"strconv"
	"testing"

	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/topology"
)

// BenchmarkChoose measures one choice of N GPUs on an empty dgx-a100.
func BenchmarkChoose(b *testing.B) {
	m, err := topology.Preset("dgx-a100")
	if err != nil {
		b.Fatal(err)
	}
	x, _ := devchoice.NewIndex(m)
	free := devchoice.NewSet(8)
	for i := range 8 {
		free.Add(i)
	}
	for _, n := range []int{1, 2, 4, 8} {
		b.Run("dgx-a100/gpus"+strconv.Itoa(n), func(b *testing.B) {
			c := x.NewChooser()
			req := &devchoice.Request{Nodes: m.AllNodes(), Unknown: true, Wants: []devchoice.Want{{Class: 0, Count: n, Free: free}}}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Choose(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
