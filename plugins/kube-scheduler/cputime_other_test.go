//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package numaplace

import "time"

// processCPU is not available here: false.
func processCPU() (time.Duration, bool) { return 0, false }
