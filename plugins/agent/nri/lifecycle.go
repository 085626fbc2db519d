package nri

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/numaplace/numaplace/adapters/kube"
	"github.com/numaplace/numaplace/adapters/kubelet"
	"github.com/numaplace/numaplace/allocator"
)

// DefaultCheckInterval is how often the plugin checks, by default, whether
// the pod sandboxes it found at Synchronize still run (see
// [Options].CheckInterval).
const DefaultCheckInterval = 10 * time.Second

// sandbox is what the plugin knows of one pod sandbox.
type sandbox struct {
	// key is the pod's key, namespace/name; uid its UID.
	key, uid string
	// pid is the sandbox's process as the runtime reported it (0 when it
	// did not), start that process's start time (field 22 of
	// /proc/PID/stat; "" when unknown), to tell a reused PID apart.
	pid   uint32
	start string
	// watched is set for a sandbox found at Synchronize: the runtime may
	// never report its end (containerd, after a restart, sends
	// StopPodSandbox and RemovePodSandbox only for the sandboxes it ran
	// since, containerd/containerd#8426), so the plugin checks its process.
	watched bool
}

// exclusiveCPUs reports whether the admission holds exclusive CPUs. A pod
// on the shared pool holds none, nor does a decision without CPUs (a pod
// without a NUMA spec that numaplace's scheduler gave GPUs only, policy
// None with an empty cpuset): their containers run on the shared pool.
func exclusiveCPUs(adm kubelet.Admission) bool {
	return adm.Source != kubelet.SharedPool && !adm.CPUs.IsEmpty()
}

// cpusOf returns the cpuset.cpus of the admission's containers: its
// exclusive CPUs, or the shared pool as it is now when it holds none.
func (p *Plugin) cpusOf(adm kubelet.Admission) string {
	if exclusiveCPUs(adm) {
		return adm.CPUs.String()
	}
	return p.node.SharedPool().String()
}

// memsOf returns the cpuset.mems of the admission's containers (see
// [Plugin.mems]): for a decision without exclusive CPUs that reserves no
// memory, every node with memory, as for a shared-pool pod, since its
// containers run on the whole shared pool.
func (p *Plugin) memsOf(adm kubelet.Admission) string {
	if adm.Source == kubelet.FromDecision || adm.Source == kubelet.Local {
		if adm.CPUs.IsEmpty() && adm.Allocation.MemoryMiB() == 0 {
			ids := p.node.Machine().NodeIDs()
			return p.mems(kubelet.Admission{NUMANodes: ids, MemoryNodes: ids})
		}
	}
	return p.mems(adm)
}

