package allocator

// Unhealthy returns the unhealthy devices by class ("gpu" for GPUs), IDs as
// strings, as [Snapshot.Unhealthy] gives them (nil when every device is
// healthy, and for a nil state), without copying the allocations: in time
// linear in the devices.
func (s *State) Unhealthy() map[string][]string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.unhealthyLocked()
}

func (s *State) unhealthyLocked() map[string][]string {
	var out map[string][]string
	for _, d := range s.devices() {
		for i, v := range d.dev {
			if !v.healthy {
				if out == nil {
					out = map[string][]string{}
				}
				out[d.class] = append(out[d.class], d.ids[i])
			}
		}
	}
	return out
}
