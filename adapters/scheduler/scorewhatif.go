package scheduler

// ScoreWhatIf is [PreparedPod.Score] on the node changed by w, as
// [PreparedPod.FilterWhatIf] and [PreparedPod.Decide] change it (pods
// removed and added, GPUs withheld): the node rated as the pod would be
// placed there, on a copy of its state. A scheduler that withholds some of
// a node's GPUs from a pod (WhatIf.WithholdGPU) scores the node with the
// same view its Filter decided on, so that a node whose offered GPUs
// cannot hold the pod aligned is not rated as if the whole machine were
// offered. A refusal is Filter's *[FilterError]; nothing in the cache
// changes.
func (pp *PreparedPod) ScoreWhatIf(node string, w WhatIf) (int, error) {
	ni, err := pp.c.node(node)
	if err != nil {
		return 0, err
	}
	ni.mu.RLock()
	s := pp.c.scratchLocked(ni, w)
	ni.mu.RUnlock()
	v := pp.c.evaluate(s, pp.pr, true, nil)
	if v.why != fits {
		return 0, pp.c.refusalError(ni.name, pp.pr, v)
	}
	return int(v.score), nil
}
