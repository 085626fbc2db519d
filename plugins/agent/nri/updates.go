package nri

import (
	"cmp"
	"slices"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// Updater sends unsolicited container updates to the runtime. The NRI
// stub (stub.Stub) is one; it returns the updates that failed.
type Updater interface {
	// UpdateContainers asks the runtime to apply the updates.
	UpdateContainers(updates []*api.ContainerUpdate) (failed []*api.ContainerUpdate, err error)
}

var _ Updater = stub.Stub(nil)

// maxPushRounds bounds how often one push resends when the shared pool
// keeps changing while its updates are on their way.
const maxPushRounds = 8

// SetUpdater sets where unsolicited updates go: the stub that runs the
// plugin (stub.New needs the plugin first, hence a setter). Without one,
// shared-pool containers are updated only in the responses to
// CreateContainer, StopContainer and Synchronize. When the shared pool
// changes (an exclusive pod arrives or leaves), a goroutine sends the
// shared-pool containers their new cpuset through u; it never calls u
// while a handler runs in the plugin, since the runtime holds its own lock
// while it waits for the handler. If the pool changes again while the
// updates are on their way, it sends them again, so that the last cpuset a
// container receives is the pool as it is then.
func (p *Plugin) SetUpdater(u Updater) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updater = u
}

// poolChangedLocked notes a change of the shared pool, if any, and wakes
// the goroutine that sends the shared-pool containers their new cpuset.
func (p *Plugin) poolChangedLocked() {
	pool := p.node.SharedPool().String()
	if pool == p.pool {
		return
	}
	p.log.Info("shared pool changed", "from", p.pool, "to", pool)
	p.pool = pool
	p.gen++
	p.kickLocked()
}

// sharedUpdatesLocked returns the updates that put every started
// container that follows the shared pool (but the one with ID except)
// whose cpuset is not the shared pool onto it, and that send every stale
// container (see container.stale) its cpuset and cpuset.mems, ordered by
// container ID. A container not yet started gets none (containerd may
// drop it while reporting success, see container.started): it is checked
// at its PostStartContainer. With record, they are recorded as applied (a
// handler's reply, which the runtime applies before it answers the next
// request); without, the caller records them once they are.
func (p *Plugin) sharedUpdatesLocked(except string, record bool) []*api.ContainerUpdate {
	pool := p.node.SharedPool().String()
	var out []*api.ContainerUpdate
	for _, c := range p.containers {
		if !c.started || c.id == except {
			continue
		}
		var u *api.ContainerUpdate
		switch {
		case c.stale:
			u = p.correctionLocked(c)
		case c.pool && pool != "" && !sameList(c.cpus, pool):
			u = &api.ContainerUpdate{ContainerId: c.id, IgnoreFailure: true}
			u.SetLinuxCPUSetCPUs(pool)
		}
		if u == nil {
			continue
		}
		out = append(out, u)
		if record {
			c.cpus, c.stale = u.GetLinux().GetResources().GetCpu().GetCpus(), false
		}
	}
	slices.SortFunc(out, func(a, b *api.ContainerUpdate) int { return cmp.Compare(a.ContainerId, b.ContainerId) })
	return out
}

// wantLocked returns the cpuset.cpus and cpuset.mems container c should
// have now: the shared pool ("" when it is empty, and then no update is
// sent) or its pod's exclusive CPUs, and its pod's memory nodes. A
// container of a pod that runs but is not admitted gets the shared pool
// and its memory is left alone ("").
func (p *Plugin) wantLocked(c *container) (cpus, mems string) {
	adm, ok := p.node.Get(c.pod)
	if !ok {
		return p.node.SharedPool().String(), ""
	}
	if c.pool {
		return p.node.SharedPool().String(), p.memsOf(adm)
	}
	return adm.CPUs.String(), p.memsOf(adm)
}

// correctionLocked returns the update that sends container c its cpuset
// and cpuset.mems (see wantLocked), nil when there is no cpuset to send.
func (p *Plugin) correctionLocked(c *container) *api.ContainerUpdate {
	cpus, mems := p.wantLocked(c)
	if cpus == "" {
		return nil // never an empty cpuset.cpus (every CPU); the node keeps the pool while pods run on it
	}
	u := &api.ContainerUpdate{ContainerId: c.id, IgnoreFailure: true}
	u.SetLinuxCPUSetCPUs(cpus)
	if mems != "" {
		u.SetLinuxCPUSetMems(mems)
	}
	return u
}

// kickLocked wakes the goroutine that sends unsolicited updates, even
// when the shared pool did not change.
func (p *Plugin) kickLocked() {
	select {
	case p.kick <- struct{}{}:
	default: // a push is already due
	}
}

// run sends unsolicited updates when woken, and checks the sandboxes
// found at Synchronize every CheckInterval, until Close.
func (p *Plugin) run() {
	defer close(p.done)
	var tick <-chan time.Time
	if p.interval > 0 {
		t := time.NewTicker(p.interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
			p.push()
		case <-tick:
			p.check()
		}
	}
}

// push sends the shared-pool containers the current shared pool through
// the updater, again while the pool changed during the sending. Until the
// updater returns, the containers still count as not updated, so a handler
// that runs meanwhile (the runtime may serve it before the unsolicited
// updates) puts the same updates in its reply.
func (p *Plugin) push() {
	for range maxPushRounds {
		p.mu.Lock()
		u := p.updater
		if u == nil {
			p.mu.Unlock()
			return
		}
		gen := p.gen
		updates := p.sharedUpdatesLocked("", false)
		p.mu.Unlock()
		if len(updates) == 0 {
			return
		}
		failed, err := u.UpdateContainers(updates)
		p.mu.Lock()
		again := p.gen != gen
		switch {
		case err != nil:
			p.log.Error("cannot update the shared-pool containers; they will be updated in the next reply or at the next change",
				"containers", len(updates), "error", err)
		case again:
			// What was sent may have arrived after a newer pool: send the
			// newer one again.
			p.forgetCPUsLocked(updates)
		default:
			p.log.Info("updated the shared-pool containers", "containers", len(updates),
				"cpus", updates[0].GetLinux().GetResources().GetCpu().GetCpus(), "failed", len(failed))
			p.recordLocked(updates)
			p.forgetCPUsLocked(failed)
		}
		p.mu.Unlock()
		if !again {
			return
		}
	}
}

// recordLocked records the cpusets of the updates as applied.
func (p *Plugin) recordLocked(updates []*api.ContainerUpdate) {
	for _, u := range updates {
		if c, ok := p.containers[u.GetContainerId()]; ok && c.started {
			c.cpus, c.stale = u.GetLinux().GetResources().GetCpu().GetCpus(), false
		}
	}
}

// forgetCPUsLocked marks the containers of the updates as having an
// unknown cpuset, so that the next push or reply sends them theirs.
func (p *Plugin) forgetCPUsLocked(updates []*api.ContainerUpdate) {
	for _, u := range updates {
		if c, ok := p.containers[u.GetContainerId()]; ok {
			c.cpus = ""
			if !c.pool {
				c.stale = true // a shared-pool container differs from the pool now
			}
		}
	}
}
