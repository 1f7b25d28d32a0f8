//go:build unix

package sampler

import (
	"syscall"
	"time"
)

// processCPU is the user+system CPU time of the process so far, or 0 when
// unknown.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
