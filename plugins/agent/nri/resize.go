package nri

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/numa"
)

// Compile-time checks of the handlers of in-place resizes.
var (
	_ stub.UpdateContainerInterface = (*Plugin)(nil)
	_ stub.UpdatePodInterface       = (*Plugin)(nil)
)

// Resized is a pod whose exclusive CPUs an in-place resize changed: its new
// decision, for the pod's numaplace.io/allocation annotation.
type Resized struct {
	// Namespace, Name and UID identify the pod.
	Namespace, Name, UID string
	// Decision is the new numaplace.io/allocation value.
	Decision string
}

// sharesPerCPU is the kubelet's cpu.shares of one CPU (MilliCPUToShares of
// 1000).
const sharesPerCPU = 1024

// cpuCount returns the whole CPUs that CPU resources (a container's or a
// pod's, as the kubelet writes them) stand for: the CFS quota over its
// period when there is a quota, else the shares over 1024 (the kubelet's
// shares of a whole number of CPUs). ok is false when neither is set; an
// error says that they stand for a fraction of a CPU.
func cpuCount(c *api.LinuxCPU) (n int, ok bool, err error) {
	quota, period, shares := c.GetQuota().GetValue(), c.GetPeriod().GetValue(), c.GetShares().GetValue()
	switch {
	case quota > 0 && period > 0:
		if uint64(quota)%period != 0 {
			return 0, true, fmt.Errorf("a CPU limit of %s CPUs (CFS quota %d over period %d): numaplace gives whole CPUs",
				strconv.FormatFloat(float64(quota)/float64(period), 'f', -1, 64), quota, period)
		}
		return int(uint64(quota) / period), true, nil
	case shares > 2: // 2 is the kubelet's shares of no request
		if shares%sharesPerCPU != 0 {
			return 0, true, fmt.Errorf("a CPU request of %s CPUs (cpu.shares %d): numaplace gives whole CPUs",
				strconv.FormatFloat(float64(shares)/sharesPerCPU, 'f', 3, 64), shares)
		}
		return int(shares / sharesPerCPU), true, nil
	}
	return 0, false, nil
}

// memoryChange returns a refusal when res changes the memory limit cur
// has (both set and different), else nil.
func memoryChange(key, what string, cur, res *api.LinuxResources) error {
	from, to := cur.GetMemory().GetLimit().GetValue(), res.GetMemory().GetLimit().GetValue()
	if from <= 0 || to <= 0 || from == to {
		return nil
	}
	return fmt.Errorf("%w: pod %s, %s: its memory limit cannot change in place (from %d to %d bytes): "+
		"numaplace resizes only the CPUs of a pod with exclusive resources, its memory is reserved on its NUMA nodes by its decision; "+
		"recreate the pod to change its memory", kubelet.ErrResizeRefused, key, what, from, to)
}

// exclusiveLocked returns the admission of the sandbox's pod when it holds
// exclusive resources and was admitted with this sandbox: the pods whose
// resizes the plugin decides.
func (p *Plugin) exclusiveLocked(sb *api.PodSandbox) (kubelet.Admission, bool) {
	key := sandboxKey(sb)
	adm, ok := p.node.Get(key)
	if !ok || adm.Source == kubelet.SharedPool || p.current[key] != sb.GetId() {
		return kubelet.Admission{}, false
	}
	return adm, true
}

