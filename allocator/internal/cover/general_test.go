package cover

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/numaplace/numaplace/allocator/internal/general"
	"github.com/numaplace/numaplace/numa"
)

// TestGeneralPathAgrees is the package's differential of its shortcuts
// (identical nodes answered by arithmetic in MinWidth and in the class
// search, the per-kind bound judged before the class search is
// prepared): on random problems of 2-40 nodes, often of identical nodes,
// every width's Exists and MinWidth give the same covers, the same
// answers and the same bound counts with the switch (general.On) off and
// on.
func TestGeneralPathAgrees(t *testing.T) {
	t.Cleanup(general.Set(false))
	rapid.Check(t, func(t *rapid.T) {
		c := blankProblem()
		k := rapid.IntRange(1, 3).Draw(t, "kinds")
		n := rapid.IntRange(2, 40).Draw(t, "nodes")
		maxVal := rapid.SampledFrom([]int64{1, 3, 40, 1 << 44}).Draw(t, "maxVal")
		c.loadRandom(t, k, n, func(int) int64 { return maxVal })
		if rapid.Bool().Draw(t, "identical") { // every node as node 0
			for r := 0; r < k; r++ {
				for i := 1; i < n; i++ {
					c.Amount[r][i] = c.Amount[r][0]
				}
			}
			c.Load(n)
		}
		pool := numa.FirstN(n)
		if rapid.Bool().Draw(t, "subpool") {
			pool &= numa.Mask(rapid.Uint64().Draw(t, "pool")) | 1
		}
		soft := rapid.Bool().Draw(t, "soft")
		type answer struct {
			m     numa.Mask
			ok    bool
			width int
			b     Bound
		}
		play := func(on bool) []answer {
			defer general.Set(on)()
			var s Search
			var out []answer
			for w := 1; w <= pool.Count(); w++ {
				b := Bound{Soft: soft}
				s.Begin(&b) // one decision per width
				m, ok := s.Exists(&c, pool, w)
				out = append(out, answer{m: m, ok: ok, b: b})
			}
			b := Bound{Soft: soft}
			s.Begin(&b)
			w, m := s.MinWidth(&c, pool)
			return append(out, answer{m: m, width: w, b: b})
		}
		fast, slow := play(false), play(true)
		for j := range fast {
			f, g := fast[j], slow[j]
			if f.m != g.m || f.ok != g.ok || f.width != g.width || f.b.Undecided != g.b.Undecided || f.b.Approx != g.b.Approx {
				t.Fatalf("answer %d (the last is MinWidth): shortcuts give %+v, the general path %+v", j, f, g)
			}
		}
	})
}
