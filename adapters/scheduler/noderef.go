package scheduler

// NodeRef is a handle to the cache's record of one node, for a caller that
// filters and scores many pods on the same nodes (a scheduler plugin, say):
// [PreparedPod.FilterRef] and [PreparedPod.ScoreRef] through it answer as
// [PreparedPod.Filter] and [PreparedPod.Score] of the node's name, without
// looking the name up. A handle stays good while its node is in the cache;
// once the node is removed, a call through it looks the name up again (and
// finds the node added again under that name, if it was). The zero NodeRef
// refers to no node.
type NodeRef struct {
	n *nodeInfo
}

// Ref returns the handle of the node ([ErrUnknownNode] when the cache has
// no node of that name).
func (c *Cache) Ref(node string) (NodeRef, error) {
	ni, err := c.node(node)
	if err != nil {
		return NodeRef{}, err
	}
	return NodeRef{n: ni}, nil
}

// Node returns the name of the node r refers to ("" for the zero NodeRef).
func (r NodeRef) Node() string {
	if r.n == nil {
		return ""
	}
	return r.n.name
}

// Current reports whether r's node is still in the cache as r has it: false
// once the node has been removed (a node added again under its name is
// another record, which [Cache.Ref] returns), and for the zero NodeRef.
func (r NodeRef) Current() bool { return r.n != nil && !r.n.gone.Load() }

// FilterRef is [PreparedPod.Filter] of the node r refers to.
func (pp *PreparedPod) FilterRef(r NodeRef) error {
	if !r.Current() {
		return pp.Filter(r.Node())
	}
	return pp.filterOn(r.n)
}

// ScoreRef is [PreparedPod.Score] of the node r refers to.
func (pp *PreparedPod) ScoreRef(r NodeRef) (int, error) {
	if !r.Current() {
		return pp.Score(r.Node())
	}
	return pp.scoreOn(r.n)
}