// procStart returns the start time of process pid (field 22 of
// /proc/PID/stat) under the proc root; exists is false when there is no
// such process.
func procStart(root string, pid uint32) (start string, exists bool, err error) {
	data, err := os.ReadFile(filepath.Join(root, strconv.FormatUint(uint64(pid), 10), "stat"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	// "PID (comm) state ppid ...": comm may hold spaces and parentheses;
	// the fields after the last ")" start at field 3.
	i := strings.LastIndexByte(string(data), ')')
	fields := strings.Fields(string(data[i+1:]))
	if i < 0 || len(fields) < 20 {
		return "", true, fmt.Errorf("process %d: unexpected stat line %q", pid, quoteShort(string(data)))
	}
	return fields[19], true, nil
}

// quoteShort returns the first 80 bytes of s, for messages.
func quoteShort(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// newSandbox records what the plugin knows of sb, reading the start time
// of its process when the runtime gave it. exists is false when the
// runtime gave a process that does not exist (any more) under the proc
// root.
func (p *Plugin) newSandbox(ctx context.Context, sb *api.PodSandbox) (rec *sandbox, exists bool) {
	rec = &sandbox{key: sandboxKey(sb), uid: sb.GetUid(), pid: sb.GetPid()}
	if rec.pid == 0 {
		return rec, true
	}
	start, found, err := procStart(p.procRoot, rec.pid)
	switch {
	case err != nil:
		p.log.WarnContext(ctx, "cannot read a pod sandbox's process; it is taken as running", "pod", rec.key,
			"sandbox", sb.GetId(), "pid", rec.pid, "error", err)
	case !found:
		return rec, false
	default:
		rec.start = start
	}
	return rec, true
}

// goneLocked reports whether the watched sandbox's process is gone (or its
// PID now names another process). A sandbox without a known process is
// never taken as gone.
func (p *Plugin) goneLocked(id string, rec *sandbox) bool {
	if !rec.watched || rec.pid == 0 {
		return false
	}
	start, exists, err := procStart(p.procRoot, rec.pid)
	if err != nil {
		p.log.Warn("cannot read a pod sandbox's process; it is taken as running", "pod", rec.key, "sandbox", id,
			"pid", rec.pid, "error", err)
		return false
	}
	return !exists || (rec.start != "" && start != rec.start)
}

// reapLocked removes the pods of the watched sandboxes whose process is
// gone, as their StopPodSandbox would, and reports whether any was. why
// says what made the plugin look, for the log.
func (p *Plugin) reapLocked(ctx context.Context, why string) bool {
	var gone []string
	for id, rec := range p.sandboxes {
		if p.goneLocked(id, rec) {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone)
	for _, id := range gone {
		rec := p.sandboxes[id]
		p.log.InfoContext(ctx, why+": a pod sandbox found at synchronisation no longer runs (its process is gone); "+
			"releasing its pod as StopPodSandbox would", "pod", rec.key, "sandbox", id, "pid", rec.pid)
		if err := p.removeLocked(ctx, id, rec.key, rec.uid, why); err != nil {
			continue // logged; checked again next time
		}
	}
	return len(gone) > 0
}

// check runs the periodic check of the watched sandboxes.
func (p *Plugin) check() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reapLocked(context.Background(), "periodic check")
}

// removeLocked removes the pod of sandbox id (key, uid), releasing what it
// holds, and forgets the sandbox and its containers. The removal of an
// older sandbox of a pod that runs in a newer one leaves the pod alone, and
// so does that of a pod that is not admitted. It returns an error only when
// the checkpoint cannot be written (the pod is then still admitted).
func (p *Plugin) removeLocked(ctx context.Context, id, key, uid, event string) error {
	forget := func() {
		delete(p.sandboxes, id)
		delete(p.podCPUs, id)
		delete(p.sizes, id)
		for cid, c := range p.containers {
			if c.sandbox == id {
				delete(p.containers, cid)
			}
		}
	}
	if cur, ok := p.current[key]; ok && cur != id {
		p.log.DebugContext(ctx, event+": an older sandbox of a pod that runs in a newer one; the pod keeps its resources",
			"pod", key, "sandbox", id, "current", cur)
		forget()
		return nil
	}
	ns, name, _ := strings.Cut(key, "/")
	adm, known := p.node.Get(key)
	err := p.node.Remove(&kube.Pod{Namespace: ns, Name: name, UID: uid})
	switch {
	case errors.Is(err, allocator.ErrUnknownID):
		p.log.DebugContext(ctx, event+": the pod is not admitted; nothing to remove", "pod", key, "sandbox", id)
	case err != nil:
		p.log.ErrorContext(ctx, event+": cannot remove the pod", "pod", key, "sandbox", id, "error", err)
		return fmt.Errorf("numaplace: remove pod %s: %w", key, err)
	case known:
		p.log.InfoContext(ctx, event+": removed pod", "pod", key, "sandbox", id,
			"source", adm.Source.String(), "cpus", adm.CPUs.String(), "gpus", gpuIDs(adm))
	}
	if err == nil {
		delete(p.current, key)
		p.changedLocked()
	}
	forget()
	p.poolChangedLocked()
	return nil
}

// checkGPUsLocked checks, at Synchronize, that a running container of a pod
// with a decision has its decision's GPUs: NVIDIA_VISIBLE_DEVICES (unset
// counts as "void" for a decision without GPUs; a container of a pod whose
// GPUs are split among its containers may name a part of them, or "void")
// and, when the plugin knows the GPUs' device nodes, those of the GPUs it
// names. A container that
// started while the plugin was away (containerd runs containers without
// the adjustments of a plugin that is not connected) does not; neither its
// environment nor its devices can change while it runs, so it is logged
// and recorded as a Warning event ([ReasonGPUsNotApplied]) asking for the
// pod's restart.
func (p *Plugin) checkGPUsLocked(ctx context.Context, sb *api.PodSandbox, c *api.Container, adm kubelet.Admission) {
	got, want := envValue(c.GetEnv(), kubelet.EnvVisibleDevices), adm.VisibleDevices()
	// A container of a pod whose decision's GPUs are split among its
	// containers (kube.GPUShares) has its share: GPUs of the decision only,
	// or none ("void").
	share := adm.GPUs
	envOK := got == want || (got == "" && len(adm.GPUs) == 0) || got == "void"
	if !envOK && p.withinDecision(c, adm) {
		envOK = true
		ids, _ := p.kubeletGPUs(c, claimantOfAdmission(adm))
		share = nil
		for _, g := range adm.GPUs {
			if slices.Contains(ids, g.ID) {
				share = append(share, g)
			}
		}
	}
	if got == "void" {
		share = nil
	}
	// A container with GPUs of its pod's ResourceClaims (the DRA role's
	// CDI spec names them in its NVIDIA_VISIBLE_DEVICES): the value may name
	// those and its share of the decision.
	if claimed := p.claimGPUs(claimantOfAdmission(adm)); !envOK && len(claimed) > 0 {
		if ids, ok := p.namedGPUs(c); ok {
			envOK = true
			share = nil
			for _, id := range ids {
				if g, in := decisionGPU(adm, id); in {
					share = append(share, g)
				} else if !claimed[id] {
					envOK = false
				}
			}
		}
	}
	var missing []string
	if p.gpus != nil {
		has := map[string]bool{}
		for _, d := range c.GetLinux().GetDevices() {
			has[d.GetPath()] = true
		}
		for _, g := range share {
			if path, ok := p.gpus.Path(g.ID); ok && !has[path] {
				missing = append(missing, path)
			}
		}
	}
	if envOK && len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("pod %s's container %s runs without its decision's GPUs (it started while numaplace's agent was away): "+
		"%s=%q, the decision's is %q", adm.Pod, c.GetName(), kubelet.EnvVisibleDevices, got, want)
	if len(missing) > 0 {
		msg += fmt.Sprintf("; the device nodes %s are missing", strings.Join(missing, ", "))
	}
	msg += "; restart the pod to apply its decision"
	p.log.WarnContext(ctx, "synchronize: a running container's GPUs differ from its decision; restart the pod to apply it",
		"pod", adm.Pod, "container", c.GetName(), "env", kubelet.EnvVisibleDevices, "has", got, "decision", want, "missing", missing)
	if sb != nil {
		p.events.Record(ctx, Event{Namespace: sb.GetNamespace(), Name: sb.GetName(), UID: sb.GetUid(),
			Type: EventTypeWarning, Reason: ReasonGPUsNotApplied, Message: msg})
	}
}

// PostStartContainer implements stub.PostStartContainerInterface. The
// runtime reports it once the container runs, when an update reaches the
// container's cgroup; an update sent before may have been lost while the
// runtime reported success (see container.started). So the container is
// marked started and, when the cpuset it was created with (or the one the
// runtime reports) is not what it should have now (the shared pool as it
// is now, or its pod's CPUs after a resize) or its cpuset.mems is not, it
// is sent its cpuset and cpuset.mems: at once through the [Updater] (after
// this handler returns), else in the next reply. A container the plugin
// did not see created (it was created while the plugin was away) of an
// admitted pod is recorded and checked the same way.
func (p *Plugin) PostStartContainer(ctx context.Context, sb *api.PodSandbox, ctr *api.Container) error {
	if sb == nil || ctr == nil {
		return errors.New("nri: PostStartContainer without a pod sandbox or a container")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cpu := ctr.GetLinux().GetResources().GetCpu()
	c := p.containers[ctr.GetId()]
	if c == nil {
		key := sandboxKey(sb)
		adm, ok := p.node.Get(key)
		if !ok || p.current[key] != sb.GetId() || ctr.GetId() == "" {
			return nil // not a pod the plugin runs
		}
		c = &container{id: ctr.GetId(), sandbox: sb.GetId(), pod: key, pool: !exclusiveCPUs(adm), cpus: cpu.GetCpus(),
			name: ctr.GetName(), n: cpuCountOf(ctr)}
		p.containers[c.id] = c
	}
	c.started = true
	cpus, mems := p.wantLocked(c)
	if cpus == "" {
		return nil
	}
	// What the runtime reports is its spec, which may have been updated
	// after the task was created from it: the cpuset the container was
	// created with decides, and a reported one that differs too. An empty
	// report is no report.
	wrong := !sameList(c.cpus, cpus) || (cpu.GetCpus() != "" && !sameList(cpu.GetCpus(), cpus)) ||
		(mems != "" && cpu.GetMems() != "" && !sameList(cpu.GetMems(), mems))
	if !c.stale && !wrong {
		return nil
	}
	p.log.InfoContext(ctx, "PostStartContainer: the container started with a cpuset that is no longer its own; sending it its cpuset",
		"pod", c.pod, "container", ctr.GetName(), "id", c.id, "createdWith", c.cpus, "runtimeReports", cpu.GetCpus(),
		"reportedMems", cpu.GetMems(), "cpus", cpus, "mems", mems)
	c.stale = true
	p.kickLocked()
	return nil
}
