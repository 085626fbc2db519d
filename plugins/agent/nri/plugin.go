package nri

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/numa"
	"github.com/numaplace/numaplace/plugins/agent/devices"
)

// Options tune a [Plugin]. The zero value is the default.
type Options struct {
	// Logger receives the plugin's log; nil means slog.Default().
	Logger *slog.Logger
	// Events records refusals; nil means [LogEvents] on Logger.
	Events EventSink
	// GPUs, if set, finds the GPUs' device nodes: a container of a pod
	// with exclusive resources then gets its decision's GPU device nodes
	// (and the driver's control nodes) through the adjustment, and loses
	// those of the machine's other GPUs (which the kubelet's device plugin
	// may have given it). Nil leaves device nodes alone
	// (NVIDIA_VISIBLE_DEVICES is set either way).
	GPUs *devices.GPUs
	// MemoryNodes, if not nil, are the IDs of the host's NUMA nodes that
	// have memory (the kernel's has_memory list): a container's
	// cpuset.mems is its NUMA nodes among these, and is left to the
	// runtime when none of its nodes has memory (a memoryless node's CPUs
	// take memory from the nearest node, and the kernel refuses a
	// cpuset.mems naming a node without memory). Nil: every NUMA node of
	// the machine has memory.
	MemoryNodes []numa.NodeID
	// OnChange, if set, is called after the node's state changed (a pod
	// admitted or removed, the checkpoint reconciled), with the plugin's
	// lock held: it must return at once (such as the reporter's Notify).
	OnChange func()
	// OnResize, if set, is called after an in-place resize changed a pod's
	// exclusive CPUs (see [Plugin.UpdateContainer]), with the pod and its new
	// decision, with the plugin's lock held: it must return at once (such as
	// cluster.Decisions' Write, which patches the pod's annotation in the
	// background).
	OnResize func(Resized)
	// Pods, if set, finds a pod's containers (NRI does not pass their
	// requests): each container of a pod whose decision names GPUs then
	// gets its share of them (kube.GPUShares). Nil, or a pod not found:
	// the GPUs the kubelet gave the container when they are all the
	// decision's, else all of the decision's GPUs. It also gives the
	// requests of a pod with a NUMA spec and no decision whose
	// ResourceClaims hold GPUs, which the node then places aligned with
	// them (nil, or not found: refused, [ErrNoDecision]).
	Pods PodLookup
	// ResourceName is the extended resource the GPUs are requested as; ""
	// is aliyun.com/gpu.
	ResourceName string
	// ProcRoot is the host's /proc as the plugin sees it ("" means
	// "/proc"), where it checks whether the process of a pod sandbox found
	// at Synchronize still runs (the runtime's PodSandbox.Pid).
	ProcRoot string
	// CheckInterval is how often the sandboxes found at Synchronize are
	// checked (0 means [DefaultCheckInterval]; negative turns the periodic
	// check off, leaving the checks at each RunPodSandbox and refusal).
	CheckInterval time.Duration
}

// container is what the plugin knows of one container.
type container struct {
	id, sandbox, pod string
	// pool is true for a container that holds no exclusive CPUs (of a
	// shared-pool pod, of a decision without CPUs, or of a pod that runs
	// but could not be admitted): its cpuset follows the shared pool.
	pool bool
	// cpus is the cpuset.cpus the container has as far as the plugin knows
	// (what the runtime reported or what the plugin asked for); "" when
	// unknown. Until the container is started, it is what the container was
	// created with: an update sent before then may be lost (see started).
	cpus string
	// started is set once the runtime has reported the container started
	// (PostStartContainer, or running at Synchronize). Before, an update
	// may be lost while the runtime reports success: containerd drops the
	// update of a container whose CreateContainer is still in flight (not
	// yet in its container store), and writes that of a container being
	// started only into its spec, after the task was created from the old
	// one. So the plugin sends a container no update before it is started,
	// and at PostStartContainer sends it its cpuset if it no longer is the
	// one it was created with.
	started bool
	// stale is set when the container's cpuset (and cpuset.mems) must be
	// sent again whatever cpus says: it started with a cpuset that is not
	// its own any more. The next push or reply sends it.
	stale bool
	// name is the container's name and n its CPU count (its CPU limit in
	// whole CPUs), 0 when not known.
	name string
	n    int
}

