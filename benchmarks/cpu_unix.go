//go:build unix

package benchmarks

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used so far, over every
// thread: goroutines that a step starts (zstd block encoders, scan workers) count too.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
