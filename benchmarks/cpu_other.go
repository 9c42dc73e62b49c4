//go:build !unix

package benchmarks

import "time"

// processCPU is unknown on this platform (CPU columns read 0).
func processCPU() time.Duration { return 0 }
