package scheduler

import (
	"fmt"

	"github.com/numaplace/numaplace/adapters/kube"
)

// The cache's own rules on a node's totals, written once: the shared CPU
// pool, memory and the minimum shared pool. Filter, Reserve, ScheduleOne,
// the preemption search and the what-if paths all judge a pod by
// [totals.admit] on the totals they see (the node's, or the node's without
// the victims), and every pod placed changes the totals by its [usage].

// totals are the counts of one node that the cache's own rules read.
type totals struct {
	allocCPUs  int   // allocatable CPUs (reserved ones excluded)
	gpuCap     int   // GPUs
	memCap     int64 // MiB, 0 when the machine does not say
	exclCPUs   int   // CPUs held exclusively by allocations
	gpusHeld   int   // GPUs held by allocations
	plainMilli int64 // the CPU requests charged to the shared pool
	memUsed    int64 // the memory requests of every pod
}

// usage is what one pod takes of its node's totals: the CPUs and GPUs it
// holds and its requests.
type usage struct {
	exclCPUs    int   // CPUs it holds exclusively
	gpus        int   // GPUs it holds
	sharedMilli int64 // its CPU request, when charged to the shared pool
	memMiB      int64 // its memory request
}

// usageOf is the usage of a pod requesting req that holds exclCPUs CPUs
// exclusively and gpus GPUs. The one rule of the shared pool's accounting:
// a pod's CPU request is charged to the shared pool unless it has a NUMA
// spec or holds exclusive CPUs (a Guaranteed pod given whole CPUs by the
// kubelet's static CPU manager, a pod accounted by a decision naming CPUs).
func usageOf(req *kube.PodRequest, exclCPUs, gpus int) usage {
	u := usage{exclCPUs: exclCPUs, gpus: gpus, memMiB: req.MemoryMiB}
	if !req.NUMA && exclCPUs == 0 {
		u.sharedMilli = req.MilliCPU
	}
	return u
}

// add adds (sign 1) or removes (sign -1) u to the totals.
func (t *totals) add(u usage, sign int) {
	t.exclCPUs += sign * u.exclCPUs
	t.gpusHeld += sign * u.gpus
	t.plainMilli += int64(sign) * u.sharedMilli
	t.memUsed += int64(sign) * u.memMiB
}

// poolMilli is the shared pool in thousandths of a CPU: the allocatable
// CPUs no allocation holds exclusively.
func (t *totals) poolMilli() int64 { return int64(t.allocCPUs-t.exclCPUs) * 1000 }

// memLeft is the memory no pod requests (meaningful when memCap > 0).
func (t *totals) memLeft() int64 { return t.memCap - t.memUsed }

// admit applies the cache's own rules to a pod that would take u of these
// totals, keeping a shared pool of at least minShared CPUs:
//   - the shared pool must hold u's shared CPU request on top of the
//     requests charged to it (short: shortCPU);
//   - every pod's memory request must fit in the machine's memory beside
//     the others' when the machine gives it (shortMemory);
//   - the GPUs and exclusive CPUs must be left (shortGPU, shortExcl);
//   - exclusive CPUs must leave the shared pool the whole CPUs of the
//     requests charged to it (sharedPlain) and at least minShared CPUs
//     (sharedMin, never when the machine is too small even empty).
//
// Every short total is reported (with neverShort where the machine itself
// falls short), as kube-scheduler lists every insufficient resource; the
// verdict's why is the shared pool's refusal, else short, else fits.
func (t *totals) admit(u usage, minShared int) (v verdict) {
	t.admitInto(&u, minShared, &v)
	return v
}

// admitInto is admit writing the verdict to v.
func (t *totals) admitInto(u *usage, minShared int, v *verdict) {
	*v = verdict{}
	if u.sharedMilli > 0 {
		if left := t.poolMilli() - t.plainMilli; u.sharedMilli > left {
			v.short |= shortCPU
			v.cpu = max(left, 0)
			if u.sharedMilli > int64(t.allocCPUs)*1000 {
				v.neverShort |= shortCPU
			}
		}
	}
	if t.memCap > 0 && u.memMiB > 0 && u.memMiB > t.memLeft() {
		v.short |= shortMemory
		v.mem = max(t.memLeft(), 0)
		if u.memMiB > t.memCap {
			v.neverShort |= shortMemory
		}
	}
	if u.gpus > t.gpuCap-t.gpusHeld {
		v.short |= shortGPU
		if u.gpus > t.gpuCap {
			v.neverShort |= shortGPU
		}
	}
	if u.exclCPUs > 0 {
		switch left := int64(t.allocCPUs-t.exclCPUs) - int64(u.exclCPUs); {
		case left < 0:
			v.short |= shortExcl
			if u.exclCPUs > t.allocCPUs {
				v.neverShort |= shortExcl
			}
		case left < ceilThousandths(t.plainMilli):
			v.why, v.have, v.need = sharedPlain, left, t.plainMilli
			return
		case left < int64(minShared):
			v.why, v.have, v.need = sharedMin, left, int64(minShared)
			v.never = t.allocCPUs-u.exclCPUs < minShared
			return
		}
	}
	if v.short != 0 {
		v.why = short
	}
}

// overcommit describes the totals that the pods already placed exceed (the
// shared pool, memory), after a machine change or pods bound by someone
// else; nil when none.
func (t *totals) overcommit() []string {
	var out []string
	if pool := t.poolMilli(); t.plainMilli > pool {
		out = append(out, fmt.Sprintf("the pods without a NUMA spec request %s CPUs, the shared pool has %s",
			milliString(t.plainMilli), milliString(max(pool, 0))))
	}
	if t.memCap > 0 && t.memLeft() < 0 {
		out = append(out, fmt.Sprintf("the pods request %d MiB of memory, the machine has %d MiB", t.memUsed, t.memCap))
	}
	return out
}

func ceilThousandths(milli int64) int64 { return (milli + 999) / 1000 }
