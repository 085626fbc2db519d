package devchoice

import "github.com/numaplace/numaplace/numa"

// LowFirst is the tie-break's constant (rank.go), for the reference.
const LowFirst = lowFirst

// WholeGroupsWord runs ChooseWord's decision over several whole groups
// alone (for count at least 2 devices of class 0 out of free, without
// must-include devices) and returns its choice, or false when it leaves
// the request to the search.
func WholeGroupsWord(c *Chooser, count int, free uint64, nodes numa.Mask, unknown bool) (uint64, bool) {
	c.startWord(0, count, free, 0, nodes, unknown)
	if !c.x.switchInGroup {
		return 0, false
	}
	c.wFree, c.wMust = free, 0
	if !c.wholeGroupsWord(int32(count), free&c.allowedWord(&c.x.classes[0])) {
		return 0, false
	}
	return c.bestWord, true
}

// ForcedGroupWord runs ChooseWord's one-forced-group decision alone (for
// count devices of class 0 out of free including must, must non-empty
// and within free) and returns its choice, or false when it leaves the
// request to the search (or to the errors).
func ForcedGroupWord(c *Chooser, count int, free, must uint64, nodes numa.Mask, unknown bool) (uint64, bool) {
	c.startWord(0, count, free, must, nodes, unknown)
	allowed := c.allowedWord(&c.x.classes[0])
	if !c.x.switchInGroup || must&^allowed != 0 || !c.forcedGroupWord(int32(count), free&allowed, must) {
		return 0, false
	}
	return c.bestWord, true
}
