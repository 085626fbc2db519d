//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package numaplace

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the process has used,
// and true; a benchmark reports it per op beside the wall clock, which on a
// loaded machine counts the waits for a CPU too.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
