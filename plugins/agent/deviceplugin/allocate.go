package deviceplugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	api "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/internal/quote"
	"github.com/numaplace/numaplace/plugins/agent/nri"
)

// Event reasons the plugin records on pods.
const (
	// ReasonGPUsDiffer: the kubelet allocated a container of a pod with a
	// decision other GPUs than its share of the decision. The container
	// sees its decision's GPUs (the NRI role gives them), but the kubelet's
	// records (its pod-resources API, its device checkpoint) name the
	// kubelet's.
	ReasonGPUsDiffer = "NUMAPlacementGPUsDiffer"
	// ReasonGPUHeld: the kubelet allocated a pod outside numaplace's
	// decisions a GPU that a decision holds or reserves; Allocate refused
	// it, and the kubelet fails the pod with the message.
	ReasonGPUHeld = "NUMAPlacementGPUHeld"
)

// expectationTTL is how long a GetPreferredAllocation's finding stands
// for the Allocate that follows it (the kubelet calls them one after the
// other for a container).
const expectationTTL = 30 * time.Second

// GetPreferredAllocation implements the device-plugin API. The kubelet
// does not say which pod it is admitting; the plugin finds it (see
// [Plugin.candidates]: the pods bound to the node from Options.Pods, and
// the kubelet's pod-resources API from Options.KubeletPods, which lists
// the pod being admitted and not those it has not reached) and answers:
//
//   - for a container of a pod with a decision, its share of the
//     decision's GPUs (kube.GPUShares: the containers' requests split the
//     GPUs in the kubelet's container order). When some of them are not
//     among the GPUs the kubelet offers (another container has them, or
//     they are unhealthy), it answers those that are, and the node's
//     chooser completes the answer from the offered GPUs that no decision
//     holds or reserves (Allocate then reports the difference);
//   - for a pod without a decision, or when no pod is found, the node's
//     chooser among the offered GPUs that no decision holds (pods admitted
//     on the node) or reserves (pods bound to the node, not terminal, with
//     a decision naming them), and among all the offered GPUs when those
//     are too few (Allocate then refuses a GPU a decision holds).
//
// When several pods may be meant, the first by creation time, then
// namespace/name, is taken. A request the chooser cannot answer is an
// InvalidArgument error saying why.
func (p *Plugin) GetPreferredAllocation(ctx context.Context, req *api.PreferredAllocationRequest) (*api.PreferredAllocationResponse, error) {
	resp := &api.PreferredAllocationResponse{}
	for _, cr := range req.GetContainerRequests() {
		ids, err := p.prefer(ctx, cr)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "numaplace: preferred allocation of %d %s: %v", cr.GetAllocationSize(), p.opts.ResourceName, err)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &api.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// prefer answers one container's preferred allocation.
func (p *Plugin) prefer(ctx context.Context, cr *api.ContainerPreferredAllocationRequest) ([]string, error) {
	size := int(cr.GetAllocationSize())
	available, must := cr.GetAvailableDeviceIDs(), cr.GetMustIncludeDeviceIDs()
	c, pods := p.identify(ctx, size)
	p.mu.Lock()
	p.expect = &expectation{size: size, c: c, pods: pods, at: time.Now()}
	p.mu.Unlock()
	offered := map[int]string{} // GPU ID -> the kubelet's device ID
	for _, id := range slices.Concat(available, must) {
		if i, ok := p.index(id); ok {
			offered[p.gpus[i].topo.ID] = id
		}
	}
	except := ""
	if c != nil {
		except = c.key()
	}
	holders := p.decisionHolders(pods, except)
	// free are the offered GPUs no decision holds or reserves (and the
	// kubelet's must-includes and unknown IDs, for the chooser to name).
	free := func(skip []string) []string {
		var out []string
		for _, id := range available {
			i, ok := p.index(id)
			if !ok {
				out = append(out, id)
				continue
			}
			if slices.Contains(skip, id) {
				continue
			}
			if _, held := holders[p.gpus[i].topo.ID]; !held || slices.Contains(must, id) {
				out = append(out, id)
			}
		}
		return out
	}
	if share, ok := c.decided(); ok {
		var answer []string
		var missing []int
		for _, g := range share {
			if id, ok := offered[g]; ok {
				answer = append(answer, id)
			} else {
				missing = append(missing, g)
			}
		}
		if len(missing) == 0 {
			p.metrics.preferDecision.Add(1)
			p.log.Debug("preferring the decision's GPUs", "pod", c.key(), "container", c.container.Name, "gpus", share)
			return answer, nil
		}
		p.metrics.preferPartial.Add(1)
		p.log.Warn("some of the decision's GPUs are not offered by the kubelet; the others completed by the node's chooser",
			"pod", c.key(), "container", c.container.Name, "decision", share, "missing", missing)
		ids, err := p.node.GetPreferredAllocation(free(answer), slices.Concat(must, answer), size)
		if err != nil {
			ids, err = p.node.GetPreferredAllocation(available, slices.Concat(must, answer), size)
		}
		return ids, err
	}
	if c != nil {
		p.metrics.preferUndecided.Add(1)
	} else {
		p.metrics.preferUnknown.Add(1)
	}
	ids, err := p.node.GetPreferredAllocation(free(nil), must, size)
	if err != nil {
		ids, err = p.node.GetPreferredAllocation(available, must, size)
	}
	return ids, err
}

// hasDecision reports whether the candidate's pod has a decision
// annotation, readable or not.
func (c *candidate) hasDecision() bool {
	_, ok := c.info.Pod.Annotations[kube.AnnotationAllocation]
	return ok
}

// decided returns the container's share of its pod's decision, and
// whether the pod has a decision to take it from; false for a nil
// candidate.
func (c *candidate) decided() ([]int, bool) {
	if c == nil {
		return nil, false
	}
	return c.share()
}

// Allocate implements the device-plugin API: each container gets
// NVIDIA_VISIBLE_DEVICES with the GPUs the kubelet chose (by UUID, else
// index) and their device nodes with the driver's control nodes, which
// Options.NoDeviceNodes (the NRI role on) restricts to the GPUs known to
// be the container's own (below). For a pod with a
// numaplace decision the NRI role then gives each container its share of
// the decision's GPUs, so the decision decides what the container sees.
//
// With Options.Pods, Allocate also finds the pod (the one the preceding
// GetPreferredAllocation found, else as it does) and compares:
//
//   - a container of a pod with a decision given exactly its share of the
//     decision: allowed, with the device nodes (with NoDeviceNodes, when
//     the pod is known for sure, below; counted, result "decision");
//   - a container of a pod with a decision given other GPUs than its
//     share (the kubelet ignored the preference, or some decided GPUs were
//     not offered): allowed, since the NRI role gives the container its
//     share, but recorded as a Warning event [ReasonGPUsDiffer] on the pod
//     and counted in the metrics (result "differs"); with NoDeviceNodes its
//     device nodes are withheld (a node Allocate adds could not be taken
//     out again through NRI, containerd/nri#216, and the container would
//     see a GPU not its own);
//   - a pod without a decision given GPUs no decision holds or reserves:
//     allowed, with the device nodes (with NoDeviceNodes, when the pod is
//     known for sure; result "undecided");
//   - a pod without a decision (or a container no pod is found for) given
//     a GPU that a decision holds or reserves (see
//     [Plugin.GetPreferredAllocation]): refused with a FailedPrecondition
//     error naming each GPU and its holder, which the kubelet shows on the
//     pod as it fails it; recorded as a Warning event [ReasonGPUHeld] and
//     counted (result "refused").
//
// With NoDeviceNodes the device nodes are given only when the pod is known
// for sure, the only candidate among the pods the kubelet's pod-resources
// API lists (Options.KubeletPods), and withheld when the pod is a guess
// (that API not configured or not answering, or several candidates), from
// a container no pod is found for (or all of them without Options.Pods),
// and from a pod whose decision cannot be read or split among its
// containers: their GPUs may not be the ones the NRI role gives.
//
// Allocate cannot know whether the NRI role will see the container (the
// agent may be down when containerd creates it); a container given its
// nodes runs with its GPUs either way, while one whose nodes are withheld
// and that containerd creates without NRI runs with the kubelet's
// NVIDIA_VISIBLE_DEVICES but no GPU device node (the NRI role's
// Synchronize then records the event [nri.ReasonGPUsNotApplied]). It is not
// refused: the NRI role normally runs and gives the decided GPUs, and a
// refusal would fail the pod (UnexpectedAdmissionError) for what it
// corrects.
//
// An unknown device ID, or a GPU whose device node is missing, is an
// InvalidArgument error naming it (device nodes given or not).
func (p *Plugin) Allocate(ctx context.Context, req *api.AllocateRequest) (*api.AllocateResponse, error) {
	resp := &api.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		var ids []int
		var names []string
		for _, id := range cr.GetDevicesIds() {
			i, ok := p.index(id)
			if !ok {
				return nil, status.Errorf(codes.InvalidArgument, "numaplace: device %s is not a GPU of this node", quote.Short(id))
			}
			ids = append(ids, p.gpus[i].topo.ID)
			names = append(names, p.gpus[i].name)
		}
		nodes, err := p.devs.For(ids)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "numaplace: %v", err)
		}
		own, err := p.compare(ctx, ids)
		if err != nil {
			return nil, err
		}
		c := &api.ContainerAllocateResponse{Envs: map[string]string{kubelet.EnvVisibleDevices: strings.Join(names, ",")}}
		if own || !p.opts.NoDeviceNodes {
			for _, n := range nodes {
				c.Devices = append(c.Devices, &api.DeviceSpec{ContainerPath: n.Path, HostPath: n.Path, Permissions: "rw"})
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, c)
	}
	return resp, nil
}

