package devchoice

import "cmp"

// Rank is how good a choice of devices is. Its fields are the chooser's
// criteria, in the order they are compared, and this comment is the one
// place that order is stated ([Rank.Compare] follows it field by field):
//
//  1. Nodes: the fewest NUMA nodes holding the chosen devices (devices of
//     unknown NUMA node count as one more node);
//  2. Unknown: without devices of unknown NUMA node (0) before with (1);
//  3. Distance: the lowest sum of NUMA distances (SLIT) over the pairs of
//     those nodes, so two nodes of one socket before two of different
//     sockets (the unknown node is at 1000 from every node);
//  4. Unpaired: the fewest devices of the other classes that are not
//     paired with a device of the first class under the same PCIe switch
//     (GPUDirect RDMA: a NIC under its GPU's switch). Under each switch,
//     min(first-class devices, devices of the class) pairs are counted, so
//     two GPUs under two switches pair best with one NIC under each;
//  5. Switches: the fewest PCIe switches holding the chosen devices of
//     every class (the devices of one NUMA node whose switch is not
//     described count as under one switch of their own: nothing tells them
//     apart, so they also pair with each other);
//  6. NVLinks: the most NVLink links among the chosen GPUs (the sum over
//     pairs);
//  7. SwitchLeft: best fit: the fewest free devices (of the requested
//     classes) left in the chosen switches, then
//  8. NodeLeft: in the chosen NUMA nodes, so that whole free switches and
//     nodes stay whole for larger requests;
//
// and on a tie the lowest device indices: the first class's chosen indices
// in ascending order compared lexicographically, then the next class's.
type Rank struct {
	Nodes      int
	Unknown    int
	Distance   int
	Unpaired   int
	Switches   int
	NVLinks    int
	SwitchLeft int
	NodeLeft   int
}

// Compare returns a negative number when r is the better rank, a positive
// one when o is, and 0 when they are equal (the chooser then takes the
// lowest device indices).
func (r Rank) Compare(o Rank) int { return compareRanks(&r, &o) }

// compareRanks is Rank.Compare by pointers (for the chooser's hot loops):
// one criterion after the other, as Rank's doc comment lists them (a cmp.Or
// chain that stops at the first difference).
func compareRanks(r, o *Rank) int {
	switch {
	case r.Nodes != o.Nodes:
		return cmp.Compare(r.Nodes, o.Nodes)
	case r.Unknown != o.Unknown:
		return cmp.Compare(r.Unknown, o.Unknown)
	case r.Distance != o.Distance:
		return cmp.Compare(r.Distance, o.Distance)
	case r.Unpaired != o.Unpaired:
		return cmp.Compare(r.Unpaired, o.Unpaired)
	case r.Switches != o.Switches:
		return cmp.Compare(r.Switches, o.Switches)
	case r.NVLinks != o.NVLinks:
		return cmp.Compare(o.NVLinks, r.NVLinks) // more is better
	case r.SwitchLeft != o.SwitchLeft:
		return cmp.Compare(r.SwitchLeft, o.SwitchLeft)
	}
	return cmp.Compare(r.NodeLeft, o.NodeLeft)
}
