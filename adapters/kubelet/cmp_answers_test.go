package kubelet

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/numaplace/numaplace/topology"
)

func TestCompareAnswers(t *testing.T) {
	got := preferredCases(t)
	f, _ := os.Open("testdata/preferred_answers.txt")
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		want = append(want, sc.Text())
	}
	machines := map[string]*topology.Machine{}
	for _, n := range []string{"dgx-h100", "dgx-a100", "xeon-2s-snc2-8gpu", "numa64"} {
		machines[n] = preset(t, n)
	}
	machines["gpu16"] = machine16(t)
	machines["gpu16-worst"] = machine16Worst(t)
	better, worse, ids := 0, 0, 0
	parse := func(s string) []int {
		var out []int
		for _, x := range strings.Split(s, ",") {
			if x == "" {
				continue
			}
			v, _ := strconv.Atoi(x)
			out = append(out, v)
		}
		return out
	}
	for i := range want {
		if want[i] == got[i] {
			continue
		}
		name := strings.Fields(want[i])[0]
		m := machines[name]
		if m == nil {
			t.Logf("line %d machine %s not rebuilt here", i+1, name)
			continue
		}
		avail := parse(strings.TrimPrefix(strings.Fields(want[i])[1], "avail="))
		old := parse(strings.Fields(want[i])[5])
		nw := parse(strings.Fields(got[i])[5])
		ko, kn := dpQuality(m, avail, old), dpQuality(m, avail, nw)
		c := refCompare(kn, ko)
		switch {
		case c < 0:
			better++
		case c > 0:
			worse++
		default:
			ids++
			if slices.Compare(nw, old) > 0 {
				t.Logf("line %d: equal rank, higher ids", i+1)
			}
		}
		t.Logf("line %d %s: old %v %+v new %v %+v cmp %d", i+1, name, old, ko, nw, kn, c)
	}
	t.Logf("better %d worse %d equal-rank %d", better, worse, ids)
}