// Plugin is numaplace's NRI plugin: it admits pods on a kubelet.Node by
// their decision and sets their containers' cpusets and GPU environment.
// Pass it to stub.New; its methods implement the stub's handler
// interfaces and may also be called directly (as the tests do). Every
// method is safe for concurrent use; the handlers are serialised.
type Plugin struct {
	node     *kubelet.Node
	log      *slog.Logger
	events   EventSink
	gpus     *devices.GPUs
	onChange func()
	onResize func(Resized)
	memNodes map[numa.NodeID]bool // nil: every node
	pods     PodLookup
	resource string

	procRoot string
	interval time.Duration

	mu sync.Mutex
	// sandboxes maps a pod sandbox ID to what the plugin knows of it.
	sandboxes map[string]*sandbox
	// current maps an admitted pod's key to the sandbox it was admitted
	// with, so that the removal of an older sandbox of the same pod does
	// not release the newer one's resources.
	current map[string]string
	// containers maps a container ID to the container.
	containers map[string]*container
	// podCPUs maps a sandbox ID to the pod-level CPU count of the last
	// UpdatePodSandbox the plugin accepted (see UpdatePodSandbox).
	podCPUs map[string]int
	// sizes maps a sandbox ID and a container name to the container's CPUs
	// and memory limit as last seen (a restarted container is compared
	// with them).
	sizes map[string]map[string]size
	// pool is the shared pool as last seen; gen counts its changes.
	pool string
	gen  uint64

	updater   Updater
	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// Compile-time checks of the NRI handler interfaces the plugin implements.
var (
	_ stub.ConfigureInterface          = (*Plugin)(nil)
	_ stub.SynchronizeInterface        = (*Plugin)(nil)
	_ stub.ShutdownInterface           = (*Plugin)(nil)
	_ stub.RunPodInterface             = (*Plugin)(nil)
	_ stub.StopPodInterface            = (*Plugin)(nil)
	_ stub.RemovePodInterface          = (*Plugin)(nil)
	_ stub.CreateContainerInterface    = (*Plugin)(nil)
	_ stub.StopContainerInterface      = (*Plugin)(nil)
	_ stub.RemoveContainerInterface    = (*Plugin)(nil)
	_ stub.PostStartContainerInterface = (*Plugin)(nil)
)

// New returns the plugin of node. It starts the goroutine that sends
// unsolicited shared-pool updates (see [Plugin.SetUpdater]); [Plugin.Close]
// stops it.
func New(node *kubelet.Node, opts Options) (*Plugin, error) {
	if node == nil {
		return nil, errors.New("nri.New: nil node")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	events := opts.Events
	if events == nil {
		events = LogEvents{Logger: log}
	}
	var memNodes map[numa.NodeID]bool
	if opts.MemoryNodes != nil {
		memNodes = map[numa.NodeID]bool{}
		for _, id := range opts.MemoryNodes {
			memNodes[id] = true
		}
	}
	resource := opts.ResourceName
	if resource == "" {
		resource = kube.ResourceAliyunGPU
	}
	procRoot := opts.ProcRoot
	if procRoot == "" {
		procRoot = "/proc"
	}
	interval := opts.CheckInterval
	if interval == 0 {
		interval = DefaultCheckInterval
	}
	p := &Plugin{node: node, log: log, events: events, gpus: opts.GPUs, onChange: opts.OnChange, onResize: opts.OnResize, memNodes: memNodes,
		pods: opts.Pods, resource: resource, procRoot: procRoot, interval: interval,
		sandboxes: map[string]*sandbox{}, current: map[string]string{}, containers: map[string]*container{},
		podCPUs: map[string]int{}, sizes: map[string]map[string]size{},
		pool: node.SharedPool().String(),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p, nil
}

// Node returns the node agent the plugin admits pods on.
func (p *Plugin) Node() *kubelet.Node { return p.node }

// Close stops the goroutine that sends unsolicited updates and waits for
// it. It does not close the node (whose state is already checkpointed). A
// repeated Close is harmless.
func (p *Plugin) Close() {
	p.closeOnce.Do(func() { close(p.stop) })
	<-p.done
}

// Configure implements stub.ConfigureInterface: it logs the runtime and
// subscribes to every event the plugin handles. The NRI configuration
// string is not used (the plugin is configured by its flags).
func (p *Plugin) Configure(ctx context.Context, config, runtime, version string) (api.EventMask, error) {
	p.log.InfoContext(ctx, "configured by the runtime", "runtime", runtime, "version", version)
	return 0, nil
}

// Shutdown implements stub.ShutdownInterface: it logs that the runtime is
// shutting down. The state is already checkpointed.
func (p *Plugin) Shutdown(ctx context.Context) {
	p.log.InfoContext(ctx, "the runtime is shutting down")
}

// Synchronize implements stub.SynchronizeInterface. The runtime calls it
// when the plugin connects, with the pod sandboxes and containers that
// exist. It reconciles the node's state (restored from its checkpoint, or
// as it was before the runtime went away) with them:
//
//   - a sandbox that no longer runs is skipped: one whose process (the
//     runtime's PodSandbox.Pid, looked up under [Options].ProcRoot) is
//     gone, or one without a process and without a container that has not
//     exited (containerd lists stopped sandboxes until they are removed,
//     with no process);
//   - a checkpointed pod that no longer runs (or runs with another UID) is
//     removed;
//   - a running pod the node does not know is admitted, by its decision or
//     to the shared pool (pods with a decision first); one that cannot be
//     admitted (a conflict, a NUMA spec without a decision) is logged and
//     recorded as an event, and its containers are confined to the shared
//     pool;
//   - every container whose cpuset.cpus is not what it should be (the
//     decision's CPUs, or the shared pool for a container that holds no
//     exclusive CPUs), or, for a pod with a decision, whose cpuset.mems is
//     not, gets an update in the returned list. A container without its
//     decision's GPUs (NVIDIA_VISIBLE_DEVICES, device nodes: it started
//     while the plugin was away) is logged and recorded as an event
//     ([ReasonGPUsNotApplied]): the environment and devices of a running
//     container cannot be changed;
//   - the GPUs the kubelet gave the containers of shared-pool pods are
//     recorded on the node (kubelet.Node.SetKubeletGPUs); one a decision
//     holds is logged and recorded as an event naming the holder (a running
//     container cannot be refused).
//
// A sandbox without a pod name is skipped. When the runtime lists two
// running sandboxes of one pod (an old one not yet removed), the one with
// more containers that have not exited stands for the pod.
//
// The runtime may never report the end of a sandbox listed here (containerd
// after its own restart sends StopPodSandbox and RemovePodSandbox only for
// the sandboxes it ran since), so the plugin watches their processes: a
// pod whose sandbox process is gone is released as StopPodSandbox would,
// at the next RunPodSandbox, refusal or periodic check
// ([Options].CheckInterval).
func (p *Plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sandboxes, p.current, p.containers = map[string]*sandbox{}, map[string]string{}, map[string]*container{}
	p.podCPUs, p.sizes = map[string]int{}, map[string]map[string]size{}

	live := map[string]int{}
	for _, c := range ctrs {
		if c != nil && c.GetState() != api.ContainerState_CONTAINER_STOPPED {
			live[c.GetPodSandboxId()]++
		}
	}
	running := map[string]*api.PodSandbox{}
	for _, sb := range pods {
		if sb == nil || sb.GetName() == "" {
			p.log.WarnContext(ctx, "synchronize: skipping a pod sandbox without a pod name", "sandbox", sb.GetId())
			continue
		}
		rec, exists := p.newSandbox(ctx, sb)
		p.sandboxes[sb.GetId()] = rec
		switch {
		case live[sb.GetId()] == 0 && (rec.pid == 0 || !exists):
			p.log.InfoContext(ctx, "synchronize: skipping a pod sandbox that no longer runs", "pod", rec.key,
				"sandbox", sb.GetId(), "pid", rec.pid)
			continue
		case !exists:
			// Running containers in a sandbox whose process is not there:
			// the proc root is not the runtime's (not the host's /proc).
			p.log.WarnContext(ctx, "synchronize: a running pod sandbox's process is not under the proc root "+
				"(is it the host's /proc?); the end of this sandbox is left to the runtime to report",
				"pod", rec.key, "sandbox", sb.GetId(), "pid", rec.pid, "procRoot", p.procRoot)
		default:
			rec.watched = true
		}
		key := rec.key
		if old, dup := running[key]; dup && live[old.GetId()] >= live[sb.GetId()] {
			continue
		}
		running[key] = sb
	}

	// Checkpointed pods that no longer run.
	for _, adm := range p.node.Admissions() {
		sb, ok := running[adm.Pod]
		why := "in the checkpoint but no longer running"
		if ok && adm.UID != "" && sb.GetUid() != "" && adm.UID != sb.GetUid() {
			ok, why = false, fmt.Sprintf("in the checkpoint with UID %s, running with UID %s", adm.UID, sb.GetUid())
		}
		if ok {
			continue
		}
		ns, name, _ := strings.Cut(adm.Pod, "/")
		if err := p.node.Remove(&kube.Pod{Namespace: ns, Name: name, UID: adm.UID}); err != nil {
			p.log.ErrorContext(ctx, "synchronize: cannot remove a pod that no longer runs", "pod", adm.Pod, "error", err)
			continue
		}
		p.log.InfoContext(ctx, "synchronize: removed pod: "+why, "pod", adm.Pod, "uid", adm.UID,
			"source", adm.Source.String(), "cpus", adm.CPUs.String(), "gpus", gpuIDs(adm))
	}

	// Running pods the checkpoint does not know: decisions first, so that
	// the shared pool's pods do not make an exclusive claim look like it
	// would empty the pool.
	keys := slices.SortedFunc(maps.Keys(running), func(a, b string) int {
		_, da := running[a].GetAnnotations()[kube.AnnotationAllocation]
		_, db := running[b].GetAnnotations()[kube.AnnotationAllocation]
		if da != db {
			if da {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})
	managed := map[string]bool{}   // sandbox ID -> its pod is admitted
	unmanaged := map[string]bool{} // sandbox ID -> its pod runs but could not be admitted
	for _, key := range keys {
		sb := running[key]
		if adm, ok := p.node.Get(key); ok {
			p.current[key] = sb.GetId()
			managed[sb.GetId()] = true
			p.resizedEarlierLocked(ctx, sb, adm)
			continue
		}
		adm, err := p.admitNewLocked(sb, nil)
		if err != nil {
			unmanaged[sb.GetId()] = true
			msg := fmt.Sprintf("pod %s runs but cannot be admitted, its containers are confined to the shared pool: %v", key, err)
			p.log.ErrorContext(ctx, "synchronize: "+msg, "pod", key, "sandbox", sb.GetId())
			p.events.Record(ctx, Event{Namespace: sb.GetNamespace(), Name: sb.GetName(), UID: sb.GetUid(),
				Type: EventTypeWarning, Reason: ReasonUnmanaged, Message: msg})
			continue
		}
		managed[sb.GetId()] = true
		p.log.InfoContext(ctx, "synchronize: admitted pod: running, not in the checkpoint", "pod", key,
			"source", adm.Source.String(), "cpus", adm.CPUs.String(), "mems", adm.Mems(), "gpus", gpuIDs(adm))
	}
	pool := p.node.SharedPool().String()
	if pool != p.pool {
		// The updates below carry the new pool; a push still on its way
		// must send it again.
		p.pool = pool
		p.gen++
	}

	// Containers: record them and correct their cpusets.
	var updates []*api.ContainerUpdate
	for _, c := range ctrs {
		if c == nil || c.GetState() == api.ContainerState_CONTAINER_STOPPED {
			continue
		}
		id := c.GetPodSandboxId()
		if !managed[id] && !unmanaged[id] {
			continue
		}
		key := p.sandboxes[id].key
		cpu := c.GetLinux().GetResources().GetCpu()
		// A container not yet started (CREATED) gets its update now, which
		// containerd applies to its spec, and is checked again at its
		// PostStartContainer.
		ctr := &container{id: c.GetId(), sandbox: id, pod: key, cpus: cpu.GetCpus(), name: c.GetName(), n: cpuCountOf(c),
			started: c.GetState() != api.ContainerState_CONTAINER_CREATED}
		p.containers[ctr.id] = ctr
		p.recordSizeLocked(ctr.sandbox, ctr.name, ctr.n, c.GetLinux().GetResources().GetMemory().GetLimit().GetValue())
		u := &api.ContainerUpdate{ContainerId: ctr.id, IgnoreFailure: true}
		adm, ok := p.node.Get(key)
		if !ok { // unmanaged: the shared pool only
			ctr.pool = true
			if pool != "" && !sameList(ctr.cpus, pool) {
				u.SetLinuxCPUSetCPUs(pool)
				ctr.cpus = pool
				updates = append(updates, u)
				p.log.InfoContext(ctx, "synchronize: confining a container of a pod that could not be admitted to the shared pool",
					"pod", key, "container", c.GetName(), "id", ctr.id, "cpus", pool)
			}
			continue
		}
		ctr.pool = !exclusiveCPUs(adm)
		changed := false
		if want := p.cpusOf(adm); want != "" && !sameList(ctr.cpus, want) {
			u.SetLinuxCPUSetCPUs(want)
			ctr.cpus, changed = want, true
		}
		decided := adm.Source != kubelet.SharedPool
		if want := p.memsOf(adm); decided && want != "" && !sameList(cpu.GetMems(), want) {
			u.SetLinuxCPUSetMems(want)
			changed = true
		}
		if changed {
			updates = append(updates, u)
			p.log.InfoContext(ctx, "synchronize: updating a container's cpuset", "pod", key, "container", c.GetName(),
				"id", ctr.id, "cpus", p.cpusOf(adm), "mems", p.memsOf(adm))
		}
		if ids, ok := p.kubeletGPUs(c, claimantOf(running[key])); ok && adm.Source == kubelet.SharedPool {
			if err := p.node.SetKubeletGPUs(key, c.GetName(), ids); err != nil {
				msg := fmt.Sprintf("pod %s runs container %s with GPUs %v from the kubelet that it cannot have (%v); "+
					"the GPU is in two containers until one of the pods is deleted", key, c.GetName(), ids, err)
				p.log.ErrorContext(ctx, "synchronize: "+msg, "pod", key, "container", c.GetName())
				sb := running[key]
				p.events.Record(ctx, Event{Namespace: sb.GetNamespace(), Name: sb.GetName(), UID: sb.GetUid(),
					Type: EventTypeWarning, Reason: refusal(key, err).Reason, Message: msg})
			}
		}
		if decided {
			p.checkGPUsLocked(ctx, running[key], c, adm)
		}
	}
	slices.SortFunc(updates, func(a, b *api.ContainerUpdate) int { return cmp.Compare(a.ContainerId, b.ContainerId) })
	p.changedLocked()
	return updates, nil
}

// changedLocked tells Options.OnChange that the node's state changed.
func (p *Plugin) changedLocked() {
	if p.onChange != nil {
		p.onChange()
	}
}

// RunPodSandbox implements stub.RunPodInterface: it first releases the
// pods of sandboxes found at Synchronize whose process is gone (see
// [Plugin.Synchronize]), then admits the pod by its decision (or to the
// shared pool). A pod with a NUMA spec and no decision whose
// ResourceClaims (which the kubelet had the DRA role prepare before the
// sandbox) hold GPUs is admitted by its spec from Options.Pods (its
// requests): the node places its CPUs and memory by its policy aligned
// with the claimed GPUs, which serve its GPU request (kubelet.Node.Admit);
// its containers then get the claims' GPUs their CDI devices gave them,
// named once. A refusal returns a *[RefusedError] naming the conflict,
// which makes the runtime fail the sandbox; it is logged and recorded as an
// event.
func (p *Plugin) RunPodSandbox(ctx context.Context, sb *api.PodSandbox) error {
	if sb == nil {
		return errors.New("nri: RunPodSandbox without a pod sandbox")
	}
	spec := p.lookupClaimSpec(ctx, sb)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reapLocked(ctx, "RunPodSandbox")
	_, err := p.admitLocked(ctx, sb, "RunPodSandbox", spec)
	return err
}

// CreateContainer implements stub.CreateContainerInterface: it admits the
// container's pod (which is already admitted after RunPodSandbox: the
// admission is idempotent) and returns the adjustment that sets the
// container's cpuset.cpus and cpuset.mems and, for a pod with a decision,
// NVIDIA_VISIBLE_DEVICES (its GPUs, or "void" for none). A container that
// holds no exclusive CPUs gets the shared pool and follows it: that of a
// shared-pool pod (with every NUMA node; its environment is left alone,
// its GPUs, if any, come from the device plugin), and that of a decision
// without CPUs (a GPU pod without a NUMA spec, policy None: with every
// NUMA node unless the decision reserves memory, and the decision's GPUs).
// The updates bring every other shared-pool container onto the
// shared pool as it is now, so that a new exclusive pod's CPUs are taken
// from them before its container runs. A refusal returns a
// *[RefusedError], logged and recorded as an event.
func (p *Plugin) CreateContainer(ctx context.Context, sb *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if sb == nil || ctr == nil {
		return nil, nil, errors.New("nri: CreateContainer without a pod sandbox or a container")
	}
	spec := p.lookupSpec(ctx, sb)
	claimSpec := p.lookupClaimSpec(ctx, sb)
	p.mu.Lock()
	defer p.mu.Unlock()
	adm, err := p.admitLocked(ctx, sb, "CreateContainer", claimSpec)
	if err != nil {
		return nil, nil, err
	}
	adm, resized, err := p.restartResizeLocked(ctx, sb, ctr, adm)
	if err != nil {
		return nil, nil, err
	}
	shareFrom := ""
	if len(adm.Claims) > 0 {
		// A pod the node placed with its claims' GPUs: the container has
		// those of its claims' GPUs that it uses (the DRA role's CDI spec
		// gave them), no other.
		adm, shareFrom = claimShare(adm, p.containerClaimGPUs(ctr, claimantOf(sb))), "claims"
	} else if adm.Source != kubelet.SharedPool {
		adm, shareFrom = p.containerShare(adm, spec, ctr)
	} else if ids, ok := p.kubeletGPUs(ctr, claimantOf(sb)); ok {
		// The kubelet's GPUs of a pod outside numaplace's decisions: never
		// one a decision holds.
		if err := p.node.SetKubeletGPUs(adm.Pod, ctr.GetName(), ids); err != nil {
			r := refusal(adm.Pod, err)
			p.log.ErrorContext(ctx, "CreateContainer: container refused: the kubelet gave it GPUs it cannot have", "pod", adm.Pod,
				"container", ctr.GetName(), "gpus", ids, "reason", r.Reason, "error", err)
			p.events.Record(ctx, Event{Namespace: sb.GetNamespace(), Name: sb.GetName(), UID: sb.GetUid(),
				Type: EventTypeWarning, Reason: r.Reason, Message: r.Error()})
			return nil, nil, r
		}
		p.changedLocked()
	}
	adj := &api.ContainerAdjustment{}
	cpus := p.cpusOf(adm)
	if cpus == "" {
		// An empty cpuset.cpus would let the container run on every CPU.
		err := fmt.Errorf("numaplace: pod %s, container %s: the shared pool has no CPUs: exclusive pods hold every CPU", adm.Pod, ctr.GetName())
		p.log.ErrorContext(ctx, "CreateContainer: "+err.Error(), "pod", adm.Pod, "container", ctr.GetName())
		return nil, nil, err
	}
	adj.SetLinuxCPUSetCPUs(cpus)
	if mems := p.memsOf(adm); mems != "" {
		adj.SetLinuxCPUSetMems(mems)
	}
	shared := adm.Source == kubelet.SharedPool
	if !shared {
		// The GPUs of the pod's ResourceClaims that the container got
		// through CDI stay: NVIDIA_VISIBLE_DEVICES names them with the
		// decision's share (or is left as CDI set it when the share is
		// empty), and their device nodes are not removed.
		claimed := p.containerClaimGPUs(ctr, claimantOf(sb))
		switch {
		case len(claimed) == 0:
			for _, e := range adm.Env() {
				k, v, _ := strings.Cut(e, "=")
				adj.AddEnv(k, v)
			}
		case len(adm.GPUs) > 0:
			both := adm
			both.GPUs = slices.Clone(adm.GPUs)
			m := p.node.Machine()
			for _, g := range claimed {
				if _, in := decisionGPU(adm, g); !in {
					gpu, _ := m.GPU(g)
					both.GPUs = append(both.GPUs, kube.DecisionGPU{ID: g, UUID: gpu.UUID})
				}
			}
			slices.SortFunc(both.GPUs, func(a, b kube.DecisionGPU) int { return cmp.Compare(a.ID, b.ID) })
			adj.AddEnv(kubelet.EnvVisibleDevices, both.VisibleDevices())
		}
		if err := p.adjustDevicesLocked(adj, adm, p.claimGPUs(claimantOf(sb))); err != nil {
			p.log.ErrorContext(ctx, "CreateContainer: cannot give the container its GPUs", "pod", adm.Pod,
				"container", ctr.GetName(), "error", err)
			return nil, nil, fmt.Errorf("numaplace: pod %s, container %s: %w", adm.Pod, ctr.GetName(), err)
		}
	} else if err := p.allocatedDevicesLocked(adj, ctr, claimantOf(sb)); err != nil {
		p.log.ErrorContext(ctx, "CreateContainer: cannot give the container the GPUs the kubelet allocated it", "pod", adm.Pod,
			"container", ctr.GetName(), "error", err)
		return nil, nil, fmt.Errorf("numaplace: pod %s, container %s: %w", adm.Pod, ctr.GetName(), err)
	}
	c := &container{id: ctr.GetId(), sandbox: sb.GetId(), pod: adm.Pod, pool: !exclusiveCPUs(adm), cpus: cpus,
		name: ctr.GetName(), n: cpuCountOf(ctr)}
	if c.id != "" {
		p.containers[c.id] = c
	}
	p.log.InfoContext(ctx, "container placed", "pod", adm.Pod, "container", ctr.GetName(), "id", c.id,
		"source", adm.Source.String(), "cpus", c.cpus, "mems", p.memsOf(adm), "gpus", adm.VisibleDevices(), "gpusFrom", shareFrom)
	return adj, append(resized, p.sharedUpdatesLocked(c.id, true)...), nil
}

// mems returns the cpuset.mems of the admission's containers: its memory
// nodes (kubelet.Admission.Mems) that have memory on the host, "" when
// none has (the runtime's default stays).
func (p *Plugin) mems(adm kubelet.Admission) string {
	if p.memNodes == nil {
		return adm.Mems()
	}
	ids := adm.MemoryNodes
	if len(ids) == 0 {
		ids = adm.NUMANodes
	}
	var s numa.CPUSet // small integers, formatted as a Linux list
	for _, id := range ids {
		if p.memNodes[id] {
			s.Add(int(id))
		}
	}
	return s.String()
}

// adjustDevicesLocked gives the container the device nodes of the
// admission's GPUs (with the driver's control nodes) and removes those of
// the machine's other GPUs but the pod's claims' (claimed, which the DRA
// role's CDI spec gave), when the plugin knows the GPUs' nodes.
func (p *Plugin) adjustDevicesLocked(adj *api.ContainerAdjustment, adm kubelet.Admission, claimed map[int]bool) error {
	if p.gpus == nil {
		return nil
	}
	ids := make([]int, len(adm.GPUs))
	keep := map[string]bool{}
	for i, g := range adm.GPUs {
		ids[i] = g.ID
		path, _ := p.gpus.Path(g.ID)
		keep[path] = true
	}
	for g := range claimed {
		path, _ := p.gpus.Path(g)
		keep[path] = true
	}
	nodes, err := p.gpus.For(ids)
	if err != nil {
		return err
	}
	for _, path := range p.gpus.Paths() {
		if !keep[path] {
			adj.RemoveDevice(path)
		}
	}
	addDeviceNodes(adj, nodes)
	return nil
}

// allocatedDevicesLocked gives a shared-pool container the device nodes
// (with the driver's control nodes) of the GPUs the kubelet allocated it
// through the device plugin, which names them in NVIDIA_VISIBLE_DEVICES
// (and, with deviceplugin.Options.NoDeviceNodes, gives their nodes itself
// only when it knows the pod for sure; adding a node it gave again
// replaces it in the container's spec).
// A value that does not name only this machine's GPUs, by UUID or index
// ("all", "void", another plugin's names), is left alone, and so is every
// container when the plugin does not know the GPUs' nodes.
func (p *Plugin) allocatedDevicesLocked(adj *api.ContainerAdjustment, ctr *api.Container, pod claimant) error {
	if p.gpus == nil {
		return nil
	}
	ids, ok := p.kubeletGPUs(ctr, pod)
	if !ok {
		return nil
	}
	nodes, err := p.gpus.For(ids)
	if err != nil {
		return err
	}
	addDeviceNodes(adj, nodes)
	return nil
}

// addDeviceNodes adds the device nodes to the container's adjustment.
func addDeviceNodes(adj *api.ContainerAdjustment, nodes []devices.Node) {
	for _, n := range nodes {
		adj.AddDevice(&api.LinuxDevice{Path: n.Path, Type: "c", Major: n.Major, Minor: n.Minor,
			FileMode: api.FileMode(uint32(n.Mode)), Uid: api.UInt32(n.UID), Gid: api.UInt32(n.GID)})
	}
}

// StopContainer implements stub.StopContainerInterface: it forgets the
// container (a stopped container cannot be updated) and returns the
// updates that bring the shared-pool containers onto the shared pool as it
// is now.
func (p *Plugin) StopContainer(ctx context.Context, sb *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	if ctr == nil {
		return nil, errors.New("nri: StopContainer without a container")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.containers, ctr.GetId())
	return p.sharedUpdatesLocked("", true), nil
}

// RemoveContainer implements stub.RemoveContainerInterface: it forgets the
// container.
func (p *Plugin) RemoveContainer(ctx context.Context, sb *api.PodSandbox, ctr *api.Container) error {
	if ctr == nil {
		return errors.New("nri: RemoveContainer without a container")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.containers, ctr.GetId())
	return nil
}

// StopPodSandbox implements stub.StopPodInterface: it removes the pod,
// releasing what it holds (see [Plugin.RemovePodSandbox]).
func (p *Plugin) StopPodSandbox(ctx context.Context, sb *api.PodSandbox) error {
	return p.remove(ctx, sb, "StopPodSandbox")
}

// RemovePodSandbox implements stub.RemovePodInterface: it removes the pod,
// releasing what it holds, and forgets the sandbox and its containers.
// Removing a pod that is not admitted (already removed at StopPodSandbox,
// or refused) changes nothing and is not an error; nor is the removal of
// an older sandbox of a pod that now runs in a newer one, which leaves the
// newer one's admission alone. When an exclusive pod leaves, the
// shared-pool containers are updated onto the grown shared pool. An error
// is returned only when the checkpoint cannot be written (the pod is then
// still admitted, and the runtime may retry).
func (p *Plugin) RemovePodSandbox(ctx context.Context, sb *api.PodSandbox) error {
	return p.remove(ctx, sb, "RemovePodSandbox")
}

func (p *Plugin) remove(ctx context.Context, sb *api.PodSandbox, event string) error {
	if sb == nil {
		return fmt.Errorf("nri: %s without a pod sandbox", event)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.removeLocked(ctx, sb.GetId(), sandboxKey(sb), sb.GetUid(), event)
}

// admitLocked admits the sandbox's pod (idempotent) and records the
// sandbox. A refusal is logged, recorded as an event and returned as a
// *RefusedError.
func (p *Plugin) admitLocked(ctx context.Context, sb *api.PodSandbox, event string, spec *kube.Pod) (kubelet.Admission, error) {
	key := sandboxKey(sb)
	if adm, ok := p.node.Get(key); ok && p.current[key] == sb.GetId() && (adm.UID == "" || adm.UID == sb.GetUid()) {
		return adm, nil
	}
	_, known := p.node.Get(key)
	adm, err := p.admitNewLocked(sb, spec)
	if err != nil && p.reapLocked(ctx, event+" refused") {
		// A holder (or an older pod of the same name) was a sandbox that
		// no longer runs: try again without it.
		_, known = p.node.Get(key)
		adm, err = p.admitNewLocked(sb, spec)
	}
	if err != nil {
		r := refusal(key, err)
		p.log.ErrorContext(ctx, event+": pod refused", "pod", key, "uid", sb.GetUid(), "sandbox", sb.GetId(),
			"reason", r.Reason, "error", err)
		p.events.Record(ctx, Event{Namespace: sb.GetNamespace(), Name: sb.GetName(), UID: sb.GetUid(),
			Type: EventTypeWarning, Reason: r.Reason, Message: r.Error()})
		return kubelet.Admission{}, r
	}
	if !known {
		p.log.InfoContext(ctx, event+": admitted pod", "pod", key, "uid", sb.GetUid(), "sandbox", sb.GetId(),
			"source", adm.Source.String(), "cpus", adm.CPUs.String(), "mems", adm.Mems(), "gpus", gpuIDs(adm))
	}
	return adm, nil
}

// admitNewLocked admits the sandbox's pod on the node, records the
// sandbox, and notes a change of the shared pool. spec, when not nil, is
// the pod with its containers' requests (lookupClaimSpec): a pod with a
// NUMA spec and no decision is then admitted by it (the node places it
// with its claims' GPUs) rather than refused for want of a decision.
func (p *Plugin) admitNewLocked(sb *api.PodSandbox, spec *kube.Pod) (kubelet.Admission, error) {
	pod, err := PodFromSandbox(sb)
	if errors.Is(err, ErrNoDecision) && spec != nil {
		pod, err = spec, nil
	}
	if err != nil {
		return kubelet.Admission{}, err
	}
	adm, err := p.node.Admit(pod)
	if err != nil {
		return kubelet.Admission{}, err
	}
	if rec, ok := p.sandboxes[sb.GetId()]; !ok || rec.key != adm.Pod {
		// A sandbox seen first here: the runtime reports its end (one
		// found at Synchronize stays watched).
		p.sandboxes[sb.GetId()] = &sandbox{key: adm.Pod, uid: sb.GetUid(), pid: sb.GetPid()}
	}
	p.current[adm.Pod] = sb.GetId()
	p.poolChangedLocked()
	p.changedLocked()
	return adm, nil
}

// gpuIDs lists an admission's GPU IDs for the log.
func gpuIDs(a kubelet.Admission) []int {
	ids := make([]int, len(a.GPUs))
	for i, g := range a.GPUs {
		ids[i] = g.ID
	}
	return ids
}

// envValue returns the value of name in a "NAME=value" environment, or ""
// when absent.
// decisionGPU returns the admission's GPU with the given ID, and whether it
// has it.
func decisionGPU(adm kubelet.Admission, id int) (kube.DecisionGPU, bool) {
	i := slices.IndexFunc(adm.GPUs, func(g kube.DecisionGPU) bool { return g.ID == id })
	if i < 0 {
		return kube.DecisionGPU{}, false
	}
	return adm.GPUs[i], true
}

func envValue(env []string, name string) string {
	for _, e := range slices.Backward(env) {
		if k, v, ok := strings.Cut(e, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// sameList reports whether two Linux lists ("0-3,8") name the same
// numbers. A list that does not parse equals only the same text.
func sameList(a, b string) bool {
	if a == b {
		return true
	}
	x, errA := numa.ParseCPUSet(a)
	y, errB := numa.ParseCPUSet(b)
	return errA == nil && errB == nil && x.Equal(y)
}
