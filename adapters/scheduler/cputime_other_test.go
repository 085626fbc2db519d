//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package scheduler_test

import "time"

// processCPU is not available here: false.
func processCPU() (time.Duration, bool) { return 0, false }