// UpdatePodSandbox implements stub.UpdatePodInterface. The kubelet (1.33
// and later, through containerd's UpdatePodSandboxResources) announces a
// pod's new resources this way before it changes the pod's cgroup when a
// resize raises them (and after its containers when it lowers them). For a
// pod with exclusive resources it refuses, before any cgroup changes:
//
//   - a change of the pod's memory limit (numaplace resizes CPUs only);
//   - CPUs that are not a whole number;
//   - more CPUs than the pod holds when the node cannot grow it to them
//     under its policy now ([kubelet.Node.CheckResize]), when this is a
//     rise: more than the last pod-level count the plugin accepted (or,
//     the first time since the agent started, than the sandbox was created
//     with when that is what the pod holds; else the rise is left to
//     UpdateContainer). The CPU count is the CFS quota over its period
//     (else the shares over 1024).
//
// The refusal is logged, recorded as an event, and returned: the kubelet
// then abandons the resize and shows the message in the pod's
// PodResizeInProgress condition (reason Error). Nothing is changed here:
// the CPUs are resized when the containers' new limits arrive
// ([Plugin.UpdateContainer]). Other pods pass.
func (p *Plugin) UpdatePodSandbox(ctx context.Context, sb *api.PodSandbox, overhead, res *api.LinuxResources) error {
	if sb == nil {
		return errors.New("nri: UpdatePodSandbox without a pod sandbox")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	adm, ok := p.exclusiveLocked(sb)
	if !ok {
		return nil
	}
	key := adm.Pod
	if err := memoryChange(key, "pod level", sb.GetLinux().GetPodResources(), res); err != nil {
		return p.refuseResizeLocked(ctx, sb, "UpdatePodSandbox", err)
	}
	n, ok, err := cpuCount(res.GetCpu())
	if err != nil {
		return p.refuseResizeLocked(ctx, sb, "UpdatePodSandbox", fmt.Errorf("%w: pod %s asks for %w", kubelet.ErrResizeRefused, key, err))
	}
	if !ok {
		return nil
	}
	// A rise is a count above the last one seen: the kubelet announces a
	// fall of the shares (after the containers' fall) with the old quota,
	// which is then above what the pod holds but no rise. Without a last
	// one since the agent started, the sandbox's own resources (those it
	// was created with) stand for it when they are what the pod holds.
	last, seen := p.podCPUs[sb.GetId()]
	if !seen {
		if n0, ok0, err0 := cpuCount(sb.GetLinux().GetPodResources().GetCpu()); ok0 && err0 == nil && n0 == adm.CPUs.Size() {
			last, seen = n0, true
		}
	}
	if seen && n > last && n > adm.CPUs.Size() {
		if err := p.node.CheckResize(key, n); err != nil {
			return p.refuseResizeLocked(ctx, sb, "UpdatePodSandbox", err)
		}
		p.log.InfoContext(ctx, "UpdatePodSandbox: the pod's CPUs can grow in place", "pod", key, "from", adm.CPUs.Size(), "to", n)
	}
	p.podCPUs[sb.GetId()] = n
	return nil
}

// UpdateContainer implements stub.UpdateContainerInterface: an in-place
// resize of a container (the kubelet's UpdateContainerResources). For a
// container of a pod with exclusive resources:
//
//   - a change of its memory limit is refused;
//   - its new CPU count is its new CFS quota over its period (the kubelet
//     writes a Guaranteed container's CPU limit so; without a quota, its
//     shares over 1024); a fraction of a CPU is refused;
//   - when the count changes by d, the pod (whose containers share one
//     cpuset) is resized from the N CPUs it holds to N+d under its policy
//     ([kubelet.Node.Resize], which writes the checkpoint). The pod's
//     containers' CPU limits must add up to N (so that the new decision is
//     the pod's request), else the resize is refused;
//   - without Options.OnResize (an agent without the API server), a CPU
//     change is refused: the new decision could not reach the scheduler;
//   - applied, the reply gives this container and the pod's other
//     containers the new cpuset (and memory nodes), and the shared-pool
//     containers the new shared pool; the new decision goes to
//     Options.OnResize, which writes it on the pod;
//   - refused, the error names why (such as the pod's NUMA node having no
//     free CPU), it is logged and recorded as an event, and containerd
//     fails the update: the container keeps its cpuset and its CPU quota,
//     and the kubelet shows the message in the pod's PodResizeInProgress
//     condition (reason Error) and retries later.
//
// Containers of shared-pool pods (and of pods the plugin does not manage)
// pass unchanged: their cpuset is the shared pool whatever their limit.
func (p *Plugin) UpdateContainer(ctx context.Context, sb *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	if sb == nil || ctr == nil {
		return nil, errors.New("nri: UpdateContainer without a pod sandbox or a container")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	adm, ok := p.exclusiveLocked(sb)
	if !ok {
		return nil, nil
	}
	key, what := adm.Pod, "container "+ctr.GetName()
	cur := ctr.GetLinux().GetResources()
	if err := memoryChange(key, what, cur, res); err != nil {
		return nil, p.refuseResizeLocked(ctx, sb, "UpdateContainer", err)
	}
	to, ok, err := cpuCount(res.GetCpu())
	if err != nil {
		return nil, p.refuseResizeLocked(ctx, sb, "UpdateContainer", fmt.Errorf("%w: pod %s, %s asks for %w", kubelet.ErrResizeRefused, key, what, err))
	}
	if !ok {
		return nil, nil
	}
	from, known, err := cpuCount(cur.GetCpu())
	if err != nil || !known {
		return nil, p.refuseResizeLocked(ctx, sb, "UpdateContainer", fmt.Errorf(
			"%w: pod %s, %s: its CPU limit before the resize is not known as whole CPUs (quota %d, period %d, shares %d)",
			kubelet.ErrResizeRefused, key, what, cur.GetCpu().GetQuota().GetValue(), cur.GetCpu().GetPeriod().GetValue(),
			cur.GetCpu().GetShares().GetValue()))
	}
	c := p.containers[ctr.GetId()]
	if c == nil {
		// The runtime updates a container's resources once it runs.
		c = &container{id: ctr.GetId(), sandbox: sb.GetId(), pod: key, cpus: adm.CPUs.String(), started: true}
		p.containers[c.id] = c
	}
	c.name, c.n = ctr.GetName(), from
	p.recordSizeLocked(sb.GetId(), ctr.GetName(), from, cur.GetMemory().GetLimit().GetValue())
	if to == from {
		return nil, nil
	}
	radm, err := p.resizeLocked(ctx, sb, "UpdateContainer", adm, ctr.GetId(), ctr.GetName(), from, to)
	if err != nil {
		return nil, err
	}
	c.n = to
	p.recordSizeLocked(sb.GetId(), ctr.GetName(), to, cur.GetMemory().GetLimit().GetValue())
	return p.resizedUpdatesLocked(radm, sb.GetId(), ctr.GetId()), nil
}

// resizeLocked resizes the pod of adm, whose container self (named name)
// goes from from to to CPUs, by the difference (see UpdateContainer), and
// tells the change: the log, an event, Options.OnResize. A refusal is
// logged, recorded and returned.
func (p *Plugin) resizeLocked(ctx context.Context, sb *api.PodSandbox, event string, adm kubelet.Admission, self, name string, from, to int) (kubelet.Admission, error) {
	key, held := adm.Pod, adm.CPUs.Size()
	if p.onResize == nil {
		return kubelet.Admission{}, p.refuseResizeLocked(ctx, sb, event, fmt.Errorf(
			"%w: pod %s from %d to %d CPUs: the agent runs without the API server (--reporter=false) and could not write the pod's new decision, "+
				"which numaplace-scheduler accounts", kubelet.ErrResizeRefused, key, held, held+to-from))
	}
	if sum, all := p.podCPUsLocked(key, sb.GetId(), self); all && sum+from != held {
		return kubelet.Admission{}, p.refuseResizeLocked(ctx, sb, event, fmt.Errorf(
			"%w: pod %s holds %d CPUs but its containers' CPU limits add up to %d (an init container asking for more?): "+
				"numaplace resizes in place only a pod whose containers' limits add up to its decision", kubelet.ErrResizeRefused, key, held, sum+from))
	}
	radm, err := p.node.Resize(key, held+to-from)
	if err != nil {
		return kubelet.Admission{}, p.refuseResizeLocked(ctx, sb, event, err)
	}
	p.poolChangedLocked()
	p.changedLocked()
	d := kube.NewDecision(p.node.Machine(), &radm.Allocation)
	msg := fmt.Sprintf("resized in place from %d to %d CPUs (container %s from %d to %d): cpuset %s, NUMA nodes %v",
		held, radm.CPUs.Size(), name, from, to, radm.CPUs.String(), radm.NUMANodes)
	p.log.InfoContext(ctx, event+": pod "+msg, "pod", key, "container", name, "cpus", radm.CPUs.String(),
		"mems", p.mems(radm), "decision", d.String())
	p.events.Record(ctx, Event{Namespace: sb.GetNamespace(), Name: sb.GetName(), UID: sb.GetUid(),
		Type: EventTypeNormal, Reason: ReasonResized, Message: "numaplace " + msg})
	p.onResize(Resized{Namespace: sb.GetNamespace(), Name: sb.GetName(), UID: sb.GetUid(), Decision: d.String()})
	return radm, nil
}

// size is a container's CPU count and memory limit (bytes) as last seen.
type size struct {
	cpus int
	mem  int64
}

// recordSizeLocked records the CPUs and memory limit of the container
// named name of the sandbox (for its next creation: a restart).
func (p *Plugin) recordSizeLocked(sandbox, name string, cpus int, mem int64) {
	if name == "" || cpus <= 0 {
		return
	}
	if p.sizes[sandbox] == nil {
		p.sizes[sandbox] = map[string]size{}
	}
	p.sizes[sandbox][name] = size{cpus: cpus, mem: mem}
}

// restartResizeLocked handles the creation of a container of a pod with
// exclusive resources (adm) that ran in this sandbox before with other
// limits: the kubelet restarts a container to resize it when its
// resizePolicy says RestartContainer. Its CPUs are resized as
// UpdateContainer resizes them, and the pod's admission as it now is
// returned, with the updates of its other containers and of the shared
// pool; a change of its memory limit, a fraction of a CPU, or CPUs the node
// cannot give are refused (the container is not created: its old limits,
// which the node holds, are not what the kubelet asks any more), the
// refusal logged, recorded and returned. A container seen for the first
// time, or with the same limits, changes nothing.
func (p *Plugin) restartResizeLocked(ctx context.Context, sb *api.PodSandbox, ctr *api.Container, adm kubelet.Admission) (kubelet.Admission, []*api.ContainerUpdate, error) {
	if adm.Source == kubelet.SharedPool {
		return adm, nil, nil
	}
	cur := ctr.GetLinux().GetResources()
	to, ok, err := cpuCount(cur.GetCpu())
	mem := cur.GetMemory().GetLimit().GetValue()
	prev, seen := p.sizes[sb.GetId()][ctr.GetName()]
	if !seen {
		if ok && err == nil {
			p.recordSizeLocked(sb.GetId(), ctr.GetName(), to, mem)
		}
		return adm, nil, nil
	}
	what := "container " + ctr.GetName() + " (restarted)"
	if prev.mem > 0 && mem > 0 && prev.mem != mem {
		return adm, nil, p.refuseResizeLocked(ctx, sb, "CreateContainer", memoryChange(adm.Pod, what,
			&api.LinuxResources{Memory: &api.LinuxMemory{Limit: api.Int64(prev.mem)}}, cur))
	}
	if err != nil {
		return adm, nil, p.refuseResizeLocked(ctx, sb, "CreateContainer", fmt.Errorf("%w: pod %s, %s asks for %w", kubelet.ErrResizeRefused, adm.Pod, what, err))
	}
	if !ok || to == prev.cpus {
		return adm, nil, nil
	}
	radm, err := p.resizeLocked(ctx, sb, "CreateContainer", adm, ctr.GetId(), ctr.GetName(), prev.cpus, to)
	if err != nil {
		return adm, nil, err
	}
	p.recordSizeLocked(sb.GetId(), ctr.GetName(), to, mem)
	updates := p.resizedUpdatesLocked(radm, sb.GetId(), ctr.GetId())
	return radm, updates[:len(updates)-1], nil // the container itself: its adjustment
}

// podCPUsLocked adds up the CPU counts of the pod's containers in the
// sandbox but the one with ID except; all is false when one of them is not
// known.
func (p *Plugin) podCPUsLocked(key, sandbox, except string) (sum int, all bool) {
	all = true
	for _, c := range p.containers {
		if c.pod == key && c.sandbox == sandbox && c.id != except {
			sum += c.n
			all = all && c.n > 0
		}
	}
	return sum, all
}

// resizedUpdatesLocked returns the updates of a resize: the pod's other
// containers and the shared-pool containers first (ordered by ID), the
// resized container (self) last, as containerd's reply carries it; each
// is recorded as applied.
func (p *Plugin) resizedUpdatesLocked(adm kubelet.Admission, sandbox, self string) []*api.ContainerUpdate {
	cpus, mems := adm.CPUs.String(), p.mems(adm)
	set := func(id string) *api.ContainerUpdate {
		u := &api.ContainerUpdate{ContainerId: id}
		u.SetLinuxCPUSetCPUs(cpus)
		if mems != "" {
			u.SetLinuxCPUSetMems(mems)
		}
		if c := p.containers[id]; c != nil && c.started {
			c.cpus, c.stale = cpus, false
		} else if c != nil {
			// It may be lost (see container.started): checked again at
			// its PostStartContainer.
			c.stale = true
		}
		return u
	}
	var updates []*api.ContainerUpdate
	for _, id := range slices.Sorted(maps.Keys(p.containers)) {
		if c := p.containers[id]; c.pod == adm.Pod && c.sandbox == sandbox && id != self {
			u := set(id)
			u.IgnoreFailure = true
			updates = append(updates, u)
		}
	}
	updates = append(updates, p.sharedUpdatesLocked(self, true)...)
	slices.SortStableFunc(updates, func(a, b *api.ContainerUpdate) int { return cmp.Compare(a.ContainerId, b.ContainerId) })
	return append(updates, set(self))
}

// refuseResizeLocked logs a refused resize, records it as a warning event
// on the pod and returns it as a *RefusedError.
func (p *Plugin) refuseResizeLocked(ctx context.Context, sb *api.PodSandbox, event string, err error) error {
	key := sandboxKey(sb)
	r := &RefusedError{Pod: key, Reason: ReasonResizeRefused, Err: err}
	p.log.WarnContext(ctx, event+": in-place resize refused", "pod", key, "uid", sb.GetUid(), "error", err)
	p.events.Record(ctx, Event{Namespace: sb.GetNamespace(), Name: sb.GetName(), UID: sb.GetUid(),
		Type: EventTypeWarning, Reason: ReasonResizeRefused, Message: r.Error()})
	return r
}

// cpuCountOf returns a container's CPU count as the plugin records it (0
// when it is not a whole number of CPUs or not known).
func cpuCountOf(ctr *api.Container) int {
	n, ok, err := cpuCount(ctr.GetLinux().GetResources().GetCpu())
	if !ok || err != nil {
		return 0
	}
	return n
}

// resizedEarlierLocked hands Options.OnResize again the decision of a
// running pod that the checkpoint holds with other CPUs than the decision
// its sandbox was created with: a pod resized in place before the agent
// restarted, whose new decision may not have reached the pod. Writing it
// again is harmless when it had.
func (p *Plugin) resizedEarlierLocked(ctx context.Context, sb *api.PodSandbox, adm kubelet.Admission) {
	raw, ok := sb.GetAnnotations()[kube.AnnotationAllocation]
	if p.onResize == nil || !ok || adm.Source != kubelet.FromDecision {
		return
	}
	d, err := kube.ParseDecision(raw)
	if err != nil {
		return
	}
	if cpus, err := numa.ParseCPUSet(d.CPUSet); err != nil || cpus.Equal(adm.CPUs) {
		return
	}
	now := kube.NewDecision(p.node.Machine(), &adm.Allocation)
	p.log.InfoContext(ctx, "synchronize: the pod was resized in place; its decision is written again", "pod", adm.Pod,
		"created with", d.CPUSet, "cpus", adm.CPUs.String())
	p.onResize(Resized{Namespace: sb.GetNamespace(), Name: sb.GetName(), UID: sb.GetUid(), Decision: now.String()})
}