// compare checks the GPUs ids the kubelet gives a container against the
// decisions (see [Plugin.Allocate]) and records the container as given.
// own reports whether the GPUs are known to be the container's own, the
// ones the NRI role gives it too: its share of its pod's decision, or the
// kubelet's for a pod found without a decision annotation, the pod known
// for sure (the only candidate the kubelet's pod-resources API lists). It
// is false without Options.Pods, when no pod is found or the pod is a
// guess (no pod-resources API, or several candidates: had the kubelet
// been admitting another pod, with another decision, the container would
// see a GPU of another's decision), when the pod's decision cannot be
// read or split among its containers, and when the GPUs differ from the
// container's share.
func (p *Plugin) compare(ctx context.Context, ids []int) (own bool, err error) {
	if p.opts.Pods == nil {
		return false, nil
	}
	p.mu.Lock()
	exp := p.expect
	p.expect = nil
	p.mu.Unlock()
	var c *candidate
	var pods []PodInfo
	if exp != nil && exp.size == len(ids) && time.Since(exp.at) < expectationTTL {
		c, pods = exp.c, exp.pods
	} else {
		c, pods = p.identify(ctx, len(ids))
	}
	got := slices.Sorted(slices.Values(ids))
	if c != nil {
		p.mu.Lock()
		if p.given[c.info.Pod.UID] == nil {
			p.given[c.info.Pod.UID] = map[string]bool{}
		}
		p.given[c.info.Pod.UID][c.container.Name] = true
		p.mu.Unlock()
	}
	if share, ok := c.decided(); ok {
		if slices.Equal(got, share) {
			p.metrics.allocDecision.Add(1)
			return c.sure, nil
		}
		p.metrics.allocDiffers.Add(1)
		msg := fmt.Sprintf("the kubelet allocated %s to container %s, its share of the numaplace decision is %s: "+
			"the container gets the decision's GPUs, but the kubelet's pod-resources API names the kubelet's",
			p.describeGPUs(got), c.container.Name, p.describeGPUs(share))
		p.log.Warn(msg, "pod", c.key())
		p.opts.Events.Record(ctx, nri.Event{Namespace: c.info.Pod.Namespace, Name: c.info.Pod.Name, UID: c.info.Pod.UID,
			Type: nri.EventTypeWarning, Reason: ReasonGPUsDiffer, Message: msg})
		return false, nil
	}
	except := ""
	if c != nil {
		except = c.key()
	}
	holders := p.decisionHolders(pods, except)
	var conflicts []string
	for _, g := range got {
		if h, ok := holders[g]; ok {
			conflicts = append(conflicts, fmt.Sprintf("%s is held by %s", p.describeGPUs([]int{g}), h))
		}
	}
	if len(conflicts) == 0 {
		p.metrics.allocUndecided.Add(1)
		return c != nil && c.sure && !c.hasDecision(), nil
	}
	p.metrics.allocRefused.Add(1)
	who := "a container no pod bound to this node was found for"
	if c != nil {
		who = fmt.Sprintf("pod %s (container %s), which has no numaplace decision,", c.key(), c.container.Name)
	}
	msg := fmt.Sprintf("numaplace: %s cannot have it: %s", who, strings.Join(conflicts, "; "))
	p.log.Warn("Allocate refused", "reason", msg)
	if c != nil {
		p.opts.Events.Record(ctx, nri.Event{Namespace: c.info.Pod.Namespace, Name: c.info.Pod.Name, UID: c.info.Pod.UID,
			Type: nri.EventTypeWarning, Reason: ReasonGPUHeld, Message: msg})
	}
	return false, status.Error(codes.FailedPrecondition, msg)
}

