package numaplace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/numaplace/numaplace/adapters/scheduler"
)

var _ fwk.PostFilterPlugin = (*Plugin)(nil)

// PostFilter runs when no node takes the pod (after DefaultPreemption,
// when it found nothing to evict). kube-scheduler stops at a node's first
// refusal, so a node that another plugin refused ("Insufficient
// aliyun.com/gpu") never shows numaplace's reason, even where its machine
// can never hold the pod: PostFilter asks, for the pods numaplace places,
// each such node whether its machine could hold the pod even empty, and
// returns Unschedulable with the never-fit reasons it finds, counted by
// node ("numaplace: 2 node(s) refused by other plugins can never hold the
// pod either: no NUMA node can hold 4 GPUs on this machine"), which
// kube-scheduler adds to the pod's message. It never makes a pod
// schedulable.
func (pl *Plugin) PostFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	s, err := pl.podState(state, pod)
	if err != nil || !s.holdsAllocation() || pl.handle == nil || pl.handle.SnapshotSharedLister() == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	counts := map[string]int{}
	for _, ni := range nodes {
		n := ni.Node()
		if n == nil {
			continue
		}
		st := statuses.Get(n.Name)
		if st == nil || st.IsSuccess() || st.Plugin() == Name {
			continue // numaplace's own reason is in the message already
		}
		var fe *scheduler.FilterError
		if err := s.prepared.Filter(n.Name); errors.As(err, &fe) && fe.Never {
			for _, r := range fe.Reasons {
				counts[r]++
			}
		}
	}
	if len(counts) == 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	reasons := make([]string, 0, len(counts))
	for _, r := range slices.Sorted(maps.Keys(counts)) {
		reasons = append(reasons, fmt.Sprintf("%s%d node(s) refused by other plugins can never hold the pod either: %s", Prefix, counts[r], r))
	}
	return nil, fwk.NewStatus(fwk.Unschedulable, reasons...)
}
