package devchoice_test

import (
	"testing"

	"github.com/numaplace/numaplace/allocator/devchoice"
	"github.com/numaplace/numaplace/topology"
)

// TestChooseAllocatesNothingWarm: what Choose's and ChooseWord's docs say,
// that once a Chooser's working memory has grown to the requests it is
// given they allocate nothing, on every preset with GPUs and every count of
// its free GPUs, each request warmed once first.
func TestChooseAllocatesNothingWarm(t *testing.T) {
	for _, name := range topology.PresetNames() {
		m, err := topology.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		n := m.NumGPUs()
		if n == 0 || n > 64 {
			continue
		}
		x, err := devchoice.NewIndex(m)
		if err != nil {
			t.Fatal(err)
		}
		free := devchoice.NewSet(n)
		var word uint64
		for i := 0; i < n; i += 1 + i%2 { // not all free: 0, 1, 3, 4, 6, 7, ...
			free.Add(i)
			word |= 1 << i
		}
		c := x.NewChooser()
		for count := 1; count <= free.Len(); count++ {
			req := &devchoice.Request{Nodes: m.AllNodes(), Unknown: true, Wants: []devchoice.Want{{Class: 0, Count: count, Free: free}}}
			if _, err := c.Choose(req); err != nil {
				t.Fatalf("%s: Choose %d: %v", name, count, err)
			}
			if a := testing.AllocsPerRun(20, func() { _, _ = c.Choose(req) }); a != 0 {
				t.Errorf("%s: Choose of %d of %d free GPUs allocates %.1f times warm", name, count, free.Len(), a)
			}
			if _, err := c.ChooseWord(0, count, word, 0, m.AllNodes(), true); err != nil {
				t.Fatalf("%s: ChooseWord %d: %v", name, count, err)
			}
			if a := testing.AllocsPerRun(20, func() { _, _ = c.ChooseWord(0, count, word, 0, m.AllNodes(), true) }); a != 0 {
				t.Errorf("%s: ChooseWord of %d of %d free GPUs allocates %.1f times warm", name, count, free.Len(), a)
			}
		}
	}
}