// describeGPUs names GPUs by ID with their UUIDs, such as "GPU 2
// (GPU-...)" or "GPUs 0 (GPU-...), 3 (GPU-...)".
func (p *Plugin) describeGPUs(ids []int) string {
	parts := make([]string, len(ids))
	for i, g := range ids {
		parts[i] = strconv.Itoa(g)
		if j, ok := p.byID[strconv.Itoa(g)]; ok && p.gpus[j].topo.UUID != "" {
			parts[i] += " (" + p.gpus[j].topo.UUID + ")"
		}
	}
	if len(ids) == 1 {
		return "GPU " + parts[0]
	}
	if len(ids) == 0 {
		return "no GPUs"
	}
	return "GPUs " + strings.Join(parts, ", ")
}

// counters are the plugin's metrics.
type counters struct {
	preferDecision, preferPartial, preferUndecided, preferUnknown atomic.Uint64
	allocDecision, allocDiffers, allocUndecided, allocRefused     atomic.Uint64
}

// Counts are the plugin's counters (see [Plugin.WriteMetrics]).
type Counts struct {
	// Preferred answers of GetPreferredAllocation: the decision's GPUs
	// (Decision), some of them completed by the chooser (Partial), the
	// chooser's for a pod without a decision (Undecided) or when no pod was
	// found (Unknown).
	PreferDecision, PreferPartial, PreferUndecided, PreferUnknown uint64
	// Containers Allocate was called for: given their share of the
	// decision (Decision), other GPUs than their share (Differs), a pod
	// without a decision given GPUs no decision holds (Undecided), refused
	// (Refused).
	AllocDecision, AllocDiffers, AllocUndecided, AllocRefused uint64
}

