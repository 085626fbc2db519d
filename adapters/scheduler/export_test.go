package scheduler

import "reflect"

// UngroupedScore is PreparedPod.Score judged on the node alone: no group's
// verdict is read or kept (the answer every grouped verdict must equal).
func UngroupedScore(pp *PreparedPod, node string) (int, error) {
	ni, err := pp.c.node(node)
	if err != nil {
		return 0, err
	}
	v := pp.c.evaluate(ni, pp.pr, true, nil)
	if v.why != fits {
		return 0, pp.c.refusalError(ni.name, pp.pr, v)
	}
	return int(v.score), nil
}

// GroupCount returns the number of node groups the cache holds.
func GroupCount(c *Cache) int { return c.groupCount() }

// GroupKeyOfAllocation is how the group key writes one allocation.
var GroupKeyOfAllocation = allocationKey

// TotalsFields are the fields of a node's totals, which the group key
// writes one by one.
var TotalsFields = func() []string {
	var out []string
	for f := range reflect.TypeFor[totals]().Fields() {
		out = append(out, f.Name)
	}
	return out
}()

// PreBindLater is PreBind of the pod with the given key cut in two, as a
// concurrent change may cut it: the pod's record is read now, and the
// returned function reads its annotations under the node's lock later.
func PreBindLater(c *Cache, key string) func() (map[string]string, error) {
	c.podsMu.Lock()
	pi := c.pods[key]
	c.podsMu.Unlock()
	return func() (map[string]string, error) { return c.annotations(pi) }
}