// Counts returns the plugin's counters.
func (p *Plugin) Counts() Counts {
	m := &p.metrics
	return Counts{m.preferDecision.Load(), m.preferPartial.Load(), m.preferUndecided.Load(), m.preferUnknown.Load(),
		m.allocDecision.Load(), m.allocDiffers.Load(), m.allocUndecided.Load(), m.allocRefused.Load()}
}

// WriteMetrics writes the plugin's counters in the Prometheus text
// exposition format (version 0.0.4), as the agent's /metrics serves them:
//
//	numaplace_agent_gpu_preferences_total{answer="decision|partial|undecided|unknown"}
//	numaplace_agent_gpu_allocations_total{result="decision|differs|undecided|refused"}
func (p *Plugin) WriteMetrics(w io.Writer) error {
	c := p.Counts()
	_, err := fmt.Fprintf(w, `# HELP numaplace_agent_gpu_preferences_total GetPreferredAllocation answers of the GPU device plugin, by what they are: the decision's GPUs, some completed by the chooser, the chooser's for a pod without a decision, or no pod found.
# TYPE numaplace_agent_gpu_preferences_total counter
numaplace_agent_gpu_preferences_total{answer="decision"} %d
numaplace_agent_gpu_preferences_total{answer="partial"} %d
numaplace_agent_gpu_preferences_total{answer="undecided"} %d
numaplace_agent_gpu_preferences_total{answer="unknown"} %d
# HELP numaplace_agent_gpu_allocations_total Containers the kubelet allocated GPUs to, by how the GPUs compare with the numaplace decisions: the container's share of its decision, other GPUs than its share, a pod without a decision given GPUs no decision holds, or refused because a decision holds them.
# TYPE numaplace_agent_gpu_allocations_total counter
numaplace_agent_gpu_allocations_total{result="decision"} %d
numaplace_agent_gpu_allocations_total{result="differs"} %d
numaplace_agent_gpu_allocations_total{result="undecided"} %d
numaplace_agent_gpu_allocations_total{result="refused"} %d
`, c.PreferDecision, c.PreferPartial, c.PreferUndecided, c.PreferUnknown, c.AllocDecision, c.AllocDiffers, c.AllocUndecided, c.AllocRefused)
	return err
}
